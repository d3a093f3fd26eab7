"""tl.multiple_of / tl.max_contiguous on the GPU (tests/compiler/hint_kernels.py): the promised
contiguity turns the B operand's copies into 16-byte cp.async; results against float64 and the
CPU backend, ragged M (the clamped rows read row 0 and are not stored)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from compiler import cdiv

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
from hint_kernels import mm_where  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("hint", [False, True])
@pytest.mark.parametrize("mnk", [(200, 256, 320), (128, 128, 64), (77, 384, 1000)])
def test_tutorial_style_offsets(hint: bool, mnk: tuple[int, int, int]) -> None:
    m, n, k = mnk
    g = torch.Generator().manual_seed(m + n + k)
    a, b = torch.randn(m, k, generator=g).half(), torch.randn(k, n, generator=g).half()
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    grid = (cdiv(m, 128), cdiv(n, 128))
    mm_where[grid](a.cuda(), b.cuda(), out, m, n, k, k, n, n, BM=128, BN=128, BK=64, HINT=hint, num_warps=8)
    cpu = torch.full((m, n), float("nan"), dtype=torch.float16)
    mm_where[grid](a, b, cpu, m, n, k, k, n, n, BM=128, BN=128, BK=64, HINT=hint)
    ref = a.double() @ b.double()
    torch.testing.assert_close(out.double().cpu(), ref, rtol=1e-2, atol=5e-2)
    torch.testing.assert_close(out.cpu(), cpu, rtol=1e-2, atol=5e-2)
