"""Probe (not a benchmark): a fused LayerNorm+GELU call on the GPU: kernel time against the host's
time per call (dynamo's guards, AOTAutograd's wrapper, the group runner, the launch), anvil and inductor.

    python benchmarks/probes/call_overhead.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from compiler.torch.backend import anvil  # noqa: E402

ln = torch.nn.LayerNorm(1024).cuda().to(torch.bfloat16)
x = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
for label, backend in (("inductor", "inductor"), ("anvil", anvil)):
    torch._dynamo.reset()
    f = torch.compile(lambda x: F.gelu(ln(x)), backend=backend)
    with torch.no_grad():
        f(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(1000):
            f(x)
        host_us = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()
        flushed = triton.testing.do_bench(lambda f=f: f(x), warmup=10, rep=60, return_mode="median") * 1e3
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                f(x)
            torch.cuda.synchronize()
    kernels = [(e.key, e.device_time_total / e.count) for e in prof.key_averages() if e.device_time_total > 0]
    print(f"{label}: host {host_us:.1f} us/call, do_bench {flushed:.1f} us, kernels {kernels}")
