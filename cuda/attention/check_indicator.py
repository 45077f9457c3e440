#!/usr/bin/env python3
"""The leading indicator from our standard kernel
(bitexact_torch.flash_forward_with_indicator), checked on the device machine:
its O and L against the same kernel without the indicator (bit for bit), and
its per-row counts against bitexact.repeated_max (attention/repeated_max.hpp,
S from the emulator's tensor-core model, the single-split kernel) on heads
with ties at the row max; then its time against the kernel without it.

    BITEXACT_DATA_DIR=data PYTHONPATH=<bitexact module> python3 cuda/attention/check_indicator.py
"""
import os
import statistics
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import bitexact  # noqa: E402
import bitexact.torch as bitexact_torch  # noqa: E402

EPS = 1e-3
generator = torch.Generator(device="cuda").manual_seed(11)


def heads_with_ties(batch, heads, n, n_k, d, sign):
    """Random bf16 Q, K, V; every 5th key copies key 0 and every 9th query copies key 0 (scaled), so
    that many rows have their max at several keys, some of them in one block, some across blocks."""
    q, k, v = (torch.randn(batch, heads, m, d, device="cuda", generator=generator).bfloat16()
               for m in (n, n_k, n_k))
    k[:, :, 5::5] = k[:, :, 0:1]
    q[:, :, ::9] = (sign * 3 * k[:, :, 0:1].float()).bfloat16()
    return q, k, v


rows_compared = heads_compared = 0
mismatched_rows = 0
totals = {"rows with P-bar = 1 twice": 0, "rows with the max repeated": 0}
for d in (64, 128):
    for causal in (False, True):
        for sign in (1, -1):
            q, k, v = heads_with_ties(1, 3, 1000, 1000, d, sign)
            scale = d ** -0.5
            o, lse, ones, repeated = bitexact_torch.flash_forward_with_indicator(q, k, v, causal, scale, EPS)
            o0, lse0 = bitexact_torch.flash_forward(q, k, v, causal, scale, 0, 2.0, EPS)
            if not (torch.equal(o.view(torch.int16), o0.view(torch.int16)) and
                    torch.equal(lse.view(torch.int32), lse0.view(torch.int32))):
                raise SystemExit(f"d {d} causal {causal}: O or L differ from the kernel without the indicator")
            bits = lambda t: t.view(torch.int16).cpu().numpy().view(np.uint16)  # noqa: E731
            model = bitexact.repeated_max(q=bits(q), k=bits(k), causal=causal,
                                          scale=scale, splits=1, eps=EPS, per_row=True)
            gpu_ones, gpu_repeated = ones.cpu().numpy(), repeated.cpu().numpy()
            bad = (gpu_ones != model["row_p_bar_ones"]) | (gpu_repeated != model["row_max_repeated"])
            mismatched_rows += int(bad.sum())
            rows_compared += bad.size
            heads_compared += q.shape[0] * q.shape[1]
            totals["rows with P-bar = 1 twice"] += int((gpu_ones >= 2).sum())
            totals["rows with the max repeated"] += int(gpu_repeated.sum())
print(f"indicator vs bitexact.repeated_max: {heads_compared} heads, {rows_compared} rows, {mismatched_rows} "
      f"rows differ; in them {totals}")

# Time: the kernel with the indicator against the kernel without it (median of 7, 20 calls each, in turns).
for d in (64, 128):
    q, k, v = (torch.randn(4, 16, 4096, d, device="cuda", dtype=torch.bfloat16, generator=generator) for _ in range(3))
    calls = {"standard": lambda: bitexact_torch.flash_forward(q, k, v, False, d ** -0.5, 0, 2.0, EPS),
             "with indicator": lambda: bitexact_torch.flash_forward_with_indicator(q, k, v, False, d ** -0.5, EPS)}
    times = {name: [] for name in calls}
    for call in calls.values():
        call()
    for _ in range(7):
        for name, call in calls.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                call()
            end.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(end) / 20)
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"B 4 H 16 N 4096 d {d}: standard {median['standard']:.3f} ms, with the indicator "
          f"{median['with indicator']:.3f} ms ({median['with indicator'] / median['standard']:.3f}x)")
