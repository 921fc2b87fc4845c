"""ThumbPod's Fig 3 rerun on a modeled LEON2-Sparc cost profile.

ThumbPod (Hwang et al., DAC 2003) calls one Rijndael function (128-bit key and block) at three
levels of refinement and counts LEON-Sparc cycles per call, split into *interface* (the layers
between the Java caller and the implementation) and *core*: Java on the KVM, C (NIST
reference code) behind the KVM's native interface (KNI), and an 11-cycle coprocessor behind
the same KNI glue plus a small C function of coprocessor instructions (its Fig 4c).

The model derives each level from stated costs (see ``docs/thumbpod.md``):

* **C core**: the dynamic operation counts of the reference algorithm's loop structure for
  AES-128 (computed from Nb, Nk, Nr), times an instruction mix per operation (an estimate of
  what gcc -O2 emits for SPARC V8), times LEON2 instruction costs (LLVM's LEON2 itinerary).
  This is the model's one genuine prediction: nothing in it was fitted to the paper.
* **Java**: an interpretation factor of the KVM over the modeled C core, *calibrated* to the
  paper's Table 1 (Java: 450 bit/s on a 1 MHz Sparc), compared with Fig 3's Java figure.
* **Interfaces**: the KNI crossing (Fig 4a/b) is *calibrated* to Fig 3's C interface; the
  hardware interface adds the C function of Fig 4c: its ordinary instructions at LEON2 costs
  and its 9 coprocessor transactions at a cost per transaction *calibrated* to Fig 3's
  hardware total.
* **Hardware core**: one AddRoundKey and one round per cycle, ``Nr + 1`` cycles (juggle's
  :class:`~juggle.services.crypto.aes_hw.AesCore` latency).

A what-if runs juggle's own :class:`~juggle.services.crypto.aes_hw.AesDriver` (one
``load_key`` and one block) against the core model and prices its register transactions at
the calibrated cost per transaction.

Every figure carries a label: ``input`` (copied from the paper or a stated source),
``modeled`` (derived from stated inputs), ``calibrated`` (derived from a parameter fitted to a
named paper figure; any figure depending on one is calibrated too). Paper values sit beside
the model's with the deviation in percent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from juggle.errors import ConfigurationError
from juggle.services.crypto.aes_hw import AES_CORE_CYCLES, AesCore, AesDriver
from juggle.simulate.fidelity import Fit, comparison

__all__ = [
    "INSTRUCTION_COSTS",
    "LEVELS",
    "MIXES",
    "PAPER",
    "Figure",
    "LeonProfile",
    "c_core_breakdown",
    "run_thumbpod",
]

LEVELS = ("java", "c", "hardware")

_LEON2_SOURCE = (
    "LEON2 itinerary of LLVM's Sparc backend (llvm/lib/Target/Sparc/SparcSchedule.td, "
    "LEON2Itineraries, which cites Atmel's AT697 LEON2-FT datasheet, doc4226)"
)
_PIPELINE_SOURCE = (
    "estimate: one cycle for LEON2's 5-stage pipeline (Gaisler's LEON manuals describe the "
    "load delay and the branch interlock; the cycle count for LEON2 is not quoted here)"
)

#: LEON2 cycles per instruction class (cache hits), with where each figure comes from.
INSTRUCTION_COSTS: Mapping[str, tuple[int, str]] = {
    "alu": (1, _LEON2_SOURCE + ": IIC_iu_instr"),
    "load": (1, _LEON2_SOURCE + ": IIC_ld"),
    "store": (2, _LEON2_SOURCE + ": IIC_st"),
    "branch": (1, _LEON2_SOURCE + ": IIC_branch"),
    "call": (2, _LEON2_SOURCE + ": IIC_call"),
    "jmpl": (2, _LEON2_SOURCE + ": IIC_jmp"),
    "smul": (5, _LEON2_SOURCE + ": IIC_iu_smul"),
    "div": (35, _LEON2_SOURCE + ": IIC_iu_div"),
    "load_use": (1, _PIPELINE_SOURCE + " (a loaded value used by the next instruction)"),
    "branch_interlock": (1, _PIPELINE_SOURCE + " (a branch right after a compare)"),
}


def _mix(*parts: Mapping[str, int], **extra: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in (*parts, extra):
        for key, n in part.items():
            out[key] = out.get(key, 0) + n
    return out


#: Instruction mix of one execution of each operation of the reference code (an estimate of
#: gcc -O2 SPARC V8 code, label ``input``), with what the operation is.
MIXES: Mapping[str, tuple[dict[str, int], str]] = {
    "inner_step": (
        _mix(alu=2, branch=1, branch_interlock=1),
        "inner loop step: increment, compare, branch (delay slot filled from the body)",
    ),
    "outer_step": (
        _mix(alu=3, branch=1, branch_interlock=1),
        "outer loop step: increment, reset the inner index, compare, branch",
    ),
    "leaf_call": (_mix(call=1, jmpl=1, alu=2), "call and retl of a leaf function, delay slots"),
    "frame_call": (_mix(call=1, jmpl=1, alu=3), "call, save, ret with restore in its delay slot"),
    "arg": (_mix(alu=1), "one argument moved into an out register"),
    "switch": (
        _mix(alu=3, branch=2, branch_interlock=2),
        "a switch on the key or block length, resolved by two compares",
    ),
    "xor_byte": (
        _mix(load=2, alu=2, store=1, load_use=1),
        "x[i][j] ^= y[i][j]: two ldub, index add, xor, stb",
    ),
    "sbox_byte": (
        _mix(load=2, alu=1, store=1, load_use=2),
        "a[i][j] = S[a[i][j]]: ldub, table index, ldub, stb",
    ),
    "copy_byte": (_mix(load=1, alu=1, store=1, load_use=1), "x[..] = y[..]: ldub, index, stb"),
    "div_mod": (
        _mix(alu=6, div=1, smul=1),
        "x / n and x % n for a variable n: sign into %y (wr and 3 delay nops), sdiv, smul, sub",
    ),
    "shift_byte": (
        _mix(alu=3, load=1, store=1, load_use=1),
        "tmp[j] = a[i][(j + shift) % BC] besides the division: add, index, ldub, stb",
    ),
    "shift_amount": (_mix(load=1, alu=4, load_use=1), "shifts[SC][i][d], once per row"),
    "mod4": (_mix(alu=6), "(i + k) % 4 on a signed int: add, sra, srl, add, and, sub"),
    "gf_mul": (
        _mix(
            _mix(call=1, jmpl=1, alu=2),
            alu=20,
            load=3,
            branch=2,
            branch_interlock=2,
            smul=1,
            load_use=2,
        ),
        "mul(c, x) as a leaf call: zero-extend both, two zero tests, three table bases, "
        "Logtable twice, add, % 255 by multiply-high (smul, rd %y, shifts), Alogtable",
    ),
    "mix_byte": (
        _mix(load=4, alu=12, store=1, load_use=1),
        "b[i][j] = ... besides its two mul calls and three % 4: four row loads, row "
        "addresses, three xor, stb",
    ),
    "ks_sbox": (
        _mix(load=3, alu=6, store=1, load_use=2),
        "tk[i][0] ^= S[tk[(i+1)%4][KC-1]] besides its % 4: three ldub, addresses, xor, stb",
    ),
    "rcon": (_mix(load=2, alu=4, store=1, load_use=1), "tk[0][0] ^= rcon[rconpointer++]"),
    "w_column": (
        _mix(alu=7, branch=2, branch_interlock=2),
        "one round-key column into W besides its t / BC, t % BC: address, the two-part loop "
        "test, t++",
    ),
    "w_byte": (_mix(load=1, alu=2, store=1, load_use=1), "W[t/BC][i][t%BC] = tk[i][j]"),
    "while_test": (_mix(alu=2, branch=1, branch_interlock=1), "the key schedule's while test"),
    "unpack_byte": (_mix(alu=3, store=1), "int word to state byte: shift, mask, index, stb"),
    "pack_byte": (_mix(load=1, alu=2, load_use=1), "state byte into an int word: ldub, shift, or"),
    "word_load": (_mix(load=1), "ld of one int of din/key"),
    "word_store": (_mix(store=1), "st of one int of dout"),
}

#: Fig 3 and Table 1 of the paper (label ``input``); ``None``: the paper gives no figure.
PAPER: Mapping[str, Mapping[str, float | None]] = {
    "java": {"interface_cycles": None, "core_cycles": None, "total_cycles": 301_034, "gain": 1.0},
    "c": {"interface_cycles": 367, "core_cycles": 44_063, "total_cycles": 44_430, "gain": 6.8},
    "hardware": {"interface_cycles": 892, "core_cycles": 11, "total_cycles": 903, "gain": 333.0},
}
_TABLE1_JAVA_BITS_PER_S = 450.0
_TABLE1_CLOCK_HZ = 1e6
#: Fig 4c: two ldd of the key, cpop1 load_key, two ldd of the data, cpop1 encrypt_ecb,
#: cpop1 read_output, two std of the result.
_FIG4C_COPROCESSOR_OPS = 9
#: Fig 4c besides its coprocessor instructions: three ``mov`` of the array pointers.
_FIG4C_MOVES = 3


@dataclass(frozen=True, slots=True)
class Figure:
    """A number and where it comes from: ``label`` is ``input``, ``modeled`` or
    ``calibrated``; ``how`` says how it was obtained (source, model or fitted figure)."""

    value: float
    label: str
    how: str

    def json(self) -> dict[str, Any]:
        """``{"value", "label", "how"}``."""
        return {"value": _round(self.value), "label": self.label, "how": self.how}


def _derived(value: float, how: str, *parts: Figure) -> Figure:
    """A figure computed from ``parts``: calibrated if any part is, else modeled."""
    label = "calibrated" if any(p.label == "calibrated" for p in parts) else "modeled"
    return Figure(value, label, how)


@dataclass(frozen=True, slots=True)
class LeonProfile:
    """The stated LEON2-Sparc cost profile of the model.

    ``costs`` overrides instruction costs (cycles per class of :data:`INSTRUCTION_COSTS`).
    ``kvm_factor``, ``kni_cycles`` and ``coprocessor_cycles`` are calibrated when None (to
    Table 1's Java throughput, Fig 3's C interface and Fig 3's hardware total); a number makes
    them a stated ``input`` instead. ``java_bits_per_s`` is Table 1's Java throughput.
    """

    costs: Mapping[str, int] = field(default_factory=dict)
    kvm_factor: float | None = None
    kni_cycles: float | None = None
    coprocessor_cycles: float | None = None
    java_bits_per_s: float = _TABLE1_JAVA_BITS_PER_S

    def cost(self, kind: str) -> int:
        """Cycles of one instruction of class ``kind``."""
        return self.costs.get(kind, INSTRUCTION_COSTS[kind][0])

    def mix_cycles(self, operation: str) -> int:
        """Cycles of one execution of ``operation`` (a key of :data:`MIXES`)."""
        return sum(n * self.cost(kind) for kind, n in MIXES[operation][0].items())

    def check(self) -> None:
        """Raise :class:`~juggle.errors.ConfigurationError` naming a bad value."""
        for kind, cycles in self.costs.items():
            if kind not in INSTRUCTION_COSTS:
                raise ConfigurationError(
                    f"unknown instruction class {kind!r} (one of: {', '.join(INSTRUCTION_COSTS)})",
                    value=kind,
                )
            if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 0:
                raise ConfigurationError(
                    f'"costs[{kind!r}]" must be an int >= 0, got {cycles!r}', value=cycles
                )
        for name in ("kvm_factor", "kni_cycles", "coprocessor_cycles", "java_bits_per_s"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise ConfigurationError(
                    f'"{name}" must be > 0 or None, got {value!r}', value=value
                )


# -- the C core: operation counts of the reference code ----------------------------------------


def _function_counts(nb: int, nk: int, nr: int) -> dict[str, tuple[int, dict[str, int]]]:
    """Per function of the reference code: (calls per block, operations per call).

    The loop structure is the reference code's: byte arrays ``a[4][BC]``, one function per
    round step, ``mul`` through log tables, ``% BC`` with a run-time ``BC``, round keys
    expanded on every call (ThumbPod's ``rijndael(din, key, dout)`` takes the key each time).
    """
    state = 4 * nb  # bytes of the state
    columns = nb * (nr + 1)  # round-key columns the schedule writes
    rounds_of_expansion = math.ceil((columns - nk) / nk)
    key_loop = _mix(
        {"inner_step": 4, "ks_sbox": 4, "mod4": 4, "rcon": 1, "while_test": 1},
        outer_step=nk - 1,
        inner_step=4 * (nk - 1),
        xor_byte=4 * (nk - 1),
    )
    copies = _mix(  # every round-key column: t / BC, t % BC, then four bytes
        w_column=columns, div_mod=columns, outer_step=columns, inner_step=4 * columns
    )
    copies["w_byte"] = 4 * columns
    schedule = _mix(
        {"frame_call": 1, "switch": 3, "outer_step": nk, "inner_step": 4 * nk},
        copy_byte=4 * nk,
        **{k: v * rounds_of_expansion for k, v in key_loop.items()},
    )
    schedule = _mix(schedule, copies)
    return {
        "rijndael (int words <-> state bytes)": (
            1,
            _mix(
                {"frame_call": 1, "arg": 8, "word_load": 2 * nb, "word_store": nb},
                unpack_byte=2 * state,
                pack_byte=state,
            ),
        ),
        "rijndaelKeySched": (1, schedule),
        "rijndaelEncrypt": (
            1,
            _mix(
                {"frame_call": 1, "switch": 2, "inner_step": nr - 1},
                arg=3 * (4 * nr),  # three arguments to each of its 4 Nr calls
            ),
        ),
        "KeyAddition": (
            nr + 1,
            {"leaf_call": 1, "outer_step": 4, "inner_step": state, "xor_byte": state},
        ),
        "Substitution": (
            nr,
            {"leaf_call": 1, "outer_step": 4, "inner_step": state, "sbox_byte": state},
        ),
        "ShiftRow": (
            nr,
            {
                "leaf_call": 1,
                "outer_step": 2 * 3,
                "shift_amount": 3,
                "inner_step": 2 * 3 * nb,
                "shift_byte": 3 * nb,
                "div_mod": 3 * nb,
                "copy_byte": 3 * nb,
            },
        ),
        "MixColumn": (
            nr - 1,
            {
                "frame_call": 1,
                "outer_step": nb + 4,
                "inner_step": 2 * state,
                "mix_byte": state,
                "mod4": 3 * state,
                "gf_mul": 2 * state,
                "arg": 2 * 2 * state,
                "copy_byte": state,
            },
        ),
    }


def c_core_breakdown(
    profile: LeonProfile | None = None, *, nb: int = 4, nk: int = 4, nr: int = 10
) -> dict[str, dict[str, int]]:
    """Modeled cycles of the reference C code per function for one block (AES-128 defaults):
    ``{function: {"calls", "cycles"}}`` (cycles of all its calls together)."""
    profile = profile or LeonProfile()
    out = {}
    for name, (calls, operations) in _function_counts(nb, nk, nr).items():
        per_call = sum(n * profile.mix_cycles(op) for op, n in operations.items())
        out[name] = {"calls": calls, "cycles": calls * per_call}
    return out


# -- the what-if: juggle's AES driver against the core -----------------------------------------


class _TransactionWindow:
    """An MMIO over an :class:`AesCore` where every access takes ``cycles`` core cycles;
    counts reads and writes (the driver polls, so the count depends on that cost)."""

    def __init__(self, cycles: int) -> None:
        self.core = AesCore()
        self.cycles = max(1, cycles)
        self.now = 0
        self.reads = 0
        self.writes = 0

    @property
    def size(self) -> int:
        return self.core.window_size

    def read32(self, offset: int) -> int:
        self.now += self.cycles
        self.reads += 1
        return self.core.read(offset, self.now)

    def write32(self, offset: int, value: int) -> None:
        self.now += self.cycles
        self.writes += 1
        self.core.write(offset, value, self.now)


def _driver_transactions(cycles_per_transaction: float) -> tuple[int, int]:
    """(reads, writes) of juggle's AesDriver for one ``load_key`` and one 16-byte block."""
    window = _TransactionWindow(round(cycles_per_transaction))
    driver = AesDriver(window)
    driver.load_key(bytes(range(16)))
    driver.encrypt(bytearray(16), 16)
    return window.reads, window.writes


# -- the model ---------------------------------------------------------------------------------


def _given_or_fitted(
    given: float | None, fitted: float, name: str, source: str, fitted_to: str
) -> Figure:
    if given is not None:
        return Figure(float(given), "input", f"{name}: given ({source})")
    return Figure(fitted, "calibrated", f"{name}: fitted to {fitted_to}")


def _level(
    interface: Figure, core: Figure, total: Figure, gain: Figure, paper: Mapping[str, Any]
) -> dict[str, Any]:
    values = {
        "interface_cycles": interface,
        "core_cycles": core,
        "total_cycles": total,
        "gain": gain,
    }
    deviation: dict[str, float | None] = {}
    for key, figure in values.items():
        ref = paper[key]
        deviation[key] = None if ref is None else _round(100.0 * (figure.value / ref - 1.0))
    return {
        **{key: _round(f.value) for key, f in values.items()},
        "paper": dict(paper),
        "deviation_pct": deviation,
        "labels": {
            **{key: f.label for key, f in values.items()},
            "paper": "input",
            "deviation_pct": {key: f.label for key, f in values.items()},
        },
        "how": {key: f.how for key, f in values.items()},
    }


def run_thumbpod(profile: LeonProfile | None = None) -> dict[str, Any]:
    """Fig 3 of ThumbPod on the stated LEON2 cost profile: per level ``interface_cycles``,
    ``core_cycles``, ``total_cycles`` and ``gain`` over Java, the paper's values beside, the
    deviation in percent, a label per figure and how each was obtained.

    Raises :class:`~juggle.errors.ConfigurationError` for a bad ``profile``.
    """
    profile = profile or LeonProfile()
    profile.check()
    breakdown = c_core_breakdown(profile)
    c_core = Figure(
        float(sum(f["cycles"] for f in breakdown.values())),
        "modeled",
        "operation counts of the NIST reference Rijndael for AES-128 (key schedule and one "
        "block) x instruction mix per operation (estimate of gcc -O2 SPARC V8) x LEON2 "
        "instruction costs",
    )
    table1_java = Figure(
        128 * _TABLE1_CLOCK_HZ / profile.java_bits_per_s,
        "input",
        f"Table 1: 128 bits at {profile.java_bits_per_s:g} bit/s on a 1 MHz Sparc",
    )
    kvm = _given_or_fitted(
        profile.kvm_factor,
        table1_java.value / c_core.value,
        "KVM interpretation factor over the modeled C core",
        "stated",
        f"Table 1's Java throughput ({_TABLE1_JAVA_BITS_PER_S:g} bit/s = "
        f"{table1_java.value:,.0f} cycles per block)",
    )
    java_core = _derived(kvm.value * c_core.value, "KVM factor x modeled C core", kvm, c_core)
    zero = Figure(0.0, "input", "a Java call crosses no interface layer")
    kni = _given_or_fitted(
        profile.kni_cycles,
        float(PAPER["c"]["interface_cycles"] or 0),
        "KNI crossing (Fig 4a/b: native call, two pops, instantiateArray, push)",
        "stated",
        "Fig 3's C interface (367 cycles)",
    )
    moves = Figure(
        float(
            _FIG4C_MOVES * profile.cost("alu")
            + profile.mix_cycles("leaf_call")
            + 3 * profile.mix_cycles("arg")
        ),
        "modeled",
        "Fig 4c's three mov, its call from the KNI glue with three arguments (LEON2 costs)",
    )
    hw_core = Figure(
        float(AES_CORE_CYCLES),
        "input",
        "hard-coded: juggle's AesCore latency (one AddRoundKey and Nr = 10 rounds, one per "
        "cycle), the paper's 11 cycles",
    )
    budget = float(PAPER["hardware"]["total_cycles"] or 0)
    cop = _given_or_fitted(
        profile.coprocessor_cycles,
        (budget - hw_core.value - kni.value - moves.value) / _FIG4C_COPROCESSOR_OPS,
        "cycles per coprocessor transaction",
        "stated",
        "Fig 3's hardware total (903 cycles) given the KNI crossing and Fig 4c's other "
        f"instructions, over Fig 4c's {_FIG4C_COPROCESSOR_OPS} coprocessor instructions",
    )
    hw_if = _derived(
        kni.value + moves.value + _FIG4C_COPROCESSOR_OPS * cop.value,
        f"KNI crossing + Fig 4c instructions + {_FIG4C_COPROCESSOR_OPS} coprocessor "
        "transactions x cycles per transaction",
        kni,
        moves,
        cop,
    )
    totals = {
        "java": _derived(java_core.value, "interface + core", zero, java_core),
        "c": _derived(kni.value + c_core.value, "interface + core", kni, c_core),
        "hardware": _derived(hw_if.value + hw_core.value, "interface + core", hw_if, hw_core),
    }
    parts = {"java": (zero, java_core), "c": (kni, c_core), "hardware": (hw_if, hw_core)}
    levels = {}
    for name in LEVELS:
        gain = _derived(
            totals["java"].value / totals[name].value,
            "Java total / this level's total",
            totals["java"],
            totals[name],
        )
        levels[name] = _level(*parts[name], totals[name], gain, PAPER[name])
    if kni.label == "calibrated":  # set to Fig 3's C interface: the paper's value, echoed
        levels["c"]["labels"]["interface_cycles"] = "input"
        levels["c"]["labels"]["deviation_pct"]["interface_cycles"] = "input"
    levels["java"]["labels"]["gain"] = "input"  # 1 by definition
    levels["java"]["labels"]["deviation_pct"]["gain"] = "input"
    reads, writes = _driver_transactions(cop.value)
    what_if_if = _derived(
        kni.value + moves.value + (reads + writes) * cop.value,
        "KNI crossing + Fig 4c instructions + juggle AesDriver transactions x cycles per "
        "transaction",
        kni,
        moves,
        cop,
    )
    what_if_total = what_if_if.value + hw_core.value
    doc: dict[str, Any] = {
        "scenario": "thumbpod",
        "source": "Hwang et al., HW/SW Acceleration Transparency in the ThumbPod Secure "
        "Embedded System, DAC 2003: Fig 3 (and Table 1)",
        "unit": "LEON2-Sparc cycles per rijndael() call: 128-bit key and block",
        "levels": levels,
        "gains_vs_paper_pct": {
            name: levels[name]["deviation_pct"]["gain"] for name in ("c", "hardware")
        },
        "labels": {
            "gains_vs_paper_pct": {n: levels[n]["labels"]["gain"] for n in ("c", "hardware")},
            "unit": "input",
            "paper_comparison": "input",  # each row labels its own figures
        },
        "paper_comparison": _comparison(levels, kvm=kvm, kni=kni, cop=cop),
        "what_if": {
            "hardware_juggle_driver": {
                "transactions": {"reads": reads, "writes": writes},
                "interface_cycles": _round(what_if_if.value),
                "core_cycles": _round(hw_core.value),
                "total_cycles": _round(what_if_total),
                "gain": _round(totals["java"].value / what_if_total),
                "labels": {
                    "transactions": "modeled",
                    "interface_cycles": what_if_if.label,
                    "core_cycles": hw_core.label,
                    "total_cycles": what_if_if.label,
                    "gain": "calibrated",
                },
                "how": "juggle's AesDriver (load_key + one block) run against the AesCore model "
                "with every access costing the calibrated cycles per transaction; its reads "
                "and writes replace Fig 4c's coprocessor instructions (assumption: a register "
                "access costs what a coprocessor transfer costs)",
            }
        },
        "c_core_breakdown": {"functions": breakdown, "label": "modeled"},
        "parameters": {
            "kvm_factor": kvm.json(),
            "kni_cycles": kni.json(),
            "coprocessor_cycles": cop.json(),
            "fig4c_coprocessor_ops": Figure(
                _FIG4C_COPROCESSOR_OPS, "input", "counted in the paper's Fig 4c listing"
            ).json(),
            "table1_java_cycles": table1_java.json(),
            "instruction_cycles": {
                kind: Figure(profile.cost(kind), "input", source).json()
                for kind, (_, source) in INSTRUCTION_COSTS.items()
            },
            "mixes": {
                "label": "input",
                "source": "estimate of gcc -O2 SPARC V8 code for each operation",
                "operations": {
                    op: {"instructions": mix, "cycles": profile.mix_cycles(op), "what": what}
                    for op, (mix, what) in MIXES.items()
                },
            },
        },
    }
    # the one convention of every --json document: "labels" beside the keys it labels
    doc["labels"]["c_core_breakdown"] = doc["c_core_breakdown"]["label"]
    _add_labels(doc["parameters"])
    return doc


_FIGURE_USES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "java": {"core_cycles": ("kvm",), "total_cycles": ("kvm",), "gain": ()},
    "c": {
        "interface_cycles": ("kni",),
        "core_cycles": (),
        "total_cycles": ("kni",),
        "gain": ("kvm", "kni"),
    },
    "hardware": {
        "interface_cycles": ("kni", "cop"),
        "core_cycles": (),
        "total_cycles": ("kni", "cop"),
        "gain": ("kvm", "kni", "cop"),
    },
}
"""Per level and figure: the parameters (kvm_factor, kni_cycles, coprocessor_cycles) in it."""

_FITTED_TO: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "kvm": ("kvm_factor", ("Table 1 Java throughput 450 bit/s",)),
    "kni": ("kni_cycles", ("Fig 3 C interface 367 cycles",)),
    "cop": ("coprocessor_cycles", ("Fig 3 hardware total 903 cycles",)),
}


