"""Private staging on the GPU (`tl.range(..., num_stages=S)` loops, passes/pipeline.py): the
results of streamed loops against torch (float64) and the CPU backend, for every depth, trip counts
shorter than the pipeline (0, 1, S-1), ragged shapes, 1- to 3-D tiles, several dtypes; outputs
poisoned."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "compiler"))
from stream_kernels import row_sums, two_streams, weighted_planes  # noqa: E402

pytestmark = pytest.mark.gpu

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "i32": torch.int32,
          "i8": torch.int8}


def _input(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    return torch.randint(-100, 100, shape, generator=g).to(dtype)


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("M", "N", "masked"), [(37, 300, True), (64, 0, True), (16, 64, True), (50, 130, True),
                                                (32, 512, False), (16, 128, False), (16, 192, False)])
def test_row_sums(stages: int, dtype: str, M: int, N: int, masked: bool) -> None:
    g = torch.Generator().manual_seed(M * 1000 + N)
    x = _input((M, max(N, 1)), DTYPES[dtype], g)
    ref = x[:, :N].double().sum(1)
    cpu = torch.full((M,), float("nan"))
    grid = (-(-M // 16),)
    row_sums[grid](x, cpu, M, N, x.stride(0), BM=16, BN=64, STAGES=stages, MASKED=masked)
    xd = x.cuda()
    y = torch.full((M,), float("nan"), device="cuda")
    row_sums[grid](xd, y, M, N, xd.stride(0), BM=16, BN=64, STAGES=stages, MASKED=masked, num_warps=4)
    torch.cuda.synchronize()
    tol = 1e-4 * max(1.0, float(ref.abs().max()))
    torch.testing.assert_close(y.cpu().double(), ref, rtol=1e-5, atol=tol)
    torch.testing.assert_close(y.cpu(), cpu, rtol=1e-5, atol=tol)


@pytest.mark.parametrize("evict", ["evict_first", "evict_last"])
@pytest.mark.parametrize(("M", "N", "masked"), [(37, 300, True), (32, 512, False)])
def test_row_sums_with_an_eviction_policy(evict: str, M: int, N: int, masked: bool) -> None:
    """A staged load with an L2 eviction policy (its copies carry none: `.L2::cache_hint` on cp.async
    ran into illegal instructions here for 37 x 300): the same sums."""
    g = torch.Generator().manual_seed(M + N)
    x = torch.randn(M, N, generator=g)
    ref = x.double().sum(1)
    xd = x.cuda()
    y = torch.full((M,), float("nan"), device="cuda")
    row_sums[(-(-M // 16),)](xd, y, M, N, xd.stride(0), BM=16, BN=64, STAGES=3, MASKED=masked, EVICT=evict,
                             num_warps=4)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.cpu().double(), ref, rtol=1e-5, atol=1e-4 * float(ref.abs().max()))


@pytest.mark.parametrize("stages", [2, 3, 5])
@pytest.mark.parametrize("P", [0, 1, 2, 4, 9])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_weighted_planes(stages: int, P: int, dtype: str) -> None:
    A, B, C = 2, 4, 32
    g = torch.Generator().manual_seed(P * 7 + stages)
    x = _input((max(P, 1), A, B, C), DTYPES[dtype], g)
    w = torch.randn(max(P, 1), generator=g)
    ref = (x[:P].double() * w[:P].double()[:, None, None, None]).sum(0)
    y = torch.full((A, B, C), float("nan"), device="cuda")
    weighted_planes[(1,)](x.cuda(), w.cuda(), y, P, A=A, B=B, C=C, STAGES=stages, num_warps=2)
    cpu = torch.full((A, B, C), float("nan"))
    weighted_planes[(1,)](x, w, cpu, P, A=A, B=B, C=C, STAGES=stages)
    torch.testing.assert_close(y.cpu().double(), ref, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(y.cpu(), cpu, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("N", [1, 127, 128, 1000, 4096])
@pytest.mark.parametrize("stages", [2, 4])
def test_a_staged_and_an_unstaged_load_together(N: int, stages: int) -> None:
    g = torch.Generator().manual_seed(N)
    x, z = torch.randn(N, generator=g), torch.randn(N, generator=g)
    B = 128
    ref = torch.zeros(B, dtype=torch.float64)
    for k in range(0, N, B):
        idx = k + torch.arange(B)
        ok = idx < N
        xv = torch.where(ok, x.double()[idx.clamp(max=N - 1)], 0.0)
        zv = torch.where(ok, z.double()[idx.clamp(max=N - 1)], 1.0)
        ref += xv * zv - (~ok).double()
    cpu = torch.full((B,), float("nan"))
    two_streams[(1,)](x, z, cpu, N, BLOCK=B, STAGES=stages)
    y = torch.full((B,), float("nan"), device="cuda")
    two_streams[(1,)](x.cuda(), z.cuda(), y, N, BLOCK=B, STAGES=stages, num_warps=4)
    torch.testing.assert_close(y.cpu().double(), ref, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(y.cpu(), cpu, rtol=1e-5, atol=1e-4)
