#!/usr/bin/env python3
"""Forward-pass speed of our FP8 kernel (torch.ops.bitexact.flash_forward_fp8) against our bf16 standard
kernel (wgmma) and PyTorch's flash backend, on the device machine, in one run:

    python3 cuda/attention/bench_flash_fp8.py [REPEATS]

Shapes: B 1, H 16, N 16384 and B 4, H 16, N 4096 at d 128 (issue 33's), B 4, H 16, N 4096 at d 64; causal
and not. Each entry is the median of REPEATS (default 5) timings of 10 calls between CUDA events, the
kernels timed in turns whose order rotates from repeat to repeat. The fp8 operator's time includes its
pass over V into the kernel's V^T layout ("fp8 call"); that pass is also timed alone (fp8_value_layout,
"V^T copy"), and
"fp8 kernel" is the difference. TFLOP/s counts 4 B H N^2 d flops, half under the causal mask.
"""
import os
import subprocess
import sys

import torch

import bitexact.torch  # noqa: F401 (PYTHONPATH=build/python, or pip install)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_flash_forward import milliseconds  # noqa: E402 (the same turns and medians)

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5


smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True,
                     text=True).stdout.strip()
print(f"GPU {smi}; torch {torch.__version__}, CUDA {torch.version.cuda}; median of {repeats}\n")
print("| B H N d | causal | PyTorch flash | ours bf16 | fp8 call | fp8 kernel | fp8 stabilized, across (calls) | "
      "fp8 pv_fp32_add, with p_bar_sum (calls) | V^T copy (ms) | fp8 call / bf16 | fp8 kernel / bf16 |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
gen = torch.Generator(device="cuda").manual_seed(0)
for B, H, N, d in ((1, 16, 16384, 128), (4, 16, 4096, 128), (4, 16, 4096, 64)):
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    scale = d ** -0.5
    for causal in (False, True):
        flops = 4 * B * H * N * N * d / (2 if causal else 1)
        calls = {
            "flash": lambda: torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False),
            "bf16": lambda: torch.ops.bitexact.flash_forward(q, k, v, causal, scale, 0, 2.0, 1e-3, "wgmma"),
            "vt": lambda: torch.ops.bitexact.fp8_value_layout(v8),
        }
        for rule, name in enumerate(("fp8", "fp8 stabilized", "fp8 across")):
            calls[name] = (lambda rule: lambda: torch.ops.bitexact.flash_forward_fp8(
                q8, k8, v8, causal, scale, 1.0, 1.0, 1.0, 256.0, 1.0 / 256, 1.0, rule, 2.0, 1e-3, False))(rule)
        for name, p_bar_sum in (("fp8 pv_fp32_add", False), ("fp8 p_bar_sum", True)):
            calls[name] = (lambda p_bar_sum: lambda: torch.ops.bitexact.flash_forward_fp8(
                q8, k8, v8, causal, scale, 1.0, 1.0, 1.0, 256.0, 1.0 / 256, 1.0, 0, 2.0, 1e-3, False, True,
                p_bar_sum))(p_bar_sum)
        ms = milliseconds(calls, repeats, count=10, warmup=2)
        ms["fp8 kernel"] = ms["fp8"] - ms["vt"]
        t = {name: flops / x / 1e9 for name, x in ms.items()}
        print(f"| {B} {H} {N} {d} | {'yes' if causal else 'no'} | {t['flash']:.0f} | {t['bf16']:.0f} | "
              f"{t['fp8']:.0f} | {t['fp8 kernel']:.0f} | {t['fp8 stabilized']:.0f}, {t['fp8 across']:.0f} | "
              f"{t['fp8 pv_fp32_add']:.0f}, {t['fp8 p_bar_sum']:.0f} | {ms['vt']:.3f} | {ms['bf16'] / ms['fp8']:.2f} | "
              f"{ms['bf16'] / ms['fp8 kernel']:.2f} |", flush=True)
