"""bitexact.matmul and scaled_matmul against cuBLAS's products captured on an H200 (tests/data/matmul;
provenance in tests/data/README.md): torch.matmul, F.linear and torch.addmm on bf16 and fp16, plain and
split-K, and on fp32 under allow_tf32 (an H100); torch._scaled_mm on fp8 with tensor, row and block scales."""
import json

import numpy as np
import pytest

import bitexact


def captures(data_dir):
    return json.loads((data_dir / "matmul" / "manifest.json").read_text())["cases"]


def splits_of(case):
    return int(case["algorithm"]["numSplitsK"]) if "splitK" in case["kernels"][0][0] else None


def case_operands(data_dir, case):
    """A, B, the GPU's D, and the call's bias, or C with alpha and beta, from a case's folder."""
    folder = data_dir / "matmul" / case["name"]
    a, b, d = (np.load(folder / f"{x}.npy") for x in "abd")
    extra = {}
    if case["op"] == "linear":
        extra["bias"] = np.load(folder / "bias.npy")
    if case["op"] == "addmm":
        extra.update(c=np.load(folder / "c.npy"), alpha=case["alpha"], beta=case["beta"])
    return a, b, d, extra


def test_matmul_replays_cublas(data_dir, compared):
    replayed = 0
    for case in captures(data_dir):
        if case["op"] == "scaled_mm" or not case["kernels"][0][0].startswith("nvjet_sm90"):
            continue
        a, b, d, extra = case_operands(data_dir, case)
        if case["out_dtype"] != case["dtype"]:
            extra["out_format"] = case["out_dtype"]
        model = bitexact.matmul(a, b, splits=splits_of(case), format=case["dtype"], **extra)
        np.testing.assert_array_equal(model, d.view(model.dtype), err_msg=case["name"])
        compared(d.size)
        replayed += 1
    assert replayed == 30


def test_matmul_replays_cublas_tf32(data_dir, compared):
    """fp32 under allow_tf32 (captured on an H100): the preset by the kernel's family and K tile."""
    replayed = 0
    for case in captures(data_dir):
        if not case.get("tf32"):
            continue
        kernel = case["kernels"][0][0]
        preset = ("cublas_sm90_tf32_xmma" if "cutlass_80" not in kernel
                  else "cublas_sm90_tf32_k16" if "_16x6_" in kernel else "cublas_sm90_tf32")
        a, b, d, extra = case_operands(data_dir, case)
        splits = int(case["algorithm"].get("numSplitsK", 1))
        model = bitexact.matmul(a, b, preset=preset, splits=splits, format="fp32", **extra)
        np.testing.assert_array_equal(model, d.view(model.dtype), err_msg=case["name"])
        compared(d.size)
        replayed += 1
    assert replayed == 16


def test_matmul_threads_do_not_change_the_bits():
    rng = np.random.default_rng(5)
    a, b = (bitexact.from_float32(rng.standard_normal(shape).astype(np.float32), "bf16") for shape in ((40, 300), (300, 24)))
    one = bitexact.matmul(a, b, splits=3, threads=1)
    assert (one == bitexact.matmul(a, b, splits=3, threads=0)).all()
    assert (one == bitexact.matmul(a, b, splits=3, threads=5)).all()


def test_matmul_kernel_descriptions():
    names = [name for name, _summary in bitexact.list_matmul_kernels()]
    assert names[:3] == ["cublas_sm90", "cublas_sm90_fp8", "cublas_sm90_fp8_fast_accum"]
    d = bitexact.matmul_kernel_description("cublas_sm90")
    rng = np.random.default_rng(7)
    a, b = (bitexact.from_float32(rng.standard_normal(shape).astype(np.float32), "bf16") for shape in ((8, 2048), (2048, 8)))
    d["splits"] = 4
    assert (bitexact.matmul(a, b, kernel=d) == bitexact.matmul(a, b, splits=4)).all()
    d["promotion"] = 128
    with pytest.raises(ValueError, match="field 'promotion': unknown field"):
        bitexact.matmul(a, b, kernel=d)
    with pytest.raises(ValueError, match="preset= and kernel= both name the kernel"):
        bitexact.matmul(a, b, preset="cublas_sm90", kernel=d)
    with pytest.raises(ValueError, match="unknown matmul preset 'cublas'"):
        bitexact.matmul(a, b, preset="cublas")


