"""Against PyTorch's own CPU bf16 arithmetic, where Debian's python3-torch is installed
(skipped otherwise): elementwise add and mul, and float32 to bf16 conversion; and the
views between tensors and bit-pattern arrays."""

import numpy as np
import pytest

import bitexact
from bitexact.testing import assert_bitexact, assert_matches_model

torch = pytest.importorskip("torch")


def bf16_tensors(count, seed):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(count, generator=generator).to(torch.bfloat16) * 4 for _ in range(2)]


def test_tensors_are_viewed_without_a_copy():
    a, _ = bf16_tensors(100, 0)
    bits, format = bitexact.from_torch(a)
    assert format == "bf16" and bits.dtype == np.uint16
    assert bits.ctypes.data == a.data_ptr()  # the same memory
    back = bitexact.to_torch(bits, "bf16")
    assert back.dtype == torch.bfloat16 and torch.equal(back, a)


def test_pytorch_cpu_bf16_add_and_mul_round_as_the_model(compared):
    a, b = bf16_tensors(200_000, 1)
    for op, torch_op in (("add", torch.add), ("mul", torch.mul)):
        assert compared(assert_matches_model(torch_op(a, b), getattr(bitexact, op), a, b, format="bf16")) == a.numel()


def test_pytorch_float32_to_bf16_rounds_as_the_model(compared):
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(200_000, generator=generator) * 1e3
    expected = bitexact.from_float32(x.numpy(), "bf16")
    assert compared(assert_bitexact(x.to(torch.bfloat16), expected, format="bf16")) == x.numel()


def test_an_install_without_the_gpu_kernels_says_how_to_get_them():
    """bitexact.torch's operators are built only where nvcc and a CUDA PyTorch were found at install
    time; elsewhere importing it is one ImportError naming the install command. Where they are built,
    cuda/attention/check_torch_operators.py checks them on a GPU."""
    import glob
    import importlib
    import os

    if glob.glob(os.path.join(os.path.dirname(bitexact.__file__), "_bitexact_torch*.so")):
        pytest.skip("bitexact.torch is built here: cuda/attention/check_torch_operators.py checks it on a GPU")
    with pytest.raises(ImportError, match=r"^bitexact.torch: this install has no GPU kernels .*pip install "
                                          r"--no-build-isolation \.$"):
        importlib.import_module("bitexact.torch")
