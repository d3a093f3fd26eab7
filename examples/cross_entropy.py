"""Cross-entropy loss over a large vocabulary, forward, one program per row.

The row of logits is never held whole: the kernel walks it in BLOCK_SIZE chunks and keeps an
online logsumexp, a running maximum m and a running sum s of exp(x - m), rescaling s whenever
m grows:

    m' = max(m, max(block));   s' = s * exp(m - m') + sum(exp(block - m'))

loss = m + log(s) - x[target]. Rows whose target is `ignore_index` get loss 0 (torch's rule
for reduction="none"). Logits may be fp32, fp16 or bf16; the math is fp32.

    python examples/cross_entropy.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import jit, next_power_of_2


@jit
def cross_entropy_fwd_kernel(logits_ptr, targets_ptr, loss_ptr, lse_ptr, stride_row, n_cols, ignore_index,
                             BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    logits_row = logits_ptr + row.to(tl.int64) * stride_row
    target = tl.load(targets_ptr + row)
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(logits_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(s)
    if target != ignore_index:
        x_target = tl.load(logits_row + target).to(tl.float32)
        loss = lse - x_target
    else:
        loss = 0.0
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100,
                  reduction: str = "mean", max_block: int = 4096) -> torch.Tensor:
    """torch.nn.functional.cross_entropy(logits, targets) for 2-D logits (rows x vocabulary)."""
    assert logits.dim() == 2 and logits.stride(1) == 1
    n_rows, n_cols = logits.shape
    targets = targets.contiguous()
    loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    lse = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    BLOCK_SIZE = min(next_power_of_2(n_cols), max_block)
    cross_entropy_fwd_kernel[(n_rows,)](logits, targets, loss, lse, logits.stride(0), n_cols, ignore_index,
                                        BLOCK_SIZE=BLOCK_SIZE)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (targets != ignore_index).sum()


if __name__ == "__main__":
    torch.manual_seed(0)
    n_rows, vocab = 64, 128_256  # LLaMA-3's vocabulary
    logits = 4 * torch.randn(n_rows, vocab)
    targets = torch.randint(0, vocab, (n_rows,))
    targets[::7] = -100
    loss = cross_entropy(logits, targets, reduction="none")
    ref = torch.nn.functional.cross_entropy(logits.double(), targets, reduction="none")
    print(f"cross entropy {n_rows}x{vocab}: max abs error vs float64 {(loss.double() - ref).abs().max().item():.2e}")
    print(f"mean loss {cross_entropy(logits, targets).item():.6f}, torch "
          f"{torch.nn.functional.cross_entropy(logits, targets).item():.6f}")
