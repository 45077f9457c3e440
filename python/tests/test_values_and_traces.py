"""Bit patterns to and from float32 against NumPy's own conversions, values and their
repr, and traces against the `bitexact trace` command's renderings."""

import json
import re
import subprocess

import numpy as np
import pytest

import bitexact


def every_pattern(bits):
    return np.arange(1 << bits, dtype=np.uint32)


def test_every_bf16_fp16_and_e5m2_pattern_widens_to_float32_as_numpy_reads_it(compared):
    bf16 = every_pattern(16).astype(np.uint16)
    widened = bitexact.to_float32(bf16, "bf16")
    reference = (bf16.astype(np.uint32) << 16).view(np.float32)  # bf16 is fp32's upper half
    numbers = ~np.isnan(reference)
    np.testing.assert_array_equal(widened.view(np.uint32)[numbers], reference.view(np.uint32)[numbers])
    assert np.isnan(widened[~numbers]).all()

    fp16 = every_pattern(16).astype(np.uint16)
    widened = bitexact.to_float32(fp16, "fp16")
    reference = fp16.view(np.float16).astype(np.float32)
    numbers = ~np.isnan(reference)
    np.testing.assert_array_equal(widened.view(np.uint32)[numbers], reference.view(np.uint32)[numbers])
    assert np.isnan(widened[~numbers]).all()

    e5m2 = every_pattern(8).astype(np.uint8)  # fp16's upper byte
    widened = bitexact.to_float32(e5m2, "e5m2")
    reference = (e5m2.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    numbers = ~np.isnan(reference)
    np.testing.assert_array_equal(widened.view(np.uint32)[numbers], reference.view(np.uint32)[numbers])
    compared(2 * 65536 + 256)


def float32_sample(count, seed):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    # Every exponent with a few fraction patterns, so that every binade, overflow and the subnormals appear.
    exponents = np.repeat(np.arange(256, dtype=np.uint32), 8) << 23
    fractions = np.tile(np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0x17FFF, 0x400000, 0x7FFFFF], np.uint32), 256)
    edges = exponents | fractions
    return np.concatenate([bits, edges, edges | 0x80000000]).view(np.float32)


