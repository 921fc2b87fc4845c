"""The daemon's protocol and policy, in process: frames, errors, snapshots, identities."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest
from daemon_support import MODULES

import juggle
from juggle import errors
from juggle.core.tenants import SignalKind
from juggle.daemon.policy import AccessPolicy, PeerCredentials
from juggle.daemon.protocol import (
    PROTOCOL_VERSION,
    FrameDecoder,
    InOut,
    ShmRef,
    error_from_wire,
    error_to_wire,
    frame,
    from_wire,
    pack,
    parse_request,
    to_wire,
    unpack,
)
from juggle.errors import (
    AccessDeniedError,
    BlockSizeError,
    DaemonUnavailableError,
    HardwareFaultError,
    JuggleError,
    PolicyError,
    ProtocolError,
    RemoteError,
    UnknownServiceError,
    WaitSignal,
)
from juggle.runtime.modules import ModuleSnapshot
from juggle.runtime.signals import TenantSignal, TenantSnapshot
from juggle.runtime.snapshots import (
    JuggleReport,
    RegionSnapshot,
    ServiceSnapshot,
    ServiceStatistics,
)

# -- frames -----------------------------------------------------------------------------------


def test_frames_round_trip_with_buffers() -> None:
    message = {
        "v": PROTOCOL_VERSION,
        "id": 3,
        "op": "call",
        "args": [InOut(b"abc"), ShmRef(2, 16, 64), b"k"],
    }
    data = frame(pack(message))
    assert struct.unpack(">I", data[:4])[0] == len(data) - 4
    decoder = FrameDecoder()
    assert decoder.feed(data[:5]) == []  # split anywhere: nothing until complete
    (payload,) = decoder.feed(data[5:])
    assert parse_request(payload) == message


def test_frame_decoder_refuses_oversized_and_empty_frames() -> None:
    with pytest.raises(ProtocolError, match="outside"):
        FrameDecoder(max_frame=100).feed(struct.pack(">I", 101))
    with pytest.raises(ProtocolError, match="outside"):
        FrameDecoder().feed(struct.pack(">I", 0))


@pytest.mark.parametrize(
    "payload",
    [
        msgpack.packb({"v": PROTOCOL_VERSION + 1, "id": 1, "op": "ping"}),
        msgpack.packb({"id": 1, "op": "ping"}),
        msgpack.packb([1, 2]),
        msgpack.packb({"v": PROTOCOL_VERSION, "id": -1, "op": "ping"}),
        msgpack.packb({"v": PROTOCOL_VERSION, "id": True, "op": "ping"}),
        msgpack.packb({"v": PROTOCOL_VERSION, "id": 0, "op": "ping"}),
        msgpack.packb({"v": PROTOCOL_VERSION, "id": 1}),
        msgpack.packb({"v": PROTOCOL_VERSION, "id": 1, "op": "x", 5: 1}),  # a key that is no string
        msgpack.packb(
            {"v": PROTOCOL_VERSION, "id": 1, "op": "x", "a": msgpack.ExtType(2, b"\x01")}
        ),
        msgpack.packb({"v": PROTOCOL_VERSION, "id": 1, "op": "x", "a": msgpack.ExtType(7, b"")}),
        b"\xc1",
        b"\x91" * 5000 + b"\xc0",
    ],
)
def test_malformed_requests_are_protocol_errors(payload: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_request(payload)


def test_values_that_cannot_travel_are_refused_or_stringified() -> None:
    with pytest.raises(TypeError):
        pack({"v": PROTOCOL_VERSION, "x": object()})
    assert unpack(pack({"v": PROTOCOL_VERSION, "id": 0, "x": object()}, lenient=True))[
        "x"
    ].startswith("<object")


# -- errors -----------------------------------------------------------------------------------

#: every error class of juggle, by name
ERROR_CLASSES = {
    name: obj
    for name, obj in vars(errors).items()
    if isinstance(obj, type) and issubclass(obj, JuggleError)
}


def test_errors_keep_their_class_message_and_attributes() -> None:
    again = error_from_wire(error_to_wire(BlockSizeError("size 7 is no multiple of 8", value=7)))
    assert type(again) is BlockSizeError and str(again) == "size 7 is no multiple of 8"
    assert again.value == 7 and again.method is None
    wait = error_from_wire(
        error_to_wire(WaitSignal("wait", tenant="bob", device="tdes", service_id=4))
    )
    assert type(wait) is WaitSignal and wait.service_id == 4
    assert (wait.tenant, wait.device, wait.region) == ("bob", "tdes", None)
    missing = error_from_wire(error_to_wire(UnknownServiceError("no service 9", service_id=9)))
    assert isinstance(missing, KeyError) and str(missing) == "no service 9"
    assert getattr(missing, "service_id", None) == 9
    denied = error_from_wire(error_to_wire(AccessDeniedError("no", uid=65534, operation="x")))
    assert type(denied) is AccessDeniedError and isinstance(denied, PermissionError)
    assert (denied.uid, denied.operation, denied.path) == (65534, "x", None)


@pytest.mark.parametrize("name", sorted(ERROR_CLASSES))
def test_every_error_class_crosses_the_wire_with_its_attributes(name: str) -> None:
    cls = ERROR_CLASSES[name]
    sample = {str: "prr1", int: 7, float: 2.5}
    given = {
        attr: sample[next(t for t in allowed if t is not type(None))]
        for attr, allowed in cls.attribute_types().items()
    }
    wire = error_to_wire(cls("what went wrong", **given))
    assert wire == [name, "what went wrong", given]
    again = error_from_wire(unpack(pack({"v": PROTOCOL_VERSION, "id": 0, "err": wire}))["err"])
    assert type(again) is cls and str(again) == "what went wrong"
    assert again.attributes() == given


def test_attributes_that_are_not_set_do_not_travel() -> None:
    wire = error_to_wire(HardwareFaultError("failed", region="prr0"))
    assert wire == ["HardwareFaultError", "failed", {"region": "prr0"}]
    again = error_from_wire(wire)
    assert isinstance(again, HardwareFaultError)
    assert (again.region, again.service_id) == ("prr0", None)


def test_unknown_and_foreign_errors_become_remote_errors() -> None:
    foreign = error_from_wire(error_to_wire(ZeroDivisionError("division by zero")))
    assert type(foreign) is RemoteError and foreign.remote_type == "ZeroDivisionError"
    unknown = error_from_wire(["NoSuchError", "boom", {}])
    assert type(unknown) is RemoteError and unknown.remote_type == "NoSuchError"
    assert type(error_from_wire(["Any", "not an exception", {}])) is RemoteError
    assert type(error_from_wire("garbage")) is ProtocolError
    assert issubclass(DaemonUnavailableError, ConnectionError)


@pytest.mark.parametrize(
    "data",
    [
        ["BlockSizeError", "m", None, {}],  # the four-item shape of old
        ["BlockSizeError", "m", {"subject": 7}],  # an attribute the class does not take
        ["BlockSizeError", "m", {"value": [7]}],  # a value of no attribute type
        ["UnknownServiceError", "m", {"service_id": "9"}],  # a str where an int belongs
        ["RemoteError", "m", {"remote_type": None}],
    ],
)
def test_malformed_errors_from_the_daemon_are_protocol_errors(data: list[Any]) -> None:
    error = error_from_wire(data)
    assert type(error) is ProtocolError and "malformed error from the daemon" in str(error)


# -- snapshots --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def framework() -> Any:
    fw = juggle.Framework("xupv2p")
    fw.add_tenant("alice", priority=1, model="aware")
    module = fw.install(MODULES / "tdes")
    module.start()
    yield fw, module
    fw.close()


def test_snapshots_round_trip(framework: Any) -> None:
    fw, module = framework
    (service,) = fw.services()
    sid = service.service_id
    proxy = fw.get_service("EncryptionService", consumer="alice")
    proxy.load_key(bytes(range(24)))
    proxy.encrypt(bytearray(16), 16)
    report = fw.juggle(to_hardware=sid)
    cases: list[tuple[type, Any]] = [
        (ServiceSnapshot, fw.services()[0]),
        (RegionSnapshot, fw.regions()[0]),
        (ServiceStatistics, fw.statistics(sid)),
        (JuggleReport, report),
        (TenantSnapshot, fw.tenants()[0]),
        (ModuleSnapshot, module.snapshot()),
        (TenantSignal, TenantSignal("alice", "tdes", sid, SignalKind.READY, 1.5, 3)),
    ]
    for cls, value in cases:
        travelled = unpack(
            pack({"v": PROTOCOL_VERSION, "id": 0, "x": to_wire(value)}), trusted=True
        )["x"]
        assert from_wire(cls, travelled) == value, cls
    fw.unget_service(proxy)


def test_snapshots_that_do_not_fit_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError):
        from_wire(RegionSnapshot, {"name": 3})
    with pytest.raises(ProtocolError):
        from_wire(ModuleSnapshot, [1, 2])


# -- policy -----------------------------------------------------------------------------------

POLICY = """
version = 1
admin_group = 10
socket_mode = "0660"

