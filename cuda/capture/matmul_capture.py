#!/usr/bin/env python3
"""Captures what PyTorch's cuBLAS computes for matrix products on the GPU: bf16
and fp16 torch.matmul (plain and split-K shapes), bf16 F.linear with a bias, and
torch._scaled_mm on fp8 inputs (per-tensor and row-wise scales, fast
accumulation on and off), for bitexact's matrix-product descriptions (issue 30).

Run on the device machine:

    python3 cuda/capture/matmul_capture.py OUTDIR [WORKDIR]

For every case it generates the inputs on the CPU from a fixed seed (NumPy,
so a run reproduces them without the GPU), runs the product twice under
torch.profiler and checks that both runs give the same bits, and writes a
folder WORKDIR/cases/<name>/ of .npy bit patterns: a [M,K], b [K,N] (row-major
as the product reads it, also for _scaled_mm, whose B is passed column-major),
bias [N] where there is one, d [M,N] (bf16 and fp16 as uint16, fp8 as uint8,
fp32 as uint32), scale_a / scale_b as float32. WORKDIR/manifest.json lists every
case (operation, shape, dtypes, seed, distribution, the kernels launched by
each run with their grids and blocks, whether the two runs agree) and the
versions (GPU, SM count, driver, CUDA, PyTorch, cuBLAS/cuBLASLt, the reduced
precision flags). cuBLAS and cuBLASLt API logs go to WORKDIR/logs/. Then
WORKDIR is packed into OUTDIR/capture_partN.tar files of at most 15 MiB each
(the device tool brings back files of at most 16 MiB).
"""
import ctypes
import datetime
import json
import os
import subprocess
import sys
import tarfile
import tempfile

