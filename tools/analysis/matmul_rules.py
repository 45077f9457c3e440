#!/usr/bin/env python3
"""The rules of cuBLAS's matrix-product kernels (PyTorch 2.11, sm_90), checked bit for bit
against captures of cuda/capture/matmul_capture.py, and the packing of the committed subset.

    PYTHONPATH=build/python python3 tools/analysis/matmul_rules.py check DIR [--alternatives]
    PYTHONPATH=build/python python3 tools/analysis/matmul_rules.py pack CAPTURE_DIR OUT_DIR
    PYTHONPATH=build/python python3 tools/analysis/matmul_rules.py pack-add CAPTURE_DIR OUT_DIR N
    PYTHONPATH=build/python python3 tools/analysis/matmul_rules.py pack-triton-add CAPTURE_DIR OUT_DIR N
    PYTHONPATH=build/python python3 tools/analysis/matmul_rules.py check-triton DIR [--alternatives]
    PYTHONPATH=build/python python3 tools/analysis/matmul_rules.py pack-triton CAPTURE_DIR OUT_DIR

DIR holds manifest.json and one folder per case (a.npy [M,K], b.npy [K,N], d.npy [M,N], bias.npy,
scale_a.npy, scale_b.npy): a whole capture (unpacked capture_part*.tar, with logs/ for the
cuBLASLt algorithm of each call) or tests/data/matmul (a subset of rows and columns per case,
named in its manifest.json). `check` prints, per case, the rule its kernel follows and the
mismatches against it; with --alternatives also the rejected rules and their counts. `pack`
writes the subset of every case that tests/data/matmul keeps, with MANIFEST (FNV-1a 64 and
SHA-256 of every file); `pack-add` (`pack-triton-add`) adds a later capture's new cases (numbered N) to such a folder.

The rules (docs: the report of issue 30's first step):
- chain16: each output the sm_90 tensor core's chain of 16-product fused steps over k from C=+0
  (bitexact.mma), in fp32, rounded to nearest even into the output format.
- split-K (kernel name ..._splitK_..., then cublasLt::splitKreduce_kernel): s = the algorithm's
  numSplitsK (cuBLASLt log); chunk = ceil(K/s) rounded up to the kernel's K tile (64: the first
  number of the name's second group, 64x16); split j is chain16 over k in [j*chunk, min(K,(j+1)*chunk))
  from +0, kept in fp32; the reduction adds them in fp32 round-to-nearest in split order,
  ((p0 + p1) + p2) + ...; then the epilogue.
- bias epilogue (_bias_): fp32 acc + fp32(bias), rounded to nearest in fp32, then to the output.
- fp8 (nvjet_sm90_qq*/qr*): chain of 32-product steps, each term truncated toward zero to a multiple
  of 2^(e_max - 13), e_max the largest leading exponent of the unnormalised products (e_a + e_b,
  a subnormal input at its format's e_min) and of the accumulator; exact sum; the sum rounded toward
  zero to 14 significant bits (13 fraction bits). Fast accumulation (no _algo2_): one chain over all
  of K; its _splitK kernels run that chain over each split (bounds as for 16-bit split-K, with the
  name's K tile, 128) and add the fp32 partials in order. Default (_algo2_): a chain over each 128 of
  K (4 steps) from +0, added into an fp32 accumulator by fp32 round-to-nearest addition. Epilogue: acc * fl32(scale_a * scale_b) in fp32
  round-to-nearest (row-wise: fl32(scale_a[m] * scale_b[n])), then rounded to the output.
- cutlass_75 *_align1 wmma (fp16, K not a multiple of 64): the 16-product steps start with the K
  residue tile: k-step bounds 0, 16, ... within the first (K mod 64) elements, then 16 at a time.

Triton's tutorial kernel (cuda/capture/triton_matmul_capture.py; check-triton, pack-triton): every
configuration walks K from 0 in BLOCK_K blocks with acc = tl.dot(a, b, acc) on one fp32 accumulator
from +0, the last block's missing k read as zeros; acc.to(output) rounds to nearest even
(cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32). BLOCK_K and the tile shape do not change the bits.
- triton_chain16 (bf16, fp16; wgmma m64nNk16 with 4 or 8 warps, mma.sync m16n8k16 with 2): chain16
  over all of K in k order, 16 products a step: the same bits as cuBLAS's unsplit kernels.
- triton_fp8_chain (e4m3, e5m2; wgmma m64nNk32, 4 or 8 warps): the fp8 chain of 32-product steps over
  all of K with no promotion (Triton's max_num_imprecise_acc defaults to 2^30 on sm_90): cuBLAS's fast
  accumulation, then the fp32 result rounded to fp16.
- triton_fp8_as_fp16_chain16 (fp8 with 2 warps: mma.sync m16n8k16 on the fp16 values, converted exactly
  by cvt.rn.f16x2.e4m3x2 / .e5m2x2): chain16 in fp16 with k taken per 32-wide block as k = 0, 1 (mod 4)
  in one step, then k = 2, 3 (mod 4) in the next (the 8-bit operands' register layout, kWidth = 4).
"""
import collections
import hashlib
import json
import math
import os
import re
import sys

import numpy as np

import bitexact

# The project's FNV-1a 64 of tests/data's MANIFESTs, defined once (tools/pack_attention_captures.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pack_attention_captures import fnv1a64  # noqa: E402

# ---------------------------------------------------------------- loading


