"""The attention emulator through the binding: PyTorch's flash-attention outputs captured
on an H100 (tests/data/attention, and our own kernel's in attention_kernel), the paper's
presets against the `bitexact attention` command, and one row's intermediates."""

import subprocess

import numpy as np
import pytest

import bitexact

# The captured heads replayed here: the small ones, a split-KV head with NaN and inf inputs,
# and a tie head of our three kernels (the other heads are replayed by ctest's attention tests).
CASES = ["split_d64_n17_causal_normal_h1", "split_d128_n128_full_normal_h0", "single_d128_n17_causal_normal_h211",
         "split_d64_n1000_full_special_h0", "attention_kernel/d128_n1000_full_ties_negative_h0:standard",
         "attention_kernel/d128_n1000_full_ties_negative_h0:stabilized",
         "attention_kernel/d128_n1000_full_ties_negative_h0:across"]
KERNEL_PRESETS = {"standard": "pytorch_sdpa_flash_sm90", "stabilized": "pytorch_sdpa_flash_sm90_stabilized",
                  "across": "pytorch_sdpa_flash_sm90_stabilized_across_blocks"}


def manifest(data_dir, folder):
    """NAME -> (batch, heads, causal, scale, splits) from a MANIFEST."""
    cases = {}
    for line in (data_dir / folder / "MANIFEST").read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == "case":
            name, batch, heads, _n, _nk, _d, causal, scale, splits, _head = fields[1:]
            cases[name] = (int(batch), int(heads), causal == "1", None if scale == "default" else float(scale),
                           int(splits))
    return cases


@pytest.mark.parametrize("case", CASES)
def test_attention_replays_the_captured_heads(data_dir, compared, case):
    folder, name = case.split("/") if "/" in case else ("attention", case)
    name, variant = name.split(":") if ":" in name else (name, None)
    batch, heads, causal, scale, _splits = manifest(data_dir, folder)[name]
    # Our kernels' folders hold o_<variant> and lse_<variant> of each kernel; PyTorch's o and lse.
    o_name, lse_name = (f"o_{variant}", f"lse_{variant}") if variant else ("o", "lse")
    q, k, v, o, lse = (np.load(data_dir / folder / name / f"{x}.npy") for x in ("q", "k", "v", o_name, lse_name))
    preset = KERNEL_PRESETS[variant] if variant else "pytorch_sdpa_flash_sm90"
    # batch_heads: the call's B and H decide the split count through PyTorch's heuristic.
    model_o, model_lse = bitexact.attention(q, k, v, preset=preset, causal=causal, scale=scale,
                                            batch_heads=(batch, heads))
    np.testing.assert_array_equal(model_o, o.view(np.uint16))
    np.testing.assert_array_equal(model_lse, lse.view(np.uint32))
    compared(o.size + lse.size)


def random_heads(seed, shape):
    rng = np.random.default_rng(seed)
    return [bitexact.from_float32(rng.standard_normal(shape).astype(np.float32), "bf16") for _ in range(3)]


@pytest.mark.parametrize("preset, causal", [("paper_reference", True), ("paper_reference_stabilized", False),
                                            ("paper_reference_fp64", True), ("pytorch_sdpa_flash_sm90", True)])
def test_presets_match_the_attention_command(cli, tmp_path, compared, preset, causal):
    q, k, v = random_heads(1, (1, 2, 40, 64))
    for name, x in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{name}.npy", x)
    command = [cli, "attention", *(str(tmp_path / f"{x}.npy") for x in "qkv"), "--preset", preset,
               "--out-o", str(tmp_path / "o.npy"), "--out-lse", str(tmp_path / "lse.npy")]
    subprocess.run(command + (["--causal"] if causal else []), check=True, capture_output=True)
    o, lse = bitexact.attention(q, k, v, preset=preset, causal=causal)
    expected_o, expected_lse = np.load(tmp_path / "o.npy"), np.load(tmp_path / "lse.npy")
    assert o.shape == q.shape and lse.shape == q.shape[:-1]
    if preset == "paper_reference_fp64":
        assert o.dtype == np.float64
        np.testing.assert_array_equal(o.view(np.uint64), expected_o.view(np.uint64))
        np.testing.assert_array_equal(lse.view(np.uint64), expected_lse.view(np.uint64))
    else:
        np.testing.assert_array_equal(o, expected_o.view(np.uint16))
        np.testing.assert_array_equal(lse, expected_lse.view(np.uint32))
    compared(o.size + lse.size)


def test_a_rows_intermediates_and_an_elements_roundings(compared):
    q, k, v = random_heads(2, (100, 64))
    o, lse = bitexact.attention(q, k, v, causal=True, splits=2)
    row = bitexact.attention_row(q, k, v, 70, col=5, causal=True, splits=2)
    np.testing.assert_array_equal(row["o"], o[70])
    assert row["lse"] == lse[70]
    assert len(row["splits"]) == 2 and row["blocks"]
    first_block = row["blocks"][0]
    assert first_block["scores"].dtype == np.uint32 and first_block["p_bf16"].dtype == np.uint16
    steps = row["steps"]
    assert steps[-1]["kind"] == "to_bf16"
    assert f"bf16:0x{int(o[70, 5]):04X}" in steps[-1]["trace"]
    compared(row["o"].size + 1)


