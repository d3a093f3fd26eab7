"""Cold compile time of the tensor-core kernels, Anvil beside Triton, for sm_90a: no GPU needed.

The kernels and configurations benchmarks/gemm.py and benchmarks/attention.py time on the H200
(their best configs), compiled as those launches specialize them (pointers and the integer
arguments divisible by 16, unit strides constant) by both compilers in one process, each with an
empty cache, after each compiler has compiled one unrelated kernel (so imports and LLVM's
initialisation are not counted). Prints Anvil's stages, both totals and the ratio (the goal:
Anvil <= 0.5x Triton), then Triton's own stages: its ptxas time is the floor both compilers share.
--repeat N runs N fresh processes and keeps each number's minimum.

    python benchmarks/compile_tc.py [--repeat N] [--only NAME] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# (name, source file, kernel, argument kinds, constexprs, num_warps, num_stages); kinds: "*dtype" a
# pointer, "i32:16" an integer divisible by 16, "fp32" a float, "1" the constant 1
GEMM_ARGS = {"a_ptr": "*{t}", "b_ptr": "*{t}", "c_ptr": "*{t}", "M": "i32:16", "N": "i32:16", "K": "i32:16",
             "stride_am": "i32:16", "stride_ak": "1", "stride_bk": "i32:16", "stride_bn": "1", "stride_cm": "i32:16",
             "stride_cn": "1"}
FP8_ARGS = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*bf16", "M": "i32:16", "N": "i32:16", "K": "i32:16",
            "stride_am": "i32:16", "stride_bn": "i32:16", "stride_cm": "i32:16", "scale": "fp32"}
ATTN_ARGS = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16", "LSE": "*fp32", "sm_scale": "fp32",
             **{f"stride_{t}{d}": ("1" if d == "k" else "i32:16")  # the head dimension is contiguous
                for t, row in (("q", "m"), ("k", "n"), ("v", "n"), ("o", "m")) for d in ("z", "h", row, "k")},
             "H": "i32:16", "N_CTX": "i32:16"}
GEMM = {"GROUP_M": 8, "ACTIVATION": ""}


def _gemm(t: str) -> dict[str, str]:
    return {k: v.format(t=t) for k, v in GEMM_ARGS.items()}


CASES: list[tuple[str, str, str, dict[str, str], dict[str, Any], int, int]] = [
    ("gemm fp16 128x256x64 w8 s3", "gemm_kernels.py", "matmul_kernel", _gemm("fp16"),
     {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, **GEMM}, 8, 3),
    ("gemm fp16 128x128x32 w4 s4", "gemm_kernels.py", "matmul_kernel", _gemm("fp16"),
     {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, **GEMM}, 4, 4),
    ("gemm bf16 128x256x64 w8 s3", "gemm_kernels.py", "matmul_kernel", _gemm("bf16"),
     {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, **GEMM}, 8, 3),
    ("gemm fp8 128x256x128 w8 s3", "gemm_kernels.py", "matmul_fp8_kernel", FP8_ARGS,
     {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8}, 8, 3),
    ("attention d128 128x64 w8", "flash_attention.py", "_attn_fwd", ATTN_ARGS,
     {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": False}, 8, 3),
    ("attention d128 128x64 w8 causal", "flash_attention.py", "_attn_fwd", ATTN_ARGS,
     {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": True}, 8, 3),
]

WARM = '''
import triton
import triton.language as tl


@triton.jit
def warm(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)
'''


def _source(file: str) -> str:
    path = HERE / file if (HERE / file).exists() else ROOT / "examples" / file
    text = path.read_text()
    return text.replace("import compiler.language as tl", "import triton.language as tl").replace(
        "from compiler import cdiv, jit", "from triton import cdiv, jit")


def _module(name: str, text: str) -> Any:
    path = Path(tempfile.mkdtemp(prefix="compile-tc-")) / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def anvil_compile(text: str, kernel: str, kinds: dict[str, str], consts: dict[str, Any], warps: int,
                  stages: int) -> dict[str, float]:
    import compiler

    sig = {k: v for k, v in kinds.items() if v != "1"}
    ones = {k: 1 for k, v in kinds.items() if v == "1"}
    fn = compiler.compile_source(text, kernel=kernel)
    t0 = time.perf_counter()
    ck = fn.compile(sig, {**ones, **consts}, target="cuda:sm_90a", num_warps=warps, num_stages=stages)
    total = (time.perf_counter() - t0) * 1e3
    phases = {k: float(v) for k, v in ck.metadata["compile_ms"].items() if k.endswith("_ms") and k != "total_ms"}
    return {"total": total, **phases}


_TRITON_STAGES: dict[str, float] = {}


def _time_triton_stages() -> None:
    """Wrap each stage Triton's CUDA backend registers (ttir, ttgir, llir, ptx, cubin) so its time
    adds to _TRITON_STAGES; skipped (an empty breakdown) where that backend's hook differs."""
    try:
        from triton.backends.nvidia.compiler import CUDABackend
    except ImportError:
        return
    add_stages = CUDABackend.add_stages

    def timed(self: Any, stages: dict[str, Any], *args: Any, **kw: Any) -> None:
        add_stages(self, stages, *args, **kw)
        for key, fn in list(stages.items()):
            def run(src: Any, md: Any, fn: Any = fn, key: str = key) -> Any:
                t0 = time.perf_counter()
                try:
                    return fn(src, md)
                finally:
                    _TRITON_STAGES[key] = _TRITON_STAGES.get(key, 0.0) + (time.perf_counter() - t0) * 1e3
            stages[key] = run

    CUDABackend.add_stages = timed  # type: ignore[method-assign]


