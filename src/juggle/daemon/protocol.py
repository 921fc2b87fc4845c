"""The daemon's wire protocol: length-prefixed msgpack frames, versioned, with request ids.

A frame is a 4-byte big-endian payload length followed by the payload, a msgpack map. Every
map carries the protocol version ``v``. The daemon speaks first::

    daemon → client  {"v": 2, "id": 0, "hello": {...identity...}}       (or "err": refused)
    client → daemon  {"v": 2, "id": 7, "op": "call", "h": 3, "m": "encrypt", "args": [...]}
    daemon → client  {"v": 2, "id": 7, "ok": 16, "out": [[0, b"..."]]}
    daemon → client  {"v": 2, "id": 7, "err": ["KeyNotLoadedError", "message", {}]}
    daemon → client  {"v": 2, "id": 0, "push": "signal", "sig": {...}}

Requests are answered in any order (each by its ``id``); id 0 is the daemon's own (hello,
pushes, the error frame sent before closing a connection). Two msgpack extension types carry
buffers: :class:`InOut` (a writable buffer travelling inline; the reply's ``out`` gives its new
contents) and :class:`ShmRef` (a range of a shared-memory segment the daemon created and
passed to the client with ``SCM_RIGHTS``; written in place, nothing travels back).

Snapshots (the frozen dataclasses :mod:`juggle.runtime` names) travel as
maps of their fields and are rebuilt from the dataclass' type hints by :func:`from_wire`.
Errors travel as ``[class name, message, attributes]`` (the error's typed attributes, a map)
and are rebuilt by :func:`error_from_wire` as the juggle error class of that name with the
same attributes.
"""

from __future__ import annotations

import asyncio
import struct
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, TypeVar

import msgpack

from juggle import errors as juggle_errors
from juggle.errors import JuggleError, ProtocolError, RemoteError
from juggle.fabric.resources import Resources

__all__ = [
    "DEFAULT_MAX_FRAME",
    "HEADER",
    "MAX_ARRAY_LEN",
    "MAX_MAP_LEN",
    "PROTOCOL_VERSION",
    "FrameDecoder",
    "InOut",
    "ShmRef",
    "error_from_wire",
    "error_to_wire",
    "frame",
    "from_wire",
    "pack",
    "parse_request",
    "read_frame",
    "to_wire",
    "unpack",
]

#: Version of this protocol; a frame of another version closes the connection. 2: an error
#: travels as ``[class, message, {attribute: value}]`` (its typed attributes), no longer as
#: ``[class, message, subject, extra]``.
PROTOCOL_VERSION = 2
#: The frame header: payload length, 4 bytes, big-endian.
HEADER = struct.Struct(">I")
#: Largest payload accepted by default (bytes); buffers larger than a few KiB travel through
#: shared memory, so frames stay small.
DEFAULT_MAX_FRAME = 8 << 20
#: msgpack extension codes
EXT_INOUT = 1
EXT_SHM = 2
_MAX_ID = (1 << 63) - 1
#: Bounds on decoding a request (the daemon reading a client): elements of one array, pairs
#: of one map (msgpack allocates a container's declared size before its elements come, up to
#: ~1000 containers deep, so these bound that too), and, for a payload over
#: ``_COUNTED_ABOVE`` bytes, the elements of all containers together: one per 32 bytes of
#: payload, at least ``_MIN_ELEMENTS`` (an element costs up to ~70 bytes once decoded, so an
#: 8 MiB frame of empty maps decodes into ~18 MiB at most, not ~570 MiB).
MAX_ARRAY_LEN = 1024
MAX_MAP_LEN = 256
_COUNTED_ABOVE = 1 << 16
_MIN_ELEMENTS = 1 << 16
#: Largest msgpack body of a shared-memory reference (three 64-bit ints).
_MAX_SHM_REF = 32
_SIMPLE = (type(None), bool, int, float, str, bytes)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class InOut:
    """A writable buffer argument carried inline: the daemon calls with a ``bytearray`` of
    ``data`` and sends its contents back, which the client writes into the caller's buffer."""

    data: bytes


@dataclass(frozen=True, slots=True)
class ShmRef:
    """``length`` bytes at ``offset`` of shared-memory segment ``segment`` (of the
    connection): the daemon calls with a memoryview of that range, written in place."""

    segment: int
    offset: int
    length: int