def test_matmul_refusals():
    a = np.zeros((4, 32), np.uint16)
    with pytest.raises(ValueError, match=r"matmul: a is \(4, 32\) and b is \(16, 8\); b needs 32 rows"):
        bitexact.matmul(a, np.zeros((16, 8), np.uint16))
    with pytest.raises(ValueError, match=r"bias has shape \(4,\); expected \(8,\)"):
        bitexact.matmul(a, np.zeros((32, 8), np.uint16), bias=np.zeros(4, np.uint16))
    with pytest.raises(ValueError, match="splits must be from 1 to 256, not 300"):
        bitexact.matmul(a, np.zeros((32, 8), np.uint16), splits=300)
    with pytest.raises(ValueError, match="beta multiplies c; give c="):
        bitexact.matmul(a, np.zeros((32, 8), np.uint16), beta=0.5)
    with pytest.raises(ValueError, match="not e4m3 x e4m3 into e4m3"):
        bitexact.matmul(np.zeros((4, 32), np.uint8), np.zeros((32, 8), np.uint8), format="e4m3")


def test_scaled_matmul_replays_torch_scaled_mm(data_dir, compared):
    replayed = 0
    for case in captures(data_dir):
        if case["op"] != "scaled_mm":
            continue
        folder = data_dir / "matmul" / case["name"]
        a, b, d, scale_a, scale_b = (np.load(folder / f"{x}.npy") for x in ("a", "b", "d", "scale_a", "scale_b"))
        preset = "cublas_sm90_fp8_fast_accum" if case["fast_accum"] else "cublas_sm90_fp8"
        model = bitexact.scaled_matmul(a, b, scale_a, scale_b, a_format=case["a_type"], b_format=case["b_type"],
                                       out_format=case["out"], preset=preset, splits=splits_of(case))
        np.testing.assert_array_equal(model, d.view(model.dtype), err_msg=case["name"])
        compared(d.size)
        replayed += 1
    assert replayed == 26


def test_scaled_matmul_refusals():
    a, b = np.zeros((4, 32), np.uint8), np.zeros((32, 8), np.uint8)
    with pytest.raises(ValueError, match=r"scale_a has the wrong shape; expected one value, \[4\] or \[4, 1\]"):
        bitexact.scaled_matmul(a, b, np.ones(3, np.float32), 1.0)
    with pytest.raises(ValueError, match="scales must be finite"):
        bitexact.scaled_matmul(a, b, 1.0, float("nan"))
    with pytest.raises(ValueError, match="not e4m3 x e4m3 into e4m3"):
        bitexact.scaled_matmul(a, b, 1.0, 1.0, out_format="e4m3")


def test_identify_and_explain_matmul(data_dir):
    folder = data_dir / "matmul" / "bf16_splitk_96x200x3000"
    a, b, d = (np.load(folder / f"{x}.npy") for x in "abd")
    found = bitexact.identify_matmul(a, b, d)
    exact = [(name, splits) for name, splits, mismatches in found if mismatches == 0]
    assert exact == [("cublas_sm90", 2), ("triton_matmul_sm90", 2)]
    assert found[2][2] > 0  # the nearest wrong candidate misses some
    e = bitexact.explain_matmul(a, b, 0, 0, splits=2)
    assert [s["first"] for s in e["splits"]] == [0, 1536]
    assert len(e["splits"][0]["pieces"][0]["steps"]) == 96
    assert e["out"] == int(d[0, 0])
    with pytest.raises(ValueError, match=r"explain: element \(16, 0\) is outside D, \(16, 16\)"):
        bitexact.explain_matmul(a, b, 16, 0)


def test_assert_matches_model_explains_a_matmul_mismatch(data_dir):
    from bitexact.testing import assert_matches_model
    folder = data_dir / "matmul" / "bf16_splitk_96x200x3000"
    a, b, d = (np.load(folder / f"{x}.npy") for x in "abd")
    assert assert_matches_model(d, bitexact.matmul, a, b, splits=2) == 256
    with pytest.raises(AssertionError, match=r"(?s)17 of 256 elements differ from the model.*D\[0, 0\]: 1 split\(s\) of K"):
        assert_matches_model(d, bitexact.matmul, a, b)
