"""The GPU models through the binding against the GPU's own outputs, captured on an
NVIDIA H200/H100 and kept in tests/data (provenance in tests/data/README.md)."""

import numpy as np
import pytest

import bitexact
from conftest import read_mufu_samples, read_section, read_tiles

MMA_FILES = [  # file, input format, accumulator format
    ("mma_bf16_f32.bin", "bf16", "fp32"),
    ("mma_f16_f32.bin", "fp16", "fp32"),
    ("mma_f16_f16.bin", "fp16", "fp16"),
    ("zero_sign_mma_bf16_f32.bin", "bf16", "fp32"),
    ("zero_sign_mma_f16_f32.bin", "fp16", "fp32"),
    ("zero_sign_mma_f16_f16.bin", "fp16", "fp16"),
]


@pytest.mark.parametrize("name, input_format, acc_format", MMA_FILES)
def test_mma_replays_the_h200s_m16n8k16_tiles(data_dir, compared, name, input_format, acc_format):
    tiles = read_tiles(data_dir / name)
    assert len(tiles["a"]) > 0
    for a, b, c, d in zip(tiles["a"], tiles["b"], tiles["c"], tiles["d"]):
        model = bitexact.mma(a, b, c, input_format=input_format, acc_format=acc_format, arch="sm_90")
        np.testing.assert_array_equal(model, d)
    compared(tiles["d"].size)


@pytest.mark.parametrize("name", ["wgmma_bf16_f32.bin", "zero_sign_wgmma_bf16_f32.bin"])
def test_wgmma_replays_the_h200s_m64n8k16_tiles(data_dir, compared, name):
    tiles = read_tiles(data_dir / name)
    assert tiles["m"] == 64 and len(tiles["a"]) > 0
    for a, b, c, d in zip(tiles["a"], tiles["b"], tiles["c"], tiles["d"]):
        np.testing.assert_array_equal(bitexact.wgmma(a, b, c), d)
        np.testing.assert_array_equal(bitexact.mma(a, b, c), d)  # wgmma is the same fused step per output
    compared(2 * tiles["d"].size)


NARROW_FILES = [  # file, input format (A's and B's), accumulator format
    ("wgmma_e4m3_e4m3_f32.bin", "e4m3", "fp32"),
    ("wgmma_e5m2_e5m2_f32.bin", "e5m2", "fp32"),
    ("wgmma_e4m3_e4m3_f16.bin", "e4m3", "fp16"),
    ("wgmma_e5m2_e5m2_f16.bin", "e5m2", "fp16"),
    ("wgmma_tf32_f32.bin", "tf32", "fp32"),
]


@pytest.mark.parametrize("name, input_format, acc_format", NARROW_FILES)
def test_mma_replays_the_h200s_fp8_and_tf32_wgmma_tiles(data_dir, compared, name, input_format, acc_format):
    """wgmma m64n8k32 (fp8) and m64n8k8 (tf32) are one fused step per output: mma of K 32 or 8
    on sm_90 runs the measured unit (sm90_fp8, sm90_k8). tf32 operands are the upper 19 bits
    of the captured registers."""
    tiles = read_tiles(data_dir / name)
    assert tiles["m"] == 64 and len(tiles["a"]) > 0
    for a, b, c, d in zip(tiles["a"], tiles["b"], tiles["c"], tiles["d"]):
        if input_format == "tf32":
            a, b = a >> 13, b >> 13
        np.testing.assert_array_equal(bitexact.mma(a, b, c, input_format=input_format, acc_format=acc_format), d)
    compared(tiles["d"].size)


def test_mma_of_any_shape_chains_the_units_steps(compared):
    """K = 48 on sm_90 is three chained steps of 16 products (each step's rounded result the
    next one's C); on sm_80 six steps of 8. Both equal running the steps by hand."""
    rng = np.random.default_rng(3)
    m, n, k = 5, 7, 48
    a = bitexact.from_float32(rng.standard_normal((m, k)).astype(np.float32), "bf16")
    b = bitexact.from_float32(rng.standard_normal((k, n)).astype(np.float32), "bf16")
    c = bitexact.from_float32(rng.standard_normal((m, n)).astype(np.float32), "fp32")
    for arch, step in (("sm_90", 16), ("sm_80", 8)):
        whole = bitexact.mma(a, b, c, arch=arch)
        by_hand = c
        for first in range(0, k, step):
            by_hand = bitexact.mma(a[:, first:first + step], b[first:first + step], by_hand, arch=arch)
        np.testing.assert_array_equal(whole, by_hand)
        compared(whole.size)
    assert (bitexact.mma(a, b, c, arch="sm_90") != bitexact.mma(a, b, c, arch="sm_80")).any()


