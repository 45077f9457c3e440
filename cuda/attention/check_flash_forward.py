#!/usr/bin/env python3
"""Checks our flash-attention kernels (cuda/attention/flash_forward.cu, FA2's
structure, and flash_forward_wgmma.cu, Hopper's) on the device machine and
saves heads of the variants for the emulator. Run from the repository root:

    python3 cuda/attention/check_flash_forward.py OUT_DIR

Over the scenario matrix of cuda/capture/flash_attention.py (its input
generator and seeds: normal inputs at N 1/17/128/1000/4096, ties at positive
and negative maxima with V of negative mean, an attention sink, large scores,
scale 0.3, NaN/inf/zero rows, both head dims, causal and not, query and key
lengths that differ), each call with enough heads that PyTorch takes its
single-split kernel, it compares every O and L element of the standard
variant with torch.ops.aten._scaled_dot_product_flash_attention, runs the
stabilized variants (beta 2, eps 0.001; per block and across blocks) on the
same inputs, runs the wgmma kernel's three variants and its indicator and
compares every element of each with the FA2-structure kernel's (its
standard one with PyTorch's too), and saves the kept heads of all three under OUT_DIR/<scenario>/
(q, k, v, o_standard, lse_standard, o_stabilized, lse_stabilized, o_across,
lse_across as .npy; uint16 bf16 patterns [heads, N, d], lse float32
[heads, N]) with manifest.json (calls, heads kept, versions).
tools/pack_attention_captures.py kernel turns them into tests/data cases; the
emulator checks them (bitexact attention --expect-o/--expect-lse). Then
the scenario generator's heads (synthetic_heads.py: maxima tied 1 to 64
times, in one block, across blocks or as a sink, each maximum kind, V of
either sign, d 64 and 128, 512 and 4096 keys): PyTorch's O against both
structures' standard kernels, and the wgmma kernel's stabilized variants
against the FA2 structure's. Exit status 1 on any mismatch with PyTorch or
between the two structures.
"""
import json
import math
import os
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "capture"))
from flash_attention import make_inputs, versions  # noqa: E402

if len(sys.argv) != 2:
    sys.exit(__doc__)
out = sys.argv[1]
import bitexact.torch as bitexact_torch  # noqa: E402 (PYTHONPATH=build/python, or pip install)


def single_split_heads(n):
    # flash-attention's num_splits_heuristic keeps one split when
    # B*H*ceil(N/64) >= 0.8 * 2 * 132 SMs; a margin above that.
    return max(4, math.ceil(1.1 * 0.8 * 264 / math.ceil(n / 64)))


def scenarios():
    out = []
    seed = 1000
    for d in (64, 128):
        for n in (1, 17, 128, 1000, 4096):
            for causal in (False, True):
                keep = [0] if n == 4096 else [0, 1]
                out.append(dict(name=f"d{d}_n{n}_{'causal' if causal else 'full'}_normal", kind="normal", N=n, NK=n,
                                d=d, causal=causal, scale=None, keep=keep, seed=seed))
                seed += 1
        for kind in ("ties_positive", "ties_negative", "sink", "large", "scale", "special"):
            for causal in ((False, True) if kind.startswith("ties") else (False,)):
                # ties: heads 0..3 hold 2, 3, 8 and 64 copies of the maximising key
                keep = [0, 3] if kind.startswith("ties") else [0]
                out.append(dict(name=f"d{d}_n1000_{'causal' if causal else 'full'}_{kind}", kind=kind, N=1000,
                                NK=1000, d=d, causal=causal, scale=0.3 if kind == "scale" else None, keep=keep,
                                seed=seed))
                seed += 1
    # Query and key lengths that differ; causal with more queries than keys
    # leaves whole rows (and whole row blocks) masked.
    for d, n, nk, causal in ((64, 300, 1000, True), (128, 1000, 300, True), (128, 64, 3000, False)):
        out.append(dict(name=f"d{d}_q{n}_k{nk}_{'causal' if causal else 'full'}_normal", kind="normal", N=n, NK=nk,
                        d=d, causal=causal, scale=None, keep=[0], seed=seed))
        seed += 1
    for s in out:
        s["B"], s["H"] = 1, single_split_heads(s["N"])
    return out


def bits16(t):
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


