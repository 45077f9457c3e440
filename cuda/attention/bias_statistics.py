#!/usr/bin/env python3
"""`bitexact bias statistics` on the GPU: the mean signed error of O and of
delta = rowsum(dO O) over synthetic heads (cuda/attention/synthetic_heads.py,
the same heads as the C++ command), for our standard kernel, our stabilized
kernels (beta 2 and 7, eps 0.001, per K/V block; --across-blocks also the
rule across blocks) and PyTorch's flash backend, against the exact output in
float64 on the GPU. Run from the repository root on the device machine:

    python3 cuda/attention/bias_statistics.py OUT_DIR                  # 168 cells x 200 heads x 32 rows = 1,075,200 rows
    python3 cuda/attention/bias_statistics.py OUT_DIR --head-dims 128 --keys 4096 --rows 64 --heads 24

Writes OUT_DIR/statistics.csv (the C++ command's columns; o_fp32 and p_one
empty: the GPU's intermediate values are not observed), OUT_DIR/heads/ (the
first --save heads of the first call: q, k, v, d_o and each kernel's o as
uint16 bf16 patterns [1, heads, rows or keys, d], heads.csv) and prints a
table and the count of O elements where PyTorch's flash backend and our
standard kernel differ (expected 0). Head h of cell c is generator head
r * cells + c for replicate r, as in the C++ command, so the run above
repeats `bitexact bias statistics` (default options) in its first 16
replicates. Compare the saved heads with the emulator:

    bitexact attention OUT_DIR/heads/q.npy OUT_DIR/heads/k.npy OUT_DIR/heads/v.npy \\
        --batch-heads 1,BH --expect-o OUT_DIR/heads/o_standard.npy      (BH: printed, the call's heads)
    ... --preset pytorch_sdpa_flash_sm90_stabilized --beta 7 --expect-o OUT_DIR/heads/o_stabilized_beta7.npy

--cpu-dry-run replaces every kernel by a float32 softmax on the CPU (any
torch >= 1.13), so that everything but the kernels can be tried without a GPU.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import synthetic_heads  # noqa: E402

T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def student_t_975(freedom):
    """As src/bias_statistics.hpp: the table to 30, the Cornish-Fisher expansion beyond."""
    if freedom < 1:
        return math.nan
    if freedom <= 30:
        return T_975[freedom - 1]
    z, n = 1.959963984540054, float(freedom)
    return (z + (z ** 3 + z) / (4 * n) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * n * n) +
            (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * n ** 3))


def mean_and_half_width(values, clusters):
    """The row mean and the clustered 95% half width (clusters: an integer per row)."""
    values = np.asarray(values, np.float64)
    _, inverse = np.unique(clusters, return_inverse=True)
    means = np.bincount(inverse, values) / np.bincount(inverse)
    k = len(means)
    half = student_t_975(k - 1) * means.std(ddof=1) / math.sqrt(k) if k >= 2 else math.nan
    return values.mean(), half, k


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--head-dims", default="64")
    p.add_argument("--keys", default="512")
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--heads", type=int, default=200, help="heads per cell")
    p.add_argument("--ties", default="1,2,4,8,16,32,64")
    p.add_argument("--placements", default=",".join(synthetic_heads.PLACEMENTS))
    p.add_argument("--maxima", default=",".join(synthetic_heads.MAX_KINDS))
    p.add_argument("--v-means", default="-1,1")
    p.add_argument("--betas", default="2,7")
    p.add_argument("--eps", type=float, default=1e-3)
    p.add_argument("--across-blocks", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--heads-per-call", type=int, default=1344, help="heads in one kernel call (B = 1, H = this)")
    p.add_argument("--save", type=int, default=16, help="heads of the first call saved under OUT/heads")
    p.add_argument("--cpu-dry-run", action="store_true")
    return p.parse_args()


def reference_attention(q, k, v, scale):
    """The dry run's stand-in for a kernel: float32 softmax, O rounded to bf16."""
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    return (torch.softmax(s, -1) @ v.float()).to(torch.bfloat16)


