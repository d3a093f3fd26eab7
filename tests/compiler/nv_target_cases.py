"""Kernels compiled for each NVIDIA target by test_nv_targets.py: every @jit kernel of examples/ at a
specialization its wrapper launches (contiguous strides as the constant 1, as a launch specializes
them), the op kernels of test_ptx_ops.py, the memory-bound kernels of test_ptx.py, and the GEMM of
test_ptx_mma.py in each tensor-core dtype.

A case is (fn, signature, constexprs, num_warps, num_stages, tags): "dot" for kernels whose
`tl.dot` must reach the tensor cores, "hot" for the kernels whose speed matters (no spills there),
"debug" for a compile in debug mode. The tensor-core kernels use tiles sized for `mma.sync`, as
on Ampere: 128 x 128 fp32 accumulators on 4 warps (attention with a 128-row query block and a
128-wide head on 8) spill on these targets as on sm_80 (docs/targets.md).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import compiler
import compiler.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import ptx_ops_kernels  # noqa: E402

Case = tuple[Any, dict[str, str], dict[str, Any], int, int, frozenset[str]]


def _example(name: str) -> ModuleType:
    key = f"anvil_nv_targets_examples.{name}"
    mod = sys.modules.get(key)
    if mod is None:
        spec = importlib.util.spec_from_file_location(key, ROOT / "examples" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return mod


def _case(fn: Any, sig: dict[str, str], consts: dict[str, Any], warps: int = 4, stages: int = 3,
          tags: str = "") -> Case:
    return fn, sig, consts, warps, stages, frozenset(tags.split())


def _ptrs(names: str, ty: str) -> dict[str, str]:
    return {n: f"*{ty}" for n in names.split()}


def _ints(names: str, ty: str = "i32:16") -> dict[str, str]:
    return {n: ty for n in names.split()}


def example_cases() -> dict[str, Case]:
    ex = {n: _example(n) for n in ("argmax", "block_ptr", "cross_entropy", "cumsum", "dropout", "fused_softmax",
                                   "histogram", "layer_norm", "flash_attention", "flash_attention_bwd", "matmul",
                                   "persistent_matmul", "rms_norm")}
    attn_sig = {**_ptrs("Q K V Out", "fp16"), "LSE": "*fp32", "sm_scale": "fp32",
                **{f"stride_{t}{d}": "i32:16" for t in "qkvo" for d in ("z", "h", "m" if t in "qo" else "n")},
                "H": "i32", "N_CTX": "i32:16"}
    bwd_sig = {**_ptrs("Q K V DO", "fp16"), "LSE": "*fp32", "Delta": "*fp32", "sm_scale": "fp32", "N_CTX": "i32:16"}
    bwd_consts = {"HEAD_DIM": 64, "BLOCK_M": 32, "BLOCK_N": 32, "CAUSAL": True}
    mm_sig = {**_ptrs("a_ptr b_ptr c_ptr", "fp16"), **_ints("M N K"), **_ints("stride_am stride_bk stride_cm")}
    mm_unit = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}
    cfg = ex["matmul"].get_configs()[0]
    return {
        "argmax": _case(ex["argmax"].argmax_kernel, {**_ptrs("x_ptr max_ptr", "fp16"), "idx_ptr": "*i64",
                                                     "stride_row": "i32:16", "n_cols": "i32"}, {"BLOCK_SIZE": 2048}),
        "block_ptr_matmul": _case(ex["block_ptr"].matmul_block_ptr_kernel, mm_sig,
                                  {**mm_unit, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, tags="dot hot"),
        "block_ptr_transpose": _case(ex["block_ptr"].transpose_kernel,
                                     {**_ptrs("x_ptr y_ptr", "fp32"), **_ints("M N", "i32"),
                                      **_ints("stride_xm stride_ym")},
                                     {"stride_xn": 1, "stride_yn": 1, "BLOCK_M": 32, "BLOCK_N": 32}),
        "cross_entropy": _case(ex["cross_entropy"].cross_entropy_fwd_kernel,
                               {"logits_ptr": "*bf16", "targets_ptr": "*i64", **_ptrs("loss_ptr lse_ptr", "fp32"),
                                "stride_row": "i32:16", **_ints("n_cols ignore_index", "i32")},
                               {"BLOCK_SIZE": 4096}, tags="hot"),
        "cumsum": _case(ex["cumsum"].cumsum_kernel, {**_ptrs("x_ptr y_ptr", "fp32"), **_ints("stride_x stride_y"),
                                                     "n_cols": "i32"},
                        {"BLOCK_SIZE": 1024, "ACC_TYPE": tl.float32, "REVERSE": False}),
        "dropout": _case(ex["dropout"]._seeded_dropout, {**_ptrs("x_ptr output_ptr", "fp32"), "n_elements": "i32",
                                                         "p": "fp32", "seed": "i32"}, {"BLOCK_SIZE": 1024}),
        "fused_softmax": _case(ex["fused_softmax"].softmax_kernel,
                               {**_ptrs("output_ptr input_ptr", "fp16"),
                                **_ints("input_row_stride output_row_stride"), **_ints("n_rows n_cols", "i32")},
                               {"BLOCK_SIZE": 1024, "num_stages": 2}, tags="hot"),
        "bincount": _case(ex["histogram"].bincount_kernel, {**_ptrs("x_ptr bins_ptr", "i32"),
                                                           **_ints("n_elements num_bins", "i32")},
                          {"BLOCK_SIZE": 4096, "NUM_BINS_P2": 128, "LOCAL": True}),
        "histc": _case(ex["histogram"].histc_kernel, {"x_ptr": "*fp32", "bins_ptr": "*i32", "n_elements": "i32",
                                                     "lo": "fp32", "hi": "fp32"}, {"NUM_BINS": 16, "BLOCK_SIZE": 4096}),
        "layer_norm_fwd": _case(ex["layer_norm"]._layer_norm_fwd,
                                {**_ptrs("X Y W B", "fp16"), **_ptrs("Mean Rstd", "fp32"), "stride": "i32:16",
                                 "N": "i32", "eps": "fp32"}, {"BLOCK_SIZE": 1024}, tags="hot"),
        "layer_norm_bwd_dx": _case(ex["layer_norm"]._layer_norm_bwd_dx_fused,
                                   {**_ptrs("DX DY DW DB X W", "fp16"), **_ptrs("Mean Rstd", "fp32"), "Lock": "*i32",
                                    "stride": "i32:16", "N": "i32"}, {"GROUP_SIZE_M": 256, "BLOCK_SIZE_N": 1024}),
        "layer_norm_bwd_dwdb": _case(ex["layer_norm"]._layer_norm_bwd_dwdb,
                                     {**_ptrs("DW DB FINAL_DW FINAL_DB", "fp16"), **_ints("M N", "i32")},
                                     {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 128}),
        "attention_fwd": _case(ex["flash_attention"]._attn_fwd, attn_sig,
                               {**{f"stride_{t}k": 1 for t in "qkvo"}, "HEAD_DIM": 128, "BLOCK_M": 64, "BLOCK_N": 64,
                                "CAUSAL": True}, warps=8, tags="dot hot"),
        "attention_bwd_preprocess": _case(ex["flash_attention_bwd"]._bwd_preprocess,
                                          {**_ptrs("O DO", "fp16"), "Delta": "*fp32", "N_CTX": "i32:16"},
                                          {"HEAD_DIM": 64, "BLOCK_M": 32}),
        "attention_bwd_dkdv": _case(ex["flash_attention_bwd"]._bwd_dkdv, {**bwd_sig, **_ptrs("DK DV", "fp16")},
                                    bwd_consts, warps=8, tags="dot"),
        "attention_bwd_dq": _case(ex["flash_attention_bwd"]._bwd_dq, {**bwd_sig, "DQ": "*fp16"}, bwd_consts, warps=8,
                                  tags="dot"),
        "matmul": _case(ex["matmul"].matmul_kernel.fn, mm_sig, {**mm_unit, **cfg.kwargs, "ACTIVATION": "leaky_relu"},
                        cfg.num_warps, cfg.num_stages, tags="dot hot"),
        "persistent_matmul": _case(ex["persistent_matmul"].persistent_matmul_kernel,
                                   {**mm_sig, "bias_ptr": "*fp16"},
                                   {**mm_unit, "BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32,
                                    "GROUP_SIZE_M": 8, "NUM_SMS": 132, "HAS_BIAS": True, "ACTIVATION": "gelu_tanh"},
                                   warps=8, tags="dot hot"),
        "rms_norm": _case(ex["rms_norm"].rms_norm_kernel, {**_ptrs("X Y W", "bf16"), "Rstd": "*fp32",
                                                           **_ints("x_stride y_stride"), "N": "i32", "eps": "fp32"},
                          {"BLOCK_SIZE": 4096, "SINGLE_PASS": True}, tags="hot"),
    }


def op_cases() -> dict[str, Case]:
    """test_ptx_ops.py's kernels (join/split/cat/gather, histogram, sort, print/assert, inline asm)."""
    return {f"op_{name}": (fn, sig, cx, 4, 3, frozenset({"debug"} if debug else ()))
            for name, (fn, sig, cx, debug) in ptx_ops_kernels.CASES.items()}


