"""An independent check of `bitexact bias statistics --inputs e4m3` (src/bias_statistics.cpp).

    python3 tests/bias_fp8_reference.py path/to/bitexact

For the run of tests/bias_fp8.cmake (head dim 64, 256 keys, 8 rows, 4 heads a cell, ties 1 and 8,
positive maxima, one_block, V mean 1; here betas 2 and 7), written again from the documents and not
from the command's code: the synthetic heads from docs/bias.md ("The generator"), the per-tensor e4m3
quantisation from the command's --help, S as Hopper's fp8 tensor core forms it (the description at the
top of include/bitexact/hardware/mma.hpp and of sm90_tensor_core_fp8), and the FP8 kernel's softmax from
its description (include/bitexact/attention/kernels.hpp: FA2's running max over the K/V blocks from the
last to the first, the stabilized rule per block, P-bar = e4m3(RN(P * 256))), with P in double. Per
(kernel, ties) it computes
  p_one      keys a row whose e4m3 P-bar is 256 (P * 256 >= 248: e4m3's grid below 256 is 16 wide, and
             248 rounds to the even 256)
  tied_rows  rows whose exact scores have exactly t maxima
  lost       rows with sum |O| < sum |O_exact| / 2, O from the e4m3 P-bar in double
and compares them with the command's CSV. It states the smallest distance of any key to a threshold
(P-bar's, the tie test's, half of O), so that a match is not luck of the rounding. Exit 0 when every
number agrees, 1 otherwise. Pure Python (no NumPy); about 10 s.
"""
import csv
import math
import os
import struct
import subprocess
import sys
import tempfile

D, KEYS, ROWS, TILE, HEADS, TIES, V_MEAN, SEED = 64, 256, 8, 128, 4, (1, 8), 1.0, 1
ARGS = ["bias", "statistics", "--inputs", "e4m3", "--head-dims", "64", "--keys", "256", "--rows", "8", "--heads", "4",
        "--ties", "1,8", "--maxima", "positive", "--placements", "one_block", "--v-means", "1", "--betas", "2,7"]

# --- the generator (docs/bias.md) ---
MASK = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def draw(head, stream, i):
    return splitmix64(splitmix64(SEED) ^ ((head << 40) | (stream << 32) | i))


def signed_byte(x):
    return (x >> 56) - 128


def magnitude(x, e0, n):
    return (1 + (x & 127) / 128) * 2.0 ** (e0 + (((x >> 32) * n) >> 32))


Q, K, V, ROW_MAX, KEY_GAP = 1, 2, 3, 5, 6


