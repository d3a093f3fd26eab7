"""Row-wise inclusive prefix sum with `tl.cumsum`.

A row that fits in one block is scanned in one go. A longer row is scanned block by block,
carrying the running total of the previous blocks (a scalar) from one iteration to the next.
Integer inputs accumulate in int64 (torch.cumsum's rule), floats in fp32.

    python examples/cumsum.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import jit, next_power_of_2


@jit
def cumsum_kernel(x_ptr, y_ptr, stride_x, stride_y, n_cols, BLOCK_SIZE: tl.constexpr,
                  ACC_TYPE: tl.constexpr, REVERSE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    carry = tl.full((), 0, ACC_TYPE)  # the total of the blocks already scanned
    for start in range(0, n_cols, BLOCK_SIZE):
        if REVERSE:
            # Walk blocks from the end; within a block, scan right to left.
            cols = n_cols - 1 - (start + tl.arange(0, BLOCK_SIZE))
            mask = cols >= 0
        else:
            cols = start + tl.arange(0, BLOCK_SIZE)
            mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0).to(ACC_TYPE)
        y = tl.cumsum(x, axis=0) + carry
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


def cumsum(x: torch.Tensor, reverse: bool = False, max_block: int = 1024) -> torch.Tensor:
    """Inclusive cumulative sum along the last dimension of a 2-D tensor (reverse: from the right)."""
    assert x.dim() == 2 and x.stride(1) == 1
    n_rows, n_cols = x.shape
    if x.dtype.is_floating_point:
        out_dtype, acc = x.dtype, tl.float32 if x.dtype != torch.float64 else tl.float64
    else:
        out_dtype, acc = torch.int64, tl.int64
    y = torch.empty((n_rows, n_cols), dtype=out_dtype, device=x.device)
    BLOCK_SIZE = min(next_power_of_2(n_cols), max_block)
    cumsum_kernel[(n_rows,)](x, y, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, ACC_TYPE=acc,
                             REVERSE=reverse)
    return y


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(37, 3000)
    y = cumsum(x)
    ref = torch.cumsum(x.double(), dim=1)
    print(f"cumsum {tuple(x.shape)} fp32: max abs error vs float64 {(y.double() - ref).abs().max().item():.2e}")
    xi = torch.randint(-100, 100, (5, 77), dtype=torch.int32)
    print("cumsum int32 -> int64 exact:", torch.equal(cumsum(xi), torch.cumsum(xi, 1)))
    yr = cumsum(x, reverse=True)
    refr = torch.flip(torch.cumsum(torch.flip(x.double(), [1]), 1), [1])
    print(f"reverse cumsum: max abs error {(yr.double() - refr).abs().max().item():.2e}")
