"""FA2's fp8 recipe (bitexact_flash_fp8_sm90 and its stabilized presets: bitexact's FP8 kernel in
cuda/attention) through the binding and the command: e4m3 Q, K and V as uint8 bit patterns in, O as bf16 bit
patterns (uint16) out. With every scale 1 and operands whose S and P-bar are exact, the bf16 FA2 preset's bits
on the bf16 copies; the command writes and compares the same bf16 O; beta and eps reach a stabilized fp8
preset; a uint8 O file and the bf16-only options are refused in one line."""
import json
import subprocess

import numpy as np
import pytest

import bitexact

PRESET = "bitexact_flash_fp8_sm90"
TWINS = [(PRESET, "pytorch_sdpa_flash_sm90"),
         ("bitexact_flash_fp8_sm90_stabilized", "pytorch_sdpa_flash_sm90_stabilized"),
         ("bitexact_flash_fp8_sm90_stabilized_across_blocks", "pytorch_sdpa_flash_sm90_stabilized_across_blocks")]
# float(ln 2): the exponent's scale c = RN(scale log2 e) is then exactly 1, and every P a power of two.
LN2 = float(np.float32(np.log(2.0)))


def exact_head(seed, rows=130, keys=150, d=64):
    """(e4m3 q, k, v; their bf16 copies): S of -1, 0 or 1 (exact on either tensor core), V in halves from -1
    to 1, so that P-bar is the same power of two in e4m3 and bf16 and every P V sum is exact."""
    rng = np.random.default_rng(seed)
    q = np.zeros((rows, d), np.float32)
    q[np.arange(rows), rng.integers(0, 4, rows)] = rng.choice([-1.0, 1.0], rows)
    k = np.zeros((keys, d), np.float32)
    k[:, :4] = rng.integers(-1, 2, (keys, 4))
    v = rng.integers(-2, 3, (keys, d)).astype(np.float32) * np.float32(0.5)
    return ([bitexact.from_float32(x, "e4m3") for x in (q, k, v)],
            [bitexact.from_float32(x, "bf16") for x in (q, k, v)])


def normal_head(seed, rows=130, keys=300, d=128):
    rng = np.random.default_rng(seed)
    return [bitexact.from_float32(rng.standard_normal((n, d)).astype(np.float32), "e4m3") for n in (rows, keys, keys)]


@pytest.mark.parametrize("fp8, twin", TWINS)
@pytest.mark.parametrize("causal", [False, True])
def test_scales_of_one_give_the_bf16_twins_bits_on_exact_operands(compared, fp8, twin, causal):
    fp8_operands, bf16_operands = exact_head(7 + causal)
    o, lse = bitexact.attention(*fp8_operands, preset=fp8, causal=causal, scale=LN2)
    assert o.dtype == np.uint16 and o.shape == fp8_operands[0].shape and lse.dtype == np.uint32
    expected_o, expected_lse = bitexact.attention(*bf16_operands, preset=twin, causal=causal, scale=LN2, splits=1)
    np.testing.assert_array_equal(o, expected_o)
    np.testing.assert_array_equal(lse, expected_lse)
    compared(o.size + lse.size)


def test_the_scales_act_where_the_contract_puts_them(compared):
    q, k, v = normal_head(3)
    base_scales = dict(descale_s=1 / 256, scale_s=256.0)
    o, lse = bitexact.attention(q, k, v, preset=PRESET, causal=True, **base_scales)
    # descale_v 2: O's factor doubles, every O doubles exactly, L stays.
    o2, lse2 = bitexact.attention(q, k, v, preset=PRESET, causal=True, descale_v=2.0, **base_scales)
    np.testing.assert_array_equal(bitexact.to_float32(o2, "bf16"), 2 * bitexact.to_float32(o, "bf16"))
    np.testing.assert_array_equal(lse2, lse)
    # descale_q 2 with the scale halved: scale' = RN(RN(scale descale_q) descale_k) is the same float.
    default_scale = 128 ** -0.5
    o3, lse3 = bitexact.attention(q, k, v, preset=PRESET, causal=True, scale=default_scale / 2, descale_q=2.0,
                                  **base_scales)
    np.testing.assert_array_equal(o3, o)
    np.testing.assert_array_equal(lse3, lse)
    o4, _ = bitexact.attention(q, k, v, preset=PRESET, causal=True, descale_q=2.0, **base_scales)
    assert (o4 != o).any()
    compared(3 * (o.size + lse.size))


