"""bitexact.matmul against cuBLAS's products captured on an H200 (tests/data/matmul; provenance in
tests/data/README.md): torch.matmul and F.linear, bf16 and fp16, plain and split-K."""
import json

import numpy as np
import pytest

import bitexact


def cases(data_dir):
    manifest = json.loads((data_dir / "matmul" / "manifest.json").read_text())
    return [c for c in manifest["cases"] if c["rule"] in ("chain16", "splitk", "chain16_bias", "splitk_bias")]


def test_matmul_replays_cublas(data_dir, compared):
    replayed = 0
    for case in cases(data_dir):
        folder = data_dir / "matmul" / case["name"]
        a, b, d = (np.load(folder / f"{x}.npy") for x in "abd")
        bias = np.load(folder / "bias.npy") if "bias" in case["rule"] else None
        splits = int(case["algorithm"]["numSplitsK"]) if case["rule"].startswith("splitk") else 1
        model = bitexact.matmul(a, b, bias=bias, splits=splits, format=case["dtype"])
        np.testing.assert_array_equal(model, d, err_msg=case["name"])
        compared(d.size)
        replayed += 1
    assert replayed == 21


def test_matmul_threads_do_not_change_the_bits():
    rng = np.random.default_rng(5)
    a, b = (bitexact.from_float32(rng.standard_normal(shape).astype(np.float32), "bf16") for shape in ((40, 300), (300, 24)))
    one = bitexact.matmul(a, b, splits=3, threads=1)
    assert (one == bitexact.matmul(a, b, splits=3, threads=0)).all()
    assert (one == bitexact.matmul(a, b, splits=3, threads=5)).all()


def test_matmul_refusals():
    a = np.zeros((4, 32), np.uint16)
    with pytest.raises(ValueError, match=r"matmul: a is \(4, 32\) and b is \(16, 8\); b needs 32 rows"):
        bitexact.matmul(a, np.zeros((16, 8), np.uint16))
    with pytest.raises(ValueError, match=r"bias has shape \(4,\); expected \(8,\)"):
        bitexact.matmul(a, np.zeros((32, 8), np.uint16), bias=np.zeros(4, np.uint16))
    with pytest.raises(ValueError, match="splits must be from 1 to 256, not 0"):
        bitexact.matmul(a, np.zeros((32, 8), np.uint16), splits=0)
    with pytest.raises(ValueError, match="not e4m3"):
        bitexact.matmul(np.zeros((4, 32), np.uint8), np.zeros((32, 8), np.uint8), format="e4m3")


def test_scaled_matmul_replays_torch_scaled_mm(data_dir, compared):
    manifest = json.loads((data_dir / "matmul" / "manifest.json").read_text())
    replayed = 0
    for case in manifest["cases"]:
        if case["op"] != "scaled_mm":
            continue
        folder = data_dir / "matmul" / case["name"]
        a, b, d, scale_a, scale_b = (np.load(folder / f"{x}.npy") for x in ("a", "b", "d", "scale_a", "scale_b"))
        model = bitexact.scaled_matmul(a, b, scale_a, scale_b, a_format=case["a_type"], b_format=case["b_type"],
                                       out_format=case["out"], fast_accum=case["fast_accum"])
        np.testing.assert_array_equal(model, d.view(model.dtype), err_msg=case["name"])
        compared(d.size)
        replayed += 1
    assert replayed == 14


def test_scaled_matmul_refusals():
    a, b = np.zeros((4, 32), np.uint8), np.zeros((32, 8), np.uint8)
    with pytest.raises(ValueError, match="scale_a has 3 values; expected 1 or 4"):
        bitexact.scaled_matmul(a, b, np.ones(3, np.float32), 1.0)
    with pytest.raises(ValueError, match="scale_b holds a value that is not finite"):
        bitexact.scaled_matmul(a, b, 1.0, float("nan"))
    with pytest.raises(ValueError, match="scaled_matmul writes bf16 or fp32, not fp16"):
        bitexact.scaled_matmul(a, b, 1.0, 1.0, out_format="fp16")
