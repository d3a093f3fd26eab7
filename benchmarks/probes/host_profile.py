# ruff: noqa: B023, E501  (a one-off probe: closures are called inside their loop iteration)
"""Probe (not a benchmark): the host side of a compiled BERT-base encoder layer's forward under
anvil (cProfile of queued calls), a launch-config sweep of its 768-wide LayerNorm kernel, and its
forward+backward with column sums fused on the GPU.

    python benchmarks/probes/host_profile.py
"""

from __future__ import annotations

import cProfile
import itertools
import pstats
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
from compiler.torch import partition as part  # noqa: E402
from compiler.torch import runner  # noqa: E402
from compiler.torch.backend import anvil  # noqa: E402


def bench(fn: Any) -> float:
    return float(triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median"))


layer = minilm.BertLayer(768, 12, 3072).cuda().to(torch.bfloat16)
x = torch.randn(16, 512, 768, device="cuda", dtype=torch.bfloat16)

# 1. host profile of the forward
torch._dynamo.reset()
f = torch.compile(layer, backend=anvil)
with torch.no_grad():
    for _ in range(5):
        f(x)
    torch.cuda.synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(200):
        f(x)
    pr.disable()
    torch.cuda.synchronize()
print("== anvil fwd, 200 calls: tottime")
pstats.Stats(pr).sort_stats("tottime").print_stats(30)
print("== cumulative")
pstats.Stats(pr).sort_stats("cumulative").print_stats(30)

# per-op host cost: a runner call against a bare aten op
with torch.no_grad():
    a = torch.randn(8192, 768, device="cuda", dtype=torch.bfloat16)
    for label, fn in (("aten.add", lambda: torch.ops.aten.add.Tensor(a, a)),
                      ("aten.view", lambda: torch.ops.aten.view.default(a, [16, 512, 768])),
                      ("aten.permute", lambda: torch.ops.aten.permute.default(a, [1, 0])),
                      ("torch.empty", lambda: torch.empty((8192, 768), device="cuda", dtype=torch.bfloat16))):
        for _ in range(100):
            fn()
        t0 = time.perf_counter()
        for _ in range(2000):
            fn()
        print(f"{label}: {(time.perf_counter() - t0) / 2000 * 1e6:.1f} us host")
        torch.cuda.synchronize()

# 2. the LayerNorm kernel's configuration at C=768
ln = torch.nn.LayerNorm(768).cuda().to(torch.bfloat16)
y = torch.randn(8192, 768, device="cuda", dtype=torch.bfloat16)
fn = lambda a, b: ln(a + b)
torch._dynamo.reset()
ind = torch.compile(fn)
with torch.no_grad():
    t_ind = bench(lambda: ind(y, y))
print(f"add+layernorm 8192x768: inductor {t_ind * 1e3:.1f} us")
real = runner.rows_config
results = []
for rows, warps in itertools.product((1, 2, 4, 8), (1, 2, 4, 8)):
    runner.rows_config = lambda R, C, d, rows=rows, warps=warps: (rows, warps)
    torch._dynamo.reset()
    g = torch.compile(fn, backend=anvil)
    with torch.no_grad():
        results.append((bench(lambda: g(y, y)), rows, warps))
runner.rows_config = real
results.sort()
print("  ", ", ".join(f"rows={r} warps={w} {t * 1e3:.1f} us ({t_ind / t:.2f}x)" for t, r, w in results))

# 3. forward+backward with column sums fused on the GPU
orig = backend_mod.partition
for cols in (False, True):
    backend_mod.partition = lambda gm, column_sums=True, cols=cols: part.partition(gm, column_sums=cols)
    torch._dynamo.reset()
    f = torch.compile(layer, backend=anvil)
    leaf = x.detach().requires_grad_(True)

    def step() -> None:
        out = f(leaf)
        out.backward(torch.ones_like(out))
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    ms = bench(step)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    ev = [e for e in prof.key_averages() if e.device_time_total > 0 and e.device_type.name == "CUDA"]
    ev.sort(key=lambda e: -e.device_time_total)
    print(f"\n== anvil fwd+bwd cols={cols}: do_bench {ms:.3f} ms, gpu {sum(e.device_time_total for e in ev) / 5e3:.3f} ms")
    for e in ev[:25]:
        print(f"  {e.device_time_total / 5:9.1f} us  x{e.count / 5:4.1f}  {e.key[:110]}")
backend_mod.partition = orig
