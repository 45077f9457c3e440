"""Assertions for tests of kernels (pytest or any runner): compare result bits with
expected bits or with a model, and on failure say what testing/check.hpp says in C++ —
how many elements differ, the first index, both values decoded side by side, and the
model's trace of that element.

    from bitexact.testing import assert_matches_model
    assert_matches_model(gpu_out, bitexact.add, a, b, format="bf16")
"""

import numpy as np

import bitexact
from bitexact import _bitexact

__all__ = ["assert_bitexact", "assert_matches_model", "mismatch_report"]

_INDICES_SHOWN = 20


def _format_of(x, format, name="actual"):
    """format's canonical name, else the format x's dtype carries (a PyTorch floating tensor, a float32,
    float16 or ml_dtypes array); a bare integer array needs format=."""
    if format is not None:
        return bitexact.format_info(format)[0]
    carried = bitexact._carried_format(x)
    if carried is not None:
        return carried
    dtype = getattr(x, "dtype", type(x).__name__)
    raise ValueError(f"name the format of {name} with format= (its dtype {dtype} does not say which: a uint16 array "
                     f"could hold bf16 or fp16); only float32, float16, ml_dtypes' and PyTorch floating dtypes carry "
                     f"their own")


def _nan_mask(bits, format):
    _, width, exponent_bits, fraction_bits, _ = bitexact.format_info(format)
    bits = bits.astype(np.uint32)
    exponent = (bits >> fraction_bits) & ((1 << exponent_bits) - 1)
    fraction = bits & ((1 << fraction_bits) - 1)
    all_ones = exponent == (1 << exponent_bits) - 1
    if format == "e4m3":  # E4M3FN: the one NaN per sign has every fraction bit set
        return all_ones & (fraction == (1 << fraction_bits) - 1)
    return all_ones & (fraction != 0)


def mismatch_report(actual, expected, format, any_nan=False):
    """(count compared, indices of the mismatching elements in C order, actual bits, expected bits), flat."""
    got = bitexact.as_bits(actual, format, "actual")
    want = bitexact.as_bits(expected, format, "expected")
    if got.shape != want.shape:
        raise AssertionError(f"shapes differ: actual {got.shape}, expected {want.shape}")
    got, want = got.reshape(-1), want.reshape(-1)
    differ = got != want
    if any_nan:
        differ &= ~(_nan_mask(got, format) & _nan_mask(want, format))
    return got.size, np.flatnonzero(differ), got, want


def _distances(got, want, indices, format):
    """Every mismatch by its distance in ulps of format (1, 2, 3-4, 5-8, ...) and its
    direction: the actual value's magnitude below the expected one's (toward zero) or
    above it (away from zero). "265 elements, all 1 ulp toward zero" reads as truncation."""
    width = bitexact.format_info(format)[1]
    sign = np.int64(1) << (width - 1)
    g, w = got[indices].astype(np.int64), want[indices].astype(np.int64)
    nan = _nan_mask(g, format) | _nan_mask(w, format)
    ordered_g = np.where(g & sign, -(g & (sign - 1)), g)[~nan]
    ordered_w = np.where(w & sign, -(w & (sign - 1)), w)[~nan]
    steps = np.abs(ordered_g - ordered_w)
    toward = np.abs(ordered_g) < np.abs(ordered_w)
    buckets = {}
    for distance, down in zip(steps.tolist(), toward.tolist()):
        bucket = 1
        while bucket < distance:
            bucket *= 2
        counts = buckets.setdefault(bucket, [0, 0])
        counts[0 if down else 1] += 1
    parts = []
    for bucket in sorted(buckets):
        label = "1 ulp" if bucket == 1 else "2 ulps" if bucket == 2 else f"{bucket // 2 + 1}-{bucket} ulps"
        down, up = buckets[bucket]
        parts.append(f"{label}: {down + up} ({down} toward zero, {up} away)")
    if len(buckets) == 1 and min(buckets[next(iter(buckets))]) == 0 and not nan.any():
        bucket = next(iter(buckets))
        label = "1 ulp" if bucket == 1 else "2 ulps" if bucket == 2 else f"{bucket // 2 + 1}-{bucket} ulps"
        direction = "toward zero" if buckets[bucket][1] == 0 else "away from zero"
        return f"{len(indices)} element{'' if len(indices) == 1 else 's'}, all {label} {direction}"
    return "by distance " + ", ".join(parts) + (f"; NaN on one side: {int(nan.sum())}" if nan.any() else "")


