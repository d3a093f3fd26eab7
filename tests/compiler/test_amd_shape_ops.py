"""tl.join, tl.split, tl.cat, tl.reshape, tl.gather and tl.sort on the AMD backend (compile only).

The kernels are the ones the PTX tests compile (ptx_ops_kernels.py); each compiles for amd:gfx942
and amd:gfx950 without scratch and, where a linker exists, links into a code object whose kernel
descriptor agrees. The layouts the lowerings put results in are checked by simulating a workgroup
of 64-lane waves with numpy: every (wave, lane, register) holds the element its layout names, and
the registers the op hands on must hold the result the op defines."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import compiler.language as tl
from compiler import errors as E
from compiler import jit
from compiler.layouts import LANE, REGISTER, WARP, LinearLayout, fill_blocked
from compiler.layouts import shape as L
from compiler.runtime.launch import compile_for_signature

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ptx_ops_kernels as K  # noqa: E402
from amd_checks import check_compiled  # noqa: E402

ARCHS = ("gfx942", "gfx950")
WAVE = 64
SHAPE_CASES = ("join_split", "interleave", "split_loaded", "split_join", "cat", "gather0", "gather1", "flip",
               "sort2d", "sort1d", "sort_fp16")


def _compile(name: str, arch: str, num_warps: int = 4) -> Any:
    fn, sig, cx, debug = K.CASES[name]
    return compile_for_signature(fn, sig, cx, f"amd:{arch}", num_warps, 3, debug)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", SHAPE_CASES)
def test_shape_op_kernel_compiles(name: str, arch: str) -> None:
    assert "global_store" in check_compiled(_compile(name, arch), arch)


@pytest.mark.parametrize("num_warps", [1, 8])
@pytest.mark.parametrize("name", ["sort2d", "sort1d", "gather1", "cat", "split_loaded"])
def test_other_wave_counts(name: str, num_warps: int) -> None:
    check_compiled(_compile(name, "gfx942", num_warps), "gfx942")


def test_join_then_split_moves_no_data() -> None:
    ck = _compile("split_join", "gfx942")
    assert ck.metadata["shared"] == 0 and "s_barrier" not in ck.asm["amdgcn"]


@jit
def unzip_k(x_ptr, a_ptr, b_ptr, N: tl.constexpr):
    # even and odd elements: the reshape renames registers (its only user is the split), the split
    # takes the pair from register bit 0
    r = tl.arange(0, N)
    a, b = tl.split(tl.reshape(tl.load(x_ptr + tl.arange(0, 2 * N)), (N, 2)))
    tl.store(a_ptr + r, a)
    tl.store(b_ptr + r, b)


@pytest.mark.parametrize("arch", ARCHS)
def test_reshape_then_split_moves_no_data(arch: str) -> None:
    ck = compile_for_signature(unzip_k, {"x_ptr": "*fp32", "a_ptr": "*fp32", "b_ptr": "*fp32"}, {"N": 512},
                               f"amd:{arch}", 4, 3, False)
    asm = check_compiled(ck, arch)
    assert ck.metadata["shared"] == 0 and "s_barrier" not in asm and "global_load_dwordx4" in asm


def test_sort_paths() -> None:
    """64 elements on 4 waves: within one wave, partners by ds_bpermute and no LDS; 1024 on 4 waves:
    the top coordinate bits are wave bits, whose partners come through LDS."""
    small = _compile("sort_fp16", "gfx942")
    assert "ds_bpermute_b32" in small.asm["amdgcn"] and small.metadata["shared"] == 0
    big = _compile("sort1d", "gfx950")
    assert "ds_bpermute_b32" in big.asm["amdgcn"] and "s_barrier" in big.asm["amdgcn"]
    assert big.metadata["shared"] >= 1024 * 4


def test_gather_reads_lds() -> None:
    asm = _compile("gather0", "gfx942").asm["amdgcn"]
    assert re.search(r"ds_write", asm) and re.search(r"ds_read", asm) and "s_barrier" in asm


# ---------------------------------------------------------------- layouts, simulated
def _hw(layout: LinearLayout) -> tuple[int, int, int]:
    return layout.in_dim_size(WARP), layout.in_dim_size(LANE), layout.in_dim_size(REGISTER)


def _place(layout: LinearLayout, tile: np.ndarray) -> np.ndarray:
    """regs[w, l, r]: the element register r of lane l of wave w holds."""
    assert tile.shape == layout.out_shape
    w_n, l_n, r_n = _hw(layout)
    out = np.empty((w_n, l_n, r_n), tile.dtype)
    for w in range(w_n):
        for lane in range(l_n):
            for r in range(r_n):
                out[w, lane, r] = tile[tuple(layout.apply({REGISTER: r, LANE: lane, WARP: w}))]
    return out


def _read(layout: LinearLayout, regs: np.ndarray) -> np.ndarray:
    """The tile the registers hold under `layout`; every copy of an element must agree."""
    tile = np.full(layout.out_shape, -1, regs.dtype)
    w_n, l_n, r_n = _hw(layout)
    assert regs.shape == (w_n, l_n, r_n)
    for w in range(w_n):
        for lane in range(l_n):
            for r in range(r_n):
                c = tuple(layout.apply({REGISTER: r, LANE: lane, WARP: w}))
                assert tile[c] in (-1, regs[w, lane, r])
                tile[c] = regs[w, lane, r]
    assert (tile >= 0).all()
    return tile


def _per_thread(f: Any, *regs: np.ndarray) -> np.ndarray:
    """Apply a register-list function (compiler/layouts/shape.py) thread by thread."""
    w_n, l_n = regs[0].shape[:2]
    return np.array([[f(*(list(x[w, lane]) for x in regs)) for lane in range(l_n)] for w in range(w_n)])


def _tile(shape: tuple[int, ...], start: int = 0) -> np.ndarray:
    return np.arange(start, start + int(np.prod(shape))).reshape(shape)


@pytest.mark.parametrize(("shape", "vec", "warps"), [((16, 32), 4, 4), ((256,), 4, 4), ((8, 4), 1, 2),
                                                    ((2, 4, 64), 2, 8)])
def test_join_split_cat_reshape_layouts(shape: tuple[int, ...], vec: int, warps: int) -> None:
    lay = fill_blocked(shape, vec, warps, WAVE)  # the AMD backend's canonical layout
    a, b = _tile(shape), _tile(shape, 10_000)
    ra, rb = _place(lay, a), _place(lay, b)
    # join: b's registers interleaved with a's, the pair under register bit 0
    joined = L.pair_layout(lay, (*shape, 2), WAVE, warps)
    rj = _per_thread(L.interleave, ra, rb)
    assert (_read(joined, rj) == np.stack([a, b], -1)).all()
    # split of the joined tile: the pair bit is register bit 0; each half back in a's layout
    k = L.pair_bit(joined)
    assert k == 0
    half = L.split_layout(joined, k)
    assert half == lay
    lo = _per_thread(lambda r: L.halves(r, k)[0], rj)
    hi = _per_thread(lambda r: L.halves(r, k)[1], rj)
    assert (_read(half, lo) == a).all() and (_read(half, hi) == b).all()
    # cat along dim 0: b's registers after a's
    rc = _per_thread(lambda x, y: x + y, ra, rb)
    assert (_read(L.cat_layout(lay), rc) == np.concatenate([a, b])).all()
    # reshape of the joined tile to (..., 2 * last): row-major order kept, registers unchanged
    flat = (*shape[:-1], 2 * shape[-1])
    re_lay = L.reshaped_layout(joined, flat)
    assert re_lay is not None and (_read(re_lay, rj) == np.stack([a, b], -1).reshape(flat)).all()


def test_split_of_a_loaded_pair_needs_a_conversion() -> None:
    """A (64, 2) tile one element per thread spreads the pair over lanes: split converts it to the
    pair layout of the canonical (64,) layout, where each thread holds both halves."""
    canon = fill_blocked((64, 2), 1, 4, WAVE)
    assert L.pair_bit(canon) is None
    pair = L.pair_layout(fill_blocked((64,), 4, 4, WAVE), (64, 2), WAVE, 4)
    x = _tile((64, 2))
    k = L.pair_bit(pair)
    assert k == 0
    regs = _place(pair, x)
    lo = _per_thread(lambda r: L.halves(r, 0)[0], regs)
    assert (_read(L.split_layout(pair, 0), lo) == x[:, 0]).all()


def test_join_of_scalars() -> None:
    lay = L.pair_layout(None, (2,), WAVE, 4)
    regs = np.tile(np.array([7, 9]), (4, WAVE, 1))
    assert (_read(lay, regs) == np.array([7, 9])).all()


def _bitonic(layout: LinearLayout, regs: np.ndarray, desc: bool) -> np.ndarray:
    """tile_shape.sort_regs on every thread at once: the partner of each element is found through
    the hardware bit that owns the stage's coordinate bit (a register, lane or wave bit)."""
    axis = len(layout.out_shape) - 1
    n = layout.out_shape[axis]
    w_n, l_n, r_n = _hw(layout)
    coord = np.array([[[layout.apply({REGISTER: r, LANE: lane, WARP: w})[axis] for r in range(r_n)]
                       for lane in range(l_n)] for w in range(w_n)])
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            owner = L.bit_owner(layout, axis, j)
            assert owner is not None
            dim, bit = owner
            axis_of = {WARP: 0, LANE: 1, REGISTER: 2}[dim]
            perm = np.arange(regs.shape[axis_of]) ^ (1 << bit)
            other = np.take(regs, perm, axis=axis_of)
            upper = (coord & j) != 0
            lo, hi = np.where(upper, other, regs), np.where(upper, regs, other)
            ascending = ((coord & k) == 0) ^ desc
            swap = np.where(ascending, lo > hi, lo < hi)
            new_lo, new_hi = np.where(swap, hi, lo), np.where(swap, lo, hi)
            regs = np.where(upper, new_hi, new_lo)
            j //= 2
        k *= 2
    return regs


