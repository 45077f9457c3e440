#!/usr/bin/env python3
"""Captures our FP8 kernel (torch.ops.bitexact.flash_forward_fp8, cuda/attention) on the device machine, for
the emulator's presets bitexact_flash_fp8_sm90[_stabilized[_across_blocks]] to replay:

    python3 cuda/attention/capture_flash_fp8.py OUTDIR

Cases: B 1, d 64 and 128, causal and not, N 256, 1000 (keys past the last full block of 32 and of the
kernel's K/V block) and 2048, each rule (standard, stabilized per block, across blocks); Q, K and V drawn
from normal distributions, quantised to e4m3 with per-tensor descales from their amax (x / descale, as
Transformer Engine's recipe); "ties" cases copy a few keys onto the same K row, so rows reach their max
more than once; "sharp" cases triple the scores' spread, so many P fall into e4m3's subnormals; scale
cases set scale_s 1 (P-bar near zero rounds to 0), scale_o 2 and descale_s 1/64. Every case runs twice,
into outputs that start as different garbage, and the two runs' bits are compared.

    python3 cuda/attention/capture_flash_fp8.py --generator OUTDIR
    python3 cuda/attention/capture_flash_fp8.py [--generator] --pv-fp32-add [--p-bar-sum] OUTDIR

runs instead the scenario generator's heads (synthetic_heads.py, as `bitexact bias statistics --inputs
e4m3` draws them: d 64 and 128, 512 keys, 32 query rows, each maximum kind and placement, 1, 8 and 64
ties, V of mean -1 and +1), one call per head and rule, each head's Q, K and V quantised per tensor, into
probe_gen_d{64,128}_rule{0,1,2}.npz of the same layout; facts.json adds per (head dim, rule) O's mean
error toward zero against an fp64 softmax of the dequantised inputs. --pv-fp32-add runs the kernel's
pv_fp32_add variant (each K/V block's P V from +0, then one FADD into O; the preset
bitexact_flash_fp8_sm90_pv_fp32_add) in place of the standard kernel, on the standard cases only;
--p-bar-sum with it runs its p_bar_sum variant (l summed from the e4m3 P-bar; the preset
bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum).

OUTDIR gets probe_d64.npz and probe_d128.npz (per case NAME: NAME/q, NAME/k, NAME/v uint8 e4m3 bit patterns
[1, H, N, d]; NAME/o uint16 bf16 bit patterns [1, H, N, d]; NAME/stats float32 [1, H, N], L in natural-log
units; NAME/p_bar_ones and NAME/max_repeated int32 [1, H, N] for standard cases (the indicator's
pass); the six scales as float32) and facts.json (versions, per case: preset, shape, scales, whether the two
runs agree, the indicator pass's O and L against the plain pass's, and O's largest error against an fp64
softmax of the dequantised inputs). cuda/capture/fp8_attention_pack.py replays or packs them.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

import bitexact.torch  # noqa: F401 (PYTHONPATH=build/python, or pip install): loads torch.ops.bitexact

PRESETS = ("bitexact_flash_fp8_sm90", "bitexact_flash_fp8_sm90_stabilized",
           "bitexact_flash_fp8_sm90_stabilized_across_blocks")
PV_FP32_ADD = "--pv-fp32-add" in sys.argv  # the variant, standard rule only
P_BAR_SUM = "--p-bar-sum" in sys.argv  # and its own variant
if P_BAR_SUM and not PV_FP32_ADD:
    sys.exit("capture_flash_fp8.py: --p-bar-sum is a variant of --pv-fp32-add's kernel; give both")
RULES = (0,) if PV_FP32_ADD else (0, 1, 2)
# Case names, distinct from the standard capture's.
SUFFIX = "_pv_fp32_add" * PV_FP32_ADD + "_p_bar_sum" * P_BAR_SUM


def preset(rule):
    return f"bitexact_flash_fp8_sm90{SUFFIX}" if PV_FP32_ADD else PRESETS[rule]
E4M3_MAX = 448.0


def quantise(x):
    """x (fp32) as e4m3 with its per-tensor descale amax / 448, as Transformer Engine sets it."""
    descale = float(x.abs().max()) / E4M3_MAX
    descale = float(np.float32(descale))
    return (x / descale).to(torch.float8_e4m3fn), descale


def cases():
    for d in (64, 128):
        for n in (256, 1000, 2048):
            for causal in (False, True):
                for rule in RULES:
                    if n == 2048 and rule != 0:
                        continue
                    heads = 2 if n == 256 else 1  # probe_d128.npz stays under the device tool's 16 MiB
                    name = f"d{d}_n{n}_{'causal' if causal else 'full'}_rule{rule}{SUFFIX}"
                    yield dict(name=name, d=d, n=n, heads=heads, causal=causal, rule=rule, kind="plain")
        for kind in ("ties", "sharp", "scale_s_1", "scale_o_2"):
            for rule in RULES if kind == "ties" else (0,):
                yield dict(name=f"d{d}_n1000_full_rule{rule}_{kind}{SUFFIX}", d=d, n=1000, heads=1, causal=False,
                           rule=rule, kind=kind)


def inputs(case, gen):
    h, n, d = case["heads"], case["n"], case["d"]
    spread = 3.0 if case["kind"] == "sharp" else 1.0
    q = torch.randn(1, h, n, d, device="cuda", generator=gen) * spread
    k = torch.randn(1, h, n, d, device="cuda", generator=gen)
    v = torch.randn(1, h, n, d, device="cuda", generator=gen) + 0.5
    if case["kind"] == "ties":
        # Keys 3, 17, 40 and 500 share key 9's row: every query's scores against them tie.
        k[:, :, [3, 17, 40, 500]] = k[:, :, 9:10].clone()
        q += 2.0 * k[:, :, 9:10]  # so that the tied keys are the max of many rows
    return [quantise(x) for x in (q, k, v)]


def call_args(q8, k8, v8, causal, scale, scales, rule):
    """flash_forward_fp8's arguments up to eps, for one case."""
    return (q8, k8, v8, causal, scale, scales["descale_q"], scales["descale_k"], scales["descale_v"],
            scales["scale_s"], scales["descale_s"], scales["scale_o"], rule, 2.0, 1e-3)


