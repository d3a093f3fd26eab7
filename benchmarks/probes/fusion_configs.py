# ruff: noqa: B023, E501  (a one-off probe: closures are called inside their loop iteration)
"""Probe (not a benchmark): launch configurations of the anvil backend's fused kernels on one GPU,
and where an encoder layer's time goes under anvil and inductor.

    python benchmarks/probes/fusion_configs.py [--profile-only]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from compiler.torch import runner  # noqa: E402
from compiler.torch.backend import anvil  # noqa: E402

DEV, BF16 = "cuda", torch.bfloat16


def bench(fn: Any) -> float:
    return float(triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median"))


def rows_sweep() -> None:
    mask = torch.randn(1024, 1024, device=DEV, dtype=BF16)
    ln = torch.nn.LayerNorm(1024).to(DEV, BF16)
    w = torch.randn(2048, device=DEV, dtype=BF16)
    cases = {
        "softmax mask 4x16x1024x1024": (lambda x: torch.softmax(x * 0.125 + mask, -1),
                                        torch.randn(4, 16, 1024, 1024, device=DEV, dtype=BF16)),
        "layernorm+gelu 8192x1024": (lambda x: F.gelu(ln(x)), torch.randn(8192, 1024, device=DEV, dtype=BF16)),
        "rmsnorm 4096x2048": (lambda x: x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(BF16) * w,
                              torch.randn(4096, 2048, device=DEV, dtype=BF16)),
        "softmax 8192x4096": (lambda x: torch.softmax(x, -1), torch.randn(8192, 4096, device=DEV, dtype=BF16)),
        "softmax 65536x128": (lambda x: torch.softmax(x, -1), torch.randn(65536, 128, device=DEV, dtype=BF16)),
    }
    real = runner.rows_config
    for name, (fn, x) in cases.items():
        torch._dynamo.reset()
        ind = torch.compile(fn)
        with torch.no_grad():
            t_ind = bench(lambda: ind(x))
        print(f"{name}: inductor {t_ind * 1e3:.1f} us; default config {real(x.numel() // x.shape[-1], x.shape[-1], 'cuda')}")
        results = []
        for rows, warps in itertools.product((1, 2, 4, 8, 16), (1, 2, 4, 8, 16)):
            runner.rows_config = lambda R, C, d, rows=rows, warps=warps: (rows, warps)
            torch._dynamo.reset()
            f = torch.compile(fn, backend=anvil)
            try:
                with torch.no_grad():
                    t = bench(lambda: f(x))
            except Exception as e:  # noqa: BLE001
                print(f"  rows={rows} warps={warps}: {type(e).__name__}")
                continue
            results.append((t, rows, warps))
        results.sort()
        print("  best:", ", ".join(f"rows={r} warps={w} {t * 1e3:.1f} us ({t_ind / t:.2f}x)" for t, r, w in results[:5]))
        print("  worst:", ", ".join(f"rows={r} warps={w} {t * 1e3:.1f} us" for t, r, w in results[-3:]))
        runner.rows_config = real


def pointwise_sweep() -> None:
    bias = torch.randn(4096, device=DEV, dtype=BF16)
    x = torch.randn(16384, 4096, device=DEV, dtype=BF16)
    y = torch.randn(16384, 4096, device=DEV, dtype=BF16)
    cases = {"bias+gelu": (lambda x: F.gelu(x + bias), (x,)), "silu(x)*y": (lambda x, y: F.silu(x) * y, (x, y))}
    real = runner.pointwise_config
    for name, (fn, args) in cases.items():
        torch._dynamo.reset()
        ind = torch.compile(fn)
        t_ind = bench(lambda: ind(*args))
        print(f"{name}: inductor {t_ind * 1e3:.1f} us")
        results = []
        for block, warps in itertools.product((256, 512, 1024, 2048, 4096), (2, 4, 8)):
            runner.pointwise_config = lambda n, d, block=block, warps=warps: (block, warps)
            torch._dynamo.reset()
            f = torch.compile(fn, backend=anvil)
            results.append((bench(lambda: f(*args)), block, warps))
        results.sort()
        print("  best:", ", ".join(f"BLOCK={b} warps={w} {t * 1e3:.1f} us ({t_ind / t:.2f}x)" for t, b, w in results[:5]))
        runner.pointwise_config = real


def profile() -> None:
    layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, batch_first=True,
                                             activation="gelu").to(DEV, BF16)
    x = torch.randn(8, 512, 768, device=DEV, dtype=BF16, requires_grad=True)
    for label, backend in (("inductor", "inductor"), ("anvil", anvil)):
        torch._dynamo.reset()
        f = torch.compile(layer, backend=backend)

        def step() -> None:
            out = f(x)
            out.backward(torch.ones_like(out))
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
        print(f"=== {label}: BERT layer fwd+bwd, 5 steps")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile-only", action="store_true")
    a = ap.parse_args()
    if not a.profile_only:
        rows_sweep()
        pointwise_sweep()
    profile()
