#!/usr/bin/env python3
"""A small GPT trained in bf16 three times on the same data from the same
seed: with PyTorch's flash attention, with bitexact's standard kernel and with
its stabilized kernel (the paper's Algorithm 3), the backward pass being
PyTorch's flash backward each time (cuda/attention/bitexact_flash.py).

The standard kernel gives PyTorch flash's bits, so the first two loss curves
must be equal bit for bit: the script says whether they are. Deterministic
algorithms are on (PyTorch's flash backward adds dQ with atomics otherwise,
and then no two runs agree, not even two of PyTorch's own).

The data is the Python standard library's own source, read as bytes (a
256-token vocabulary), so the run needs nothing beyond PyTorch. Per step it
records the loss (and its float32 bits), the step's time (forward, backward and
optimizer, CUDA events) and the leading indicator of docs/bias.md over every
layer (bitexact_flash.flash_forward_with_indicator on the step's Q, K, V,
computed outside the timed part). After training, the three models' step
times are taken again, interleaved in rotating order on the same batches
(--timing-rounds), and the overhead ratios come from those medians.

    python3 examples/train/train_gpt.py --out run.json [--steps 400]
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
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cuda", "attention"))
import bitexact_flash  # noqa: E402

CONTEXT, LAYERS, WIDTH, HEADS = 1024, 4, 512, 8  # head dim 64


def pytorch_flash(q, k, v, is_causal):
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


ATTENTION = {
    "pytorch_flash": pytorch_flash,
    "standard": bitexact_flash.scaled_dot_product_attention,
    "stabilized": bitexact_flash.stabilized(beta=2.0, eps=1e-3),
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


def train(name, data, steps, batch, lr):
    torch.manual_seed(0)
    model = GPT(ATTENTION[name]).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    batches = torch.Generator().manual_seed(1)
    log = {"loss": [], "loss_bits": [], "step_ms": [], "p_bar_ones_rows": [], "max_repeated_rows": []}
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / 50)
        start = torch.randint(0, len(data) - CONTEXT - 1, (batch,), generator=batches)
        window = torch.stack([data[s:s + CONTEXT + 1] for s in start.tolist()]).cuda()
        value, ms = timed_step(model, optimizer, window)
        log["loss"].append(value)
        log["loss_bits"].append(struct.unpack("<I", struct.pack("<f", value))[0])
        log["step_ms"].append(ms)
        ones = repeated = 0
        with torch.no_grad():
            for block in model.blocks:
                _, _, p_bar_ones, max_repeated = bitexact_flash.flash_forward_with_indicator(*block.last_qkv, True)
                ones += int((p_bar_ones >= 2).sum())
                repeated += int(max_repeated.sum())
        log["p_bar_ones_rows"].append(ones)
        log["max_repeated_rows"].append(repeated)
        if step % 50 == 0 or step == steps - 1:
            print(f"{name} step {step}: loss {value:.4f}, {log['step_ms'][-1]:.2f} ms, rows with P-bar = 1 twice {ones}, "
                  f"max repeated {repeated}", flush=True)
    return log, model, optimizer


def step_times(trained, data, batch, rounds):
    """Each model's step time after training, the three interleaved in rotating
    order on the same batches, so that clock and thermal drift fall on all
    three alike: the median per model, in ms."""
    times = {name: [] for name in trained}
    names = list(trained)
    batches = torch.Generator().manual_seed(2)
    for r in range(rounds):
        start = torch.randint(0, len(data) - CONTEXT - 1, (batch,), generator=batches)
        window = torch.stack([data[s:s + CONTEXT + 1] for s in start.tolist()]).cuda()
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(timed_step(*trained[name], window)[1])
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--timing-rounds", type=int, default=60)
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    data, files = corpus()
    runs, trained = {}, {}
    for name in ATTENTION:
        runs[name], *trained[name] = train(name, data, args.steps, args.batch, args.lr)
    median = step_times(trained, data, args.batch, args.timing_rounds)
    same = runs["pytorch_flash"]["loss_bits"] == runs["standard"]["loss_bits"]
    props = torch.cuda.get_device_properties(0)
    summary = {
        "gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
        "steps": args.steps, "batch": args.batch, "context": CONTEXT, "layers": LAYERS, "width": WIDTH,
        "heads": HEADS, "corpus_bytes": len(data), "corpus_files": files,
        "standard_equals_pytorch_flash_bitwise": same,
        "first_step_apart": next((i for i, (a, b) in enumerate(zip(runs["pytorch_flash"]["loss_bits"],
                                                                    runs["standard"]["loss_bits"])) if a != b), None),
        "timing_rounds": args.timing_rounds,
        "median_step_ms": median,
        "stabilized_over_standard": median["stabilized"] / median["standard"],
        "standard_over_pytorch_flash": median["standard"] / median["pytorch_flash"],
    }
    json.dump({"summary": summary, "runs": runs}, open(args.out, "w"))
    print(json.dumps(summary, indent=1))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
