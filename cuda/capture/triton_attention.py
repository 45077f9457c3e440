#!/usr/bin/env python3
"""Captures attention kernels other than PyTorch's flash backend on the GPU:
FlexAttention as torch.compile(flex_attention) runs it (a Triton template),
the example Triton kernel of examples/triton/flash_forward.py, and, on the same
inputs, PyTorch's SDPA flash, memory-efficient, cuDNN and math backends; plus a probe
of Triton's fp32 division (div.full.f32) and the generated code of both Triton
kernels (Triton source, TTGIR, PTX, SASS) for reading.

Run on the device machine from the repository root:

    python3 cuda/capture/triton_attention.py OUTDIR

CAPTURE_SCENARIOS=REGEX and CAPTURE_KERNELS=a,b (of flex, triton_example,
flash, efficient, cudnn, math) capture a part (no division probe then).

OUTDIR gets one folder per scenario (q, k, v as uint16 bf16 patterns
[B, H, N, d]; o_<kernel> likewise; lse_<kernel> float32 [B, H, N]; flex's
LSE as flex_attention returns it, the Triton example's in log2 units),
manifest.json (scenarios, kernels launched, determinism of two runs, the
versions of the GPU, driver, CUDA, PyTorch and Triton), division.npz and
generated/ (the code). Inputs come from cuda/capture/flash_attention.py's
generator with fixed seeds, so a run reproduces them.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings

START = time.time()

OUTDIR = sys.argv[1] if len(sys.argv) == 2 else sys.exit(__doc__)
CACHE = os.path.join(OUTDIR, "generated", "cache")
os.makedirs(CACHE, exist_ok=True)
os.environ["TRITON_CACHE_DIR"] = os.path.join(CACHE, "triton")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(CACHE, "inductor")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "triton"))
from flash_attention import bits16, make_inputs, versions  # noqa: E402
from flash_forward import flash_forward as triton_example  # noqa: E402

torch._dynamo.config.cache_size_limit = 1000
if hasattr(torch._dynamo.config, "recompile_limit"):
    torch._dynamo.config.recompile_limit = 1000
if hasattr(torch._dynamo.config, "accumulated_recompile_limit"):
    torch._dynamo.config.accumulated_recompile_limit = 100000
flex_compiled = torch.compile(flex_attention)


def scenarios():
    out, seed = [], 1000
    for d in (64, 128):
        for n in (1, 17, 128, 1000):
            for causal in (False, True):
                out.append(dict(name=f"d{d}_n{n}_{'causal' if causal else 'full'}_normal", kind="normal", B=1, H=2,
                                N=n, NK=n, d=d, causal=causal, scale=None))
        for kind in ("ties_positive", "ties_negative", "sink", "large", "scale", "special"):
            ties = kind.startswith("ties")
            for causal in ((False, True) if ties else (False,)):
                out.append(dict(name=f"d{d}_n512_{'causal' if causal else 'full'}_{kind}", kind=kind, B=1,
                                H=4 if ties else 2, N=512, NK=512, d=d, causal=causal,
                                scale=0.3 if kind == "scale" else None))
        for causal in (False, True):
            out.append(dict(name=f"d{d}_q300_k1000_{'causal' if causal else 'full'}_normal", kind="normal", B=1, H=2,
                            N=300, NK=1000, d=d, causal=causal, scale=None))
    # Appended after the first 36 so that their seeds stay: more query rows
    # than keys, where a top-left causal mask (SDPA's) hides no row entirely.
    for d in (64, 128):
        for causal in (False, True):
            out.append(dict(name=f"d{d}_q1000_k300_{'causal' if causal else 'full'}_normal", kind="normal", B=1, H=2,
                            N=1000, NK=300, d=d, causal=causal, scale=None))
    for s in out:
        s["seed"] = seed
        seed += 1
    only = os.environ.get("CAPTURE_SCENARIOS")
    return [s for s in out if only is None or re.search(only, s["name"])]


def flex_call(q, k, v, s):
    block_mask = None
    if s["causal"]:
        offset = s["NK"] - s["N"]

        def bottom_right(b, h, q_idx, kv_idx):
            return q_idx + offset >= kv_idx

        block_mask = create_block_mask(bottom_right, None, None, s["N"], s["NK"], device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        o, lse = flex_compiled(q, k, v, block_mask=block_mask, scale=s["scale"], return_lse=True)
    return o, lse


def sdpa(backend):
    # SDPA's is_causal with N_q != N_k is top-left aligned (query row i sees
    # keys j <= i) in the backends that take it; the flash backend refuses it.
    def call(q, k, v, s):
        with sdpa_kernel([backend]):
            if backend == SDPBackend.MATH:  # no L: the math path returns O alone
                return F.scaled_dot_product_attention(q, k, v, is_causal=s["causal"], scale=s["scale"]), None
            if backend == SDPBackend.FLASH_ATTENTION:
                o, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, s["causal"], False,
                                                                           scale=s["scale"])[:2]
            elif backend == SDPBackend.EFFICIENT_ATTENTION:
                o, lse = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, s["causal"],
                                                                               scale=s["scale"])[:2]
            else:
                o, lse = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, s["causal"],
                                                                           False, scale=s["scale"])[:2]
        return o, lse
    return call


KERNELS = {
    "flex": flex_call,
    "triton_example": lambda q, k, v, s: triton_example(q, k, v, causal=s["causal"], scale=s["scale"]),
    "flash": sdpa(SDPBackend.FLASH_ATTENTION),
    "efficient": sdpa(SDPBackend.EFFICIENT_ATTENTION),
    "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
    "math": sdpa(SDPBackend.MATH),
}
if os.environ.get("CAPTURE_KERNELS"):
    KERNELS = {name: KERNELS[name] for name in os.environ["CAPTURE_KERNELS"].split(",")}


def kernel_names(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def capture():
    manifest = {"versions": dict(versions(), triton=triton.__version__), "scenarios": [],
                # False (the default): the math backend computes bf16 inputs in fp32.
                "math_sdp_bf16_reduction": torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()}
    agreement = {}
    for s in scenarios():
        q, k, v = make_inputs(s["kind"], s["B"], s["H"], s["N"], s["d"], s["seed"], s["NK"])
        qc, kc, vc = q.cuda(), k.cuda(), v.cuda()
        folder = os.path.join(OUTDIR, s["name"])
        os.makedirs(folder, exist_ok=True)
        for name, x in (("q", q), ("k", k), ("v", v)):
            np.save(os.path.join(folder, f"{name}.npy"), bits16(x))
        entry = dict(s, kernels={})
        outs = {}
        for kname, fn in KERNELS.items():
            try:
                o, lse = fn(qc, kc, vc, s)
                o2, lse2 = fn(qc, kc, vc, s)
                torch.cuda.synchronize()
                same = bool(torch.equal(o.view(torch.int16), o2.view(torch.int16)) and
                            (lse is None or torch.equal(lse.view(torch.int32), lse2.view(torch.int32))))
                launched = kernel_names(lambda: fn(qc, kc, vc, s)) if kname in ("flex", "triton_example") else []
            except Exception as e:  # a backend that refuses a shape is recorded, not fatal
                entry["kernels"][kname] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                continue
            np.save(os.path.join(folder, f"o_{kname}.npy"), bits16(o))
            if lse is not None:
                np.save(os.path.join(folder, f"lse_{kname}.npy"), lse.float().contiguous().cpu().numpy())
            outs[kname] = bits16(o)
            entry["kernels"][kname] = {"deterministic": same, "lse_shape": None if lse is None else list(lse.shape),
                                       "launched": launched}
        names = sorted(outs)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                diff = int((outs[a] != outs[b]).sum())
                agreement.setdefault(f"{a} vs {b}", [0, 0])
                agreement[f"{a} vs {b}"][0] += diff
                agreement[f"{a} vs {b}"][1] += outs[a].size
        manifest["scenarios"].append(entry)
        manifest["o_elements_differing"] = agreement
        json.dump(manifest, open(os.path.join(OUTDIR, "manifest.json"), "w"), indent=1)
        print(f"{time.time() - START:.0f}s", s["name"], {k: ("ok" if "error" not in e else e["error"][:60]) + (" det" if e.get("deterministic") else "")
                          for k, e in entry["kernels"].items()}, flush=True)
    for pair, (diff, total) in sorted(agreement.items()):
        print(f"{pair}: {diff} of {total} O elements differ")


@triton.jit
def _divide(X, Y, Z, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + at, mask=at < n)
    y = tl.load(Y + at, mask=at < n)
    tl.store(Z + at, x / y, mask=at < n)


def division_probe():
    """Triton's x / y on fp32 (div.full.f32): structured and random operands."""
    g = np.random.default_rng(7)
    n = 1 << 20
    bits_x = g.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    bits_y = g.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    x, y = bits_x.view(np.float32).copy(), bits_y.view(np.float32).copy()
    # Attention's case: an accumulator over a row sum in [1, 2^20].
    m = n // 2
    x[:m] = (g.standard_normal(m) * 10.0 ** g.uniform(-3, 4, m)).astype(np.float32)
    y[:m] = (2.0 ** g.uniform(0, 20, m)).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1.17549435e-38, 3.4028235e38, 2.0 ** 126,
                        2.0 ** 127, 1.5 * 2.0 ** 126, 2.0 ** -126, 2.0 ** -149], dtype=np.float32)
    sx, sy = np.meshgrid(np.concatenate([special, -special]), np.concatenate([special, -special]))
    x[m:m + sx.size], y[m:m + sy.size] = sx.ravel(), sy.ravel()
    xc, yc = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    z = torch.empty_like(xc)
    _divide[(triton.cdiv(n, 1024),)](xc, yc, z, n, BLOCK=1024)
    np.savez_compressed(os.path.join(OUTDIR, "division.npz"), x=x, y=y, z=z.cpu().numpy())
    print(f"division: {n} quotients")


