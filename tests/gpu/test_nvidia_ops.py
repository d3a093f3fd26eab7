"""NVIDIA backend, ops beyond elementwise/reduce/scan/dot: join, split, cat, gather, flip, histogram,
sort, device_print, device_assert and inline asm. GPU results must equal the CPU backend's (the
reference) and torch's; outputs start poisoned so unwritten elements fail."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import compiler

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import ptx_ops_kernels as K  # noqa: E402

pytestmark = pytest.mark.gpu


def _poison(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point():
        return t.fill_(float("nan"))
    return t.fill_(torch.iinfo(t.dtype).min + 7 if t.dtype != torch.uint8 else 0xA5)


def _both(kernel: Any, grid: tuple[int, ...], args: list[Any], **meta: Any) -> tuple[list[Any], list[Any]]:
    """Run on CPU tensors and on their CUDA copies; returns (cpu args, gpu args moved back to the CPU)."""
    cpu = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    gpu = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    kernel[grid](*cpu, **meta)
    kernel[grid](*gpu, **meta)
    torch.cuda.synchronize()
    return cpu, [a.cpu() if isinstance(a, torch.Tensor) else a for a in gpu]


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    """Bitwise equality (NaN payloads and signed zeros included)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.is_floating_point():
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        a, b = a.view(view), b.view(view)
    assert torch.equal(a, b), (a, b)


@pytest.mark.parametrize("shape", [(1, 32), (8, 32), (16, 4), (2, 128)])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_join_split(shape: tuple[int, int], num_warps: int) -> None:
    m, n = shape
    x, y = torch.randn(m, n), torch.randn(m, n)
    outs = [_poison(torch.empty(m, n)), _poison(torch.empty(m, n)), _poison(torch.empty(m, n, 2))]
    c, g = _both(K.join_split_k, (1,), [x, y, *outs], M=m, N=n, num_warps=num_warps)
    torch.testing.assert_close(g[4], torch.stack([x, y], -1))
    torch.testing.assert_close(g[2], x * 2)
    torch.testing.assert_close(g[3], y + 1)
    for i in (2, 3, 4):
        _same(g[i], c[i])


@pytest.mark.parametrize("n", [2, 64, 512])
def test_interleave(n: int) -> None:
    x, y = torch.randn(n).half(), torch.randn(n).half()
    c, g = _both(K.interleave_k, (1,), [x, y, _poison(torch.empty(2 * n).half())], N=n)
    _same(g[2], torch.stack([x, y], -1).reshape(-1))
    _same(g[2], c[2])


@pytest.mark.parametrize("n", [2, 64, 1024])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_split_of_a_loaded_tile(n: int, num_warps: int) -> None:
    x = torch.randint(-1000, 1000, (n, 2), dtype=torch.int32)
    outs = [_poison(torch.empty(n, dtype=torch.int32)) for _ in range(2)]
    c, g = _both(K.split_loaded_k, (1,), [x, *outs], N=n, num_warps=num_warps)
    assert torch.equal(g[1], x[:, 0]) and torch.equal(g[2], x[:, 1])
    assert torch.equal(g[1], c[1]) and torch.equal(g[2], c[2])


def test_split_of_join_swaps() -> None:
    x, y = (torch.randint(-2**40, 2**40, (256,)) for _ in range(2))
    outs = [_poison(torch.empty(256, dtype=torch.int64)) for _ in range(2)]
    c, g = _both(K.split_join_k, (1,), [x, y, *outs], N=256)
    assert torch.equal(g[2], y) and torch.equal(g[3], x)  # the kernel stores them swapped


