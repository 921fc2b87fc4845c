"""The manager and bridge wrappers over fakes that count calls; the package's exports."""

from __future__ import annotations

import importlib

import pytest
from fabric_support import PART

from juggle.errors import BridgeError, ProgrammingError
from juggle.fabric import (
    Bitstream,
    Bridge,
    FpgaManager,
    ManagerState,
    build_bitstream,
    parse_bitstream,
)


class CountingOps:
    """ManagerOps that count calls and can fail in one named step."""

    def __init__(self, fail_in: str | None = None) -> None:
        self.fail_in = fail_in
        self.calls = {"write_init": 0, "write": 0, "write_complete": 0}
        self.received = bytearray()

    def _enter(self, step: str) -> None:
        self.calls[step] += 1
        if step == self.fail_in:
            raise OSError(5, f"{step} broke")

    def write_init(self, bitstream: Bitstream) -> None:
        self._enter("write_init")

    def write(self, chunk: bytes) -> None:
        self._enter("write")
        self.received += chunk

    def write_complete(self) -> None:
        self._enter("write_complete")


class StatefulOps(CountingOps):
    """CountingOps with the optional ``state`` operation."""

    def state(self) -> str:
        return "operating" if self.calls["write_complete"] else "write init"


def _file(size: int = 10_000) -> tuple[Bitstream, bytes]:
    data = build_bitstream("tdes", PART, "prr0", size)
    return parse_bitstream(data), data


def test_manager_writes_the_whole_file_in_chunks() -> None:
    ops = StatefulOps()
    manager = FpgaManager(ops, chunk_bytes=4096)
    assert manager.statistics().state == "UNKNOWN"
    bs, data = _file()
    manager.load(bs, data)
    assert ops.calls == {"write_init": 1, "write": 3, "write_complete": 1}
    assert bytes(ops.received) == data
    assert manager.state is ManagerState.OPERATING
    assert manager.device_state() == "operating"
    stats = manager.statistics()
    assert (stats.loads, stats.failures, stats.bytes_written) == (1, 0, 10_000)
    assert "OPERATING" in repr(manager)


def test_manager_state_is_optional_for_a_backend() -> None:
    manager = FpgaManager(CountingOps())  # type: ignore[arg-type]  # no state(): allowed
    manager.load(*_file())
    assert manager.device_state() == "unknown"


@pytest.mark.parametrize(
    ("step", "error_state", "writes"),
    [
        ("write_init", ManagerState.WRITE_INIT_ERR, 0),
        ("write", ManagerState.WRITE_ERR, 1),
        ("write_complete", ManagerState.WRITE_COMPLETE_ERR, 3),
    ],
)
def test_manager_failure_names_the_step(step: str, error_state: ManagerState, writes: int) -> None:
    ops = StatefulOps(fail_in=step)
    manager = FpgaManager(ops, chunk_bytes=4096)
    with pytest.raises(ProgrammingError, match=f"failed in step {error_state.name[:-4]}: ") as c:
        manager.load(*_file())
    assert c.value.value == error_state.value
    assert manager.state is error_state
    assert ops.calls["write"] == writes
    assert ops.calls["write_complete"] == (1 if step == "write_complete" else 0)
    assert manager.statistics().failures == 1


def test_manager_rejects_bad_chunk_size() -> None:
    with pytest.raises(ProgrammingError, match='"chunk_bytes" must be > 0, got 0'):
        FpgaManager(StatefulOps(), chunk_bytes=0)


class StuckBridgeOps:
    """A bridge that counts requests and never changes state."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.requests: list[bool] = []

    def enable_set(self, enable: bool) -> None:
        self.requests.append(enable)

    def enable_show(self) -> bool:
        return self.enabled


def test_bridge_checks_the_state_it_reaches() -> None:
    ops = StuckBridgeOps(enabled=False)
    bridge = Bridge("prr0", ops)
    bridge.disable()  # already there: fine
    with pytest.raises(BridgeError, match="'prr0' did not enable: it reads back disabled"):
        bridge.enable()
    assert ops.requests == [False, True]
    stats = bridge.statistics()
    assert (stats.enabled, stats.switches, stats.failures) == (False, 1, 1)


def test_bridge_wraps_os_errors() -> None:
    class Broken(StuckBridgeOps):
        def enable_set(self, enable: bool) -> None:
            raise OSError(13, "Permission denied")

    with pytest.raises(BridgeError, match=r"disable failed: .*Permission denied"):
        Bridge("prr0", Broken(True)).disable()


@pytest.mark.parametrize("module", ["juggle.fabric", "juggle.fabric.sim", "juggle.fabric.linux"])
def test_exports_are_sorted_and_resolve(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod.__all__ == sorted(mod.__all__)
    for name in mod.__all__:
        assert getattr(mod, name) is not None, name
