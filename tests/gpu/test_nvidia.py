"""NVIDIA backend: every kernel's GPU output matches the CPU backend's and torch's."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import cdiv, jit

pytestmark = pytest.mark.gpu


def _both(kernel, grid, make_args, **meta):  # type: ignore[no-untyped-def]
    """Run on CUDA and CPU tensors made by make_args(device); return both argument lists."""
    cpu_args = make_args("cpu")
    gpu_args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in cpu_args]
    kernel[grid](*cpu_args, **meta)
    kernel[grid](*gpu_args, **meta)
    torch.cuda.synchronize()
    return cpu_args, gpu_args


@jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@pytest.mark.parametrize("n", [1, 1000, 4096, 100003])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_add(n: int, dtype: torch.dtype) -> None:
    def make(dev: str):  # type: ignore[no-untyped-def]
        g = torch.Generator().manual_seed(n)
        x = (torch.randn(n, generator=g) * 100).to(dtype)
        y = (torch.randn(n, generator=g) * 100).to(dtype)
        return [x, y, torch.full((n,), -7, dtype=dtype), n]

    c, g = _both(add, (cdiv(n, 1024),), make, BLOCK=1024)
    torch.testing.assert_close(g[2].cpu(), c[2])
    torch.testing.assert_close(c[2], c[0] + c[1])


@jit
def softmax(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride + offs, (num / tl.sum(num, axis=0)).to(out_ptr.dtype.element_ty),
             mask=offs < n_cols)


@pytest.mark.parametrize("shape", [(1, 8), (37, 781), (64, 4096)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_softmax(shape: tuple[int, int], dtype: torch.dtype, num_warps: int) -> None:
    m, k = shape
    block = max(16, 1 << (k - 1).bit_length())

    def make(dev: str):  # type: ignore[no-untyped-def]
        x = torch.randn(m, k, generator=torch.Generator().manual_seed(k)).to(dtype)
        return [torch.full_like(x, float("nan")), x, k, k]

    c, g = _both(softmax, (m,), make, BLOCK=block, num_warps=num_warps)
    torch.testing.assert_close(g[0].cpu().float(), torch.softmax(c[1].float(), -1), atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(g[0].cpu().float(), c[0].float(), atol=2e-3, rtol=2e-3)


@jit
def reduce2d(x_ptr, rows_ptr, cols_ptr, idx_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(rows_ptr + tl.arange(0, M), tl.sum(x, axis=1))
    tl.store(cols_ptr + tl.arange(0, N), tl.max(x, axis=0))
    tl.store(idx_ptr + tl.arange(0, M), tl.argmax(x, axis=1))


@pytest.mark.parametrize("mn", [(16, 16), (64, 128), (4, 256), (128, 8)])
def test_2d_reductions_and_argmax(mn: tuple[int, int]) -> None:
    m, n = mn

    def make(dev: str):  # type: ignore[no-untyped-def]
        x = torch.randn(m, n, generator=torch.Generator().manual_seed(m * n))
        return [x, torch.full((m,), float("nan")), torch.full((n,), float("nan")), torch.full((m,), -1,
                                                                                             dtype=torch.int32)]

    c, g = _both(reduce2d, (1,), make, M=m, N=n)
    x = c[0]
    torch.testing.assert_close(g[1].cpu(), x.sum(1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(g[2].cpu(), x.max(0).values)
    assert torch.equal(g[3].cpu(), x.argmax(1).to(torch.int32))


@jit
def loops(x_ptr, out_ptr, counts_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(n):
        acc += tl.load(x_ptr + i * BLOCK + offs)
    j = 0
    while j * j < n * 10:
        j += 1
    if n > 3:
        acc = acc * 2
    tl.store(out_ptr + offs, acc)
    tl.atomic_add(counts_ptr + (offs % 4), 1)
    tl.store(counts_ptr + 4, j)


@pytest.mark.parametrize("n", [0, 3, 9])
def test_loops_if_and_atomics(n: int) -> None:
    def make(dev: str):  # type: ignore[no-untyped-def]
        x = torch.randn(max(n, 1), 128, generator=torch.Generator().manual_seed(n))
        return [x, torch.full((128,), float("nan")), torch.zeros(5, dtype=torch.int32), n]

    c, g = _both(loops, (2,), make, BLOCK=128)
    ref = c[0][:n].sum(0) * (2 if n > 3 else 1) if n else torch.zeros(128)
    torch.testing.assert_close(g[1].cpu(), ref, atol=1e-4, rtol=1e-4)
    assert g[2].cpu().tolist() == c[2].tolist()
    assert c[2][:4].tolist() == [64, 64, 64, 64]


@jit
def scans(x_ptr, fwd_ptr, rev_ptr, col_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(fwd_ptr + offs, tl.cumsum(x, axis=1))
    tl.store(rev_ptr + offs, tl.cumsum(x, axis=1, reverse=True))
    tl.store(col_ptr + offs, tl.cumsum(x, axis=0))


@pytest.mark.parametrize("mn", [(1, 16), (4, 1024), (64, 64), (256, 2)])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_scans(mn: tuple[int, int], num_warps: int) -> None:
    m, n = mn

    def make(dev: str):  # type: ignore[no-untyped-def]
        x = torch.randint(-9, 9, (m, n), generator=torch.Generator().manual_seed(m + n), dtype=torch.int32)
        return [x] + [torch.full((m, n), -1, dtype=torch.int32) for _ in range(3)]

    c, g = _both(scans, (1,), make, M=m, N=n, num_warps=num_warps)
    x = c[0]
    assert torch.equal(g[1].cpu(), x.cumsum(1).int())
    assert torch.equal(g[2].cpu(), x.flip(1).cumsum(1).flip(1).int())
    assert torch.equal(g[3].cpu(), x.cumsum(0).int())
    assert torch.equal(c[1], g[1].cpu()) and torch.equal(c[3], g[3].cpu())


@jit
def _affine(a, b, c, d):  # (a, b) then (c, d) of x -> a x + b: associative, not commutative
    return a * c, b * c + d


@jit
def affine_scans(a_ptr, b_ptr, fa_ptr, fb_ptr, ra_ptr, rb_ptr, M: tl.constexpr, N: tl.constexpr,
                 AXIS: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    a, b = tl.load(a_ptr + offs), tl.load(b_ptr + offs)
    fa, fb = tl.associative_scan((a, b), AXIS, _affine)
    ra, rb = tl.associative_scan((a, b), AXIS, _affine, reverse=True)
    tl.store(fa_ptr + offs, fa)
    tl.store(fb_ptr + offs, fb)
    tl.store(ra_ptr + offs, ra)
    tl.store(rb_ptr + offs, rb)


@pytest.mark.parametrize("mn", [(1, 32), (4, 256), (64, 64), (128, 8)])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_non_commutative_scans_combine_in_element_order(mn: tuple[int, int], axis: int, num_warps: int) -> None:
    """A reverse scan folds from the end, `acc = combine(acc, x[j])` for j going down, as Triton
    defines it: an order-sensitive combine tells a swapped operand apart (checked against the CPU
    backend and a float64 sequential fold)."""
    m, n = mn

    def make(dev: str):  # type: ignore[no-untyped-def]
        g = torch.Generator().manual_seed(m * n + axis)
        a = torch.rand(m, n, generator=g) * 0.5 + 0.75
        b = torch.randn(m, n, generator=g)
        return [a, b] + [torch.full((m, n), float("nan")) for _ in range(4)]

    c, g = _both(affine_scans, (1,), make, M=m, N=n, AXIS=axis, num_warps=num_warps)
    a, b = c[0].double().movedim(axis, 0), c[1].double().movedim(axis, 0)
    fa, fb, ra, rb = (torch.empty_like(a) for _ in range(4))
    acc = (a[0], b[0])
    fa[0], fb[0] = acc
    for j in range(1, a.shape[0]):
        acc = (acc[0] * a[j], acc[1] * a[j] + b[j])
        fa[j], fb[j] = acc
    acc = (a[-1], b[-1])
    ra[-1], rb[-1] = acc
    for j in range(a.shape[0] - 2, -1, -1):
        acc = (acc[0] * a[j], acc[1] * a[j] + b[j])
        ra[j], rb[j] = acc
    for got, cpu, want in zip(g[2:], c[2:], (fa, fb, ra, rb), strict=True):
        want = want.movedim(0, axis).float()
        torch.testing.assert_close(cpu, want, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)


@jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("mnk", [(16, 16, 16), (100, 70, 45), (128, 256, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_dot(mnk: tuple[int, int, int], dtype: torch.dtype) -> None:
    m, n, k = mnk

    def make(dev: str):  # type: ignore[no-untyped-def]
        g = torch.Generator().manual_seed(m + n + k)
        a = torch.randn(m, k, generator=g).to(dtype)
        b = torch.randn(k, n, generator=g).to(dtype)
        return [a, b, torch.full((m, n), float("nan"), dtype=dtype), m, n, k]

    c, g = _both(matmul, (cdiv(m, 32), cdiv(n, 32)), make, BM=32, BN=32, BK=16)
    ref = c[0].double() @ c[1].double()
    tol = 2e-3 if dtype == torch.float32 else 2e-2  # fp32 runs as tf32 (the default input_precision)
    torch.testing.assert_close(g[2].cpu().double(), ref, atol=tol * (k ** 0.5), rtol=tol)
    torch.testing.assert_close(g[2].cpu().double(), c[2].double(), atol=tol * (k ** 0.5), rtol=tol)


@jit
def cluster_rank(out_ptr):
    pid = tl.program_id(0) + tl.num_programs(0) * tl.program_id(1)
    rank = tl.inline_asm_elementwise("mov.u32 $0, %cluster_ctarank;", "=r,r", [pid], dtype=tl.int32, is_pure=True,
                                     pack=1)
    size = tl.inline_asm_elementwise("mov.u32 $0, %cluster_nctarank;", "=r,r", [pid], dtype=tl.int32,
                                     is_pure=True, pack=1)
    tl.store(out_ptr + pid, rank * 100 + size)


def test_cluster_dims_launch_thread_block_clusters() -> None:
    """cluster_dims: programs run as clusters of that shape (rank within the cluster, its size);
    a grid that is not a multiple of it is a LaunchError, on the warm path too."""
    from compiler.errors import LaunchError

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread block clusters need sm_90 or newer")
    out = torch.full((8 * 3,), -1, dtype=torch.int32, device="cuda")
    cluster_rank[(8, 3)](out, cluster_dims=(4, 1, 1))
    want = torch.tensor([(i % 8 % 4) * 100 + 4 for i in range(24)], dtype=torch.int32)
    assert torch.equal(out.cpu(), want)
    cluster_rank[(8, 3)](out, cluster_dims=[4, 1, 1])  # the warm path, the same key
    with pytest.raises(LaunchError, match="not a multiple of cluster_dims"):
        cluster_rank[(6, 3)](out, cluster_dims=(4, 1, 1))
    out2 = torch.full((8 * 2,), -1, dtype=torch.int32, device="cuda")
    cluster_rank[(8, 2)](out2, cluster_dims=(1, 2, 1))
    want2 = torch.tensor([(i // 8 % 2) * 100 + 2 for i in range(16)], dtype=torch.int32)
    assert torch.equal(out2.cpu(), want2)
