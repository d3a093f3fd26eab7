# ruff: noqa: E501  (a one-off probe)
"""Probe (not a benchmark): where a cold first call of a compiled function goes, inductor and anvil
(fresh cache directories; worker pools and imports warmed by an unrelated compile of each backend,
as benchmarks/torch_compile.py does).

    python benchmarks/probes/first_call.py [--case ln_gelu|encoder_train] [--top 70] [--only anvil]
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import minilm  # noqa: E402

from compiler.torch.backend import anvil  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--case", default="ln_gelu")
ap.add_argument("--top", type=int, default=70)
ap.add_argument("--only", default=None)
a = ap.parse_args()
dev = "cuda" if torch.cuda.is_available() else "cpu"
for backend in ("inductor", anvil):
    torch.compile(lambda x: torch.cos(x) + 1, backend=backend)(torch.randn(64, device=dev))
if a.case == "ln_gelu":
    ln = torch.nn.LayerNorm(1024).to(dev, torch.bfloat16)
    fn, x, training = (lambda x: F.gelu(ln(x))), torch.randn(16384, 1024, device=dev, dtype=torch.bfloat16), False
else:
    fn = minilm.BertLayer(768, 12, 3072).to(dev, torch.bfloat16)
    x = torch.randn(16, 512, 768, device=dev, dtype=torch.bfloat16, requires_grad=True)
    training = True
for label, backend in (("inductor", "inductor"), ("anvil", anvil)):
    if a.only and a.only != label:
        continue
    torch._dynamo.reset()
    f = torch.compile(fn, backend=backend)
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    if training:
        out = f(x)
        out.backward(torch.ones_like(out))
    else:
        with torch.no_grad():
            f(x)
    if dev == "cuda":
        torch.cuda.synchronize()
    pr.disable()
    print(f"==== {label}: first call {time.perf_counter() - t0:.3f} s")
    st = pstats.Stats(pr).sort_stats("cumulative")
    st.print_stats(a.top)
    st.sort_stats("tottime").print_stats(25)
