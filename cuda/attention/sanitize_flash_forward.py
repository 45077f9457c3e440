#!/usr/bin/env python3
"""A few small calls of our three kernels and the indicator variant, in both
structures (FA2's and wgmma's), and of our FP8 kernel (its rules, the
indicator, pv_fp32_add and its p_bar_sum, grouped K/V heads), for compute-sanitizer on the device
machine (odd lengths, N = 1, query and key lengths that differ, rows wholly
masked, NaN and infinite inputs, both head dims, causal and not), and calls
with 160 heads, whose persistent wgmma thread blocks take several row blocks
each (no mask):

    compute-sanitizer --tool memcheck  python3 cuda/attention/sanitize_flash_forward.py [bf16|fp8]
    compute-sanitizer --tool racecheck python3 cuda/attention/sanitize_flash_forward.py [bf16|fp8]

(bf16 or fp8: only those kernels' calls; neither: both.)

bitexact.torch must be importable (PYTHONPATH=build/python after a CMake build with PyTorch found).
"""
import sys

import torch

import bitexact.torch as bitexact_torch  # noqa: E402 (PYTHONPATH=build/python, or pip install)

gen = torch.Generator().manual_seed(7)
calls = 0
which = sys.argv[1] if len(sys.argv) > 1 else "both"
for d in (64, 128) if which != "fp8" else ():
    for nq, nk in ((1, 1), (17, 17), (129, 129), (300, 1000), (1000, 300), (130, 257)):
        for causal in (False, True):
            q, k, v = (torch.randn(1, 2, n, d, generator=gen) for n in (nq, nk, nk))
            q[0, 0, 0, 0] = float("nan")
            k[0, 1, nk - 1, 1] = float("inf")
            v[0, 1, 0, 2] = float("-inf")
            q, k, v = (x.to("cuda", torch.bfloat16) for x in (q, k, v))
            for structure in bitexact_torch.STRUCTURES:
                for stabilize in (0, 1, 2):
                    bitexact_torch.flash_forward(q, k, v, causal, d ** -0.5, stabilize, 2.0, 1e-3, structure)
                    calls += 1
                bitexact_torch.flash_forward_with_indicator(q, k, v, causal, d ** -0.5, 1e-3, structure)
                calls += 1
for d in (64, 128) if which != "fp8" else ():
    for nq, nk in ((700, 700), (400, 900)):
        q, k, v = (torch.randn(1, 160, n, d, generator=gen).to("cuda", torch.bfloat16) for n in (nq, nk, nk))
        for stabilize in (0, 1, 2):
            bitexact_torch.flash_forward(q, k, v, False, d ** -0.5, stabilize, 2.0, 1e-3, "wgmma")
            calls += 1
        bitexact_torch.flash_forward_with_indicator(q, k, v, False, d ** -0.5, 1e-3, "wgmma")
        calls += 1
# The FP8 kernel: odd lengths, both masks, each rule with and without pv_fp32_add (and its p_bar_sum),
# the indicator, and grouped K/V heads read from a transposed [B, N, H, d] view.
for d in (64, 128) if which != "bf16" else ():
    for nq, nk in ((1, 1), (77, 77), (300, 1000), (1000, 300)):
        for causal in (False, True):
            q, k, v = (torch.randn(2, 4, n, d, generator=gen).to("cuda").to(torch.float8_e4m3fn) for n in (nq, nk, nk))
            for pv_fp32_add, p_bar_sum in ((False, False), (True, False), (True, True)):
                for stabilize in (0, 1, 2):
                    bitexact_torch.flash_forward_fp8(q, k, v, causal, d ** -0.5, 1.0, 1.0, 1.0, 256.0, 1 / 256, 1.0,
                                                     stabilize, 2.0, 1e-3, stabilize == 0, pv_fp32_add, p_bar_sum)
                    calls += 1
            q = torch.randn(2, nq, 4, d, generator=gen).to("cuda").to(torch.float8_e4m3fn).transpose(1, 2)
            k, v = (torch.randn(2, 2, nk, d, generator=gen).to("cuda").to(torch.float8_e4m3fn) for _ in range(2))
            bitexact_torch.flash_forward_fp8(q, k, v, causal, d ** -0.5)
            calls += 1
torch.cuda.synchronize()
print(f"{calls} calls done")
