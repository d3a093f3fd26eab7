"""Shared-memory layouts as linear layouts ``offset → (dim0, dim1, ...)``
(docs/layouts.md#shared-memory-layouts-and-swizzles).

``offset`` counts elements. Every layout here is invertible on its tile: the inverse gives the
element offset of a tile coordinate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .gf2 import log2_exact
from .linear import OFFSET, LinearLayout, dim_names


def _default_order(rank: int) -> tuple[int, ...]:
    return tuple(reversed(range(rank)))


def _check(shape: Sequence[int], order: Sequence[int]) -> None:
    for d, s in enumerate(shape):
        log2_exact(s, f"shape[{d}]")
    if sorted(order) != list(range(len(shape))):
        raise ValueError(f"order {list(order)} is not a permutation of range({len(shape)})")


def _unit(rank: int, dim: int, value: int) -> tuple[int, ...]:
    return tuple(value if d == dim else 0 for d in range(rank))


def _layout(shape: Sequence[int], bases: list[tuple[int, ...]]) -> LinearLayout:
    names = dim_names(len(shape))
    layout = LinearLayout.from_bases({OFFSET: bases}, dict(zip(names, shape, strict=True)))
    assert layout.is_invertible, "shared layouts are bijections onto the tile"
    return layout


def unswizzled_shared(shape: Sequence[int], order: Sequence[int] | None = None) -> LinearLayout:
    """Plain strided storage: ``order[0]`` is contiguous, then ``order[1]``, ... (row-major default)."""
    order = _default_order(len(shape)) if order is None else tuple(order)
    _check(shape, order)
    bases = [_unit(len(shape), d, 1 << k) for d in order for k in range(log2_exact(shape[d]))]
    return _layout(shape, bases)


def swizzled_shared(
    shape: Sequence[int],
    vec: int,
    per_phase: int,
    max_phase: int,
    order: Sequence[int] | None = None,
) -> LinearLayout:
    """Element (r, c) at ``r·C + (c ⊕ vec·((r / per_phase) mod max_phase))`` (mod C).

    ``order[0]`` is the contiguous dim (c), ``order[1]`` the swizzled row dim (r); higher dims
    are stacked unswizzled above the 2-D tile.
    """
    order = _default_order(len(shape)) if order is None else tuple(order)
    _check(shape, order)
    for name, value in (("vec", vec), ("per_phase", per_phase), ("max_phase", max_phase)):
        log2_exact(value, name)
    if len(shape) < 2:
        return unswizzled_shared(shape, order)
    rank = len(shape)
    col, row = order[0], order[1]
    cols = shape[col]
    bases = [_unit(rank, col, 1 << k) for k in range(log2_exact(cols))]
    for k in range(log2_exact(shape[row])):
        r = 1 << k
        swizzle = (vec * ((r // per_phase) % max_phase)) % cols
        bases.append(tuple(r if d == row else swizzle if d == col else 0 for d in range(rank)))
    for d in order[2:]:
        bases += [_unit(rank, d, 1 << k) for k in range(log2_exact(shape[d]))]
    return _layout(shape, bases)


@dataclass(frozen=True)
class NvmmaSwizzle:
    """Parameters of a TMA / wgmma swizzle mode for one element width.

    Invariant: ``per_phase · max_phase = 8`` rows per atom, ``vec`` elements = 16 bytes, and
    ``row_elements`` elements = ``swizzle_bytes`` per atom row.
    """

    swizzle_bytes: int
    element_bits: int
    vec: int
    per_phase: int
    max_phase: int
    row_elements: int


def nvmma_swizzle(swizzle_bytes: int, element_bits: int) -> NvmmaSwizzle:
    """The (vec, perPhase, maxPhase) of the 32/64/128-byte NVMMA swizzles
    (docs/layouts.md#shared-memory-layouts-and-swizzles)."""
    if swizzle_bytes not in (32, 64, 128):
        raise ValueError(f"swizzle must be 32, 64 or 128 bytes, got {swizzle_bytes}")
    if element_bits not in (8, 16, 32, 64):
        raise ValueError(f"element width must be 8, 16, 32 or 64 bits, got {element_bits}")
    return NvmmaSwizzle(
        swizzle_bytes=swizzle_bytes,
        element_bits=element_bits,
        vec=128 // element_bits,
        per_phase=128 // swizzle_bytes,
        max_phase=swizzle_bytes // 16,
        row_elements=swizzle_bytes * 8 // element_bits,
    )


def nvmma_shared(
    shape: Sequence[int], element_bits: int, swizzle_bytes: int, transposed: bool = False
) -> LinearLayout:
    """TMA / wgmma shared layout of a 2-D tile with a 32, 64 or 128-byte swizzle.

    The tile is cut into column blocks one swizzle width wide; inside a block rows are stored
    one after another with the swizzled construction of `swizzled_shared`. Offset bits: the
    columns of an atom row, then all row bits, then the column blocks. ``transposed`` makes
    dim0 the contiguous dim.
    """
    if len(shape) != 2:
        raise ValueError(f"NVMMA layouts are 2-D, got {list(shape)}")
    params = nvmma_swizzle(swizzle_bytes, element_bits)
    col, row = (0, 1) if transposed else (1, 0)
    _check(shape, (col, row))
    width = params.row_elements
    if shape[col] < width:
        raise ValueError(
            f"{swizzle_bytes}-byte swizzle needs rows of {width} elements, tile has {shape[col]}"
        )
    bases = [_unit(2, col, 1 << k) for k in range(log2_exact(width))]
    for k in range(log2_exact(shape[row])):
        r = 1 << k
        swizzle = (params.vec * ((r // params.per_phase) % params.max_phase)) % width
        bases.append(tuple(r if d == row else swizzle for d in range(2)))
    bases += [_unit(2, col, width << k) for k in range(log2_exact(shape[col] // width))]
    return _layout(shape, bases)


__all__ = ["NvmmaSwizzle", "nvmma_shared", "nvmma_swizzle", "swizzled_shared", "unswizzled_shared"]
