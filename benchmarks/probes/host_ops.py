# ruff: noqa: E501  (a one-off probe)
"""Probe (not a benchmark): host time of one compiled BERT-base encoder layer forward under eager,
inductor and anvil, op by op (torch profiler, CPU side, 20 calls).

    python benchmarks/probes/host_ops.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import minilm  # noqa: E402

from compiler.torch.backend import anvil  # noqa: E402

layer = minilm.BertLayer(768, 12, 3072).cuda().to(torch.bfloat16)
x = torch.randn(16, 512, 768, device="cuda", dtype=torch.bfloat16)
for label, b in (("eager", None), ("inductor", "inductor"), ("anvil", anvil)):
    torch._dynamo.reset()
    f: Any = layer if b is None else torch.compile(layer, backend=b)
    with torch.no_grad():
        for _ in range(10):
            f(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(100):
            f(x)
        host = (time.perf_counter() - t0) * 10
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(20):
                f(x)
            torch.cuda.synchronize()
    print(f"\n===== {label}: {host:.0f} us/call host (no profiler)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60))