@pytest.mark.parametrize(("shape", "vec", "warps", "desc"), [((4, 256), 4, 4, False), ((1024,), 4, 4, True),
                                                            ((64,), 1, 4, False), ((2, 512), 2, 8, True)])
def test_sort_layouts(shape: tuple[int, ...], vec: int, warps: int, desc: bool) -> None:
    lay = fill_blocked(shape, vec, warps, WAVE)
    assert L.sortable(lay, len(shape) - 1, shape[-1])
    x = np.random.default_rng(0).permutation(int(np.prod(shape))).reshape(shape)
    got = _read(lay, _bitonic(lay, _place(lay, x), desc))
    want = np.sort(x, axis=-1)
    assert (got == (want[..., ::-1] if desc else want)).all()


# ---------------------------------------------------------------- what stays refused
@pytest.mark.parametrize(("name", "what", "hint"), [("print", "tl.device_print", "hostcall"),
                                                    ("asm", "tl.inline_asm_elementwise", "target specific")])
def test_refused_ops_say_what_to_do(name: str, what: str, hint: str) -> None:
    with pytest.raises(E.UnsupportedError) as info:
        _compile(name, "gfx942")
    msg = str(info.value)
    assert what in msg and "amd:gfx942" in msg and hint in msg and "'cuda'" in msg
    assert info.value.loc is not None and info.value.loc.file == K.__file__
