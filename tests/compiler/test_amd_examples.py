"""The example kernels the AMD slice lowers compile for amd:gfx942 and amd:gfx950: each example's
wrapper runs on small CPU tensors, and every specialization it compiles is compiled again for
both AMD targets (the same specialization, so the same Tile IR), to assembly without scratch and,
where a linker exists, to a code object whose kernel descriptor agrees with the metadata."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

import compiler.runtime.launch as launch
from tools.kernels.gemv_config import GemvConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from amd_checks import check_compiled  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ARCHS = ("gfx942", "gfx950")


def _load(name: str) -> ModuleType:
    key = f"anvil_amd_examples.{name}"
    mod = sys.modules.get(key)
    if mod is None:
        spec = importlib.util.spec_from_file_location(key, EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return mod


def _x() -> torch.Tensor:
    return torch.randn(37, 300)


def _fp8(rows: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(rows, cols).to(dtype)


# fp8_gemm's scales for a (16, 256) x (64, 256)^T product: per tensor, 1x128 / 128x128 blocks, per row
_ONES = (torch.ones(()), torch.ones(()))
_BLOCK = (torch.ones(16, 2), torch.ones(1, 2))
_ROWS = (torch.ones(16, 1), torch.ones(64, 1))
_W = torch.randn(64, 128) * 0.02  # fp4 / int4 weights (N, K)

CALLS: dict[str, tuple[str | tuple[str, ...], Callable[[ModuleType], Any]]] = {
    "vector_add": ("add_kernel", lambda m: m.add(torch.randn(1000), torch.randn(1000))),
    "fused_softmax": ("softmax_kernel", lambda m: m.softmax(_x())),
    "layer_norm": ("_layer_norm_fwd", lambda m: m.layer_norm_fwd(_x(), torch.randn(300), torch.randn(300))),
    "rms_norm": ("rms_norm_kernel", lambda m: m.rms_norm(_x(), torch.randn(300))),
    "dropout": ("_seeded_dropout", lambda m: m.seeded_dropout(torch.randn(1000), 0.5, 123)),
    "argmax": ("argmax_kernel", lambda m: m.argmax(_x())),
    "cross_entropy": ("cross_entropy_fwd_kernel", lambda m: m.cross_entropy(_x(), torch.randint(0, 300, (37,)))),
    "block_ptr": ("transpose_kernel", lambda m: m.transpose(torch.randn(64, 48))),
    # atomics: a scatter of atomic adds; a spin lock of atomic_cas / atomic_xchg around partial sums
    # scans: a row scanned block by block (1024 wide: lanes and 4 waves), forward and reverse
    "cumsum": ("cumsum_kernel", lambda m: (m.cumsum(torch.randn(5, 3000)), m.cumsum(torch.randn(5, 300), True))),
    "histogram": ("histc_kernel", lambda m: m.histc(torch.randn(5000), 50, -2.0, 2.0)),
    # tl.histogram: bins in LDS counted by LDS atomics, then added to global memory
    "bincount": ("bincount_kernel", lambda m: m.bincount(torch.randint(-3, 300, (7000,)), 257)),
    "layer_norm_bwd": (("_layer_norm_bwd_dx_fused", "_layer_norm_bwd_dwdb"), lambda m: m.layer_norm_bwd(
        torch.randn(37, 300), torch.randn(37, 300), torch.randn(300), torch.randn(37), torch.rand(37) + 0.5)),
    # tl.dot on MFMA: every autotuning config (32 / 64 blocks, 2 and 4 waves), fp16 and bf16
    "matmul": ("matmul_kernel", lambda m: m.matmul(torch.randn(100, 70).half(), torch.randn(70, 90).half())),
    "block_ptr_matmul": ("matmul_block_ptr_kernel", lambda m: m.matmul(torch.randn(80, 64).bfloat16(),
                                                                      torch.randn(64, 96).bfloat16())),
    # fp8 tl.dot (tools/kernels/fp8.py through the quantization example): e4m3fn with per-tensor and
    # 128x128 block scales, e4m3fnuz with per-row ones (gfx942's own format, gfx950's widened)
    "fp8_gemm": ("fp8_gemm_kernel", lambda m: [m.fp8_gemm(_fp8(16, 256, f), _fp8(64, 256, f), *s)
                                               for f, s in ((torch.float8_e4m3fn, _ONES), (torch.float8_e4m3fn, _BLOCK),
                                                            (torch.float8_e4m3fnuz, _ROWS))]),
    # fp4 (tools/kernels/fp4.py through the quantization example): NVFP4 (with its fp8 global scale's
    # amax) and MXFP4 quantize / dequantize / GEMV; codes pair up by tl.split and tl.join
    "fp4": (("fp4_quantize_kernel", "fp4_dequantize_kernel", "fp4_gemv_kernel", "fp8_amax_kernel"), lambda m: [
        (m.fp4_dequantize(p, s, g), m.fp4_gemv(torch.randn(1, 128, dtype=torch.bfloat16), p, s, g))
        for p, s, g in (m.nvfp4_quantize(_W), (*m.mxfp4_quantize(_W), None))]),
    # int4 AWQ packing, and the GEMV in bf16 pairs: rows of packed words split off by tl.split of a
    # permuted reshape
    "awq_gemv_bf16x2": (("awq_quantize_pack_kernel", "awq_gemv_kernel"), lambda m: m.awq_gemv(
        torch.randn(1, 128, dtype=torch.bfloat16), *m.awq_quantize_pack(_W, group_size=128),
        GemvConfig(mode="bf16x2"))),
    "flash_attention": ("_attn_fwd", lambda m: m.attention(*(torch.randn(1, 2, 64, 64).half() for _ in range(3)),
                                                          causal=True)),
}
# the example file of an entry whose name is not the file's
_FILE = {"layer_norm_bwd": "layer_norm", "block_ptr_matmul": "block_ptr", "bincount": "histogram",
         "fp8_gemm": "quantize_kernels", "fp4": "quantize_kernels", "awq_gemv_bf16x2": "quantize_kernels"}
# what the assembly of an entry's kernels must hold besides
_ISA = {"flash_attention": r"v_mfma_f32_16x16x(16|32)_f16", "matmul": r"v_mfma_f32_16x16x(16|32)_f16",
        "block_ptr_matmul": r"v_mfma_f32_16x16x(16|32)_bf16", "bincount": r"ds_add_u32",
        "fp8_gemm": r"v_mfma_f32_16x16x(16_f16|32_f16|32_fp8_fp8|128_f8f6f4)"}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_example_compiles_for_amd(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel_name, call = CALLS[name]
    orig = launch.compile_kernel
    compiled: list[tuple[str, Any]] = []

    def also_amd(fn: Any, specs: list[Any], opts: Any, target: str) -> Any:
        ck = orig(fn, specs, opts, target)
        if target == "cpu":
            compiled.extend((arch, orig(fn, specs, opts, f"amd:{arch}")) for arch in ARCHS)
        return ck

    monkeypatch.setattr(launch, "compile_kernel", also_amd)
    call(_load(_FILE.get(name, name)))
    assert {ck.name for _, ck in compiled} == ({kernel_name} if isinstance(kernel_name, str) else set(kernel_name))
    assert {arch for arch, _ in compiled} == set(ARCHS)
    for arch, ck in compiled:
        asm = check_compiled(ck, arch)
        assert "global_load" in asm and re.search(r"global_store|global_atomic", asm)
        assert re.search(_ISA.get(name, ""), asm)