def test_mma_refuses_what_the_tensor_cores_do_not_take():
    a = np.zeros((16, 16), np.uint16)
    with pytest.raises(ValueError, match="not bf16 into fp16"):
        bitexact.mma(a, a, input_format="bf16", acc_format="fp16")
    with pytest.raises(ValueError, match="b needs 16 rows"):
        bitexact.mma(a, np.zeros((8, 8), np.uint16))
    with pytest.raises(ValueError, match="unknown architecture .sm_70.; the architectures are: sm_90, sm_80"):
        bitexact.mma(a, a, arch="sm_70")
    with pytest.raises(ValueError, match=r"no tensor-core unit of sm_80 is measured for e4m3 inputs \(sm80 takes bf16, fp16\)"):
        bitexact.mma(np.zeros((16, 16), np.uint8), np.zeros((16, 8), np.uint8), input_format="e4m3", arch="sm_80")
    with pytest.raises(ValueError, match="not tf32 into fp16"):
        bitexact.mma(np.zeros((8, 8), np.uint32), np.zeros((8, 8), np.uint32), input_format="tf32", acc_format="fp16")
    with pytest.raises(ValueError, match=r"expected shape \(64, 16\)"):
        bitexact.wgmma(a, a)
    with pytest.raises(ValueError, match="multiple of 8"):
        bitexact.wgmma(np.zeros((64, 16), np.uint16), np.zeros((16, 12), np.uint16))



def test_fp32_and_bf16_alu_instructions_replay_the_h200(data_dir, compared):
    """add/mul/fma.{rn,rz,rm,rp}{,.ftz}.f32 and add/mul/fma.rn.bf16: the elementwise operations
    under cuda_env() give the GPU's bits."""
    modes = {"rn": "nearest_even", "rz": "toward_zero", "rm": "downward", "rp": "upward"}
    total = 0
    for file, format in (("ops_fp32.bin", "fp32"), ("ops_bf16.bin", "bf16")):
        arrays = read_section(data_dir / file)
        a, b, c = arrays["a"], arrays["b"], arrays["c"]
        outputs = [name for name in arrays if name not in ("a", "b", "c")]
        assert len(outputs) == (24 if format == "fp32" else 3)
        for name in outputs:
            op, mode, *rest = name.split(".")
            environment = bitexact.cuda_env(modes[mode], ftz="ftz" in rest)
            operands = (a, b, c) if op == "fma" else (a, b)
            out, _ = getattr(bitexact, op)(*operands, format=format, **environment)
            np.testing.assert_array_equal(out, arrays[name], err_msg=name)
            total += out.size
    compared(total)


def test_cvt_instructions_replay_the_h200(data_dir, compared):
    arrays = read_section(data_dir / "ops_cvt.bin")
    outputs = [name for name in arrays if name.startswith("cvt")]
    assert len(outputs) == 6
    total = 0
    for name in outputs:
        instruction = name.split(" ")[0]
        if "x2" in instruction:
            out = bitexact.cvt(instruction, arrays["a"], arrays["b"])
        else:
            out = bitexact.cvt(instruction, arrays["a"])
        np.testing.assert_array_equal(out, arrays[name], err_msg=name)
        total += out.size
    compared(total)


def test_mufu_ex2_and_rcp_replay_the_h200(data_dir, compared):
    samples = read_mufu_samples(data_dir / "mufu_samples.bxs")
    assert samples["x"].size == 96_520
    for function, column in ((bitexact.ex2_approx, "ex2"), (bitexact.rcp_approx, "rcp")):
        np.testing.assert_array_equal(function(samples["x"], ftz=True), samples[column + "_ftz"])
        np.testing.assert_array_equal(function(samples["x"]), samples[column])
    compared(4 * samples["x"].size)


def test_mufu_lg2_replays_the_h100(data_dir, compared):
    arrays = read_section(data_dir / "ops_lg2.bin")
    np.testing.assert_array_equal(bitexact.lg2_approx(arrays["x"], ftz=True), arrays["lg2.approx.ftz.f32"])
    np.testing.assert_array_equal(bitexact.lg2_approx(arrays["x"]), arrays["lg2.approx.f32"])
    compared(2 * arrays["x"].size)
