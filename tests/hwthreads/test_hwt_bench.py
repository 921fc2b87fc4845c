"""The OS-call latency benchmark (ReconOS Table 2): keys, labels, plausibility."""

from __future__ import annotations

from juggle.bench import oscall
from juggle.simulate.reconos.ecos import PAPER_ECOS_PPC, cell_labels


def test_oscall_keys_labels_and_values() -> None:
    results = oscall.run(quick=True)
    assert set(results) == set(oscall.LABELS)
    for kind in ("mutex", "semaphore"):
        for pair in oscall.PAIRS:
            assert f"{kind}_turnaround_{pair}_us" in results
    for raw in ("mutex_lock", "mutex_unlock", "semaphore_post"):
        assert f"{raw}_sw_us" in results and f"{raw}_hw_us" in results
    modeled_ppc = {key for key in results if key.startswith("ecos_ppc_")}
    for key in set(results) - modeled_ppc:  # this machine
        value = results[key]
        assert isinstance(value, float) and value > 0, key
        label = oscall.LABELS[key]
        assert label == ("modeled" if key.endswith("_modeled") else "measured"), key
    # the paper's platform, modeled: Table 2's eCos/PPC column, 14 cells beside the paper's
    assert len(modeled_ppc) == 3 * len(PAPER_ECOS_PPC)
    for cell, label in cell_labels().items():
        assert oscall.LABELS[f"ecos_ppc_{cell}_cycles"] == label
        assert oscall.LABELS[f"ecos_ppc_{cell}_deviation_pct"] == label
        assert oscall.LABELS[f"ecos_ppc_{cell}_paper_cycles"] == "input"
        assert results[f"ecos_ppc_{cell}_paper_cycles"] == PAPER_ECOS_PPC[cell]
        assert results[f"ecos_ppc_{cell}_cycles"] > 0
        assert abs(results[f"ecos_ppc_{cell}_deviation_pct"]) <= 25.0, cell
    # the delegate path costs more than a direct call, as on the boards of the paper
    assert results["mutex_lock_hw_us"] > results["mutex_lock_sw_us"]
    assert results["mutex_turnaround_hw_hw_hw_cycles_modeled"] == (
        results["mutex_turnaround_hw_sw_hw_cycles_modeled"]
        + results["mutex_turnaround_sw_hw_hw_cycles_modeled"]
    )