def load_case(folder):
    return {f[:-4]: np.load(os.path.join(folder, f)) for f in os.listdir(folder) if f.endswith(".npy")}


def parse_cublaslt_log(path):
    """The algorithm of every cublasLt*Matmul call, in call order (CUBLASLT_LOG_LEVEL=5 trace)."""
    calls = []
    for line in open(path, errors="replace"):
        m = re.search(r"\[Trace\]\[(cublasLt\w*Matmul)\](.*)", line)
        if m:
            algo = re.search(r"algo=\[([^\]]*)\]", m.group(2))
            calls.append(dict(re.findall(r"(\w+)=(\S+)", algo.group(1))) if algo else {})
    return calls


def attach_algorithms(manifest, folder):
    """Each case's cuBLASLt algorithm: the capture runs every case three times (warm-up, two runs)."""
    logs = [os.path.join(folder, "logs", f) for f in os.listdir(os.path.join(folder, "logs"))
            if f.startswith("cublaslt")] if os.path.isdir(os.path.join(folder, "logs")) else []
    if not logs:
        return
    calls, i = parse_cublaslt_log(logs[0]), 0
    for case in manifest["cases"]:
        if "error" in case:
            continue
        three = calls[i:i + 3]
        i += 3
        assert all(c == three[0] for c in three), case["name"]
        case["algorithm"] = three[0]


# ---------------------------------------------------------------- 16-bit inputs


def as_f32(bits):
    return np.ascontiguousarray(bits).view(np.float32)


def round_to(acc, fmt):
    """fp32 values rounded to nearest even into fmt's bit patterns (fp32: the bits)."""
    acc = np.ascontiguousarray(acc, np.float32)
    if fmt == "fp32":
        return acc.view(np.uint32)
    return bitexact.convert(acc.view(np.uint32), format="fp32", result_format=fmt)[0]


def chain16(a, b, fmt, lo=0, hi=None, c=None):
    hi = a.shape[1] if hi is None else hi
    return as_f32(bitexact.mma(a[:, lo:hi], b[lo:hi, :], c, input_format=fmt, acc_format="fp32"))


def k_tile(kernel):
    """The K tile of an nvjet kernel: the first number of the name's second group (nvjet_sm90_tst_64x32_64x16_...)."""
    m = re.search(r"nvjet_sm90_[a-z]+_\d+x\d+_(\d+)x\d+_", kernel)
    return int(m.group(1)) if m else 64


