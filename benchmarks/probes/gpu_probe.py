"""Probe runs on the GPU: launch-path profile and a cross-entropy configuration sweep.

    python benchmarks/probes/gpu_probe.py
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
from pathlib import Path

import torch
import triton
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: gpu_kernels
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import gpu_kernels as tk  # noqa: E402

import compiler  # noqa: E402

SRC = (Path(__file__).resolve().parents[1] / "gpu_kernels.py").read_text()
add = compiler.compile_source(SRC, kernel="add_kernel")
ce = compiler.compile_source(SRC, kernel="cross_entropy_fwd")


def profile_launch() -> None:
    x = torch.randn(1024, device="cuda")
    o = torch.empty_like(x)
    f = lambda: add[(1,)](x, x, o, 1024, BLOCK=1024)  # noqa: E731
    for _ in range(500):
        f()
    torch.cuda.synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20000):
        f()
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14)
    print(s.getvalue()[:3000])


def sweep_ce() -> None:
    rows, vocab = 8192, 128 * 1024
    lg = torch.randn(rows, vocab, device="cuda")
    tgt = torch.randint(0, vocab, (rows,), device="cuda")
    out = torch.empty(rows, device="cuda")
    for block in (1024, 2048, 4096, 8192):
        for nw in (4, 8, 16):
            ta = triton.testing.do_bench(
                lambda b=block, w=nw: ce[(rows,)](lg, tgt, out, vocab, vocab, BLOCK=b, num_warps=w),
                return_mode="median")
            tt = triton.testing.do_bench(
                lambda b=block, w=nw: tk.cross_entropy_fwd[(rows,)](lg, tgt, out, vocab, vocab, BLOCK=b, num_warps=w),
                return_mode="median")
            gb = rows * vocab * 4 / 1e6
            print(f"CE BLOCK={block:5} warps={nw:2}: anvil {gb / ta:6.0f} GB/s  triton {gb / tt:6.0f} GB/s")


if __name__ == "__main__":
    profile_launch()
    sweep_ce()
