"""Vector addition: the first Triton kernel, on Anvil.

Each program instance adds one BLOCK_SIZE-wide slice of the two inputs; the mask keeps the
last, partial block from touching memory past the end.

    python examples/vector_add.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import cdiv, jit


@jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor | None = None,
        BLOCK_SIZE: int = 1024) -> torch.Tensor:
    """x + y for contiguous tensors of the same shape and dtype."""
    assert x.shape == y.shape and x.dtype == y.dtype
    assert x.is_contiguous() and y.is_contiguous()
    if out is None:
        out = torch.empty_like(x)
    n_elements = out.numel()
    grid = lambda meta: (cdiv(n_elements, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    size = 98_432
    x = torch.rand(size)
    y = torch.rand(size)
    out = add(x, y)
    ref = x + y
    print(out[:4])
    print(ref[:4])
    print(f"max abs difference between Anvil and torch: {(out - ref).abs().max().item()}")