def kernels(args, dry):
    """(name, beta, function(q, k, v, scale) -> O) of every kernel compared."""
    betas = [float(b) for b in args.betas.split(",")]
    if dry:
        out = [("standard", "", reference_attention), ("pytorch_flash", "", reference_attention)]
        return out + [("stabilized", b, reference_attention) for b in betas]
    import bitexact.torch as bitexact_torch

    def ours(rule, beta):
        return lambda q, k, v, scale: bitexact_torch.flash_forward(q, k, v, False, scale, rule, beta, args.eps)[0]

    def pytorch(q, k, v, scale):
        return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False, scale=scale)[0]

    out = [("standard", "", ours(0, 2.0)), ("pytorch_flash", "", pytorch)]
    out += [("stabilized", b, ours(1, b)) for b in betas]
    if args.across_blocks:
        out += [("across_blocks", b, ours(2, b)) for b in betas]
    return out


def exact_output(q, k, v, scale):
    """softmax(scale Q K^T) V in float64 (the scores are exact: multiples of 2^-20 below 2^7)."""
    s = q.double() @ k.double().transpose(-1, -2)
    p = torch.exp(scale * (s - s.amax(-1, keepdim=True)))
    return (p @ v.double()) / p.sum(-1, keepdim=True)


def main():
    args = parse()
    dry = args.cpu_dry_run
    device = "cpu" if dry else "cuda"
    list_of = (lambda text, cast=str: [cast(x) for x in text.split(",")])
    cells = synthetic_heads.cells(list_of(args.head_dims, int), list_of(args.keys, int), list_of(args.maxima),
                                  list_of(args.placements), list_of(args.ties, int), list_of(args.v_means, float),
                                  args.rows)
    runs = kernels(args, dry)
    print(("CPU dry run (kernels replaced by a float32 softmax)" if dry else torch.cuda.get_device_name()),
          "torch", torch.__version__, f"{len(cells)} cells x {args.heads} heads x {args.rows} rows", flush=True)
    # Per kernel: the rows' o, o_away, delta, cell and cluster, collected call by call.
    collected = {(name, beta): dict(o=[], o_away=[], delta=[]) for name, beta, _ in runs}
    row_cell, row_cluster = [], []
    mismatches = compared = 0
    total_heads = len(cells) * args.heads
    # Calls group heads of one (head dim, keys), in head order.
    shape_of = [(c["head_dim"], c["keys"]) for c in cells]
    started = time.time()
    first_call = True
    for shape in dict.fromkeys(shape_of):
        numbers = [h for h in range(total_heads) if shape_of[h % len(cells)] == shape]
        d = shape[0]
        scale = float(np.float32(1.0 / math.sqrt(d)))  # the fp32 scale the kernels receive
        for at in range(0, len(numbers), args.heads_per_call):
            call = numbers[at:at + args.heads_per_call]
            heads = [synthetic_heads.make_head_torch(cells[h % len(cells)], args.seed, h, device) for h in call]
            q, k, v, d_o = (torch.stack([head[i] for head in heads])[None] for i in range(4))
            groups = torch.stack([head[4] for head in heads]).cpu().numpy()
            exact = exact_output(q, k, v, scale)
            outputs = {}
            for name, beta, run in runs:
                o = run(q, k, v, scale)
                outputs[(name, beta)] = o
                error = o.double() - exact
                collected[(name, beta)]["o"].append(error.mean(-1)[0].cpu().numpy().ravel())
                collected[(name, beta)]["o_away"].append(torch.where(exact < 0, -error, error).mean(-1)[0]
                                                         .cpu().numpy().ravel())
                collected[(name, beta)]["delta"].append((d_o.double() * error).sum(-1)[0].cpu().numpy().ravel())
            bad = (outputs[("pytorch_flash", "")].view(torch.int16) != outputs[("standard", "")].view(torch.int16))
            mismatches += int(bad.sum().item())
            compared += bad.numel()
            call_numbers = np.asarray(call)
            row_cell.append(np.repeat(call_numbers % len(cells), args.rows))
            row_cluster.append((call_numbers[:, None] * synthetic_heads.MAX_GROUPS + groups).ravel())
            if first_call:
                save_heads(args, cells, call, q, k, v, d_o, outputs)
                first_call = False
            print(f"head dim {d}, keys {shape[1]}: heads {at + len(call)}/{len(numbers)} (B 1, H {len(call)}), "
                  f"{time.time() - started:.0f} s", flush=True)
    write_statistics(args, cells, runs, collected, np.concatenate(row_cell), np.concatenate(row_cluster))
    print(f"PyTorch's flash backend vs our standard kernel: {compared} O elements, {mismatches} differ")
    return 1 if mismatches and not dry else 0


