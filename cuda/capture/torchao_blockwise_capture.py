#!/usr/bin/env python3
"""Captures torchao's block-scaled fp8 matrix products (torchao.prototype.blockwise_fp8_training.kernels:
triton_fp8_gemm_1x128_128x128 and triton_fp8_gemm_1x128_128x1, the Triton kernels of its DeepSeek-style
blockwise fp8 training: acc += tl.dot(a, b) * a_s * b_s over each 128 of K) on the GPU, for bitexact's
matrix-product descriptions (issue 30).

torchao is not installed on the device machine: carry its wheel (README of the device tool) and put it on
the path first, then, from the repository root:

    python3 cuda/capture/torchao_blockwise_capture.py OUTDIR     # TORCHAO_KERNELS=128x1: one kernel's cases

Each case: e4m3 A [M, K] (row-major) and B [K, N] (column-major, as the kernels ask), scales drawn in
[0.5, 1.5) for A's 1 x 128 blocks [M, K/128] and B's 128 x 128 blocks [K/128, N/128] (or 1 x 128 blocks
[K/128, N] for the 128x1 kernel), in the layouts the kernels assert; the product into fp32 or
bf16, run twice (bits compared), with the autotuner's chosen configuration and the kernel's PTX facts.
OUTDIR gets capture.tar.gz: manifest.json (tests/data/matmul's case fields: name, op
"torchao_blockwise", M, N, K, seed, a_type, b_type, out_dtype, scale_a "block1x128", scale_b
"block128x128" or "block1x128", kernels, config) and cases/NAME/{a,b,scale_a,scale_b,d}.npy (bit
patterns: uint8 e4m3, uint16 bf16, uint32 fp32; scales float32 row-major [M, K/128] and [K/128, N/128]
or [K/128, N]). Inputs come from NumPy with fixed seeds on the CPU.
"""
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
OUTDIR = sys.argv[1] if len(sys.argv) == 2 else sys.exit(__doc__)
WORKDIR = tempfile.mkdtemp(prefix="torchao_capture_")

import torchao  # noqa: E402
from torchao.prototype.blockwise_fp8_training import kernels  # noqa: E402

CASES = []


def case(m, n, k, kind, out, dist):
    CASES.append(dict(name=f"torchao_{kind}_{out}_{m}x{n}x{k}_{dist}", op="torchao_blockwise", M=m, N=n, K=k,
                      seed=4000 + len(CASES), dist=dist, a_type="e4m3", b_type="e4m3", out_dtype=out,
                      scale_a="block1x128", scale_b="block128x128" if kind == "128x128" else "block1x128",
                      kernel=kind))


KINDS = os.environ.get("TORCHAO_KERNELS", "128x128,128x1").split(",")
for kind in KINDS:
    case(256, 256, 1024, kind, "fp32", "fp8_mixed")
    case(128, 384, 2048, kind, "fp32", "fp8_normal")
    case(256, 128, 512, kind, "bf16", "fp8_mixed")
    case(64, 256, 4096, kind, "fp32", "fp8_mixed")

STORAGE = {torch.bfloat16: (torch.int16, np.uint16), torch.float32: (torch.int32, np.uint32),
           torch.float8_e4m3fn: (torch.uint8, np.uint8)}
OUT = {"fp32": torch.float32, "bf16": torch.bfloat16}


def bits(t):
    view, np_type = STORAGE[t.dtype]
    return t.view(view).contiguous().cpu().numpy().view(np_type)


def draw(rng, shape, dist):
    n = rng.standard_normal(shape).astype(np.float32)
    if dist == "fp8_normal":
        return 4 * n
    return n * np.exp2(rng.integers(-5, 6, shape)).astype(np.float32)


def column_major(x):
    return x.t().contiguous().t()