print(torch.cuda.get_device_name(), "torch", torch.__version__, "CUDA", torch.version.cuda, flush=True)
manifest = {"versions": versions(), "beta": 2.0, "eps": 1e-3, "scenarios": []}
totals = dict(o=0, lse=0, mismatches=0, stabilized_differs=0, wgmma_elements=0, wgmma_mismatches=0, wgmma_vs_pytorch=0)


def differing(a, b):
    """Elements whose bits differ (O as int16, L and counts as int32)."""
    view = torch.int16 if a.dtype == torch.bfloat16 else torch.int32
    return (a.view(view) != b.view(view)).sum().item()

for s in scenarios():
    q, k, v = (x.cuda() for x in make_inputs(s["kind"], s["B"], s["H"], s["N"], s["d"], s["seed"], s["NK"]))
    scale = 1.0 / math.sqrt(s["d"]) if s["scale"] is None else s["scale"]
    ref_o, ref_lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, s["causal"], False,
                                                                        scale=s["scale"])[:2]
    # The FA2 structure's three rules (the wgmma kernel's are compared with them below).
    o, lse = bitexact_torch.flash_forward(q, k, v, s["causal"], scale, 0, 2.0, 1e-3, "fa2")
    o2, lse2 = bitexact_torch.flash_forward(q, k, v, s["causal"], scale, 0, 2.0, 1e-3, "fa2")
    so, slse = bitexact_torch.flash_forward(q, k, v, s["causal"], scale, 1, 2.0, 1e-3, "fa2")
    ao, alse = bitexact_torch.flash_forward(q, k, v, s["causal"], scale, 2, 2.0, 1e-3, "fa2")
    torch.cuda.synchronize()
    bad_o = (o.view(torch.int16) != ref_o.view(torch.int16)).sum().item()
    bad_l = (lse.view(torch.int32) != ref_lse.view(torch.int32)).sum().item()
    deterministic = torch.equal(o.view(torch.int16), o2.view(torch.int16)) and torch.equal(lse.view(torch.int32),
                                                                                           lse2.view(torch.int32))
    differs = (so.view(torch.int16) != o.view(torch.int16)).sum().item()
    # The wgmma kernel: each rule's O and L against the FA2 structure's, the indicator's counts too.
    wgmma_bad = 0
    for rule, (fo, fl) in enumerate(((o, lse), (so, slse), (ao, alse))):
        wo, wl = bitexact_torch.flash_forward(q, k, v, s["causal"], scale, rule, 2.0, 1e-3, "wgmma")
        wgmma_bad += differing(wo, fo) + differing(wl, fl)
        if rule == 0:
            totals["wgmma_vs_pytorch"] += differing(wo, ref_o) + differing(wl, ref_lse)
        totals["wgmma_elements"] += wo.numel() + wl.numel()
    if scale > 0:
        fa2_ind = bitexact_torch.flash_forward_with_indicator(q, k, v, s["causal"], scale, 1e-3, "fa2")
        wgmma_ind = bitexact_torch.flash_forward_with_indicator(q, k, v, s["causal"], scale, 1e-3, "wgmma")
        wgmma_bad += sum(differing(a, b) for a, b in zip(fa2_ind, wgmma_ind))
        totals["wgmma_elements"] += sum(x.numel() for x in wgmma_ind)
    totals["wgmma_mismatches"] += wgmma_bad
    totals["o"] += o.numel(); totals["lse"] += lse.numel(); totals["mismatches"] += bad_o + bad_l
    totals["stabilized_differs"] += differs
    print(f"{s['name']} B{s['B']} H{s['H']}: O {o.numel()} mismatches {bad_o}, L {lse.numel()} mismatches {bad_l}; "
          f"deterministic {deterministic}; stabilized O differs from standard in {differs}; wgmma kernel "
          f"(3 rules + indicator) vs FA2 structure: mismatches {wgmma_bad}", flush=True)
    folder = os.path.join(out, s["name"])
    os.makedirs(folder, exist_ok=True)
    keep = s["keep"]
    for name, x in (("q", q), ("k", k), ("v", v), ("o_standard", o), ("o_stabilized", so), ("o_across", ao)):
        np.save(os.path.join(folder, name + ".npy"), bits16(x[0, keep]))
    for name, x in (("lse_standard", lse), ("lse_stabilized", slse), ("lse_across", alse)):
        np.save(os.path.join(folder, name + ".npy"), x[0, keep].contiguous().cpu().numpy())
    manifest["scenarios"].append(dict(s, o_mismatches=bad_o, lse_mismatches=bad_l, deterministic=deterministic,
                                      stabilized_differs=differs, wgmma_mismatches=wgmma_bad))
