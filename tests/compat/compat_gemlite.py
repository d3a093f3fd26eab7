"""gemlite (low-bit GEMM kernels): its Triton bit-packing kernels, which OR the shifted values of a
block together with `tl.reduce` and a `@triton.jit` combine function, and take their element
types as `tl.constexpr` dtype arguments.

gemlite's package __init__ and its GEMM modules ask for a CUDA device at import, so `gemlite.bitpack`
is imported without running the package's __init__.
"""

from __future__ import annotations

from typing import Any

import torch
from compat_harness import Case, Inputs

LIB = "gemlite"
MOD = "gemlite.bitpack"


def b_q(shape: tuple[int, ...], dev: str) -> Inputs:
    rows, cols, nbits, width = shape
    return {"w": torch.randint(0, 1 << nbits, (rows, cols), device=dev, dtype=torch.uint8), "nbits": nbits,
            "width": width}


def wrap(v: torch.Tensor, width: int) -> torch.Tensor:
    """int64 values as the two's-complement integers of `width` bits gemlite stores."""
    half = 1 << (width - 1)
    dtype = {8: torch.uint8, 16: torch.int16, 32: torch.int32}[width]
    return v.to(dtype) if width == 8 else ((v + half) % (2 * half) - half).to(dtype)


def pack_ref(i: Inputs, over_cols: bool) -> list[torch.Tensor]:
    w, nbits, width = i["w"].to(torch.int64), i["nbits"], i["width"]
    per = width // nbits
    if not over_cols:
        w = w.t()
    r, c = w.shape
    parts = w.view(r, c // per, per) << (torch.arange(per, device=w.device) * nbits)
    packed = wrap(parts.sum(-1), width)
    return [packed if over_cols else packed.t(), i["w"]]


def pack_call(over_cols: bool) -> Any:
    def call(m: Any, i: Inputs) -> list[torch.Tensor]:
        w, nbits, width = i["w"], i["nbits"], i["width"]
        if over_cols:
            packed, _ = m.pack_weights_over_cols_triton(w, nbits, width, False)
            return [packed, m.unpack_over_cols_triton(packed, nbits, w.shape[1], torch.uint8)]
        packed, _ = m.pack_weights_over_rows_triton(w, nbits, width, False)
        return [packed, m.unpack_over_rows_triton(packed, nbits, w.shape[0], torch.uint8)]

    return call


CASES = [
    Case("pack_unpack_over_cols", LIB, MOD, ("pack_weights_over_cols_kernel", "unpack_over_cols_kernel"), b_q,
         pack_call(True), lambda i: pack_ref(i, True), ((37, 64, 4, 32), (21, 48, 2, 8), (5, 40, 8, 16)),
         bare_package=True),
    Case("pack_unpack_over_rows", LIB, MOD, ("pack_weights_over_rows_kernel", "unpack_weights_over_rows_kernel"),
         b_q, pack_call(False), lambda i: pack_ref(i, False), ((64, 37, 4, 32), (48, 21, 2, 8), (40, 5, 8, 16)),
         bare_package=True),
]