def _comparison(levels: Mapping[str, dict[str, Any]], **params: Figure) -> list[dict[str, Any]]:
    """Fig 3 beside ours, one row per figure the paper gives, with the fitted parameters in
    each (a parameter the profile states is an input, not a fit)."""
    rows = []
    for name, uses in _FIGURE_USES.items():
        level = levels[name]
        for key, used in uses.items():
            paper = level["paper"][key]
            if paper is None:
                continue
            label = level["labels"][key]
            echoed = label == "input"
            in_it = {_FITTED_TO[p][0]: params[p].label for p in used}
            fits = [Fit(*_FITTED_TO[p]) for p in used if params[p].label == "calibrated"]
            note = ""
            if echoed and fits:  # the figure is the parameter, set to this very paper value
                note = (
                    f"{', '.join(f.parameter for f in fits)} is set to this paper value and "
                    "echoed here (input); the figures computed from it are calibrated"
                )
            rows.append(
                comparison(
                    f"Fig 3 {name} {key}",
                    f"levels.{name}.{key}",
                    paper,
                    level[key],
                    label,
                    unit="x" if key == "gain" else "cycles",
                    fitted=() if echoed else fits,
                    echoed=echoed,
                    uses=in_it,
                    note=note,
                )
            )
    return rows


def _add_labels(tree: dict[str, Any]) -> None:
    """Give a group of ``{"value", "label", "how"}`` figures the ``labels`` dict every --json
    document uses (its children's own ``label``), down every group without a ``label``."""
    labels = {k: c["label"] for k, c in tree.items() if isinstance(c, dict) and "label" in c}
    for child in tree.values():
        if isinstance(child, dict) and "label" not in child:
            _add_labels(child)
    tree["labels"] = labels


def _round(value: float) -> float:
    return round(float(value), 3)
