"""Loops that carry a wgmma result into the next iteration (tests/compiler/carry_kernels.py) on the
GPU: against float64 and the CPU backend, ragged M, N and K, a single iteration and none at all,
with the group carried in flight and with every group waited in its iteration."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from compiler import cdiv

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
from carry_kernels import chained, reference  # noqa: E402

pytestmark = pytest.mark.gpu


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float((x.double().cpu() - ref).norm() / ref.norm().clamp_min(1e-30))


@pytest.mark.parametrize("form", [0, 1, 2, 3])
@pytest.mark.parametrize("mnk", [(100, 50, 96), (256, 64, 320), (64, 64, 32), (70, 64, 0)])
@pytest.mark.parametrize("pipeline", ["1", "sync"])
def test_carried_dot_chain(form: int, mnk: tuple[int, int, int], pipeline: str,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_PIPELINE", pipeline)
    m, n, k = mnk
    bm, bn, bk = 64, 64, 32
    g = torch.Generator().manual_seed(m + n + k + form)
    a = torch.randn(m, k, generator=g).half()
    b = torch.randn(k, n, generator=g).half()
    c = (torch.randn(max(1, cdiv(k, bk)) * bn, bn, generator=g) * 0.1).half()
    out = torch.full((m, bn), float("nan"), device="cuda")
    chained[(cdiv(m, bm),)](a.cuda(), b.cuda(), c.cuda(), out, m, n, k, FORM=form, BM=bm, BN=bn, BK=bk, num_warps=4)
    cpu = torch.full((m, bn), float("nan"))
    chained[(cdiv(m, bm),)](a, b, c, cpu, m, n, k, FORM=form, BM=bm, BN=bn, BK=bk)
    ref = reference(a, b, c, form, bm, bn, bk)
    if k == 0:
        assert torch.equal(out.cpu(), torch.zeros(m, bn)) and torch.equal(cpu, torch.zeros(m, bn))
        return
    assert _rel(out, ref) < 2e-3  # s rounded to fp16 on both sides; sums in fp32
    assert _rel(out, cpu.double()) < 2e-3
