#!/usr/bin/env python3
"""Checks what cudnn_fp8_sdpa_probe.py captured, on the CPU (NumPy, and bitexact's Python module if importable):

    python3 cuda/capture/cudnn_fp8_sdpa_check.py OUTDIR      # the probe's probe.npz and facts.json

Per case it prints O's error against float64 softmax(Q K^T / sqrt(d)) V on the dequantized inputs (beside the
error of rounding that reference itself to e4m3, the floor of any kernel with e4m3 O), and how many O bit
patterns three recipes reproduce:

  sass      the recipe read from the kernel's SASS (cuda/capture/README.md, sass_recipe below): key blocks of
            256, S from Hopper's fp8 unit, P the unnormalized exp2(S c - m + lg2 scale_s) converted to e4m3, the
            online rescale by ex2(m_old - m_new) of acc (as the next QGMMA's C) and of each thread's partial l,
            O = e4m3(acc * (rcp(l) * descale_s * descale_v * scale_o));
  normalized  P = softmax * scale_s before its conversion, as the frontend's composite graph reads;
  exact_sum   the sass recipe with exact dot products in place of the fp8 unit;
and how many Stats (the row's natural-log LSE, fp32) the sass recipe reproduces.

The fp8 unit here is a NumPy copy of bitexact's sm90_tensor_core_fp8 (include/bitexact/hardware/mma.hpp: 32
products a step, each truncated 13 bits below the largest nominal exponent, the step's sum rounded toward zero
to E8M13); ex2, lg2 and rcp come from bitexact's MUFU tables when its Python module imports (Stats needs
them and O does too, rarely: 1 of 131,072 in N 512 d 128), else correctly rounded. The library computes the sass
recipe itself (the preset cudnn_sdpa_fp8_sm90; fp8_attention_pack.py replay runs the captures through it):
this script stays for the alternatives no kernel description expresses (P normalized, exact dot products).
"""
import json
import os
import sys

import numpy as np

try:  # the repository's Python module, for MUFU's ex2, rcp and lg2 bit for bit (Stats needs them)
    import bitexact
except ImportError:
    bitexact = None

F32 = np.float32
LOG2E = F32(1.4426950216293334961)  # the constant in the kernel's SASS
LN2 = F32(0.69314718246459960938)  # likewise
ZERO_TERM_EXPONENT = -133


def e4m3_value(bits):
    bits = bits.astype(np.int64)
    exponent, fraction = (bits >> 3) & 0xF, bits & 7
    magnitude = np.where(exponent == 0, fraction * 2.0**-9, (1 + fraction / 8.0) * 2.0 ** (exponent - 7))
    magnitude = np.where((bits & 0x7F) == 0x7F, np.nan, magnitude)
    return np.where(bits & 0x80, -magnitude, magnitude)


def leading_exponent(x):
    """floor(log2 |x|); meaningless for 0, which callers replace."""
    return np.frexp(np.abs(x))[1] - 1


def round_e4m3_satfinite(x):
    """To nearest e4m3, ties to even, clamped to +-448: F2FP.SATFINITE.E4M3.F32."""
    magnitude = np.abs(np.asarray(x, np.float64))
    step = np.where(magnitude >= 2.0**-6, np.ldexp(1.0, leading_exponent(magnitude) - 3), 2.0**-9)
    return np.sign(x) * np.minimum(np.round(magnitude / step) * step, 448.0)


def e4m3_nominal_exponent(x):
    """The exponent the fp8 unit compares: a subnormal e4m3 counts as 2^-6, a zero not at all."""
    exponent = np.where(np.abs(x) < 2.0**-6, -6, leading_exponent(x))
    return np.where(x == 0, ZERO_TERM_EXPONENT, exponent)


def truncate_to_e8m13(x):
    """Toward zero to 14 significant bits (fp32's range)."""
    unit = np.ldexp(1.0, leading_exponent(x) - 13)
    return np.where(x == 0, 0.0, np.trunc(x / np.where(x == 0, 1.0, unit)) * unit)


