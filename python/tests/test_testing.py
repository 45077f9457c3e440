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
    with pytest.raises(ValueError, match="name the format"):
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
    assert "1 of 2 elements differ from the model" in output and "1 of 1 elements differ" in output, output
    assert "testing.py" not in output, output
