#!/usr/bin/env python3
"""cudnn_fp8_sdpa_probe.py's captures for the library: cut into tests/data, or replayed whole through
`bitexact attention --preset cudnn_sdpa_fp8_sm90`. Needs NumPy.

    python3 cuda/capture/cudnn_fp8_sdpa_pack.py pack DEST SPEC [SPEC ...]
    python3 cuda/capture/cudnn_fp8_sdpa_pack.py replay BITEXACT OUTDIR [OUTDIR ...]

SPEC is PROBE_OUTDIR:CASE:HEAD:FIRST:ROWS, one head of one case of a probe's probe.npz. Rows of the
recipe are independent of each other (each keeps its own max, sums and acc), so a case keeps ROWS query
rows from FIRST with every key, the call then being ROWS queries against N keys; a causal case (top-left)
keeps rows and keys 0 to ROWS - 1, whose rows see only those keys, the blocks past them masked for them.
pack writes DEST/NAME/{q,k,v,o}.npy (uint8 e4m3 bit patterns, [rows, d]) and stats.npy (float32 [rows])
and DEST/MANIFEST: per case a line

    case NAME QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL DESCALE_Q DESCALE_K DESCALE_V DESCALE_S SCALE_S SCALE_O

the scales as float32 bit patterns in hex, a "# from" line naming the capture, and "file FNV1A64 PATH"
per file (the project's FNV-1a 64, include/bitexact/core/checksum.hpp).

replay writes every case of each probe OUTDIR as [1, H, N, d] files into a temporary folder and runs
BITEXACT (the command) on it with --expect-o and --expect-lse, and totals what it prints.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

# The project's FNV-1a 64 of tests/data's MANIFESTs, defined once beside the other packer.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from pack_attention_captures import fnv1a64  # noqa: E402

SCALES = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")


def load(outdir):
    return np.load(os.path.join(outdir, "probe.npz")), json.load(open(os.path.join(outdir, "facts.json")))


def case_facts(facts, name):
    found = [c for c in facts["cases"] if c["name"] == name and "error" not in c]
    if not found:
        sys.exit(f"no captured case {name}")
    return found[0]


def f32_hex(x):
    return f"{np.float32(x).view(np.uint32):08x}"


def pack(dest, specs):
    os.makedirs(dest, exist_ok=True)
    lines = ["# cuDNN 9.19's fp8 SDPA forward (cudnn-frontend 1.32's sdpa_fp8), one head of a probe case per folder,",
             "# rows cut as cuda/capture/cudnn_fp8_sdpa_pack.py says (cuda/capture/cudnn_fp8_sdpa_probe.py).",
             "# GPU NVIDIA H100 80GB HBM3 (sm_90, 132 SMs), driver 580.159.04, CUDA 13.0, torch 2.11.0+cu130.",
             "# case NAME QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL " + " ".join(s.upper() for s in SCALES) +
             " (float32 bits)",
             "# file FNV1A64 PATH"]
    for spec in specs:
        outdir, case, head, first, rows = spec.rsplit(":", 4)
        head, first, rows = int(head), int(first), int(rows)
        arrays, facts = load(outdir)
        c = case_facts(facts, case)
        q, k, v, o = (arrays[f"{case}/{x}"][0, head] for x in "qkvo")
        stats = arrays[f"{case}/stats"][0, head]
        n, d = q.shape
        if c["causal"]:
            if first != 0:
                sys.exit(f"{spec}: a causal case keeps rows from 0 (and keys up to ROWS)")
            k, v = k[:rows], v[:rows]
        q, o, stats = q[first:first + rows], o[first:first + rows], stats[first:first + rows]
        name = f"{case}_n{n}_h{head}_rows{first}-{first + rows - 1}"
        os.makedirs(os.path.join(dest, name), exist_ok=True)
        scales = " ".join(f32_hex(arrays[f"{case}/{s}"]) for s in SCALES)
        lines.append(f"case {name} {q.shape[0]} {k.shape[0]} {d} {int(c['causal'])} {scales}")
        lines.append(f"# from {os.path.basename(os.path.normpath(outdir))} case {case} (N {n}, B 1, H 2) head {head}")
        for x, array in (("q", q), ("k", k), ("v", v), ("o", o), ("stats", stats)):
            path = os.path.join(dest, name, f"{x}.npy")
            np.save(path, np.ascontiguousarray(array))
            lines.append(f"file {fnv1a64(open(path, 'rb').read()):016x} {name}/{x}.npy")
    with open(os.path.join(dest, "MANIFEST"), "w") as f:
        f.write("\n".join(lines) + "\n")


def replay(command, outdirs):
    totals = {"O": [0, 0], "L": [0, 0]}
    cases = 0
    with tempfile.TemporaryDirectory() as scratch:
        for outdir in outdirs:
            arrays, facts = load(outdir)
            for c in facts["cases"]:
                if "error" in c:
                    continue
                name = c["name"]
                files = {}
                for x in ("q", "k", "v", "o", "stats"):
                    files[x] = os.path.join(scratch, f"{x}.npy")
                    np.save(files[x], arrays[f"{name}/{x}"])
                args = [command, "attention", files["q"], files["k"], files["v"], "--preset", "cudnn_sdpa_fp8_sm90",
                        "--expect-o", files["o"], "--expect-lse", files["stats"]]
                for s in SCALES:
                    args += ["--" + s.replace("_", "-"), repr(float(arrays[f"{name}/{s}"]))]
                if c["causal"]:
                    args.append("--causal")
                run = subprocess.run(args, capture_output=True, text=True)
                if run.returncode not in (0, 1):
                    sys.exit(f"{outdir} {name}: {run.stderr.strip()}")
                for what, count, missed in re.findall(r"^(O|L): ([\d,]+) elements? compared, ([\d,]+|no) mismatch",
                                                      run.stdout, re.M):
                    totals[what][0] += int(count.replace(",", ""))
                    totals[what][1] += 0 if missed == "no" else int(missed.replace(",", ""))
                cases += 1
                print(f"{os.path.basename(os.path.normpath(outdir))} {name}: " +
                      "; ".join(line for line in run.stdout.splitlines() if line.startswith(("O:", "L:"))), flush=True)
    print(f"{cases} cases: O {totals['O'][0]} compared, {totals['O'][1]} mismatches; "
          f"Stats {totals['L'][0]} compared, {totals['L'][1]} mismatches")


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "pack":
        pack(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) >= 4 and sys.argv[1] == "replay":
        replay(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
