"""How fast this machine is, in one line, so that a suite's or a benchmark's time can be read
against the machine it ran on: the CPU, its cores, the fp32 matmul throughput of one thread and
the training tokens per second of one thread on a small standard pre-norm model (4 layers,
d_model 128, 64 tokens of context, batch 8: a suite's tiny trial, a few times larger).

``.ci/run`` prints it before the suite, so each CI time comes with the speed it was measured at
(docs/development.md). A busy machine reads slower: it measures the machine as the run found it,
over a few seconds, the best of several steps.

    .venv/bin/python -m benchmarks.machine_speed
"""

from __future__ import annotations

import os
import time

import torch

from record.machine import cpu_model
from trainers.config import ModelConfig
from trainers.measure.device_cost import matmul_flops
from trainers.model.loss import lm_loss
from trainers.model.transformer import DeepTransformer

BATCH, SEQ = 8, 64
STEPS = 12  # after 2 warm-up steps; the best step is the machine's, the others its noise


def training_tokens_per_s() -> float:
    """One thread's best training-step throughput (forward, backward, AdamW) on the probe model."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=256, seq_len=SEQ, n_layers=4, d_model=128, n_heads=4)
    model = DeepTransformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 256, (BATCH, SEQ + 1))
    best = float("inf")
    for step in range(STEPS + 2):
        start = time.perf_counter()
        loss = lm_loss(model(tokens[:, :-1]), tokens[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= 2:
            best = min(best, time.perf_counter() - start)
    return BATCH * SEQ / best


def main() -> None:
    torch.set_num_threads(1)
    gflops = matmul_flops("cpu", "fp32", 1) / 1e9
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} cores; one thread: fp32 matmul "
        f"{gflops:.1f} GFLOP/s, standard pre-norm training {training_tokens_per_s():,.0f} tokens/s "
        "(benchmarks/machine_speed.py)"
    )


if __name__ == "__main__":
    main()
