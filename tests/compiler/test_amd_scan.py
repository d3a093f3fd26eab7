"""Scans on the AMD backend (device-free): which hardware bits carry the scanned coordinate, and
the AMDGCN of in-thread, cross-lane (ds_bpermute) and cross-wave (LDS) steps."""

from __future__ import annotations

import pytest

import compiler.language as tl
from compiler import jit
from compiler.backends.amd.scan import scan_bits
from compiler.layouts import LANE, REGISTER, WARP, LinearLayout, fill_blocked
from tests.compiler.test_amd_backend import ARCHS, _check_common


@jit
def cumsum_2d(x_ptr, y_ptr, BM: tl.constexpr, BN: tl.constexpr, AXIS: tl.constexpr, REV: tl.constexpr):
    r = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(y_ptr + r, tl.cumsum(tl.load(x_ptr + r), axis=AXIS, reverse=REV))


@jit
def copy_2d(x_ptr, y_ptr, BM: tl.constexpr, BN: tl.constexpr, AXIS: tl.constexpr, REV: tl.constexpr):
    r = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(y_ptr + r, tl.load(x_ptr + r))


def _delta(consts: dict[str, object], arch: str, num_warps: int, ty: str = "fp32") -> tuple[str, dict[str, int]]:
    """The scan kernel's assembly, and what it has beyond the same kernel without the scan (the
    address arithmetic of a 2-D tile has layout conversions of its own)."""
    sig = {"x_ptr": f"*{ty}", "y_ptr": f"*{ty}"}
    ck = cumsum_2d.compile(sig, consts, target=f"amd:{arch}", num_warps=num_warps)
    base = copy_2d.compile(sig, consts, target=f"amd:{arch}", num_warps=num_warps)
    asm, ref = _check_common(ck, arch), base.asm["amdgcn"]
    counts = {k: asm.count(k) - ref.count(k) for k in ("ds_bpermute_b32", "s_barrier", "ds_write")}
    counts["shared"] = ck.metadata["shared"]
    return asm, counts


@jit
def cumprod_1d(x_ptr, y_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    tl.store(y_ptr + r, tl.cumprod(tl.load(x_ptr + r), axis=0))


@jit
def _first_max(a, ia, b, ib):
    keep = a >= b
    return tl.where(keep, a, b), tl.where(keep, ia, ib)


@jit
def running_argmax(x_ptr, v_ptr, i_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    v, i = tl.associative_scan((tl.load(x_ptr + r), r), 0, _first_max)
    tl.store(v_ptr + r, v)
    tl.store(i_ptr + r, i)


def test_scan_bits_of_a_blocked_layout() -> None:
    """A row of 2048 over 4 waves, 4 consecutive elements a thread: coordinate bits 0-1 are
    registers, 2-7 lanes, 8-9 waves, then registers again (the layout wraps)."""
    lay = fill_blocked((2048,), 4, 4, 64)
    bits = scan_bits(lay, 0)
    assert bits is not None
    assert [s for s, _, _ in bits] == [1 << i for i in range(11)]
    assert [d for _, d, _ in bits] == [REGISTER] * 2 + [LANE] * 6 + [WARP] * 2 + [REGISTER]
    # a 2-D tile scanned along rows: only the bits moving along dim 0 take part
    lay2 = fill_blocked((16, 64), 1, 4, 64)
    bits2 = scan_bits(lay2, 0)
    assert bits2 is not None and len(bits2) == 4
    assert all(lay2.bases(d)[k][0] == s and lay2.bases(d)[k][1] == 0 for s, d, k in bits2)


def test_scan_bits_refuses_mixed_bases() -> None:
    """A basis moving along the axis and another dim at once has no partner along the axis alone."""
    lay = LinearLayout.from_bases({REGISTER: [(1, 1)], LANE: [(0, 1)], WARP: []}, {"dim0": 2, "dim1": 2})
    assert scan_bits(lay, 0) is None
    assert scan_bits(lay, 1) is None  # dim 1's steps are not one bit each: (1,1) moves both


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("reverse", [False, True])
def test_row_scan_across_lanes_and_waves(arch: str, reverse: bool) -> None:
    """A row of 2048 over 4 waves, 8 registers a thread (4 consecutive elements, twice): after the
    in-thread steps the thread holds two distinct segment totals, each moved at 6 lane steps of
    ds_bpermute; 2 wave steps through LDS (two barriers each); no scratch."""
    _, d = _delta({"BM": 1, "BN": 2048, "AXIS": 1, "REV": reverse}, arch, 4)
    assert d["ds_bpermute_b32"] == 6 * 2 and d["s_barrier"] == 4 and d["ds_write"] > 0
    # one word per thread per register (8 registers of 256 threads) for the exchanged totals
    assert d["shared"] == 8 * 256 * 4


@pytest.mark.parametrize("arch", ARCHS)
def test_column_scan_within_one_wave_needs_no_lds(arch: str) -> None:
    """64 rows over the 64 lanes of one wave, 4 columns a thread: 6 lane steps for each of the 4
    registers, nothing through LDS."""
    asm, d = _delta({"BM": 64, "BN": 4, "AXIS": 0, "REV": False}, arch, 1, "i32")
    assert d["ds_bpermute_b32"] == 6 * 4 and d["s_barrier"] == 0 and d["ds_write"] == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_scan_within_a_thread_moves_nothing(arch: str) -> None:
    """A whole row of 4 in each thread: no exchange at all."""
    asm, d = _delta({"BM": 64, "BN": 4, "AXIS": 1, "REV": False}, arch, 1)
    assert d["ds_bpermute_b32"] == 0 and d["s_barrier"] == 0 and "v_add_f32" in asm


@pytest.mark.parametrize("arch", ARCHS)
def test_cumprod_and_a_two_value_associative_scan(arch: str) -> None:
    ck = cumprod_1d.compile({"x_ptr": "*fp16", "y_ptr": "*fp16"}, {"BLOCK": 512}, target=f"amd:{arch}")
    asm = _check_common(ck, arch)
    assert "ds_bpermute_b32" in asm and "v_mul_f16" in asm
    ck = running_argmax.compile({"x_ptr": "*fp32", "v_ptr": "*fp32", "i_ptr": "*i32"}, {"BLOCK": 1024},
                                target=f"amd:{arch}", num_warps=8)
    asm = _check_common(ck, arch)
    # both values move at every lane step, and both go through LDS at the wave steps
    assert asm.count("ds_bpermute_b32") >= 2 * 6 and asm.count("s_barrier") == 2 * 3
    assert ck.metadata["shared"] == 2 * 2 * 512 * 4
