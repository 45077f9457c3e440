"""tools/pack_attention_captures.py's .npy reader and writer: what it writes into tests/data is
what numpy.save writes, byte for byte, and what it reads is the array NumPy reads."""

import importlib.util

import numpy as np
import pytest

from conftest import REPOSITORY

_SPEC = importlib.util.spec_from_file_location("pack_attention_captures",
                                               REPOSITORY / "tools" / "pack_attention_captures.py")
pack = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(pack)


# The shapes and element types the tool writes: one head's [N, d] bf16 patterns (uint16 or int16 as
# PyTorch's .view(torch.int16) saves them), float32 [N] rows (lse, delta), and a 1-row head.
@pytest.mark.parametrize("dtype, shape", [("<u2", (17, 64)), ("<i2", (1000, 128)), ("<f4", (1000,)),
                                          ("<f4", (1,)), ("<u2", (1, 64))])
def test_written_files_are_numpys_and_read_back_the_same(tmp_path, dtype, shape):
    rng = np.random.default_rng(len(shape) * 1000 + shape[0])
    array = rng.integers(0, 1 << 16, size=shape).astype(dtype) if dtype[1] in "ui" else \
        rng.standard_normal(shape).astype(dtype)
    ours, numpys = tmp_path / "ours.npy", tmp_path / "numpys.npy"
    pack.write_npy(ours, array.dtype.str, array.shape, array.tobytes())
    np.save(numpys, array)
    assert ours.read_bytes() == numpys.read_bytes()
    assert pack.read_npy(ours) == (dtype, shape, array.tobytes())
    # A head cut out of a [1, H, N, d] capture reads as that head's bytes.
    heads = np.stack([array, array[::-1].copy()])[None]
    np.save(numpys, heads)
    descr, read_shape, data = pack.read_npy(numpys)
    assert (descr, read_shape) == (dtype, (1, 2) + shape)
    assert data[len(data) // 2:] == heads[0, 1].tobytes()
