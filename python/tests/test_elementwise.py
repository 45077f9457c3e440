"""The elementwise operations against the `bitexact eval` command (the C++ library
through its own command-line path): every format, operation and rounding mode, the
environment switches, conversions between every pair of formats, and comparisons."""

import numpy as np
import pytest

import bitexact
from conftest import run_eval

FORMATS = ["fp32", "bf16", "fp16", "tf32", "e5m2", "e4m3"]
TESTFLOAT_NAME = {"fp32": "f32", "bf16": "bf16", "fp16": "f16", "tf32": "tf32", "e5m2": "e5m2", "e4m3": "e4m3"}
MODES = ["nearest_even", "nearest_away", "toward_zero", "upward", "downward", "to_odd", "stochastic"]
OPERATIONS = {"add": ("add", 2), "sub": ("sub", 2), "mul": ("mul", 2), "fma": ("mulAdd", 3),
              "div": ("div", 2), "sqrt": ("sqrt", 1)}
CASES = 1500
RANDOM_BITS = 0x9E3779B9


def width(format):
    return bitexact.format_info(format)[1]


def operands(format, arity, seed):
    """Random bit patterns of format (every class: NaN, inf, subnormal, zero), plus the
    edges of each class, as many as CASES."""
    rng = np.random.default_rng(seed)
    bits = width(format)
    top = np.uint64((1 << bits) - 1)
    edges = np.array([0, 1, 2, (1 << (bits - 1)) - 1, 1 << (bits - 1), (1 << (bits - 1)) + 1, (1 << bits) - 1],
                     np.uint64)
    columns = []
    for _ in range(arity):
        column = rng.integers(0, 1 << bits, CASES, dtype=np.uint64)
        column[:len(edges)] = rng.permutation(edges)
        columns.append(column & top)
    return columns


def evaluated(cli, op, format, mode, columns, extra=()):
    name, _ = OPERATIONS[op]
    options = ["--round", mode, *extra]
    if mode == "stochastic":
        options += ["--random-bits", str(RANDOM_BITS)]
    digits = (width(format) + 3) // 4
    return run_eval(cli, f"{TESTFLOAT_NAME[format]}_{name}", columns, [digits] * len(columns), digits, options)


def python_result(op, format, mode, columns, element_flags, **environment):
    arrays = [c.astype(bitexact.storage_dtype(format)) for c in columns]
    if mode == "stochastic":
        environment["random_bits"] = np.full(CASES, RANDOM_BITS, np.uint32)
    return getattr(bitexact, op)(*arrays, format=format, rounding=mode, element_flags=element_flags, **environment)


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("op", list(OPERATIONS))
def test_every_operation_and_rounding_mode_matches_the_cli(cli, format, op, compared):
    total = 0
    for seed, mode in enumerate(MODES):
        columns = operands(format, OPERATIONS[op][1], seed)
        results, flags = evaluated(cli, op, format, mode, columns)
        out, raised, each = python_result(op, format, mode, columns, element_flags=True)
        assert out.dtype == bitexact.storage_dtype(format)
        np.testing.assert_array_equal(out, results.astype(out.dtype), err_msg=f"{op} {format} {mode}")
        np.testing.assert_array_equal(each, flags.astype(np.uint8), err_msg=f"{op} {format} {mode} flags")
        assert raised == np.bitwise_or.reduce(each)
        # Without per-element flags add, sub and mul go through the buffer path (add_each and its SSE2 lanes).
        fast, fast_raised = python_result(op, format, mode, columns, element_flags=False)
        np.testing.assert_array_equal(fast, out)
        assert fast_raised == raised
        total += out.size
    assert compared(total) == len(MODES) * CASES  # 10,500 elements per format and operation


ENVIRONMENTS = [
    (dict(ftz=True), ["--ftz"]),
    (dict(daz=True), ["--daz"]),
    (dict(ftz=True, daz=True, nans="canonical"), ["--ftz", "--daz", "--nan", "canonical"]),
    (dict(tininess="before_rounding"), ["--tininess", "before"]),
]