def keep_generated():
    gen = os.path.join(OUTDIR, "generated")
    for path in glob.glob(os.path.join(CACHE, "**", "*"), recursive=True):
        base = os.path.basename(path)
        if os.path.isfile(path) and (base.endswith((".ptx", ".ttgir", ".ttir", ".json", ".llir")) or
                                     (base.endswith(".py") and "flex" in open(path, errors="ignore").read())):
            shutil.copy(path, os.path.join(gen, base if not base.endswith(".py") else "inductor_" + base))
        if base.endswith(".cubin"):
            sass = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True).stdout
            open(os.path.join(gen, base + ".sass"), "w").write(sass)
    flexdir = os.path.join(os.path.dirname(torch.__file__), "_inductor", "kernel", "flex")
    if os.path.isdir(flexdir):
        shutil.copytree(flexdir, os.path.join(gen, "torch_inductor_kernel_flex"), dirs_exist_ok=True)
    src = os.path.join(os.path.dirname(torch.__file__), "nn", "attention", "flex_attention.py")
    shutil.copy(src, os.path.join(gen, "torch_nn_attention_flex_attention.py"))
    shutil.rmtree(CACHE)


if __name__ == "__main__":
    capture()
    if not os.environ.get("CAPTURE_SCENARIOS") and not os.environ.get("CAPTURE_KERNELS"):
        division_probe()
    keep_generated()
