"""Arrays whose dtype is their format: NumPy's float16 and float32, and ml_dtypes'
bfloat16 and float8 arrays (what JAX holds; skipped where ml_dtypes is not
installed): read as bit patterns without a copy, their format taken from the dtype,
and ml_dtypes' own bf16 arithmetic against the model's."""

import numpy as np
import pytest

import bitexact


def test_float16_arrays_are_fp16_bit_patterns_without_a_copy(compared):
    x = np.array([1.0, -2.5, 65504.0, np.inf], dtype=np.float16)
    bits = bitexact.as_bits(x, "fp16")
    assert bits.dtype == np.uint16 and np.shares_memory(bits, x)
    out, _ = bitexact.add(x, x)  # the format comes from the dtype
    with np.errstate(over="ignore"):  # 65504 + 65504 overflows to inf, as it should
        np.testing.assert_array_equal(out, (x + x).view(np.uint16))  # one rounding: NumPy's float16 add is IEEE
    with pytest.raises(TypeError, match=r"a: expected an array of bf16 bit patterns, dtype uint16 \(or bfloat16\), "
                                        r"got float16"):
        bitexact.add(x, x, format="bf16")
    with pytest.raises(ValueError, match="name the operands' format.*only arrays whose dtype is a format"):
        bitexact.add(x.view(np.uint16), x)  # one raw operand: the format is not known
    compared(2 * x.size)


@pytest.fixture
def ml_dtypes():
    return pytest.importorskip("ml_dtypes")


@pytest.mark.parametrize("dtype, format", [("bfloat16", "bf16"), ("float8_e5m2", "e5m2"), ("float8_e4m3fn", "e4m3")])
def test_ml_dtypes_arrays_are_read_as_their_bits(ml_dtypes, dtype, format, compared):
    x = np.array([0.5, -1.75, 3.0, 0.0], dtype=getattr(ml_dtypes, dtype))
    bits = bitexact.as_bits(x, format)
    assert bits.dtype == bitexact.storage_dtype(format) and np.shares_memory(bits, x)
    np.testing.assert_array_equal(bitexact.to_float32(x, format), x.astype(np.float32))
    compared(x.size)


def test_ml_dtypes_bfloat16_add_and_mul_round_as_the_model(ml_dtypes, compared):
    # ml_dtypes computes in float32 and rounds to bf16 once more: for bf16's 8 bits
    # that double rounding is harmless (24 >= 2 * 8 + 2), so it is bf16's correctly
    # rounded sum and product.
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(100_000) * 8).astype(ml_dtypes.bfloat16)
    b = (rng.standard_normal(100_000) * 8).astype(ml_dtypes.bfloat16)
    total, _ = bitexact.add(a, b)
    product, _ = bitexact.mul(a, b)
    np.testing.assert_array_equal(total, (a + b).view(np.uint16))
    np.testing.assert_array_equal(product, (a * b).view(np.uint16))
    with pytest.raises(TypeError, match=r"expected an array of fp16 bit patterns, dtype uint16 \(or float16\), "
                                        r"got bfloat16"):
        bitexact.add(a, b, format="fp16")
    compared(2 * a.size)
