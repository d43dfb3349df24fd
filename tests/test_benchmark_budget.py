"""The benchmarks' time budget (``--budget-s``, what ``benchmarks/gpu/gpu_check.sh`` fits a device
session with): past the deadline no new round starts and the next depth is skipped, the first
round always runs, and the result says what was left out."""

from __future__ import annotations

import pytest

from benchmarks.common import Deadline, interleaved
from benchmarks.model import variant_cost


def _counter() -> tuple[list[int], dict[str, object]]:
    calls = [0]

    def step() -> None:
        calls[0] += 1

    return calls, {"a": step, "b": step}


def test_a_passed_deadline_leaves_one_round_and_none_leaves_all() -> None:
    calls, steps = _counter()
    times = interleaved(steps, warmup=2, rounds=5, deadline=Deadline.after(-1))  # type: ignore[arg-type]
    assert [len(t) for t in times.values()] == [1, 1]
    assert calls[0] == 2 * 2 + 2  # warm-up and the one round, both closures
    times = interleaved(steps, warmup=0, rounds=5, deadline=Deadline.after(3600))  # type: ignore[arg-type]
    assert [len(t) for t in times.values()] == [5, 5]


def test_variant_cost_skips_the_depths_past_its_budget_and_says_so() -> None:
    """At a zero budget the quick schedule's first depth runs one round of its three and the
    second depth is skipped; the Markdown names both."""
    result = variant_cost.run(quick=True, deadline=Deadline.after(0))
    assert list(result["results"]) == ["2"] and result["skipped_depths"] == [4]
    assert result["results"]["2"]["standard"]["rounds"] == 1
    text = variant_cost.markdown(result)
    assert "Trimmed to the time budget: n_layers=4 skipped; n_layers=2 ran 1 of 3 rounds." in text


def test_decode_runs_one_round_past_its_budget_and_standard_is_its_own_unit() -> None:
    """The decode benchmark under a spent budget: one round, said in the Markdown; every ratio
    of standard to itself is 1, and the KV bytes per position are the same for every wiring."""
    from benchmarks.model import decode

    result = decode.run(quick=True, deadline=Deadline.after(0))
    assert result["rounds_run"] == 1
    assert "Trimmed to the time budget: 1 of 3 rounds." in decode.markdown(result)
    std = result["results"]["standard"]
    assert std["prefill_x"] == 1.0 and std["decode_x_b1_t16"] == 1.0
    assert len({r["kv_bytes_per_token"] for r in result["results"].values()}) == 1
    # A CPU's peak prefill memory comes from the profiler's allocation records: activations
    # grow with the prompt, and Full AttnRes keeps every sublayer's output where standard keeps
    # one stream, so at the longer prompt it holds more.
    peak = {arm: r["peak_prefill_mb"] for arm, r in result["results"].items()}
    assert all(p["32"] > p["16"] > 0 for p in peak.values()), peak
    assert peak["attnres"]["32"] > peak["standard"]["32"], peak


def test_memory_plans_gpu_table_skips_groups_past_its_budget_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The GPU path of benchmarks/model/memory_plan.py, run on the CPU at a spent budget: the first
    (depth, micro-batch) group runs one round of its two, the other groups are skipped, and the
    Markdown names both; standard is its own unit and an unchecked step has no 'vs none'."""
    from benchmarks.model import memory_plan as mp

    monkeypatch.setattr(mp, "DEVICE_ARMS", ("standard", "attnres"))
    s = {
        "dims": {"d_model": 16, "n_heads": 2, "seq_len": 16, "vocab_size": 64},
        "depths": [1, 2],
        "batch": 2,
        "micro_batches": [1, 2],
        "rounds": 2,
    }
    table = {"settings": s, **mp.device_table(s, "cpu", Deadline.after(0))}
    assert table["skipped"] == [
        "n_layers=1, micro-batch 2",
        "n_layers=2, micro-batch 1",
        "n_layers=2, micro-batch 2",
    ]
    assert {c["rounds"] for c in table["cells"].values()} == {1}
    assert len(table["cells"]) == 4  # 2 wirings x checkpointing none and sublayer
    std, ck = table["cells"]["standard|1|1|none"], table["cells"]["attnres|1|1|sublayer"]
    assert std["vs_standard"] == 1.0 and std["vs_none"] is None and ck["vs_none"] > 0
    assert all(
        c["measured"] > 0 and c["estimate"] > 0 and c["mfu"] > 0 for c in table["cells"].values()
    )
    text = mp.markdown({"name": mp.NAME, "device": "cpu", "device_step": table})
    assert (
        "Trimmed to the time budget: n_layers=1, micro-batch 2 skipped; n_layers=2, micro-batch 1 "
        "skipped; n_layers=2, micro-batch 2 skipped; n_layers=1, micro-batch 1 ran 1 of 2 rounds."
    ) in text
    assert "| `attnres` | 1 | 1 | sublayer |" in text


def test_rotated_rounds_start_one_closure_later_each_round() -> None:
    """With ``rotate`` round i starts at the i-th closure (wrapping), so no closure always
    follows the same one; without it every round keeps the dictionary's order."""
    calls: list[str] = []
    steps = {k: (lambda k=k: calls.append(k)) for k in "abc"}
    interleaved(steps, warmup=0, rounds=4, rotate=True)  # type: ignore[arg-type]
    assert "".join(calls) == "abc" + "bca" + "cab" + "abc"
    calls.clear()
    interleaved(steps, warmup=0, rounds=2)  # type: ignore[arg-type]
    assert "".join(calls) == "abcabc"
