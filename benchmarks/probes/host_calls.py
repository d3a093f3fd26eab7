"""Probe (not a benchmark): where the host's time goes per call of a small compiled function on the
GPU (tiny tensors, so the GPU never holds the host back): microseconds per call and cProfile's
top functions by own time, inductor and anvil.

    python benchmarks/probes/host_calls.py [--top 25] [--case ln_gelu|encoder|minilm]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import minilm  # noqa: E402

from compiler.torch.backend import anvil  # noqa: E402

MINILM = {"hidden_size": 384, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "position_embedding_type": "absolute",
          "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2, "num_attention_heads": 12,
          "intermediate_size": 1536, "num_hidden_layers": 6}


def case(name: str) -> tuple[Any, list[Any]]:
    dev, bf = "cuda", torch.bfloat16
    if name == "ln_gelu":
        ln = torch.nn.LayerNorm(1024).to(dev, bf)
        return (lambda x: F.gelu(ln(x))), [torch.randn(8, 1024, device=dev, dtype=bf)]
    if name == "encoder":
        return minilm.BertLayer(768, 12, 3072).to(dev, bf), [torch.randn(1, 16, 768, device=dev, dtype=bf)]
    ids = torch.randint(1000, 30000, (2, 16), device=dev)
    return minilm.MiniLM(MINILM).to(dev, bf), [ids, torch.ones_like(ids)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--case", default="ln_gelu")
    a = ap.parse_args()
    fn, inputs = case(a.case)
    for label, backend in (("eager", None), ("inductor", "inductor"), ("anvil", anvil)):
        torch._dynamo.reset()
        f = fn if backend is None else torch.compile(fn, backend=backend)
        with torch.no_grad():
            for _ in range(20):
                f(*inputs)
            torch.cuda.synchronize()
            n = 2000 if a.case == "ln_gelu" else 200
            t0 = time.perf_counter()
            for _ in range(n):
                f(*inputs)
            us = (time.perf_counter() - t0) / n * 1e6
            torch.cuda.synchronize()
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(n):
                f(*inputs)
            pr.disable()
            torch.cuda.synchronize()
        print(f"==== {a.case} {label}: {us:.1f} us per call (host)")
        pstats.Stats(pr).sort_stats("tottime").print_stats(a.top)


if __name__ == "__main__":
    main()
