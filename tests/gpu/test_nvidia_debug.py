"""Debug mode on NVIDIA GPUs: out-of-bounds loads, stores and atomics are reported after the launch
with the CPU backend's error (kernel, file:line:col, program id, element offset into the tensor the
pointer came from and its size), are not executed (the kernel's other outputs are intact, memory
around the tensor is untouched), and the next launch works. In-bounds debug launches give the
results of non-debug launches. Each failing launch has exactly one element out of bounds, so the
violation reported (the first one recorded) is the same on both backends."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

import compiler.language as tl
from compiler import jit
from compiler.errors import DeviceAssertError, OutOfBoundsError

pytestmark = pytest.mark.gpu


@jit
def shifted_copy_k(x_ptr, y_ptr, shift, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + shift, mask=offs < n, other=-7.0)
    tl.store(y_ptr + offs, x * 2, mask=offs < n)


@jit
def two_outputs_k(x_ptr, y_ptr, z_ptr, n, zshift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x + 1, mask=m)
    tl.store(z_ptr + offs + zshift, x * 3, mask=m)


@jit
def rows_k(x_ptr, y_ptr, stride, n, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)[:, None]
    c = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + r * stride + c, mask=c < n, other=0.0)
    tl.store(y_ptr + r * n + c, x.to(tl.float32) * 0.5, mask=c < n)


@jit
def hist_k(x_ptr, hist_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.atomic_add(hist_ptr + x, 1, mask=offs < n)
    tl.atomic_add(total_ptr, tl.sum(x, axis=0))


@jit
def scalar_k(x_ptr, y_ptr, i, j):
    tl.store(y_ptr + j, tl.load(x_ptr + i) + 1)


@jit(debug=True)
def always_debug_k(x_ptr, y_ptr, shift, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + shift, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@jit
def env_k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0, mask=offs < n)


@jit
def assert_k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_assert(x >= 0, "x must be non-negative")


def _line(kernel: Any, snippet: str) -> int:
    """The file line of the kernel's first source line containing `snippet`."""
    for i, text in enumerate(kernel.text.splitlines()):
        if snippet in text:
            return int(kernel.first_line) + i
    raise AssertionError(f"{snippet!r} is not in {kernel.__name__}")


_DETAIL = r"; -?\d+ elements from the start of '\w+' \(which holds \d+ elements\)"


def _no_addr(msg: str) -> str:
    """The message without the address (the tensors live at other addresses on the two devices)."""
    return re.sub(r"address 0x[0-9a-f]+", "address <addr>", msg)


def _no_detail(msg: str) -> str:
    """The message without address and tensor detail: the CPU backend names the kernel's first pointer
    argument there whichever tensor the access went to; the GPU names the one the pointer came from."""
    return re.sub(r"address 0x[0-9a-f]+(" + _DETAIL + ")?", "address <addr>", msg)


def _errors(kernel: Any, grid: tuple[int, ...], args: list[Any], **meta: Any) -> tuple[str, str, list[Any]]:
    """The CPU's and the GPU's error messages for the same debug launch, and the GPU's arguments."""
    cpu = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    gpu = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(OutOfBoundsError) as c:
        kernel[grid](*cpu, debug=True, **meta)
    with pytest.raises(OutOfBoundsError) as g:
        kernel[grid](*gpu, debug=True, **meta)
    return str(c.value), str(g.value), gpu


def _poison(t: torch.Tensor) -> torch.Tensor:
    return t.fill_(float("nan")) if t.is_floating_point() else t.fill_(-12345)


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@pytest.mark.parametrize("length,block", [(1000, 256), (37, 64), (134, 32)])
def test_out_of_bounds_load_gives_the_cpu_error(length: int, block: int) -> None:
    # y[i] = 2 * x[i + 3] for i < n: with n = length - 2, only i = n - 1 reads past x (x[length])
    n = length - 2
    x = torch.randn(length)
    y = _poison(torch.empty(n))
    grid = (_cdiv(n, block),)
    cpu, gpu, (gx, gy, *_) = _errors(shifted_copy_k, grid, [x, y, 3, n], BLOCK=block)
    assert _no_addr(gpu) == _no_addr(cpu)
    assert "in kernel shifted_copy_k at " in gpu
    assert f"test_nvidia_debug.py:{_line(shifted_copy_k, 'tl.load(')}:" in gpu
    assert f"program id ({(n - 1) // block}, 0, 0)" in gpu
    assert f"{length} elements from the start of 'x_ptr' (which holds {length} elements)" in gpu
    assert "x = tl.load(x_ptr + offs + shift, mask=offs < n, other=-7.0)" in gpu
    # every other element was copied; the one outside read nothing and got `other`
    torch.testing.assert_close(gy.cpu(), torch.cat([x[3:] * 2, torch.tensor([-14.0])]))
    # the next launch of the same binary (n and n - 1 specialize alike) works and reports nothing
    _poison(gy)
    shifted_copy_k[grid](gx, gy, 3, n - 1, BLOCK=block, debug=True)
    torch.testing.assert_close(gy.cpu()[:n - 1], x[3:] * 2)


