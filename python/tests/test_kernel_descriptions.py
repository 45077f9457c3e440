"""Kernels as descriptions through the binding: the registry's presets and their
descriptions (bitexact.ATTENTION_PRESETS, list_kernels, kernel_description), a
description as kernel= (a dict or a .json file) computing the preset's bits, and
the one-line refusals of descriptions that are not understood."""

import json
import pathlib
import re
import subprocess

import numpy as np
import pytest

import bitexact

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
TRITON_EXAMPLE = REPOSITORY / "examples" / "triton" / "flash_forward.json"
# The registry's names when this test was written (it may hold more).
REGISTRY = ["pytorch_sdpa_flash_sm90", "pytorch_sdpa_flash_sm90_stabilized",
            "pytorch_sdpa_flash_sm90_stabilized_across_blocks", "flex_attention_sm90", "paper_reference",
            "paper_reference_stabilized", "paper_reference_fp64"]


def random_head(seed, rows, head_dim=64):
    rng = np.random.default_rng(seed)
    return [bitexact.from_float32(rng.standard_normal((rows, head_dim)).astype(np.float32), "bf16")
            for _ in range(3)]


def tie_head(seed, rows, head_dim=64):
    """Integer-valued q and k: scores tie often, with positive maxima (the stabilized rule acts)."""
    rng = np.random.default_rng(seed)
    q, k = (rng.integers(-1, 2, size=(rows, head_dim)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((rows, head_dim)).astype(np.float32)
    return [bitexact.from_float32(x, "bf16") for x in (q, k, v)]


def test_the_registry_comes_from_the_library():
    assert set(REGISTRY) <= set(bitexact.ATTENTION_PRESETS)
    assert len(set(bitexact.ATTENTION_PRESETS)) == len(bitexact.ATTENTION_PRESETS)
    assert bitexact.ATTENTION_PRESETS[0] == "pytorch_sdpa_flash_sm90"  # the default
    kernels = bitexact.list_kernels()
    assert [name for name, _ in kernels] == list(bitexact.ATTENTION_PRESETS)
    assert all(isinstance(summary, str) and summary for _, summary in kernels)
    description = bitexact.kernel_description("flex_attention_sm90")
    assert description["name"] == "flex_attention_sm90" and description["min_query_rows"] == 128
    assert description["block_order"] == "mask_partial_then_full"
    with pytest.raises(ValueError, match="not a GPU kernel"):
        bitexact.kernel_description("paper_reference")
    with pytest.raises(ValueError, match="unknown preset 'flash3'; the presets are: pytorch_sdpa_flash_sm90"):
        bitexact.kernel_description("flash3")


def test_the_registry_is_the_commands(cli):
    listed = subprocess.run([cli, "attention", "--list-kernels"], check=True, capture_output=True, text=True).stdout
    assert [line.split()[0] for line in listed.splitlines()] == list(bitexact.ATTENTION_PRESETS)
    for name in ("pytorch_sdpa_flash_sm90", "flex_attention_sm90"):
        printed = subprocess.run([cli, "attention", "--print-kernel", name], check=True, capture_output=True,
                                 text=True).stdout
        assert json.loads(printed) == bitexact.kernel_description(name)


@pytest.mark.parametrize("name", ["pytorch_sdpa_flash_sm90", "flex_attention_sm90"])
@pytest.mark.parametrize("causal", [False, True])
def test_a_description_computes_its_presets_bits(compared, name, causal):
    q, k, v = random_head(11, 130)
    o, lse = bitexact.attention(q, k, v, preset=name, causal=causal)
    # Through JSON text and back: the dict is what a user would edit or save.
    description = json.loads(json.dumps(bitexact.kernel_description(name)))
    model_o, model_lse = bitexact.attention(q, k, v, kernel=description, causal=causal)
    np.testing.assert_array_equal(model_o, o)
    np.testing.assert_array_equal(model_lse, lse)
    compared(o.size + lse.size)


def test_the_kernels_differ():
    """FlexAttention's arithmetic is not FA2's: the same head gives other bits somewhere."""
    q, k, v = random_head(12, 128)
    fa2 = bitexact.attention(q, k, v)
    flex = bitexact.attention(q, k, v, preset="flex_attention_sm90")
    assert any((a != b).any() for a, b in zip(fa2, flex))


def test_a_stabilized_description_keeps_its_own_rule(compared):
    q, k, v = tie_head(13, 128)
    description = bitexact.kernel_description("pytorch_sdpa_flash_sm90_stabilized")
    assert description["stabilize"] == {"beta": 2.0, "epsilon": pytest.approx(1e-3), "across_blocks": False}
    description["stabilize"]["beta"] = 4.0
    o, lse = bitexact.attention(q, k, v, kernel=description)
    expected_o, expected_lse = bitexact.attention(q, k, v, preset="pytorch_sdpa_flash_sm90_stabilized", beta=4.0)
    np.testing.assert_array_equal(o, expected_o)
    np.testing.assert_array_equal(lse, expected_lse)
    # The rule acts on this head: the preset's own beta 2 gives other bits.
    assert (bitexact.attention(q, k, v, preset="pytorch_sdpa_flash_sm90_stabilized")[1] != lse).any()
    compared(o.size + lse.size)


@pytest.mark.parametrize("as_path", [str, pathlib.Path])
def test_a_description_file_loads_and_computes(compared, as_path):
    q, k, v = random_head(14, 100)
    o, lse = bitexact.attention(q, k, v, kernel=as_path(TRITON_EXAMPLE), causal=True)
    same_o, same_lse = bitexact.attention(q, k, v, kernel=json.loads(TRITON_EXAMPLE.read_text()), causal=True)
    np.testing.assert_array_equal(o, same_o)
    np.testing.assert_array_equal(lse, same_lse)
    # Softmax attention to bf16 precision: against the float64 reference.
    reference_o, _ = bitexact.attention(q, k, v, preset="paper_reference_fp64", causal=True)
    np.testing.assert_allclose(bitexact.to_float32(o, "bf16"), reference_o, rtol=0, atol=2e-2)
    # Its L is in log2 units (lse_units "log2"): the natural-log reference times log2(e).
    _, natural_lse = bitexact.attention(q, k, v, causal=True)
    np.testing.assert_allclose(lse.view(np.float32), natural_lse.view(np.float32) / np.log(2), rtol=1e-5)
    compared(o.size + lse.size)


def edited(name, edit):
    description = bitexact.kernel_description(name)
    edit(description)
    return description


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(colour="blue"), "kernel description: field 'colour': unknown field"),
    (lambda d: d.update(split_kv=1), "kernel description: field 'split_kv': expected a string"),
    (lambda d: d["tiles"]["64"].update(block_m="128"), r"field 'tiles\.64\.block_m': expected an integer"),
    (lambda d: d.update(exponential="exp2"), "field 'exponential': 'exp2' is not one of: ex2.approx.f32"),
    (lambda d: d.pop("row_sum"), "field 'row_sum': missing"),
    # Combinations the emulator does not compute.
    (lambda d: d.update(lse_units="log2"), "field 'lse_units': lse_formula flash2 is in natural units"),
    (lambda d: d.update(max_units="exponent"), "kernel description: .*max_units"),
])
def test_a_description_not_understood_is_refused_naming_the_field(edit, message):
    q, k, v = random_head(15, 16)
    with pytest.raises(ValueError, match=message):
        bitexact.attention(q, k, v, kernel=edited("pytorch_sdpa_flash_sm90", edit))


