"""tl.extra.cuda.shared_memory on the GPU: what a thread writes into a held region survives the
compiler's own use of shared memory (a cross-warp reduction, a loop's staged loads) and reads
back; the regions are 1024-byte aligned and apart."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
from shared_memory_kernels import held_regions, held_with_pipeline  # noqa: E402


@pytest.mark.parametrize(("a", "b", "nw"), [(3000, 100, 4), (64 * 1024, 4096, 8), (512, 512, 1)])
def test_held_regions_survive_the_scratch(a: int, b: int, nw: int) -> None:
    x = torch.randint(-2**20, 2**20, (nw * 32,), dtype=torch.int32, device="cuda")
    y = torch.full((2 * nw * 32,), -7, dtype=torch.int32, device="cuda")
    s = torch.full((32,), -7, dtype=torch.int32, device="cuda")
    addr = torch.full((2,), -7, dtype=torch.int32, device="cuda")
    held_regions[(1,)](x, y, s, addr, A=a, B=b, NW=nw, num_warps=nw)
    assert torch.equal(y[:nw * 32], x) and torch.equal(y[nw * 32:], x + 1)
    assert torch.equal(s, x.view(nw, 32).sum(0, dtype=torch.int32))
    lo, hi = addr.tolist()
    assert lo % 1024 == 0 and hi - lo == -(-a // 1024) * 1024


@pytest.mark.parametrize("n", [128, 1000, 4096])
def test_held_region_beside_a_staged_loop(n: int) -> None:
    """A loop whose loads go through shared-memory slots (num_stages=3) in a kernel holding a
    region: the sums are right and the region keeps what was written before the loop."""
    x = torch.randn(n, device="cuda")
    y = torch.full((128,), float("nan"), device="cuda")
    back = torch.full((128,), -7, dtype=torch.int32, device="cuda")
    held_with_pipeline[(1,)](x, y, back, n, A=5000, BLOCK=128, num_warps=4)
    ref = torch.nn.functional.pad(x, (0, -n % 128)).view(-1, 128).double().sum(0)
    assert torch.allclose(y.double(), ref, rtol=1e-5, atol=1e-4)
    assert torch.equal(back, 3 * torch.arange(128, dtype=torch.int32, device="cuda") + 1)
