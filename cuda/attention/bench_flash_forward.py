#!/usr/bin/env python3
"""Forward-pass speed of PyTorch's flash backend, cuDNN's attention and our
kernels (standard, stabilized per block and across blocks; in FA2's structure,
flash_forward.cu, and in Hopper's, flash_forward_wgmma.cu), on the device
machine, in one run:

    python3 cuda/attention/bench_flash_forward.py [REPEATS]

B 4, H 16, N 4096, d 64 and 128, causal and not, bf16. Each entry is the
median of REPEATS (default 5) timings of 20 calls between CUDA events, after
warm-up calls; TFLOP/s counts 4 B H N^2 d flops, half of it under the causal
mask (FlashAttention's convention). PyTorch flash and our six kernels are
timed in turns within each repeat, the order rotated from repeat to repeat;
cuDNN is timed on its own afterwards: a kernel timed right after cuDNN's
(about twice the others' power) ran slower (docs/performance.md).
Prints a Markdown table for docs/performance.md with the GPU, driver, CUDA
and PyTorch versions.
"""
import os
import statistics
import subprocess
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
import bitexact.torch as bitexact_torch  # noqa: E402 (PYTHONPATH=build/python, or pip install)

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
B, H, N = 4, 16, 4096


def milliseconds(calls, repeats, count=20, warmup=3):
    """Median time of one call of each, timed in turns whose order rotates
    from repeat to repeat (so that clock drift, and what ran just before,
    favour none of them)."""
    for call in calls.values():
        for _ in range(warmup):
            call()
    torch.cuda.synchronize()
    times = {name: [] for name in calls}
    names = list(calls)
    for repeat in range(repeats):
        for name in names[repeat % len(names):] + names[:repeat % len(names)]:
            call = calls[name]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(count):
                call()
            end.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(end) / count)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip()
    print(f"GPU {smi}, {torch.cuda.get_device_properties(0).multi_processor_count} SMs; torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}; B {B} H {H} N {N}, median of {repeats}\n")
    print("| d | causal | PyTorch flash | cuDNN | FA2 structure: standard, stabilized, across | "
          "wgmma: standard, stabilized, across | FA2 standard / flash | wgmma standard / flash | "
          "wgmma stabilized / standard | wgmma across / standard |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for d in (64, 128):
        q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
        for causal in (False, True):
            flops = 4 * B * H * N * N * d / (2 if causal else 1)
            scale = d ** -0.5

            def flash():
                torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def ours(structure, rule):
                return lambda: bitexact_torch.flash_forward(q, k, v, causal, scale, rule, 2.0, 1e-3, structure)

            calls = {"flash": flash}
            for structure in ("fa2", "wgmma"):
                for rule, name in enumerate(("standard", "stabilized", "across")):
                    calls[f"{structure} {name}"] = ours(structure, rule)
            times = milliseconds(calls, repeats)
            times.update(milliseconds({"cudnn": cudnn}, repeats))
            t = {name: flops / ms / 1e9 for name, ms in times.items()}
            row = lambda s: ", ".join(f"{t[f'{s} {n}']:.0f}" for n in ("standard", "stabilized", "across"))  # noqa: E731
            print(f"| {d} | {'yes' if causal else 'no'} | {t['flash']:.0f} | {t['cudnn']:.0f} | {row('fa2')} | "
                  f"{row('wgmma')} | {t['fa2 standard'] / t['flash']:.2f} | {t['wgmma standard'] / t['flash']:.2f} | "
                  f"{t['wgmma stabilized'] / t['wgmma standard']:.3f} | {t['wgmma across'] / t['wgmma standard']:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
