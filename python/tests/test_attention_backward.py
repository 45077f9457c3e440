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


def test_the_calls_heads_decide_dq(data_dir):
    # The 512 x 512 causal head came from a call of 4 heads: 33 dQ buffers, one for each of its 4 key
    # blocks. Given as part of a call of 66 heads it has 2, (t0 + t2) + (t1 + t3) instead of
    # t0 + t1 + t2 + t3, and 15 of dQ's 65,536 elements round otherwise; dK and dV stay.
    head, keywords, _ = next(c for c in cases(data_dir) if c[0].name.startswith("d128_n512_causal_ties"))
    a = load(head)
    args = [a[x] for x in ("q", "k", "v", "o", "lse", "do")]
    wrong = bitexact.attention_backward(*args, causal=True, batch_heads=(1, 66))
    assert np.count_nonzero(wrong["dq"] != a["dq"]) == 15
    np.testing.assert_array_equal(wrong["dk"], a["dk"])
    np.testing.assert_array_equal(wrong["dv"], a["dv"])
    np.testing.assert_array_equal(bitexact.attention_backward(*args, **keywords)["dq"], a["dq"])


@pytest.mark.skipif(not SLOW, reason="the 4096-row head takes seconds a call; BITEXACT_SLOW=1 runs it")
def test_one_head_alone_is_not_the_call_of_eight(data_dir):
    # The 4096 x 4096 head of a call of 2 x 4 heads: 17 dQ buffers for its 32 key blocks. As a call of
    # its own (1, 1) it would have 132, one a block, and 40 of dQ's elements differ.
    head, _, _ = next(c for c in cases(data_dir) if c[0].name.startswith("d64_n4096"))
    a = load(head)
    g = bitexact.attention_backward(*(a[x] for x in ("q", "k", "v", "o", "lse", "do")), batch_heads=(1, 1))
    assert np.count_nonzero(g["dq"] != a["dq"]) == 40
    np.testing.assert_array_equal(g["dk"], a["dk"])


def test_batch_and_heads_of_the_arrays(data_dir, compared):
    # [B, H, N, d] arrays: every head computed alone, the arrays' B and H the call's by default (the
    # 17-row head came from a call of 1 x 2 heads; here it is both of them).
    head, keywords, _ = next(c for c in cases(data_dir) if c[0].name.startswith("d128_n17"))
    a = load(head)
    both = {x: np.stack([a[x], a[x]])[None] for x in ("q", "k", "v", "o", "lse", "do")}
    g = bitexact.attention_backward(*(both[x] for x in ("q", "k", "v", "o", "lse", "do")), causal=True)
    assert g["dq"].shape == (1, 2, 17, 128) and g["dk"].shape == g["dv"].shape == (1, 2, 17, 128)
    assert g["delta"].shape == (1, 2, 17)
    for name in ("dq", "dk", "dv"):
        for h in range(2):
            np.testing.assert_array_equal(g[name][0, h], a[name], err_msg=f"head {h}: {name}")
            compared(a[name].size)
    np.testing.assert_array_equal(g["delta"][0, 0], g["delta"][0, 1])


def test_the_thread_count_changes_no_bit(data_dir, compared):
    # The 512-row head of a call of 4: dQ's 33 buffers, each with its key blocks in order, on 1 and 3 threads.
    head, keywords, _ = next(c for c in cases(data_dir) if c[0].name.startswith("d128_n512"))
    a = load(head)
    args = [a[x] for x in ("q", "k", "v", "o", "lse", "do")]
    one_thread = bitexact.attention_backward(*args, **keywords, threads=1)
    three = bitexact.attention_backward(*args, **keywords, threads=3)
    for name in ("dq", "dk", "dv", "delta"):
        np.testing.assert_array_equal(three[name], one_thread[name], err_msg=name)
        compared(one_thread[name].size)
    for name in ("dq", "dk", "dv"):
        np.testing.assert_array_equal(three[name], a[name], err_msg=name)
    with pytest.raises(ValueError, match="threads must be from 0"):
        bitexact.attention_backward(*args, threads=1025)


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
    with pytest.raises(ValueError, match="unknown GPU 'h100'; the GPUs are"):
        bitexact.attention_backward(*args, gpu="h100")
    with pytest.raises(ValueError, match="head_dim 32 is not described"):
        small = [x[:, :32] if x.ndim == 2 else x for x in args]
        bitexact.attention_backward(*small)
    with pytest.raises(ValueError, match="batch_heads"):
        bitexact.attention_backward(*args, batch_heads=(0, 1))
    with pytest.raises(ValueError, match=r"d_o has shape \(17, 64\); expected q's \(17, 128\)"):
        bitexact.attention_backward(*args[:5], a["do"][:, :64])
    with pytest.raises(TypeError, match="q: expected"):
        bitexact.attention_backward(a["q"].astype(np.float32), *args[1:])
    with pytest.raises(TypeError, match="lse: expected"):
        bitexact.attention_backward(*args[:4], a["lse"].astype(np.float64), a["do"])
    with pytest.raises(ValueError, match=r"k \(17, 64\) does not match q \(17, 128\)"):
        bitexact.attention_backward(a["q"], a["k"][:, :64], a["v"][:, :64], *args[3:])
    two_heads = [np.stack([x, x])[None] for x in args]  # [1, 2, ...]: more heads than batch_heads's call
    with pytest.raises(ValueError, match="batch_heads"):
        bitexact.attention_backward(*two_heads, batch_heads=(1, 1))