def fp8_unit_dot(a, b, c=None, products_per_step=32, kept_fraction_bits=13):
    """c + a [..., M, K] @ b [..., N, K]^T through the fp8 unit, k ascending, c (zero if None) the first step's C
    and each step's result the next one's C."""
    nominal_a, nominal_b = e4m3_nominal_exponent(a), e4m3_nominal_exponent(b)
    accumulator = np.zeros(a.shape[:-1] + (b.shape[-2],)) if c is None else c.astype(np.float64)
    for k in range(0, a.shape[-1], products_per_step):
        part = slice(k, k + products_per_step)
        terms = a[..., :, None, part] * b[..., None, :, part]
        term_exponents = np.where(terms == 0, ZERO_TERM_EXPONENT,
                                  nominal_a[..., :, None, part] + nominal_b[..., None, :, part])
        c_exponent = np.where(accumulator == 0, ZERO_TERM_EXPONENT, leading_exponent(accumulator))
        lsb = np.ldexp(1.0, np.maximum(term_exponents.max(-1), c_exponent) - kept_fraction_bits)
        total = np.trunc(terms / lsb[..., None]).sum(-1) + np.trunc(accumulator / lsb)
        accumulator = truncate_to_e8m13(total * lsb)
    return accumulator.astype(F32)


class Case:
    def __init__(self, arrays, facts):
        name = facts["name"]
        self.name, self.causal = name, facts["causal"]
        self.q, self.k, self.v, self.o = (e4m3_value(arrays[f"{name}/{x}"]) for x in ("q", "k", "v", "o"))
        self.scale = {x: F32(arrays[f"{name}/{x}"]) for x in facts["scales"]}
        self.stats = arrays[f"{name}/stats"]
        n = self.q.shape[-2]
        self.visible = np.tril(np.ones((n, n), bool)) if self.causal else np.ones((n, n), bool)


