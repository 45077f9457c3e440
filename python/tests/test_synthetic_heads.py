"""The NumPy (and torch) synthetic-head generator of cuda/attention/synthetic_heads.py
gives the bits of the C++ one (include/bitexact/testing/synthetic_heads.hpp), read
back from `bitexact bias statistics --save-heads`: every head of a small run over
every maximum kind and placement, both head dims."""

import csv
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPOSITORY

sys.path.insert(0, str(REPOSITORY / "cuda" / "attention"))
import synthetic_heads  # noqa: E402

TENSORS = ("q", "k", "v", "d_o")


def saved_heads(cli, tmp_path, head_dim, keys, ties, v_means):
    out = tmp_path / f"d{head_dim}"
    subprocess.run([cli, "bias", "statistics", "--head-dims", str(head_dim), "--keys", str(keys), "--rows", "20",
                    "--heads", "2", "--ties", ties, "--v-means", v_means, "--betas", "2", "--seed", "7",
                    "--threads", "2", "--save-heads", str(out)], check=True, capture_output=True)
    arrays = {name: np.load(out / f"{name}.npy") for name in TENSORS}
    with open(out / "heads.csv") as f:
        rows = list(csv.DictReader(f))
    return arrays, rows


def spec_of(row):
    d = int(row["head_dim"])
    return dict(head_dim=d, keys=int(row["keys"]), rows=int(row["rows"]), tile=synthetic_heads.tile_of(d),
                max_kind=row["max_kind"], placement=row["placement"], ties=int(row["ties"]),
                v_mean=float(row["v_mean"]))


@pytest.mark.parametrize("head_dim, keys, ties, v_means", [(64, 256, "1,3,64", "-1,0.5"),
                                                            (128, 128, "2,64", "-0.5,0,1")])
def test_numpy_generator_gives_the_command_s_bits(cli, tmp_path, compared, head_dim, keys, ties, v_means):
    arrays, rows = saved_heads(cli, tmp_path, head_dim, keys, ties, v_means)
    cells = 4 * 3 * len(ties.split(",")) * len(v_means.split(","))
    assert len(rows) == 2 * cells  # every cell, two heads each
    for row in rows:
        h = int(row["head"])
        head = synthetic_heads.make_head(spec_of(row), 7, h)
        for name in TENSORS:
            np.testing.assert_array_equal(head[name], arrays[name][h], err_msg=f"{name} of head {h}: {row}")
            compared(head[name].size)


def test_torch_generator_gives_the_numpy_bits(compared):
    torch = pytest.importorskip("torch")
    for placement in synthetic_heads.PLACEMENTS:
        for max_kind in synthetic_heads.MAX_KINDS:
            spec = dict(head_dim=64, keys=256, rows=24, tile=128, max_kind=max_kind, placement=placement, ties=5,
                        v_mean=-1)
            expected = synthetic_heads.make_head(spec, 3, 1234)
            got = synthetic_heads.make_head_torch(spec, 3, 1234, "cpu")
            for name, tensor in zip(TENSORS, got):
                bits = tensor.contiguous().view(torch.int16).numpy().view(np.uint16)
                np.testing.assert_array_equal(bits, expected[name], err_msg=f"{name}, {placement}, {max_kind}")
                compared(bits.size)
            assert (got[4].numpy() == expected["group_of_row"]).all()