def test_a_description_of_it_computes_its_bits(compared):
    q, k, v = normal_head(4, rows=64, keys=200, d=64)
    description = json.loads(json.dumps(bitexact.kernel_description(PRESET)))
    assert description["inputs"] == "e4m3" and description["p_scale"] == "multiply"
    assert description["scale_log2_from"] == "float_scale" and "o_rounding" not in description
    o, lse = bitexact.attention(q, k, v, preset=PRESET, scale_s=256.0, descale_s=1 / 256)
    same_o, same_lse = bitexact.attention(q, k, v, kernel=description, scale_s=256.0, descale_s=1 / 256)
    np.testing.assert_array_equal(same_o, o)
    np.testing.assert_array_equal(same_lse, lse)
    compared(o.size + lse.size)


def test_beta_and_eps_reach_a_stabilized_fp8_preset(compared):
    (q, k, v), _ = exact_head(5)
    stabilized = bitexact.attention(q, k, v, preset="bitexact_flash_fp8_sm90_stabilized", scale=LN2)
    plain = bitexact.attention(q, k, v, preset=PRESET, scale=LN2)
    # The maxima repeat: the rule acts (here on L; O's P are powers of two, scaled alike).
    assert any((a != b).any() for a, b in zip(stabilized, plain))
    description = bitexact.kernel_description("bitexact_flash_fp8_sm90_stabilized")
    description["stabilize"]["beta"] = 1.5
    by_description = bitexact.attention(q, k, v, kernel=description, scale=LN2)
    by_option = bitexact.attention(q, k, v, preset="bitexact_flash_fp8_sm90_stabilized", scale=LN2, beta=1.5)
    for a, b in zip(by_description, by_option):
        np.testing.assert_array_equal(a, b)
    assert any((a != b).any() for a, b in zip(by_option, stabilized))
    with pytest.raises(ValueError, match="needs a stabilized preset"):
        bitexact.attention(q, k, v, preset=PRESET, beta=1.5)
    with pytest.raises(ValueError, match="is not an option of fp8 kernels"):
        bitexact.attention(q, k, v, preset=PRESET, splits=1)
    compared(2 * (by_option[0].size + by_option[1].size))


def test_the_command_writes_and_compares_the_bf16_o(cli, tmp_path, compared):
    q, k, v = normal_head(6, rows=130, keys=300, d=128)
    q, k, v = (x.reshape(1, 1, *x.shape) for x in (q, k, v))  # [B, H, N, d]
    for name, x in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{name}.npy", x)
    scales = dict(descale_q=0.75, descale_k=1.25, descale_v=0.5, descale_s=1 / 256, scale_s=256.0, scale_o=3.0)
    flags = [f for name, value in scales.items() for f in ("--" + name.replace("_", "-"), repr(value))]
    files = [str(tmp_path / f"{x}.npy") for x in "qkv"]
    run = subprocess.run([cli, "attention", *files, "--preset", PRESET, "--causal", *flags,
                          "--out-o", str(tmp_path / "o.npy"), "--out-lse", str(tmp_path / "lse.npy")],
                         check=True, capture_output=True, text=True)
    assert "preset bitexact_flash_fp8_sm90: 1 split (no split-KV path), tiles 128 rows x 128 keys, 3 K/V blocks" \
        in run.stdout
    assert "scale_o 3 (O bf16)" in run.stdout
    o, lse = bitexact.attention(q, k, v, preset=PRESET, causal=True, **scales)
    written_o, written_lse = np.load(tmp_path / "o.npy"), np.load(tmp_path / "lse.npy")
    assert written_o.dtype == np.uint16 and written_o.shape == q.shape
    np.testing.assert_array_equal(written_o, o)
    np.testing.assert_array_equal(written_lse.view(np.uint32), lse)
    compared(o.size + lse.size)
    # What a GPU wrote, compared: the same bits, then one element off.
    check = [cli, "attention", *files, "--preset", PRESET, "--causal", *flags,
             "--expect-o", str(tmp_path / "o.npy"), "--expect-lse", str(tmp_path / "lse.npy")]
    agreed = subprocess.run(check, capture_output=True, text=True)
    assert agreed.returncode == 0, agreed.stderr
    assert "O: 16640 elements compared, 0 mismatches" in agreed.stdout
    assert "L: 130 elements compared, 0 mismatches" in agreed.stdout
    off = written_o.copy()
    off[0, 0, 5, 7] ^= 1
    np.save(tmp_path / "o_off.npy", off)
    check[check.index("--expect-o") + 1] = str(tmp_path / "o_off.npy")
    missed = subprocess.run(check, capture_output=True, text=True)
    assert missed.returncode == 1
    assert "O: 16640 elements compared, 1 mismatch" in missed.stdout
    # An e4m3 file for a bf16 O is refused, naming the format.
    np.save(tmp_path / "o8.npy", np.zeros(q.shape, np.uint8))
    check[check.index("--expect-o") + 1] = str(tmp_path / "o8.npy")
    refused = subprocess.run(check, capture_output=True, text=True)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "is one byte, but bitexact_flash_fp8_sm90's O is bf16" in refused.stderr


