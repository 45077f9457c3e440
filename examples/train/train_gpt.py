#!/usr/bin/env python3
"""A small GPT trained in bf16 three times on the same data from the same
seed: with PyTorch's flash attention, with bitexact's standard kernel and with
its stabilized kernel (the paper's Algorithm 3), the backward pass being
PyTorch's flash backward each time (bitexact.torch).

The standard kernel gives PyTorch flash's bits, so the first two loss curves
must be equal bit for bit: the script says whether they are. Deterministic
algorithms are on (PyTorch's flash backward adds dQ with atomics otherwise,
and then no two runs agree, not even two of PyTorch's own).

The data is the Python standard library's own source, read as bytes (a
256-token vocabulary), so the run needs nothing beyond PyTorch. Per step it
records the loss (and its float32 bits), the step's time (forward, backward and
optimizer, CUDA events) and the leading indicator of docs/bias.md over every
layer (bitexact_torch.flash_forward_with_indicator on the step's Q, K, V,
computed outside the timed part). After training, the three models' step
times are taken again, interleaved in rotating order on the same batches
(--timing-rounds), and the overhead ratios come from those medians; --profile
adds a CPU profile of a few steps of each model (where the host's time goes,
and how many copy kernels run).

PyTorch's flash attention is what F.scaled_dot_product_attention runs with the
other backends switched off once (no per-call context manager in the step).

Under torchrun the models train with DistributedDataParallel, one GPU a
process, each rank on its own batches; the losses recorded are rank 0's, and
the bit-for-bit comparison covers every rank's.

    PYTHONPATH=build/python python3 examples/train/train_gpt.py --out run.json [--steps 400]
    PYTHONPATH=build/python python3 examples/train/train_gpt.py --out big.json --layers 12 --context 2048 \
        --width 768 --heads 12 --batch 8 --steps 100
    PYTHONPATH=build/python torchrun --nproc-per-node 2 examples/train/train_gpt.py --out ddp.json
    PYTHONPATH=build/python python3 examples/train/train_gpt.py --out fp8.json --fp8
    python3 examples/train/plot.py run.json docs/train/gpt_h100
"""
import argparse
import glob
import json
import os
import statistics
import struct
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS, before CUDA starts
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import bitexact.torch as bitexact_torch  # noqa: E402

# The GPT example's size (head dim 64); the options change it.
CONTEXT, LAYERS, WIDTH, HEADS = 1024, 4, 512, 8

ATTENTION = {
    "pytorch_flash": F.scaled_dot_product_attention,
    "standard": bitexact_torch.scaled_dot_product_attention,
    "stabilized": bitexact_torch.stabilized(beta=2.0, eps=1e-3),
}
# --fp8: two more runs whose forward is our FP8 kernel (bitexact_torch.fp8_attention: Q, K, V quantised
# per tensor to e4m3, PyTorch's bf16 flash backward), standard and stabilized.
FP8_ATTENTION = {
    "fp8_standard": bitexact_torch.fp8_attention(),
    "fp8_stabilized": bitexact_torch.fp8_attention(stabilize=1, beta=2.0, eps=1e-3),
}


class Block(nn.Module):
    def __init__(self, attention):
        super().__init__()
        self.attention = attention
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
        self.last_qkv = None

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, WIDTH // HEADS).permute(2, 0, 3, 1, 4)
        self.last_qkv = (q.detach(), k.detach(), v.detach())
        o = self.attention(q, k, v, is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, t, WIDTH))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, attention):
        super().__init__()
        self.embed, self.position = nn.Embedding(256, WIDTH), nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block(attention) for _ in range(LAYERS))
        self.norm, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, 256, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def corpus():
    files = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))
    data = b"".join(open(path, "rb").read() for path in files)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long(), len(files)


