#!/usr/bin/env python3
"""FP8 attention captures for the library, cuDNN's (cuda/capture/cudnn_fp8_sdpa_probe.py) and our FP8
kernel's (cuda/attention/capture_flash_fp8.py): cut into tests/data, or replayed whole through
`bitexact attention --preset PRESET`, each case's preset from its facts (cuDNN's: cudnn_sdpa_fp8_sm90).
Needs NumPy.

    python3 cuda/capture/fp8_attention_pack.py pack DEST SPEC [SPEC ...]
    python3 cuda/capture/fp8_attention_pack.py replay BITEXACT OUTDIR [OUTDIR ...]

SPEC is PROBE_OUTDIR:CASE:HEAD:FIRST:ROWS, one head of one case of a probe's probe.npz. Rows of the
recipe are independent of each other (each keeps its own max, sums and acc), so a case keeps ROWS query
rows from FIRST with every key, the call then being ROWS queries against N keys; a causal case (top-left)
keeps rows and keys 0 to ROWS - 1, whose rows see only those keys, the blocks past them masked for them.
pack writes DEST/NAME/{q,k,v}.npy (uint8 e4m3 bit patterns, [rows, d]), o.npy (uint8 e4m3 or uint16
bf16, as captured), stats.npy (float32 [rows]), for a case that ran the leading indicator also
p_bar_ones.npy and max_repeated.npy (int32 [rows]), and DEST/MANIFEST: per case a line

    case NAME QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL DESCALE_Q DESCALE_K DESCALE_V DESCALE_S SCALE_S SCALE_O PRESET

the scales as float32 bit patterns in hex, a "# from" line naming the capture, and "file FNV1A64 PATH"
per file (the project's FNV-1a 64, include/bitexact/core/checksum.hpp). The rows of both recipes are
independent of each other, but under the causal mask FA2's masking steps (our kernel's) also depend on
whether N is a multiple of the blocks: a causal cut keeps that as the capture had it.

replay writes every case of each probe OUTDIR as [1, H, N, d] files into a temporary folder and runs
BITEXACT (the command) on it with --expect-o and --expect-lse, and totals what it prints.
"""
import glob
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
    """Every probe*.npz of outdir as one mapping, and its facts.json."""
    arrays = {}
    for path in sorted(glob.glob(os.path.join(outdir, "probe*.npz"))):
        arrays.update(np.load(path))
    return arrays, json.load(open(os.path.join(outdir, "facts.json")))


def preset_of(case):
    return case.get("preset", "cudnn_sdpa_fp8_sm90")


def case_facts(facts, name):
    found = [c for c in facts["cases"] if c["name"] == name and "error" not in c]
    if not found:
        sys.exit(f"no captured case {name}")
    return found[0]


def f32_hex(x):
    return f"{np.float32(x).view(np.uint32):08x}"


def pack(dest, specs):
    os.makedirs(dest, exist_ok=True)
    facts = load(specs[0].rsplit(":", 4)[0])[1]
    lines = ["# FP8 attention captures, one head of a capture's case per folder, rows cut as",
             "# cuda/capture/fp8_attention_pack.py says.",
             f"# GPU {facts.get('gpu', '?')}, CUDA {facts.get('cuda', '?')}, torch {facts.get('torch', '?')}.",
             "# case NAME QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL " + " ".join(s.upper() for s in SCALES) +
             " (float32 bits) PRESET",
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
        lines.append(f"case {name} {q.shape[0]} {k.shape[0]} {d} {int(c['causal'])} {scales} {preset_of(c)}")
        lines.append(f"# from {os.path.basename(os.path.normpath(outdir))} case {case} (N {n}, B 1) head {head}")
        files = [("q", q), ("k", k), ("v", v), ("o", o), ("stats", stats)]
        # The leading indicator of a case that ran it (our kernel's standard cases): int32 per row.
        files += [(x, arrays[f"{case}/{x}"][0, head][first:first + rows]) for x in ("p_bar_ones", "max_repeated")
                  if f"{case}/{x}" in arrays]
        for x, array in files:
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
                args = [command, "attention", files["q"], files["k"], files["v"], "--preset", preset_of(c),
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