[[tenants]]
name = "alice"
uids = [1000]
priority = 2
services = "(algorithm=tdes)"
calls_per_s = 100

[[tenants]]
name = "rt"
groups = [20]
realtime = true
model = "aware"
"""


def test_policy_maps_uids_then_groups() -> None:
    policy = AccessPolicy.parse(POLICY, daemon_uid=0)
    assert policy.socket_mode == 0o660
    alice = policy.identify(PeerCredentials(1, 1000, 1000, (20,)))  # uid beats group
    assert alice is not None and alice.name == "alice" and alice.tenant and not alice.admin
    assert alice.services == "(algorithm=tdes)" and alice.calls_per_s == 100
    rt = policy.identify(PeerCredentials(1, 2000, 20))
    assert rt is not None and rt.name == "rt"
    admin = policy.identify(PeerCredentials(1, 3000, 3000, (10,)))  # admin group, no tenant
    assert admin is not None and admin.admin and not admin.tenant
    assert admin.name.startswith("admin:")
    assert policy.identify(PeerCredentials(1, 4000, 4000)) is None
    assert policy.identify(PeerCredentials(1, 0, 0)) is None  # the daemon's uid too


def test_without_policy_only_the_daemons_uid_connects() -> None:
    policy = AccessPolicy(None, daemon_uid=1234)
    me = policy.identify(PeerCredentials(1, 1234, 1234))
    assert me is not None and me.admin
    assert policy.identify(PeerCredentials(1, 1235, 1234)) is None
    assert policy.socket_mode == 0o600


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("version = 2", "version"),
        ("[[tenants]]\nname = 'a'\nuids = [1]\npriority = 3", "priority"),
        ("[[tenants]]\nname = 'a'\nuids = [1]\nrealtime = true\npriority = 1", "realtime"),
        ("[[tenants]]\nname = 'a b'\nuids = [1]", "name"),
        ("[[tenants]]\nname = 'a'", "no uids"),
        ("[[tenants]]\nname = 'a'\nuids = [1]\nservices = '(('", "services"),
        ("[[tenants]]\nname = 'a'\nuids = [1]\nmodel = 'x'", "model"),
        ("[[tenants]]\nname = 'a'\nuids = ['no-such-user-xyz']", "no user"),
        ("[[tenants]]\nname = 'a'\nuids = [1]\n[[tenants]]\nname = 'a'\nuids = [2]", "twice"),
        ("surprise = 1", "surprise"),
        ("not toml [", "not TOML"),
    ],
)
def test_bad_policies_are_refused(text: str, problem: str) -> None:
    with pytest.raises(PolicyError, match=problem):
        AccessPolicy.parse(text)


def test_policy_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        AccessPolicy.load(tmp_path / "missing.toml")
    assert issubclass(PolicyError, JuggleError)


def test_daemon_bench_quick_reports_its_figures() -> None:
    from juggle.daemon.bench import daemon_bench

    figures = daemon_bench(quick=True)
    assert set(figures) == {
        "daemon_call_us_p50",
        "daemon_tls_call_us_p50",
        "daemon_ping_us_p50",
        "daemon_socket_floor_us_p50",
        "daemon_transparency_64k",
        "daemon_transparency_64k_socket",
    }
    assert all(value > 0 for value in figures.values())
    assert figures["daemon_call_us_p50"] >= figures["daemon_ping_us_p50"] * 0.5


# -- protocol strictness (issue 19) ------------------------------------------------------------


@pytest.mark.parametrize("version", [True, 2.0, "2", 1, 3, None])
def test_version_must_be_the_protocol_versions_integer(version: Any) -> None:
    message = {"v": version, "id": 3, "op": "ping"}
    if version is None:
        del message["v"]
    for trusted in (False, True):
        with pytest.raises(ProtocolError, match="protocol version") as info:
            unpack(pack(message), trusted=trusted)
        assert repr(version)[:20] in str(info.value)
    with pytest.raises(ProtocolError, match="protocol version"):
        parse_request(pack(message))
    assert parse_request(pack({"v": PROTOCOL_VERSION, "id": 3, "op": "ping"}))["v"] == 2


@pytest.mark.parametrize(
    "message",
    [
        {"v": PROTOCOL_VERSION, "id": 3, "op": "ping", b"extra": 1},  # at the top
        {
            "v": PROTOCOL_VERSION,
            "id": 3,
            "op": "call",
            "h": 1,
            "m": "f",
            "kw": {b"key": 1},
        },  # nested
        {"v": PROTOCOL_VERSION, "id": 3, "op": "call", "h": 1, "m": "f", "args": [[{b"deep": 2}]]},
    ],
)
def test_binary_map_keys_are_refused_naming_the_key(message: dict[Any, Any]) -> None:
    payload = msgpack.packb(message, use_bin_type=True)
    with pytest.raises(ProtocolError, match="keys must be strings") as info:
        parse_request(payload)
    assert "b'" in str(info.value)
    assert isinstance(info.value.value, str) and info.value.value.startswith("b'")


def test_other_map_keys_are_refused_and_the_trusted_side_keeps_them() -> None:
    payload = msgpack.packb({"v": PROTOCOL_VERSION, "id": 3, "op": "ping", "m": {1: 2}})
    with pytest.raises(ProtocolError, match="map key"):
        parse_request(payload)
    assert unpack(payload, trusted=True)["m"] == {1: 2}
    binary = msgpack.packb({"v": PROTOCOL_VERSION, "id": 0, "ok": {b"k": 1}}, use_bin_type=True)
    assert unpack(binary, trusted=True)["ok"] == {b"k": 1}


def test_decoding_a_request_is_bounded_before_it_allocates() -> None:
    from juggle.daemon.protocol import MAX_ARRAY_LEN, MAX_MAP_LEN

    head = {"v": PROTOCOL_VERSION, "id": 3, "op": "ping"}
    # one container too long: refused at its header
    with pytest.raises(ProtocolError, match="max_array_len"):
        parse_request(pack({**head, "x": [0] * (MAX_ARRAY_LEN + 1)}))
    with pytest.raises(ProtocolError, match="max_map_len"):
        parse_request(pack({**head, "x": {str(i): 0 for i in range(MAX_MAP_LEN + 1)}}))
    # many containers within their bounds: refused once their elements pass the budget
    with pytest.raises(ProtocolError, match="too many elements"):
        parse_request(pack({**head, "x": [[{}] * MAX_ARRAY_LEN] * 600}))
    wide = {f"k{i}": 0 for i in range(MAX_MAP_LEN)}  # the elements in maps, not lists
    with pytest.raises(ProtocolError, match="too many elements"):
        parse_request(pack({**head, "x": [wide] * 200}))
    # a large frame of a few big values passes, and a small one with all containers allowed
    big = parse_request(pack({**head, "x": [b"\0" * (1 << 20)] * 4}))
    assert len(big["x"]) == 4
    small = parse_request(pack({**head, "x": [[1] * 64] * 64, "y": {"a": {"b": [{}]}}}))
    assert small["y"] == {"a": {"b": [{}]}}


def test_shared_memory_references_are_bounded() -> None:
    ok = msgpack.packb(
        {
            "v": PROTOCOL_VERSION,
            "id": 3,
            "op": "call",
            "args": [msgpack.ExtType(2, msgpack.packb([1, 0, 8]))],
        }
    )
    assert parse_request(ok)["args"] == [ShmRef(1, 0, 8)]
    maps = msgpack.packb([{}] * 100_000)  # a reference's body stuffed with maps
    bad = msgpack.packb(
        {"v": PROTOCOL_VERSION, "id": 3, "op": "call", "args": [msgpack.ExtType(2, maps)]}
    )
    with pytest.raises(ProtocolError, match="shared-memory reference"):
        parse_request(bad)
