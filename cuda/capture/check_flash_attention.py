#!/usr/bin/env python3
"""Checks every scenario of a flash-attention capture (flash_attention.py
capture DIR) with `bitexact attention`, and sums the elements compared and the
mismatches, per path (single kernel, split-KV).

    python3 cuda/capture/check_flash_attention.py DIR [path/to/bitexact]

On the device machine, the whole matrix (docs/attention.md):

    python3 cuda/capture/flash_attention.py capture /tmp/cap && \\
    cmake --preset release && cmake --build build --target bitexact_cli -j16 && \\
    python3 cuda/capture/check_flash_attention.py /tmp/cap build/src/bitexact
"""
import json
import os
import re
import subprocess
import sys


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    capture = sys.argv[1]
    command = sys.argv[2] if len(sys.argv) == 3 else "build/src/bitexact"
    manifest = json.load(open(os.path.join(capture, "manifest.json")))
    totals = {}
    failures = 0
    for s in manifest["scenarios"]:
        folder = os.path.join(capture, s["name"])
        args = [command, "attention"] + [os.path.join(folder, f + ".npy") for f in "qkv"]
        args += ["--batch-heads", f"{s['B']},{s['H']}", "--expect-o", os.path.join(folder, "o.npy"),
                 "--expect-lse", os.path.join(folder, "lse.npy")]
        if s["causal"]:
            args.append("--causal")
        if s["scale"] is not None:
            args += ["--scale", repr(s["scale"])]
        run = subprocess.run(args, capture_output=True, text=True)
        counts = re.findall(r"^(O|L): (\d+) elements compared, (\d+) mismatches", run.stdout, re.M)
        if run.returncode != 0 or len(counts) != 2:
            failures += 1
            print(f"{s['name']}: exit {run.returncode}\n{run.stdout}{run.stderr}")
        path = "split-KV" if s["splits"] > 1 else "single kernel"
        entry = totals.setdefault(path, {"scenarios": 0, "O": [0, 0], "L": [0, 0]})
        entry["scenarios"] += 1
        for name, compared, mismatches in counts:
            entry[name][0] += int(compared)
            entry[name][1] += int(mismatches)
        print(f"{s['name']}: {path}, {s['splits']} split(s): " +
              ", ".join(f"{n} {c} compared, {m} mismatches" for n, c, m in counts), flush=True)
    for path, e in totals.items():
        print(f"{path}: {e['scenarios']} scenarios, O {e['O'][0]} compared, {e['O'][1]} mismatches; "
              f"L {e['L'][0]} compared, {e['L'][1]} mismatches")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
