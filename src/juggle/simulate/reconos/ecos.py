"""A model of ReconOS Table 2's eCos/PowerPC column: every OS call as a path of stated costs.

The ReconOS prototype the paper measured (Lübbers & Platzner, section 5) is eCos on the
PowerPC 405 of a XC2VP30 at 300 MHz, with PLB, OPB and DCR buses at 100 MHz; Table 2 gives
its OS-call latencies in bus cycles (1 cycle = 10 ns). This module does not measure anything:
it adds up, per cell of Table 2, the steps the call takes on that platform, each a stated cost
in bus cycles times a count, and compares the sum with the paper.

The path of a hardware thread's call is the paper's Fig. 2 (section 4.1), with the register
counts and the ISR/DSR of the ReconOS eCos sources (``reconos.c``, ``osif_comm.c``,
``dcr_slave_regs.vhd``; public repository ``luebbers/reconos``):

1. the thread raises its request, the OSIF latches it (handshake);
2. the OSIF's interrupt line reaches the PPC405 through the interrupt controller;
3. exception entry, eCos' interrupt VSR, interrupt decode, DSR dispatch;
4. the ISR masks and acknowledges the interrupt (two interrupt-controller writes);
5. the DSR posts the delegate's semaphore and unmasks the interrupt (one write);
6. the scheduler wakes the delegate and switches to it, it returns from its wait;
7. the delegate reads the request (command, data, datax: three DCR reads). The OSIF keeps the
   thread busy until all three are read, so a non-blocking call (mutex unlock, semaphore post:
   ReconOS' command definitions give them no ``BLOCKING`` option) ends here;
8. the delegate decodes the command, looks up the object and calls the kernel;
9. for a blocking call (mutex lock) it writes the result (command, data, done: three DCR
   writes); the OSIF unblocks the thread.

A turnaround (releaser first) is the release call plus one *handoff*: the waiter has the higher
priority (5 against the releaser's 10 in ReconOS' eCos benchmark programs of February 2008,
``mutex_benchmark_ecos.c`` and ``semaphore_benchmark_ecos.c`` in the same repository), so
waking it switches to it at once and it returns from its call. A waiting hardware thread's
delegate then writes the result back (step 9). The sources are later than or contemporary with
the paper; where they differ from its Fig. 2 (a later delegate locks an OSIF mutex around the
register accesses) the model follows the paper.

Where the costs come from (each carries a label, see :data:`COSTS`):

* ``input``: the clocks (the paper), the register counts (the ReconOS sources), the fabric
  figures of juggle's :class:`~juggle.hwthreads.HwTiming` (OSIF handshake, one DCR word, one
  single-word bus write) and two stated assumptions (interrupt line, the delegate's split);
* ``calibrated``: what the paper does not state and no source gives for this board: the eCos
  kernel calls (fitted to the paper's software cells), the handoff (fitted to the two software
  turnarounds), the interrupt entry (fitted to the hardware unlock and post) and the delegate's
  own code (fitted to the hardware lock).

Every cell is computed from at least one calibrated cost, so every cell is ``calibrated``
(a figure computed from a fitted parameter is never ``modeled``); its ``paper_comparison`` row
names the costs in its path and the cells each was fitted to. Eight cells were fitting
targets; the six turnarounds with a hardware side were not (``fitting_targets`` lists the
eight): their error is a check of the fitted costs on cells they were not fitted to, not the
error of a prediction from stated inputs alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from juggle.errors import HwThreadArgumentError
from juggle.hwthreads._timing import HwTiming
from juggle.simulate.fidelity import Fit, comparison

__all__ = [
    "BUS_HZ",
    "CALIBRATION",
    "CELLS",
    "COSTS",
    "CPU_HZ",
    "PAPER_ECOS_PPC",
    "TOLERANCE_PCT",
    "EcosPpcCosts",
    "Step",
    "calibrated_costs",
    "cell_cycles",
    "cell_costs",
    "cell_labels",
    "cell_steps",
    "fitting_targets",
    "modeled_ecos_ppc",
]

CPU_HZ = 300e6
"""PowerPC 405 clock of the eCos prototype (paper section 5; label ``input``)."""
BUS_HZ = 100e6
"""PLB, OPB and DCR clock; Table 2 counts these cycles (paper section 5; label ``input``)."""
TOLERANCE_PCT = 25.0
"""How far a modeled cell may be from the paper (issue 12's acceptance)."""

PAPER_ECOS_PPC: dict[str, int] = {
    "mutex_lock_sw": 83,
    "mutex_unlock_sw": 171,
    "mutex_lock_hw": 959,
    "mutex_unlock_hw": 679,
    "mutex_turnaround_sw_sw": 453,
    "mutex_turnaround_sw_hw": 629,
    "mutex_turnaround_hw_sw": 1449,
    "mutex_turnaround_hw_hw": 1460,
    "semaphore_post_sw": 73,
    "semaphore_post_hw": 695,
    "semaphore_turnaround_sw_sw": 305,
    "semaphore_turnaround_sw_hw": 528,
    "semaphore_turnaround_hw_sw": 908,
    "semaphore_turnaround_hw_hw": 1114,
}
"""Table 2, column eCos/PPC, in bus cycles (label ``input``). Turnarounds name the releaser
first: ``sw_hw`` = a software thread releases, a hardware thread waits."""

CELLS: tuple[str, ...] = tuple(PAPER_ECOS_PPC)
"""The 14 cells, in the paper's order."""


@dataclass(frozen=True, slots=True)
class EcosPpcCosts:
    """The stated costs of the steps, in bus cycles (10 ns) unless a field says otherwise.

    ``request_words``/``result_words`` are register counts; ``dispatch_split`` is the share of
    ``delegate_dispatch`` spent before the kernel call (the rest comes after it, on the way to
    writing a result). Where each figure comes from: :data:`COSTS`.
    """

    mutex_lock: float
    mutex_unlock: float
    sem_post: float
    handoff: float
    osif_handshake: float
    interrupt_line: float
    interrupt_entry: float
    intc_write: float
    dcr_transfer: float
    request_words: int
    result_words: int
    delegate_dispatch: float
    dispatch_split: float

    def __post_init__(self) -> None:
        """Reject negative costs and a split outside [0, 1].

        Raises:
            HwThreadArgumentError: naming the field.
        """
        for field in fields(self):
            value = getattr(self, field.name)
            if value < 0:
                raise HwThreadArgumentError(
                    f'"{field.name}" must be >= 0, got {value!r}', value=value
                )
        if self.dispatch_split > 1:
            raise HwThreadArgumentError(
                f'"dispatch_split" must be <= 1, got {self.dispatch_split!r}',
                value=self.dispatch_split,
            )


_SOURCE = "Lübbers & Platzner, ReconOS on eCos and Linux"
_REPO = "ReconOS eCos sources, github.com/luebbers/reconos"

COSTS: dict[str, tuple[str, str]] = {
    "mutex_lock": (
        "calibrated",
        "eCos cyg_mutex_lock without contention; fitted to Table 2 'SW lock' (83)",
    ),
    "mutex_unlock": (
        "calibrated",
        "eCos cyg_mutex_unlock with nobody waiting; fitted to Table 2 'SW unlock' (171)",
    ),
    "sem_post": (
        "calibrated",
        "eCos cyg_semaphore_post with nobody waiting; fitted to Table 2 'SW post' (73)",
    ),
    "handoff": (
        "calibrated",
        "waking the waiter, rescheduling, switching to it and its return from the blocking "
        "call; least-squares fit (relative) to Table 2 'SW -> SW' turnarounds (453, 305)",
    ),
    "osif_handshake": (
        "input",
        "HwTiming.osif_handshake_cycles: the OSIF's handshake with its thread, registered "
        "logic at the bus clock",
    ),
    "interrupt_line": (
        "input",
        f"assumption: 2 cycles; the OSIF drives its interrupt straight from the request "
        f"(dcr_slave_regs.vhd, {_REPO}), the interrupt controller registers it once",
    ),
    "interrupt_entry": (
        "calibrated",
        "PPC405 exception entry, eCos interrupt VSR (context save), interrupt decode and DSR "
        "dispatch; least-squares fit (relative) to Table 2 'HW unlock' and 'HW post' "
        "(679, 695)",
    ),
    "intc_write": (
        "input",
        "HwTiming.bus_write_cycles: one single-word bus write, here to the interrupt "
        "controller (ISR: mask, acknowledge; DSR: unmask; reconos.c)",
    ),
    "dcr_transfer": (
        "input",
        "HwTiming.osif_word_cycles: one DCR word between the CPU and the OSIF (the OSIF acks "
        "in the cycle after the request, dcr_slave_regs.vhd)",
    ),
    "request_words": (
        "input",
        f"3 DCR reads: command, data, datax (osif_read_call_parameters, {_REPO})",
    ),
    "result_words": (
        "input",
        f"3 DCR writes: command, data, done (osif_write_result, {_REPO})",
    ),
    "delegate_dispatch": (
        "calibrated",
        "the delegate's own code per call: decode the command, look up the object, call the "
        "kernel, and return a result through XIo_DcrOut's function table; fitted to Table 2 "
        "'HW lock' (959)",
    ),
    "dispatch_split": (
        "input",
        "assumption: half of delegate_dispatch comes before the kernel call, half after it",
    ),
}
"""Every field of :class:`EcosPpcCosts` → ``(label, source)``."""

CALIBRATION: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("mutex_lock", ("mutex_lock_sw",)),
    ("mutex_unlock", ("mutex_unlock_sw",)),
    ("sem_post", ("semaphore_post_sw",)),
    ("handoff", ("mutex_turnaround_sw_sw", "semaphore_turnaround_sw_sw")),
    ("interrupt_entry", ("mutex_unlock_hw", "semaphore_post_hw")),
    ("delegate_dispatch", ("mutex_lock_hw",)),
)
"""Which cost is fitted to which cells, in fitting order (each fit sees the earlier ones)."""