def run_case(a, name, args, scales, indicator):
    """One call of the kernel (args: call_args) into arrays a under NAME, and with indicator the indicator's
    pass too; returns O (bf16), L and, with indicator, whether that pass gave the same O and L (else None)."""
    o, lse, _, _ = torch.ops.bitexact.flash_forward_fp8(*args, False, PV_FP32_ADD, P_BAR_SUM)
    a[f"{name}/q"], a[f"{name}/k"], a[f"{name}/v"] = (x.view(torch.uint8).cpu().numpy() for x in args[:3])
    a[f"{name}/o"] = o.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
    a[f"{name}/stats"] = lse.cpu().numpy()
    for key, value in scales.items():
        a[f"{name}/{key}"] = np.float32(value)
    if not indicator:
        return o, lse, None
    oi, lsei, ones, repeated = torch.ops.bitexact.flash_forward_fp8(*args, True, PV_FP32_ADD, P_BAR_SUM)
    same = bool(torch.equal(oi.view(torch.int16), o.view(torch.int16)) and
                torch.equal(lsei.view(torch.int32), lse.view(torch.int32)))
    a[f"{name}/p_bar_ones"] = ones.cpu().numpy()
    a[f"{name}/max_repeated"] = repeated.cpu().numpy()
    return o, lse, same


def generator(outdir, facts):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import synthetic_heads
    cells = synthetic_heads.cells((64, 128), (512,), synthetic_heads.MAX_KINDS, synthetic_heads.PLACEMENTS,
                                  (1, 8, 64), (-1.0, 1.0), 32)
    arrays = {(d, rule): {} for d in (64, 128) for rule in RULES}
    toward_zero = {key: [0.0, 0.0] for key in arrays}  # sum of -sign(ref)(o - ref), sum of |ref|
    for h, cell in enumerate(cells):
        q, k, v = (x[None, None].float() for x in synthetic_heads.make_head_torch(cell, 1, h, "cuda")[:3])
        (q8, dq), (k8, dk), (v8, dv) = (quantise(x) for x in (q, k, v))
        d = cell["head_dim"]
        scale = 1.0 / math.sqrt(d)
        scales = dict(descale_q=dq, descale_k=dk, descale_v=dv, scale_s=256.0, descale_s=1.0 / 256, scale_o=1.0)
        qf, kf, vf = (x.double() * s for x, s in ((q8, dq), (k8, dk), (v8, dv)))
        reference = torch.softmax((qf @ kf.transpose(-1, -2)) * scale, -1) @ vf
        for rule in RULES:
            name = (f"gen_d{d}_k{cell['keys']}_{cell['max_kind']}_{cell['placement']}_t{cell['ties']}"
                    f"_v{cell['v_mean']:+g}_rule{rule}{SUFFIX}")
            o, _, same = run_case(arrays[(d, rule)], name, call_args(q8, k8, v8, False, scale, scales, rule), scales,
                                  rule == 0)
            error = -(torch.sign(reference) * (o.double() - reference))
            toward_zero[(d, rule)][0] += float(error.sum())
            toward_zero[(d, rule)][1] += float(reference.abs().sum())
            record = dict(name=name, d=d, n=cell["keys"], heads=1, causal=False, rule=rule, kind="generator",
                          cell=cell, preset=preset(rule), scales={x: float(np.float32(y)) for x, y in scales.items()})
            if same is not None:
                record["indicator_pass_identical"] = same
            facts["cases"].append(record)
        print(f"{h + 1}/{len(cells)} {name}", flush=True)
    for (d, rule), a in arrays.items():
        np.savez(os.path.join(outdir, f"probe_gen_d{d}_rule{rule}.npz"), **a)
        error, size = toward_zero[(d, rule)]
        facts.setdefault("o_error_toward_zero", {})[f"d{d}_rule{rule}"] = error / size
        print(f"d {d}, rule {rule}: O's mean error toward zero {error / size:+.3e} of mean |O|", flush=True)


