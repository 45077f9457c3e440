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


def test_ml_dtypes_float8_attention_takes_the_format_the_dtype_names(ml_dtypes, compared):
    """float8_e5m2 arrays through an e5m2 description of our FP8 kernel: attention_row's row is attention()'s,
    and plain bytes give the same bits (the kernel's inputs name their format); an e4m3 kernel refuses them
    (its bytes decoded as e4m3 would be another number)."""
    rng = np.random.default_rng(1)
    e5m2 = bitexact.kernel_description("bitexact_flash_fp8_sm90")
    e5m2["inputs"] = "e5m2"
    q, k, v = (rng.standard_normal((n, 64)).astype(ml_dtypes.float8_e5m2) for n in (40, 300, 300))
    scales = dict(scale_s=256.0, descale_s=1 / 256)
    o, lse = bitexact.attention(q, k, v, kernel=e5m2, **scales)
    for row in (0, 7, 39):
        traced = bitexact.attention_row(q, k, v, row, col=3, kernel=e5m2, **scales)
        np.testing.assert_array_equal(traced["o"], o[row])
        assert traced["lse"] == lse[row]
    as_bytes, _ = bitexact.attention(*(x.view(np.uint8) for x in (q, k, v)), kernel=e5m2, **scales)
    np.testing.assert_array_equal(as_bytes, o)
    as_e4m3, _ = bitexact.attention(*(x.view(np.uint8) for x in (q, k, v)), preset="bitexact_flash_fp8_sm90", **scales)
    assert (as_e4m3 != o).sum() > o.size // 2
    for call in (lambda: bitexact.attention(q, k, v, preset="bitexact_flash_fp8_sm90"),
                 lambda: bitexact.attention_row(q, k, v, 0, preset="bitexact_flash_fp8_sm90")):
        with pytest.raises(ValueError, match=r"q is float8_e5m2 \(e5m2\), but the kernel takes e4m3 Q, K and V"):
            call()
    compared(2 * o.size + 3 * (o.shape[1] + 1))