@pytest.mark.parametrize("name, edit, message", [
    # Fields the other fields leave unread (issue 31: they changed no bit).
    ("flex_attention_sm90", lambda d: d.update(exponent="fma"),
     r"^kernel description: field 'exponent': not read when scale_placement is scores: leave it out$"),
    ("flex_attention_sm90", lambda d: d.update(scale_log2_from="double_scale"),
     r"^kernel description: field 'scale_log2_from': not read when scale_placement is scores: leave it out$"),
    ("pytorch_sdpa_flash_sm90", lambda d: d.update(log2_e=1.4427),
     r"^kernel description: field 'log2_e': not read when scale_placement is exponent: leave it out$"),
    ("pytorch_sdpa_efficient_sm90", lambda d: d.update(block_order="mask_partial_then_full"),
     r"^kernel description: field 'mask_block': missing \(read when block_order is mask_partial_then_full\)$"),
    ("flex_attention_sm90", lambda d: d["tiles"]["64"].update(block_m=64),
     r"^kernel description: field 'tiles\.64': block_order mask_partial_then_full needs block_m equal to mask_block"),
    # Values that give another's bits.
    ("pytorch_sdpa_efficient_sm90", lambda d: d.update(rescale="when_max_changes"),
     r"^kernel description: field 'rescale': when_max_changes gives the bits of every_block"),
    ("flex_attention_sm90", lambda d: d.update(normalization="rcp.approx.ftz.f32"),
     r"^kernel description: normalization rcp\.approx\.ftz\.f32 without alu_ftz gives the bits of div\.full\.f32"),
])
def test_a_field_that_would_change_no_bit_is_refused_naming_it(name, edit, message):
    q, k, v = random_head(128, 128)
    with pytest.raises(ValueError, match=message):
        bitexact.attention(q, k, v, kernel=edited(name, edit))


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(log2_e=float("nan")), "log2_e"),
    (lambda d: d.update(stabilize={"beta": float("inf"), "epsilon": 0.001, "across_blocks": False}), "stabilize.beta"),
])
def test_a_dict_with_a_nan_or_infinity_names_the_field_not_a_json_column(edit, field):
    q, k, v = random_head(128, 128)
    name = "flex_attention_sm90" if field == "log2_e" else "pytorch_sdpa_flash_sm90"
    with pytest.raises(ValueError, match=rf"^kernel description: field '{re.escape(field)}': expected a finite number, "
                                         rf"not (nan|inf)$"):
        bitexact.attention(q, k, v, kernel=edited(name, edit))


