#!/usr/bin/env python3
"""Three calls of one of our flash-attention kernels (B 4, H 16, N 4096, bf16,
no mask), for Nsight Compute on the device machine; docs/performance.md's
"What limits each kernel" came from the third call of each:

    ncu --kernel-name regex:flash_forward --launch-skip 2 --launch-count 1 \\
        --metrics smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,\\
    sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,\\
    sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active,\\
    gpu__time_duration.sum,'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio' \\
        python3 cuda/attention/profile_flash_forward.py HEAD_DIM RULE STRUCTURE

HEAD_DIM 64 or 128; RULE 0 (standard), 1 (stabilized), 2 (across blocks);
STRUCTURE wgmma (default) or fa2 (bitexact.torch.STRUCTURES), or fp8: our FP8 kernel
(flash_forward_fp8) on the same inputs quantised to e4m3 (its V^T pass is another kernel).
"""
import os
import sys

import torch

import bitexact.torch as bitexact_torch  # noqa: E402 (PYTHONPATH=build/python, or pip install)

if len(sys.argv) not in (3, 4):
    sys.exit(__doc__)
d, rule = int(sys.argv[1]), int(sys.argv[2])
structure = sys.argv[3] if len(sys.argv) == 4 else "wgmma"
q, k, v = (torch.randn(4, 16, 4096, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
if structure == "fp8":
    (q, dq), (k, dk), (v, dv) = (bitexact_torch.quantise_e4m3(x) for x in (q, k, v))
for _ in range(3):
    if structure == "fp8":
        bitexact_torch.flash_forward_fp8(q, k, v, False, d ** -0.5, dq, dk, dv, 256.0, 1.0 / 256, 1.0, rule, 2.0,
                                         1e-3, False)
    else:
        bitexact_torch.flash_forward(q, k, v, False, d ** -0.5, rule, 2.0, 1e-3, structure)
torch.cuda.synchronize()
