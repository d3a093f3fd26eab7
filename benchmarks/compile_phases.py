"""Cold compile time of the GPU benchmark kernels, phase by phase.

Compiles the configurations benchmarks/gpu.py launches (same order, one process, empty caches) for
sm_90a and prints per-kernel phase times: frontend (AST -> Tile IR), passes, LLVM IR building,
LLVM O3 + PTX emission, assembly (ptxas or in-process libnvJitLink: the line above the table says
which), and the wall time of the compile including one-time process costs (imports, LLVM
initialisation). torch and triton are imported first, as benchmarks/gpu.py does (their objects make
the Python heap, and so any full garbage collection, much larger); --bare skips that.

--repeat N runs N fresh processes and reports each number's minimum (the machine may be shared and
noisy); --ptx DIR writes each kernel's PTX there for before/after comparison.

--launch (needs a GPU): instead of compiling for an explicit signature, makes the first call of each
kernel with CUDA tensors exactly as benchmarks/gpu.py measures it (synchronize, time the call and a
synchronize), and reports that beside the compile phases; "other" is the part of the first call
outside the compile (specialization, cache key, module load, launch).

    python benchmarks/compile_phases.py [--repeat N] [--bare] [--launch] [--ptx DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-cold-"))
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SRC = (HERE / "gpu_kernels.py").read_text()

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
NUMBERS = ("first_call_ms", "other_ms", "wall_ms", *PHASES)


def ptx_stats(ptx: str) -> dict[str, int]:
    body = [ln.strip() for ln in ptx.splitlines()]
    instrs = [ln for ln in body if ln and not ln.startswith(("//", ".", "{", "}", "$")) and ln.endswith(";")]
    return {"instrs": len(instrs), "ld.v4": len(re.findall(r"ld\.global(?:\.\w+)*\.v4", ptx)),
            "st.v4": len(re.findall(r"st\.global(?:\.\w+)*\.v4", ptx)),
            "ld.global": len(re.findall(r"\bld\.global", ptx)), "st.global": len(re.findall(r"\bst\.global", ptx))}


def _row(label: str, ck: Any, wall: float) -> dict[str, Any]:
    row: dict[str, Any] = {"kernel": label, "wall_ms": wall, **ck.metadata["compile_ms"]}
    row.update(ptx_stats(ck.asm["ptx"]))
    row["regs"] = ck.metadata["n_regs"]
    return row


def compile_all(ptx_dir: Path | None) -> list[dict[str, Any]]:
    import compiler

    rows = []
    kernels = {name: compiler.compile_source(SRC, kernel=name, filename="gpu_kernels.py")
               for name in {c[1] for c in CONFIGS}}
    for label, name, sig, cx, nw in CONFIGS:
        t0 = time.perf_counter()
        ck = kernels[name].compile(sig, cx, target="cuda:sm_90a", num_warps=nw)
        rows.append(_row(label, ck, (time.perf_counter() - t0) * 1e3))
        if ptx_dir is not None:
            ptx_dir.mkdir(parents=True, exist_ok=True)
            (ptx_dir / f"{label.replace(' ', '_')}.ptx").write_text(ck.asm["ptx"])
    return rows


def launch_all() -> list[dict[str, Any]]:
    """The first call of each kernel with CUDA tensors, timed as benchmarks/gpu.py times it (small
    shapes: the kernels' run time is not the point here)."""
    import torch

    import compiler

    dev = "cuda"
    ak = {name: compiler.compile_source(SRC, kernel=name, filename="gpu_kernels.py")
          for name in {c[1] for c in CONFIGS}}
    x = torch.randn(1 << 16, device=dev)
    o = torch.empty_like(x)
    s32 = torch.randn(64, 4096, device=dev)
    s16 = s32.half()
    xl = torch.randn(64, 8192, device=dev, dtype=torch.float16)
    w, b = torch.rand(8192, device=dev, dtype=torch.float16), torch.randn(8192, device=dev, dtype=torch.float16)
    mean, rstd = torch.empty(64, device=dev), torch.empty(64, device=dev)
    xr, wr = torch.randn(64, 8192, device=dev, dtype=torch.bfloat16), torch.rand(8192, device=dev, dtype=torch.bfloat16)
    lg, tgt = torch.randn(64, 128 * 1024, device=dev), torch.randint(0, 128 * 1024, (64,), device=dev)
    loss = torch.empty(64, device=dev)
    xc = torch.randn(64, 1024, device=dev)
    calls = [
        lambda: ak["add_kernel"][(64,)](x, x, o, x.numel(), BLOCK=1024, num_warps=4),
        lambda: ak["softmax_kernel"][(64,)](torch.empty_like(s32), s32, 4096, 4096, 4096, BLOCK=4096, num_warps=8),
        lambda: ak["softmax_kernel"][(64,)](torch.empty_like(s16), s16, 4096, 4096, 4096, BLOCK=4096, num_warps=8),
        lambda: ak["layer_norm_fwd"][(64,)](xl, torch.empty_like(xl), w, b, mean, rstd, 8192, 8192, 1e-5, BLOCK=8192,
                                            num_warps=8),
        lambda: ak["rms_norm_fwd"][(64,)](xr, torch.empty_like(xr), wr, 8192, 8192, 1e-6, BLOCK=8192, num_warps=8),
        lambda: ak["cross_entropy_fwd"][(64,)](lg, tgt, loss, 128 * 1024, 128 * 1024, BLOCK=4096, num_warps=8),
        lambda: ak["cumsum_rows"][(64,)](xc, torch.empty_like(xc), 1024, 1024, BLOCK=1024, num_warps=4),
    ]
    rows = []
    for (label, *_), call in zip(CONFIGS, calls, strict=True):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ck = call()
        torch.cuda.synchronize()
        first = (time.perf_counter() - t0) * 1e3
        row = _row(label, ck, first)
        row["first_call_ms"] = first
        row["other_ms"] = first - ck.metadata["compile_ms"].get("total_ms", 0.0)
        rows.append(row)
    return rows


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    t_start = time.perf_counter()
    if not args.bare:
        try:
            import torch  # noqa: F401 - the heap of benchmarks/gpu.py
            import triton  # noqa: F401
            import triton.testing  # noqa: F401
        except ImportError:
            pass
    t_libs = time.perf_counter()
    import compiler  # noqa: F401

    t_import = time.perf_counter()
    rows = launch_all() if args.launch else compile_all(args.ptx)
    from compiler.backends.nvidia import jitlink

    status = getattr(jitlink, "status", None)  # absent in older versions (before/after comparisons)
    return {"rows": rows, "import_libs_ms": (t_libs - t_start) * 1e3, "import_compiler_ms": (t_import - t_libs) * 1e3,
            "assembler": status(0.0) if status is not None else "?"}


def merge_min(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = runs[0]
    for r in runs[1:]:
        for k in ("import_libs_ms", "import_compiler_ms"):
            out[k] = min(out[k], r[k])
        for a, b in zip(out["rows"], r["rows"], strict=True):
            for k in NUMBERS:
                if k in a and k in b:
                    a[k] = min(a[k], b[k])
    out["runs"] = len(runs)
    return out


def show(res: dict[str, Any], launch: bool) -> None:
    runs = res.get("runs", 1)
    print(f"import torch+triton {res['import_libs_ms']:.0f} ms, import compiler {res['import_compiler_ms']:.0f} ms"
          + (f" (min of {runs} runs)" if runs > 1 else ""))
    print(f"assembler: {res['assembler']}")
    lead = ("first", "other") if launch else ()
    hdr = f"{'kernel':20} " + "".join(f"{h:>7}" for h in lead) + f"{'wall':>7} " + \
        " ".join(f"{p[:-3]:>14}" for p in PHASES) + f" {'instrs':>7} {'ld.v4':>6} {'st.v4':>6} {'regs':>5}"
    print(hdr)
    for r in res["rows"]:
        pre = "".join(f"{r[k]:7.1f}" for k in ("first_call_ms", "other_ms")) if launch else ""
        print(f"{r['kernel']:20} {pre}{r['wall_ms']:7.1f} "
              + " ".join(f"{r.get(p, float('nan')):14.1f}" for p in PHASES)
              + f" {r['instrs']:7d} {r['ld.v4']:6d} {r['st.v4']:6d} {r['regs'] or 0:5d}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1, help="fresh processes to run; each number's minimum is shown")
    ap.add_argument("--bare", action="store_true", help="do not import torch and triton first")
    ap.add_argument("--launch", action="store_true", help="first calls with CUDA tensors (needs a GPU)")
    ap.add_argument("--ptx", type=Path)
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_run(args)))
        return
    if args.repeat <= 1:
        res = one_run(args)
    else:
        cmd = [sys.executable, __file__, "--child"] + ["--bare"] * args.bare + ["--launch"] * args.launch
        runs = []
        for _ in range(args.repeat):
            env = dict(os.environ, ANVIL_CACHE_DIR=tempfile.mkdtemp(prefix="anvil-cold-"))
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
            if proc.returncode != 0:
                sys.exit(f"a measuring run failed (exit status {proc.returncode}); its error is above")
            out = proc.stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
        res = merge_min(runs)
        if args.ptx is not None:
            compile_all(args.ptx)
    show(res, args.launch)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
