"""The OS-call latency benchmark (ReconOS Table 2): keys, labels, plausibility."""

from __future__ import annotations

from juggle.bench import oscall


def test_oscall_keys_labels_and_values() -> None:
    results = oscall.run(quick=True)
    assert set(results) == set(oscall.LABELS)
    for kind in ("mutex", "semaphore"):
        for pair in oscall.PAIRS:
            assert f"{kind}_turnaround_{pair}_us" in results
    for raw in ("mutex_lock", "mutex_unlock", "semaphore_post"):
        assert f"{raw}_sw_us" in results and f"{raw}_hw_us" in results
    for key, value in results.items():
        assert isinstance(value, float) and value > 0, key
        label = oscall.LABELS[key]
        assert label == ("modeled" if key.endswith("_modeled") else "measured"), key
    # the delegate path costs more than a direct call, as on the boards of the paper
    assert results["mutex_lock_hw_us"] > results["mutex_lock_sw_us"]
    assert results["mutex_turnaround_hw_hw_hw_cycles_modeled"] == (
        results["mutex_turnaround_hw_sw_hw_cycles_modeled"]
        + results["mutex_turnaround_sw_hw_hw_cycles_modeled"]
    )
