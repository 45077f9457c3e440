#!/usr/bin/env python3
"""Captures PyTorch's flash-attention forward (bf16) on the GPU, for bitexact's
attention emulator and its replay tests.

Run on the device machine from the repository root:

    python3 cuda/capture/flash_attention.py survey OUTDIR   # which kernels, which grids
    python3 cuda/capture/flash_attention.py capture OUTDIR  # the scenario matrix

`survey` calls torch.ops.aten._scaled_dot_product_flash_attention on zero
tensors of many shapes and records, from torch.profiler's trace, the kernels it
launched and their grids (the split-KV kernel's grid is (ceil(N/64), splits,
B*H), so the grid shows the number of splits). `capture` runs the scenario
matrix and writes, for each scenario, a folder of .npy files: q, k, v and o as
uint16 bf16 patterns [B', H', N, d], lse as float32 [B', H', N] (natural-log
units, as PyTorch returns it), where B', H' are the heads kept (scenarios with
many heads keep a few, named in the manifest), plus manifest.json with the
scenario, the full shape, the kernels launched with their grids, and the
versions of the GPU, driver, CUDA and PyTorch. Inputs are generated on the CPU
from a fixed seed, so a run reproduces them.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

SDPA = torch.ops.aten._scaled_dot_product_flash_attention


def versions():
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "capability": f"{props.major}.{props.minor}",
        "nvidia_smi": smi,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }


def run_profiled(calls):
    """Runs each call under one profiler; returns, per call, the flash kernels
    it launched as (name, grid)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for call in calls:
            call()
            torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    kernels = [
        (e["ts"], e["name"], e.get("args", {}).get("grid"))
        for e in trace["traceEvents"]
        if e.get("cat") == "kernel" and "flash" in e["name"]
    ]
    kernels.sort()
    # Each call launches either flash_fwd_kernel or splitkv then combine.
    per_call, i = [], 0
    for _ in calls:
        if i < len(kernels) and "splitkv_kernel" in kernels[i][1]:
            per_call.append(kernels[i : i + 2])
            i += 2
        else:
            per_call.append(kernels[i : i + 1])
            i += 1
    assert i == len(kernels), f"{len(kernels)} flash kernels for {len(calls)} calls"
    return [[(name, grid) for _, name, grid in ks] for ks in per_call]


def splits_of(kernels):
    for name, grid in kernels:
        if "splitkv_kernel" in name:
            return grid[1]
    return 1


def survey(outdir):
    shapes = []
    for d in (64, 128):
        for n in (1, 17, 64, 65, 128, 129, 256, 257, 512, 1000, 2048, 4096, 8192):
            for bh in (1, 2, 3, 4, 5, 6, 8, 13, 14, 16, 32, 64, 105, 106, 128, 211, 212, 256):
                for causal in (False, True):
                    shapes.append((1, bh, n, d, causal))
    calls = []
    for b, h, n, d, causal in shapes:
        q = torch.zeros(b, h, n, d, dtype=torch.bfloat16, device="cuda")

        def call(q=q, causal=causal):
            SDPA(q, q, q, 0.0, causal, False)

        calls.append(call)
    results = []
    for start in range(0, len(calls), 64):
        results += run_profiled(calls[start : start + 64])
    rows = []
    for (b, h, n, d, causal), ks in zip(shapes, results):
        rows.append({"B": b, "H": h, "N": n, "d": d, "causal": causal, "splits": splits_of(ks),
                     "kernels": [[name, grid] for name, grid in ks]})
    json.dump({"versions": versions(), "rows": rows}, open(os.path.join(outdir, "survey.json"), "w"), indent=1)
    names = sorted({name for r in rows for name, _ in r["kernels"]})
    print(f"survey: {len(rows)} shapes, {len(names)} distinct kernels")
    for name in names:
        print("  ", name)


def bits16(t):
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


def make_inputs(kind, b, h, n, d, seed, n_keys=None):
    g = torch.Generator().manual_seed(seed)
    if n_keys is not None and n_keys != n:
        # Different lengths: normal inputs only.
        q = torch.randn(b, h, n, d, generator=g)
        k, v = torch.randn(b, h, n_keys, d, generator=g), torch.randn(b, h, n_keys, d, generator=g)
        return q.bfloat16(), k.bfloat16(), v.bfloat16()

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    if kind in ("normal", "scale"):
        q, k, v = randn(b, h, n, d), randn(b, h, n, d), randn(b, h, n, d)
    elif kind == "large":
        q, k, v = 8 * randn(b, h, n, d), 8 * randn(b, h, n, d), randn(b, h, n, d)
    elif kind in ("ties_positive", "ties_negative"):
        # Integer entries: every score is exact, so keys equal to the
        # maximising key k* tie exactly. Positive: q in {0,1}, keys in
        # {-1,0,1}, k* = all ones, so the row maximum is sum(q) > 0.
        # Negative: keys in {-2,-1}, k* = all -1, so the maximum is -sum(q) < 0.
        q = torch.randint(0, 2, (b, h, n, d), generator=g).float()
        q[..., 0] = 1
        if kind == "ties_positive":
            k = torch.randint(-1, 2, (b, h, n, d), generator=g).float()
            star = 1.0
        else:
            k = -torch.randint(1, 3, (b, h, n, d), generator=g).float()
            star = -1.0
        copies = [2, 3, 8, 64]
        for bi in range(b):
            for hi in range(h):
                r = min(copies[(bi * h + hi) % len(copies)], n)
                where = torch.randperm(n, generator=g)[:r]
                k[bi, hi, where, :] = star
        # V columns with negative mean, as in the paper's failure case.
        v = randn(b, h, n, d) * 0.5 - 1.0
    elif kind == "sink":
        u = randn(d)
        q = randn(b, h, n, d) + 2 * u
        k = randn(b, h, n, d)
        k[:, :, 0, :] = 4 * u
        v = randn(b, h, n, d)
    elif kind == "special":
        q, k, v = randn(b, h, n, d), randn(b, h, n, d), randn(b, h, n, d)
        q[:, :, min(3, n - 1), 0] = float("nan")
        k[:, :, min(5, n - 1), 1] = float("-inf")
        v[:, :, min(7, n - 1), 2] = float("inf")
        q[:, :, min(9, n - 1), :] = 0
        k[:, :, min(11, n - 1), 3] = float("inf")
    else:
        raise ValueError(kind)
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