def _message(compared, indices, got, want, format, shape, subject, reference, trace_text):
    first = int(indices[0])
    position = np.unravel_index(first, shape) if len(shape) > 1 else (first,)
    shown = " ".join(str(int(i)) for i in indices[:_INDICES_SHOWN])
    more = f" ... ({len(indices) - _INDICES_SHOWN} more)" if len(indices) > _INDICES_SHOWN else ""
    which = "the one element differs" if compared == 1 else f"{len(indices)} of {compared} elements differ"
    lines = [f"{which} from {subject}; first at index {first}"
             f"{' ' + str(tuple(int(p) for p in position)) if len(shape) > 1 else ''}",
             f"indices: {shown}{more}",
             f"mismatches: {_distances(got, want, indices, format)}",
             _bitexact._side_by_side(format, int(got[first]), int(want[first]), reference).rstrip("\n")]
    if trace_text:
        lines.append(f"model trace of element {first}:\n{trace_text}")
    return "\n".join(lines)


def assert_bitexact(actual, expected, *, format=None, any_nan=False):
    """Assert that two arrays (NumPy bit patterns, or PyTorch tensors) hold the same bits.

    format: the arrays' format (taken from a tensor's dtype when omitted). any_nan:
    count any NaN against any NaN as a match (payloads differ between hardware).
    Returns the number of elements compared.
    """
    __tracebackhide__ = True  # pytest shows the caller's line and the message, not this function
    format = _format_of(actual, format)
    compared, indices, got, want = mismatch_report(actual, expected, format, any_nan)
    if len(indices):
        shape = bitexact.as_bits(actual, format).shape
        raise AssertionError(_message(compared, indices, got, want, format, shape, "the expected bits", "expected",
                                      None))
    return compared


# The keywords of bitexact's elementwise operations that bitexact.trace takes too.
_TRACE_KEYWORDS = ("rounding", "tininess", "ftz", "daz", "nans")


def _mma_steps(model, inputs, keywords, index, shape):
    row, col = divmod(index, shape[1])
    options = {key: keywords[key] for key in ("input_format", "acc_format", "arch") if key in keywords}
    steps = bitexact.mma_trace(*inputs, row=row, col=col, **options)
    return "\n".join(f"step {i + 1} of {len(steps)} (D[{row}][{col}]):\n{step.text}" for i, step in enumerate(steps))


def _fp32(bits):
    return float(np.uint32(bits).view(np.float32))


def _matmul_account(model, inputs, keywords, index, shape):
    """D[row, col]'s arithmetic (bitexact.explain_matmul) in a few lines: each split's chains, the reduction."""
    row, col = divmod(index, shape[1])
    options = dict(keywords)
    if model is bitexact.matmul:
        options["a_format"] = options.pop("format", "bf16")
        a, b = inputs
    else:
        a, b, options["scale_a"], options["scale_b"] = inputs
    options.pop("threads", None)
    e = bitexact.explain_matmul(a, b, row, col, **options)
    lines = [f"D[{row}, {col}]: {len(e['splits'])} split(s) of K"]
    for i, split in enumerate(e["splits"]):
        for piece in split["pieces"]:
            cut = sum(step["terms_cut"] for step in piece["steps"])
            lines.append(f"  split {i}, chain over K {piece['first']} to {piece['end']}: {len(piece['steps'])} steps, "
                         f"{cut} terms cut by the window, result {_fp32(piece['chain'])!r}")
        lines.append(f"  after split {i}: {_fp32(split['total'])!r}")
    lines.append(f"  sum {_fp32(e['sum'])!r}, then the epilogue and one rounding: 0x{e['out']:X}")
    return "\n".join(lines)


