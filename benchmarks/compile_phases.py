"""Cold compile time of the GPU benchmark kernels, phase by phase (no GPU needed: ptxas only).

Compiles the configurations benchmarks/gpu.py launches (same order, one process, empty caches) for
sm_90a and prints per-kernel phase times: frontend (AST -> Tile IR), passes, LLVM IR building,
LLVM O3 + PTX emission, ptxas, and the wall time including one-time process costs (imports,
LLVM initialisation). With --ptx DIR, writes each kernel's PTX there for before/after comparison.

    python benchmarks/compile_phases.py [--repeat N] [--ptx DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

T_START = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compiler  # noqa: E402

T_IMPORT = time.perf_counter()

SRC = (Path(__file__).resolve().parent / "gpu_kernels.py").read_text()

# (label, kernel, signature, constexprs, num_warps): what benchmarks/gpu.py launches, in its order
CONFIGS: list[tuple[str, str, dict[str, str], dict[str, Any], int]] = [
    ("add fp32", "add_kernel", {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32:16"},
     {"BLOCK": 1024}, 4),
    ("softmax fp32", "softmax_kernel", {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32:16",
                                        "out_stride": "i32:16", "n_cols": "i32:16"}, {"BLOCK": 4096}, 8),
    ("softmax fp16", "softmax_kernel", {"out_ptr": "*fp16", "in_ptr": "*fp16", "in_stride": "i32:16",
                                        "out_stride": "i32:16", "n_cols": "i32:16"}, {"BLOCK": 4096}, 8),
    ("layer norm fp16", "layer_norm_fwd", {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "b_ptr": "*fp16",
                                           "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "stride": "i32:16",
                                           "N": "i32:16", "eps": "fp32"}, {"BLOCK": 8192}, 8),
    ("rms norm bf16", "rms_norm_fwd", {"x_ptr": "*bf16", "y_ptr": "*bf16", "w_ptr": "*bf16", "stride": "i32:16",
                                       "N": "i32:16", "eps": "fp32"}, {"BLOCK": 8192}, 8),
    ("cross-entropy fp32", "cross_entropy_fwd", {"logits_ptr": "*fp32", "target_ptr": "*i64", "loss_ptr": "*fp32",
                                                 "stride": "i32:16", "V": "i32:16"}, {"BLOCK": 4096}, 8),
    ("cumsum fp32 rows", "cumsum_rows", {"x_ptr": "*fp32", "y_ptr": "*fp32", "stride": "i32:16", "N": "i32:16"},
     {"BLOCK": 1024}, 4),
]

PHASES = ("frontend_ms", "passes_ms", "llvm_ir_ms", "llvm_opt_ptx_ms", "ptxas_ms")


def ptx_stats(ptx: str) -> dict[str, int]:
    body = [ln.strip() for ln in ptx.splitlines()]
    instrs = [ln for ln in body if ln and not ln.startswith(("//", ".", "{", "}", "$")) and ln.endswith(";")]
    return {"instrs": len(instrs), "ld.v4": len(re.findall(r"ld\.global(?:\.\w+)*\.v4", ptx)),
            "st.v4": len(re.findall(r"st\.global(?:\.\w+)*\.v4", ptx)),
            "ld.global": len(re.findall(r"\bld\.global", ptx)), "st.global": len(re.findall(r"\bst\.global", ptx))}


def compile_all(ptx_dir: Path | None) -> list[dict[str, Any]]:
    rows = []
    kernels = {name: compiler.compile_source(SRC, kernel=name, filename="gpu_kernels.py")
               for name in {c[1] for c in CONFIGS}}
    for label, name, sig, cx, nw in CONFIGS:
        t0 = time.perf_counter()
        ck = kernels[name].compile(sig, cx, target="cuda:sm_90a", num_warps=nw)
        wall = (time.perf_counter() - t0) * 1e3
        row: dict[str, Any] = {"kernel": label, "wall_ms": wall, **ck.metadata["compile_ms"]}
        row.update(ptx_stats(ck.asm["ptx"]))
        row["regs"] = ck.metadata["n_regs"]
        rows.append(row)
        if ptx_dir is not None:
            ptx_dir.mkdir(parents=True, exist_ok=True)
            (ptx_dir / f"{label.replace(' ', '_')}.ptx").write_text(ck.asm["ptx"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptx", type=Path)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = compile_all(args.ptx)
    print(f"import compiler: {(T_IMPORT - T_START) * 1e3:.0f} ms")
    hdr = f"{'kernel':20} {'wall':>6} " + " ".join(f"{p[:-3]:>14}" for p in PHASES) + \
          f" {'instrs':>7} {'ld.v4':>6} {'st.v4':>6} {'regs':>5}"
    print(hdr)
    for r in rows:
        print(f"{r['kernel']:20} {r['wall_ms']:6.0f} " + " ".join(f"{r.get(p, float('nan')):14.1f}" for p in PHASES)
              + f" {r['instrs']:7d} {r['ld.v4']:6d} {r['st.v4']:6d} {r['regs'] or 0:5d}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