def main():
    generate = "--generator" in sys.argv
    outdir = sys.argv[-1]
    os.makedirs(outdir, exist_ok=True)
    gen = torch.Generator(device="cuda").manual_seed(2026)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    facts = {"gpu": smi, "torch": torch.__version__, "cuda": torch.version.cuda, "pv_fp32_add": PV_FP32_ADD,
             "p_bar_sum": P_BAR_SUM, "cases": []}
    if generate:
        generator(outdir, facts)
        with open(os.path.join(outdir, "facts.json"), "w") as f:
            json.dump(facts, f, indent=1)
        return
    arrays = {64: {}, 128: {}}
    for case in cases():
        (q, dq), (k, dk), (v, dv) = inputs(case, gen)
        d = case["d"]
        scale = 1.0 / math.sqrt(d)
        scales = dict(descale_q=dq, descale_k=dk, descale_v=dv, scale_s=256.0, descale_s=1.0 / 256, scale_o=1.0)
        if case["kind"] == "scale_s_1":
            scales.update(scale_s=1.0, descale_s=1.0)
        if case["kind"] == "scale_o_2":
            scales.update(scale_o=2.0, descale_s=1.0 / 64)
        args = call_args(q, k, v, case["causal"], scale, scales, case["rule"])
        name = case["name"]
        torch.empty(1 << 26, device="cuda").fill_(float("nan"))  # garbage where the next outputs may land
        o, lse, indicator_same = run_case(arrays[d], name, args, scales, case["rule"] == 0)
        o2, lse2, _, _ = torch.ops.bitexact.flash_forward_fp8(*args, False, PV_FP32_ADD, P_BAR_SUM)
        torch.cuda.synchronize()
        same = bool(torch.equal(o.view(torch.int16), o2.view(torch.int16)) and
                    torch.equal(lse.view(torch.int32), lse2.view(torch.int32)))
        # An fp64 softmax of the dequantised inputs: a sanity bound, not the bits.
        qf, kf, vf = (x.double() * s for x, s in ((q, dq), (k, dk), (v, dv)))
        s = (qf @ kf.transpose(-1, -2)) * scale
        if case["causal"]:
            s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
        reference = torch.softmax(s, -1) @ vf
        if case["kind"] == "scale_o_2":
            # scale_o 2, and descale_s 1/64 against scale_s 256 (which P-bar's sum, descaled, cancels)
            reference = reference * 2.0 * (1.0 if P_BAR_SUM else 4.0)
        error = float(((o.double() - reference).abs().max() / reference.abs().max()))
        record = dict(case, preset=preset(case["rule"]), runs_identical=same, max_relative_error=error,
                      scales={key: float(np.float32(value)) for key, value in scales.items()})
        if indicator_same is not None:
            ones, repeated = arrays[d][f"{name}/p_bar_ones"], arrays[d][f"{name}/max_repeated"]
            record["indicator_pass_identical"] = indicator_same
            record["rows_with_two_max_p_bar"] = int((ones >= 2).sum())
            record["rows_max_repeated"] = int(repeated.sum())
        facts["cases"].append(record)
        print(f"{name}: runs identical {same}, O's largest error {error:.2e}"
              + (f", indicator pass identical {record['indicator_pass_identical']}" if case["rule"] == 0 else ""),
              flush=True)
    for d, a in arrays.items():
        np.savez(os.path.join(outdir, f"probe_d{d}.npz"), **a)
    with open(os.path.join(outdir, "facts.json"), "w") as f:
        json.dump(facts, f, indent=1)


if __name__ == "__main__":
    main()
