#!/usr/bin/env python3
"""Captures what Triton's tutorial matrix product (python/tutorials/03-matrix-multiplication.py of
triton-lang/triton: tl.dot over BLOCK_K tiles into an fp32 accumulator, autotuned over the
tutorial's sm_90 configurations keyed on M, N, K) computes on the GPU, and torch's products on the
same inputs, for bitexact's matrix-product descriptions (issue 30).

Run on the device machine from the repository root:

    python3 cuda/capture/triton_matmul_capture.py OUTDIR

Cases: bf16 and fp16 inputs (fp32 accumulator, output in the input format) and fp8 inputs, e4m3
and e5m2, with B passed column-major as the tutorial passes it on Hopper and an fp16 output (the
tutorial's), over shapes with blocks that fit, one that fits no block (200x130x333) and long K;
inputs from matmul_capture.py's distributions (scaled by a power of two where the sum would leave
the output's range). Each case is autotuned, then run twice (the bits of both compared); the
chosen config, its timings, and the facts of its compiled kernel that decide the arithmetic (the
dot's MMA version and instruction shape and maxNumImpreciseAcc from the TTGIR; wgmma / mma
instructions, the fp32 adds and conversions from the PTX; HGMMA / QGMMA / HMMA from the SASS) go to
manifest.json. On the same inputs: torch.matmul (bf16, fp16; for fp8 on the fp16 copies of the
inputs, as the tutorial compares) and, for fp8, torch._scaled_mm with unit scales into fp16, fast
accumulation on and off, each with its kernels and its cuBLASLt algorithm (CUBLASLT_LOG_LEVEL=5).
The `configs` cases run every one of the 16 configurations on one small shape (d_config<i>).
fp32 inputs (tl.dot's default tf32 precision) are compared with torch.matmul under allow_tf32.
TRITON_CASES=prefix,prefix runs only the cases whose names start so.

OUTDIR gets capture_partN.tar.gz: cases/<name>/ (a [M,K] and b [K,N] bit patterns, row-major as
the product reads them; d the Triton output; d_torch, d_scaled_fast, d_scaled_default), generated/
(TTGIR, PTX and SASS of every kernel that ran), logs/ (cuBLAS logs) and manifest.json. Inputs come
from NumPy with fixed seeds on the CPU, so a run reproduces them without the GPU.
CAPTURE_SECONDS (default 400) bounds the run: cases not begun by then are skipped and listed.
"""
import collections
import concurrent.futures
import inspect
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time

START = time.time()
BUDGET_S = float(os.environ.get("CAPTURE_SECONDS", "400"))
OUTDIR = sys.argv[1] if len(sys.argv) == 2 else sys.exit(__doc__)
# matmul_capture reads its folders from argv and sets the cuBLAS log variables when imported.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import matmul_capture as cublas_capture  # noqa: E402

WORKDIR = cublas_capture.WORKDIR
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(WORKDIR, "triton_cache"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

TYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
         "fp32": torch.float32}


def tutorial_sm90_configs():
    """The tutorial's get_cuda_autotune_config(), in its order: eight for 16-bit inputs, then eight
    it marks as good for fp8 (BLOCK_K 128 and 64)."""
    table = [  # BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_stages, num_warps; GROUP_SIZE_M is 8
        (128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
        (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (256, 64, 128, 4, 4), (64, 256, 128, 4, 4),
        (128, 128, 128, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 32, 64, 4, 4),
    ]
    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
                          num_stages=stages, num_warps=warps) for m, n, k, stages, warps in table]