def reference(case):
    """float64 softmax(Q K^T / sqrt(d)) V of the dequantized inputs."""
    q, k, v = (getattr(case, x) * np.float64(case.scale[f"descale_{x}"]) for x in "qkv")
    scores = np.where(case.visible, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ v


def scores_log2(case, exact_sum):
    """S c in log2 units, c = fl(fl(fl(descale_q attn) descale_k) log2 e) as the kernel folds it; masked -inf."""
    s = case.scale
    c = F32(F32(F32(s["descale_q"] * F32(1 / np.sqrt(case.q.shape[-1]))) * s["descale_k"]) * LOG2E)
    raw = (case.q @ np.swapaxes(case.k, -1, -2)).astype(F32) if exact_sum else fp8_unit_dot(case.q, case.k)
    return np.where(case.visible, (raw * c).astype(F32), -np.inf).astype(F32)


def sfu(name, x):
    """MUFU.EX2 / RCP / LG2 (the .ftz forms the kernel uses) from bitexact's Python module, whose tables were
    captured on an H100; without it, correctly rounded stand-ins (then Stats misses about a third of its rows and O,
    rarely, an element)."""
    x = np.ascontiguousarray(np.asarray(x, F32))
    if bitexact is not None:
        return getattr(bitexact, name + "_approx")(x.view(np.uint32), ftz=True).view(F32)
    with np.errstate(divide="ignore", over="ignore"):
        exact = {"ex2": np.exp2, "rcp": lambda v: 1 / v, "lg2": np.log2}[name](x.astype(np.float64))
    return exact.astype(F32)


def ffma(a, b, c):
    """fp32 a * b + c rounded once (the product is exact in float64)."""
    return (np.float64(1) * a * b + c).astype(F32)


def thread_sums(p):
    """p [..., 256] (one key block of a row) summed as the four threads of the row's quad do: thread t holds
    the columns 8k + 2t and 8k + 2t + 1 of wgmma's accumulator layout and adds them in fp32 from 0, k ascending
    and the pair's two in order. Returns [..., 4]."""
    fragments = np.moveaxis(p.reshape(p.shape[:-1] + (p.shape[-1] // 8, 4, 2)), -2, -3)
    sequence = fragments.reshape(fragments.shape[:-2] + (-1,))
    total = np.zeros(sequence.shape[:-1], F32)
    for i in range(sequence.shape[-1]):
        total = (total + sequence[..., i]).astype(F32)
    return total


KEY_BLOCK = 256


def sass_recipe(case, exact_sum=False):
    """O (e4m3 values) and Stats of the SASS recipe, key blocks of 256 walked in ascending order:
    per block, m_new = max(m, block's largest s); alpha = ex2(fl(m - m_new)) (0 for the first block);
    P = ex2(fl(s - fl(m_new - lg2(scale_s)))) in fp32, P8 = e4m3(P); each of the row's four threads keeps its own
    l_t = ffma(its block sum, rcp(scale_s), fl(l_t * alpha)); acc = QGMMA(P8, V, C = fl(acc * alpha)).
    At the end l = fl(fl(l_0 + l_1) + fl(l_2 + l_3)) (the quad's two butterfly steps),
    O = e4m3(fl(acc * fl(rcp(l) * fl(fl(descale_s descale_v) scale_o)))), Stats = ffma(m, ln2, fl(lg2(l) ln2))."""
    s = case.scale
    scores = scores_log2(case, exact_sum)
    n = scores.shape[-1]
    lg2_scale_s, rcp_scale_s = sfu("lg2", s["scale_s"]), sfu("rcp", s["scale_s"])
    m = np.full(scores.shape[:-1], -np.inf, F32)
    l_thread = np.zeros(m.shape + (4,), F32)
    acc = np.zeros(m.shape + (case.v.shape[-1],), F32)
    v_t = np.swapaxes(case.v, -1, -2)
    for start in range(0, n, KEY_BLOCK):
        block = scores[..., start:start + KEY_BLOCK]
        width = block.shape[-1]
        if width < KEY_BLOCK:  # the last, partial block: its missing keys count as masked
            block = np.concatenate([block, np.full(block.shape[:-1] + (KEY_BLOCK - width,), -np.inf, F32)], -1)
        m_new = np.maximum(m, block.max(-1))
        with np.errstate(invalid="ignore"):
            alpha = sfu("ex2", np.where(np.isneginf(m), F32(-np.inf), (m - m_new).astype(F32)))
            offset = (m_new - lg2_scale_s).astype(F32)
            p = sfu("ex2", np.where(np.isneginf(block), F32(-np.inf), (block - offset[..., None]).astype(F32)))
        p8 = round_e4m3_satfinite(p)[..., :width]
        l_thread = ffma(thread_sums(p), rcp_scale_s, (l_thread * alpha[..., None]).astype(F32))
        rescaled = (acc * alpha[..., None]).astype(F32)
        if exact_sum:
            acc = (rescaled + (p8 @ case.v[..., start:start + width, :])).astype(F32)
        else:
            acc = fp8_unit_dot(p8, v_t[..., start:start + width], rescaled)
        m = m_new
    l = ((l_thread[..., 0] + l_thread[..., 1]).astype(F32) + (l_thread[..., 2] + l_thread[..., 3]).astype(F32))
    l = l.astype(F32)
    factor = (sfu("rcp", l) * F32(F32(s["descale_s"] * s["descale_v"]) * s["scale_o"])).astype(F32)
    o = round_e4m3_satfinite((acc * factor[..., None]).astype(F32))
    stats = ffma(m, LN2, (sfu("lg2", l) * LN2).astype(F32))
    return o, stats


def o_of(case, recipe):
    if recipe != "normalized":
        return sass_recipe(case, exact_sum=recipe == "exact_sum")[0]
    s = case.scale
    scores = scores_log2(case, exact_sum=False)
    weights = np.exp2((scores - scores.max(-1, keepdims=True)).astype(np.float64))
    p8 = round_e4m3_satfinite((weights / weights.sum(-1, keepdims=True) * s["scale_s"]).astype(F32))
    factor = F32(F32(s["descale_s"] * s["descale_v"]) * s["scale_o"])
    return round_e4m3_satfinite((fp8_unit_dot(p8, np.swapaxes(case.v, -1, -2)) * factor).astype(F32))


def rms(x):
    return float(np.sqrt(np.mean(x**2)))


def main():
    out = sys.argv[1] if len(sys.argv) == 2 else sys.exit(__doc__)
    arrays = np.load(os.path.join(out, "probe.npz"))
    facts = json.load(open(os.path.join(out, "facts.json")))
    print("MUFU ex2/rcp/lg2:", "bitexact's tables" if bitexact is not None else "correctly rounded stand-ins")
    compared = 0
    for case_facts in facts["cases"]:
        if "error" in case_facts:
            print(f"{case_facts['name']}: not run ({case_facts['error'][:100]})")
            continue
        case = Case(arrays, case_facts)
        scale_o = np.float64(case.scale["scale_o"])
        exact = reference(case)
        error, floor = case.o / scale_o - exact, round_e4m3_satfinite(exact * scale_o) / scale_o - exact
        print(f"{case.name}: max |O| {np.abs(exact).max():.4g}, error max {np.abs(error).max():.3g} rms {rms(error):.3g}"
              f" mean {error.mean():.2g} (e4m3 of the reference: max {np.abs(floor).max():.3g} rms {rms(floor):.3g})")
        misses = {recipe: int(np.sum(o_of(case, recipe) != case.o)) for recipe in ("sass", "normalized", "exact_sum")}
        print(f"    O mismatches of {case.o.size}: " + ", ".join(f"{r} {m}" for r, m in misses.items()))
        same_stats = int(np.sum(sass_recipe(case)[1] == case.stats))
        print(f"    Stats bit patterns equal: {same_stats} of {case.stats.size}")
        compared += case.o.size
    assert compared > 0, "no case ran"
    print(f"{compared} outputs compared")


if __name__ == "__main__":
    main()
