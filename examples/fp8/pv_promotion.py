#!/usr/bin/env python3
"""Where our FP8 kernel's error of O comes from, and what removes most of it: the same heads through
bitexact_flash_fp8_sm90 (P V's chain takes RN(O * alpha) as C of its first fp8 step, so the running O
is cut to the fp8 unit's 13-bit window toward zero at every step) and through the same description
with pv_accumulation fp32_add (each block's P V from +0, then one fp32 FADD: the promotion to fp32 that
DeepSeek-V3's FP8 GEMMs make for the same reason). Errors are against the exact softmax(S) V of the
dequantised e4m3 inputs, so they are the kernel's own rounding, not the quantisation's.

    PYTHONPATH=build/python python3 examples/fp8/pv_promotion.py [HEADS]

Heads: 128 query rows, 1024 keys, d 64, Q and K standard normal, V normal with mean +1 or -1 in turns,
each tensor quantised to e4m3 with descale amax / 448 (round to nearest even, satfinite); scale_s 256.
Prints, per kernel, the mean over heads of the mean error of O signed by O's exact sign (negative:
toward zero) with a 95% interval.
"""
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


def from_e4m3(codes):
    return np.where(codes & 0x80, -1.0, 1.0) * GRID[codes & 0x7F]


def quantise(x):
    descale = np.float32(np.abs(x).max() / np.float32(448))
    return to_e4m3((x / descale).astype(np.float32)), float(descale)


def main():
    heads = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    rng = np.random.default_rng(7)
    ours = bitexact.kernel_description("bitexact_flash_fp8_sm90")
    kernels = {"bitexact_flash_fp8_sm90 (pv_accumulation c_operand)": dict(preset="bitexact_flash_fp8_sm90"),
               "the same with pv_accumulation fp32_add": dict(kernel=dict(ours, name="fp8_promoted",
                                                                          pv_accumulation="fp32_add"))}
    errors = {name: [] for name in kernels}
    rows, keys, d = 128, 1024, 64
    for h in range(heads):
        q = rng.standard_normal((rows, d)).astype(np.float32)
        k = rng.standard_normal((keys, d)).astype(np.float32)
        v = (rng.standard_normal((keys, d)) + (1 if h % 2 else -1)).astype(np.float32)
        (q8, dq), (k8, dk), (v8, dv) = quantise(q), quantise(k), quantise(v)
        s = (from_e4m3(q8) * dq) @ (from_e4m3(k8) * dk).T / np.sqrt(d)
        p = np.exp(s - s.max(-1, keepdims=True))
        exact = (p / p.sum(-1, keepdims=True)) @ (from_e4m3(v8) * dv)
        for name, which in kernels.items():
            o, _ = bitexact.attention(q8, k8, v8, descale_q=dq, descale_k=dk, descale_v=dv, descale_s=1 / 256,
                                      scale_s=256.0, **which)
            o = (o.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            errors[name].append(float(np.mean((o - exact) * np.sign(exact))))
    for name, e in errors.items():
        e = np.array(e)
        print(f"{name}: {e.mean():+.2e} ± {1.96 * e.std(ddof=1) / np.sqrt(len(e)):.1e} ({len(e)} heads)")


if __name__ == "__main__":
    main()
