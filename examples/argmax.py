"""Per-row argmax (and max) with `tl.argmax` / `tl.max(..., return_indices=True)`.

A row is scanned in BLOCK_SIZE chunks; each chunk's maximum and its index are folded into a
running best with a strict `>`, so ties resolve to the first (smallest) index, as in torch.
Padding lanes load -inf and can never win.

    python examples/argmax.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import jit, next_power_of_2


@jit
def argmax_kernel(x_ptr, idx_ptr, max_ptr, stride_row, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride_row
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    best_val, best_idx = tl.max(x, axis=0, return_indices=True)
    for start in range(BLOCK_SIZE, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        blk_idx = tl.argmax(x, axis=0)
        blk_val = tl.max(x, axis=0)
        better = blk_val > best_val
        best_idx = tl.where(better, blk_idx + start, best_idx)
        best_val = tl.where(better, blk_val, best_val)
    tl.store(idx_ptr + row, best_idx.to(tl.int64))
    tl.store(max_ptr + row, best_val.to(max_ptr.dtype.element_ty))


def argmax(x: torch.Tensor, max_block: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of the maximum of each row of a 2-D tensor (first index on ties)."""
    assert x.dim() == 2 and x.stride(1) == 1
    n_rows, n_cols = x.shape
    idx = torch.empty(n_rows, dtype=torch.int64, device=x.device)
    vals = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    BLOCK_SIZE = min(next_power_of_2(n_cols), max_block)
    argmax_kernel[(n_rows,)](x, idx, vals, x.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE)
    return vals, idx


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(1000, 5000)
    vals, idx = argmax(x)
    ref_vals, ref_idx = torch.max(x, dim=1)
    print(f"argmax {tuple(x.shape)}: indices equal {torch.equal(idx, ref_idx)}, values equal "
          f"{torch.equal(vals, ref_vals)}")
    ties = torch.randint(0, 3, (64, 300)).float()
    print("ties resolve to the first index like torch:", torch.equal(argmax(ties)[1], torch.argmax(ties, 1)))
