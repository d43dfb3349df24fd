"""What a GPU run of ``benchmarks/gpu/gpu_check.sh`` covers (its dry run on a CPU prints this): each
benchmark's GPU settings, read from the benchmarks themselves so the plan cannot drift from them.

    python -m benchmarks.gpu.gpu_plan
"""

from __future__ import annotations

from benchmarks.gpu import gpu_table
from benchmarks.model import decode, memory_plan, utilization, variant_cost


def plan() -> list[str]:
    u, v = utilization.settings(False, "cuda"), variant_cost.settings(False, "cuda")
    dec = decode.settings(False, "cuda")
    width = max(u["d_models"])
    depths = ", ".join(f"n_layers={n}: {r} rounds" for n, (_, r) in v["schedule"].items())
    shapes = "; ".join(
        f"{name} (d_model {d['d_model']}, n_layers {d['n_layers']}, seq_len {d['seq_len']})"
        for name, d in gpu_table.SHAPES.items()
    )
    return [
        f"  gpu_table: {', '.join(gpu_table.WIRINGS)}, each {', '.join(gpu_table.MODES)} "
        f"(fused: Full and Block AttnRes), vocabulary {gpu_table.VOCAB}, at {shapes}: step "
        "time, tokens/s, MFU, ratio to standard, first step apart, peak memory beside the plan; "
        "a row per line as measured",
        f"  utilization: {', '.join(utilization.ARMS)} at d_model {width} (standard also at "
        f"{min(u['d_models'])}), n_layers={u['shape']['n_layers']}, seq_len "
        f"{u['shape']['seq_len']}, batch {u['batch']}, {u['rounds']} rounds",
        f"  decode: {', '.join(decode.ARMS)} at d_model {dec['dims']['d_model']}, n_layers="
        f"{dec['dims']['n_layers']}, {dec['tokens']} tokens after prompts of "
        f"{' and '.join(map(str, dec['prompts']))}, batches {dec['batches']}, "
        f"{dec['rounds']} rounds",
        _memory_plan_line(),
        f"  variant_cost: {len(v['arms'])} arms ({', '.join(v['arms'])}) at d_model "
        f"{v['dims']['d_model']}, seq_len {v['dims']['seq_len']}, batch {v['batch']}; {depths}",
        "  fused_block: flash-attn-res's kernels against the depth softmax (forward, gradients) "
        "and Block AttnRes fused vs unfused on a small model (float32, bf16 autocast); then "
        "step time and decode time per token of standard, Block AttnRes (N = 8) unfused and "
        "fused at d_model 1024, n_layers 32, seq_len 1024, batch 8 (needs '.[gpu]'); then "
        "depth_gpt2's largest cell (48 layers, d_model 768, seq_len 1024, the micro-batch its "
        "80 GiB plan picks, two per step): the plan's estimate beside the measured peak and the "
        "step time, standard and Block AttnRes unfused and fused",
        "  sweep: the quick space, 4 trials sharing the GPU (--gpus-per-trial 0.25), 100 steps",
        "  (under the budget, rounds go first, then the deepest depths)",
    ]


def _memory_plan_line() -> str:
    m = memory_plan.settings(False, "cuda")
    d = m["dims"]
    depths = " then ".join(map(str, m["depths"]))
    micro = " and ".join(map(str, m["micro_batches"]))
    return (
        f"  memory_plan: {', '.join(memory_plan.DEVICE_ARMS)} at d_model {d['d_model']}, "
        f"n_layers {depths} (the budget allowing), seq_len {d['seq_len']}, bf16-mixed; global "
        f"batch {m['batch']} in micro-batches of {micro}, checkpointing "
        f"{' and '.join(memory_plan.CHECKPOINTING)}: the plan's estimate vs the measured peak, "
        f"step time ({m['rounds']} rounds), tokens/s, MFU"
    )


if __name__ == "__main__":
    print("\n".join(plan()))
