"""tl.dot on tensor cores (mma.sync): GPU results against float64 and the CPU backend, for every
operand type, odd shapes (M, N, K not multiples of the tiles) and several tile/warp configs."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import cdiv, jit

pytestmark = pytest.mark.gpu


@jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr,
           BK: tl.constexpr, ACC_FORM: tl.constexpr, PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty if ACC_FORM == 2 else
                   (tl.int32 if a_ptr.dtype.element_ty == tl.int8 else tl.float32))
    for k in range(0, tl.cdiv(K, BK)):
        kmask = rk < K - k * BK
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & kmask[None, :], other=0)
        b = tl.load(b_ptrs, mask=kmask[:, None] & (rn[None, :] < N), other=0)
        if ACC_FORM == 1:
            acc += tl.dot(a, b, input_precision=PRECISION)
        elif ACC_FORM == 2:
            acc = tl.dot(a, b, acc, out_dtype=c_ptr.dtype.element_ty)
        else:
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c_ptrs = c_ptr + rm[:, None] * scm + rn[None, :] * scn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _run(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype, bm: int, bn: int, bk: int, warps: int,
         form: int = 0, precision: str = "tf32", stages: int = 3) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = torch.full((m, n), 77, dtype=out_dtype, device=a.device)  # poisoned
    matmul[(cdiv(m, bm), cdiv(n, bn))](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                       c.stride(0), c.stride(1), BM=bm, BN=bn, BK=bk, ACC_FORM=form,
                                       PRECISION=precision, num_warps=warps, num_stages=stages)
    return c


SHAPES = [(64, 64, 64), (127, 255, 96), (33, 17, 200), (256, 192, 512)]
CONFIGS = [(16, 16, 16, 1), (32, 64, 32, 4), (64, 64, 32, 4), (128, 128, 64, 8), (64, 128, 64, 4), (128, 64, 32, 2),
           (64, 64, 32, 8)]


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    x64, r64 = x.double().cpu(), ref.double().cpu()
    return float((x64 - r64).norm() / r64.norm().clamp_min(1e-30))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types(shape: tuple[int, int, int], cfg: tuple[int, int, int, int], dtype: torch.dtype) -> None:
    m, n, k = shape
    g = torch.Generator().manual_seed(m * n + k)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, n, generator=g).to(dtype)
    ref = a.double() @ b.double()
    got = _run(a.cuda(), b.cuda(), torch.float32, *cfg)
    assert _rel(got, ref) < 1e-5
    cpu = _run(a, b, torch.float32, *cfg)
    assert _rel(got, cpu) < 1e-5


@pytest.mark.parametrize("form", [1, 2])
def test_accumulate_forms(form: int) -> None:
    m, n, k = 150, 70, 130
    a = torch.randn(m, k).half()
    b = torch.randn(k, n).half()
    got = _run(a.cuda(), b.cuda(), torch.float16 if form == 2 else torch.float32, 64, 64, 32, 4, form)
    assert _rel(got, a.double() @ b.double()) < 2e-3


@pytest.mark.parametrize("cfg", [(64, 64, 32, 4), (32, 32, 16, 2)])
def test_tf32_and_ieee(cfg: tuple[int, int, int, int]) -> None:
    m, n, k = 100, 90, 300
    a, b = torch.randn(m, k), torch.randn(k, n)
    ref = a.double() @ b.double()
    tf32 = _run(a.cuda(), b.cuda(), torch.float32, *cfg)
    assert _rel(tf32, ref) < 2e-3  # tf32 keeps 10 mantissa bits
    ieee = _run(a.cuda(), b.cuda(), torch.float32, *cfg, precision="ieee")
    assert _rel(ieee, ref) < 1e-6


@pytest.mark.parametrize("cfg", [(64, 64, 64, 4), (32, 128, 32, 4)])
def test_int8(cfg: tuple[int, int, int, int]) -> None:
    m, n, k = 96, 200, 160
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8)
    b = torch.randint(-128, 128, (k, n), dtype=torch.int8)
    got = _run(a.cuda(), b.cuda(), torch.int32, *cfg)
    assert torch.equal(got.cpu(), a.long().mm(b.long()).int())


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("warps", [4, 2])
def test_fp8(fp8: torch.dtype, warps: int) -> None:
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 mma needs sm_89+")
    m, n, k = 130, 96, 256
    a = (torch.randn(m, k) * 2).to(fp8)
    b = (torch.randn(k, n) * 2).to(fp8)
    ref = a.double() @ b.double()
    got = _run(a.cuda(), b.cuda(), torch.float32, 64, 64, 64, warps)
    # Hopper's fp8 tensor cores (wgmma: a warpgroup, so 4 warps) add with fewer than fp32's
    # mantissa bits; mma.sync (2 warps, or sm_89) accumulates in fp32
    print(f"fp8 rel err {_rel(got, ref):.3e}")
    hopper_wgmma = torch.cuda.get_device_capability()[0] == 9 and warps == 4
    assert _rel(got, ref) < (2e-3 if hopper_wgmma else 1e-5)


@pytest.mark.parametrize("k", [16, 48, 64, 192, 1008, 200])
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_pipelined_k_loop(k: int, stages: int, dtype: torch.dtype) -> None:
    """The K loop's loads pipelined `stages` deep through shared memory (cp.async on sm_90a): fewer
    iterations than stages (the prologue's copies past the end are not issued), a partial last K
    tile (zero-filled copies), K not a multiple of 16 (copies through registers), M and N not
    multiples of the tile; against float64, the CPU backend and the unpipelined kernel."""
    m, n = 130, 200
    g = torch.Generator().manual_seed(k * 10 + stages)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, n, generator=g).to(dtype)
    ref = a.double() @ b.double()
    cfg = (64, 128, 32, 4) if dtype == torch.float32 else (128, 128, 64, 8)
    got = _run(a.cuda(), b.cuda(), torch.float32, *cfg, stages=stages)
    tol = 3e-3 if dtype == torch.float32 else 1e-5  # tf32: 10 mantissa bits
    assert _rel(got, ref) < tol
    assert _rel(got, _run(a, b, torch.float32, *cfg)) < tol
    if stages > 1:
        assert _rel(got, _run(a.cuda(), b.cuda(), torch.float32, *cfg, stages=1)) < tol


@pytest.mark.parametrize("bk", [128, 256])
@pytest.mark.parametrize("b_kmajor", [False, True])
@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_wide_k_tiles_and_k_contiguous_b(bk: int, b_kmajor: bool, stages: int, dtype: torch.dtype) -> None:
    """K tiles wider than one 128-byte swizzle row (split into column blocks), and B given as a
    transposed view (K contiguous: stored K-major in shared memory, copied in 16-byte runs)."""
    m, n, k = 200, 136, 520
    g = torch.Generator().manual_seed(bk + stages + 7 * b_kmajor)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(n, k, generator=g).to(dtype).t() if b_kmajor else torch.randn(k, n, generator=g).to(dtype)
    ref = a.double() @ b.double()
    cfg = (128, 128, bk, 8) if bk == 128 else (64, 64, bk, 4)
    got = _run(a.cuda(), b.cuda(), torch.float32, *cfg, stages=stages)
    assert _rel(got, ref) < 1e-5
    assert _rel(got, _run(a, b, torch.float32, *cfg)) < 1e-5


@jit
def batched_free_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """One tile, no loop: the dot's result is stored directly (its layout converted for the store)."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.where(c > 0, c, 0.5 * c))


@pytest.mark.parametrize("mnk", [(16, 16, 16), (16, 8, 32), (64, 32, 16), (128, 256, 32)])
def test_single_tile(mnk: tuple[int, int, int]) -> None:
    m, n, k = mnk
    a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
    c = torch.full((m, n), float("nan"), device="cuda")
    batched_free_dot[(1,)](a.cuda(), b.cuda(), c, M=m, N=n, K=k, num_warps=4)
    ref = a.double() @ b.double()
    ref = torch.where(ref > 0, ref, 0.5 * ref)
    assert _rel(c, ref) < 1e-5


@jit
def bmm(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rb, rm, rn, rk = tl.arange(0, B), tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rb[:, None, None] * M * K + rm[None, :, None] * K + rk[None, None, :])
    b = tl.load(b_ptr + rb[:, None, None] * K * N + rk[None, :, None] * N + rn[None, None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rb[:, None, None] * M * N + rm[None, :, None] * N + rn[None, None, :], c)


@pytest.mark.parametrize("bmnk,warps", [((4, 64, 32, 32), 4), ((2, 64, 64, 16), 2), ((2, 128, 64, 32), 8),
                                        ((8, 16, 16, 16), 1)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_batched_dot(bmnk: tuple[int, int, int, int], warps: int, dtype: torch.dtype) -> None:
    """One 2-D tensor-core dot per batch (batch dim held in registers)."""
    nb, m, n, k = bmnk
    a, b = torch.randn(nb, m, k).to(dtype), torch.randn(nb, k, n).to(dtype)
    ref = torch.bmm(a.double(), b.double())
    got = torch.full((nb, m, n), float("nan"), device="cuda")
    bmm[(1,)](a.cuda(), b.cuda(), got, B=nb, M=m, N=n, K=k, num_warps=warps)
    cpu = torch.full((nb, m, n), float("nan"))
    bmm[(1,)](a, b, cpu, B=nb, M=m, N=n, K=k)
    tol = 3e-3 if dtype == torch.float32 else 1e-5  # fp32 runs as tf32
    assert _rel(got, ref) < tol
    assert _rel(got, cpu) < tol


@pytest.mark.parametrize("k", [64, 200, 1024])
def test_two_pipelined_loops_in_one_kernel(k: int) -> None:
    """Two K loops one after the other (their pipeline slots share shared memory): a @ b + c @ d
    against float64, ragged K (masked, zero-filled copies) included."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
    from test_ptx_mma import two_loops

    m, n = 200, 136
    g = torch.Generator().manual_seed(k)
    a, c = (torch.randn(m, k, generator=g).half() for _ in range(2))
    b, d = (torch.randn(k, n, generator=g).half() for _ in range(2))
    out = torch.full((m, n), float("nan"), device="cuda")
    two_loops[(cdiv(m, 128), cdiv(n, 128))](a.cuda(), b.cuda(), c.cuda(), d.cuda(), out, m, n, k, BM=128, BN=128,
                                            BK=64, num_warps=8, num_stages=3)
    ref = a.double() @ b.double() + c.double() @ d.double()
    assert _rel(out, ref) < 1e-5