def timed_step(model, optimizer, window):
    """One training step (forward, backward, optimizer): its loss and its time in ms (CUDA events)."""
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(window[:, :-1])
    loss = F.cross_entropy(logits.float().view(-1, 256), window[:, 1:].reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    end.record()
    torch.cuda.synchronize()
    return loss.item(), begin.elapsed_time(end)


def train(name, data, steps, batch, lr, rank):
    torch.manual_seed(0)
    model = GPT(ATTENTION[name]).cuda()
    blocks = model.blocks
    if dist.is_initialized():
        model = DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    batches = torch.Generator().manual_seed(1 + rank)
    log = {"loss": [], "loss_bits": [], "step_ms": [], "p_bar_ones_rows": [], "max_repeated_rows": []}
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / 50)
        start = torch.randint(0, len(data) - CONTEXT - 1, (batch,), generator=batches)
        window = torch.stack([data[s:s + CONTEXT + 1] for s in start.tolist()]).cuda()
        try:
            value, ms = timed_step(model, optimizer, window)
        except ValueError as error:  # an fp8 run whose activations left the finite numbers: amax inf or NaN
            log["stopped"] = {"step": step, "error": str(error)}
            print(f"{name} stopped at step {step}: {error}", flush=True)
            break
        log["loss"].append(value)
        log["loss_bits"].append(struct.unpack("<I", struct.pack("<f", value))[0])
        log["step_ms"].append(ms)
        ones = repeated = 0
        with torch.no_grad():
            for block in blocks:
                _, _, p_bar_ones, max_repeated = bitexact_torch.flash_forward_with_indicator(*block.last_qkv, True)
                ones += int((p_bar_ones >= 2).sum())
                repeated += int(max_repeated.sum())
        log["p_bar_ones_rows"].append(ones)
        log["max_repeated_rows"].append(repeated)
        if rank == 0 and (step % 50 == 0 or step == steps - 1):
            print(f"{name} step {step}: loss {value:.4f}, {log['step_ms'][-1]:.2f} ms, rows with P-bar = 1 twice {ones}, "
                  f"max repeated {repeated}", flush=True)
    return log, model, optimizer


def step_times(trained, data, batch, rounds, rank):
    """Each model's step time after training, the three interleaved in rotating
    order on the same batches, so that clock and thermal drift fall on all
    three alike: the median per model, in ms, and each model's step over
    PyTorch flash's in the same round, the ratios' quartiles (a paired
    comparison, which drift between rounds does not move)."""
    times = {name: [] for name in trained}
    names = list(trained)
    batches = torch.Generator().manual_seed(2 + rank)
    for r in range(rounds):
        start = torch.randint(0, len(data) - CONTEXT - 1, (batch,), generator=batches)
        window = torch.stack([data[s:s + CONTEXT + 1] for s in start.tolist()]).cuda()
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(timed_step(*trained[name], window)[1])
    ratios = {name: statistics.quantiles([a / b for a, b in zip(t, times["pytorch_flash"])], n=4)
              for name, t in times.items() if name != "pytorch_flash"}
    return {name: statistics.median(t) for name, t in times.items()}, ratios