def save_heads(args, cells, call, q, k, v, d_o, outputs):
    folder = os.path.join(args.out, "heads")
    os.makedirs(folder, exist_ok=True)
    keep = slice(0, min(args.save, len(call)))

    def bits(t):
        return t[:, keep].contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
    for name, t in (("q", q), ("k", k), ("v", v), ("d_o", d_o)):
        np.save(os.path.join(folder, name + ".npy"), bits(t))
    for (name, beta), o in outputs.items():
        tag = name if beta == "" else f"{name}_beta{beta:g}"
        np.save(os.path.join(folder, f"o_{tag}.npy"), bits(o))
    with open(os.path.join(folder, "heads.csv"), "w") as f:
        f.write(f"# the call's B, H: 1,{len(call)} (bitexact attention --batch-heads 1,{len(call)})\n")
        f.write("index,head,head_dim,keys,rows,max_kind,placement,ties,v_mean\n")
        for i, h in enumerate(call[keep]):
            c = cells[h % len(cells)]
            f.write(f"{i},{h},{c['head_dim']},{c['keys']},{c['rows']},{c['max_kind']},{c['placement']},{c['ties']},"
                    f"{c['v_mean']:g}\n")


def write_statistics(args, cells, runs, collected, row_cell, row_cluster):
    lines = ["kernel,beta,eps,head_dim,keys,max_kind,placement,ties,v_mean,rows,clusters,o_mean,o_ci95,o_away_mean,"
             "o_away_ci95,delta_mean,delta_ci95,o_fp32_mean,o_fp32_ci95,p_one_mean"]
    table = []
    values = {key: {q: np.concatenate(parts) for q, parts in columns.items()} for key, columns in collected.items()}
    for c, cell in enumerate(cells):
        rows = row_cell == c
        clusters = row_cluster[rows]
        for name, beta, _ in runs:
            stats = [mean_and_half_width(values[(name, beta)][q][rows], clusters) for q in ("o", "o_away", "delta")]
            eps = "" if beta == "" else f"{args.eps:g}"
            lines.append(f"{name},{'' if beta == '' else f'{beta:g}'},{eps},{cell['head_dim']},{cell['keys']},"
                         f"{cell['max_kind']},{cell['placement']},{cell['ties']},{cell['v_mean']:g},{rows.sum()},"
                         f"{stats[0][2]}," + ",".join(f"{m:.6e},{h:.3e}" for m, h, _ in stats) + ",,,")
            table.append(f"{cell['head_dim']:>3} {cell['keys']:>5} {cell['max_kind']:<18} {cell['placement']:<13} "
                         f"{cell['ties']:>3} {cell['v_mean']:>4g} {name:<13} {beta:>3} rows {rows.sum():>7}: o "
                         f"{stats[0][0]:+.2e}±{stats[0][1]:.1e} delta {stats[2][0]:+.2e}±{stats[2][1]:.1e}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "statistics.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    sys.exit(main())