def test_the_gpu_record_decides_the_split_count(compared):
    # 8 heads of 1000 rows: PyTorch's heuristic gives 2 splits on 132 SMs, 4 on an H100 PCIe's 114.
    q, k, v = random_heads(8, (1, 8, 1000, 64))
    parameters = {gpu: bitexact._bitexact._flash_kernel_parameters(None, None, 1, 8, 1000, 1000, 64, False, None, None,
                                                                   gpu, None, None)["splits"]
                  for gpu in bitexact.GPUS}
    assert parameters == {"h100_sxm": 2, "h100_pcie": 4, "h200": 2}
    sxm, pcie, h200 = (bitexact.attention(q, k, v, gpu=gpu)[0] for gpu in ("h100_sxm", "h100_pcie", "h200"))
    assert (sxm == h200).all() and (sxm != pcie).any()
    assert (bitexact.attention(q, k, v, splits=4)[0] == pcie).all()
    compared(3 * sxm.size)


def test_the_thread_count_changes_no_bit(compared):
    # 2 heads of 200 rows: the heads and each head's 13 slabs of 16 rows shared among 1, 2, 3 threads or one
    # per core, for a GPU kernel and the paper's arithmetic.
    q, k, v = random_heads(9, (1, 2, 200, 64))
    for preset in ("pytorch_sdpa_flash_sm90", "paper_reference"):
        one_thread = bitexact.attention(q, k, v, preset=preset, causal=True, threads=1)
        for threads in (2, 3, 0):
            o, lse = bitexact.attention(q, k, v, preset=preset, causal=True, threads=threads)
            np.testing.assert_array_equal(o, one_thread[0], err_msg=f"{preset}, {threads} threads")
            np.testing.assert_array_equal(lse, one_thread[1], err_msg=f"{preset}, {threads} threads")
            compared(o.size + lse.size)
    with pytest.raises(ValueError, match=r"^threads must be from 0 \(one thread per core\) to 1024, not -1$"):
        bitexact.attention(q, k, v, threads=-1)
    with pytest.raises(TypeError, match=r"^attention: threads is an integer \(0 for one thread per core\), not 2\.0$"):
        bitexact.attention(q, k, v, threads=2.0)


def test_attention_refuses_what_it_cannot_model():
    q, k, v = random_heads(3, (16, 32))
    with pytest.raises(ValueError, match="head_dim 32 is not described"):
        bitexact.attention(q, k, v)
    q, k, v = random_heads(3, (16, 64))
    with pytest.raises(ValueError, match="unknown preset"):
        bitexact.attention(q, k, v, preset="flash3")
    with pytest.raises(ValueError, match="described for 2 query rows or more"):
        bitexact.attention(q[:1], k, v, preset="pytorch_sdpa_cudnn_sm90")
    with pytest.raises(ValueError, match="split-KV path, which preset paper_reference does not have"):
        bitexact.attention(q, k, v, preset="paper_reference", splits=2)
    with pytest.raises(ValueError, match="beta sets the stabilized softmax; it needs a stabilized preset"):
        bitexact.attention(q, k, v, beta=2.0)
    with pytest.raises(ValueError, match="autocast changes the paper_reference, paper_reference_stabilized presets"):
        bitexact.attention(q, k, v, autocast=False)
    for scale in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="scale .* is not a finite number that a float can hold"):
            bitexact.attention(q, k, v, scale=scale)
    with pytest.raises(ValueError, match="beta nan is not a finite number of at least 1"):
        bitexact.attention(q, k, v, preset="pytorch_sdpa_flash_sm90_stabilized", beta=float("nan"))
    with pytest.raises(ValueError, match="unknown GPU 'a100'; the GPUs are: h100_sxm, h100_pcie, h200"):
        bitexact.attention(q, k, v, gpu="a100")
    with pytest.raises(TypeError, match="bf16 bit patterns, dtype uint16"):
        bitexact.attention(q.astype(np.float32), k, v)


def test_an_option_of_the_wrong_type_is_refused_in_one_line_naming_it():
    q = np.full((16, 16), 0x3F80, np.uint16)
    with pytest.raises(TypeError, match=r"^attention: scale is a number, not '0\.1'$"):
        bitexact.attention(q, q, q, scale="0.1")
    with pytest.raises(TypeError, match=r"^attention: splits is an integer, not 2\.0$"):
        bitexact.attention(q, q, q, splits=2.0)
    with pytest.raises(TypeError, match=r"^attention: causal is True or False, not 'yes'$"):
        bitexact.attention(q, q, q, causal="yes")
    with pytest.raises(TypeError, match=r"^attention_row: gpu is a GPU name \(str\), not 132$"):
        bitexact.attention_row(q, q, q, 0, gpu=132)