ASSUMPTIONS: tuple[str, ...] = (
    "The waiter has the higher priority (5 against 10, as in ReconOS' eCos benchmark programs "
    "mutex_benchmark_ecos.c and semaphore_benchmark_ecos.c): a release with a waiter costs "
    "the call without a waiter plus one handoff to the waiter.",
    "Each call is measured alone: the CPU is idle when a hardware thread's interrupt arrives.",
    "A non-blocking call (mutex unlock, semaphore post) ends for the hardware thread when the "
    "delegate has read its three request registers (the OSIF keeps the thread busy until "
    "then); a blocking call (mutex lock) when the delegate has written the result.",
    "The path is the paper's Fig. 2: no OSIF mutex around the register accesses (later "
    "ReconOS versions added one; it is not modeled).",
)


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a path: ``times`` x the cost ``cost`` (a field of EcosPpcCosts)."""

    what: str
    cost: str
    times: float

    def cycles(self, costs: EcosPpcCosts) -> float:
        """The step's bus cycles under ``costs``."""
        return self.times * float(getattr(costs, self.cost))


_KERNEL = {
    "mutex_lock": ("kernel: cyg_mutex_lock, no contention", "mutex_lock"),
    "mutex_unlock": ("kernel: cyg_mutex_unlock", "mutex_unlock"),
    "semaphore_post": ("kernel: cyg_semaphore_post", "sem_post"),
}