def make_head(ties, head):
    blocks = KEYS // TILE
    groups = min(16, blocks * (TILE // ties))
    group_of_key = [-1] * KEYS
    for g in range(groups):
        for k in range(ties):
            group_of_key[(g % blocks) * TILE + (g // blocks) * ties + k] = g
    q = [[0.0] * D for _ in range(ROWS)]
    for i in range(ROWS):
        level = magnitude(draw(head, ROW_MAX, i), 2, 3)  # positive maxima [4, 32)
        for c in range(D):
            at = i * D + c
            if c == 0:
                q[i][c] = level
            elif c == 1:
                q[i][c] = 1.0
            elif c < 18:
                g = c - 2
                q[i][c] = -magnitude(draw(head, Q, at), 3, 3) if g < groups and g != i % groups else 0.0
            else:
                q[i][c] = signed_byte(draw(head, Q, at)) * 2.0 ** -10
    k = [[0.0] * D for _ in range(KEYS)]
    v = [[0.0] * D for _ in range(KEYS)]
    for j in range(KEYS):
        g = group_of_key[j]
        for c in range(D):
            at = j * D + c
            if c == 0:
                k[j][c] = 1.0
            elif c == 1:
                k[j][c] = -magnitude(draw(head, KEY_GAP, j), 3, 3) if g < 0 else 0.0
            elif c < 18:
                k[j][c] = 1.0 if g == c - 2 else 0.0
            else:
                k[j][c] = signed_byte(draw(head, K, at)) * 2.0 ** -10 if g < 0 else 0.0
            v[j][c] = V_MEAN + signed_byte(draw(head, V, at)) * 2.0 ** -7
    return q, k, v


# --- e4m3 and the per-tensor quantisation (the command's --help) ---
def f32(x):
    """x rounded to float32 (one rounding of a double: a float32 op of float32 operands is exact in double)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def exponent(x, floor):
    e = math.frexp(abs(x))[1] - 1
    return max(e, floor)


def round_half_even(n):
    r = math.floor(n)
    return r + 1 if n - r > 0.5 or (n - r == 0.5 and r % 2 == 1) else r


def e4m3(x):
    """x to E4M3FN, to nearest even, saturating at 448 (subnormal spacing 2^-9)."""
    if x == 0:
        return 0.0
    unit = 2.0 ** (exponent(x, -6) - 3)
    return math.copysign(min(round_half_even(abs(x) / unit) * unit, 448.0), x)


def quantise(tensor):
    amax = max(abs(x) for row in tensor for x in row)
    descale = f32(amax / 448) if amax > 0 else 1.0
    return [[e4m3(f32(x / descale)) for x in row] for row in tensor], descale


# --- S on the fp8 tensor core: k32 steps from +0, a 13-bit window truncated toward zero, E8M13 ---
def toward_zero(x, unit):
    return math.copysign(math.floor(abs(x) / unit) * unit, x)


def tensor_core_step(a, b, c):
    terms = [x * y for x, y in zip(a, b)] + [c]
    exponents = [-133 if x * y == 0 else exponent(x, -6) + exponent(y, -6) for x, y in zip(a, b)]
    exponents.append(-133 if c == 0 else exponent(c, -126))
    unit = 2.0 ** (max(exponents) - 13)
    total = sum(toward_zero(t, unit) for t in terms)  # multiples of unit, exact in double
    return 0.0 if total == 0 else toward_zero(total, 2.0 ** (exponent(total, -126) - 13))


def kernel_score(q_row, k_row):
    c = 0.0
    for at in range(0, D, 32):
        c = tensor_core_step(q_row[at:at + 32], k_row[at:at + 32], c)
    return c


# --- the FP8 kernel's softmax, and what the command counts ---
class Margins:
    def __init__(self):
        self.p_bar = self.tie_test = self.lost = math.inf


def one_row(s, v8, descale_v, scale, beta, margins):
    """p_one and O (before descale_v / 256 and the row sum) of one row, and the row sum."""
    eps = f32(1e-3)
    o = [0.0] * D
    total = 0.0
    m = None
    p_one = 0
    for block in (KEYS // TILE - 1, 0):  # last to first: 256 keys are two blocks
        keys = range(block * TILE, (block + 1) * TILE)
        block_max = max(s[j] for j in keys)
        if beta:  # Algorithm 3: two or more scores within eps of the block's max
            tests = [f32(f32(block_max - s[j]) * scale) for j in keys]
            margins.tie_test = min([margins.tie_test] + [abs(t - eps) for t in tests])
            if sum(t <= eps for t in tests) > 1:
                block_max = f32(beta * block_max) if block_max > 0 else 0.0
        previous, m = m, block_max if m is None else max(m, block_max)
        if previous is not None:
            alpha = math.exp((previous - m) * scale)
            o = [x * alpha for x in o]
            total *= alpha
        for j in keys:
            p = math.exp((s[j] - m) * scale)
            total += p
            margins.p_bar = min(margins.p_bar, abs(p * 256 - 248) / 16)
            p_bar = e4m3(p * 256)
            p_one += p_bar == 256
            if p_bar:
                for c in range(D):
                    o[c] += p_bar * v8[j][c]
    return p_one, [x * descale_v / 256 / total for x in o]


def exact_row(q_row, k8, v8, dq, dk, dv, scale):
    scores = [sum(a * b for a, b in zip(q_row, k_row)) * dq * dk for k_row in k8]
    top = max(scores)
    weights = [math.exp(scale * (x - top)) for x in scores]
    total = sum(weights)
    return [sum(w * v8[j][c] for j, w in enumerate(weights)) * dv / total for c in range(D)], scores


def reference():
    """{(beta, ties): (p_one mean, tied rows, lost rows)} and the margins."""
    cells = len(TIES)
    out, margins = {}, Margins()
    for cell, ties in enumerate(TIES):
        counts = {beta: [0, 0] for beta in (0, 2, 7)}
        tied = 0
        for replicate in range(HEADS):
            q, k, v = make_head(ties, replicate * cells + cell)
            (q8, dq), (k8, dk), (v8, dv) = quantise(q), quantise(k), quantise(v)
            scale = f32(f32(f32(1 / math.sqrt(D)) * dq) * dk)  # the kernel's scale' (descales folded)
            for i in range(ROWS):
                o_exact, exact_scores = exact_row(q8[i], k8, v8, dq, dk, dv, 0.125)
                tied += exact_scores.count(max(exact_scores)) == ties
                s = [kernel_score(q8[i], k_row) for k_row in k8]
                for beta, count in counts.items():
                    p_one, o = one_row(s, v8, dv, scale, beta, margins)
                    ratio = sum(map(abs, o)) / sum(map(abs, o_exact))
                    margins.lost = min(margins.lost, abs(ratio - 0.5))
                    count[0] += p_one
                    count[1] += ratio < 0.5
        for beta, (p_one, lost) in counts.items():
            out[(beta, ties)] = (p_one / (HEADS * ROWS), tied, lost)
    return out, margins


def command_results(binary):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "statistics.csv")
        subprocess.run([binary] + ARGS + ["--csv", path], check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return {(float(r["beta"] or 0), int(r["ties"])): (float(r["p_one_mean"]), int(r["tied_rows"]), int(r["o_lost_rows"]))
                    for r in csv.DictReader(f)}


def main():
    want, margins = reference()
    got = command_results(sys.argv[1])
    bad = 0
    for (beta, ties), (p_one, tied, lost) in sorted(want.items()):
        g = got.get((float(beta), ties))
        same = g is not None and abs(g[0] - p_one) < 5e-5 and g[1:] == (tied, lost)
        bad += not same
        print(f"beta {beta or '-'} ties {ties}: p_one {p_one:.4f}, tied rows {tied}, lost rows {lost}; command {g}: "
              f"{'same' if same else 'DIFFERS'}")
    print(f"{len(want)} (kernel, ties) pairs compared, {bad} differ; smallest margins: P-bar {margins.p_bar:.3g} of "
          f"e4m3's grid, tie test {margins.tie_test:.3g} (eps 1e-3), O's magnitude {margins.lost:.3g} from half")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
