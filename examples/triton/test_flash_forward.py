"""The kernel author's unit test of examples/triton/flash_forward.py: its output
on the GPU, every bit of O and L, against the emulator running the kernel's
description (flash_forward.json). Needs a CUDA GPU with Triton (sm_90: the
description is the kernel as Triton 3.6 compiles it for Hopper) and the
bitexact module; skipped otherwise.

    PYTHONPATH=build/python python3 -m pytest examples/triton/test_flash_forward.py
"""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs a Hopper (sm_90) GPU", allow_module_level=True)

import bitexact  # noqa: E402
from bitexact.testing import assert_bitexact  # noqa: E402

from flash_forward import flash_forward  # noqa: E402

DESCRIPTION = os.path.join(os.path.dirname(__file__), "flash_forward.json")


def bits(t):
    return t.contiguous().cpu().view(torch.int16).numpy().view(np.uint16)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_q,n_k", [(256, 256), (200, 333)])
def test_matches_its_description_bit_for_bit(head_dim, causal, n_q, n_k):
    g = torch.Generator().manual_seed(head_dim + n_q + n_k + causal)
    q = torch.randn(1, 2, n_q, head_dim, generator=g).bfloat16()
    k = torch.randn(1, 2, n_k, head_dim, generator=g).bfloat16()
    v = torch.randn(1, 2, n_k, head_dim, generator=g).bfloat16()
    o, lse = flash_forward(q.cuda(), k.cuda(), v.cuda(), causal=causal)
    model_o, model_lse = bitexact.attention(bits(q), bits(k), bits(v), kernel=DESCRIPTION, causal=causal)
    assert_bitexact(bits(o), model_o, format="bf16")
    assert_bitexact(lse.cpu().numpy().view(np.uint32), model_lse, format="fp32")