def scenarios():
    out = []
    seed = 1
    # heads: "split" keeps B*H small (PyTorch's split-KV path); "single" makes
    # B*H*ceil(N/64) large enough that the split heuristic returns 1.
    for path in ("split", "single"):
        for d in (64, 128):
            for n in (1, 17, 128, 1000, 4096):
                for causal in (False, True):
                    # The whole matrix must come back from the device machine (64 MiB):
                    # N = 4096 on the single-split path once, d = 128 without the mask.
                    if path == "single" and n == 4096 and (d == 64 or causal):
                        continue
                    if path == "split":
                        b, h = 1, 2
                    else:
                        b, h = 1, max(4, math.ceil(0.8 * 264 / math.ceil(n / 64)))
                    keep = [0] if n == 4096 else ([0, h - 1] if h > 1 else [0])
                    out.append(dict(name=f"{path}_d{d}_n{n}_{'causal' if causal else 'full'}_normal", kind="normal",
                                    B=b, H=h, N=n, d=d, causal=causal, scale=None, keep_heads=keep, seed=seed))
                    seed += 1
    for d in (64, 128):
        for kind in ("ties_positive", "ties_negative", "sink", "large", "scale", "special"):
            ties = kind.startswith("ties")
            for causal in ((False, True) if ties else (False,)):
                # Tie scenarios keep all four heads: 2, 3, 8 and 64 copies of the maximising key.
                out.append(dict(name=f"split_d{d}_n1000_{'causal' if causal else 'full'}_{kind}", kind=kind,
                                B=1, H=4, N=1000, d=d, causal=causal, scale=0.3 if kind == "scale" else None,
                                keep_heads=[0, 1, 2, 3] if ties else [0, 3], seed=seed))
                seed += 1
    # Few query rows against many keys: the split heuristic's largest split
    # counts, so the combine kernel holds several L per thread (kMaxSplits 64, 128).
    for d, n_keys in ((64, 32768), (128, 32768), (64, 8192), (128, 3000)):
        out.append(dict(name=f"split_d{d}_q64_k{n_keys}_full_normal", kind="normal", B=1, H=1, N=64, NK=n_keys, d=d,
                        causal=False, scale=None, keep_heads=[0], seed=seed))
        seed += 1
    return out


def capture(outdir):
    vers = versions()
    manifest = {"versions": vers, "scenarios": []}
    only = os.environ.get("CAPTURE_ONLY")  # a substring of the scenario names to capture
    for s in scenarios():
        if only and only not in s["name"]:
            continue
        s.setdefault("NK", s["N"])
        q, k, v = make_inputs(s["kind"], s["B"], s["H"], s["N"], s["d"], s["seed"], s["NK"])
        qc, kc, vc = q.cuda(), k.cuda(), v.cuda()
        result = {}

        def call():
            out = SDPA(qc, kc, vc, 0.0, s["causal"], False, scale=s["scale"])
            result["o"], result["lse"] = out[0], out[1]

        kernels = run_profiled([call])[0]
        # A second run must give the same bits (the kernels are deterministic).
        o_again = SDPA(qc, kc, vc, 0.0, s["causal"], False, scale=s["scale"])[0]
        deterministic = bool(torch.equal(bits16_t(result["o"]), bits16_t(o_again)))
        keep = s["keep_heads"]
        folder = os.path.join(outdir, s["name"])
        os.makedirs(folder, exist_ok=True)
        np.save(os.path.join(folder, "q.npy"), bits16(q[:, keep]))
        np.save(os.path.join(folder, "k.npy"), bits16(k[:, keep]))
        np.save(os.path.join(folder, "v.npy"), bits16(v[:, keep]))
        np.save(os.path.join(folder, "o.npy"), bits16(result["o"][:, keep]))
        np.save(os.path.join(folder, "lse.npy"), result["lse"][:, keep].contiguous().cpu().numpy())
        entry = dict(s, kernels=[[name, grid] for name, grid in kernels], splits=splits_of(kernels),
                     deterministic=deterministic, o_shape=list(result["o"].shape),
                     o_strides=list(result["o"].stride()))
        manifest["scenarios"].append(entry)
        print(f"{s['name']}: splits {entry['splits']}, kernels {[n.split('<')[0] for n, _ in kernels]}, "
              f"deterministic {deterministic}", flush=True)
    json.dump(manifest, open(os.path.join(outdir, "manifest.json"), "w"), indent=1)


def bits16_t(t):
    return t.contiguous().view(torch.int16)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("survey", "capture"):
        sys.exit(__doc__)
    os.makedirs(sys.argv[2], exist_ok=True)
    (survey if sys.argv[1] == "survey" else capture)(sys.argv[2])
