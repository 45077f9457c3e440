"""bitexact.attention_backward against PyTorch's flash backward as the H100 ran it
(tests/data/attention_backward: dq, dk, dv under torch.use_deterministic_algorithms),
bit for bit, and its refusals."""

import os

import numpy as np
import pytest

import bitexact

SLOW = bool(os.environ.get("BITEXACT_SLOW"))


def cases(data_dir):
    folder = data_dir / "attention_backward"
    for line in (folder / "MANIFEST").read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == "case":
            name, batch, heads, rows, keys, d, causal, scale = fields[1:9]
            yield folder / name, dict(batch_heads=(int(batch), int(heads)), causal=causal == "1",
                                      scale=None if scale == "default" else float(scale)), int(rows)


def load(head):
    return {name: np.load(head / f"{name}.npy") for name in ("q", "k", "v", "o", "lse", "do", "dq", "dk", "dv")}


def test_every_captured_head_bit_for_bit(data_dir, compared):
    checked = 0
    for head, keywords, rows in cases(data_dir):
        if rows == 4096 and not SLOW:
            continue  # seconds more; BITEXACT_SLOW=1 runs it (the C++ replay always does)
        a = load(head)
        g = bitexact.attention_backward(a["q"], a["k"], a["v"], a["o"], a["lse"], a["do"], **keywords)
        for name in ("dq", "dk", "dv"):
            np.testing.assert_array_equal(g[name], a[name], err_msg=f"{head.name}: {name}")
            checked += compared(a[name].size)
        assert g["delta"].shape == a["lse"].shape and g["delta"].dtype == np.uint32
    assert checked == (3 * 512 * 128) * 2 + (1000 + 2 * 300) * 64 + 3 * 512 * 64 + 3 * 17 * 128 + \
        (3 * 4096 * 64 if SLOW else 0)


def test_dk_and_dv_do_not_depend_on_the_calls_heads(data_dir):
    # batch_heads decides how dQ's additions are ordered, nothing else: the 1000 x 300 head given as
    # part of a call of 132 heads (one dQ buffer instead of 66) keeps its dK and dV.
    head, keywords, _ = next(c for c in cases(data_dir) if c[0].name.startswith("d64_q1000_k300"))
    a = load(head)
    g = bitexact.attention_backward(a["q"], a["k"], a["v"], a["o"], a["lse"], a["do"], causal=True,
                                    batch_heads=(1, 132))
    np.testing.assert_array_equal(g["dk"], a["dk"])
    np.testing.assert_array_equal(g["dv"], a["dv"])


def test_refusals(data_dir):
    head, keywords, _ = next(c for c in cases(data_dir) if c[0].name.startswith("d128_n17"))
    a = load(head)
    args = [a[x] for x in ("q", "k", "v", "o", "lse", "do")]
    with pytest.raises(ValueError, match=r"o has shape \(16, 128\); expected q's \(17, 128\)"):
        bitexact.attention_backward(a["q"], a["k"], a["v"], a["o"][:16], a["lse"], a["do"])
    with pytest.raises(ValueError, match=r"lse has shape \(16,\); expected \(17,\)"):
        bitexact.attention_backward(a["q"], a["k"], a["v"], a["o"], a["lse"][:16], a["do"])
    with pytest.raises(TypeError, match="d_o: expected an array of bf16 bit patterns"):
        bitexact.attention_backward(*args[:5], a["do"].astype(np.int32))
    with pytest.raises(ValueError, match="sm_count is a positive integer"):
        bitexact.attention_backward(*args, sm_count=0)
    with pytest.raises(ValueError, match="head_dim 32 is not described"):
        small = [x[:, :32] if x.ndim == 2 else x for x in args]
        bitexact.attention_backward(*small)
    with pytest.raises(ValueError, match="batch_heads"):
        bitexact.attention_backward(*args, batch_heads=(0, 1))
