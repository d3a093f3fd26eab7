"""tl.reshape on the NVIDIA backend: results match the CPU backend's and torch's (the PTX-level
checks that it moves no data are in tests/compiler/test_nvidia_reshape_ptx.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
from reshape_kernels import reshape_reduce, round_trip, unpack_nibbles  # noqa: E402

pytestmark = pytest.mark.gpu


def _both(kernel, grid, make_args, **meta):  # type: ignore[no-untyped-def]
    cpu_args = make_args()
    gpu_args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in cpu_args]
    kernel[grid](*cpu_args, **meta)
    kernel[grid](*gpu_args, **meta)
    torch.cuda.synchronize()
    return cpu_args, gpu_args


@pytest.mark.parametrize(("a", "b", "c"), [(4, 8, 32), (1, 2, 64), (16, 4, 4)])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_round_trip_on_gpu(a: int, b: int, c: int, num_warps: int) -> None:
    n = a * b * c

    def make():  # type: ignore[no-untyped-def]
        return [torch.randn(n), torch.full((n,), float("nan"))]

    cc, gg = _both(round_trip, (1,), make, A=a, B=b, C=c, num_warps=num_warps)
    torch.testing.assert_close(gg[1].cpu(), cc[1])
    torch.testing.assert_close(cc[1], cc[0] * 2 + 0.5)


@pytest.mark.parametrize(("r", "c", "s"), [(4, 256, 4), (16, 64, 8), (2, 32, 32), (64, 16, 2)])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_reshape_reduce_on_gpu(r: int, c: int, s: int, num_warps: int) -> None:
    def make():  # type: ignore[no-untyped-def]
        return [torch.randn(r, c), torch.full((r,), float("nan")), torch.full((r, c // s), float("nan"))]

    cc, gg = _both(reshape_reduce, (1,), make, R=r, C=c, S=s, num_warps=num_warps)
    torch.testing.assert_close(gg[1].cpu(), cc[1], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gg[2].cpu(), cc[2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cc[2], cc[0].reshape(r, c // s, s).sum(2), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("r", "w"), [(4, 32), (16, 8), (1, 64)])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_unpack_nibbles_on_gpu(r: int, w: int, num_warps: int) -> None:
    def make():  # type: ignore[no-untyped-def]
        p = torch.randint(-(2**31), 2**31 - 1, (r, w), dtype=torch.int32)
        return [p, torch.full((r, 8 * w), -1, dtype=torch.int32)]

    cc, gg = _both(unpack_nibbles, (1,), make, R=r, W=w, num_warps=num_warps)
    assert torch.equal(gg[1].cpu(), cc[1])
    ref = (cc[0][:, :, None] >> (torch.arange(8) * 4)) & 0xF
    assert torch.equal(cc[1], ref.reshape(r, 8 * w).to(torch.int32))