@pytest.mark.parametrize("shape", [(1, 16), (16, 16), (4, 128), (64, 2)])
def test_cat(shape: tuple[int, int]) -> None:
    m, n = shape
    x, y = torch.randn(m, n), torch.randn(m, n)
    c, g = _both(K.cat_k, (1,), [x, y, _poison(torch.empty(2 * m, n))], M=m, N=n)
    _same(g[2], torch.cat([x, y], 0))
    _same(g[2], c[2])


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(16, 32), (1, 64), (64, 8)])
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
def test_gather(axis: int, shape: tuple[int, int], idx_dtype: torch.dtype) -> None:
    m, n = shape
    size = shape[axis]
    x = torch.randn(m, n)
    # mostly valid indices, some outside [0, size) (those read 0, as on the CPU backend)
    idx = torch.randint(-2, size + 2, (m, n), dtype=idx_dtype)
    c, g = _both(K.gather_k, (1,), [x, idx, _poison(torch.empty(m, n))], M=m, N=n, AXIS=axis)
    ok = (idx >= 0) & (idx < size)
    ref = torch.where(ok, torch.gather(x, axis, idx.clamp(0, size - 1).long()), torch.zeros(()))
    _same(g[2], ref)
    _same(g[2], c[2])


@pytest.mark.parametrize("n", [2, 128, 2048])
def test_flip(n: int) -> None:
    x = torch.randn(n)
    c, g = _both(K.flip_k, (1,), [x, _poison(torch.empty(n))], N=n)
    _same(g[1], torch.flip(x, [0]))
    _same(g[1], c[1])


@pytest.mark.parametrize("n", [1, 1000, 4097, 100003])
@pytest.mark.parametrize("bins,block", [(64, 1024), (256, 512), (8, 256), (1024, 256)])
@pytest.mark.parametrize("masked", [True, False])
def test_histogram(n: int, bins: int, block: int, masked: bool) -> None:
    x = torch.randint(-5, bins + 5, (n,), dtype=torch.int32)
    progs = (n + block - 1) // block
    out = _poison(torch.empty(progs * bins, dtype=torch.int32))
    c, g = _both(K.histogram_k, (progs,), [x, out, n], BLOCK=block, BINS=bins, MASKED=masked)
    assert torch.equal(g[1], c[1])
    pad = torch.zeros(progs * block, dtype=torch.int32)  # unmasked: `other=0` elements land in bin 0
    pad[:n] = x
    ref = []
    for p in range(progs):
        blk = pad[p * block:(p + 1) * block]
        if masked:
            blk = blk[: max(0, min(block, n - p * block))]
        blk = blk[(blk >= 0) & (blk < bins)]
        ref.append(torch.bincount(blk.long(), minlength=bins).int())
    assert torch.equal(g[1], torch.cat(ref))


def test_histogram_of_uint8() -> None:
    x = torch.randint(0, 256, (5000,), dtype=torch.uint8)
    progs = (5000 + 511) // 512
    out = _poison(torch.empty(progs * 256, dtype=torch.int32))
    c, g = _both(K.histogram_k, (progs,), [x, out, 5000], BLOCK=512, BINS=256, MASKED=True)
    assert torch.equal(g[1], c[1])
    assert torch.equal(g[1].view(progs, 256).sum(0), torch.bincount(x.long(), minlength=256).int())


