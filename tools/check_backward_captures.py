#!/usr/bin/env python3
"""Every scenario of a cuda/capture/flash_backward.py capture through
`bitexact attention --backward`: a Markdown table of the dQ, dK and dV elements
compared and the mismatches per scenario (the deterministic runs), how many of
dQ's elements each default-mode run (atomic additions) changed against the
deterministic dQ, and the totals.

    python3 tools/check_backward_captures.py CAPTURE_DIR [BITEXACT]

BITEXACT is the command (default build/src/bitexact).
"""
import json
import os
import re
import subprocess
import sys

from check_backend_captures import call_options

COUNT = re.compile(r"^(dQ|dK|dV): (\d+) elements compared, (\d+) mismatches$", re.M)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    capture = sys.argv[1]
    command = sys.argv[2] if len(sys.argv) == 3 else "build/src/bitexact"
    manifest = json.load(open(os.path.join(capture, "manifest.json")))
    total = {"dQ": [0, 0], "dK": [0, 0], "dV": [0, 0]}
    atomic = [0, 0]
    print("| scenario | B x H | dQ buffers | dQ | dK | dV | default-mode dQ elements off, per run |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for s in manifest["scenarios"]:
        folder = os.path.join(capture, s["name"])
        path = lambda name: os.path.join(folder, f"{name}.npy")  # noqa: E731
        args = [command, "attention", path("q"), path("k"), path("v"), "--batch-heads", f"{s['B']},{s['H']}",
                "--backward", path("do"), "--forward-o", path("o"), "--forward-lse", path("lse"),
                "--expect-dq", path("dq"), "--expect-dk", path("dk"), "--expect-dv", path("dv"), *call_options(s)]
        run = subprocess.run(args, capture_output=True, text=True)
        if run.returncode == 2:
            sys.exit(f"{s['name']}: {run.stderr.strip()}")
        counts = {name: (int(n), int(bad)) for name, n, bad in COUNT.findall(run.stdout)}
        for name, (n, bad) in counts.items():
            total[name][0] += n
            total[name][1] += bad
        off = s.get("default_dq_vs_deterministic", [])
        atomic[0] += sum(off)
        atomic[1] += len(off) * counts["dQ"][0] * s["B"] * s["H"] // len(s["keep"])
        buffers = -(-manifest["versions"]["sm_count"] // (s["B"] * s["H"]))
        print(f"| {s['name']} | {s['B']} x {s['H']} | {buffers} | " +
              " | ".join(f"{counts[x][0]:,}: {counts[x][1]}" for x in ("dQ", "dK", "dV")) +
              f" | {', '.join(str(x) for x in off)} of {counts['dQ'][0] * s['B'] * s['H'] // len(s['keep']):,} |",
              flush=True)
    print("| **total** | | | " + " | ".join(f"{total[x][0]:,}: {total[x][1]}" for x in ("dQ", "dK", "dV")) +
          f" | {atomic[0]:,} of {atomic[1]:,} |")
    v = manifest["versions"]
    print(f"\n{v['gpu']}, driver {v['nvidia_smi'].split(', ')[-1]}, torch {v['torch']}, CUDA {v['cuda']}; "
          f"{manifest['runs']} runs a mode")


if __name__ == "__main__":
    main()
