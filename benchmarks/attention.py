"""Fused attention forward: Anvil beside Triton (the same kernel source, examples/flash_attention.py)
and torch's scaled_dot_product_attention, on one GPU.

The example's source is compiled by Anvil as written; for Triton the same text is imported with
its two `compiler` imports pointed at `triton`. Medians of CUDA-event timing (L2 flushed,
triton.testing.do_bench), TFLOP/s counting 4 * Z * H * N^2 * D (half of it when causal), each
compiler's best of the configs, outputs checked against torch first.

    python benchmarks/attention.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cold-"))
os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-cold-"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
EXAMPLE = ROOT / "examples" / "flash_attention.py"

# (BLOCK_M, BLOCK_N, num_warps)
CONFIGS = [(128, 64, 8), (128, 128, 8), (64, 64, 4)]


def _load(name: str, text: str) -> Any:
    path = Path(tempfile.mkdtemp(prefix="attn-")) / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernels() -> tuple[Any, Any]:
    src = EXAMPLE.read_text()
    anvil = _load("anvil_attention", src)
    tsrc = src.replace("import compiler.language as tl", "import triton.language as tl")
    tsrc = tsrc.replace("from compiler import cdiv, jit", "from triton import cdiv, jit")
    assert tsrc != src, "the example's imports changed: update benchmarks/attention.py"
    return anvil._attn_fwd, _load("triton_attention", tsrc)._attn_fwd


def run(kernel: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
        causal: bool, cfg: tuple[int, int, int]) -> None:
    bm, bn, w = cfg
    z, h, n, d = q.shape
    kernel[(triton.cdiv(n, bm), z * h)](q, k, v, o, lse, 1.0 / math.sqrt(d), *q.stride(), *k.stride(), *v.stride(),
                                        *o.stride(), h, n, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                                        num_warps=w)


def case(z: int, h: int, n: int, d: int, causal: bool, anvil: Any, tri: Any) -> dict[str, Any]:
    q, k, v = (torch.randn(z, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    flop = 4 * z * h * n * n * d * (0.5 if causal else 1.0)
    row: dict[str, Any] = {"shape": f"{z}x{h}x{n}x{d}", "causal": causal}
    t = float(triton.testing.do_bench(
        lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal), return_mode="median"))
    row["torch_tflops"] = flop / t / 1e9
    for name, kernel in (("anvil", anvil), ("triton", tri)):
        best = None
        for cfg in CONFIGS:
            o = torch.full_like(q, float("nan"))
            lse = torch.empty((z, h, n), device="cuda", dtype=torch.float32)
            try:
                run(kernel, q, k, v, o, lse, causal, cfg)
                torch.cuda.synchronize()
                err = float((o.float() - ref.float()).abs().max())
                if not err < 2e-2:
                    print(f"  {name} {cfg}: wrong result (max abs err {err:.2e})", flush=True)
                    continue
                ms = float(triton.testing.do_bench(lambda o=o, lse=lse, cfg=cfg, kernel=kernel: run(
                    kernel, q, k, v, o, lse, causal, cfg), warmup=5, rep=40, return_mode="median"))
            except Exception as e:  # noqa: BLE001 - one failing config must not stop the sweep
                print(f"  {name} {cfg}: {type(e).__name__}: {str(e)[:160]}", flush=True)
                continue
            print(f"  {name} {row['shape']} causal={causal} {cfg}: {flop / ms / 1e9:.0f} TFLOP/s", flush=True)
            if best is None or ms < best[0]:
                best = (ms, cfg)
        if best is not None:
            row[f"{name}_tflops"] = flop / best[0] / 1e9
            row[f"{name}_config"] = "x".join(map(str, best[1]))
    if "anvil_tflops" in row and "triton_tflops" in row:
        row["ratio"] = row["anvil_tflops"] / row["triton_tflops"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="sequence 4096 only")
    ap.add_argument("--json")
    args = ap.parse_args()
    anvil, tri = kernels()
    seqs = [4096] if args.quick else [4096, 16384]
    rows = [case(2, 16, n, 128, causal, anvil, tri) for n in seqs for causal in (False, True)]
    print(f"\n{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__}")
    print(f"{'shape':16} {'causal':6} {'anvil TF/s':>10} {'triton TF/s':>11} {'torch TF/s':>10} {'ratio':>6}  "
          f"{'anvil cfg':10} {'triton cfg':10}")
    for r in rows:
        print(f"{r['shape']:16} {str(r['causal']):6} {r.get('anvil_tflops', 0):10.0f} "
              f"{r.get('triton_tflops', 0):11.0f} {r['torch_tflops']:10.0f} {r.get('ratio', 0):6.3f}  "
              f"{r.get('anvil_config', '-'):10} {r.get('triton_config', '-'):10}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
