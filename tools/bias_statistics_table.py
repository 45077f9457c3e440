#!/usr/bin/env python3
"""The Markdown table of docs/bias.md from a `statistics.csv` written by
`bitexact bias statistics` (the emulator) or cuda/attention/bias_statistics.py
(the GPU): one line per selected cell and kernel, errors in units of 10^-6,
mean +- the half width of the 95% interval.

    python3 tools/bias_statistics_table.py CSV [--v-mean -1] [--cells one_block:1,one_block:64,...]
"""
import argparse
import csv

parser = argparse.ArgumentParser()
parser.add_argument("csv")
parser.add_argument("--v-mean", default="-1")
parser.add_argument("--cells", default="one_block:1,one_block:64,across_blocks:4,sink:8",
                    help="placement:ties pairs, in the order of the table")
parser.add_argument("--kernels", default="standard,stabilized",
                    help="kernels shown (pytorch_flash and across_blocks too, if in the CSV)")
args = parser.parse_args()

rows = list(csv.DictReader(open(args.csv)))
if not rows:
    raise SystemExit(f"{args.csv}: no data lines")
wanted = [tuple(cell.split(":")) for cell in args.cells.split(",")]
kernels = args.kernels.split(",")
has_fp32 = any(r["o_fp32_mean"] for r in rows)


def micro(mean, half):
    return f"{float(mean) * 1e6:+.0f} ± {float(half) * 1e6:.0f}"


header = "| maximum | placement, ties | rows (units) | kernel | O |" + (" O in fp32 |" if has_fp32 else "") + \
         " delta |" + (" P̄ = 1 a row |" if has_fp32 else "")
print(header)
print("|" + "---|" * 4 + "---:|" * (header.count("|") - 5))
shown = 0
for kind in dict.fromkeys(r["max_kind"] for r in rows):
    for placement, ties in wanted:
        for r in rows:
            if (r["max_kind"], r["placement"], r["ties"]) != (kind, placement, ties) or \
               float(r["v_mean"]) != float(args.v_mean) or r["kernel"] not in kernels:
                continue
            name = r["kernel"] + (f" β {float(r['beta']):g}" if r["beta"] else "")
            line = f"| {kind} | {placement}, {ties} | {r['rows']} ({r['clusters']}) | {name} | " + \
                   micro(r["o_mean"], r["o_ci95"]) + " |"
            if has_fp32:
                line += " " + micro(r["o_fp32_mean"], r["o_fp32_ci95"]) + " |"
            line += " " + micro(r["delta_mean"], r["delta_ci95"]) + " |"
            if has_fp32:
                line += f" {float(r['p_one_mean']):.2f} |"
            print(line)
            shown += 1
if shown == 0:
    raise SystemExit("no line of the CSV matches the selection")
