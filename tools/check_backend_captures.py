#!/usr/bin/env python3
"""Every scenario of a cuda/capture/triton_attention.py capture through the
`bitexact attention` command, for each backend whose output the capture holds,
against the kernel's description: a Markdown table of the elements of O and L
compared and the mismatches, per scenario and kernel, and the totals.

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
            "--expect-o", o, "--expect-lse", lse_path]
    if scenario["causal"]:
        args.append("--causal")
    if scenario["scale"] is not None:
        args += ["--scale", repr(scenario["scale"])]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode == 2:
        return ("refused", run.stderr.strip().split(": ")[-1])
    counts = {name: (int(total), int(bad)) for name, total, bad in COUNT.findall(run.stdout)}
    return counts["O"] + counts["L"]


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
    v = manifest["versions"]
    print(f"\n{v['gpu']}, driver {v['nvidia_smi'].split(', ')[-1]}, torch {v['torch']}, CUDA {v['cuda']}, "
          f"Triton {v.get('triton')}, cuDNN {v.get('cudnn')}")


if __name__ == "__main__":
    main()
