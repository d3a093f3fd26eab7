"""GEMM: Anvil beside Triton (the same kernel source, benchmarks/gemm_kernels.py) and torch (cuBLAS).

For each shape and dtype, every config in CONFIGS is compiled by both compilers and timed; the
table shows each compiler's best config (medians of CUDA-event timing with L2 flushed,
triton.testing.do_bench), TFLOP/s, the ratio, and the compile time of the best config. Outputs are
checked against torch before timing.

    python benchmarks/gemm.py [--quick] [--fast] [--fp8 | --fp8-only] [--anvil-only] [--config 128x256x64x8x3 ...]
                              [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cold-"))
os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-cold-"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemm_kernels as tk  # noqa: E402

import compiler  # noqa: E402

SRC = (Path(__file__).resolve().parent / "gemm_kernels.py").read_text()
AK = compiler.compile_source(SRC, kernel="matmul_kernel", filename="gemm_kernels.py")

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
CONFIGS = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 128, 32, 4, 4), (64, 128, 64, 4, 4),
           (128, 64, 64, 4, 4), (256, 128, 64, 8, 3)]
CONFIGS.append((128, 256, 64, 8, 4))
FAST = [CONFIGS[1], CONFIGS[2], CONFIGS[5], CONFIGS[6]]  # the best of each compiler in earlier sweeps


def bench(fn: Any) -> float:
    return float(triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median"))


def run(kernel: Any, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: tuple[int, ...]) -> None:
    bm, bn, bk, w, s = cfg
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, ACTIVATION="", num_warps=w, num_stages=s)


def sweep(row: dict[str, Any], kernels: list[tuple[str, Any]], configs: list[tuple[int, ...]], flop: int,
          out_dtype: torch.dtype, ref: torch.Tensor, launch: Any) -> dict[str, Any]:
    """Each compiler's best config into `row`: `launch(kernel, c, cfg)` writes c (checked against
    `ref` on the first launch, which also gives the compile time), then it is timed."""
    size = ref.shape[0]
    for name, kernel in kernels:
        best: tuple[float, tuple[int, ...], float] | None = None
        for cfg in configs:
            c = torch.full((size, size), float("nan"), device="cuda", dtype=out_dtype)
            try:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                launch(kernel, c, cfg)
                torch.cuda.synchronize()
                compile_ms = (time.perf_counter() - t0) * 1e3
                err = float((c.float() - ref).norm() / ref.norm())
                if not err < 1e-2:
                    print(f"  {name} {cfg}: wrong result (rel err {err:.2e})", flush=True)
                    continue
                ms = bench(lambda c=c, cfg=cfg, kernel=kernel: launch(kernel, c, cfg))
            except Exception as e:  # noqa: BLE001 - one failing config must not stop the sweep
                print(f"  {name} {cfg}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            print(f"  {name} {row['shape']} {row['dtype']} {cfg}: {flop / ms / 1e9:.0f} TFLOP/s, "
                  f"compile {compile_ms:.0f} ms", flush=True)
            if best is None or ms < best[0]:
                best = (ms, cfg, compile_ms)
        if best is not None:
            row[f"{name}_tflops"] = flop / best[0] / 1e9
            row[f"{name}_config"] = "x".join(map(str, best[1]))
            row[f"{name}_compile_ms"] = best[2]
    if "anvil_tflops" in row and "triton_tflops" in row:
        row["ratio"] = row["anvil_tflops"] / row["triton_tflops"]
    return row


def case(size: int, dtype: torch.dtype, configs: list[tuple[int, ...]], triton_too: bool = True) -> dict[str, Any]:
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    flop = 2 * size ** 3
    row: dict[str, Any] = {"shape": f"{size}^3", "dtype": str(dtype)[6:]}
    row["torch_tflops"] = flop / bench(lambda: torch.matmul(a, b)) / 1e9
    kernels = [("anvil", AK), ("triton", tk.matmul_kernel)][:2 if triton_too else 1]
    return sweep(row, kernels, configs, flop, dtype, a.float() @ b.float(),
                 lambda kernel, c, cfg: run(kernel, a, b, c, cfg))


AK8 = compiler.compile_source(SRC, kernel="matmul_fp8_kernel", filename="gemm_kernels.py")
# FP8 configs (BLOCK_K 128: one 128-byte swizzled row of K per operand row)
FP8_CONFIGS = [(128, 256, 128, 8, 3), (128, 128, 128, 8, 4), (256, 128, 128, 8, 3), (128, 128, 128, 4, 4)]


def run_fp8(kernel: Any, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, scale: float,
            cfg: tuple[int, ...]) -> None:
    bm, bn, bk, w, s = cfg
    m, k = a.shape
    n = b.shape[0]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), scale, BLOCK_M=bm, BLOCK_N=bn,
                 BLOCK_K=bk, GROUP_M=8, num_warps=w, num_stages=s)


def case_fp8(size: int, configs: list[tuple[int, ...]], triton_too: bool = True) -> dict[str, Any]:
    """FP8 e4m3 A [M, K] @ B [N, K]^T with a per-tensor scale, bf16 out; torch: torch._scaled_mm."""
    a = (torch.randn(size, size, device="cuda") * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(size, size, device="cuda") * 2).to(torch.float8_e4m3fn)
    scale = 0.25
    one = torch.tensor(1.0, device="cuda")
    st = torch.tensor(scale, device="cuda")
    flop = 2 * size ** 3
    row: dict[str, Any] = {"shape": f"{size}^3", "dtype": "fp8e4m3"}
    t_torch = bench(lambda: torch._scaled_mm(a, b.t(), scale_a=st, scale_b=one, out_dtype=torch.bfloat16))
    row["torch_tflops"] = flop / t_torch / 1e9
    kernels = [("anvil", AK8), ("triton", tk.matmul_fp8_kernel)][:2 if triton_too else 1]
    return sweep(row, kernels, configs, flop, torch.bfloat16, (a.float() @ b.float().t()) * scale,
                 lambda kernel, c, cfg: run_fp8(kernel, a, b, c, scale, cfg))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="4096 only, fp16 only")
    ap.add_argument("--json")
    ap.add_argument("--anvil-only", action="store_true", help="skip Triton (quick checks of Anvil variants)")
    ap.add_argument("--fast", action="store_true", help="three configs instead of the sweep")
    ap.add_argument("--fp8", action="store_true", help="also FP8 e4m3 at 8192^3 (beside torch._scaled_mm)")
    ap.add_argument("--fp8-only", action="store_true", help="only the FP8 case")
    ap.add_argument("--config", action="append", default=[],
                    help="BMxBNxBKxWARPSxSTAGES, repeatable: these configs instead")
    args = ap.parse_args()
    sizes = [4096] if args.quick else [4096, 8192]
    dtypes = [torch.float16] if args.quick else [torch.float16, torch.bfloat16]
    configs = FAST if args.fast else CONFIGS
    if args.config:
        configs = [tuple(int(x) for x in c.split("x")) for c in args.config]
    rows = [case(s, dt, configs, not args.anvil_only) for s in sizes for dt in dtypes] if not args.fp8_only else []
    if args.fp8 or args.fp8_only:
        rows.append(case_fp8(8192, FP8_CONFIGS, not args.anvil_only))
    print(f"\n{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__}")
    print(f"{'shape':8} {'dtype':9} {'anvil TF/s':>10} {'triton TF/s':>11} {'torch TF/s':>10} {'ratio':>6}  "
          f"{'anvil cfg':14} {'triton cfg':14} {'compile ms a/t':>14}")
    for r in rows:
        print(f"{r['shape']:8} {r['dtype']:9} {r.get('anvil_tflops', 0):10.0f} {r.get('triton_tflops', 0):11.0f} "
              f"{r['torch_tflops']:10.0f} {r.get('ratio', 0):6.3f}  {r.get('anvil_config', '-'):14} "
              f"{r.get('triton_config', '-'):14} "
              f"{r.get('anvil_compile_ms', 0):6.0f}/{r.get('triton_compile_ms', 0):.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