def test_float32_to_bf16_and_fp16_round_to_nearest_even_as_numpy_does(compared):
    x = float32_sample(1_000_000, 1)
    x = x[~np.isnan(x)]
    bits = x.view(np.uint32)
    bf16 = bitexact.from_float32(x, "bf16")
    # Round to nearest even on the upper half: add 0x7FFF plus the last kept bit, keep the upper half.
    reference = ((bits.astype(np.uint64) + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(bf16, reference)
    with np.errstate(over="ignore"):
        fp16 = bitexact.from_float32(x, "fp16")
        np.testing.assert_array_equal(fp16, x.astype(np.float16).view(np.uint16))
    compared(2 * x.size)


def test_values_show_format_bits_and_decimal():
    assert repr(bitexact.Value(0xC097, "bf16")) == "bf16:0xC097 (-4.71875)"
    assert repr(bitexact.value("-2.40625", "bf16")) == "bf16:0xC01A (-2.40625)"
    assert repr(bitexact.value(-2.296875, "bf16")) == "bf16:0xC013 (-2.296875)"
    assert repr(bitexact.value("tf32:0x1FC00")) == "tf32:0x1FC00 (1)"
    assert repr(bitexact.value(0x7E, "e4m3")) == "e4m3:0x7E (448)"
    assert float(bitexact.Value(0xC097, "bf16")) == -4.71875
    assert bitexact.Value(1, "fp16") == bitexact.value(1, "fp16")
    with pytest.raises(ValueError, match="not exactly representable in bf16; the nearest is bf16:0x3DCD"):
        bitexact.value(0.1, "bf16")
    with pytest.raises(ValueError, match="needs its format"):
        bitexact.value(0x3F80)
    with pytest.raises(ValueError, match=r"lies in \[0, 2\^16\)"):
        bitexact.Value(1 << 16, "bf16")
    assert bitexact.describe(np.array([0xC097, 0x7FC0], np.uint16), "bf16") == "bf16:0xC097 (-4.71875)\nbf16:0x7FC0 (nan)"


TRACED = [
    ("add", ["fp32:0xC01A0E2E", "fp32:0xC0130000"], ["--to", "bf16"], dict(to="bf16")),
    ("add", ["bf16:-2.40625", "bf16:-2.296875"], [], {}),
    ("add", ["fp32:0x3F801001", "bf16:0x3A80"], ["--to", "fp16"], dict(to="fp16")),  # a mix into a third format
    ("fma", ["bf16:0x3F81", "bf16:0x3F81", "fp32:0xBF810000"], ["--to", "fp32"], dict(to="fp32")),
    ("div", ["fp16:0x3C00", "fp16:0x4200"], ["--round", "upward"], dict(rounding="upward")),
    ("sqrt", ["fp32:0x40000000"], ["--round", "to_odd"], dict(rounding="to_odd")),
    ("convert", ["fp32:0x00FFFFFF"], ["--to", "e4m3"], dict(to="e4m3")),
    ("mul", ["fp32:0x00800001", "fp32:0x3F7FFFFF"], ["--ftz", "--tininess", "before"],
     dict(ftz=True, tininess="before_rounding")),
    ("convert", ["fp32:0x3F8C0000"], ["--to", "bf16", "--round", "stochastic", "--random-bits", "0x80000000"],
     dict(to="bf16", rounding="stochastic", random_bits=0x80000000)),
]


@pytest.mark.parametrize("op, operands, options, keywords", TRACED)
def test_traces_render_as_the_cli_renders_them(cli, op, operands, options, keywords):
    for style, option in (("text", "text"), ("markdown", "md"), ("latex", "latex"), ("json", "json")):
        command = subprocess.run([cli, "trace", op, *operands, *options, "--output", option], capture_output=True,
                                 text=True, check=True)
        record = bitexact.trace(op, *operands, **keywords)
        assert getattr(record, style).rstrip("\n") == command.stdout.rstrip("\n"), style
        if style == "json":
            assert record.record == json.loads(command.stdout)


def test_the_docstrings_list_the_names_of_the_librarys_tables():
    tables = bitexact._bitexact._spellings()
    assert [len(tables[t]) for t in ("rounding", "tininess", "nans", "format")] == [7, 2, 2, 6]
    doc = bitexact.add.__doc__
    rounding_line = next(line.strip() for line in doc.splitlines() if line.strip().startswith("rounding:"))
    assert rounding_line == "rounding: " + ", ".join(names[0] for names in tables["rounding"])
    listed = 0
    for table in ("tininess", "nans"):
        for names in tables[table]:
            for name in names:
                assert re.search(rf"\b{name}\b", doc), f"{table}: {name} is missing from the docstring"
                listed += 1
    assert listed == 8
    for names in tables["rounding"]:  # and each spelling reads as its mode, as the command reads --round
        assert {bitexact._bitexact._rounding_name(name) for name in names} == {names[0]}


def test_the_papers_addition_traced_from_bit_patterns():
    record = bitexact.trace("add", 0xC01A0E2E, 0xC0130000, format="fp32", to="bf16")
    assert record.record["result"] == {"format": "bf16", "bits": "0xC097", "value": "-4.71875"}
    assert [flag["flag"] for flag in record.record["flags"]["raised"]] == ["inexact"]
    assert "guard 1 | round 0 | sticky bits 00011100010111 -> sticky 1" in record.text
    with pytest.raises(ValueError, match="name the result format with to="):
        bitexact.trace("add", 0xC01A0E2E, 0x3F80, format=("fp32", "bf16"))
    with pytest.raises(ValueError, match="unknown operation 'cmp'"):
        bitexact.trace("cmp", 1, 2, format="bf16")


def test_big_endian_arrays_are_read_as_the_numbers_they_hold(compared):
    # Read as native bytes, two big-endian bf16 2s would sum to 0x807E.
    two = np.array([0x4000], dtype=np.uint16)
    out, _ = bitexact.add(two.astype(">u2"), two.astype(">u2"), format="bf16")
    assert out.tolist() == [0x4080]  # 2 + 2 = 4
    bf16 = every_pattern(16).astype(np.uint16)
    np.testing.assert_array_equal(bitexact.to_float32(bf16.astype(">u2"), "bf16").view(np.uint32),
                                  bitexact.to_float32(bf16, "bf16").view(np.uint32))
    fp32 = np.array([1.5, -0.1], dtype=np.float32)
    np.testing.assert_array_equal(bitexact.as_bits(fp32.astype(">f4"), "fp32"), fp32.view(np.uint32))
    # Outside as_bits too: from_float32's float32 check and random_bits' uint32 check see the numbers, not the order.
    np.testing.assert_array_equal(bitexact.from_float32(fp32.astype(">f4"), "bf16"), bitexact.from_float32(fp32, "bf16"))
    one, small = np.full(4, 0x3F80, dtype=np.uint16), np.full(4, 0x3B81, dtype=np.uint16)  # 1 + 2^-8 (1 + 2^-7)
    draws = np.array([0x00000001, 0x01000000, 0x7FFF0000, 0xFFFF0000], dtype=np.uint32)
    native, _ = bitexact.add(one, small, format="bf16", rounding="stochastic", random_bits=draws)
    big, _ = bitexact.add(one, small, format="bf16", rounding="stochastic", random_bits=draws.astype(">u4"))
    np.testing.assert_array_equal(big, native)
    # Attention's operands as '>u2' bit patterns (lse as '>f4' numbers): the native arrays' results.
    rng = np.random.default_rng(5)
    q, k, v = (bitexact.from_float32(rng.standard_normal((8, 64)).astype(np.float32), "bf16") for _ in range(3))
    o, lse = bitexact.attention(q, k, v, causal=True)
    o_big, lse_big = bitexact.attention(q.astype(">u2"), k.astype(">u2"), v.astype(">u2"), causal=True)
    np.testing.assert_array_equal(o_big, o)
    np.testing.assert_array_equal(lse_big, lse)
    grads = bitexact.attention_backward(q, k, v, o, lse, v, causal=True)
    grads_big = bitexact.attention_backward(q, k, v, o.astype(">u2"), lse.view(np.float32).astype(">f4"),
                                            v.astype(">u2"), causal=True)
    for name in ("dq", "dk", "dv", "delta"):
        np.testing.assert_array_equal(grads_big[name], grads[name])
    compared(1 + bf16.size + 2 + 2 + 4 + o.size + lse.size + 3 * q.size + lse.size)


def test_wrong_keyword_values_get_one_clear_error():
    a = np.array([0x3F80, 0x4000], dtype=np.uint16)
    with pytest.raises(TypeError, match="add: ftz is True or False, not 'yes'"):
        bitexact.add(a, a, format="bf16", ftz="yes")
    with pytest.raises(ValueError, match=r"random_bits has shape \(3,\); it needs one draw per element of the result, "
                                         r"shape \(2,\)"):
        bitexact.add(a, a, format="bf16", rounding="stochastic", random_bits=np.zeros(3, dtype=np.uint32))