def benchmark_cases() -> dict[str, Case]:
    """test_ptx.py's memory-bound kernels (benchmarks/gpu_kernels.py) and test_ptx_mma.py's GEMM
    (benchmarks/gemm_kernels.py) in each tensor-core dtype."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import test_ptx as P

    out: dict[str, Case] = {}
    for name, (sig, cx) in P.CASES.items():
        out[f"bench_{name}"] = _case(compiler.compile_source(P.SRC, kernel=name), sig, cx, tags="hot")
    gemm = compiler.compile_source((ROOT / "benchmarks" / "gemm_kernels.py").read_text(), kernel="matmul_kernel")
    for dtype in ("fp16", "bf16", "fp32", "i8", "fp8e4nv", "fp8e5"):
        acc = "i32" if dtype == "i8" else "fp32"
        sig = {**_ptrs("a_ptr b_ptr", dtype), "c_ptr": f"*{acc}", **_ints("M N K stride_am stride_bk stride_cm")}
        bk = 32 if dtype in ("fp16", "bf16", "fp32") else 64
        consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": bk,
                  "GROUP_M": 8, "ACTIVATION": "", "PRECISION": "tf32",
                  "ACC_DTYPE": tl.int32 if dtype == "i8" else tl.float32}
        out[f"gemm_{dtype}"] = _case(gemm, sig, consts, warps=8, tags="dot hot")
    return out


def all_cases() -> dict[str, Case]:
    return example_cases() | op_cases() | benchmark_cases()