@pytest.mark.parametrize("format", ["fp32", "bf16", "fp16", "e4m3"])
@pytest.mark.parametrize("op", ["add", "mul", "fma", "div"])
def test_ftz_daz_tininess_and_nan_policy_match_the_cli(cli, format, op, compared):
    total = 0
    for seed, (environment, options) in enumerate(ENVIRONMENTS):
        for mode in ("nearest_even", "toward_zero"):
            # Small operands, so that subnormal results and tininess decide many cases.
            columns = operands(format, OPERATIONS[op][1], 100 + seed)
            columns[0] &= np.uint64((1 << (width(format) - 1)) - 1 - (1 << (width(format) - 3)))
            results, flags = evaluated(cli, op, format, mode, columns, options)
            out, raised, each = python_result(op, format, mode, columns, element_flags=True, **environment)
            np.testing.assert_array_equal(out, results.astype(out.dtype), err_msg=f"{op} {format} {environment}")
            np.testing.assert_array_equal(each, flags.astype(np.uint8))
            total += out.size
    assert compared(total) == len(ENVIRONMENTS) * 2 * CASES


def test_conversions_between_every_pair_of_formats_match_the_cli(cli, compared):
    total = 0
    for source in FORMATS:
        for target in FORMATS:
            if source == target:
                continue
            for seed, mode in enumerate(("nearest_even", "toward_zero", "to_odd", "stochastic")):
                (column,) = operands(source, 1, seed)
                options = ["--round", mode] + (["--random-bits", str(RANDOM_BITS)] if mode == "stochastic" else [])
                results, flags = run_eval(cli, f"{TESTFLOAT_NAME[source]}_to_{TESTFLOAT_NAME[target]}", [column],
                                          [(width(source) + 3) // 4], (width(target) + 3) // 4, options)
                keywords = dict(random_bits=np.uint32(RANDOM_BITS)) if mode == "stochastic" else {}
                out, raised, each = bitexact.convert(column.astype(bitexact.storage_dtype(source)), format=source,
                                                     result_format=target, rounding=mode, element_flags=True,
                                                     **keywords)
                np.testing.assert_array_equal(out, results.astype(out.dtype), err_msg=f"{source} -> {target} {mode}")
                np.testing.assert_array_equal(each, flags.astype(np.uint8))
                total += out.size
    assert compared(total) == 30 * 4 * CASES  # 180,000 conversions


@pytest.mark.parametrize("format", FORMATS)
def test_comparisons_match_the_cli(cli, format, compared):
    a, b = operands(format, 2, 7)
    b[::3] = a[::3]  # equal pairs too
    digits = (width(format) + 3) // 4
    total = 0
    for predicate, name in (("equal", "eq"), ("less", "lt"), ("less_equal", "le")):
        default_signaling = predicate != "equal"  # equal is quiet, less and less_equal signal on any NaN
        for signaling in (default_signaling, not default_signaling):
            function = f"{TESTFLOAT_NAME[format]}_{name}"
            if signaling != default_signaling:
                function += "_signaling" if signaling else "_quiet"
            results, flags = run_eval(cli, function, [a, b], [digits, digits], 1)
            holds, raised, each = getattr(bitexact, predicate)(
                a.astype(bitexact.storage_dtype(format)), b.astype(bitexact.storage_dtype(format)), format=format,
                signaling=signaling, element_flags=True)
            np.testing.assert_array_equal(holds, results.astype(bool), err_msg=function)
            np.testing.assert_array_equal(each, flags.astype(np.uint8), err_msg=function)
            total += holds.size
    assert compared(total) == 6 * CASES


def test_mixed_fp32_and_narrow_operands_equal_the_widened_operation(compared):
    """fp32 accumulator + bf16 value rounds once: the same bits as widening the bf16
    operand first (exact) and adding in fp32 (NaN operands left out: widening quiets them)."""
    rng = np.random.default_rng(11)
    accumulator = rng.integers(0, 1 << 32, 50_000, dtype=np.uint64).astype(np.uint32)
    narrow = rng.integers(0, 1 << 16, 50_000, dtype=np.uint64).astype(np.uint16)
    finite = (bitexact.to_float32(narrow, "bf16") == bitexact.to_float32(narrow, "bf16"))
    finite &= ~np.isnan(accumulator.view(np.float32))
    accumulator, narrow = accumulator[finite], narrow[finite]
    widened = bitexact.convert(narrow, format="bf16", result_format="fp32")[0]
    total = 0
    for op in ("add", "sub", "mul", "div"):
        for mode in ("nearest_even", "upward", "to_odd"):
            mixed, mixed_flags = getattr(bitexact, op)(accumulator, narrow, format=("fp32", "bf16"),
                                                      result_format="fp32", rounding=mode)
            wide, wide_flags = getattr(bitexact, op)(accumulator, widened, format="fp32", rounding=mode)
            np.testing.assert_array_equal(mixed, wide, err_msg=f"{op} {mode}")
            assert mixed_flags == wide_flags
            total += mixed.size
    assert compared(total) > 12 * 49_000


def test_stochastic_rounding_reads_each_elements_own_random_bits(compared):
    """With a draw per element, element i rounds as the single traced operation does with
    that draw, and the result is one of the two neighbours toward zero and away from it."""
    rng = np.random.default_rng(5)
    count = 2000
    a = rng.integers(0x3F000000, 0x40800000, count, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0x3F000000, 0x40800000, count, dtype=np.uint64).astype(np.uint32)
    draws = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    out, _ = bitexact.add(a, b, format="fp32", result_format="bf16", rounding="stochastic", random_bits=draws)
    down, _ = bitexact.add(a, b, format="fp32", result_format="bf16", rounding="toward_zero")
    assert np.isin(out.astype(np.int64) - down, [0, 1]).all()
    rounded_up = int((out != down).sum())
    assert 0.3 * count < rounded_up < 0.7 * count  # fresh draws: both ways, about as often as the residues say
    for i in range(0, count, 200):  # the scalar traced path agrees on sampled elements
        record = bitexact.trace("add", int(a[i]), int(b[i]), format="fp32", to="bf16", rounding="stochastic",
                                random_bits=int(draws[i])).record
        assert int(record["result"]["bits"], 16) == out[i]
    compared(count // 200)


def test_broadcasting_and_shapes():
    a = np.arange(12, dtype=np.uint16).reshape(3, 4) + 0x3F80
    one = np.uint16(0x3F80)
    out, raised = bitexact.add(a, one, format="bf16")
    assert out.shape == (3, 4)
    expected, _ = bitexact.add(a, np.full((3, 4), 0x3F80, np.uint16), format="bf16")
    np.testing.assert_array_equal(out, expected)
    transposed, _ = bitexact.add(a.T, a.T, format="bf16")  # not contiguous: compacted, same values
    np.testing.assert_array_equal(transposed, bitexact.add(a, a, format="bf16")[0].T)


def test_bad_inputs_raise_what_was_expected():
    a = np.zeros(4, np.uint16)
    with pytest.raises(TypeError, match="dtype uint16"):
        bitexact.add(a.astype(np.uint32), a, format="bf16")
    with pytest.raises(TypeError, match="dtype uint32"):
        bitexact.add(np.zeros(4, np.float64), np.zeros(4, np.float64), format="fp32")
    with pytest.raises(ValueError, match="name the operands' format"):
        bitexact.add(a, a)
    with pytest.raises(ValueError, match="unknown format 'bf17'"):
        bitexact.add(a, a, format="bf17")
    with pytest.raises(ValueError, match=r"unknown rounding 'nearest_odd'; expected one of nearest_even \(or rne, "
                                         r"near_even, nearest\),.* to_odd \(or odd, rod\), stochastic \(or sr\)"):
        bitexact.add(a, a, format="bf16", rounding="nearest_odd")
    assert bitexact.add(a, a, format="bf16", rounding="rtz")[0].tolist() == \
        bitexact.add(a, a, format="bf16", rounding="toward_zero")[0].tolist()  # an alias the message lists
    # Tininess and NaN policy take the command's spellings too (one table in core/names.hpp).
    with pytest.raises(ValueError, match=r"unknown tininess 'early'; expected one of after_rounding \(or after\), "
                                         r"before_rounding \(or before\)"):
        bitexact.add(a, a, format="bf16", tininess="early")
    with pytest.raises(ValueError, match=r"unknown NaN policy 'quiet'; expected one of ieee_propagate \(or ieee\), "
                                         r"canonical \(or cuda\)"):
        bitexact.add(a, a, format="bf16", nans="quiet")
    # 0x3F7E x 0x0081 is just below the least normal before rounding and reaches it after:
    # underflow is raised when tininess is detected before rounding, not after.
    a_, b_ = np.array([0x3F7E], np.uint16), np.array([0x0081], np.uint16)
    for spellings, underflow in ((("before", "before_rounding"), True), (("after", "after_rounding"), False)):
        for spelling in spellings:
            result, raised = bitexact.mul(a_, b_, format="bf16", tininess=spelling)
            assert result.tolist() == [0x0080] and bool(raised & bitexact.Flags.UNDERFLOW) == underflow, spelling
    with pytest.raises(ValueError, match="do not broadcast"):
        bitexact.add(a, np.zeros(3, np.uint16), format="bf16")
    with pytest.raises(ValueError, match="needs random_bits"):
        bitexact.add(a, a, format="bf16", rounding="stochastic")
    with pytest.raises(ValueError, match="stochastic' only"):
        bitexact.add(a, a, format="bf16", random_bits=np.zeros(4, np.uint32))
    with pytest.raises(ValueError, match="cannot be mixed"):
        bitexact.add(a, a, format=("bf16", "fp16"), result_format="fp32")
    # A mix rounds into any format named, once, as the command's --to does (core/dispatch.hpp's one rule):
    # 1 + 2^-11 + 2^-23 is above fp16's tie, so it rounds up to 1 + 2^-10.
    mixed, _ = bitexact.add(np.array([0x3F801001], np.uint32), np.array([0], np.uint16), format=("fp32", "bf16"),
                            result_format="fp16")
    assert mixed.tolist() == [0x3C01]
    with pytest.raises(ValueError, match="name the result with result_format"):
        bitexact.add(np.zeros(4, np.uint32), a, format=("fp32", "bf16"))
    with pytest.raises(ValueError, match="19 bits"):
        bitexact.add(np.full(4, 1 << 20, np.uint32), np.zeros(4, np.uint32), format="tf32")
    with pytest.raises(ValueError, match="share a format"):
        bitexact.fma(a, np.zeros(4, np.uint32), a, format=("bf16", "fp32", "bf16"), result_format="bf16")


def test_signed_views_are_read_as_the_same_bits_without_a_copy():
    bits = np.array([0xC01A, 0x3F80], np.uint16)
    signed = bits.view(np.int16)
    assert bitexact.as_bits(signed, "bf16").base is signed or np.shares_memory(bitexact.as_bits(signed, "bf16"), signed)
    out, _ = bitexact.add(signed, signed, format="bf16")
    np.testing.assert_array_equal(out, bitexact.add(bits, bits, format="bf16")[0])


def test_an_option_of_the_wrong_type_is_refused_in_one_line_naming_it():
    # Checked before the extension, whose own refusal (pybind11's) prints its whole signature.
    a = np.uint16([0x3F80])
    with pytest.raises(TypeError, match=r"^add: rounding is a mode name \(str\), e.g. 'nearest_even', not None$"):
        bitexact.add(a, a, format="bf16", rounding=None)
    with pytest.raises(TypeError, match=r"^trace: nans is a NaN policy name \(str\), e.g. 'ieee_propagate', not 3$"):
        bitexact.trace("add", "1", "2", nans=3)


def test_formats_that_cannot_be_mixed_say_so_and_do_not_ask_for_a_result_format():
    a = np.uint16([0x3F80])
    message = (r"^add: operands of bf16 and fp16 cannot be mixed: a mix needs one of them in fp32 \(an fp32 "
               r"accumulator and a narrow value\); convert one operand first$")
    with pytest.raises(ValueError, match=message):
        bitexact.add(a, a, format=("bf16", "fp16"))
    with pytest.raises(ValueError, match=message):
        bitexact.add(a, a, format=("bf16", "fp16"), result_format="fp32")
    # A mix that can be computed still asks for its result's format.
    with pytest.raises(ValueError, match=r"^add: the operands are bf16 and fp32; name the result with result_format=$"):
        bitexact.add(a, np.uint32([0x3F800000]), format=("bf16", "fp32"))