def _default(obj: object) -> Any:
    if isinstance(obj, InOut):
        return msgpack.ExtType(EXT_INOUT, obj.data)
    if isinstance(obj, ShmRef):
        return msgpack.ExtType(EXT_SHM, msgpack.packb([obj.segment, obj.offset, obj.length]))
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    if isinstance(obj, tuple | set | frozenset):
        return list(obj)
    raise TypeError(f"a {type(obj).__name__} cannot travel to or from the daemon")


def _lenient(obj: object) -> Any:
    try:
        return _default(obj)
    except TypeError:
        return str(obj)


def _ext_hook(code: int, data: bytes) -> object:
    if code == EXT_INOUT:
        return InOut(bytes(data))
    if code == EXT_SHM:
        if len(data) > _MAX_SHM_REF:
            raise ValueError(f"shared-memory reference of {len(data)} bytes")
        parts = msgpack.unpackb(data, max_array_len=3, max_map_len=0)
        if (
            not isinstance(parts, list)
            or len(parts) != 3
            or not all(type(p) is int and 0 <= p <= _MAX_ID for p in parts)
        ):
            raise ValueError("malformed shared-memory reference")
        return ShmRef(*parts)
    raise ValueError(f"unknown msgpack extension type {code}")


def pack(message: Mapping[str, Any], *, lenient: bool = False) -> bytes:
    """The payload of ``message`` (msgpack). Raises :class:`TypeError` for a value that
    cannot travel; ``lenient`` sends such values as their ``str()`` instead."""
    data: bytes = msgpack.packb(
        message, default=_lenient if lenient else _default, use_bin_type=True
    )
    return data


def frame(payload: bytes) -> bytes:
    """``payload`` with its length header."""
    return HEADER.pack(len(payload)) + payload


def _string_keys(value: dict[Any, Any]) -> dict[Any, Any]:
    """``value``, a decoded map, once every key is found to be a string."""
    for key in value:
        if type(key) is not str:
            raise ProtocolError(
                f"map key {key!r:.40} is a {type(key).__name__}; keys must be strings",
                value=key if isinstance(key, int) else repr(key)[:60],
            )
    return value


class _Checks:
    """The hooks that check a request while msgpack decodes it: every map key a string
    (msgpack's ``strict_map_key`` admits bytes too) and, when ``budget`` is given, the
    elements of all containers together at most ``budget`` (each container is counted as soon
    as it is complete, so decoding stops within one container of the bound)."""

    __slots__ = ("left",)

    def __init__(self, budget: int) -> None:
        self.left = budget

    def counted_map(self, value: dict[Any, Any]) -> dict[Any, Any]:
        self.left -= 2 * len(value)
        if self.left < 0:
            self._over()
        return _string_keys(value)

    def counted_list(self, value: list[Any]) -> list[Any]:
        self.left -= len(value)
        if self.left < 0:
            self._over()
        return value

    @staticmethod
    def _over() -> None:
        raise ProtocolError("a frame holds too many elements for its size")


#: msgpack's bounds on a large request (:func:`unpack` spells them out for a small one)
_BOUNDS: dict[str, Any] = {
    "raw": False,
    "ext_hook": _ext_hook,
    "strict_map_key": True,
    "use_list": True,
    "max_array_len": MAX_ARRAY_LEN,
    "max_map_len": MAX_MAP_LEN,
}


