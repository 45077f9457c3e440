"""bitexact.testing: the assertions pass on identical bits and, on a mismatch, say what
testing/check.hpp says in C++ (count, first index, both values decoded, the model's trace)."""

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import bitexact
from bitexact.testing import assert_bitexact, assert_matches_model


def operands(count=1000, seed=0):
    rng = np.random.default_rng(seed)
    return [bitexact.from_float32(rng.standard_normal(count).astype(np.float32), "bf16") for _ in range(2)]


def test_identical_bits_pass_and_count_the_elements():
    a, b = operands()
    out, _ = bitexact.add(a, b, format="bf16")
    assert assert_bitexact(out, out.copy(), format="bf16") == 1000
    assert assert_matches_model(out, bitexact.add, a, b, format="bf16") == 1000


def test_a_mismatch_names_count_index_both_values_and_the_models_trace():
    a, b = operands()
    out, _ = bitexact.add(a, b, format="bf16")
    wrong = out.copy()
    wrong[[17, 400]] ^= 1  # one ulp off, twice
    with pytest.raises(AssertionError) as failure:
        assert_matches_model(wrong, bitexact.add, a, b, format="bf16")
    message = str(failure.value)
    assert message.startswith("2 of 1000 elements differ from the model; first at index 17\nindices: 17 400\n"
                              "mismatches: 2 elements, all 1 ulp ")
    assert f"0x{int(wrong[17]):04X}" in message and f"0x{int(out[17]):04X}" in message
    assert "<- differs" in message and "ulp (got" in message
    expected_trace = bitexact.trace("add", bitexact.Value(int(a[17]), "bf16"), bitexact.Value(int(b[17]), "bf16")).text
    assert message.endswith("model trace of element 17:\n" + expected_trace)


def _holders():
    """How a test may hold bf16 operands and results: bit patterns, ml_dtypes' bfloat16, PyTorch tensors."""
    def plain(bits):
        return bits

    def ml_dtypes_array(bits):
        return bits.view(pytest.importorskip("ml_dtypes").bfloat16)

    def tensor(bits):
        pytest.importorskip("torch")
        return bitexact.to_torch(bits, "bf16")

    return {"bit patterns": plain, "ml_dtypes": ml_dtypes_array, "torch": tensor}


@pytest.mark.parametrize("holder", ["bit patterns", "ml_dtypes", "torch"])
@pytest.mark.parametrize("actual_is_bits", [False, True], ids=["actual held alike", "actual as bits, actual_format"])
def test_a_mismatch_of_operands_that_carry_their_format_is_explained(holder, actual_is_bits):
    hold = _holders()[holder]
    a, b = operands(64, 2)
    out, _ = bitexact.add(a, b, format="bf16")
    wrong = out.copy()
    wrong[17] ^= 1
    x, y = hold(a), hold(b)
    # Only bare bit patterns need format=; the others carry bf16 in their dtype.
    model_keywords = {"format": "bf16"} if holder == "bit patterns" else {}
    actual = wrong if actual_is_bits else hold(wrong)
    actual_keywords = {"actual_format": "bf16"} if actual_is_bits else {}
    with pytest.raises(AssertionError) as failure:
        assert_matches_model(actual, bitexact.add, x, y, **actual_keywords, **model_keywords)
    message = str(failure.value)
    assert message.startswith("1 of 64 elements differ from the model; first at index 17\n"), message
    expected_trace = bitexact.trace("add", bitexact.Value(int(a[17]), "bf16"), bitexact.Value(int(b[17]), "bf16")).text
    assert message.endswith("model trace of element 17:\n" + expected_trace)
    assert assert_matches_model(hold(out), bitexact.add, x, y, **model_keywords) == 64


def test_ml_dtypes_arrays_carry_their_format():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a, b = operands(8, 3)
    assert assert_bitexact(a.view(ml_dtypes.bfloat16), a.copy().view(ml_dtypes.bfloat16)) == 8
    with pytest.raises(AssertionError, match=r"elements differ from the expected bits"):
        assert_bitexact(a.view(ml_dtypes.bfloat16), b.view(ml_dtypes.bfloat16))


def test_float32_arrays_carry_their_format():
    x = np.float32([1.0, 2.5, -3.0])
    assert assert_bitexact(x, x.copy()) == 3
    out, _ = bitexact.mul(x, x)
    with pytest.raises(AssertionError, match=r"^1 of 3 elements differ from the model; first at index 1\n"):
        assert_matches_model(np.float32([1.0, 6.0, 9.0]), bitexact.mul, x, x)
    assert assert_matches_model(out.view(np.float32), bitexact.mul, x, x) == 3


def test_the_trace_follows_the_models_keywords():
    a, b = operands(64, 1)
    widened = bitexact.convert(a, format="bf16", result_format="fp32")[0]
    out, _ = bitexact.mul(widened, b, format=("fp32", "bf16"), result_format="fp32", rounding="upward")
    wrong = out.copy()
    wrong[3] ^= 1
    with pytest.raises(AssertionError, match=r"(?s)first at index 3\b.*round toward \+infinity.*result\n"):
        assert_matches_model(wrong, bitexact.mul, widened, b, format=("fp32", "bf16"), result_format="fp32",
                             rounding="upward")