def _request(c: EcosPpcCosts) -> list[Step]:
    """A hardware thread's request, up to the delegate holding its three request words."""
    return [
        Step("hardware thread raises the request, the OSIF latches it", "osif_handshake", 1),
        Step("OSIF interrupt through the interrupt controller to the PPC405", "interrupt_line", 1),
        Step("exception entry, eCos VSR, interrupt decode, DSR dispatch", "interrupt_entry", 1),
        Step("ISR: mask and acknowledge the interrupt", "intc_write", 2),
        Step("DSR: post the delegate's semaphore", "sem_post", 1),
        Step("DSR: unmask the interrupt", "intc_write", 1),
        Step("scheduler: wake the delegate, switch to it, it leaves its wait", "handoff", 1),
        Step("delegate reads command, data, datax over DCR", "dcr_transfer", c.request_words),
    ]


def _decode(c: EcosPpcCosts) -> list[Step]:
    return [
        Step(
            "delegate decodes the command, looks up the object, calls the kernel",
            "delegate_dispatch",
            c.dispatch_split,
        )
    ]


def _result(c: EcosPpcCosts) -> list[Step]:
    """A blocking call's way back: the delegate writes the result, the OSIF unblocks."""
    return [
        Step(
            "delegate returns from the kernel, hands the result on",
            "delegate_dispatch",
            1.0 - c.dispatch_split,
        ),
        Step("delegate writes command, data, done over DCR", "dcr_transfer", c.result_words),
        Step("OSIF unblocks the hardware thread", "osif_handshake", 1),
    ]


def _kernel(call: str) -> Step:
    what, cost = _KERNEL[call]
    return Step(what, cost, 1)


def _handoff_to_waiter() -> Step:
    return Step("scheduler: wake the waiter, switch to it, it returns from its call", "handoff", 1)