def _decode_large(payload: bytes) -> Any:
    """A client's payload over ``_COUNTED_ABOVE`` bytes, decoded with an element budget for
    its size besides the container bounds, and string map keys only."""
    checks = _Checks(max(_MIN_ELEMENTS, len(payload) // 32))
    return msgpack.unpackb(
        payload, object_hook=checks.counted_map, list_hook=checks.counted_list, **_BOUNDS
    )


def unpack(payload: bytes, *, trusted: bool = False) -> dict[str, Any]:
    """The message map of ``payload``, its version checked.

    Untrusted (the daemon reading a client): map keys must be strings, and decoding is bounded
    before it allocates (``MAX_ARRAY_LEN``, ``MAX_MAP_LEN``, and an element budget for large
    payloads). ``trusted`` (the client reading the daemon) admits other map keys and sizes.
    ``v`` must be the integer 1 either way (not ``True``, not ``1.0``). Raises
    :class:`ProtocolError` for anything but a map of this protocol version.
    """
    try:
        if trusted:
            message = msgpack.unpackb(
                payload, raw=False, ext_hook=_ext_hook, strict_map_key=False, use_list=True
            )
        elif len(payload) <= _COUNTED_ABOVE:  # the usual request: no dict of keywords per call
            message = msgpack.unpackb(
                payload,
                raw=False,
                ext_hook=_ext_hook,
                strict_map_key=True,
                use_list=True,
                object_hook=_string_keys,
                max_array_len=MAX_ARRAY_LEN,
                max_map_len=MAX_MAP_LEN,
            )
        else:
            message = _decode_large(payload)
    except ProtocolError:
        raise
    except Exception as exc:  # msgpack raises several types for garbage
        raise ProtocolError(f"malformed frame: {type(exc).__name__}: {exc}"[:200]) from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a frame must hold a map, got {type(message).__name__}")
    version = message.get("v")
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"protocol version {version!r:.20} ({type(version).__name__}) is not supported "
            f"(this side speaks the integer {PROTOCOL_VERSION})",
            value=version if isinstance(version, int | float | str) else None,
        )
    request_id = message.get("id")
    if type(request_id) is not int or not 0 <= request_id <= _MAX_ID:
        raise ProtocolError(f'"id" must be an int in 0..2**63-1, got {request_id!r:.40}')
    return message


def parse_request(payload: bytes) -> dict[str, Any]:
    """A client's request: :func:`unpack` (untrusted), plus an id > 0 and an operation name.
    Raises :class:`ProtocolError`."""
    message = unpack(payload)
    if message["id"] == 0:
        raise ProtocolError('request "id" 0 is reserved for the daemon')
    op = message.get("op")
    if not isinstance(op, str) or not op:
        raise ProtocolError(f'a request needs an "op" string, got {op!r:.40}')
    return message


async def read_frame(
    reader: asyncio.StreamReader, max_frame: int, body_timeout: float = 30.0
) -> bytes | None:
    """The next payload from ``reader``; None at a clean end of stream (between frames).

    A connection may idle between frames, but once a header has come the payload must follow
    within ``body_timeout`` seconds. Raises :class:`ProtocolError` for a zero or oversized
    length, a truncated frame or one whose payload does not come in time.
    """
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise ProtocolError("connection closed inside a frame header") from None
    (length,) = HEADER.unpack(header)
    if length == 0 or length > max_frame:
        raise ProtocolError(f"frame length {length} outside 1..{max_frame}", value=length)
    try:
        async with asyncio.timeout(body_timeout):
            return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise ProtocolError(f"connection closed inside a frame of {length} bytes") from None
    except TimeoutError:
        raise ProtocolError(
            f"the payload of a frame of {length} bytes did not come within {body_timeout} s"
        ) from None


class FrameDecoder:
    """Splits a byte stream into payloads (the client's blocking reader side)."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; every payload now complete, in order. Raises :class:`ProtocolError`
        for a zero or oversized length."""
        if not self._buf and len(data) > HEADER.size:  # the usual case: one whole frame
            (length,) = HEADER.unpack_from(data)
            if len(data) == HEADER.size + length and length <= self.max_frame:
                return [data[HEADER.size :]]
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= HEADER.size:
            (length,) = HEADER.unpack_from(self._buf)
            if length == 0 or length > self.max_frame:
                raise ProtocolError(f"frame length {length} outside 1..{self.max_frame}")
            end = HEADER.size + length
            if len(self._buf) < end:
                break
            out.append(bytes(self._buf[HEADER.size : end]))
            del self._buf[:end]
        return out


# -- errors ----------------------------------------------------------------------------------


def error_to_wire(exc: BaseException) -> list[Any]:
    """``[class name, message, attributes]`` of ``exc``: the typed attributes of a
    :class:`~juggle.errors.JuggleError` (those that are set, each of its declared type); an
    exception that is not a juggle error travels as :class:`RemoteError`."""
    if not isinstance(exc, JuggleError):
        kind = type(exc).__name__
        return ["RemoteError", f"{kind}: {exc}", {"remote_type": kind}]
    allowed = exc.attribute_types()
    attributes = {
        name: value
        for name, value in exc.attributes().items()
        if value is not None and isinstance(value, allowed[name])
    }
    return [type(exc).__name__, str(exc), attributes]


def _error_class(name: str) -> type[JuggleError] | None:
    found = vars(juggle_errors).get(name)
    if isinstance(found, type) and issubclass(found, JuggleError):
        return found
    return None


def error_from_wire(data: object) -> JuggleError:
    """The juggle error ``data`` (from :func:`error_to_wire`) describes: the class of that
    name in :mod:`juggle.errors` with the same message and attributes; :class:`RemoteError`
    for a name it does not know, :class:`ProtocolError` for malformed data (an attribute the
    class does not take, or a value not of its type)."""
    if (
        not isinstance(data, list)
        or len(data) != 3
        or not isinstance(data[0], str)
        or not isinstance(data[2], dict)
    ):
        return ProtocolError(f"malformed error from the daemon: {data!r:.200}")
    name, message, attributes = data
    message = str(message)
    cls = _error_class(name)
    if cls is None:
        return RemoteError(f"{name}: {message}", remote_type=name)
    allowed = cls.attribute_types()
    for key, value in attributes.items():
        if key not in allowed or not isinstance(value, allowed[key]):
            return ProtocolError(
                f"malformed error from the daemon: {name} has no attribute {key!r:.40} "
                f"holding a {type(value).__name__}"
            )
    build: Callable[..., JuggleError] = cls
    return build(message, **attributes)


# -- snapshots -------------------------------------------------------------------------------


def to_wire(obj: Any) -> Any:
    """Plain data for ``obj``: dataclasses as maps of their fields, mappings as maps,
    sequences as lists; anything else that cannot travel as its ``str()``."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_wire(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, Resources):  # its family's kinds and counts, and the family
        return {**obj.as_dict(), "family": obj.family}
    if isinstance(obj, Mapping):
        return {to_wire(k): to_wire(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_wire(v) for v in obj]
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    if isinstance(obj, _SIMPLE):
        return obj
    return str(obj)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def from_wire(tp: type[T], value: Any) -> T:
    """Rebuild a value of type ``tp`` (a dataclass, a tuple, mapping, union or plain type)
    from :func:`to_wire`'s data. Raises :class:`ProtocolError` when the data does not fit."""
    try:
        return typing.cast(T, _build(tp, value))
    except ProtocolError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        name = getattr(tp, "__name__", str(tp))
        raise ProtocolError(f"malformed {name} from the daemon: {exc}") from None


def _build(tp: Any, value: Any) -> Any:
    if tp is Any or tp is object:
        return value
    if tp is Resources:
        if not isinstance(value, dict):
            raise ProtocolError(f"Resources must travel as a map, got {type(value).__name__}")
        counts = dict(value)
        family = counts.pop("family", None)
        try:
            return Resources.of(counts, family if isinstance(family, str) else None)
        except JuggleError as exc:
            raise ProtocolError(f"resources {value!r:.80} do not parse: {exc}") from None
    if isinstance(tp, type) and is_dataclass(tp):
        if not isinstance(value, dict):
            raise ProtocolError(f"{tp.__name__} must travel as a map")
        hints = _hints(tp)
        kwargs = {
            f.name: _build(hints[f.name], value[f.name]) for f in fields(tp) if f.name in value
        }
        return tp(**kwargs)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _build(arg, value)
            except (ProtocolError, TypeError, ValueError, KeyError):
                continue
        raise ProtocolError(f"{value!r:.60} fits none of {tp}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ProtocolError(f"expected a list for {tp}, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v) for v in value)
        return tuple(_build(a, v) for a, v in zip(args, value, strict=True))
    if origin in (Mapping, dict, typing.Mapping) or (
        isinstance(origin, type) and issubclass(origin, Mapping)
    ):
        if not isinstance(value, dict):
            raise ProtocolError(f"expected a map for {tp}, got {type(value).__name__}")
        key_t, val_t = args if args else (Any, Any)
        return {_build(key_t, k): _build(val_t, v) for k, v in value.items()}
    if origin is list:
        return [_build(args[0] if args else Any, v) for v in value]
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProtocolError(f"expected a number, got {value!r:.40}")
        return float(value)
    if tp in (int, str, bool, bytes):
        if type(value) is not tp:
            raise ProtocolError(f"expected {tp.__name__}, got {type(value).__name__}")
        return value
    return value
