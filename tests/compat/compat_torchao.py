"""torchao's Triton kernels: int8 matmuls through block pointers, an autotuned int8 matmul with a
`@triton.heuristics` flag, and an fp8 quantizer registered through `torch.library.triton_op`.

torchao's blockwise-fp8 and MX kernels are defined only where `torch.utils._triton.has_triton()`
sees a GPU, so they are not in the CPU table.
"""

from __future__ import annotations

from typing import Any

import torch
from compat_harness import Case, Inputs, rand

LIB = "torchao"


def b_int8(shape: tuple[int, ...], dev: str) -> Inputs:
    m, k, n = shape
    return {"a": torch.randint(-128, 128, (m, k), device=dev, dtype=torch.int8),
            "b": torch.randint(-128, 128, (k, n), device=dev, dtype=torch.int8),
            "rs": torch.rand(m, device=dev) + 0.5, "cs": torch.rand(n, device=dev) + 0.5}


def config() -> Any:
    import triton  # the stand-in: torchao's wrappers take a Config

    return triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=2)


def int_mm(m: Any, i: Inputs) -> torch.Tensor:
    c = torch.full((i["a"].shape[0], i["b"].shape[1]), -7, device=i["a"].device, dtype=torch.int32)
    return m.int_matmul_kernel(i["a"], i["b"], c, config())


def int_scaled_mm(m: Any, i: Inputs) -> torch.Tensor:
    c = torch.full((i["a"].shape[0], i["b"].shape[1]), float("nan"), device=i["a"].device)
    return m.int_scaled_matmul_kernel(i["a"], i["b"], i["rs"][:, None].contiguous(), c, config())


def mm_ref(i: Inputs) -> torch.Tensor:
    return i["a"].double() @ i["b"].double()


def b_padded(shape: tuple[int, ...], dev: str) -> Inputs:
    """int8 operands whose K is even but not a multiple of BLOCK_K, each a view into a larger buffer of
    random bytes, so that the unmasked loads past K read allocated (nonzero) memory."""
    m, k, n = shape
    a = torch.randint(-128, 128, (m, k + 32), device=dev, dtype=torch.int8)[:, :k]
    b = torch.randint(-128, 128, (k + 32, n), device=dev, dtype=torch.int8)[:k]
    return {"a": a, "b": b, "rs": torch.rand(m, device=dev) + 0.5}


def b_fp8(shape: tuple[int, ...], dev: str) -> Inputs:
    return {"x": rand(*shape, device=dev, dtype=torch.bfloat16, scale=3.0)}


def act_quant_ref(i: Inputs) -> list[torch.Tensor]:
    x = i["x"].double()
    m, k = x.shape
    blocks = x.view(m, k // 128, 128)
    scale = (448.0 / blocks.abs().amax(-1).clamp(min=1e-12)).float()
    y = (blocks * scale[..., None].double()).clamp(-448, 448).float().to(torch.float8_e4m3fn).view(m, k)
    return [y.double(), (1.0 / scale).double()]  # the kernel's tl.div_rn(1.0, scale): a float32 division


CASES = [
    Case("int_matmul_block_pointers", LIB, "torchao.kernel.intmm_triton", ("matmul_kernel_with_block_pointers",),
         b_int8, int_mm, mm_ref, ((37, 64, 48), (70, 100, 33))),
    Case("int_scaled_matmul", LIB, "torchao.kernel.intmm_triton",
         ("scaled_matmul_kernel_with_block_pointers",), b_int8, int_scaled_mm,
         lambda i: mm_ref(i) * i["rs"].double()[:, None], ((37, 45, 48), (70, 96, 33)), atol=1e-2, rtol=1e-6),
    Case("int_scaled_matmul_even_k", LIB, "torchao.kernel.intmm_triton", ("scaled_matmul_kernel_with_block_pointers",),
         b_padded, int_scaled_mm, lambda i: mm_ref(i) * i["rs"].double()[:, None], ((70, 100, 33),), atol=1e-2,
         rtol=1e-6,
         triton_fails="the wrapper passes EVEN_K=(K % 2 == 0), so for an even K that is not a multiple of BLOCK_K "
                      "the kernel loads past K unmasked (TRITON_INTERPRET=1 gives errors of ~5e4 too)"),
    Case("scaled_int8_mm_autotune_heuristics", LIB, "torchao.prototype.quantized_training.int8_mm",
         ("_scaled_int8_mm_kernel",), b_int8, lambda m, i: m.scaled_int8_mm_cuda(i["a"], i["b"], i["rs"], i["cs"]),
         lambda i: mm_ref(i) * i["rs"].double()[:, None] * i["cs"].double(), ((37, 100, 45),), atol=1e-2, rtol=1e-6),
    Case("fp8_blockwise_act_quant_triton_op", LIB, "torchao.prototype.blockwise_fp8_training.kernels",
         ("triton_fp8_blockwise_act_quant_lhs_kernel",), b_fp8,
         lambda m, i: [t.double() for t in m.triton_fp8_blockwise_act_quant_lhs(i["x"], 128)], act_quant_ref,
         ((37, 256), (130, 384)), atol=0, rtol=0),
]
