"""cuDNN's fp8 SDPA forward through the binding: the committed heads of tests/data/attention_fp8
(cuda/capture/cudnn_fp8_sdpa_probe.py on an H100) by the preset cudnn_sdpa_fp8_sm90 and by its
description as JSON, every O and Stats bit; the command's results on the same files; bad calls refused."""
import json
import subprocess

import numpy as np
import pytest

import bitexact
from bitexact import _bitexact

SCALES = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")


def fp8_cases(data_dir):
    """Each MANIFEST case: (name, rows, keys, d, causal, scales as floats, folder)."""
    folder = data_dir / "attention_fp8"
    cases = []
    for line in (folder / "MANIFEST").read_text().splitlines():
        if line.startswith("case "):
            _, name, rows, keys, d, causal, *bits = line.split()
            scales = [float(np.uint32(int(b, 16)).view(np.float32)) for b in bits]
            cases.append((name, int(rows), int(keys), int(d), causal == "1", scales, folder / name))
    assert len(cases) == 9
    return cases


def run(folder, rows, keys, d, causal, scales, **choice):
    q, k, v = (np.load(folder / f"{x}.npy").reshape(-1) for x in "qkv")
    o, lse = _bitexact._attention_fp8(q, k, v, 1, 1, rows, keys, d, causal, None, list(scales), None,
                                      choice.get("preset"), choice.get("kernel"), 0)
    return o.reshape(rows, d), lse.view(np.float32)


def test_the_preset_reproduces_every_committed_bit(data_dir, compared):
    description = json.dumps(bitexact.kernel_description("cudnn_sdpa_fp8_sm90"))
    for name, rows, keys, d, causal, scales, folder in fp8_cases(data_dir):
        o, lse = run(folder, rows, keys, d, causal, scales, preset="cudnn_sdpa_fp8_sm90")
        np.testing.assert_array_equal(o, np.load(folder / "o.npy"), err_msg=name)
        np.testing.assert_array_equal(lse.view(np.uint32), np.load(folder / "stats.npy").view(np.uint32), err_msg=name)
        o_json, lse_json = run(folder, rows, keys, d, causal, scales, kernel=description)
        np.testing.assert_array_equal(o_json, o)
        np.testing.assert_array_equal(lse_json, lse)
        compared(o.size + lse.size)


def test_the_command_computes_the_same_bits(data_dir, cli, tmp_path):
    name, rows, keys, d, causal, scales, folder = fp8_cases(data_dir)[0]
    args = [cli, "attention", *(str(folder / f"{x}.npy") for x in "qkv"), "--preset", "cudnn_sdpa_fp8_sm90",
            "--out-o", str(tmp_path / "o.npy"), "--out-lse", str(tmp_path / "lse.npy")]
    for scale, value in zip(SCALES, scales):
        args += ["--" + scale.replace("_", "-"), repr(value)]
    subprocess.run(args + (["--causal"] if causal else []), check=True, capture_output=True)
    o, lse = run(folder, rows, keys, d, causal, scales, preset="cudnn_sdpa_fp8_sm90")
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), o)
    np.testing.assert_array_equal(np.load(tmp_path / "lse.npy"), lse)


def test_bad_calls_are_refused(data_dir):
    name, rows, keys, d, causal, scales, folder = fp8_cases(data_dir)[0]
    for bad in (0.0, -2.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="^scale_o .* is not a positive finite number"):
            run(folder, rows, keys, d, causal, [*scales[:5], bad], preset="cudnn_sdpa_fp8_sm90")
    with pytest.raises(ValueError, match="takes bf16 Q, K and V .* are for fp8 kernels"):
        run(folder, rows, keys, d, causal, [None] * 6, preset="pytorch_sdpa_cudnn_sm90")
    q = np.zeros((rows, d), np.uint16)
    with pytest.raises(ValueError, match="takes e4m3 Q, K and V"):
        bitexact.attention(q, np.zeros((keys, d), np.uint16), np.zeros((keys, d), np.uint16),
                           preset="cudnn_sdpa_fp8_sm90")
    with pytest.raises(ValueError, match="head_dim 96 is not described"):
        _bitexact._attention_fp8(np.zeros(rows * 96, np.uint8), np.zeros(keys * 96, np.uint8),
                                 np.zeros(keys * 96, np.uint8), 1, 1, rows, keys, 96, False, None, [None] * 6, None,
                                 "cudnn_sdpa_fp8_sm90", None, 0)


def test_attention_takes_fp8_bits_and_the_scales_by_name(data_dir, compared):
    """bitexact.attention's keyword form: one-byte Q, K and V and FP8_SCALES by name, the same bits
    as the committed heads; the bf16-only options refused."""
    for name, rows, keys, d, causal, scales, folder in fp8_cases(data_dir):
        q, k, v = (np.load(folder / f"{x}.npy") for x in "qkv")
        o, lse = bitexact.attention(q, k, v, preset="cudnn_sdpa_fp8_sm90", causal=causal,
                                    **dict(zip(bitexact.FP8_SCALES, scales)))
        assert o.dtype == np.uint8 and o.shape == q.shape and lse.shape == q.shape[:-1]
        np.testing.assert_array_equal(o, np.load(folder / "o.npy"), err_msg=name)
        np.testing.assert_array_equal(lse.view(np.uint32), np.load(folder / "stats.npy").view(np.uint32), err_msg=name)
        compared(o.size + lse.size)
    for option in ({"splits": 2}, {"batch_heads": (1, 1)}):
        with pytest.raises(ValueError, match="is not an option of fp8 kernels"):
            bitexact.attention(q, k, v, preset="cudnn_sdpa_fp8_sm90", **option)
    # beta and eps set a stabilized fp8 preset's rule; cuDNN's has none.
    with pytest.raises(ValueError, match="^beta sets the stabilized softmax; it needs a stabilized preset"):
        bitexact.attention(q, k, v, preset="cudnn_sdpa_fp8_sm90", beta=2.0)
    with pytest.raises(ValueError, match="takes bf16 Q, K and V"):
        bitexact.attention(q, k, v, preset="pytorch_sdpa_flash_sm90")