def test_out_of_bounds_store_gives_the_cpu_error_and_writes_nothing_outside() -> None:
    size, block = 300, 128
    n = size - 1  # z[offs + 2] for offs < n: only offs = n - 1 writes past z (z[size])
    x = torch.randn(size)
    backing = torch.full((size + 64,), 5.0)
    gback = backing.cuda()
    gx, gy, gz = x.cuda(), _poison(torch.empty(size)).cuda(), gback[:size]  # a view: its bounds are 300 elements
    with pytest.raises(OutOfBoundsError) as c:
        two_outputs_k[(3,)](x.clone(), torch.empty(size), backing.clone()[:size], n, 2, BLOCK=block, debug=True)
    with pytest.raises(OutOfBoundsError) as g:
        two_outputs_k[(3,)](gx, gy, gz, n, 2, BLOCK=block, debug=True)
    msg = str(g.value)
    assert _no_detail(msg) == _no_detail(str(c.value))
    assert f"test_nvidia_debug.py:{_line(two_outputs_k, 'tl.store(z_ptr')}:" in msg
    assert "program id (2, 0, 0)" in msg
    assert f"{size} elements from the start of 'z_ptr' (which holds {size} elements)" in msg
    y = gy.cpu()
    torch.testing.assert_close(y[:n], x[:n] + 1)  # the kernel's other output is intact
    assert y[n:].isnan().all()
    b = gback.cpu()
    torch.testing.assert_close(b[2:size], x[:size - 2] * 3)
    assert b[:2].eq(5.0).all() and b[size:].eq(5.0).all(), "nothing is written outside z"
    gback[:size] = float("nan")
    two_outputs_k[(3,)](gx, gy, gz, n - 1, 2, BLOCK=block, debug=True)  # the next launch works
    torch.testing.assert_close(gback.cpu()[2:size], x[:size - 2] * 3)


def test_two_dimensional_load_with_the_last_element_outside() -> None:
    m, n, stride = 16, 48, 64
    full = torch.randn(m, stride, dtype=torch.float16)
    length = (m - 1) * stride + n - 1  # x stops one element short of row m-1's last column
    x = full.reshape(-1)[:length]
    y = _poison(torch.empty(m, n))
    cpu, gpu, (_, gy, *_) = _errors(rows_k, (1,), [x, y, stride, n], M=m, N=64)
    assert _no_addr(gpu) == _no_addr(cpu)
    assert "program id (0, 0, 0)" in gpu
    assert f"{length} elements from the start of 'x_ptr' (which holds {length} elements)" in gpu
    want = full[:, :n].float() * 0.5
    want[m - 1, n - 1] = 0.0
    torch.testing.assert_close(gy.cpu(), want)


