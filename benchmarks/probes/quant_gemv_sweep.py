"""Sweep of awq_gemv's packed-layout configs (tools/kernels/int4_packed.py) at batch 1 on the H200,
beside torch's bf16 GEMV, under benchmarks/quant.py's timer (256 MiB write flush, GPU spin, CUDA
events, medians); two rounds, so that the spread between them shows what is noise.

    python benchmarks/probes/quant_gemv_sweep.py                 # both shapes of issue 6
    python benchmarks/probes/quant_gemv_sweep.py --shapes 14336x4096 --rounds 3

Each config is checked against torch before it is timed (a failure prints and the sweep goes on).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from functools import partial
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.quant import Timer, _rel  # noqa: E402
from tools.kernels.int4 import awq_dequantize, awq_quantize_pack  # noqa: E402
from tools.kernels.w4a16 import GemvConfig, awq_gemv, awq_gemv_pack  # noqa: E402

# awq_gemv keywords; qweight in awq_gemv_pack's 4-D layout, or its blocks with "blocks": True
CONFIGS: list[dict[str, Any]] = [
    {"num_warps": 2, "split_k": 8},
    {"num_warps": 8, "split_k": 1, "warp_split": True, "ahead": 1},
    {"blocks": True},
    {"blocks": True, "num_warps": 4, "split_k": 1},
    {"blocks": True, "num_warps": 4, "split_k": 1, "stages": 2},
    {"blocks": True, "num_warps": 2, "split_k": 1},
    {"blocks": True, "num_warps": 8, "split_k": 1, "stages": 2},
    {"blocks": True, "num_warps": 16, "split_k": 1},
    {"blocks": True, "num_warps": 4, "split_k": 2},
    {"blocks": True, "num_warps": 4, "split_k": 1, "stages": 0, "ahead": 1},
    {"num_warps": 16, "split_k": 1, "warp_split": True, "ahead": 1},
    {"blocks": True, "num_warps": 8, "split_k": 2},
]


def name_of(cfg: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in cfg.items()) or "default"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="14336x4096,28672x8192", help="comma-separated NxK")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--first", type=int, default=len(CONFIGS), help="time only the first N configs")
    ap.add_argument("--pick", default="", help="comma-separated indices of CONFIGS to time (in place of --first)")
    args = ap.parse_args(argv)
    configs = [CONFIGS[int(i)] for i in args.pick.split(",")] if args.pick else CONFIGS[:args.first]
    timer = Timer("cuda", reps=args.reps, warmup=10)
    torch.manual_seed(0)
    res: dict[tuple[str, str], list[float]] = {}
    for shape in args.shapes.split(","):  # (blocks: awq_gemv_pack(qweight, qzeros, scales); {"blocks": True} alone is
        # awq_gemv's default there)
        n, k = (int(v) for v in shape.split("x"))
        w = torch.randn(n, k, device="cuda") * 0.02
        qw, qz, sc = awq_quantize_pack(w, 128)
        w_bf16 = awq_dequantize(qw, qz, sc, torch.bfloat16)
        qp, qb = awq_gemv_pack(qw), awq_gemv_pack(qw, qz, sc)
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        ref = x @ w_bf16.t()
        cases: dict[str, Any] = {"torch bf16": partial(torch.matmul, x, w_bf16.t())}
        for cfg in configs:
            opts = {k: v for k, v in cfg.items() if k != "blocks"}
            cases[name_of(cfg)] = partial(awq_gemv, x, qb if cfg.get("blocks") else qp, qz, sc, GemvConfig(**opts))
        failed: set[str] = set()
        for _ in range(args.rounds):
            for name, fn in cases.items():
                if name in failed:
                    continue
                try:
                    err = _rel(fn(), ref)
                    if not err < 2e-2:
                        raise AssertionError(f"relative error {err:.3g}")
                except Exception as exc:  # noqa: BLE001
                    print(f"{shape} {name}: FAILED {type(exc).__name__}: {exc}", file=sys.stderr)
                    traceback.print_exc(limit=2, file=sys.stderr)
                    failed.add(name)
                    continue
                res.setdefault((shape, name), []).append(timer.median_ms(fn) * 1e3)
        del w, qw, qz, sc, w_bf16, qp, qb
        torch.cuda.empty_cache()
    print(f"\nawq_gemv packed configs, batch 1, {torch.cuda.get_device_name()} (us, medians; one column per round)\n")
    print("| shape | config | us | x torch (best round) |\n|---|---|---|---|")
    for (shape, name), v in res.items():
        t_torch = min(res[(shape, "torch bf16")])
        print(f"| {shape} | {name} | {' / '.join(f'{t:.2f}' for t in v)} | {t_torch / min(v):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