def run_case(c):
    rng = np.random.default_rng(c["seed"])
    m, n, k = c["M"], c["N"], c["K"]
    a = torch.from_numpy(draw(rng, (m, k), c["dist"])).clamp(-448, 448).to(torch.float8_e4m3fn)
    bt = torch.from_numpy(draw(rng, (n, k), c["dist"])).clamp(-448, 448).to(torch.float8_e4m3fn)
    kb = k // 128
    sa = torch.from_numpy((0.5 + rng.random((m, kb))).astype(np.float32))
    sb_shape = (kb, n // 128) if c["kernel"] == "128x128" else (kb, n)
    sb = torch.from_numpy((0.5 + rng.random(sb_shape)).astype(np.float32))
    ga, gb = a.cuda(), bt.cuda().t()  # B [K, N] column-major
    # The kernels assert their scales' layouts: A's column-major; B's column-major (128 x 128), row-major (128x1).
    gsa = column_major(sa.cuda())
    gsb = column_major(sb.cuda()) if c["kernel"] == "128x128" else sb.cuda().contiguous()
    fn = kernels.triton_fp8_gemm_1x128_128x128 if c["kernel"] == "128x128" else kernels.triton_fp8_gemm_1x128_128x1
    run = lambda: fn(ga, gb, gsa, gsb, block_size=128, out_dtype=OUT[c["out_dtype"]])  # noqa: E731
    d0 = run()
    torch.cuda.synchronize()
    d1 = run()
    torch.cuda.synchronize()
    jit = (kernels.triton_fp8_gemm_1x128_128x128_kernel if c["kernel"] == "128x128"
           else kernels.triton_fp8_gemm_1x128_128x1_kernel)
    best = jit.best_config
    folder = os.path.join(WORKDIR, "cases", c["name"])
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "a.npy"), bits(a))
    np.save(os.path.join(folder, "b.npy"), bits(bt.t().contiguous()))
    np.save(os.path.join(folder, "scale_a.npy"), sa.numpy())
    np.save(os.path.join(folder, "scale_b.npy"), sb.numpy())
    np.save(os.path.join(folder, "d.npy"), bits(d0))
    entry = dict(c, repeat_identical=bool(torch.equal(d0.view(STORAGE[d0.dtype][0]), d1.view(STORAGE[d1.dtype][0]))),
                 config=dict(best.kwargs, num_warps=best.num_warps, num_stages=best.num_stages),
                 kernels=[[f"triton_fp8_gemm_1x128_{c['kernel'].split('x')[1]}_kernel", None, None]])
    print(f"{c['name']}: config {entry['config']} repeat_identical={entry['repeat_identical']}", flush=True)
    return entry


def kernel_facts():
    """The dot instructions and the scaling arithmetic in the PTX of every compiled kernel in Triton's cache."""
    facts = {}
    cache = os.environ.get("TRITON_CACHE_DIR", os.path.expanduser("~/.triton/cache"))
    for root, _, files in os.walk(cache):
        for f in files:
            if f.endswith(".ptx") and "fp8_gemm" in f:
                ptx = open(os.path.join(root, f)).read()
                facts[f] = {"mma": sorted(set(re.findall(r"(wgmma\.mma_async\S*|mma\.sync\S*)", ptx))),
                            "fma.rn.f32": ptx.count("fma.rn.f32"), "mul.f32": len(re.findall(r"mul\.(?:rn\.)?f32", ptx)),
                            "add.f32": len(re.findall(r"add\.(?:rn\.)?f32", ptx))}
    return facts


def main():
    entries = []
    for c in CASES:
        try:
            entries.append(run_case(c))
        except Exception as e:  # noqa: BLE001
            print(f"{c['name']}: FAILED {e!r}", flush=True)
            entries.append(dict(c, error=repr(e)[:400]))
    props = torch.cuda.get_device_properties(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    import triton
    versions = {"gpu": props.name, "sm_count": props.multi_processor_count,
                "capability": f"{props.major}.{props.minor}", "nvidia_smi": smi, "torch": torch.__version__,
                "cuda": torch.version.cuda, "triton": triton.__version__, "torchao": torchao.__version__,
                "libraries": {}, "date_utc": subprocess.run(["date", "-u", "+%Y-%m-%dT%H:%M:%S+00:00"],
                                                           capture_output=True, text=True).stdout.strip()}
    manifest = {"versions": versions, "cases": entries, "kernel_facts": kernel_facts()}
    json.dump(manifest, open(os.path.join(WORKDIR, "manifest.json"), "w"), indent=1)
    with tarfile.open(os.path.join(OUTDIR, "capture.tar.gz"), "w:gz") as tar:
        tar.add(WORKDIR, arcname=".")
    print(json.dumps(versions), json.dumps(manifest["kernel_facts"])[:2000], flush=True)


if __name__ == "__main__":
    main()
