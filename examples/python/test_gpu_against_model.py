"""What a kernel author's pytest file looks like: GPU results checked bit for bit
against bitexact's models. Every test skips cleanly without PyTorch or a CUDA GPU;
the flash-attention test also needs sm_90 (H100, H200), the GPU its preset models.

    PYTHONPATH=build/python python3 -m pytest -q examples/python

docs/python.md has its output from a run on an H100 (4 passed, 3,301,728 elements compared).
"""

import pytest

import bitexact
from bitexact.testing import assert_bitexact, assert_matches_model

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)


def random_bf16(shape, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=generator, device="cuda").to(torch.bfloat16)


def test_elementwise_bf16_kernels_round_as_the_model():
    # PyTorch's CUDA add and mul of bf16 tensors: one correct rounding per element
    # (the model's add.rn.bf16 / mul.rn.bf16). NaN payloads differ between devices.
    a, b = random_bf16(1 << 20, 0), random_bf16(1 << 20, 1)
    for torch_op, model in ((torch.add, bitexact.add), (torch.mul, bitexact.mul)):
        compared = assert_matches_model(torch_op(a, b).cpu(), model, a.cpu(), b.cpu(), format="bf16",
                                        **bitexact.cuda_env(), any_nan=True)
        assert compared == a.numel()


def test_float32_to_bf16_on_the_gpu_is_cvt_rn_bf16_f32():
    generator = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(1 << 20, generator=generator, device="cuda") * 1e4
    gpu = x.to(torch.bfloat16).cpu()
    bits, _ = bitexact.from_torch(x)
    assert assert_matches_model(gpu, bitexact.cvt, "cvt.rn.bf16.f32", bits, actual_format="bf16") == x.numel()


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                    reason="the pytorch_sdpa_flash_sm90 preset models sm_90's flash kernels")
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_matches_the_emulator(causal):
    batch, heads, n, d = 1, 4, 300, 64
    q, k, v = (random_bf16((batch, heads, n, d), seed) for seed in (3, 4, 5))
    # The flash backend itself (not whichever SDPA picks), returning the log-sum-exp too.
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)[:2]
    # The GPU record with this GPU's SM count: it decides PyTorch's split count.
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    gpu = next(name for name, _summary, sms, _arch in bitexact.list_gpus() if sms == sm_count)
    model_o, model_lse = bitexact.attention(q.cpu(), k.cpu(), v.cpu(), causal=causal, gpu=gpu)
    assert assert_bitexact(o.cpu(), model_o, format="bf16") == o.numel()
    assert assert_bitexact(lse.cpu().contiguous().view(torch.int32), model_lse,
                                            format="fp32") == lse.numel()