def test_refusals():
    q, k, v = random_head(16, 17)
    description = bitexact.kernel_description("pytorch_sdpa_flash_sm90")
    with pytest.raises(ValueError, match="preset and kernel both name"):
        bitexact.attention(q, k, v, preset="pytorch_sdpa_flash_sm90_stabilized", kernel=description)
    with pytest.raises(ValueError, match="preset and kernel both name"):
        bitexact.attention(q, k, v, preset="pytorch_sdpa_flash_sm90", kernel=description)
    with pytest.raises(ValueError, match=r"described for 128 query rows or more, not 17 \(min_query_rows\)"):
        bitexact.attention(q, k, v, preset="flex_attention_sm90")
    with pytest.raises(ValueError, match="kernel description: stabilize is modelled on FA2's arithmetic"):
        flex = edited("flex_attention_sm90", lambda d: d.update(stabilize={"beta": 2, "epsilon": 0.001,
                                                                           "across_blocks": False}))
        bitexact.attention(q, k, v, kernel=flex)
    with pytest.raises(ValueError, match="has no split-KV path"):
        bitexact.attention(q, k, v, kernel=TRITON_EXAMPLE, splits=2)
    with pytest.raises(TypeError, match="kernel= is a description as a dict or the path"):
        bitexact.attention(q, k, v, kernel=42)


def test_fa2s_models_refuse_other_arithmetic(compared):
    q, k, v = random_head(17, 128)
    flex = bitexact.kernel_description("flex_attention_sm90")
    # The row's intermediates are any kernel's; its element trace is FA2's only.
    o, lse = bitexact.attention(q, k, v, kernel=flex, causal=True)
    row = bitexact.attention_row(q, k, v, 100, kernel=flex, causal=True)
    np.testing.assert_array_equal(row["o"], o[100])
    assert row["lse"] == lse[100]
    with pytest.raises(ValueError, match="FA2's arithmetic, bf16 or its fp8 recipe .*flex_attention_sm90 does not compute with"):
        bitexact.attention_row(q, k, v, 100, col=3, kernel=flex, causal=True)
    with pytest.raises(ValueError, match="GPU kernel's P as FA2's arithmetic computes it .*not flex_attention_sm90's"):
        bitexact.repeated_max(q=q, k=k, kernel=flex)
    with pytest.raises(ValueError, match="not triton_flash_forward_example's"):
        bitexact.repeated_max(np.zeros((128, 128), np.float32), 64, kernel=TRITON_EXAMPLE)
    # FA2's arithmetic as a description counts as its preset.
    s = np.random.default_rng(18).integers(-3, 1, size=(128, 300)).astype(np.float32)
    expected = bitexact.repeated_max(s, 64, preset="pytorch_sdpa_flash_sm90_stabilized", per_row=True)
    got = bitexact.repeated_max(s, 64, kernel=bitexact.kernel_description("pytorch_sdpa_flash_sm90_stabilized"),
                                per_row=True)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    compared(row["o"].size + 1 + expected["row_p_bar_ones"].size)


def test_the_pytorch_indicator_takes_descriptions_too(compared):
    torch = pytest.importorskip("torch")
    s = np.random.default_rng(19).integers(-3, 1, size=(2, 128, 300)).astype(np.float32)
    description = bitexact.kernel_description("pytorch_sdpa_flash_sm90_stabilized")
    expected = bitexact.repeated_max(s[None], 64, kernel=description)
    got = bitexact.repeated_max_torch(torch.from_numpy(s[None]), 64, kernel=description)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name].numpy(), value, err_msg=name)
    with pytest.raises(ValueError, match="GPU kernel's P as FA2's arithmetic computes it"):
        bitexact.repeated_max_torch(torch.from_numpy(s[0]), 64, preset="flex_attention_sm90")
    with pytest.raises(NotImplementedError, match="across-blocks rule is not vectorised"):
        bitexact.repeated_max_torch(torch.from_numpy(s[0]), 64,
                                    preset="pytorch_sdpa_flash_sm90_stabilized_across_blocks")
    compared(sum(np.size(value) for value in expected.values()))
