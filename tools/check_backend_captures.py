#!/usr/bin/env python3
"""Every scenario of a cuda/capture/triton_attention.py capture through the
`bitexact attention` command, for each backend whose output the capture holds,
against the kernel's description: a Markdown table of the elements of O and L
compared and the mismatches, per scenario and kernel, and the totals; then
how often the backends' O differ from one another, pair by pair (PyTorch's
math backend included, which is captured but not described).

    python3 tools/check_backend_captures.py CAPTURE_DIR [BITEXACT]

BITEXACT is the command (default build/src/bitexact). Needs NumPy.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

KERNELS = {  # capture name: how the command names the kernel
    "flash": ["--preset", "pytorch_sdpa_flash_sm90"],
    "efficient": ["--preset", "pytorch_sdpa_efficient_sm90"],
    "cudnn": ["--preset", "pytorch_sdpa_cudnn_sm90"],
    "flex": ["--preset", "flex_attention_sm90"],
    "triton_example": ["--kernel", os.path.join(os.path.dirname(__file__), "..", "examples", "triton",
                                                "flash_forward.json")],
}
COUNT = re.compile(r"^(O|L): (\d+) elements compared, (\d+) mismatches$", re.M)


def call_options(scenario):
    """The command's options for a captured call's mask and scale."""
    return (["--causal"] if scenario["causal"] else []) + \
        (["--scale", repr(scenario["scale"])] if scenario["scale"] is not None else [])


def check(command, folder, scenario, kernel, scratch):
    o = os.path.join(folder, f"o_{kernel}.npy")
    if not os.path.exists(o):
        return None
    lse = np.load(os.path.join(folder, f"lse_{kernel}.npy"))
    n = scenario["N"]
    # The memory-efficient backend pads L to a multiple of 32 rows; the command takes [B, H, N].
    lse_path = os.path.join(scratch, "lse.npy")
    np.save(lse_path, np.ascontiguousarray(lse[..., :n]) if lse.ndim == 3 else lse)
    args = [command, "attention", *(os.path.join(folder, f"{x}.npy") for x in "qkv"), *KERNELS[kernel],
            "--expect-o", o, "--expect-lse", lse_path, *call_options(scenario)]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode == 2:
        return ("refused", run.stderr.strip().split(": ")[-1])
    counts = {name: (int(total), int(bad)) for name, total, bad in COUNT.findall(run.stdout)}
    return counts["O"] + counts["L"]


def bf16_of_float64(x):
    """Round float64 to bf16 once (to nearest, ties to even), as uint16 bits:
    through float32, where a float32 that lands on a bf16 midpoint is moved by
    the sign of what float32 dropped (no double rounding)."""
    f = x.astype(np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    low, base = u & 0xFFFF, u >> 16
    up = (low > 0x8000) | ((low == 0x8000) & (base & 1 == 1))
    midpoint = (low == 0x8000) & (x != f.astype(np.float64))
    up = np.where(midpoint, np.abs(x) > np.abs(f.astype(np.float64)), up)
    return np.where(np.isnan(f), 0x7FC0, base + up).astype(np.uint16)


def float64_attention(folder, s):
    """softmax(Q K^T scale) V in float64 from the captured bf16 inputs, rounded once to bf16."""
    q, k, v = (((np.load(os.path.join(folder, f"{x}.npy")).astype(np.uint32) << 16).view(np.float32).astype(np.float64))
               for x in "qkv")
    scale = s["scale"] if s["scale"] is not None else 1 / np.sqrt(q.shape[-1])
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if s["causal"]:  # top-left, as SDPA's is_causal
        scores = np.where(np.tril(np.ones(scores.shape[-2:], dtype=bool)), scores, -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.exp(scores - scores.max(-1, keepdims=True))
        return bf16_of_float64((p @ v) / p.sum(-1, keepdims=True))


def print_pairs(capture, manifest):
    """The O elements that differ between each two backends, over the
    scenarios where both ran; not the causal calls with N_q != N_k, whose
    masks differ (bottom-right in flash, flex and the example, top-left in
    SDPA's efficient, cuDNN and math)."""
    names = [*KERNELS, "math"]
    counts, exact = {}, {}
    for s in manifest["scenarios"]:
        if s["causal"] and s["N"] != s["NK"]:
            continue
        folder = os.path.join(capture, s["name"])
        o = {k: np.load(os.path.join(folder, f"o_{k}.npy")) for k in names
             if os.path.exists(os.path.join(folder, f"o_{k}.npy"))}
        if s["kind"] != "special":  # NaN and inf rows: no one rounding to compare with
            reference = float64_attention(folder, s)
            for k, x in o.items():
                tally = exact.setdefault(k, [0, 0])
                tally[0] += int((x != reference).sum())
                tally[1] += x.size
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if a in o and b in o:
                    pair = counts.setdefault((a, b), [0, 0])
                    pair[0] += int((o[a] != o[b]).sum())
                    pair[1] += o[a].size
    def share(tally, digits):  # "differ of compared (percent)", or "not run" for a kernel the capture lacks
        return "not run" if tally is None else f"{tally[0]:,} of {tally[1]:,} ({tally[0] / tally[1]:.{digits}%})"
    print("\n| O elements differing | " + " | ".join(names[1:]) + " |")
    print("| --- |" + " --- |" * (len(names) - 1))
    for i, a in enumerate(names[:-1]):
        cells = ["" if j <= i else share(counts.get((a, b)), 1) for j, b in enumerate(names) if j > 0]
        print(f"| **{a}** | " + " | ".join(cells) + " |")
    print("\n| O elements differing from float64 attention rounded once to bf16 (no NaN/inf scenarios) | " +
          " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    print("| | " + " | ".join(share(exact.get(k), 2) for k in names) + " |")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    capture = sys.argv[1]
    command = sys.argv[2] if len(sys.argv) == 3 else "build/src/bitexact"
    manifest = json.load(open(os.path.join(capture, "manifest.json")))
    totals = {k: [0, 0, 0, 0] for k in KERNELS}
    print("| scenario | " + " | ".join(KERNELS) + " |")
    print("| --- |" + " --- |" * len(KERNELS))
    with tempfile.TemporaryDirectory() as scratch:
        for s in manifest["scenarios"]:
            cells = []
            for kernel in KERNELS:
                result = check(command, os.path.join(capture, s["name"]), s, kernel, scratch)
                if result is None:
                    cells.append("not run")
                elif result[0] == "refused":
                    cells.append("refused")
                else:
                    o_total, o_bad, l_total, l_bad = result
                    for i, x in enumerate(result):
                        totals[kernel][i] += x
                    cells.append(f"{o_total:,} + {l_total:,}: {o_bad + l_bad}")
            print(f"| {s['name']} | " + " | ".join(cells) + " |", flush=True)
    print("| **total** (O + L: mismatches) | " + " | ".join(
        f"{t[0]:,} + {t[2]:,}: {t[1]} O, {t[3]} L" for t in totals.values()) + " |")
    print_pairs(capture, manifest)
    v = manifest["versions"]
    print(f"\n{v['gpu']}, driver {v['nvidia_smi'].split(', ')[-1]}, torch {v['torch']}, CUDA {v['cuda']}, "
          f"Triton {v.get('triton')}, cuDNN {v.get('cudnn')}")


if __name__ == "__main__":
    main()
