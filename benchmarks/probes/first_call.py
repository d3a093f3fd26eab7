# ruff: noqa: E501  (a one-off probe)
"""Probe (not a benchmark): where a cold first call of a compiled LayerNorm+GELU goes, anvil and
inductor (fresh cache directories, worker pools and imports warmed by an unrelated compile).

    python benchmarks/probes/first_call.py
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-cold-"))
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cold-"))
os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-cold-"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from compiler.torch.backend import anvil  # noqa: E402

dev = "cuda" if torch.cuda.is_available() else "cpu"
for backend in ("inductor", anvil):
    torch.compile(lambda x: torch.cos(x) + 1, backend=backend)(torch.randn(64, device=dev))
ln = torch.nn.LayerNorm(1024).to(dev, torch.bfloat16)
x = torch.randn(16384, 1024, device=dev, dtype=torch.bfloat16)
for label, backend in (("inductor", "inductor"), ("anvil", anvil)):
    torch._dynamo.reset()
    f = torch.compile(lambda x: F.gelu(ln(x)), backend=backend)
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    with torch.no_grad():
        f(x)
    pr.disable()
    if dev == "cuda":
        torch.cuda.synchronize()
    print(f"==== {label}: first call {time.perf_counter() - t0:.3f} s")
    pstats.Stats(pr).sort_stats("cumulative").print_stats(70)