def cell_steps(costs: EcosPpcCosts) -> dict[str, list[Step]]:
    """The path of every cell of :data:`CELLS` under ``costs``."""
    release_step = Step("OSIF releases the thread (non-blocking call)", "osif_handshake", 1)
    paths: dict[str, list[Step]] = {
        "mutex_lock_sw": [_kernel("mutex_lock")],
        "mutex_unlock_sw": [_kernel("mutex_unlock")],
        "mutex_lock_hw": [
            *_request(costs),
            *_decode(costs),
            _kernel("mutex_lock"),
            *_result(costs),
        ],
        "mutex_unlock_hw": [*_request(costs), release_step],
        "semaphore_post_sw": [_kernel("semaphore_post")],
        "semaphore_post_hw": [*_request(costs), release_step],
    }
    for kind, release in (("mutex", "mutex_unlock"), ("semaphore", "semaphore_post")):
        handover = [_kernel(release), _handoff_to_waiter()]
        hw_release = [*_request(costs), *_decode(costs), *handover]
        paths[f"{kind}_turnaround_sw_sw"] = list(handover)
        paths[f"{kind}_turnaround_sw_hw"] = [*handover, *_result(costs)]
        paths[f"{kind}_turnaround_hw_sw"] = hw_release
        paths[f"{kind}_turnaround_hw_hw"] = [*hw_release, *_result(costs)]
    return {cell: paths[cell] for cell in CELLS}


def cell_cycles(costs: EcosPpcCosts) -> dict[str, float]:
    """The modeled bus cycles of every cell under ``costs``."""
    return {
        cell: sum(step.cycles(costs) for step in steps) for cell, steps in cell_steps(costs).items()
    }


def _with(costs: EcosPpcCosts, name: str, value: float) -> EcosPpcCosts:
    """``costs`` with the cost ``name`` set to ``value``."""
    changes: dict[str, Any] = {name: value}
    return replace(costs, **changes)


def _fit(
    costs: EcosPpcCosts, name: str, targets: tuple[str, ...], paper: Mapping[str, float]
) -> float:
    """The value of cost ``name`` minimizing the squared relative deviation of ``targets``.

    Every cell is linear in every cost, so the fit is closed-form: with ``a`` the cell at 0
    and ``s`` its slope, minimize sum(((a + s x) / y - 1)^2) over x.

    Raises:
        HwThreadArgumentError: the targets do not depend on ``name``.
    """
    at_zero = cell_cycles(_with(costs, name, 0.0))
    at_one = cell_cycles(_with(costs, name, 1.0))
    numerator = denominator = 0.0
    for cell in targets:
        y = float(paper[cell])
        slope = at_one[cell] - at_zero[cell]
        numerator += slope * (y - at_zero[cell]) / y**2
        denominator += slope**2 / y**2
    if denominator == 0:
        raise HwThreadArgumentError(f"cells {targets} do not depend on {name!r}", value=name)
    return max(0.0, numerator / denominator)


def calibrated_costs(
    timing: HwTiming | None = None, paper: Mapping[str, float] | None = None
) -> EcosPpcCosts:
    """The model's costs: inputs as stated in :data:`COSTS`, fabric figures from ``timing``
    (default :class:`HwTiming`), and the calibrated costs fitted in :data:`CALIBRATION`'s
    order to ``paper`` (default :data:`PAPER_ECOS_PPC`).

    Raises:
        HwThreadArgumentError: ``paper`` lacks a cell or gives a non-positive one.
    """
    fab = timing or HwTiming()
    figures: Mapping[str, float] = PAPER_ECOS_PPC if paper is None else paper
    for cell in CELLS:
        value = figures.get(cell)
        if value is None or value <= 0:
            raise HwThreadArgumentError(
                f"paper cell {cell!r} must be > 0, got {value!r}", value=value
            )
    costs = EcosPpcCosts(
        mutex_lock=0.0,
        mutex_unlock=0.0,
        sem_post=0.0,
        handoff=0.0,
        osif_handshake=float(fab.osif_handshake_cycles),
        interrupt_line=2.0,
        interrupt_entry=0.0,
        intc_write=float(fab.bus_write_cycles),
        dcr_transfer=float(fab.osif_word_cycles),
        request_words=3,
        result_words=3,
        delegate_dispatch=0.0,
        dispatch_split=0.5,
    )
    for name, targets in CALIBRATION:
        costs = _with(costs, name, _fit(costs, name, targets, figures))
    return costs


def cell_costs(cell: str) -> dict[str, str]:
    """The costs in ``cell``'s path (steps taken a non-zero number of times under
    :func:`calibrated_costs`), each with its label in :data:`COSTS`, in path order.

    Raises ``KeyError`` for a cell not in :data:`CELLS`."""
    steps = cell_steps(calibrated_costs())[cell]
    return {step.cost: COSTS[step.cost][0] for step in steps if step.times}


def cell_labels() -> dict[str, str]:
    """Every cell → ``calibrated`` when a calibrated cost is in its path (all 14 are), else
    ``modeled``: a figure computed from a fitted parameter is calibrated, whether or not it
    was itself a fitting target."""
    return {
        cell: "calibrated" if "calibrated" in cell_costs(cell).values() else "modeled"
        for cell in CELLS
    }


