#!/usr/bin/env python3
"""Where our FP8 kernel's error of O comes from, and what removes it. The same heads through
bitexact_flash_fp8_sm90 (P V's chain takes RN(O * alpha) as C of its first fp8 step, so the running O
is cut to the fp8 unit's 13-bit window toward zero at every step) and through its pv_fp32_add variant,
bitexact_flash_fp8_sm90_pv_fp32_add (each block's P V from +0, then one fp32 FADD: the promotion to
fp32 that DeepSeek-V3's FP8 GEMMs make for the same reason); then, in exact arithmetic, the other
source: P-bar = e4m3(P * 256) / 256 weighs V while l sums the unrounded P, so the weights need not sum
to 1; normalising by the sum of the P-bar used instead removes that, and the variant's p_bar_sum
(bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum: l summed from the e4m3 P-bar) does so in the kernel.
What it keeps is measured against the same exact model with O rounded to bf16 (to nearest even): the
fp8 unit's truncation inside each block's chain of k32 steps, which the same description with blocks of
32 keys (one k32 step a block, each promoted; no kernel runs it) shows. Errors are against the exact
softmax(S) V of the dequantised e4m3 inputs, so they are the kernel's own rounding, not the
quantisation's.

    PYTHONPATH=build/python python3 examples/fp8/pv_promotion.py [HEADS]
    PYTHONPATH=build/python python3 examples/fp8/pv_promotion.py --generator

Heads: 128 query rows, 1024 keys, d 64, Q and K standard normal, V normal with mean +1 or -1 in turns;
or (--generator) the scenario generator's 144 heads that cuda/attention/capture_flash_fp8.py --generator
runs on the GPU (cuda/attention/synthetic_heads.py, seed 1: d 64 and 128, 512 keys, 32 rows, every
maximum kind and placement, 1, 8 and 64 ties, V of mean -1 and +1). Each tensor quantised to e4m3 with
descale amax / 448 (round to nearest even, satfinite); scale_s 256. Prints, per head dim and model, the
mean over heads of the mean error of O signed by O's exact sign (negative: toward zero) with a 95%
interval.
"""
import os
import sys

import numpy as np

import bitexact

# Every e4m3 magnitude below NaN, by code: the quantiser's grid.
CODES = np.arange(0x7F)
GRID = np.where(CODES >> 3 == 0, (CODES & 7) / 8 * 2.0**-6, (1 + (CODES & 7) / 8) * 2.0**((CODES >> 3) - 7))


def to_e4m3(x):
    """x (float32) to e4m3 codes, round to nearest even, saturating at 448."""
    a = np.minimum(np.abs(x).astype(np.float64), 448.0)
    i = np.clip(np.searchsorted(GRID, a), 1, len(GRID) - 1)
    below, above = GRID[i - 1], GRID[i]
    up = (a - below > above - a) | ((a - below == above - a) & (i % 2 == 0))
    return (np.where(up, i, i - 1) | np.where(x < 0, 0x80, 0)).astype(np.uint8)


def to_bf16(x):
    """x (float64) rounded once to bf16's 8 significant bits, to nearest even (np.rint), as a float64."""
    m, e = np.frexp(x)
    return np.ldexp(np.rint(m * 256), e - 8)


def from_e4m3(codes):
    return np.where(codes & 0x80, -1.0, 1.0) * GRID[codes & 0x7F]


def quantise(x):
    descale = np.float32(np.abs(x).max() / np.float32(448))
    return to_e4m3((x / descale).astype(np.float32)), float(descale)


def random_heads(count):
    rng = np.random.default_rng(7)
    rows, keys, d = 128, 1024, 64
    for h in range(count):
        yield (rng.standard_normal((rows, d)).astype(np.float32), rng.standard_normal((keys, d)).astype(np.float32),
               (rng.standard_normal((keys, d)) + (1 if h % 2 else -1)).astype(np.float32))


def generator_heads():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cuda", "attention"))
    import synthetic_heads
    cells = synthetic_heads.cells((64, 128), (512,), synthetic_heads.MAX_KINDS, synthetic_heads.PLACEMENTS,
                                  (1, 8, 64), (-1.0, 1.0), 32)
    for h, cell in enumerate(cells):
        head = synthetic_heads.make_head(cell, 1, h)
        yield tuple((head[x].astype(np.uint32) << 16).view(np.float32) for x in "qkv")


def main():
    generator = "--generator" in sys.argv[1:]
    counts = [int(a) for a in sys.argv[1:] if a.isdigit()]
    heads = generator_heads() if generator else random_heads(counts[0] if counts else 12)
    kernels = {name: {"preset": name} for name in ("bitexact_flash_fp8_sm90", "bitexact_flash_fp8_sm90_pv_fp32_add",
                                                    "bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum")}
    one_step = bitexact.kernel_description("bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum")
    for tile in one_step["tiles"].values():
        tile["block_n"] = 32
    kernels["the same with blocks of 32 keys (a description)"] = {"kernel": one_step}
    exact_models = ("exact but for P-bar = e4m3(P * 256) / 256, l of the fp32 P",
                    "the same, l of the P-bar used", "the same, O rounded to bf16")
    errors = {}
    for q, k, v in heads:
        d = q.shape[1]
        (q8, dq), (k8, dk), (v8, dv) = quantise(q), quantise(k), quantise(v)
        s = (from_e4m3(q8) * dq) @ (from_e4m3(k8) * dk).T / np.sqrt(d)
        p = np.exp(s - s.max(-1, keepdims=True))
        values = from_e4m3(v8) * dv
        exact = (p / p.sum(-1, keepdims=True)) @ values
        p_bar = from_e4m3(to_e4m3((p * 256).astype(np.float32))) / 256
        weighed = p_bar @ values / p_bar.sum(-1, keepdims=True)
        outputs = {exact_models[0]: p_bar @ values / p.sum(-1, keepdims=True), exact_models[1]: weighed,
                   exact_models[2]: to_bf16(weighed)}
        for name, model in kernels.items():
            o, _ = bitexact.attention(q8, k8, v8, **model, descale_q=dq, descale_k=dk, descale_v=dv,
                                      descale_s=1 / 256, scale_s=256.0)
            outputs[name] = (o.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        for name, o in outputs.items():
            errors.setdefault((d, name), []).append(float(np.mean((o - exact) * np.sign(exact))))
    for (d, name), e in errors.items():
        e = np.array(e)
        print(f"d {d}, {name}: {e.mean():+.2e} ± {1.96 * e.std(ddof=1) / np.sqrt(len(e)):.1e} ({len(e)} heads)")


if __name__ == "__main__":
    main()