def triton_compile(text: str, kernel: str, kinds: dict[str, str], consts: dict[str, Any], warps: int,
                   stages: int, name: str) -> float:
    import triton
    from triton.backends.compiler import GPUTarget

    fn = getattr(_module(name, text), kernel)
    names = list(fn.arg_names)
    sig: dict[str, str] = {}
    const: dict[Any, Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, n in enumerate(names):
        if n in consts or kinds.get(n) == "1" or n not in kinds:
            sig[n] = "constexpr"
            const[(i,)] = consts[n] if n in consts else (1 if n in kinds else fn.params[i].default)
            continue
        kind = kinds[n]
        sig[n] = kind.split(":")[0]
        if kind.startswith("*") or kind.endswith(":16"):
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = triton.compiler.ASTSource(fn, sig, constexprs=const, attrs=attrs)
    _TRITON_STAGES.clear()
    t0 = time.perf_counter()
    triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    return (time.perf_counter() - t0) * 1e3


def one_process(only: str | None) -> list[dict[str, Any]]:
    _time_triton_stages()
    anvil_compile(WARM, "warm", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 128}, 4, 3)
    triton_compile(WARM, "warm", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 128}, 4, 3, "warm_t")
    rows = []
    for i, (name, file, kernel, kinds, consts, warps, stages) in enumerate(CASES):
        if only and only.lower() not in name.lower():
            continue
        text = _source(file)
        a = anvil_compile(text, kernel, kinds, consts, warps, stages)
        t = triton_compile(text, kernel, kinds, consts, warps, stages, f"k{i}")
        rows.append({"case": name, "anvil": a, "triton_ms": t, "triton_stages": dict(_TRITON_STAGES)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_process(args.only)))
        return
    runs = []
    for _ in range(args.repeat):
        env = dict(os.environ, ANVIL_CACHE_DIR=tempfile.mkdtemp(prefix="anvil-cold-"),
                   TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="triton-cold-"))
        cmd = [sys.executable, __file__, "--child"] + (["--only", args.only] if args.only else [])
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    rows = []
    for i, first in enumerate(runs[0]):
        anvil = {k: min(r[i]["anvil"][k] for r in runs) for k in first["anvil"]}
        triton_stages = {k: min(r[i]["triton_stages"].get(k, 0.0) for r in runs) for k in first["triton_stages"]}
        rows.append({"case": first["case"], "anvil": anvil, "triton_ms": min(r[i]["triton_ms"] for r in runs),
                     "triton_stages": triton_stages})
    phases = [k for k in rows[0]["anvil"] if k != "total"] if rows else []
    print(f"cold compile for sm_90a, min of {args.repeat} process(es); ms")
    print(f"{'case':34} {'anvil':>8} {'triton':>8} {'ratio':>6}  " + " ".join(f"{p[:-3]:>9}" for p in phases))
    for r in rows:
        a = r["anvil"]
        print(f"{r['case']:34} {a['total']:8.0f} {r['triton_ms']:8.0f} {a['total'] / r['triton_ms']:6.2f}  "
              + " ".join(f"{a.get(p, 0):9.0f}" for p in phases))
    tphases = list(rows[0]["triton_stages"]) if rows else []
    if tphases:
        print("\ntriton's stages, ms; ptxas (cubin) as a fraction of triton's total")
        print(f"{'case':34} " + " ".join(f"{p:>7}" for p in tphases) + f" {'ptxas/total':>12}")
        for r in rows:
            ts = r["triton_stages"]
            print(f"{r['case']:34} " + " ".join(f"{ts.get(p, 0):7.0f}" for p in tphases)
                  + f" {ts.get('cubin', 0) / r['triton_ms']:12.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