OUTDIR = sys.argv[1] if len(sys.argv) > 1 else "matmul_out"
WORKDIR = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="matmul_capture_")
LOGDIR = os.path.join(WORKDIR, "logs")
os.makedirs(OUTDIR, exist_ok=True)
os.makedirs(LOGDIR, exist_ok=True)
# The libraries read their logging settings when they load: set before torch.
os.environ.setdefault("CUBLASLT_LOG_LEVEL", "5")
os.environ.setdefault("CUBLASLT_LOG_FILE", os.path.join(LOGDIR, "cublaslt_%i.log"))
os.environ.setdefault("CUBLAS_LOGINFO_DBG", "1")
os.environ.setdefault("CUBLAS_LOGDEST_DBG", os.path.join(LOGDIR, "cublas.log"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

STORAGE = {torch.bfloat16: (torch.int16, np.uint16), torch.float16: (torch.int16, np.uint16),
           torch.float32: (torch.int32, np.uint32), torch.float8_e4m3fn: (torch.uint8, np.uint8),
           torch.float8_e5m2: (torch.uint8, np.uint8)}
NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32",
         torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}


def bits(t):
    view, np_type = STORAGE[t.dtype]
    return t.view(view).contiguous().cpu().numpy().view(np_type)


def from_float32(x, dtype):
    """A float32 NumPy array rounded to dtype (nearest even; fp8 saturated first) on the CPU."""
    t = torch.from_numpy(np.ascontiguousarray(x, np.float32))
    if dtype == torch.float8_e4m3fn:
        t = t.clamp(-448, 448)
    if dtype == torch.float8_e5m2:
        t = t.clamp(-57344, 57344)
    return t.to(dtype)


def draw(rng, shape, dist):
    """float32 values: normal N(0,1); mixed N(0,1) * 2^U{-10..10} per element (products of very
    different sizes, so truncation below the largest term matters); positive |N(0,1)| * 2^U{-6..6}
    (same-sign sums that grow, carries); fp8 variants with smaller exponent spreads."""
    n = rng.standard_normal(shape).astype(np.float32)
    if dist == "normal":
        return n
    if dist == "mixed":
        return n * np.exp2(rng.integers(-10, 11, shape)).astype(np.float32)
    if dist == "positive":
        return np.abs(n) * np.exp2(rng.integers(-6, 7, shape)).astype(np.float32)
    if dist == "fp8_normal":
        return 4 * n
    if dist == "fp8_mixed":
        return n * np.exp2(rng.integers(-5, 6, shape)).astype(np.float32)
    if dist == "tf32_ties":
        # The 13 bits a tf32 operand drops set to a tie (0x1000), just below or above it, or at random,
        # so that truncating, rounding to nearest even and rounding ties away give different operands.
        x = (n * np.exp2(rng.integers(-4, 5, shape)).astype(np.float32)).view(np.uint32)
        low = np.array([0x1000, 0x0FFF, 0x1001, 0], np.uint32)[rng.integers(0, 4, shape)]
        low = np.where(low == 0, rng.integers(0, 1 << 13, shape).astype(np.uint32), low)
        return ((x & np.uint32(0xFFFFE000)) | low).view(np.float32)
    raise ValueError(dist)


# (name, op, M, N, K, dtype / fp8 types, dist, extra)
CASES = []


def case(name, op, m, n, k, dist, seed=None, **extra):
    """A case; its seed is 1000 + its place in the list unless given (a case whose place moved after it was
    captured keeps the seed its committed inputs came from)."""
    CASES.append(dict(name=name, op=op, M=m, N=n, K=k, dist=dist, seed=seed or 1000 + len(CASES), **extra))


# bf16 torch.matmul: plain shapes, then long-K shapes that run split-K kernels.
case("bf16_plain_256x256x1024", "matmul", 256, 256, 1024, "normal", dtype="bf16")
case("bf16_plain_256x256x1024_mixed", "matmul", 256, 256, 1024, "mixed", dtype="bf16")
case("bf16_plain_512x384x768", "matmul", 512, 384, 768, "positive", dtype="bf16")
case("bf16_plain_17x33x65", "matmul", 17, 33, 65, "mixed", dtype="bf16")
case("bf16_plain_1024x64x1024", "matmul", 1024, 64, 1024, "mixed", dtype="bf16")
case("bf16_plain_1024x1024x1024", "matmul", 1024, 1024, 1024, "normal", dtype="bf16")
case("bf16_splitk_128x128x4096", "matmul", 128, 128, 4096, "normal", dtype="bf16")
case("bf16_splitk_128x128x4096_mixed", "matmul", 128, 128, 4096, "mixed", dtype="bf16")
case("bf16_splitk_64x64x16384", "matmul", 64, 64, 16384, "normal", dtype="bf16")
case("bf16_splitk_96x200x3000", "matmul", 96, 200, 3000, "positive", dtype="bf16")
case("bf16_splitk_64x64x4096", "matmul", 64, 64, 4096, "mixed", dtype="bf16")
case("bf16_splitk_32x32x8192", "matmul", 32, 32, 8192, "positive", dtype="bf16")
case("bf16_splitk_64x128x2048", "matmul", 64, 128, 2048, "mixed", dtype="bf16")
case("bf16_splitk_16x16x32768", "matmul", 16, 16, 32768, "normal", dtype="bf16")
case("bf16_splitk_256x128x8192", "matmul", 256, 128, 8192, "mixed", dtype="bf16")
case("bf16_splitk_128x128x4096_noreduced", "matmul", 128, 128, 4096, "positive", dtype="bf16",
     reduced_precision_reduction=False)
# fp16 torch.matmul.
case("fp16_plain_256x256x1024", "matmul", 256, 256, 1024, "mixed", dtype="fp16")
case("fp16_plain_33x17x500", "matmul", 33, 17, 500, "normal", dtype="fp16")
case("fp16_splitk_128x128x4096", "matmul", 128, 128, 4096, "positive", dtype="fp16")
case("fp16_splitk_64x64x8192", "matmul", 64, 64, 8192, "mixed", dtype="fp16")
# bf16 F.linear(x, W, bias): x [M,K], W [N,K]; b is saved as W^T [K,N].
case("bf16_linear_256x512x1024", "linear", 256, 512, 1024, "mixed", dtype="bf16")
case("bf16_linear_64x64x8192", "linear", 64, 64, 8192, "positive", dtype="bf16")
case("bf16_linear_128x96x640", "linear", 128, 96, 640, "normal", dtype="bf16")
# torch._scaled_mm, fp8 inputs, per-tensor scales (not 1).
for fast in (True, False):
    tag = "fast" if fast else "default"
    for out in ("bf16", "fp32"):
        case(f"fp8_e4m3_{out}_{tag}_256x256x1024", "scaled_mm", 256, 256, 1024, "fp8_mixed",
             a_type="e4m3", b_type="e4m3", out=out, fast_accum=fast, scale_a=0.3, scale_b=1.7)
    case(f"fp8_e4m3_bf16_{tag}_128x192x4096", "scaled_mm", 128, 192, 4096, "fp8_normal",
         a_type="e4m3", b_type="e4m3", out="bf16", fast_accum=fast, scale_a=0.0625, scale_b=0.75)
    case(f"fp8_e4m3_bf16_{tag}_64x128x256", "scaled_mm", 64, 128, 256, "fp8_mixed",
         a_type="e4m3", b_type="e4m3", out="bf16", fast_accum=fast, scale_a=1.3, scale_b=0.9)
    case(f"fp8_e4m3_fp32_{tag}_64x64x2048", "scaled_mm", 64, 64, 2048, "fp8_mixed",
         a_type="e4m3", b_type="e4m3", out="fp32", fast_accum=fast, scale_a=0.3, scale_b=1.7)
case("fp8_e5m2xe4m3_bf16_fast_128x128x1024", "scaled_mm", 128, 128, 1024, "fp8_mixed",
     a_type="e5m2", b_type="e4m3", out="bf16", fast_accum=True, scale_a=0.5, scale_b=1.1)
case("fp8_e5m2xe4m3_bf16_default_128x128x1024", "scaled_mm", 128, 128, 1024, "fp8_mixed",
     a_type="e5m2", b_type="e4m3", out="bf16", fast_accum=False, scale_a=0.5, scale_b=1.1)
case("fp8_e4m3_bf16_rowwise_fast_128x256x1024", "scaled_mm", 128, 256, 1024, "fp8_mixed",
     a_type="e4m3", b_type="e4m3", out="bf16", fast_accum=True, scale_a="rowwise", scale_b="rowwise")
case("fp8_e4m3_bf16_rowwise_default_128x256x1024", "scaled_mm", 128, 256, 1024, "fp8_mixed",
     a_type="e4m3", b_type="e4m3", out="bf16", fast_accum=False, scale_a="rowwise", scale_b="rowwise")
# Second capture (appended, so the cases above keep their seeds): the epilogue's alpha and beta x C
# (torch.addmm), the missing fp8 pairing, fp16 out, fp8 at long K, DeepSeek-style block scales,
# and fp32 products on the tf32 tensor core (allow_tf32).
case("bf16_addmm_256x256x1024", "addmm", 256, 256, 1024, "mixed", dtype="bf16", alpha=2.0, beta=0.5)
case("bf16_addmm_128x128x4096_splitk", "addmm", 128, 128, 4096, "normal", dtype="bf16", alpha=1.0, beta=1.0)
case("bf16_addmm_128x128x4096_splitk_scaled", "addmm", 128, 128, 4096, "positive", dtype="bf16",
     alpha=-1.25, beta=0.75)
case("fp16_addmm_256x256x1024", "addmm", 256, 256, 1024, "mixed", dtype="fp16", alpha=3.0, beta=0.5)
case("bf16_addmm_128x96x640_beta0", "addmm", 128, 96, 640, "normal", dtype="bf16", alpha=0.7, beta=0.0)
for fast in (True, False):
    tag = "fast" if fast else "default"
    case(f"fp8_e4m3xe5m2_bf16_{tag}_128x128x1024", "scaled_mm", 128, 128, 1024, "fp8_mixed",
         a_type="e4m3", b_type="e5m2", out="bf16", fast_accum=fast, scale_a=0.5, scale_b=1.1)
    case(f"fp8_e4m3_fp16_{tag}_128x128x1024", "scaled_mm", 128, 128, 1024, "fp8_mixed",
         a_type="e4m3", b_type="e4m3", out="fp16", fast_accum=fast, scale_a=0.25, scale_b=0.5)
    case(f"fp8_e4m3_bf16_{tag}_64x64x16384", "scaled_mm", 64, 64, 16384, "fp8_normal",
         a_type="e4m3", b_type="e4m3", out="bf16", fast_accum=fast, scale_a=0.0625, scale_b=0.125)
case("fp8_e4m3_bf16_block1x128x128x128_256x256x1024", "scaled_mm", 256, 256, 1024, "fp8_mixed",
     a_type="e4m3", b_type="e4m3", out="bf16", fast_accum=False, scale_a="block1x128", scale_b="block128x128")
case("fp8_e4m3_bf16_block1x128x1x128_256x256x1024", "scaled_mm", 256, 256, 1024, "fp8_mixed",
     a_type="e4m3", b_type="e4m3", out="bf16", fast_accum=False, scale_a="block1x128", scale_b="block1x128")
case("fp32_tf32_256x256x1024", "matmul", 256, 256, 1024, "mixed", dtype="fp32", tf32=True)
# Third capture: fp32 outputs, which keep what a bf16 output rounds away, to tell apart the orders
# of alpha and beta x C, of the block scales, and of the fp8 split-K scaling.
case("bf16_mm_fp32out_128x128x4096_splitk", "matmul", 128, 128, 4096, "normal", dtype="bf16", out_dtype="fp32")
case("bf16_addmm_fp32out_256x256x1024", "addmm", 256, 256, 1024, "mixed", dtype="bf16", out_dtype="fp32",
     alpha=0.7, beta=1.3)
case("bf16_addmm_fp32out_128x128x4096_splitk", "addmm", 128, 128, 4096, "normal", dtype="bf16", out_dtype="fp32",
     alpha=0.7, beta=1.3)
for fast in (True, False):
    tag = "fast" if fast else "default"
    case(f"fp8_e4m3_fp32_{tag}_64x64x16384_splitk", "scaled_mm", 64, 64, 16384, "fp8_normal",
         a_type="e4m3", b_type="e4m3", out="fp32", fast_accum=fast, scale_a=0.3, scale_b=1.7)
case("fp8_e4m3_fp32_block1x128x128x128_256x256x2048", "scaled_mm", 256, 256, 2048, "fp8_mixed",
     a_type="e4m3", b_type="e4m3", out="fp32", fast_accum=False, scale_a="block1x128", scale_b="block128x128")
case("fp8_e4m3_fp32_block1x128x1x128_256x256x2048", "scaled_mm", 256, 256, 2048, "fp8_mixed",
     a_type="e4m3", b_type="e4m3", out="fp32", fast_accum=False, scale_a="block1x128", scale_b="block1x128")
case("fp32_tf32_128x128x4096", "matmul", 128, 128, 4096, "normal", seed=1051, dtype="fp32", tf32=True)
# Fourth capture: fp32 products on the tf32 tensor core (allow_tf32) at more shapes, with the bits
# a tf32 operand drops set to ties (how the kernel converts fp32 to tf32), F.linear and addmm.
case("fp32_tf32_256x256x1024_ties", "matmul", 256, 256, 1024, "tf32_ties", dtype="fp32", tf32=True)
case("fp32_tf32_512x512x512_mixed", "matmul", 512, 512, 512, "mixed", dtype="fp32", tf32=True)
case("fp32_tf32_1024x1024x1024_ties", "matmul", 1024, 1024, 1024, "tf32_ties", dtype="fp32", tf32=True)
case("fp32_tf32_64x64x16384_ties", "matmul", 64, 64, 16384, "tf32_ties", dtype="fp32", tf32=True)
case("fp32_tf32_96x200x3000_positive", "matmul", 96, 200, 3000, "positive", dtype="fp32", tf32=True)
case("fp32_tf32_linear_256x512x1024_ties", "linear", 256, 512, 1024, "tf32_ties", dtype="fp32", tf32=True)
case("fp32_tf32_addmm_256x256x1024_ties", "addmm", 256, 256, 1024, "tf32_ties", dtype="fp32", tf32=True,
     alpha=0.7, beta=1.3)
# How split-K cuts a K that is no multiple of the 32-wide K tile (96x200x3000 split at multiples of 8).
case("fp32_tf32_96x200x3004_positive", "matmul", 96, 200, 3004, "positive", dtype="fp32", tf32=True)
case("fp32_tf32_96x200x2000_mixed", "matmul", 96, 200, 2000, "mixed", dtype="fp32", tf32=True)
case("fp32_tf32_64x64x4100_ties", "matmul", 64, 64, 4100, "tf32_ties", dtype="fp32", tf32=True)
case("fp32_tf32_64x96x5000_positive", "matmul", 64, 96, 5000, "positive", dtype="fp32", tf32=True)
case("fp32_tf32_64x64x6001_positive", "matmul", 64, 64, 6001, "positive", dtype="fp32", tf32=True)
case("fp32_tf32_32x48x7002_mixed", "matmul", 32, 48, 7002, "mixed", dtype="fp32", tf32=True)

TYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
         "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def build(c):
    """CPU inputs and a function that runs the product on the GPU."""
    rng = np.random.default_rng(c["seed"])
    m, n, k = c["M"], c["N"], c["K"]
    saved = {}
    if c["op"] in ("matmul", "linear", "addmm"):
        dtype = TYPES[c["dtype"]]
        a = from_float32(draw(rng, (m, k), c["dist"]), dtype)
        b = from_float32(draw(rng, (k, n), c["dist"]), dtype)
        saved["a"], saved["b"] = a, b
        ga, gb = a.cuda(), b.cuda()
        out_dtype = TYPES[c["out_dtype"]] if "out_dtype" in c else None
        if c["op"] == "matmul":
            if out_dtype is not None:  # torch.mm's out_dtype: bf16 inputs, an fp32 output
                return saved, lambda: torch.mm(ga, gb, out_dtype=out_dtype)
            return saved, lambda: torch.matmul(ga, gb)
        if c["op"] == "addmm":
            cm = from_float32(draw(rng, (m, n), c["dist"]), out_dtype or dtype)
            saved["c"] = cm
            gc, alpha, beta = cm.cuda(), c["alpha"], c["beta"]
            if out_dtype is not None:
                return saved, lambda: torch.addmm(gc, ga, gb, out_dtype=out_dtype, beta=beta, alpha=alpha)
            return saved, lambda: torch.addmm(gc, ga, gb, beta=beta, alpha=alpha)
        bias = from_float32(draw(rng, (n,), "normal"), dtype)
        saved["bias"] = bias
        w, gbias = gb.t().contiguous(), bias.cuda()
        return saved, lambda: F.linear(ga, w, gbias)
    a_type, b_type, out = TYPES[c["a_type"]], TYPES[c["b_type"]], TYPES[c["out"]]
    a = from_float32(draw(rng, (m, k), c["dist"]), a_type)
    bt = from_float32(draw(rng, (n, k), c["dist"]), b_type)  # [N,K] contiguous: B column-major
    saved["a"], saved["b"] = a, bt.t()
    if c["scale_a"] == "rowwise":
        sa = torch.from_numpy((0.5 + rng.random((m, 1))).astype(np.float32))
        sb = torch.from_numpy((0.5 + rng.random((1, n))).astype(np.float32))
    elif c["scale_a"] == "block1x128":
        # Saved as plain row-major arrays: scale_a [M, K/128], scale_b [K/128, N/128] (128 x 128
        # blocks of B) or [K/128, N] (1 x 128 blocks along K of each column of B); passed to
        # PyTorch in the strides ScaledBlas.cpp asks for (outer dimension major).
        sa = torch.from_numpy((0.5 + rng.random((m, k // 128))).astype(np.float32))
        shape_b = (k // 128, n // 128) if c["scale_b"] == "block128x128" else (k // 128, n)
        sb = torch.from_numpy((0.5 + rng.random(shape_b)).astype(np.float32))
        saved["scale_a"], saved["scale_b"] = sa, sb
        ga, gb = a.cuda(), bt.cuda().t()
        gsa = sa.cuda().t().contiguous().t()  # [M, K/128], stride (1, M)
        # b.t() is [N, K]; its scales, transposed, must be [N/128, K/128] row-major (128 x 128) or
        # [N, K/128] with stride (1, N) (1 x 128): so [K/128, N/128] column-major, or [K/128, N] row-major.
        gsb = sb.cuda().t().contiguous().t() if c["scale_b"] == "block128x128" else sb.cuda().contiguous()
        def blockwise():
            try:
                return torch._scaled_mm(ga, gb, scale_a=gsa, scale_b=gsb, out_dtype=out, use_fast_accum=False)
            except Exception as first:  # noqa: BLE001
                if not hasattr(F, "scaled_mm"):
                    raise
                print(f"{c['name']}: torch._scaled_mm refused ({first!r}); trying F.scaled_mm", flush=True)
                kinds = F.ScalingType
                kind_b = kinds.BlockWise128x128 if c["scale_b"] == "block128x128" else kinds.BlockWise1x128
                return F.scaled_mm(ga, gb, gsa, kinds.BlockWise1x128, gsb, kind_b, output_dtype=out)
        return saved, blockwise
    else:
        sa, sb = torch.tensor(c["scale_a"], dtype=torch.float32), torch.tensor(c["scale_b"], dtype=torch.float32)
    saved["scale_a"], saved["scale_b"] = sa, sb
    ga, gb, gsa, gsb = a.cuda(), bt.cuda().t(), sa.cuda(), sb.cuda()
    fast = c["fast_accum"]
    return saved, lambda: torch._scaled_mm(ga, gb, scale_a=gsa, scale_b=gsb, out_dtype=out, use_fast_accum=fast)


def kernels_of(prof_trace):
    ks = sorted((e["ts"], e["name"], e.get("args", {}).get("grid"), e.get("args", {}).get("block"))
                for e in prof_trace["traceEvents"] if e.get("cat") == "kernel")
    return [[name, grid, block] for _, name, grid, block in ks]


def run_case(c):
    saved, call = build(c)
    torch.backends.cuda.matmul.allow_tf32 = bool(c.get("tf32", False))
    flag_b = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    flag_h = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    if "reduced_precision_reduction" in c:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = c["reduced_precision_reduction"]
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = c["reduced_precision_reduction"]
    try:
        call()  # warm-up: heuristics, workspace
        torch.cuda.synchronize()
        runs = []
        for _ in range(2):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                d = call()
                torch.cuda.synchronize()
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                prof.export_chrome_trace(f.name)
                trace = json.load(open(f.name))
            runs.append((bits(d), kernels_of(trace)))
    finally:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = flag_b
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = flag_h
    (d0, k0), (d1, k1) = runs
    folder = os.path.join(WORKDIR, "cases", c["name"])
    os.makedirs(folder, exist_ok=True)
    for key, t in saved.items():
        np.save(os.path.join(folder, key + ".npy"), t.numpy() if t.dtype == torch.float32 else bits(t))
    np.save(os.path.join(folder, "d.npy"), d0)
    entry = dict(c, out_dtype=NAMES[d.dtype], repeat_identical=bool(np.array_equal(d0, d1)),
                 repeat_differing=int((d0 != d1).sum()), kernels=k0, kernels_second_run=k1)
    print(f"{c['name']}: {len(k0)} kernels {[k[0][:90] for k in k0]} grids {[k[1] for k in k0]} "
          f"repeat_identical={entry['repeat_identical']}", flush=True)
    return entry


def library_versions():
    found = {}
    for line in open("/proc/self/maps"):
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if "cublas" in os.path.basename(path) and path not in found.values():
            found[os.path.basename(path)] = path
    out = {"loaded": sorted(found.values())}
    for base, path in found.items():
        lib = ctypes.CDLL(path)
        if base.startswith("libcublasLt"):
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            out["cublasLt"] = int(lib.cublasLtGetVersion())
        elif base.startswith("libcublas."):
            v = ctypes.c_int()
            if hasattr(lib, "cublasGetProperty"):
                parts = []
                for prop in range(3):
                    lib.cublasGetProperty(prop, ctypes.byref(v))
                    parts.append(v.value)
                out["cublas"] = ".".join(map(str, parts))
    return out


def versions():
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    props = torch.cuda.get_device_properties(0)
    try:
        libs = library_versions()
    except Exception as e:  # noqa: BLE001
        libs = {"error": repr(e)}
    return {
        "gpu": props.name, "sm_count": props.multi_processor_count, "capability": f"{props.major}.{props.minor}",
        "nvidia_smi": smi, "torch": torch.__version__, "cuda": torch.version.cuda, "libraries": libs,
        "preferred_blas_library": str(torch.backends.cuda.preferred_blas_library()),
        "allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "allow_fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def survey():
    """The kernels (names, grids) that bf16 and fp16 torch.matmul launch over a grid of shapes, on
    zero inputs (cuBLAS's choice reads the shape, not the values): how the split count follows the shape."""
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        for mn in ((16, 16), (32, 32), (64, 64), (96, 200), (128, 128), (128, 256), (256, 256), (512, 512)):
            for k in (512, 1024, 2048, 3000, 4096, 8192, 16384, 32768):
                m, n = mn
                a, b = torch.zeros(m, k, dtype=dtype, device="cuda"), torch.zeros(k, n, dtype=dtype, device="cuda")
                torch.matmul(a, b)
                torch.cuda.synchronize()
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    torch.matmul(a, b)
                    torch.cuda.synchronize()
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    prof.export_chrome_trace(f.name)
                    trace = json.load(open(f.name))
                rows.append({"dtype": NAMES[dtype], "M": m, "N": n, "K": k, "kernels": kernels_of(trace)})
    for r in rows:
        print(f"survey {r['dtype']} {r['M']}x{r['N']}x{r['K']}: " +
              "; ".join(f"{name[:80]} grid {grid}" for name, grid, _ in r["kernels"]))
    return rows


def trim_logs(keep=3 << 20):
    """Keeps the first and last `keep` bytes of a long log."""
    for name in os.listdir(LOGDIR):
        path = os.path.join(LOGDIR, name)
        if os.path.getsize(path) > 2 * keep:
            with open(path, "rb") as f:
                head = f.read(keep)
                f.seek(-keep, 2)
                tail = f.read()
            with open(path, "wb") as f:
                f.write(head + b"\n[... trimmed ...]\n" + tail)


def pack(limit=15 << 20):
    """WORKDIR's cases and logs into OUTDIR/capture_partN.tar, each at most `limit` bytes (a case stays whole)."""
    items = []
    for root, _, files in os.walk(os.path.join(WORKDIR, "cases")):
        if files:
            items.append((sum(os.path.getsize(os.path.join(root, f)) for f in files), os.path.relpath(root, WORKDIR)))
    items.append((sum(os.path.getsize(os.path.join(LOGDIR, f)) for f in os.listdir(LOGDIR)), "logs"))
    parts, current, size = [], [], 0
    for item_size, rel in sorted(items, key=lambda x: x[1]):
        if current and size + item_size > limit:
            parts.append(current)
            current, size = [], 0
        current.append(rel)
        size += item_size
    parts.append(current + ["manifest.json"])
    for i, rels in enumerate(parts):
        with tarfile.open(os.path.join(OUTDIR, f"capture_part{i}.tar"), "w") as tar:
            for rel in rels:
                tar.add(os.path.join(WORKDIR, rel), arcname=rel)
    print(f"packed {len(items)} folders into {len(parts)} tar files")


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    entries = []
    # MATMUL_CASES=prefix,prefix runs only the cases whose names start so (a later capture's
    # additions); MATMUL_SURVEY=0 leaves out the survey of kernel choices.
    only = [p for p in os.environ.get("MATMUL_CASES", "").split(",") if p]
    if hasattr(F, "scaled_mm"):
        import inspect
        print(f"F.scaled_mm{inspect.signature(F.scaled_mm)}", flush=True)
    for c in CASES:
        if only and not any(c["name"].startswith(p) for p in only):
            continue
        try:
            entries.append(run_case(c))
        except Exception as e:  # noqa: BLE001
            print(f"{c['name']}: FAILED {e!r}", flush=True)
            entries.append(dict(c, error=repr(e)))
    try:
        rows = survey() if os.environ.get("MATMUL_SURVEY", "1") != "0" else []
    except Exception as e:  # noqa: BLE001
        print(f"survey: FAILED {e!r}", flush=True)
        rows = [{"error": repr(e)}]
    manifest = {"versions": versions(), "cases": entries, "survey": rows}
    trim_logs()
    json.dump(manifest, open(os.path.join(WORKDIR, "manifest.json"), "w"), indent=1)
    json.dump(manifest, open(os.path.join(OUTDIR, "manifest.json"), "w"), indent=1)
    print(json.dumps(manifest["versions"], indent=1))
    pack()


if __name__ == "__main__":
    main()
