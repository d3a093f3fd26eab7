"""The recursive doubling both GPU backends lower scans with (compiler/layouts/scan.py), run on
every thread of a program at once: each value an array over the threads, lane and warp exchanges
permutations of it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler.layouts import LANE, REGISTER, WARP, LinearLayout, fill_blocked
from compiler.layouts.scan import doubling, scan_bits


def _emulate(layout: LinearLayout, axis: int, reverse: bool, x: np.ndarray,
             comb: Any) -> np.ndarray:
    """Runs `doubling` on every thread at once (each value an array over the threads, lane and
    wave exchanges permutations of it), and gathers the result tile from the registers."""
    nl, nw = layout.in_dim_size(LANE), layout.in_dim_size(WARP)
    threads = np.arange(nl * nw)
    lane, wave = threads % nl, threads // nl
    n = layout.in_dim_size(REGISTER)

    def coords(r: int) -> tuple[np.ndarray, ...]:
        per = [layout.apply({REGISTER: r, LANE: int(ln), WARP: int(w)}) for ln, w in zip(lane, wave, strict=True)]
        return tuple(np.array([c[d] for c in per]) for d in range(x.ndim))

    regs = [[x[coords(r)]] for r in range(n)]

    def upper(dim: str, k: int) -> np.ndarray:
        return ((lane if dim == LANE else wave) >> k & 1).astype(bool)

    def exchange(dim: str, k: int, total: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        partner = threads ^ ((1 << k) if dim == LANE else (nl << k))
        return [[v[partner] for v in vals] for vals in total]

    bits = scan_bits(layout, axis)
    assert bits is not None
    out = doubling(bits, reverse, regs, lambda a, c: [comb(a[0], c[0])], np.where, upper, exchange)
    y = np.full(x.shape, np.nan if x.dtype.kind == "f" else -1, dtype=x.dtype)
    for r in range(n):
        got = out[r][0]
        c = coords(r)
        # every copy of an element (a register or thread repeating another's) holds the same value
        assert np.all((y[c] == got) | (y[c] == (-1 if x.dtype.kind != "f" else y[c])) | np.isnan(y[c]))
        y[c] = got
    return y


@pytest.mark.parametrize(("shape", "vec", "warps", "axis"), [
    ((2048,), 4, 4, 0), ((1024,), 1, 8, 0), ((64, 32), 2, 4, 0), ((64, 32), 2, 4, 1), ((8, 256), 4, 2, 1),
    ((16,), 1, 4, 0),  # a tile smaller than the program: lanes and waves hold copies
])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("lanes", [32, 64])  # NVIDIA warps, AMD wavefronts
def test_doubling_computes_the_scan_on_every_thread(shape: tuple[int, ...], vec: int, warps: int, axis: int,
                                                    reverse: bool, lanes: int) -> None:
    """The GPU backends' recursive doubling, run on all threads of a program at once, against numpy's
    cumulative sum (integers: exact) and, for a non-commutative combine, against a sequential fold."""
    layout = fill_blocked(shape, vec, warps, lanes)
    rng = np.random.default_rng(0)
    x = rng.integers(-1000, 1000, size=shape)
    want = np.flip(np.cumsum(np.flip(x, axis), axis), axis) if reverse else np.cumsum(x, axis)
    assert np.array_equal(_emulate(layout, axis, reverse, x, np.add), want)
    # an affine-map composition (a, b) o (c, d), packed in one integer, is associative and not
    # commutative: the combine order of the doubling matters
    mod = 1 << 20
    a, bb = rng.integers(1, 16, size=shape), rng.integers(0, 16, size=shape)
    packed = a * mod + bb

    def compose(p: np.ndarray, q: np.ndarray) -> np.ndarray:  # x -> q(p(x))
        pa, pb, qa, qb = p // mod, p % mod, q // mod, q % mod
        return (pa * qa % 997) * mod + (qa * pb + qb) % 997

    got = _emulate(layout, axis, reverse, packed, compose)
    moved = np.moveaxis(packed, axis, -1)
    ref = np.empty_like(moved)
    for idx in np.ndindex(moved.shape[:-1]):
        row = moved[idx]
        order = range(len(row) - 1, -1, -1) if reverse else range(len(row))
        acc = None
        for i in order:
            acc = row[i] if acc is None else compose(acc, row[i])
            ref[idx + (i,)] = acc
    assert np.array_equal(got, np.moveaxis(ref, -1, axis))