def test_out_of_bounds_atomic_is_reported_and_the_others_apply() -> None:
    n, bins, block = 777, 16, 256
    x = torch.randint(0, bins, (n,), dtype=torch.int32)
    x[500] = bins  # one bin past the end
    hist, total = torch.zeros(bins, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    cpu, gpu, (_, ghist, gtotal, _) = _errors(hist_k, (4,), [x, hist, total, n], BLOCK=block)
    assert _no_detail(gpu) == _no_detail(cpu)
    assert "program id (1, 0, 0)" in gpu
    assert f"{bins} elements from the start of 'hist_ptr' (which holds {bins} elements)" in gpu
    keep = torch.cat([x[:500], x[501:]]).long()
    assert torch.equal(ghist.cpu(), torch.bincount(keep, minlength=bins).int())
    assert int(gtotal.item()) == int(x.sum())


def test_scalar_accesses_are_checked() -> None:
    x, y = torch.randn(8), _poison(torch.empty(4))
    cpu, gpu, (_, gy, *_) = _errors(scalar_k, (1,), [x, y, 3, 4])  # y[4] is past y
    assert _no_detail(gpu) == _no_detail(cpu)
    assert "4 elements from the start of 'y_ptr' (which holds 4 elements)" in gpu
    assert gy.cpu().isnan().all()
    cpu, gpu, (_, gy, *_) = _errors(scalar_k, (1,), [x, y, -1, 2])  # x[-1] is before x
    assert _no_addr(gpu) == _no_addr(cpu)
    assert "-1 elements from the start of 'x_ptr' (which holds 8 elements)" in gpu
    assert gy.cpu()[2].item() == 1.0 and gy.cpu()[[0, 1, 3]].isnan().all()  # the load gave 0, the store ran


def test_warm_launches_of_a_debug_kernel_are_checked() -> None:
    """@jit(debug=True): launches after the first take the warm path, which must check too."""
    size = 100
    x = torch.randn(size).cuda()
    back = torch.zeros(size + 8).cuda()
    y = back[:size]
    for _ in range(3):  # y[offs + 2] for offs < size - 2: in bounds; compiles, then warm launches
        always_debug_k[(1,)](x, y, 2, size - 2, BLOCK=128)
    torch.testing.assert_close(y[2:], x[:size - 2])
    for _ in range(2):  # offs = size - 2 writes y[size]: the same binary, through the warm path
        with pytest.raises(OutOfBoundsError, match=f"{size} elements from the start of 'y_ptr'"):
            always_debug_k[(1,)](x, y, 2, size - 1, BLOCK=128)
    assert back[size:].eq(0).all()
    always_debug_k[(1,)](x, y, 2, size - 2, BLOCK=128)


def test_debug_mode_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_DEBUG", "1")
    x = torch.zeros(16).cuda()
    with pytest.raises(OutOfBoundsError, match=r"16 elements from the start of 'x_ptr' \(which holds 16"):
        env_k[(1,)](x, 17, BLOCK=32)
    assert x.eq(1).all()


def test_device_assert_is_raised_by_the_launch() -> None:
    x = torch.arange(1000, dtype=torch.int32).cuda()
    x[777] = -1
    with pytest.raises(DeviceAssertError, match=r"program id \(3, 0, 0\)"):
        assert_k[(4,)](x, 1000, BLOCK=256, debug=True)
    x[777] = 1
    assert_k[(4,)](x, 1000, BLOCK=256, debug=True)


CASES: list[tuple[Any, Any, tuple[int, ...], dict[str, Any]]] = [
    (shifted_copy_k, lambda: [torch.randn(1000), _poison(torch.empty(997)), 3, 997], (4,), {"BLOCK": 256}),
    (two_outputs_k, lambda: [torch.randn(300), _poison(torch.empty(300)), _poison(torch.empty(302)), 300, 2], (3,),
     {"BLOCK": 128}),
    (rows_k, lambda: [torch.randn(16 * 64, dtype=torch.float16), _poison(torch.empty(16, 48)), 64, 48], (1,),
     {"M": 16, "N": 64}),
    (hist_k, lambda: [torch.randint(0, 16, (777,), dtype=torch.int32), torch.zeros(16, dtype=torch.int32),
                      torch.zeros(1, dtype=torch.int32), 777], (4,), {"BLOCK": 256}),
    (scalar_k, lambda: [torch.randn(8), _poison(torch.empty(4)), 5, 3], (1,), {}),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_in_bounds_debug_launch_equals_non_debug(case: int) -> None:
    kernel, make, grid, meta = CASES[case]
    args = make()
    plain = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    checked = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    kernel[grid](*plain, **meta)
    kernel[grid](*checked, debug=True, **meta)
    torch.cuda.synchronize()
    for p, c in zip(plain, checked, strict=True):
        if isinstance(p, torch.Tensor):
            assert torch.equal(p.cpu().view(torch.uint8), c.cpu().view(torch.uint8))  # bitwise, NaNs included
    out = checked[1].cpu()
    assert not (out.isnan().all() if out.is_floating_point() else out.eq(0).all()), "the kernel wrote its output"


# ---------------------------------------------------------------- pointers of no single tensor
@jit
def _swap_k(a_ptr, b_ptr, out_ptr, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = a_ptr
    for i in range(2):
        tl.store(out_ptr + offs + i * BLOCK, tl.load(p + offs + shift))
        p = b_ptr


def test_a_pointer_swapped_between_tensors_is_checked_against_them() -> None:
    a, b = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
    out = torch.full((32,), float("nan"), device="cuda")
    _swap_k[(1,)](a, b, out, 0, BLOCK=16, debug=True)
    assert torch.equal(out[:16], a) and torch.equal(out[16:], b)
    big = torch.randn(1 << 20, device="cuda")  # other data of the process that must not be read
    with pytest.raises(OutOfBoundsError) as info:
        _swap_k[(1,)](a, b, out, 1 << 19, BLOCK=16, debug=True)
    assert "program id (0, 0, 0)" in str(info.value)
    del big


def test_host_tensor_descriptors_in_debug_mode() -> None:
    """A descriptor's base pointer comes from its packed words (no single provenance): its accesses are
    bounded by the tensor it describes, so a correct kernel is not refused."""
    from compiler.triton_compat.tools.tensor_descriptor import TensorDescriptor
    from tests.compiler.test_regressions_compat import _desc_args

    x, y = torch.randn(40, 48, device="cuda"), torch.randn(40, 48, device="cuda")
    z = torch.full((40, 96), float("nan"), device="cuda")
    xd, yd = TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(y, [16, 16])
    zd = TensorDescriptor.from_tensor(z, [16, 32])
    _desc_args[(3, 3)](xd, yd, zd, BM=16, BN=16, debug=True)
    want = torch.stack([x.view(40, 3, 16), y.view(40, 3, 16)], dim=2).reshape(40, 96)
    torch.testing.assert_close(z, want)