def fitting_targets() -> list[str]:
    """The cells some cost of :data:`CALIBRATION` was fitted to, in the paper's order."""
    targets = {cell for _, cells in CALIBRATION for cell in cells}
    return [cell for cell in CELLS if cell in targets]


def _fits_of(cell: str) -> list[Fit]:
    """The calibrated costs in ``cell``'s path with the Table 2 cells each was fitted to."""
    fitted_to = dict(CALIBRATION)
    return [
        Fit(cost, tuple(f"Table 2 {t} ({PAPER_ECOS_PPC[t]})" for t in fitted_to[cost]))
        for cost, label in cell_costs(cell).items()
        if label == "calibrated"
    ]


def _round(value: float) -> float:
    return round(value, 1) + 0.0  # + 0.0: no "-0.0" in the output


def modeled_ecos_ppc(costs: EcosPpcCosts | None = None) -> dict[str, Any]:
    """The ``modeled_ecos_ppc`` table: per cell the model, the paper, the deviation, the steps
    and labels; the costs with label and source; the assumptions. JSON-able.

    ``costs`` defaults to :func:`calibrated_costs`; other costs move the cells, while the
    labels keep describing how the default costs were obtained.
    """
    used = costs or calibrated_costs()
    labels = cell_labels()
    targets = set(fitting_targets())
    cells: dict[str, Any] = {}
    for cell, steps in cell_steps(used).items():
        model = sum(step.cycles(used) for step in steps)
        paper = PAPER_ECOS_PPC[cell]
        cells[cell] = {
            "model_cycles": _round(model),
            "paper_cycles": paper,
            "deviation_pct": _round((model - paper) / paper * 100.0),
            "steps": [
                {
                    "what": step.what,
                    "cost": step.cost,
                    "times": step.times,
                    "cycles": _round(step.cycles(used)),
                }
                for step in steps
            ],
            "labels": {
                "model_cycles": labels[cell],
                "paper_cycles": "input",
                "deviation_pct": labels[cell],
                "steps": "modeled",
            },
        }
    worst = max(abs(entry["deviation_pct"]) for entry in cells.values())
    return {
        "platform": "ReconOS/eCos, PowerPC 405 at 300 MHz, PLB/OPB/DCR at 100 MHz (XC2VP30)",
        "unit": "bus cycles",
        "cycle_ns": 1e9 / BUS_HZ,
        "cpu_hz": CPU_HZ,
        "bus_hz": BUS_HZ,
        "cells": cells,
        "costs": {
            field.name: {
                "cycles": _round(float(getattr(used, field.name))),
                "label": COSTS[field.name][0],
                "source": COSTS[field.name][1],
            }
            for field in fields(used)
        },
        "assumptions": list(ASSUMPTIONS),
        "worst_deviation_pct": worst,
        "tolerance_pct": TOLERANCE_PCT,
        "all_within_tolerance": worst <= TOLERANCE_PCT,
        "calibrated_cells": sorted(c for c, label in labels.items() if label == "calibrated"),
        "fitting_targets": fitting_targets(),
        "paper_comparison": [
            comparison(
                f"Table 2 {cell}",
                f"modeled_ecos_ppc.cells.{cell}.model_cycles",
                entry["paper_cycles"],
                entry["model_cycles"],
                labels[cell],
                unit="bus cycles",
                fitted=_fits_of(cell),
                uses=cell_costs(cell),
                note=""
                if cell in targets
                else "not a fitting target: the fitted costs "
                "checked on a cell they were not fitted to",
            )
            for cell, entry in cells.items()
        ],
        "labels": {
            "platform": "input",
            "unit": "input",
            "cycle_ns": "input",
            "cpu_hz": "input",
            "bus_hz": "input",
            "cells": "calibrated",
            "costs": "calibrated",
            "assumptions": "input",
            "worst_deviation_pct": "calibrated",
            "tolerance_pct": "input",
            "all_within_tolerance": "calibrated",
            "calibrated_cells": "input",
            "fitting_targets": "input",
            "paper_comparison": "input",
        },
        "how": {
            "cells": "sum of each path's steps (stated costs x counts); each cell's own labels "
            "say calibrated: every path has a fitted cost in it (fitting_targets lists the "
            "cells the costs were fitted to; the others check the fit)",
            "costs": "each cost's label and source are beside it; 'calibrated' costs were "
            "fitted to the cells named in their source",
            "source": _SOURCE + ", Table 2 (eCos/PPC column) and section 4.1, Fig. 2",
        },
    }
