"""The leading indicator (bitexact.repeated_max): its tie count against the stabilized rule's test written
in NumPy float32, its P-bar = 1 count against the bf16 P of bitexact.attention_row, and the PyTorch form
(bitexact.repeated_max_torch) against both on CPU tensors where torch is importable."""

import numpy as np
import pytest

import bitexact

HEAD_DIM = 64


def tie_heavy_scores(seed, shape):
    """Normal scores with every fourth row's max copied to another key, a few near ties and NaNs."""
    rng = np.random.default_rng(seed)
    s = (rng.standard_normal(shape) * 8).astype(np.float32)
    rows = s.reshape(-1, shape[-1])
    for i in range(0, rows.shape[0], 4):
        j, other = rng.integers(shape[-1], size=2)
        rows[i, other] = rows[i].max()
        rows[i + 1 if i + 1 < rows.shape[0] else i, j] = np.nextafter(rows[i].max(), np.float32(0))
    rows[2::7, 3] = np.nan
    return s


def ties_in_numpy(s, causal, eps=np.float32(1e-3), scale=np.float32(1 / np.sqrt(HEAD_DIM))):
    """(a) per row: RN(RN(max - s) * scale) <= eps at two or more visible keys, max ignoring NaN."""
    n, n_k = s.shape[-2:]
    visible = np.minimum(np.arange(n) + 1 + n_k - n, n_k) if causal else np.full(n, n_k)
    hidden = np.arange(n_k)[None, :] >= visible[:, None]
    masked = np.where(hidden, np.float32(-np.inf), s)
    with np.errstate(invalid="ignore"):
        row_max = np.where(np.isnan(masked), np.float32(-np.inf), masked).max(-1, keepdims=True)
        tied = ((row_max - masked) * scale) <= eps
    return tied.sum(-1) >= 2


@pytest.mark.parametrize("causal", [False, True])
def test_repeated_maxima_are_the_rules_test_in_numpy(compared, causal):
    s = tie_heavy_scores(1, (2, 3, 64, 64 if causal else 300))
    out = bitexact.repeated_max(s, HEAD_DIM, causal=causal, per_row=True)
    expected = ties_in_numpy(s, causal)
    np.testing.assert_array_equal(out["row_max_repeated"], expected)
    np.testing.assert_array_equal(out["rows_with_max_repeated"], expected.sum(-1))
    assert out["rows_with_max_repeated"].shape == (2, 3) and out["rows"].tolist() == [[64] * 3] * 2
    assert 0 < expected.sum() < expected.size  # both kinds of row occur
    compared(expected.size)


def p_bar_ones_of_attention_row(q, k, v, row, **options):
    """The most bf16 P = 1 in one split of a row, from the emulator's own intermediates."""
    record = bitexact.attention_row(q, k, v, row, **options)
    per_split = {}
    for block in record["blocks"]:
        per_split[block["split"]] = per_split.get(block["split"], 0) + int((block["p_bf16"] == 0x3F80).sum())
    return max(per_split.values(), default=0)


@pytest.mark.parametrize("causal, splits", [(False, None), (True, 2)])
def test_p_bar_ones_are_the_emulators_bf16_p(compared, causal, splits):
    rng = np.random.default_rng(5)
    # Integer-valued q and k: scores tie often; 48 rows, 300 keys (three blocks of 128, or splits of 256).
    q, k = (rng.integers(-1, 2, size=(rows, HEAD_DIM)).astype(np.float32) for rows in (48, 48 if causal else 300))
    q, k = bitexact.from_float32(q, "bf16"), bitexact.from_float32(k, "bf16")
    v = np.zeros_like(k)
    out = bitexact.repeated_max(q=q, k=k, causal=causal, splits=splits, per_row=True)
    expected = [p_bar_ones_of_attention_row(q, k, v, row, causal=causal, splits=splits) for row in range(48)]
    np.testing.assert_array_equal(out["row_p_bar_ones"], expected)
    assert out["rows_with_p_bar_one_twice"] == sum(e >= 2 for e in expected) > 0
    assert out["most_p_bar_ones_in_a_row"] == max(expected)
    compared(len(expected))


def test_the_interval_and_refusals():
    lowest, highest = bitexact.p_bar_one_range()
    assert lowest.dtype == np.float32 and -0.0029 < lowest < -0.0028 and 0.0056 < highest < 0.0057
    ex2 = bitexact.ex2_approx(np.array([lowest, highest, np.nextafter(lowest, np.float32(-1))], np.float32))
    assert bitexact.cvt("cvt.rn.bf16.f32", ex2).tolist() == [0x3F80, 0x3F80, 0x3F7F]
    s = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="needs head_dim"):
        bitexact.repeated_max(s)
    with pytest.raises(ValueError, match="GPU kernel's P"):
        bitexact.repeated_max(s, HEAD_DIM, preset="paper_reference")
    with pytest.raises(ValueError, match="give the scores s"):
        bitexact.repeated_max(s, HEAD_DIM, q=np.zeros((4, 64), np.uint16), k=np.zeros((4, 64), np.uint16))


@pytest.mark.parametrize("preset", ["pytorch_sdpa_flash_sm90", "pytorch_sdpa_flash_sm90_stabilized"])
@pytest.mark.parametrize("causal, splits, n, n_k", [(False, None, 70, 700), (False, 1, 70, 700), (True, None, 200, 200),
                                                  (True, 2, 600, 600)])
def test_the_pytorch_form_counts_as_the_cpp_function(compared, preset, causal, splits, n, n_k):
    """Both ways of splitting, several K/V blocks to a split (the running max matters), causal masks."""
    torch = pytest.importorskip("torch")
    s = tie_heavy_scores(7, (2, 2, n, n_k))
    # Integer-valued heads as well: ties everywhere, negative and zero maxima for the stabilized rule.
    s[1] = np.random.default_rng(8).integers(-3, 1, size=s[1].shape).astype(np.float32)
    options = dict(preset=preset, causal=causal, splits=splits, per_row=True)
    expected = bitexact.repeated_max(s, HEAD_DIM, **options)
    got = bitexact.repeated_max_torch(torch.from_numpy(s), HEAD_DIM, heads_per_chunk=3, **options)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name].numpy(), value, err_msg=name)
    assert expected["rows_with_p_bar_one_twice_at_final_max"].sum() > 0
    compared(expected["row_p_bar_ones"].size * 3)
