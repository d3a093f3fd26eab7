from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


@pytest.mark.parametrize("n_rows,vocab,max_block", [(1, 10, 4096), (7, 1000, 4096), (5, 50_000, 1024), (3, 4097, 512)])
def test_cross_entropy_per_row(example, n_rows, vocab, max_block):
    ce = example("cross_entropy")
    logits = 3 * torch.randn(n_rows, vocab)
    targets = torch.randint(0, vocab, (n_rows,))
    loss = ce.cross_entropy(logits, targets, reduction="none", max_block=max_block)
    ref = F.cross_entropy(logits.double(), targets, reduction="none")
    torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-5)


def test_cross_entropy_ignore_index_and_reductions(example):
    ce = example("cross_entropy")
    logits = torch.randn(33, 3000)
    targets = torch.randint(0, 3000, (33,))
    targets[::4] = -100
    for reduction in ("none", "sum", "mean"):
        got = ce.cross_entropy(logits, targets, reduction=reduction, max_block=512)
        ref = F.cross_entropy(logits.double(), targets, reduction=reduction)
        torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)


def test_cross_entropy_large_logits_and_half(example):
    ce = example("cross_entropy")
    logits = torch.randn(6, 20_000)
    logits[0, 5] = 1e4  # exp would overflow without the running maximum
    logits = logits.to(torch.bfloat16)
    targets = torch.tensor([5, 0, 1, 19_999, 123, 7])
    loss = ce.cross_entropy(logits, targets, reduction="none", max_block=2048)
    ref = F.cross_entropy(logits.double(), targets, reduction="none")
    torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-4)


def test_cross_entropy_strided_rows(example):
    ce = example("cross_entropy")
    logits = torch.randn(10, 2000)[::2, :1500]
    targets = torch.randint(0, 1500, (5,))
    torch.testing.assert_close(
        ce.cross_entropy(logits, targets, reduction="none").double(),
        F.cross_entropy(logits.double(), targets, reduction="none"),
        rtol=1e-5,
        atol=1e-5,
    )