def _element_trace(model, inputs, keywords, index, shape):
    """The trace of one element of a bitexact operation (elementwise, mma, wgmma, matmul), or why there is none."""
    if model is bitexact.mma or model is bitexact.wgmma:
        return _mma_steps(model, inputs, keywords, index, shape)
    if model is bitexact.matmul or model is bitexact.scaled_matmul:
        return _matmul_account(model, inputs, keywords, index, shape)
    op = getattr(model, "traced_op", None)
    if op is None:
        return f"(none: {getattr(model, '__name__', model)!r} is not one of bitexact's elementwise operations)"
    # The operands' formats as the model took them: format= or, left out, their dtypes.
    formats = bitexact._operand_formats(keywords.get("format"), len(inputs), op, inputs)
    operands = []
    for x, f in zip(inputs, formats):
        bits = np.broadcast_to(bitexact.as_bits(x, f), shape)
        operands.append(bitexact.Value(int(bits.reshape(-1)[index]), f))
    trace_keywords = {key: keywords[key] for key in _TRACE_KEYWORDS if key in keywords}
    if keywords.get("random_bits") is not None:
        trace_keywords["random_bits"] = int(np.broadcast_to(keywords["random_bits"], shape).reshape(-1)[index])
    return bitexact.trace(op, *operands, to=keywords.get("result_format"), **trace_keywords).text


def assert_matches_model(actual, model, *inputs, actual_format=None, any_nan=False, **model_keywords):
    """Assert that actual holds, bit for bit, what model(*inputs, **model_keywords) computes.

    model: a bitexact operation (add, mul, fma, convert, mma, ...) or any function returning
    bit patterns (or (bits, flags)). The format of actual is actual_format, else the model's
    result_format or format keyword, else a tensor's dtype. On failure the message names the
    count of mismatching elements, the first index, both values side by side, and, for
    bitexact's elementwise operations, mma and wgmma, the model's trace of that element.
    Returns the number of elements compared.
    """
    __tracebackhide__ = True  # pytest shows the caller's line and the message, not this function
    expected = model(*inputs, **model_keywords)
    if isinstance(expected, tuple):
        expected = expected[0]
    format = actual_format or model_keywords.get("result_format")
    if format is None and isinstance(model_keywords.get("format"), str):
        format = model_keywords["format"]
    if format is None and "acc_format" in model_keywords:
        format = model_keywords["acc_format"]
    if format is None and getattr(model, "__name__", "") in ("mma", "wgmma"):
        format = "fp32"
    if format is None and model is bitexact.matmul:
        format = model_keywords.get("out_format") or model_keywords.get("format", "bf16")
    if format is None and model is bitexact.scaled_matmul:
        format = model_keywords.get("out_format", "bf16")
    op = getattr(model, "traced_op", None)
    carried = [bitexact._carried_format(x) for x in inputs]
    if format is None and bitexact._carried_format(actual) is None and op is not None and \
            op not in bitexact._PREDICATES and inputs and all(carried):
        # The operands carry their formats (tensors, ml_dtypes arrays): the result's is the model's rule's.
        format = bitexact._result_format(carried, None, op)
    format = _format_of(actual, format)
    compared, indices, got, want = mismatch_report(actual, expected, format, any_nan)
    if len(indices):
        shape = np.shape(expected)
        explanation = _element_trace(model, inputs, model_keywords, int(indices[0]), shape)
        raise AssertionError(_message(compared, indices, got, want, format, shape, "the model", "model", explanation))
    return compared