CONFIGS = tutorial_sm90_configs()


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    """C = A B, one BLOCK_SIZE_M x BLOCK_SIZE_N tile of C per program, K walked in BLOCK_SIZE_K steps."""
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    # Programs go down GROUP_SIZE_M tile rows before moving right, so neighbours share tiles of B in L2.
    programs_per_group = GROUP_SIZE_M * tiles_n
    first_tile_m = (pid // programs_per_group) * GROUP_SIZE_M
    rows_in_group = min(tiles_m - first_tile_m, GROUP_SIZE_M)
    tile_m = first_tile_m + (pid % programs_per_group) % rows_in_group
    tile_n = (pid % programs_per_group) // rows_in_group

    # Rows and columns past the edge wrap around (their results are not stored), so loads need no mask there.
    a_rows = (tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    b_cols = (tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + a_rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile = b_ptr + ks[:, None] * stride_bk + b_cols[None, :] * stride_bn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - step * BLOCK_SIZE_K
        # The last K block reads zeros past K.
        a = tl.load(a_tile, mask=ks[None, :] < k_left, other=0.0)
        b = tl.load(b_tile, mask=ks[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_SIZE_K * stride_ak
        b_tile += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        acc = tl.where(acc >= 0, acc, 0.01 * acc)
    c = acc.to(c_ptr.dtype.element_ty)

    c_rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    c_cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    tl.store(c_ptr + c_rows[:, None] * stride_cm + c_cols[None, :] * stride_cn, c,
             mask=(c_rows[:, None] < M) & (c_cols[None, :] < N))


def launch_args(a, b, c):
    m, k = a.shape
    n = b.shape[1]
    return (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def grid(a, b):
    m, n = a.shape[0], b.shape[1]
    return lambda meta: (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)


def out_type(name):
    return torch.float16 if name in ("e4m3", "e5m2") else TYPES[name]


# ---------------------------------------------------------------- cases

CASES = []


def case(dtype, m, n, k, dist, scale=1.0, configs=False):
    tag = dist if scale == 1.0 else f"{dist}_scale2e{int(np.log2(scale))}"
    name = f"{dtype}_{'configs_' if configs else ''}{m}x{n}x{k}_{tag}"
    CASES.append(dict(name=name, dtype=dtype, out_dtype={"e4m3": "fp16", "e5m2": "fp16"}.get(dtype, dtype),
                      M=m, N=n, K=k, dist=dist, scale=scale, seed=3000 + len(CASES), all_configs=configs))


# 16-bit: blocks that fit, a shape that fits none (M, N, K no multiple of 16), long K (cuBLAS splits K).
case("bf16", 256, 256, 1024, "normal")
case("bf16", 200, 130, 333, "mixed")
case("bf16", 512, 384, 768, "positive")
case("bf16", 128, 128, 8192, "normal")
case("bf16", 64, 64, 16384, "mixed")
# fp16's range: "mixed" scaled by 2^-8 (its sums stay below 65504; small inputs become subnormal).
case("fp16", 256, 256, 1024, "normal")
case("fp16", 200, 130, 333, "positive")
case("fp16", 128, 128, 8192, "normal")
case("fp16", 64, 64, 16384, "mixed", 2.0 ** -8)
for fp8 in ("e4m3", "e5m2"):
    case(fp8, 256, 256, 1024, "fp8_mixed")
    case(fp8, 200, 130, 333, "fp8_normal")
    case(fp8, 128, 128, 1024, "positive", 2.0 ** -3)
    case(fp8, 128, 128, 8192, "fp8_normal")
    case(fp8, 64, 64, 16384, "fp8_mixed", 2.0 ** -2)
# Every configuration on one small shape (the autotuner picks one; these show the others).
case("bf16", 72, 40, 333, "mixed", configs=True)
case("fp16", 72, 40, 333, "mixed", 2.0 ** -8, configs=True)
case("e4m3", 72, 40, 333, "fp8_mixed", configs=True)
case("e5m2", 72, 40, 333, "fp8_mixed", configs=True)
# fp32 inputs: tl.dot's default input precision on sm_90 is tf32 (the tf32 wgmma); the ties
# distribution tells how the operands become tf32. Added later (TRITON_CASES=fp32).
case("fp32", 256, 256, 1024, "tf32_ties")
case("fp32", 200, 130, 333, "mixed")
case("fp32", 128, 128, 8192, "tf32_ties")
case("fp32", 72, 40, 333, "tf32_ties", configs=True)


def inputs(c):
    """CPU tensors: A [M,K] and B [K,N] (fp8: B as the transpose of a contiguous [N,K], column-major)."""
    rng = np.random.default_rng(c["seed"])
    dtype = TYPES[c["dtype"]]
    a = cublas_capture.from_float32(cublas_capture.draw(rng, (c["M"], c["K"]), c["dist"]) * c["scale"], dtype)
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        bt = cublas_capture.from_float32(cublas_capture.draw(rng, (c["N"], c["K"]), c["dist"]) * c["scale"], dtype)
        return a, bt.t()
    return a, cublas_capture.from_float32(cublas_capture.draw(rng, (c["K"], c["N"]), c["dist"]) * c["scale"], dtype)


# ---------------------------------------------------------------- the compiled kernel's facts

GENERATED = os.path.join(WORKDIR, "generated")


def counts(pattern, text):
    return dict(sorted(collections.Counter(re.findall(pattern, text)).items()))


def kernel_facts(compiled, label=None):
    """What decides the arithmetic, read off the TTGIR, PTX and SASS; the texts go to generated/."""
    asm = compiled.asm
    facts = {}
    md = compiled.metadata
    md = md._asdict() if hasattr(md, "_asdict") else dict(vars(md))
    facts["metadata"] = {key: (value if isinstance(value, (int, float, str, bool, type(None))) else str(value))
                         for key, value in md.items() if key not in ("extern_libs",)}
    ttgir = asm.get("ttgir", "")
    facts["ttgir_dots"] = counts(r"\b(ttng\.warp_group_dot|tt\.dot)\b", ttgir)
    facts["ttgir_max_num_imprecise_acc"] = sorted(set(re.findall(r"maxNumImpreciseAcc = (\d+)", ttgir)))
    facts["ttgir_mma_encodings"] = sorted(set(re.findall(r"#ttg\.nvidia_mma<\{[^}]*\}>", ttgir)))
    ptx = asm.get("ptx", "")
    facts["ptx_mma"] = counts(r"\b(wgmma\.mma_async[\w.]*|mma\.sync\.aligned[\w.]*)", ptx)
    facts["ptx_fp32_adds"] = counts(r"\b(add(?:\.r[nzmp])?\.f32)\b", ptx)
    facts["ptx_cvt"] = counts(r"\b(cvt\.[\w.]+)", ptx)
    try:
        sass = asm["sass"]
    except Exception as e:  # noqa: BLE001
        sass = ""
        facts["sass_error"] = repr(e)
    facts["sass_mma"] = counts(r"\b((?:HGMMA|QGMMA|HMMA|IMMA)\.[\w.]+)", sass)
    facts["sass_conversions"] = counts(r"\b(F2FP\.[\w.]+|F2F\.[\w.]+)", sass)
    os.makedirs(GENERATED, exist_ok=True)
    for key, text in (("ttgir", ttgir), ("ptx", ptx), ("sass", sass)) if label else ():
        path = os.path.join(GENERATED, f"{label}.{key}")
        if text and not os.path.exists(path):
            open(path, "w").write(text)
    return facts


def config_kwargs(config):
    """The launch keywords of a config (its meta-parameters and compile options)."""
    if hasattr(config, "all_kwargs"):
        return config.all_kwargs()
    return dict(config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)


def config_dict(config):
    out = dict(config.kwargs)
    out.update(num_warps=config.num_warps, num_stages=config.num_stages)
    return out


# ---------------------------------------------------------------- running


def profiled(call):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = call()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    return out, cublas_capture.kernels_of(trace)


TORCH_CALLS = []  # in cuBLASLt-log order: each call runs three times (warm-up and two profiled runs)


def to_gpu(t):
    """A GPU copy with t's layout (row-major, or column-major for the transpose of a contiguous tensor)."""
    return t.cuda() if t.is_contiguous() else t.t().contiguous().cuda().t()


def torch_products(c, a, b, folder):
    """torch's products on the same inputs, each: warm-up, two profiled runs (bits compared)."""
    ga, gb = to_gpu(a), to_gpu(b)
    calls = []
    if c["dtype"] in ("bf16", "fp16"):
        calls.append(("d_torch", "matmul", lambda: torch.matmul(ga, gb)))
    elif c["dtype"] == "fp32":
        def tf32_matmul():
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                return torch.matmul(ga, gb)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False
        calls.append(("d_torch", "matmul with allow_tf32", tf32_matmul))
    else:
        ha, hb = ga.to(torch.float16), gb.to(torch.float16)
        one = torch.ones((), dtype=torch.float32, device="cuda")
        calls.append(("d_torch", "matmul of the fp16 copies", lambda: torch.matmul(ha, hb)))
        for fast in (True, False):
            calls.append((f"d_scaled_{'fast' if fast else 'default'}", f"_scaled_mm fast_accum={fast}",
                          lambda fast=fast: torch._scaled_mm(ga, gb, scale_a=one, scale_b=one, out_dtype=torch.float16,
                                                             use_fast_accum=fast)))
    entries = []
    for key, what, call in calls:
        try:
            call()
            torch.cuda.synchronize()
            (d0, k0), (d1, k1) = profiled(call), profiled(call)
        except Exception as e:  # noqa: BLE001
            entries.append(dict(file=key, call=what, error=repr(e)[:300]))
            continue
        d0, d1 = cublas_capture.bits(d0), cublas_capture.bits(d1)
        np.save(os.path.join(folder, key + ".npy"), d0)
        entry = dict(file=key, call=what, kernels=k0, repeat_identical=bool(np.array_equal(d0, d1)),
                     kernels_second_run=k1)
        entries.append(entry)
        TORCH_CALLS.append(entry)
    return entries


def run_triton(a, b, out, config=None):
    c = torch.empty((a.shape[0], b.shape[1]), device="cuda", dtype=out)
    if config is None:
        compiled = matmul_kernel[grid(a, b)](*launch_args(a, b, c), ACTIVATION="")
    else:
        compiled = matmul_kernel.fn[grid(a, b)](*launch_args(a, b, c), ACTIVATION="", **config_kwargs(config))
    return c, compiled


def run_case(c):
    a, b = inputs(c)
    folder = os.path.join(WORKDIR, "cases", c["name"])
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "a.npy"), cublas_capture.bits(a))
    np.save(os.path.join(folder, "b.npy"), cublas_capture.bits(b))
    ga, gb = to_gpu(a), to_gpu(b)
    out = out_type(c["dtype"])
    entry = dict(c, a_strides=list(ga.stride()), b_strides=list(gb.stride()))
    if c["all_configs"]:
        entry["configs"] = []
        for i, config in enumerate(CONFIGS):
            row = dict(index=i, config=config_dict(config))
            try:
                (d0, compiled), (d1, _) = run_triton(ga, gb, out, config), run_triton(ga, gb, out, config)
                torch.cuda.synchronize()
                d0, d1 = cublas_capture.bits(d0), cublas_capture.bits(d1)
                np.save(os.path.join(folder, f"d_config{i}.npy"), d0)
                row.update(repeat_identical=bool(np.array_equal(d0, d1)),
                           kernel=kernel_facts(compiled))
            except Exception as e:  # noqa: BLE001
                row["error"] = repr(e)[:300]
            entry["configs"].append(row)
            print(f"  config {i} {row['config']}: {row.get('error') or row['kernel']['ptx_mma']}", flush=True)
    else:
        d0, compiled = run_triton(ga, gb, out)  # autotunes on its first call for these M, N, K and dtypes
        torch.cuda.synchronize()
        best = matmul_kernel.best_config
        if not hasattr(compiled, "asm"):
            c_like = torch.empty((c["M"], c["N"]), device="cuda", dtype=out)
            compiled = matmul_kernel.fn.warmup(*launch_args(ga, gb, c_like), ACTIVATION="", grid=(1,),
                                               **config_kwargs(best))
        (d1, _), kernels = profiled(lambda: run_triton(ga, gb, out))
        d0, d1 = cublas_capture.bits(d0), cublas_capture.bits(d1)
        np.save(os.path.join(folder, "d.npy"), d0)
        timings = getattr(matmul_kernel, "configs_timings", None) or {}
        label = (f"{c['dtype']}_{best.kwargs['BLOCK_SIZE_M']}x{best.kwargs['BLOCK_SIZE_N']}x"
                 f"{best.kwargs['BLOCK_SIZE_K']}_w{best.num_warps}_s{best.num_stages}_{c['name']}")
        entry.update(config=config_dict(best), repeat_identical=bool(np.array_equal(d0, d1)),
                     repeat_differing=int((d0 != d1).sum()), kernels=kernels,
                     autotune_timings_ms={str(config_dict(k)): (v if isinstance(v, (int, float)) else list(v))
                                          for k, v in timings.items()},
                     kernel=kernel_facts(compiled, label))
        entry["torch"] = torch_products(c, a, b, folder)
    return entry


# ---------------------------------------------------------------- compiling ahead, in parallel


def warm(job):
    """In a fresh process: compile one (dtype, shape, config) into the shared Triton cache."""
    dtype, m, n, k, index = job
    torch.cuda.init()
    a = torch.empty((m, k), device="cuda", dtype=TYPES[dtype])
    if dtype in ("e4m3", "e5m2"):
        b = torch.empty((n, k), device="cuda", dtype=TYPES[dtype]).t()
    else:
        b = torch.empty((k, n), device="cuda", dtype=TYPES[dtype])
    c = torch.empty((m, n), device="cuda", dtype=out_type(dtype))
    t = time.time()
    try:
        matmul_kernel.fn.warmup(*launch_args(a, b, c), ACTIVATION="", grid=(1,), **config_kwargs(CONFIGS[index]))
        return job, time.time() - t, None
    except Exception as e:  # noqa: BLE001
        return job, time.time() - t, repr(e)[:200]


def selected_cases():
    """TRITON_CASES=prefix,prefix runs only the cases whose names start so (a later capture's additions)."""
    only = [p for p in os.environ.get("TRITON_CASES", "").split(",") if p]
    return [c for c in CASES if not only or any(c["name"].startswith(p) for p in only)]


def compile_ahead(workers=14):
    """Triton compiles each (dtype, specialisation, config) once; Triton specialises integer arguments on
    divisibility by 16, so one shape per dtype with every size divisible and one with none covers the cases."""
    jobs = []
    for dtype in sorted({c["dtype"] for c in selected_cases()}):
        for m, n, k in ((256, 256, 1024), (200, 130, 333)):
            jobs += [(dtype, m, n, k, i) for i in range(len(CONFIGS))]
    t = time.time()
    errors = []
    try:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            for job, seconds, error in pool.map(warm, jobs):
                if error:
                    errors.append((job, error))
    except Exception as e:  # noqa: BLE001
        errors.append(("pool", repr(e)[:300]))
    print(f"compiled ahead {len(jobs)} kernels in {time.time() - t:.0f} s, {len(errors)} errors: {errors[:4]}",
          flush=True)
    return dict(jobs=len(jobs), seconds=round(time.time() - t, 1), errors=[str(e) for e in errors])


# ---------------------------------------------------------------- versions, logs, packing


def triton_facts():
    out = {"triton": triton.__version__}
    try:
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia import compiler as nvidia
        options = nvidia.CUDABackend(GPUTarget("cuda", 90, 32)).parse_options({})
        out["max_num_imprecise_acc_default_sm90"] = options.max_num_imprecise_acc_default
        out["default_dot_input_precision"] = options.default_dot_input_precision
        out["compiler_source_lines"] = [line.strip() for line in inspect.getsource(nvidia).splitlines()
                                        if "max_num_imprecise_acc" in line]
    except Exception as e:  # noqa: BLE001
        out["error"] = repr(e)[:300]
    try:
        from triton.backends.nvidia import compiler as nvidia
        ptxas = nvidia.get_ptxas(90).path if hasattr(nvidia, "get_ptxas") else "ptxas"
        out["ptxas"] = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    except Exception as e:  # noqa: BLE001
        out["ptxas_error"] = repr(e)[:300]
    try:
        from triton.language import semantic
        out["semantic_source_lines"] = [line.strip() for line in inspect.getsource(semantic).splitlines()
                                        if "max_num_imprecise_acc" in line][:12]
    except Exception as e:  # noqa: BLE001
        out["semantic_error"] = repr(e)[:200]
    return out


def attach_algorithms():
    """Each torch call's cuBLASLt algorithm from the log: three log entries per call (warm-up, two runs)."""
    logs = [f for f in os.listdir(cublas_capture.LOGDIR) if f.startswith("cublaslt") and str(os.getpid()) in f]
    if len(logs) != 1:
        return f"cuBLASLt logs of this process: {logs}"
    algos = []
    for line in open(os.path.join(cublas_capture.LOGDIR, logs[0]), errors="replace"):
        match = re.search(r"\[Trace\]\[(cublasLt\w*Matmul)\](.*)", line)
        if match:
            algo = re.search(r"algo=\[([^\]]*)\]", match.group(2))
            algos.append(dict(re.findall(r"(\w+)=(\S+)", algo.group(1))) if algo else {})
    if len(algos) != 3 * len(TORCH_CALLS):
        return f"{len(algos)} cuBLASLt calls logged for {len(TORCH_CALLS)} torch calls: not attached"
    for i, entry in enumerate(TORCH_CALLS):
        three = algos[3 * i:3 * i + 3]
        entry["algorithm"] = three[0]
        entry["algorithm_same_all_three"] = all(x == three[0] for x in three)
    return f"{len(algos)} cuBLASLt calls, three per torch call"


def pack(manifest, limit=14 << 20):
    json.dump(manifest, open(os.path.join(WORKDIR, "manifest.json"), "w"), indent=1)
    items = []
    for top in ("cases", "generated", "logs"):
        root = os.path.join(WORKDIR, top)
        for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            path = os.path.join(root, name)
            size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs) \
                if os.path.isdir(path) else os.path.getsize(path)
            items.append((os.path.join(top, name), size))
    parts, current, size = [], [], 0
    for rel, item_size in items:
        if current and size + item_size > limit:
            parts.append(current)
            current, size = [], 0
        current.append(rel)
        size += item_size
    parts.append(current + ["manifest.json"])
    for i, rels in enumerate(parts[:6]):  # the device tool brings back 8 files: these, manifest.json and a log
        with tarfile.open(os.path.join(OUTDIR, f"capture_part{i}.tar.gz"), "w:gz") as tar:
            for rel in rels:
                tar.add(os.path.join(WORKDIR, rel), arcname=rel)
    json.dump(manifest, open(os.path.join(OUTDIR, "manifest.json"), "w"), indent=1)
    print(f"packed {len(items)} items into {len(parts)} parts (kept {min(len(parts), 6)})", flush=True)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    ahead = compile_ahead()
    entries, skipped = [], []
    for c in selected_cases():
        if time.time() - START > BUDGET_S:
            skipped.append(c["name"])
            continue
        t = time.time()
        try:
            entry = run_case(c)
        except Exception as e:  # noqa: BLE001
            entry = dict(c, error=repr(e)[:500])
        entries.append(entry)
        print(f"{c['name']}: {time.time() - t:.1f} s config={entry.get('config')} "
              f"repeat_identical={entry.get('repeat_identical')} mma={entry.get('kernel', {}).get('ptx_mma')} "
              f"imprecise={entry.get('kernel', {}).get('ttgir_max_num_imprecise_acc')} "
              f"torch={[(t.get('file'), (t.get('kernels') or [['?']])[0][0][:50], t.get('error')) for t in entry.get('torch', [])]} "
              f"{entry.get('error', '')}", flush=True)
    versions = cublas_capture.versions()
    versions.update(triton_facts())
    manifest = dict(versions=versions, configs=[config_dict(c) for c in CONFIGS], compile_ahead=ahead,
                    cases=entries, skipped=skipped, cublaslt=attach_algorithms(),
                    seconds=round(time.time() - START, 1))
    print(json.dumps({k: v for k, v in versions.items()}, indent=1), flush=True)
    print(f"skipped: {skipped}; {manifest['cublaslt']}; {manifest['seconds']} s", flush=True)
    pack(manifest)


if __name__ == "__main__":
    main()
