"""Debug mode: out-of-bounds loads/stores and failed device_asserts are reported, not executed."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import jit
from compiler.errors import DeviceAssertError, OutOfBoundsError


@jit(debug=True)
def _oob_store(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0)


def test_out_of_bounds_store_is_reported_and_not_executed() -> None:
    backing = torch.zeros(32)
    x = backing[:10]
    with pytest.raises(OutOfBoundsError) as info:
        _oob_store[(1,)](x, 10, BLOCK=16)
    msg = str(info.value)
    assert "_oob_store" in msg and "test_debug_mode.py" in msg and "program id (0, 0, 0)" in msg
    assert "tl.store(x_ptr + offs, 1.0)" in msg
    assert backing[10:].eq(0).all(), "a masked-off out-of-bounds store must not write"


@jit(debug=True)
def _oob_load(x_ptr, y_ptr, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs + shift))


def test_out_of_bounds_load_reports_program_and_offset() -> None:
    x = torch.randn(16)
    y = torch.zeros(16)
    with pytest.raises(OutOfBoundsError, match="elements from the start of 'x_ptr'"):
        _oob_load[(1,)](x, y, 100, BLOCK=16)
    _oob_load[(1,)](x, y, 0, BLOCK=16)
    torch.testing.assert_close(y, x)


@jit
def _masked_ok(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0) + 1, mask=offs < n)


def test_masked_accesses_pass_the_bounds_check() -> None:
    x = torch.zeros(10)
    _masked_ok[(1,)](x, 10, BLOCK=16, debug=True)
    assert x.eq(1).all()


@jit
def _assert_positive(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.device_assert(x >= 0, "x must be non-negative")


def test_device_assert_active_in_debug_mode_only() -> None:
    x = torch.tensor([1.0, -1.0, 2.0, 3.0])
    _assert_positive[(1,)](x, BLOCK=4)
    with pytest.raises(DeviceAssertError, match="x >= 0"):
        _assert_positive[(1,)](x, BLOCK=4, debug=True)


def test_bounds_check_option_checks_accesses_without_asserts() -> None:
    backing = torch.zeros(48)
    n = int(torch.randint(1, 16, ()).item())
    with pytest.raises(OutOfBoundsError, match=f"{n} elements from the start of 'x_ptr'"):
        _oob_store[(1,)](backing[:n], n, BLOCK=16, bounds_check=True)
    assert backing[n:].eq(0).all()
    _assert_positive[(1,)](torch.tensor([1.0, -1.0, 2.0, 3.0]), BLOCK=4, bounds_check=True)  # asserts stay off


@jit
def _cas_at(x_ptr, shift):
    tl.atomic_cas(x_ptr + shift, 0.0, 5.0)


def test_atomic_cas_is_bounds_checked() -> None:
    backing = torch.zeros(64)
    with pytest.raises(OutOfBoundsError, match="atomic_cas"):
        _cas_at[(1,)](backing[:8], 40, bounds_check=True)
    assert backing.eq(0).all()
    _cas_at[(1,)](backing[:8], 3, bounds_check=True)
    assert backing[3] == 5.0 and backing.sum() == 5.0