def test_multidimensional_indices_and_any_nan():
    a = np.full((4, 5), 0x7FC0, np.uint16)
    b = a.copy()
    b[2, 3] = 0x7FC1  # another NaN payload
    with pytest.raises(AssertionError, match=r"1 of 20 elements differ from the expected bits; first at index 13 \(2, 3\)"):
        assert_bitexact(a, b, format="bf16")
    assert assert_bitexact(a, b, format="bf16", any_nan=True) == 20


def test_an_mma_mismatch_shows_the_outputs_fused_steps():
    rng = np.random.default_rng(4)
    a = bitexact.from_float32(rng.standard_normal((16, 32)).astype(np.float32), "bf16")
    b = bitexact.from_float32(rng.standard_normal((32, 8)).astype(np.float32), "bf16")
    d = bitexact.mma(a, b)
    d[2, 3] ^= 1
    with pytest.raises(AssertionError) as failure:
        assert_matches_model(d, bitexact.mma, a, b)
    message = str(failure.value)
    assert message.startswith("1 of 128 elements differ from the model; first at index 19 (2, 3)")
    steps = bitexact.mma_trace(a, b, row=2, col=3)
    assert len(steps) == 2  # 32 products: two steps of 16 on sm_90
    assert f"step 2 of 2 (D[2][3]):\n{steps[1].text}" in message
    assert steps[1].record["result"]["bits"] == f"0x{int(d[2, 3]) ^ 1:08X}"


def test_a_model_without_a_trace_says_so():
    x = np.uint32([0x3F800000, 0x40000000])
    out = bitexact.ex2_approx(x)
    out[1] ^= 1
    with pytest.raises(AssertionError, match="model trace of element 1:\n\\(none: 'ex2_approx' is not one of bitexact's"):
        assert_matches_model(out, bitexact.ex2_approx, x, actual_format="fp32")


def test_wrong_inputs_say_what_was_expected():
    a, b = operands(8)
    with pytest.raises(ValueError, match=r"^name the format of actual with format= \(its dtype uint16 does not say "
                                         r"which: a uint16 array could hold bf16 or fp16\)"):
        assert_bitexact(a, b)
    with pytest.raises(AssertionError, match=r"shapes differ: actual \(8,\), expected \(4,\)"):
        assert_bitexact(a, b[:4], format="bf16")
    with pytest.raises(TypeError, match="dtype uint16"):
        assert_bitexact(a.astype(np.uint32), b, format="bf16")


def test_the_message_sums_up_every_mismatch_by_distance_and_direction():
    a, b = operands()
    out, _ = bitexact.add(a, b, format="bf16")
    # A kernel that truncates: every result's magnitude one ulp short (the bits one less), where rounding moved it.
    truncated = bitexact.add(a, b, format="bf16", rounding="toward_zero")[0]
    differ = int((truncated != out).sum())
    with pytest.raises(AssertionError) as failure:
        assert_matches_model(truncated, bitexact.add, a, b, format="bf16")
    assert f"mismatches: {differ} elements, all 1 ulp toward zero" in str(failure.value)
    mixed = out.copy()
    mixed[3] += 1       # away from zero (magnitude up)
    mixed[5] -= 4       # 4 ulps toward zero
    with pytest.raises(AssertionError) as failure:
        assert_bitexact(mixed, out, format="bf16")
    assert "mismatches: by distance 1 ulp: 1 (0 toward zero, 1 away), 3-4 ulps: 1 (1 toward zero, 0 away)" in \
        str(failure.value)


def test_pytest_shows_the_callers_line_and_no_frame_of_the_helpers(tmp_path):
    # __tracebackhide__ in bitexact/testing.py: a failure's traceback ends at the test's own line.
    (tmp_path / "test_kernel.py").write_text(textwrap.dedent("""
        import numpy as np
        import bitexact
        from bitexact.testing import assert_bitexact, assert_matches_model

        def test_model():
            a = np.uint16([0x3F80, 0x4000])
            out, _ = bitexact.add(a, a, format="bf16")
            out[1] ^= 1
            assert_matches_model(out, bitexact.add, a, a, format="bf16")

        def test_bits():
            assert_bitexact(np.uint16([0x3F80]), np.uint16([0x3F81]), format="bf16")
    """))
    package_parent = str(pathlib.Path(bitexact.__file__).resolve().parents[1])
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_parent,
                                                                            os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                          "test_kernel.py"], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)
    output = run.stdout + run.stderr
    assert run.returncode == 1 and "2 failed" in output, output
    assert "assert_matches_model(out, bitexact.add, a, a, format=\"bf16\")" in output, output
    assert "1 of 2 elements differ from the model" in output and "the one element differs" in output, output
    assert "testing.py" not in output, output


def test_assert_bitexact_names_its_column_expected_and_counts_in_the_singular():
    with pytest.raises(AssertionError) as failure:
        assert_bitexact(np.uint16([0x3F80]), np.uint16([0x3F81]), format="bf16")
    message = str(failure.value)
    assert message.startswith("the one element differs from the expected bits; first at index 0\n"), message
    assert "mismatches: 1 element, all 1 ulp toward zero" in message
    assert "got" in message.splitlines()[3] and message.splitlines()[3].rstrip().endswith("expected"), message
    assert "(got below the expected value)" in message and "model" not in message