def test_attention_row_traces_our_fp8_kernel_to_the_gpus_bits(compared, data_dir):
    """attention_row on a captured head of our FP8 kernel (tests/data/flash_fp8, an H200's bits): the row's O
    is the GPU's, each block keeps the e4m3 P-bar P V took, and O[row][col]'s trace takes 32-product steps,
    ending in the GPU's bf16 value; the pv_fp32_add preset adds one FADD a block; the p_bar_sum preset's rows
    of its own captured head are the GPU's too."""
    head = data_dir / "flash_fp8" / "d64_n1000_full_rule1_ties_n1000_h0_rows0-63"
    q, k, v, o = (np.load(head / f"{x}.npy") for x in ("q", "k", "v", "o"))
    scales = dict(descale_q=0.018720735, descale_k=0.010690597, descale_v=0.01017301, descale_s=1 / 256, scale_s=256.0)
    for row in (0, 5, 63):
        traced = bitexact.attention_row(q, k, v, row, col=17, preset="bitexact_flash_fp8_sm90_stabilized", **scales)
        np.testing.assert_array_equal(traced["o"], o[row])
        assert [len(b["p_e4m3"]) for b in traced["blocks"]] == [128] * 8
        kinds = [s["kind"] for s in traced["steps"]]
        assert kinds.count("tensor_core") == 8 * 4 and kinds[-1] == "to_bf16"
        assert traced["steps"][0]["trace"].startswith("fused multiply-add step: 32 products + C -> fp32")
        compared(o.shape[1])
    promoted = bitexact.attention_row(q, k, v, 5, col=17, preset="bitexact_flash_fp8_sm90_pv_fp32_add", **scales)
    assert [s["kind"] for s in promoted["steps"]].count("block_add") == 8
    # The p_bar_sum preset on its own captured head (descale_s 1/64, scale_o 2): the GPU's O and L, and a row
    # sum of P-bar, not of the fp32 P.
    head = data_dir / "flash_fp8" / "d64_n1000_full_rule0_scale_o_2_pv_fp32_add_p_bar_sum_n1000_h0_rows0-31"
    q8, k8, v8, o8, lse8 = (np.load(head / f"{x}.npy") for x in ("q", "k", "v", "o", "stats"))
    bits = dict(descale_q=0x3C181675, descale_k=0x3C1EB4EE, descale_v=0x3C39A1AB, descale_s=0x3C800000)
    own = {name: float(np.uint32(b).view(np.float32)) for name, b in bits.items()} | dict(scale_s=256.0, scale_o=2.0)
    for row in (0, 3, 31):
        traced = bitexact.attention_row(q8, k8, v8, row, col=5, preset="bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum",
                                        **own)
        np.testing.assert_array_equal(traced["o"], o8[row])
        assert traced["lse"] == lse8.view(np.uint32)[row]
        of_p = bitexact.attention_row(q8, k8, v8, row, col=5, preset="bitexact_flash_fp8_sm90_pv_fp32_add", **own)
        assert traced["splits"][0]["sum"] != of_p["splits"][0]["sum"]
        compared(o8.shape[1] + 1)
    with pytest.raises(ValueError, match="8-bit patterns of e4m3"):
        bitexact.attention_row(q.astype(np.uint16), k.astype(np.uint16), v.astype(np.uint16), 0, col=0,
                               preset=PRESET, **scales)
    with pytest.raises(ValueError, match="FA2's arithmetic, bf16 or its fp8 recipe .*cudnn_sdpa_fp8_sm90 does not"):
        bitexact.attention_row(q, k, v, 0, col=0, preset="cudnn_sdpa_fp8_sm90", **scales)