def split_bounds(k, splits, tile):
    chunk = -(-k // splits)
    chunk = -(-chunk // tile) * tile
    return [min(j * chunk, k) for j in range(splits + 1)]


def split_partials(a, b, fmt, bounds):
    return [chain16(a, b, fmt, bounds[j], bounds[j + 1]) for j in range(len(bounds) - 1) if bounds[j + 1] > bounds[j]]


def reduce_partials(partials, order="forward"):
    if order == "reverse":
        partials = partials[::-1]
    if order == "tree":
        level = list(partials)
        while len(level) > 1:
            level = [(level[i] + level[i + 1]).astype(np.float32) if i + 1 < len(level) else level[i]
                     for i in range(0, len(level), 2)]
        return level[0]
    acc = partials[0]
    for p in partials[1:]:
        acc = (acc + p).astype(np.float32)
    return acc


def residue_first_bounds(k, tile=64, step=16):
    """k-step bounds of a CUTLASS 2 kernel that loads the partial K tile first."""
    residue = k % tile or tile
    return list(range(0, residue, step)) + list(range(residue, k, step)) + [k]


def segmented_chain(a, b, fmt, bounds):
    c = None
    for lo, hi in zip(bounds, bounds[1:]):
        c = bitexact.mma(a[:, lo:hi], b[lo:hi, :], c, input_format=fmt, acc_format="fp32")
    return as_f32(c)


# ---------------------------------------------------------------- fp8 inputs: the k32 unit


def decode_fp8(bits, fmt):
    """(signed integer significand, exponent of its last bit, leading exponent) of e4m3 / e5m2
    patterns; a subnormal keeps its format's e_min and its leading zeros."""
    bits = bits.astype(np.int64)
    sign = np.where(bits & 0x80, -1, 1)
    if fmt == "e4m3":
        exp, frac, frac_bits, bias = (bits >> 3) & 0xF, bits & 7, 3, 7
    else:
        exp, frac, frac_bits, bias = (bits >> 2) & 0x1F, bits & 3, 2, 15
    subnormal = exp == 0
    sig = np.where(subnormal, frac, frac + (1 << frac_bits))
    lead = np.where(subnormal, 1 - bias, exp - bias)
    return sign * sig, lead - frac_bits, lead


def decode_fp32_values(x):
    mant, exp = np.frexp(np.asarray(x, np.float64))
    return np.round(mant * (1 << 24)).astype(np.int64), exp - 24, exp - 1


def truncate_to_lsb(sig, lsb, window_lsb):
    """sig * 2^lsb truncated toward zero to a multiple of 2^window_lsb, as an integer count of them."""
    shift = lsb - window_lsb
    mag = np.abs(sig)
    kept = np.where(shift >= 0, mag << np.clip(shift, 0, 40), mag >> np.clip(-shift, 0, 62))
    return np.sign(sig) * kept


def round_toward_zero_bits(total, bits):
    mag, sign = np.abs(total), np.sign(total)
    length = np.array([int(v).bit_length() for v in mag.ravel()]).reshape(mag.shape)
    shift = np.maximum(length - bits, 0)
    return sign * ((mag >> shift) << shift)


NO_TERM = -1000


def fp8_step(p_sig, p_lsb, p_lead, acc, window_bits=13, result_bits=14):
    """One fused k32 step: products (O, k) and the fp32 accumulator (O,); returns float64 values."""
    c_sig, c_lsb, c_lead = decode_fp32_values(acc)
    p_lead = np.where(p_sig != 0, p_lead, NO_TERM)
    c_lead = np.where(c_sig != 0, c_lead, NO_TERM)
    window_lsb = np.maximum(p_lead.max(axis=1), c_lead) - window_bits
    total = truncate_to_lsb(p_sig, p_lsb, window_lsb[:, None]).sum(axis=1) + truncate_to_lsb(c_sig, c_lsb, window_lsb)
    if result_bits is not None:
        total = round_toward_zero_bits(total, result_bits)
    return np.ldexp(total.astype(np.float64), window_lsb)


def fp8_product(a, b, fa, fb, promote_every=None, window_bits=13, result_bits=14, step=32):
    """A [M,K] and B [K,N] fp8 patterns: the chain of k32 steps; with promote_every=p the chain
    restarts from +0 every p steps and its result is added into an fp32 accumulator (fp32 RN)."""
    m, k = a.shape
    n = b.shape[1]
    sa, la, ea = decode_fp8(a, fa)
    sb, lb, eb = decode_fp8(b, fb)
    chain, acc = np.zeros(m * n), np.zeros(m * n, np.float32)
    steps = -(-k // step)
    for t in range(steps):
        lo, hi = t * step, min(k, (t + 1) * step)

        p_sig = (sa[:, None, lo:hi] * sb[lo:hi, :].T[None, :, :]).reshape(m * n, -1)
        p_lsb = (la[:, None, lo:hi] + lb[lo:hi, :].T[None, :, :]).reshape(m * n, -1)
        p_lead = (ea[:, None, lo:hi] + eb[lo:hi, :].T[None, :, :]).reshape(m * n, -1)
        chain = fp8_step(p_sig, p_lsb, p_lead, chain, window_bits, result_bits).astype(np.float32).astype(np.float64)
        if promote_every and ((t + 1) % promote_every == 0 or t == steps - 1):
            acc = (acc + chain.astype(np.float32)).astype(np.float32)
            chain = np.zeros(m * n)
    return (acc if promote_every else chain.astype(np.float32)).reshape(m, n)


def scale_epilogue(acc, scale_a, scale_b, order="product_first"):
    scale_a, scale_b = scale_a.astype(np.float32), scale_b.astype(np.float32)
    if scale_a.size == 1:
        scale_a, scale_b = scale_a.reshape(()), scale_b.reshape(())
    if order == "product_first":
        return (acc * (scale_a * scale_b).astype(np.float32)).astype(np.float32)
    if order == "a_then_b":
        return ((acc * scale_a).astype(np.float32) * scale_b).astype(np.float32)
    return (acc.astype(np.float64) * np.float64(scale_a) * np.float64(scale_b)).astype(np.float32)


# ---------------------------------------------------------------- one rule per kernel


def kernel_rule(case):
    names = [k[0] for k in case["kernels"]]
    main = names[0]
    if case["op"] == "scaled_mm":
        if "_algo2_" in main:
            return "fp8_default"
        return "fp8_fast_splitk" if "_splitK" in main else "fp8_fast"
    if "_splitK" in main:
        return "splitk_bias" if "_bias" in main else "splitk"
    if "_bias" in main:
        return "chain16_bias"
    if case["op"] == "torchao_blockwise":  # modelled in the library only (matmul/kernels.hpp)
        return "torchao_blockwise"
    if case.get("tf32"):  # modelled in the library only (matmul/kernels.hpp: cublas_sm90_tf32, _xmma)
        return "tf32_cutlass" if "cutlass_80" in main else "tf32_xmma"
    if "wmma_tensorop" in main and "align1" in main:
        return "residue_first"
    if "cutlass" in main:
        return "cutlass_splitk_unresolved"
    return "chain16"


def model(case, data, rule, variant=None):
    """The model's output bits for one case under `rule` (variant: an alternative, for --alternatives)."""
    fmt = case.get("dtype")
    a, b = data["a"], data["b"]
    out = case["out_dtype"]
    if rule.startswith("fp8"):
        promote = 4 if rule == "fp8_default" else None
        window, result = 13, 14
        if variant and variant.startswith("promote="):
            promote = int(variant.split("=")[1]) or None
        if variant and variant.startswith("window="):
            window = int(variant.split("=")[1])
        if variant == "no step rounding":
            result = None
        if rule == "fp8_fast_splitk":  # each split a chain over its part of K, the partials added in fp32
            bounds = split_bounds(case["K"], int(case["algorithm"]["numSplitsK"]), k_tile(case["kernels"][0][0]))
            acc = reduce_partials([fp8_product(a[:, lo:hi], b[lo:hi], case["a_type"], case["b_type"], promote, window,
                                               result) for lo, hi in zip(bounds, bounds[1:]) if hi > lo])
        else:
            acc = fp8_product(a, b, case["a_type"], case["b_type"], promote, window, result)
        order = variant if variant in ("a_then_b", "exact") else "product_first"
        return round_to(scale_epilogue(acc, data["scale_a"], data["scale_b"], order), out)
    if rule == "residue_first":
        bounds = list(range(0, case["K"], 16)) + [case["K"]] if variant == "plain" else residue_first_bounds(case["K"])
        return round_to(segmented_chain(a, b, fmt, bounds), out)
    if rule in ("splitk", "splitk_bias"):
        splits = int(case["algorithm"]["numSplitsK"])
        tile = k_tile(case["kernels"][0][0]) if variant != "tile=16" else 16
        bounds = split_bounds(case["K"], splits, tile) if variant != "plain chain" else [0, case["K"]]
        acc = reduce_partials(split_partials(a, b, fmt, bounds), variant if variant in ("reverse", "tree") else "forward")
    else:
        acc = chain16(a, b, fmt)
    if rule.endswith("bias"):
        bias = as_f32(bitexact.convert(data["bias"], format=fmt, result_format="fp32")[0])
        if variant == "bias rounded after":
            return bitexact.add(round_to(acc, out), np.ascontiguousarray(np.broadcast_to(data["bias"], acc.shape)),
                                format=out)[0]
        acc = (acc + bias[None, :]).astype(np.float32)
    return round_to(acc, out)


ALTERNATIVES = {
    "splitk": ["plain chain", "reverse", "tree", "tile=16"],
    "splitk_bias": ["plain chain", "bias rounded after"],
    "chain16_bias": ["bias rounded after"],
    "fp8_fast": ["promote=4", "window=12", "window=14", "no step rounding", "a_then_b", "exact"],
    "fp8_default": ["promote=0", "promote=2", "promote=8", "a_then_b", "exact"],
    "fp8_fast_splitk": ["promote=4"],
    "residue_first": ["plain"],
}


def check(folder, alternatives=False):
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    attach_algorithms(manifest, folder)
    compared = failures = 0
    for case in manifest["cases"]:
        if "error" in case:
            continue
        data = load_case(os.path.join(folder, case["name"]) if os.path.isdir(os.path.join(folder, case["name"]))
                         else os.path.join(folder, "cases", case["name"]))
        rule = kernel_rule(case)
        got = model(case, data, rule)
        bad = int((got != data["d"]).sum())
        compared += got.size
        failures += bad
        print(f"{case['name']}: {rule}, {bad} of {got.size} differ  [{case['kernels'][0][0][:60]}]", flush=True)
        if alternatives:
            for variant in ALTERNATIVES.get(rule, []):
                alt = model(case, data, rule, variant)
                print(f"    alternative {variant!r}: {int((alt != data['d']).sum())} differ", flush=True)
    print(f"total: {compared} outputs compared, {failures} differ")
    return failures


# ---------------------------------------------------------------- Triton's tutorial kernel (tl.dot)
#
# cuda/capture/triton_matmul_capture.py runs the tutorial's kernel: per output tile a loop over
# BLOCK_K blocks of K, acc = tl.dot(a, b, acc) on an fp32 accumulator that starts at +0, then
# acc.to(output type). Its cases hold d (Triton), d_torch (torch.matmul on the same inputs; for fp8
# on their fp16 copies), d_scaled_fast / d_scaled_default (torch._scaled_mm, unit scales, fp16 out)
# and, for the `configs` cases, d_config<i> (configuration i forced).


def fp8_as_fp16(bits, fmt):
    """e4m3 / e5m2 patterns as fp16 patterns (exact: fp16 holds every e4m3 and e5m2 value)."""
    return bitexact.convert(np.ascontiguousarray(bits), format=fmt, result_format="fp16")[0]


def triton_rule(case, config=None):
    """The rule of one Triton run: its dot's instruction decides it."""
    kernel = (config or case)["kernel"]
    mma = " ".join(kernel["ptx_mma"])
    if case["dtype"] in ("e4m3", "e5m2"):
        return "triton_fp8_chain" if ".e4m3" in mma or ".e5m2" in mma else "triton_fp8_as_fp16_chain16"
    if case["dtype"] == "fp32":  # modelled in the library only (matmul/kernels.hpp: triton_matmul_sm90_tf32)
        return "triton_tf32_truncated"
    return "triton_chain16"


def interleaved_k_order(k, pairs_first=(0, 1), block=32):
    """The k order of mma.sync m16n8k16 fed from 8-bit operands in Triton's MMAv2 layout (kWidth = 4: a
    thread holds k = 4t..4t+3 and 16+4t..16+4t+3 of each 32-wide block, and each instruction takes two
    of the four): per 32 of K, first k = 0, 1 (mod 4), then k = 2, 3 (mod 4). Indices past K are dropped,
    as the masked loads' zeros add nothing."""
    first = [i for i in range(block) if i % 4 in pairs_first]
    order = first + [i for i in range(block) if i % 4 not in pairs_first]
    return np.array([start + i for start in range(0, k, block) for i in order if start + i < k])


def chain16_in_order(a, b, fmt, order, step=16):
    """chain16 over k taken in `order`, 16 at a time (a step's products are fused, so only the sets matter)."""
    a, b = a[:, order], b[order, :]
    return segmented_chain(a, b, fmt, list(range(0, len(order), step)) + [len(order)])


def triton_accumulator(case, data, rule, block_k, variant=None):
    """The fp32 accumulator of the tutorial kernel under `rule` (variant: an alternative), before acc.to()."""
    a, b, k = data["a"], data["b"], case["K"]
    if rule == "triton_fp8_as_fp16_chain16":
        a, b = fp8_as_fp16(a, case["dtype"]), fp8_as_fp16(b, case["dtype"])
        if variant == "contiguous k16 steps":
            return chain16(a, b, "fp16")
        if variant == "k = 0..3 mod 8 first":
            first = [j for j in range(32) if j % 8 < 4]
            order = np.array([s + i for s in range(0, k, 32) for i in first + [j for j in range(32) if j not in first]
                              if s + i < k])
        else:
            order = interleaved_k_order(k, (2, 3) if variant == "steps swapped" else (0, 1))
        return chain16_in_order(a, b, "fp16", order)
    if rule == "triton_chain16":
        fmt = case["dtype"]
        if variant == "block restart":  # each tl.dot from +0, added into acc in fp32
            return reduce_partials(split_partials(a, b, fmt, list(range(0, k, block_k)) + [k]))
        if variant == "residue first":
            return segmented_chain(a, b, fmt, residue_first_bounds(k, block_k))
        if variant == "ampere unit":
            return as_f32(bitexact.mma(a, b, input_format=fmt, acc_format="fp32", arch="sm_80"))
        if variant == "k interleaved as fp8":
            return chain16_in_order(a, b, fmt, interleaved_k_order(k))
        return chain16(a, b, fmt)
    fmt = case["dtype"]
    if variant == "fp16 chain16":
        return chain16(fp8_as_fp16(a, fmt), fp8_as_fp16(b, fmt), "fp16")
    promote = {"promote=4": 4, "block restart": block_k // 32}.get(variant)
    window = int(variant.split("=")[1]) if variant and variant.startswith("window=") else 13
    return fp8_product(a, b, fmt, fmt, promote, window, None if variant == "no step rounding" else 14)


def triton_model(case, data, rule, block_k, variant=None):
    """The output bits of the tutorial kernel: the accumulator rounded to nearest even into the output."""
    return round_to(triton_accumulator(case, data, rule, block_k, variant), case["out_dtype"])


TRITON_ALTERNATIVES = {
    "triton_chain16": ["block restart", "residue first", "ampere unit", "k interleaved as fp8"],
    "triton_fp8_chain": ["promote=4", "block restart", "window=12", "window=14", "no step rounding", "fp16 chain16"],
    "triton_fp8_as_fp16_chain16": ["contiguous k16 steps", "steps swapped", "k = 0..3 mod 8 first"],
}


def cublas_case(case, call):
    """matmul_rules' cuBLAS description of one of torch's calls on a Triton case's inputs."""
    pseudo = dict(kernels=call["kernels"], algorithm=call.get("algorithm", {}), K=case["K"], out_dtype="fp16"
                  if case["dtype"] in ("e4m3", "e5m2") else case["dtype"])
    if call["file"] == "d_torch":
        pseudo.update(op="matmul", dtype="fp16" if case["dtype"] in ("e4m3", "e5m2") else case["dtype"])
    else:
        pseudo.update(op="scaled_mm", a_type=case["dtype"], b_type=case["dtype"])
    return pseudo


def cublas_data(case, data, call):
    if call["file"] == "d_torch" and case["dtype"] in ("e4m3", "e5m2"):
        return {"a": fp8_as_fp16(data["a"], case["dtype"]), "b": fp8_as_fp16(data["b"], case["dtype"])}
    one = np.ones((), np.float32)
    return {"a": data["a"], "b": data["b"], "scale_a": one, "scale_b": one}


def cublas_accumulator(pseudo, cdata, rule):
    """cuBLAS's fp32 result at one element before the output rounding, and how it was formed."""
    a, b, k = cdata["a"], cdata["b"], pseudo["K"]
    if rule in ("splitk", "fp8_fast_splitk"):
        bounds = split_bounds(k, int(pseudo["algorithm"]["numSplitsK"]), k_tile(pseudo["kernels"][0][0]))
        if rule == "splitk":
            parts = split_partials(a, b, pseudo["dtype"], bounds)
        else:
            parts = [fp8_product(a[:, lo:hi], b[lo:hi], pseudo["a_type"], pseudo["b_type"])
                     for lo, hi in zip(bounds, bounds[1:]) if hi > lo]
        return float(reduce_partials(parts)[0, 0]), (f"{len(parts)} splits at k = {bounds}, fp32 partials "
                                                      f"{[float(p[0, 0]) for p in parts]} added in order")
    if rule in ("fp8_fast", "fp8_default"):
        acc = fp8_product(a, b, pseudo["a_type"], pseudo["b_type"], 4 if rule == "fp8_default" else None)
        return float(acc[0, 0]), ("a chain over each 128 of K added into fp32" if rule == "fp8_default"
                                  else "one chain over all of K")
    if rule == "residue_first":
        return float(segmented_chain(a, b, pseudo["dtype"], residue_first_bounds(k))[0, 0]), \
            "16-product steps from the K residue tile first"
    return float(chain16(a, b, pseudo["dtype"])[0, 0]), f"one chain of 16-product steps ({rule})"


def explain_difference(case, data, run, pseudo, cdata, row, col):
    """Why Triton's and cuBLAS's outputs differ at (row, col): both fp32 results before the output rounding."""
    one = {"a": data["a"][row:row + 1], "b": data["b"][:, col:col + 1]}
    rule = triton_rule(case, run)
    triton = float(triton_accumulator(case, one, rule, run["config"]["BLOCK_SIZE_K"])[0, 0])
    cublas, how = cublas_accumulator(pseudo, {key: value[row:row + 1] if key == "a" else value[:, col:col + 1]
                                              if key == "b" else value for key, value in cdata.items()},
                                     kernel_rule(pseudo))
    return [f"    element ({row}, {col}): Triton {int(data['d'][row, col]):#06x} from fp32 {triton!r} ({rule}); "
            f"cuBLAS {int(data[pseudo['file']][row, col]):#06x} from fp32 {cublas!r} ({how})"]


def check_triton(folder, alternatives=False):
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    compared = failures = 0
    rejected = collections.Counter()  # (rule, alternative) -> outputs where it differs from the GPU
    per_rule = collections.Counter()
    for case in manifest["cases"]:
        if "error" in case:
            print(f"{case['name']}: capture failed: {case['error']}")
            continue
        path = os.path.join(folder, case["name"])
        data = load_case(path if os.path.isdir(path) else os.path.join(folder, "cases", case["name"]))
        runs = [(f"d_config{row['index']}", row) for row in case.get("configs", []) if "error" not in row] \
            if case.get("all_configs") else [("d", case)]
        for key, run in runs:
            if key not in data:
                continue
            rule, block_k = triton_rule(case, run), run["config"]["BLOCK_SIZE_K"]
            got = triton_model(case, data, rule, block_k)
            bad = int((got != data[key]).sum())
            compared += got.size
            failures += bad
            per_rule[rule] += got.size
            cfg = run["config"]
            print(f"{case['name']} {key}: {rule} [BLOCK {cfg['BLOCK_SIZE_M']}x{cfg['BLOCK_SIZE_N']}x{block_k}, "
                  f"{cfg['num_warps']} warps, {cfg['num_stages']} stages; {' '.join(run['kernel']['ptx_mma'])}], "
                  f"{bad} of {got.size} differ", flush=True)
            if alternatives:
                for variant in TRITON_ALTERNATIVES[rule]:
                    alt = triton_model(case, data, rule, block_k, variant)
                    rejected[rule, variant] += int((alt != data[key]).sum())
                    print(f"    alternative {variant!r}: {int((alt != data[key]).sum())} differ", flush=True)
        for call in case.get("torch", []):
            if "error" in call or call["file"] not in data:
                continue
            pseudo = dict(cublas_case(case, call), file=call["file"])
            cdata = cublas_data(case, data, call)
            cublas = model(pseudo, cdata, kernel_rule(pseudo))
            versus = data[call["file"]] != data["d"]
            print(f"    torch {call['call']}: {kernel_rule(pseudo)} [{call['kernels'][0][0][:50]}], "
                  f"{int((cublas != data[call['file']]).sum())} of {cublas.size} differ from its cuBLAS rule; "
                  f"{int(versus.sum())} differ from Triton's", flush=True)
            if versus.any() and alternatives:
                row, col = (int(x) for x in np.argwhere(versus)[0])
                print("\n".join(explain_difference(case, data, case, pseudo, cdata, row, col)), flush=True)
    for rule, count in sorted(per_rule.items()):
        print(f"rule {rule}: {count} outputs; " + ", ".join(f"{variant!r} differs in {n}" for (r, variant), n in
                                                            sorted(rejected.items()) if r == rule))
    print(f"total: {compared} Triton outputs compared, {failures} differ")
    return failures


# ---------------------------------------------------------------- the committed subset

def pick(indices, total, limit, rng):
    """Up to `limit` of range(total): first the given ones (in order of appearance), then random."""
    chosen = list(dict.fromkeys(int(i) for i in indices))[:limit]
    rest = [i for i in rng.permutation(total) if i not in set(chosen)]
    return sorted(int(i) for i in chosen + rest[:max(0, limit - len(chosen))])


def split_survey(capture):
    """The survey's lines: per shape, the kernel and the cuBLASLt algorithm (the log's calls after the cases',
    two per shape: warm-up and profiled run)."""
    manifest = json.load(open(os.path.join(capture, "manifest.json")))
    logs = [f for f in os.listdir(os.path.join(capture, "logs")) if f.startswith("cublaslt")]
    cases = sum(1 for case in manifest["cases"] if "error" not in case)
    calls = parse_cublaslt_log(os.path.join(capture, "logs", logs[0]))[3 * cases:]
    rows = manifest["survey"]
    assert len(calls) == 2 * len(rows)
    lines = ["# bf16 and fp16 torch.matmul on zero inputs (matmul_capture.py's survey): the kernel and the cuBLASLt",
             "# algorithm per shape (CUBLASLT_LOG_LEVEL=5 trace). s: numSplitsK; chunk: ceil(K/s) rounded up to the",
             "# K tile 64, the K of every split but the last."]
    for row, algo in zip(rows, calls[1::2]):
        kernel = row["kernels"][0]
        splits = int(algo.get("numSplitsK", 1))
        chunk = split_bounds(row["K"], splits, 64)[1]
        tile = algo.get("tile", "").replace("MATMUL_TILE_", "")
        cluster = algo.get("clusterShape", "").replace("CLUSTER_SHAPE_", "")
        lines.append(f"{row['dtype']} {row['M']:4d}x{row['N']:<4d} K={row['K']:6d} s={splits:3d} chunk={chunk:6d} "
                     f"tile={tile:7s} cluster={cluster:6s} grid={kernel[1]} {kernel[0][:60]}")
    return lines


def pack_case(capture, out, case, rng, lines, keep_whole_below=480_000):
    """One case's subset into out/NAME (all of it when small, else up to 16 rows and columns, those where a
    rejected alternative differs from the GPU first), its MANIFEST lines appended; its manifest entry."""
    data = load_case(os.path.join(capture, "cases", case["name"]))
    size = sum(v.nbytes for v in data.values())
    rule = kernel_rule(case)
    m, n, k = case["M"], case["N"], case["K"]
    if size <= keep_whole_below:
        rows, cols = list(range(m)), list(range(n))
    else:
        limit = min(16, max(4, 131072 // (2 * k)))  # about 256 KB of A and B rows (and every column of a
        # 128 x 128 block-scaled B, whose scales cover columns 128 at a time)
        # Elements where a rejected alternative differs from the GPU come first, the rarest first.
        masks = [model(case, data, rule, variant) != data["d"] for variant in ALTERNATIVES.get(rule, [])[:3]]
        masks = sorted((mask for mask in masks if mask.any()), key=lambda mask: mask.sum())
        where = np.concatenate([np.argwhere(mask) for mask in masks]) if masks else np.zeros((0, 2), int)
        rows = pick(where[:, 0], m, limit, rng)
        cols = pick(where[np.isin(where[:, 0], rows)][:, 1], n, limit, rng)
        if case.get("scale_b") == "block128x128":
            cols = list(range(n))
    folder = os.path.join(out, case["name"])
    os.makedirs(folder, exist_ok=True)
    subset = {"a": data["a"][rows], "b": data["b"][:, cols], "d": data["d"][np.ix_(rows, cols)]}
    if "bias" in data:
        subset["bias"] = data["bias"][cols]
    if "c" in data:
        subset["c"] = data["c"][np.ix_(rows, cols)]
    if "scale_a" in data:
        sa, sb = data["scale_a"], data["scale_b"]
        subset["scale_a"] = sa[rows] if sa.ndim == 2 else sa
        subset["scale_b"] = sb[:, cols] if sb.ndim == 2 and case.get("scale_b") != "block128x128" else sb
    entry = {key: case[key] for key in case if key not in ("kernels_second_run",)}
    entry.update(rows=rows if len(rows) < m else "all", cols=cols if len(cols) < n else "all", rule=rule)
    lines.append(f"case {case['name']} {m} {n} {k} {rule} rows={len(rows)} cols={len(cols)}")
    save_subset(folder, case["name"], subset, lines)
    print(lines[-len(subset) - 1], flush=True)
    return entry


def pack(capture, out, keep_whole_below=480_000):
    manifest = json.load(open(os.path.join(capture, "manifest.json")))
    attach_algorithms(manifest, capture)
    rng = np.random.default_rng(30)
    os.makedirs(out, exist_ok=True)
    lines = []
    kept_cases = [pack_case(capture, out, case, rng, lines, keep_whole_below)
                  for case in manifest["cases"] if "error" not in case]
    versions = manifest["versions"]
    json.dump({"versions": versions, "cases": kept_cases}, open(os.path.join(out, "manifest.json"), "w"), indent=1)
    open(os.path.join(out, "split_survey.txt"), "w").write("\n".join(split_survey(capture)) + "\n")
    for name in ("manifest.json", "split_survey.txt"):
        raw = open(os.path.join(out, name), "rb").read()
        lines.append(f"file {fnv1a64(raw):016x} {hashlib.sha256(raw).hexdigest()} {name}")
    header = [
        "# cuBLAS matrix-product captures (cuda/capture/matmul_capture.py; tools/analysis/matmul_rules.py pack).",
        f"# GPU {versions['gpu']} (sm_{versions['capability'].replace('.', '')}, {versions['sm_count']} SMs), "
        f"{versions['nvidia_smi']}, torch {versions['torch']}, CUDA {versions['cuda']}, "
        f"cuBLAS {versions['libraries'].get('cublas')}, captured {versions['date_utc']}.",
        "# case NAME M N K RULE rows=KEPT cols=KEPT (the rows of A and D and the columns of B and D kept;",
        "#   manifest.json lists them; the rule reads the full M, N, K and the case's numSplitsK)",
        "# file FNV1A64 SHA256 PATH",
    ]
    open(os.path.join(out, "MANIFEST"), "w").write("\n".join(header + lines) + "\n")


def pack_add(capture, out, number, triton=False):
    """A later capture's cases (those not in out already) added to out: their subsets, manifest.json entries
    with "capture": number and its versions as versions_capture_NUMBER, and their lines at MANIFEST's end
    (manifest.json's line rewritten). triton: a triton_matmul_capture.py run into tests/data/matmul_triton."""
    manifest = json.load(open(os.path.join(capture, "manifest.json")))
    if not triton:
        attach_algorithms(manifest, capture)
    kept = json.load(open(os.path.join(out, "manifest.json")))
    known = {case["name"] for case in kept["cases"]}
    rng = np.random.default_rng(30 + int(number))
    lines = [line for line in open(os.path.join(out, "MANIFEST")).read().splitlines()
             if not line.endswith(" manifest.json")]
    for case in manifest["cases"]:
        if "error" not in case and case["name"] not in known:
            packed = (pack_triton_case if triton else pack_case)(capture, out, case, rng, lines)
            kept["cases"].append(dict(packed, capture=int(number)))
    kept[f"versions_capture_{number}"] = manifest["versions"]
    json.dump(finite_json(kept), open(os.path.join(out, "manifest.json"), "w"), indent=1, allow_nan=False)
    raw = open(os.path.join(out, "manifest.json"), "rb").read()
    lines.append(f"file {fnv1a64(raw):016x} {hashlib.sha256(raw).hexdigest()} manifest.json")
    open(os.path.join(out, "MANIFEST"), "w").write("\n".join(lines) + "\n")


def save_subset(folder, name, subset, lines):
    """Each array of a case's subset as folder/KEY.npy, its MANIFEST line appended to lines."""
    for key, array in sorted(subset.items()):
        path = os.path.join(folder, key + ".npy")
        np.save(path, np.ascontiguousarray(array))
        raw = open(path, "rb").read()
        lines.append(f"file {fnv1a64(raw):016x} {hashlib.sha256(raw).hexdigest()} {name}/{key}.npy")


def finite_json(x):
    """x with every non-finite float replaced by None (JSON has no Infinity or NaN)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite_json(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite_json(v) for v in x]
    return x


def pack_triton_case(capture, out, case, rng, lines, keep_whole_below=200_000):
    """One Triton case's subset into out/NAME (whole when small or when it ran every configuration, else 4 to
    16 rows of A and columns of B, those where cuBLAS or a rejected rule differs from Triton first), its
    MANIFEST lines appended; its manifest entry."""
    data = load_case(os.path.join(capture, "cases", case["name"]))
    m, n, k = case["M"], case["N"], case["K"]
    rule = "per config" if case["all_configs"] else triton_rule(case)
    if case["all_configs"] or sum(v.nbytes for v in data.values()) <= keep_whole_below:
        rows, cols = list(range(m)), list(range(n))
    else:
        limit = min(16, max(4, 131072 // (2 * k)))
        masks = [data[key] != data["d"] for key in data if key.startswith("d_")]
        block_k = case["config"]["BLOCK_SIZE_K"]
        masks += [triton_model(case, data, rule, block_k, variant) != data["d"]
                  for variant in TRITON_ALTERNATIVES.get(rule, [])[:3]]
        masks = sorted((mask for mask in masks if mask.any()), key=lambda mask: mask.sum())
        where = np.concatenate([np.argwhere(mask) for mask in masks]) if masks else np.zeros((0, 2), int)
        rows = pick(where[:, 0], m, limit, rng)
        cols = pick(where[np.isin(where[:, 0], rows)][:, 1], n, limit, rng)
    folder = os.path.join(out, case["name"])
    os.makedirs(folder, exist_ok=True)
    subset = {key: (value[rows] if key == "a" else value[:, cols] if key == "b" else value[np.ix_(rows, cols)])
              for key, value in data.items()}
    entry = {key: value for key, value in case.items() if key != "kernels_second_run"}
    entry["torch"] = [{key: value for key, value in call.items() if key != "kernels_second_run"}
                      for call in case.get("torch", [])]
    entry.update(rows=rows if len(rows) < m else "all", cols=cols if len(cols) < n else "all", rule=rule)
    lines.append(f"case {case['name']} {m} {n} {k} {rule} rows={len(rows)} cols={len(cols)}")
    save_subset(folder, case["name"], subset, lines)
    print(lines[-len(subset) - 1], flush=True)
    return entry


def pack_triton(capture, out, keep_whole_below=200_000):
    """tests/data/matmul_triton: every case of a triton_matmul_capture.py run (pack_triton_case)."""
    manifest = json.load(open(os.path.join(capture, "manifest.json")))
    rng = np.random.default_rng(30)
    os.makedirs(out, exist_ok=True)
    lines = []
    kept_cases = [pack_triton_case(capture, out, case, rng, lines, keep_whole_below)
                  for case in manifest["cases"] if "error" not in case]
    versions = manifest["versions"]
    # Strict JSON (a config the autotuner could not run timed as inf becomes null), for C++ readers.
    json.dump(finite_json({"versions": versions, "configs": manifest["configs"], "cases": kept_cases}),
              open(os.path.join(out, "manifest.json"), "w"), indent=1, allow_nan=False)
    raw = open(os.path.join(out, "manifest.json"), "rb").read()
    lines.append(f"file {fnv1a64(raw):016x} {hashlib.sha256(raw).hexdigest()} manifest.json")
    header = [
        "# Triton tutorial matrix-product captures (cuda/capture/triton_matmul_capture.py; "
        "tools/analysis/matmul_rules.py pack-triton).",
        f"# GPU {versions['gpu']} (sm_{versions['capability'].replace('.', '')}, {versions['sm_count']} SMs), "
        f"{versions['nvidia_smi']}, Triton {versions['triton']}, torch {versions['torch']}, CUDA {versions['cuda']}, "
        f"cuBLAS {versions['libraries'].get('cublas')}, captured {versions['date_utc']}.",
        "# case NAME M N K RULE rows=KEPT cols=KEPT (the rows of A and of every d* and the columns of B and of",
        "#   every d* kept; manifest.json lists them, the config and the kernel facts; RULE 'per config': the",
        "#   case ran every configuration, d_config<i>, each with its own rule)",
        "# file FNV1A64 SHA256 PATH",
    ]
    open(os.path.join(out, "MANIFEST"), "w").write("\n".join(header + lines) + "\n")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], "--alternatives" in sys.argv) else 0)
    if len(sys.argv) >= 3 and sys.argv[1] == "check-triton":
        sys.exit(1 if check_triton(sys.argv[2], "--alternatives" in sys.argv) else 0)
    if len(sys.argv) == 4 and sys.argv[1] == "pack-triton":
        pack_triton(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "pack":
        pack(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) == 5 and sys.argv[1] in ("pack-add", "pack-triton-add"):
        pack_add(sys.argv[2], sys.argv[3], sys.argv[4], triton=sys.argv[1] == "pack-triton-add")
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
