#!/usr/bin/env python3
"""Captures PyTorch's flash-attention backward (bf16) on the GPU: for each
scenario, q, k, v, the forward's O and L, a random dO, and dQ, dK, dV from
torch.ops.aten._scaled_dot_product_flash_attention_backward, each backward run
several times by default and again under torch.use_deterministic_algorithms,
to record which outputs vary from run to run and by how many elements.

Device machine, repository root:

    python3 cuda/capture/flash_backward.py OUTDIR

OUTDIR gets a folder per scenario (uint16 bf16 patterns [B, H, N, d] for q, k,
v, o, do, dq, dk, dv from the deterministic runs, of the heads named in the
manifest's "keep"; float32 [B, H, N] for lse) and manifest.json (scenarios,
run-to-run differences, the versions of the GPU, driver, CUDA and PyTorch).
Inputs come from cuda/capture/flash_attention.py's generator with fixed seeds.
"""
import json
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from flash_attention import bits16, make_inputs, versions  # noqa: E402

OUTDIR = sys.argv[1] if len(sys.argv) == 2 else sys.exit(__doc__)
RUNS = 4
FORWARD = torch.ops.aten._scaled_dot_product_flash_attention
BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_backward


def scenarios():
    """The forward's scenario matrix (cuda/capture/triton_attention.py), and
    calls whose B H give the deterministic dQ one buffer (B H >= 132) and
    seventeen (B H = 8, 4096 keys)."""
    out, seed = [], 5000
    for d in (64, 128):
        for n in (1, 17, 128, 1000):
            for causal in (False, True):
                out.append(dict(name=f"d{d}_n{n}_{'causal' if causal else 'full'}_normal", kind="normal", B=1, H=2,
                                N=n, NK=n, d=d, causal=causal))
        for kind in ("ties_positive", "ties_negative", "sink", "large", "scale", "special"):
            for causal in ((False, True) if kind.startswith("ties") else (False,)):
                out.append(dict(name=f"d{d}_n512_{'causal' if causal else 'full'}_{kind}", kind=kind, B=1,
                                H=4 if kind.startswith("ties") else 2, N=512, NK=512, d=d, causal=causal,
                                scale=0.3 if kind == "scale" else None))
        for n, nk in ((300, 1000), (1000, 300)):
            for causal in (False, True):
                out.append(dict(name=f"d{d}_q{n}_k{nk}_{'causal' if causal else 'full'}_normal", kind="normal", B=1,
                                H=2, N=n, NK=nk, d=d, causal=causal))
        out.append(dict(name=f"d{d}_n512_full_normal_b4h64", kind="normal", B=4, H=64, N=512, NK=512, d=d,
                        causal=False))
        out.append(dict(name=f"d{d}_n4096_full_normal", kind="normal", B=2, H=4, N=4096, NK=4096, d=d, causal=False))
    for s in out:
        s.setdefault("scale", None)
        s["seed"] = seed
        seed += 1
    return out


def backward(q, k, v, forward, do, causal, scale):
    # The forward's outputs as autograd hands them over: O, L, cum_seq_q/k,
    # max_q/k, philox seed and offset.
    o, lse, cum_q, cum_k, max_q, max_k, seed, offset = forward[:8]
    return BACKWARD(do, q, k, v, o, lse, cum_q, cum_k, max_q, max_k, 0.0, causal, seed, offset, scale=scale)


def differing(a, b):
    return int((a.view(torch.int16) != b.view(torch.int16)).sum())


def capture():
    manifest = {"versions": versions(), "runs": RUNS, "scenarios": []}
    for s in scenarios():
        q, k, v = (x.cuda() for x in make_inputs(s["kind"], s["B"], s["H"], s["N"], s["d"], s["seed"], s["NK"]))
        g = torch.Generator().manual_seed(s["seed"] + 100000)
        do = torch.randn(q.shape, generator=g).bfloat16().cuda()
        scale = s["d"] ** -0.5 if s["scale"] is None else s["scale"]
        forward = FORWARD(q, k, v, 0.0, s["causal"], False, scale=scale)
        o, lse = forward[:2]
        # The heads kept, of the first batch: one, or two of the tie heads (2 and 64 copies of the max).
        s["keep"] = [0, 3] if s["kind"].startswith("ties") else [0]
        entry = dict(s, lse_shape=list(lse.shape))
        kept = {}
        for mode in ("default", "deterministic"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.use_deterministic_algorithms(mode == "deterministic")
                try:
                    runs = [backward(q, k, v, forward, do, s["causal"], scale) for _ in range(RUNS)]
                    torch.cuda.synchronize()
                except Exception as e:
                    entry[mode] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    continue
                finally:
                    torch.use_deterministic_algorithms(False)
            entry[mode] = {name: [differing(runs[0][i], r[i]) for r in runs[1:]] for i, name in enumerate(("dq", "dk", "dv"))}
            entry[mode]["warnings"] = [str(w.message)[:200] for w in caught]
            kept[mode] = runs
        if "deterministic" in kept and "default" in kept:
            # How often the default (atomic) dQ differs from the deterministic one, run by run.
            entry["default_dq_vs_deterministic"] = [differing(r[0], kept["deterministic"][0][0]) for r in kept["default"]]
        folder = os.path.join(OUTDIR, s["name"])
        os.makedirs(folder, exist_ok=True)
        cut = lambda t: t[:1, s["keep"]]  # noqa: E731
        deterministic = kept["deterministic"][0]
        for name, t in (("q", q), ("k", k), ("v", v), ("o", o), ("do", do), ("dq", deterministic[0]),
                        ("dk", deterministic[1]), ("dv", deterministic[2])):
            np.save(os.path.join(folder, f"{name}.npy"), bits16(cut(t)))
        np.save(os.path.join(folder, "lse.npy"), cut(lse).float().contiguous().cpu().numpy())
        manifest["scenarios"].append(entry)
        json.dump(manifest, open(os.path.join(OUTDIR, "manifest.json"), "w"), indent=1)
        print(s["name"], {m: entry[m] for m in ("default", "deterministic")}, entry.get("default_dq_vs_deterministic"),
              flush=True)


if __name__ == "__main__":
    capture()