def _sort_data(m: int, n: int, dtype: torch.dtype, special: bool) -> torch.Tensor:
    if dtype.is_floating_point:
        x = torch.randn(m, n).to(dtype)
        dup = x[:, 3::4].shape[1]
        x[:, 3::4] = x[:, 0::4][:, :dup]  # equal values
        if special:
            flat = x.view(-1)
            flat[torch.randperm(flat.numel())[: max(1, flat.numel() // 10)]] = float("nan")
            flat[torch.randperm(flat.numel())[:3]] = -0.0
            flat[torch.randperm(flat.numel())[:2]] = float("inf")
        return x
    return torch.randint(-50, 50, (m, n), dtype=dtype)


@pytest.mark.parametrize("shape", [(1, 2), (1, 8), (4, 256), (16, 64), (2, 1024), (1, 4096)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16])
@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_sort(shape: tuple[int, int], dtype: torch.dtype, desc: bool, num_warps: int) -> None:
    m, n = shape
    x = _sort_data(m, n, dtype, special=False)
    c, g = _both(K.sort_k, (1,), [x, _poison(torch.empty(m, n, dtype=dtype))], M=m, N=n, DESC=desc,
                 num_warps=num_warps)
    _same(g[1], torch.sort(x, -1, descending=desc).values)
    _same(g[1], c[1])


@pytest.mark.parametrize("shape", [(4, 256), (1, 1024)])
@pytest.mark.parametrize("desc", [False, True])
def test_sort_with_nan_inf_and_signed_zeros_matches_the_cpu(shape: tuple[int, int], desc: bool) -> None:
    m, n = shape
    x = _sort_data(m, n, torch.float32, special=True)
    c, g = _both(K.sort_k, (1,), [x, _poison(torch.empty(m, n))], M=m, N=n, DESC=desc)
    _same(g[1], c[1])


def _lines(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.startswith("pid ("))


def test_device_print_matches_the_cpu(capfd: pytest.CaptureFixture[str]) -> None:
    x = torch.tensor([1.5, -2.25, 0.0, 3e10] + [float(i) for i in range(60)])
    K.print_k[(1,)](x, 37, BLOCK=64)
    cpu = _lines(capfd.readouterr().out)
    K.print_k[(1,)](x.cuda(), 37, BLOCK=64)
    torch.cuda.synchronize()
    gpu = _lines(capfd.readouterr().out)
    assert len(cpu) == 64 * 2 + 2 and gpu == cpu


def test_device_assert_records_and_reports(capfd: pytest.CaptureFixture[str]) -> None:
    from compiler.backends.nvidia.debug_host import check_debug_record

    x = torch.arange(1000, dtype=torch.int32)
    x[777] = -1
    with pytest.raises(compiler.DeviceAssertError):
        K.assert_k[(4,)](x, 1000, BLOCK=256, debug=True)
    gx = x.cuda()
    ck = K.assert_k.warmup(gx, 1000, BLOCK=256, debug=True, grid=(4,))
    with pytest.raises(compiler.DeviceAssertError, match=r"program id \(3, 0, 0\)"):
        K.assert_k[(4,)](gx, 1000, BLOCK=256, debug=True)
        check_debug_record(ck)  # raises here unless the runtime already did
    out = capfd.readouterr().out
    assert "pid (3, 0, 0)" in out and "device_assert failed: x must be non-negative" in out
    # no trap: the context survives, and a passing launch records nothing
    gx[777] = 5
    K.assert_k[(4,)](gx, 1000, BLOCK=256, debug=True)
    check_debug_record(ck)
    assert "device_assert failed" not in capfd.readouterr().out


@pytest.mark.parametrize("n", [1, 1000, 4096, 100003])
def test_inline_asm(n: int) -> None:
    x = torch.randint(-2**20, 2**20, (n,), dtype=torch.int32).cuda()
    y = _poison(torch.empty(n, dtype=torch.int32)).cuda()
    K.asm_k[((n + 1023) // 1024,)](x, y, n, BLOCK=1024)
    assert torch.equal(y.cpu(), x.cpu() << 3)


@pytest.mark.parametrize("n", [4, 1000, 4096, 100003])
def test_inline_asm_packed(n: int) -> None:
    x = torch.randint(0, 256, (n,), dtype=torch.uint8).cuda()
    y = _poison(torch.empty(n, dtype=torch.uint8)).cuda()
    K.asm_packed_k[((n + 1023) // 1024,)](x, y, n, BLOCK=1024)
    assert torch.equal(y.cpu(), (x.cpu() & 0x1F) << 3)


@pytest.mark.parametrize("n", [1, 1000, 100003])
def test_inline_asm_two_results(n: int) -> None:
    x, y = torch.randn(n).cuda(), torch.randn(n).cuda()
    a, b = _poison(torch.empty(n)).cuda(), _poison(torch.empty(n)).cuda()
    K.asm_multi_k[((n + 1023) // 1024,)](x, y, a, b, n, BLOCK=1024)
    _same(a.cpu(), (x + y).cpu())
    _same(b.cpu(), (x - y).cpu())