def cpu_profile(trained, data, batch, steps=5):
    """A few steps of each model under torch.profiler: per step, the host's time in the operators that
    take the most of it (self CPU time), the CUDA kernels launched and, of them, the copies, and the
    GPU's time in all kernels and in those that take the most of it."""
    from torch.profiler import ProfilerActivity, profile
    batches = torch.Generator().manual_seed(3)
    result = {}
    for name, (model, optimizer) in trained.items():
        windows = []
        for _ in range(steps + 2):
            start = torch.randint(0, len(data) - CONTEXT - 1, (batch,), generator=batches)
            windows.append(torch.stack([data[s:s + CONTEXT + 1] for s in start.tolist()]).cuda())
        for window in windows[:2]:
            timed_step(model, optimizer, window)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for window in windows[2:]:
                timed_step(model, optimizer, window)
        events = prof.key_averages()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        top = sorted((e for e in events if e.device_type == torch.autograd.DeviceType.CPU),
                     key=lambda e: e.self_cpu_time_total, reverse=True)[:12]
        gpu = sorted((e for e in events if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.self_device_time_total, reverse=True)
        result[name] = {
            "steps": steps,
            "kernels_per_step": len(kernels) / steps,
            # The GPU's side: every kernel's time a step, and the kernels that take the most of it.
            "gpu_ms_per_step": sum(e.time_range.elapsed_us() for e in kernels) / 1000 / steps,
            "top_gpu_us_per_step": {e.key[:90]: e.self_device_time_total / steps for e in gpu[:14]},
            "copy_kernels_per_step": sum("copy" in e.name.lower() for e in kernels) / steps,
            "cpu_ms_per_step": sum(e.self_cpu_time_total for e in events
                                   if e.device_type == torch.autograd.DeviceType.CPU) / 1000 / steps,
            "top_self_cpu_us_per_step": {e.key: e.self_cpu_time_total / steps for e in top},
            # The attention's own operators and autograd nodes: host time spent in them and below them.
            "attention_cpu_us_per_step": {
                e.key: {"calls": e.count / steps, "total": e.cpu_time_total / steps, "self": e.self_cpu_time_total / steps}
                for e in events if e.device_type == torch.autograd.DeviceType.CPU and
                any(word in e.key.lower() for word in ("flash", "bitexact", "scaled_dot_product"))},
        }
    return result


def main():
    global CONTEXT, LAYERS, WIDTH, HEADS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--timing-rounds", type=int, default=60)
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--context", type=int, default=CONTEXT)
    parser.add_argument("--width", type=int, default=WIDTH)
    parser.add_argument("--heads", type=int, default=HEADS)
    parser.add_argument("--profile", action="store_true", help="a CPU profile of 5 steps of each model")
    parser.add_argument("--fp8", action="store_true", help="also train with our FP8 forward, standard and stabilized")
    args = parser.parse_args()
    CONTEXT, LAYERS, WIDTH, HEADS = args.context, args.layers, args.width, args.heads
    if args.fp8:
        ATTENTION.update(FP8_ATTENTION)
    rank, world = 0, 1
    if "WORLD_SIZE" in os.environ:  # torchrun
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.use_deterministic_algorithms(True)
    # PyTorch's flash path without a context manager in the step: the other backends off.
    torch.backends.cuda.enable_cudnn_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.enable_math_sdp(False)
    data, files = corpus()
    runs, trained = {}, {}
    for name in ATTENTION:
        runs[name], *trained[name] = train(name, data, args.steps, args.batch, args.lr, rank)
    # Runs that stopped (fp8 ones whose activations overflowed) are not timed.
    median, paired = step_times({name: t for name, t in trained.items() if "stopped" not in runs[name]}, data,
                                args.batch, args.timing_rounds, rank)
    same = runs["pytorch_flash"]["loss_bits"] == runs["standard"]["loss_bits"]
    if world > 1:  # every rank's curves, and rank 0's step times
        agree = torch.tensor([int(same)], device="cuda")
        dist.all_reduce(agree, op=dist.ReduceOp.MIN)
        same = bool(agree.item())
    profiled = cpu_profile(trained, data, args.batch) if args.profile else None
    if world > 1:
        dist.destroy_process_group()
        if rank != 0:
            sys.exit(0 if same else 1)
    props = torch.cuda.get_device_properties(0)
    summary = {
        "gpu": props.name, "gpus": world, "torch": torch.__version__, "cuda": torch.version.cuda,
        "steps": args.steps, "batch": args.batch, "context": CONTEXT, "layers": LAYERS, "width": WIDTH,
        "heads": HEADS, "corpus_bytes": len(data), "corpus_files": files,
        "standard_equals_pytorch_flash_bitwise": same,
        "first_step_apart": next((i for i, (a, b) in enumerate(zip(runs["pytorch_flash"]["loss_bits"],
                                                                    runs["standard"]["loss_bits"])) if a != b), None),
        "timing_rounds": args.timing_rounds,
        "median_step_ms": median,
        "stabilized_over_standard": median["stabilized"] / median["standard"],
        "standard_over_pytorch_flash": median["standard"] / median["pytorch_flash"],
        "stabilized_over_pytorch_flash": median["stabilized"] / median["pytorch_flash"],
        # The fp8 runs' steps include the quantisation's amax and its copy to the host, three a layer.
        "fp8_final_loss": {name: runs[name]["loss"][-1] for name in FP8_ATTENTION if name in runs},
        "stopped": {name: run["stopped"] for name, run in runs.items() if "stopped" in run},
        "paired_ratio_quartiles_over_pytorch_flash": paired,
        "cpu_profile": profiled,
    }
    json.dump({"summary": summary, "runs": runs}, open(args.out, "w"))
    print(json.dumps(summary, indent=1))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
