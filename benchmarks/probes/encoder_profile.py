"""Probe (not a benchmark): where a BERT-base encoder layer's time goes under eager, inductor and
anvil on the GPU: do_bench time, host time per call (calls queued without waiting), and the
profiler's kernels per call. `--no-cols` also runs anvil with column sums left to torch.

    python benchmarks/probes/encoder_profile.py [--no-cols] [--batch 16] [--model bert|minilm] [--top 18]

`--model minilm`: all-MiniLM-L6-v2's sizes (random weights), batch 64 x 128 tokens with some padding,
forward only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import minilm  # noqa: E402

import compiler.torch.backend as backend_mod  # noqa: E402
from compiler.torch.backend import anvil  # noqa: E402


def without_cols(gm: Any, example_inputs: Any) -> Any:
    from compiler.torch import partition as part

    original = backend_mod.partition
    backend_mod.partition = lambda gm, column_sums=True: part.partition(gm, column_sums=False)
    try:
        return anvil(gm, example_inputs)
    finally:
        backend_mod.partition = original


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-cols", action="store_true")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--model", choices=("bert", "minilm"), default="bert")
    ap.add_argument("--top", type=int, default=18)
    args = ap.parse_args()
    if args.model == "bert":
        layer: Any = minilm.BertLayer(768, 12, 3072).cuda().to(torch.bfloat16)
        xs = [torch.randn(args.batch, 512, 768, device="cuda", dtype=torch.bfloat16)]
        modes = (False, True)
    else:
        config = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                      intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2,
                      layer_norm_eps=1e-12, hidden_act="gelu", position_embedding_type="absolute")
        layer = minilm.MiniLM(config).cuda().to(torch.bfloat16)
        ids = torch.randint(1000, 30000, (64, 128), device="cuda")
        pad = torch.ones_like(ids)
        pad[::3, 100:] = 0
        xs = [ids, pad]
        modes = (False,)
    backends: list[tuple[str, Any]] = [("eager", None), ("inductor", "inductor"), ("anvil", anvil)]
    if args.no_cols:
        backends.append(("anvil-cols", without_cols))
    for training in modes:
        for label, b in backends:
            torch._dynamo.reset()
            f = layer if b is None else torch.compile(layer, backend=b)
            leaf = [x.detach().requires_grad_(training and x.is_floating_point()) for x in xs]

            def step(f: Any = f, leaf: list[torch.Tensor] = leaf, training: bool = training) -> Any:
                if not training:
                    with torch.no_grad():
                        return f(*leaf)
                out = f(*leaf)
                out.backward(torch.ones_like(out))
                return out
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            n = 50
            for _ in range(n):
                step()
            host = (time.perf_counter() - t0) / n * 1e3
            torch.cuda.synchronize()
            wall = (time.perf_counter() - t0) / n * 1e3
            ms = triton.testing.do_bench(step, warmup=10, rep=100, return_mode="median")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA,
                                                    torch.profiler.ProfilerActivity.CPU]) as prof:
                for _ in range(5):
                    step()
                torch.cuda.synchronize()
            ev = [e for e in prof.key_averages() if e.device_time_total > 0 and e.device_type.name == "CUDA"]
            ev.sort(key=lambda e: -e.device_time_total)
            gpu_us = sum(e.device_time_total for e in ev) / 5
            launches = sum(e.count for e in ev) / 5
            kind = "fwd+bwd" if training else "fwd"
            print(f"\n== {label} {kind}: do_bench {ms:.3f} ms, host {host:.3f} ms/call queued, "
                  f"wall {wall:.3f} ms/call, "
                  f"gpu kernels {gpu_us / 1e3:.3f} ms/call, {launches:.0f} kernels/call")
            for e in ev[:args.top]:
                print(f"  {e.device_time_total / 5:9.1f} us  x{e.count / 5:4.1f}  {e.key[:110]}")


if __name__ == "__main__":
    main()
