"""The caller's mistakes are the caller's (issue 19, item 2).

A proxy checks every call against the interface method's signature before it dispatches: an
unknown keyword, a missing or a surplus argument raises
:class:`~juggle.errors.ServiceArgumentError` naming the method, the argument and its value. Such
a call never reaches an implementation (a spy co-module records every call that does), so on the
hardware tier it is no fault: the region stays PROGRAMMED, no fault is logged or counted, and the
next correct call is served by the hardware. The same holds on every tier, and on both the
compiled and the pure-Python call paths.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sharing_support import KEYS, MODULES, tdes_reference

import juggle
from juggle.errors import ModuleCodeError, ServiceArgumentError
from juggle.runtime import _pydispatch, proxy, tracing
from juggle.runtime.interfaces import Arguments, state_setting
from juggle.runtime.proxy import build_proxy

ROOT = Path(__file__).resolve().parents[2]
PLAIN = b"sixteen bytes!!!"

SPY_CALLS = '''
"""Every call the spy co-module's implementations and driver receive: (tier, method)."""
CALLS = []
'''

SPY_MODULE = '''
"""The tdes co-module, with every interface call its tiers receive recorded in spy_calls."""
from juggle.services.crypto import NativeTDES, SoftwareTDES, TdesDriver
from juggle.services.crypto.model import TdesCore
import spy_calls


def spied(base, tier):
    class Spied(base):
        def load_key(self, *args, **kwargs):
            spy_calls.CALLS.append((tier, "load_key"))
            return super().load_key(*args, **kwargs)

        def encrypt(self, *args, **kwargs):
            spy_calls.CALLS.append((tier, "encrypt"))
            return super().encrypt(*args, **kwargs)

        def decrypt(self, *args, **kwargs):
            spy_calls.CALLS.append((tier, "decrypt"))
            return super().decrypt(*args, **kwargs)

    Spied.__name__ = Spied.__qualname__ = "Spied" + base.__name__
    return Spied


