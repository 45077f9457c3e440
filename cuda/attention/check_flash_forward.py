#!/usr/bin/env python3
"""Checks our flash-attention kernel (cuda/attention/flash_forward.cu) on the
device machine: every O and L element against PyTorch's flash backend on
shapes where PyTorch takes its single-split kernel, and the stabilized
variant's heads saved for the emulator. Run from the repository root:

    python3 cuda/attention/check_flash_forward.py OUT_DIR

It builds the kernel with nvcc alone (no other dependency), prints per shape
the elements compared and the mismatches, saves two stabilized heads under
OUT_DIR (check them with bitexact attention --preset
pytorch_sdpa_flash_sm90_stabilized --batch-heads 1,16 --causal), and times
B 4, H 16, N 4096, d 128 against PyTorch (CUDA events). Exit status 1 on any
mismatch with PyTorch.
"""
import ctypes
import math
import os
import subprocess
import sys

import numpy as np
import torch

if len(sys.argv) != 2:
    sys.exit(__doc__)
here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1]
lib_path = "/tmp/libbitexact_flash_forward.so"
subprocess.run(["nvcc", "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-fPIC", "-shared",
                os.path.join(here, "flash_forward.cu"), "-o", lib_path], check=True)
lib = ctypes.CDLL(lib_path)
lib.bitexact_flash_forward.argtypes = ([ctypes.c_void_p] * 5 + [ctypes.c_int] * 5 + [ctypes.c_float] +
                                       [ctypes.c_int, ctypes.c_float, ctypes.c_float, ctypes.c_void_p])

def ours(q, k, v, causal, stabilize=False, beta=2.0, eps=1e-3):
    B, H, N, d = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, device="cuda", dtype=torch.float32)
    scale = float(np.float32(1.0 / math.sqrt(d)))  # PyTorch's default, as the kernel receives it
    rc = lib.bitexact_flash_forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), B * H, N,
                                    k.shape[2], d, int(causal), scale, int(stabilize), beta, eps, None)
    assert rc == 0, rc
    torch.cuda.synchronize()
    return o, lse

# Integer Q and K with repeated keys: rows whose maximum repeats (positive, or all
# scores negative), V of negative mean, as in the paper.
def ties(B, H, N, d, positive, gen):
    q = torch.randint(-2, 3, (B, H, N, d), generator=gen).float()
    k = torch.randint(-2, 3, (B, H, N, d), generator=gen).float()
    # repeat a few keys so that rows tie at their max
    idx = torch.randint(0, N, (N // 8,), generator=gen)
    k[:, :, idx] = k[:, :, :1].expand(-1, -1, len(idx), -1)
    if not positive:
        q = -q.abs() - 1
        k = k.abs() + 1
    v = torch.randn(B, H, N, d, generator=gen) - 0.5
    return [x.to("cuda", torch.bfloat16) for x in (q, k, v)]

print(torch.cuda.get_device_name(), "torch", torch.__version__, "CUDA", torch.version.cuda)
gen = torch.Generator().manual_seed(0)
total = mism = 0
for (B, H, N, d, causal, kind) in [(1, 256, 17, 64, True, "normal"), (1, 256, 17, 128, False, "normal"),
                                   (1, 16, 1000, 64, True, "normal"), (1, 16, 1000, 128, False, "normal"),
                                   (1, 16, 1000, 128, True, "ties+"), (1, 16, 1000, 64, True, "ties-"),
                                   (1, 4, 4096, 128, True, "normal"), (1, 4, 4096, 64, False, "normal"),
                                   (2, 128, 128, 128, True, "normal"), (1, 256, 1, 64, False, "normal")]:
    if kind == "normal":
        q, k, v = (torch.randn(B, H, N, d, generator=gen).to("cuda", torch.bfloat16) for _ in range(3))
    else:
        q, k, v = ties(B, H, N, d, kind == "ties+", gen)
    ref_o, ref_lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)[:2]
    o, lse = ours(q, k, v, causal)
    bad_o = (o.view(torch.int16) != ref_o.view(torch.int16)).sum().item()
    bad_l = (lse.view(torch.int32) != ref_lse.view(torch.int32)).sum().item()
    total += o.numel() + lse.numel(); mism += bad_o + bad_l
    print(f"B{B} H{H} N{N} d{d} causal={causal} {kind}: O {o.numel()} mismatches {bad_o}, L {lse.numel()} mismatches {bad_l}")
print("total", total, "elements compared, mismatches", mism)
# stabilized: one head each, saved for the emulator
for name, (N, d, causal, kind) in {"stab_d64_ties": (1000, 64, True, "ties+"), "stab_d128_ties": (1000, 128, True, "ties-")}.items():
    q, k, v = ties(1, 16, N, d, kind == "ties+", gen)
    o, lse = ours(q, k, v, causal, stabilize=True)
    os.makedirs(os.path.join(out, name), exist_ok=True)
    for n, x in (("q", q), ("k", k), ("v", v), ("o", o)):
        np.save(os.path.join(out, name, n + ".npy"), x[0, :1].contiguous().view(torch.int16).cpu().numpy()[0])
    np.save(os.path.join(out, name, "lse.npy"), lse[0, :1].contiguous().cpu().numpy()[0])
# speed (informational): B4 H16 N4096 d128 non-causal
q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for label, f in (("pytorch flash", lambda: torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False)),
                 ("bitexact flash_forward.cu", lambda: ours(q, k, v, False))):
    f(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(5): f()
    e.record(); torch.cuda.synchronize()
    ms = s.elapsed_time(e) / 5
    print(label, f"{ms:.2f} ms", f"{4 * 4 * 16 * 4096 * 4096 * 128 / ms / 1e9:.0f} TFLOP/s")
sys.exit(1 if mism else 0)
