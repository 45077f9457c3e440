#!/usr/bin/env python3
"""The leading indicator on a GPU, in a training loop's terms: the time of
bitexact.repeated_max_torch on the scores S = Q K^T of one attention call,
as a ratio to the flash-attention forward pass of the same call (PyTorch's
SDPA flash backend) and to the float32 matmul that makes S, measured in the
same run with CUDA events (median of REPEATS, each 10 calls). Also checks the
GPU counts against the C++ function (bitexact.repeated_max) on two heads.

    PYTHONPATH=build/python python3 bench/bench_repeated_max_torch.py [REPEATS]

Needs a CUDA PyTorch and the bitexact module built for that Python.
"""
import statistics
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

import bitexact

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5


def milliseconds(calls, count=10):
    for call in calls.values():
        call()
    torch.cuda.synchronize()
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():  # in turns, so that clock changes favour none
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(count):
                call()
            end.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(end) / count)
    return {name: statistics.median(t) for name, t in times.items()}


smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True,
                     text=True).stdout.strip()
print(f"GPU {smi}; torch {torch.__version__}, CUDA {torch.version.cuda}; median of {repeats}")
generator = torch.Generator(device="cuda").manual_seed(0)
for batch, heads, n, d in ((1, 16, 4096, 128), (4, 16, 2048, 64)):
    q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16, generator=generator) for _ in range(3))
    k[:, :, 1::7] = k[:, :, 0:1]  # every 7th key repeats key 0: many rows with a repeated maximum
    s = torch.matmul(q.float(), k.float().transpose(-2, -1))

    # The GPU counts against the C++ function on the same float32 S (two heads).
    cpu = bitexact.repeated_max(s[0, :2].cpu().numpy()[None], d)
    gpu = bitexact.repeated_max_torch(s[0:1, :2], d)
    same = all(np.array_equal(cpu[name], gpu[name].cpu().numpy()) for name in cpu)
    print(f"B {batch} H {heads} N {n} d {d}: C++ and GPU counts on 2 heads {'agree' if same else 'DIFFER'} "
          f"(rows with the max repeated: {int(gpu['rows_with_max_repeated'].sum())} of {2 * n})")

    times = milliseconds({
        "flash forward": lambda: F.scaled_dot_product_attention(q, k, v),
        "S = Q K^T (fp32 matmul)": lambda: torch.matmul(q.float(), k.float().transpose(-2, -1)),
        "indicator on S": lambda: bitexact.repeated_max_torch(s, d, heads_per_chunk=4),
    })
    base = times["flash forward"]
    for name, ms in times.items():
        print(f"  {name:26s} {ms:8.3f} ms  {ms / base:6.2f}x the forward pass")