SpySoftware = spied(SoftwareTDES, "software")
SpyNative = spied(NativeTDES, "native")
SpyDriver = spied(TdesDriver, "hardware")
'''


@pytest.fixture(scope="module")
def spy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[tuple[str, str]]]]:
    """A tdes co-module whose software, native and driver classes record each call they get,
    and the list they record into."""
    root = tmp_path_factory.mktemp("spy")
    lib = root / "lib"
    lib.mkdir()
    (lib / "spy_calls.py").write_text(SPY_CALLS)
    sys.path.insert(0, str(lib))
    importlib.invalidate_caches()
    calls = importlib.import_module("spy_calls").CALLS
    folder = root / "spy"
    shutil.copytree(MODULES / "tdes" / "bitstreams", folder / "bitstreams")
    (folder / "spy_module.py").write_text(SPY_MODULE)
    toml = (MODULES / "tdes" / "juggle.toml").read_text()
    toml = toml.replace('name = "tdes"', 'name = "spy"').replace("tdes_module.", "spy_module.")
    toml = toml.replace("spy_module.SoftwareTDES", "spy_module.SpySoftware")
    toml = toml.replace("spy_module.NativeTDES", "spy_module.SpyNative")
    toml = toml.replace("spy_module.TdesDriver", "spy_module.SpyDriver")
    (folder / "juggle.toml").write_text(toml)
    yield folder, calls
    sys.path.remove(str(lib))
    sys.modules.pop("spy_calls", None)


#: where the service serves from: (tier, Framework hardware kind)
TIERS = {
    "software": ("software", "model"),
    "native": ("native", "model"),
    "hardware-model": ("hardware", "model"),
    "hardware-rtl": ("hardware", "rtl"),
}

#: a caller's mistake, the words its error must hold (method, argument, value), and the call
MISTAKES: dict[str, tuple[tuple[str, ...], Callable[[Any, bytearray], object]]] = {
    "unknown keyword": (
        ("EncryptionService.encrypt()", "unexpected keyword argument 'sizee'", "(=8)"),
        lambda p, buf: p.encrypt(buf, sizee=8),
    ),
    "missing argument": (
        ("EncryptionService.encrypt()", "missing argument 'size'"),
        lambda p, buf: p.encrypt(buf),
    ),
    "extra positional": (
        ("EncryptionService.encrypt()", "takes 2 arguments, 3 given", "the 3rd is 8"),
        lambda p, buf: p.encrypt(buf, 8, 8),
    ),
    "extra keyword on load_key": (
        ("EncryptionService.load_key()", "unexpected keyword argument 'extra'", "(=1)"),
        lambda p, buf: p.load_key(KEYS[1], extra=1),
    ),
}


def _framework(kind: str) -> juggle.Framework:
    if kind == "rtl":
        sys.path.insert(0, str(ROOT / "tests" / "fabric"))
        try:
            from rtl_support import built
        finally:
            sys.path.remove(str(ROOT / "tests" / "fabric"))
        built()  # skips, naming why, where the RTL simulators cannot be built
    return juggle.Framework("xupv2p", hardware=kind, verify_sample=0)


def _encrypt(p: Any) -> bytes:
    buf = bytearray(PLAIN)
    assert p.encrypt(buf, len(buf)) == len(buf)
    return bytes(buf)


def _hardware_state(fw: juggle.Framework, sid: int) -> tuple[Any, ...]:
    """Region states, the service's tier and region, and every fault counter."""
    stats = fw.statistics(sid)
    (service,) = [s for s in fw.services() if s.service_id == sid]
    return (
        tuple((r.name, r.state, r.service_id) for r in fw.regions()),
        service.tier,
        service.region,
        tuple(fw.faults),
        stats.fallbacks,
        stats.mismatches,
    )


@pytest.mark.parametrize("mistake", list(MISTAKES))
@pytest.mark.parametrize("where", list(TIERS))
def test_a_callers_mistake_is_a_service_argument_error_that_reaches_nothing(
    spy: tuple[Path, list[tuple[str, str]]], where: str, mistake: str
) -> None:
    folder, calls = spy
    tier, kind = TIERS[where]
    words, call = MISTAKES[mistake]
    fw = _framework(kind)
    try:
        fw.install(folder).start()
        p = fw.get_service("EncryptionService", consumer="app")
        sid = p.service_id
        p.load_key(KEYS[0])
        if tier == "hardware":
            fw.juggle(to_hardware=sid)
        else:
            fw.set_tier(sid, tier)
        assert _encrypt(p) == tdes_reference(KEYS[0], PLAIN)
        before = _hardware_state(fw, sid)
        assert before[1] == tier
        if tier == "hardware":
            assert ("prr0", "PROGRAMMED", sid) in before[0]
        calls.clear()
        buf = bytearray(PLAIN)

        with pytest.raises(ServiceArgumentError) as caught:
            call(p, buf)

        assert not isinstance(caught.value, ModuleCodeError)
        for word in words:
            assert word in str(caught.value), (word, str(caught.value))
        assert calls == []  # no implementation, no driver, no software twin saw the call
        assert buf == PLAIN  # nothing touched the caller's buffer
        assert _hardware_state(fw, sid) == before  # region, tier, faults, fallbacks unchanged
        # the next correct call is served, from the same tier, with the key loaded before
        assert _encrypt(p) == tdes_reference(KEYS[0], PLAIN)
        assert calls == [(tier, "encrypt")]
        assert _hardware_state(fw, sid) == before
        if kind == "rtl":  # the hardware calls ran in the core's Verilog
            assert getattr(fw.fabric.window("prr0"), "rtl_cycles", 0) > 0
    finally:
        fw.close()


def test_a_rejected_state_setting_call_is_not_recorded(
    spy: tuple[Path, list[tuple[str, str]]],
) -> None:
    """A ``load_key`` the proxy refused is no state: a juggle afterwards carries the key
    loaded before it, and the hardware serves that key."""
    folder, calls = spy
    with juggle.Framework("xupv2p", verify_sample=0) as fw:
        fw.install(folder).start()
        p = fw.get_service("EncryptionService", consumer="app")
        p.load_key(KEYS[2])
        with pytest.raises(ServiceArgumentError, match="'extra'"):
            p.load_key(KEYS[3], extra=1)
        with pytest.raises(ServiceArgumentError, match="missing argument 'key'"):
            p.load_key()
        calls.clear()
        fw.juggle(to_hardware=p.service_id)
        assert _encrypt(p) == tdes_reference(KEYS[2], PLAIN)
        assert ("hardware", "load_key") in calls and ("hardware", "encrypt") in calls
        assert not fw.faults


# -- the check itself, on the compiled and the pure-Python call path --------------------------


class Shapes:
    """An interface with every kind of parameter."""

    @state_setting
    def setup(self, key: bytes) -> None: ...

    def scaled(self, x: int, *, scale: int = 1) -> int: ...

    def needs_kw(self, a: int, b: int = 2, *, c: int) -> tuple[int, int, int]: ...

    def pos_only(self, x: int, /, y: int) -> tuple[int, int]: ...

    def anything(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]: ...

    def nothing(self) -> None: ...


class ShapesImpl:
    """Accepts more than the interface, so only the proxy's check can refuse a call."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def setup(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("setup")

    def scaled(self, x: int, *, scale: int = 1, **extra: Any) -> int:
        self.calls.append("scaled")
        return x * scale

    def needs_kw(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        self.calls.append("needs_kw")
        return (args, kwargs)

    def pos_only(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        self.calls.append("pos_only")
        return (args, kwargs)

    def anything(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        self.calls.append("anything")
        return (args, kwargs)

    def nothing(self, *args: Any) -> None:
        self.calls.append("nothing")


@pytest.fixture(params=["compiled", "python"])
def flavour(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "compiled":
        if not tracing.COMPILED:
            pytest.fail("the compiled dispatch path did not build")
    else:
        monkeypatch.setattr(proxy, "dispatch", _pydispatch)
    return str(request.param)


GOOD: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("setup", (b"k",), {}),
    ("setup", (), {"key": b"k"}),
    ("scaled", (2,), {}),
    ("scaled", (2,), {"scale": 3}),
    ("scaled", (), {"x": 2, "scale": 3}),
    ("needs_kw", (1,), {"c": 3}),
    ("needs_kw", (1, 2), {"c": 3}),
    ("needs_kw", (), {"a": 1, "c": 3}),
    ("pos_only", (1, 2), {}),
    ("pos_only", (1,), {"y": 2}),
    ("anything", (), {}),
    ("anything", (1, 2, 3), {"x": 1, "whatever": 2}),
    ("nothing", (), {}),
]

#: (method, args, kwargs, words the message holds, the error's (method, argument))
BAD: list[tuple[str, tuple[Any, ...], dict[str, Any], tuple[str, ...], tuple[str, Any]]] = [
    ("setup", (), {}, ("Shapes.setup()", "missing argument 'key'"), ("Shapes.setup", "key")),
    ("setup", (b"k", 1), {}, ("takes 1 argument, 2 given", "the 2nd is 1"), ("Shapes.setup", 2)),
    (
        "setup",
        (b"k",),
        {"key": b"j"},
        ("multiple values for argument 'key'",),
        ("Shapes.setup", "key"),
    ),
    (
        "scaled",
        (2,),
        {"scal": 3},
        ("unexpected keyword argument 'scal' (=3)",),
        ("Shapes.scaled", "scal"),
    ),
    (
        "scaled",
        (2,),
        {"extra": 1},
        ("unexpected keyword argument 'extra'",),
        ("Shapes.scaled", "extra"),
    ),
    ("scaled", (2, 3), {}, ("takes 1 argument, 2 given",), ("Shapes.scaled", 2)),
    ("scaled", (), {"scale": 3}, ("missing argument 'x'",), ("Shapes.scaled", "x")),
    ("needs_kw", (1,), {}, ("missing argument 'c'",), ("Shapes.needs_kw", "c")),
    ("needs_kw", (1, 2), {}, ("missing argument 'c'",), ("Shapes.needs_kw", "c")),
    ("needs_kw", (1, 2, 3), {}, ("takes 1 to 2 arguments, 3 given",), ("Shapes.needs_kw", 3)),
    ("needs_kw", (), {"b": 2, "c": 3}, ("missing argument 'a'",), ("Shapes.needs_kw", "a")),
    (
        "pos_only",
        (),
        {"x": 1, "y": 2},
        ("positional-only argument 'x' as a keyword",),
        ("Shapes.pos_only", "x"),
    ),
    ("pos_only", (1,), {}, ("missing argument 'y'",), ("Shapes.pos_only", "y")),
    ("nothing", (1,), {}, ("takes 0 arguments, 1 given",), ("Shapes.nothing", 1)),
    ("nothing", (), {"x": 1}, ("unexpected keyword argument 'x'",), ("Shapes.nothing", "x")),
]


def test_calls_that_fit_the_signature_pass_and_others_are_refused(flavour: str) -> None:
    impl = ShapesImpl()
    p = build_proxy(Shapes, "test.Shapes", 1, "app", impl, "software")
    for name, args, kwargs in GOOD:
        getattr(p, name)(*args, **kwargs)
    assert impl.calls == [name for name, _, _ in GOOD]
    impl.calls.clear()
    counted = proxy.binding_of(p).dispatcher.slot.stats()
    for name, args, kwargs, words, about in BAD:
        with pytest.raises(ServiceArgumentError) as caught:
            getattr(p, name)(*args, **kwargs)
        for word in words:
            assert word in str(caught.value), (name, args, kwargs, str(caught.value))
        assert (caught.value.method, caught.value.argument) == about
    assert impl.calls == []
    assert proxy.binding_of(p).dispatcher.slot.stats() == counted  # refused calls are not counted
    assert p.scaled(2, scale=3) == 6  # and the proxy serves on


def test_a_big_value_is_quoted_short(flavour: str) -> None:
    p = build_proxy(Shapes, "test.Shapes", 1, "app", ShapesImpl(), "software")
    with pytest.raises(ServiceArgumentError) as caught:
        p.scaled(1, junk=bytearray(1 << 20))
    assert len(str(caught.value)) < 200


def test_keyword_names_built_at_run_time_are_matched_by_value(flavour: str) -> None:
    """Keyword names that are not the interned identifiers (a daemon decodes them off the wire)
    are accepted: names are matched by value, not only by identity."""
    p = build_proxy(Shapes, "test.Shapes", 1, "app", ShapesImpl(), "software")
    name = "".join(["sc", "ale"])
    assert p.scaled(**{"".join(["x"]): 2, name: 3}) == 6


def test_a_signature_of_more_than_64_parameters_is_checked_too(flavour: str) -> None:
    names = [f"p{i}" for i in range(70)]
    namespace: dict[str, Any] = {}
    exec(f"def wide(self, {', '.join(names)}, *, last=0): ...", namespace)
    wide_interface = type("Wide", (), {"wide": namespace["wide"]})

    class WideImpl:
        def wide(self, *args: Any, **kwargs: Any) -> int:
            return len(args) + len(kwargs)

    p = build_proxy(wide_interface, "test.Wide", 1, "app", WideImpl(), "software")
    assert p.wide(*range(70)) == 70
    assert p.wide(*range(69), p69=1, last=1) == 71
    with pytest.raises(ServiceArgumentError, match="missing argument 'p69'"):
        p.wide(*range(69), last=1)
    with pytest.raises(ServiceArgumentError, match="unexpected keyword argument 'lost'"):
        p.wide(*range(70), lost=1)


def test_arguments_of_an_interface_method() -> None:
    spec = Arguments.of(Shapes.needs_kw)
    assert spec.params == ("a", "b", "c")
    assert (spec.positional, spec.positional_only) == (2, 0)
    assert spec.required == (True, False, True)
    assert (spec.min_positional, spec.max_positional) == (-1, 2)
    assert spec.describe() == "it takes a, b=..., *, c"
    anything = Arguments.of(Shapes.anything)
    assert (anything.min_positional, anything.max_positional) == (0, -1)
    assert anything.mismatch("Shapes.anything", (1, 2), {"z": 3}) is None
    assert Arguments.of(Shapes.pos_only).describe() == "it takes x, /, y"