json.dump(manifest, open(os.path.join(out, "manifest.json"), "w"), indent=1)

# The scenario generator's heads, one call per (head dim, keys): B 1, 32 query rows, every cell's head,
# repeated until PyTorch takes its single-split kernel (single_split_heads, for one row block per head).
import synthetic_heads  # noqa: E402
generated = dict(heads=0, elements=0, mismatches=0)
cells = synthetic_heads.cells((64, 128), (512, 4096), synthetic_heads.MAX_KINDS, synthetic_heads.PLACEMENTS,
                              (1, 2, 4, 8, 16, 32, 64), (-1.0, 1.0), 32)
for shape in dict.fromkeys((c["head_dim"], c["keys"]) for c in cells):
    numbers = [h for h, c in enumerate(cells) if (c["head_dim"], c["keys"]) == shape]
    heads = [synthetic_heads.make_head_torch(cells[h], 1, h, "cuda") for h in numbers]
    repeats = math.ceil(single_split_heads(64) / len(heads))
    q, k, v = (torch.stack([head[i] for head in heads] * repeats)[None] for i in range(3))
    scale = float(np.float32(1.0 / math.sqrt(shape[0])))
    reference = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False, scale=scale)[:2]
    bad = {}
    for rule in (0, 1, 2):
        fa2 = bitexact_torch.flash_forward(q, k, v, False, scale, rule, 2.0, 1e-3, "fa2")
        wgmma = bitexact_torch.flash_forward(q, k, v, False, scale, rule, 2.0, 1e-3, "wgmma")
        pairs = {f"wgmma vs fa2, rule {rule}": (fa2, wgmma)}
        if rule == 0:
            pairs.update({"PyTorch vs fa2": (reference, fa2), "PyTorch vs wgmma": (reference, wgmma)})
        for name, ((o1, l1), (o2, l2)) in pairs.items():
            bad[name] = differing(o1, o2) + differing(l1, l2)
            generated["elements"] += o1.numel() + l1.numel()
    generated["heads"] += len(numbers)
    generated["mismatches"] += sum(bad.values())
    print(f"scenario generator, d {shape[0]}, {shape[1]} keys: {len(numbers)} heads x {repeats} (H {q.shape[1]}), "
          f"mismatches {bad}", flush=True)
totals["mismatches"] += generated["mismatches"]
print(f"scenario generator: {len(cells)} cells, {generated['heads']} heads, {generated['elements']} elements compared "
      f"(PyTorch vs both standard kernels, wgmma vs FA2 structure for all three rules), mismatches "
      f"{generated['mismatches']}")

# The one-line swap a user makes, in a model's own call: the same bits as PyTorch's flash backend.
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
q, k, v = (torch.randn(2, 16, 1000, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)
original, F.scaled_dot_product_attention = F.scaled_dot_product_attention, bitexact_torch.scaled_dot_product_attention
swapped = F.scaled_dot_product_attention(q, k, v, is_causal=True)
F.scaled_dot_product_attention = original
swap_bad = (swapped.view(torch.int16) != reference.view(torch.int16)).sum().item()
totals["mismatches"] += swap_bad
print(f"F.scaled_dot_product_attention swapped for bitexact.torch's: O {swapped.numel()} mismatches {swap_bad}")
print(f"standard vs PyTorch: {len(manifest['scenarios'])} scenarios, {totals['o']} O and {totals['lse']} L elements, "
      f"mismatches {totals['mismatches']}; stabilized O differs from standard in {totals['stabilized_differs']}")
print(f"wgmma kernel vs FA2 structure (standard, stabilized, across, indicator): {totals['wgmma_elements']} elements, "
      f"mismatches {totals['wgmma_mismatches']}; its standard kernel vs PyTorch: mismatches {totals['wgmma_vs_pytorch']}")
sys.exit(1 if totals["mismatches"] or totals["wgmma_mismatches"] or totals["wgmma_vs_pytorch"] else 0)
