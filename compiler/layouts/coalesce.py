"""Choosing blocked layouts for coalesced global loads and stores (docs/layouts.md#coalesced-global-accesses).

Each thread takes as many consecutive elements of the most contiguous dim as alignment,
contiguity and a 16-byte vector allow (without holding more than its share of the tile);
lanes, then warps, sweep the dims in order of contiguity, so one warp instruction covers
whole 128-byte lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from .distributed import BlockedEncoding
from .gf2 import log2_exact
from .linear import LinearLayout

MAX_ACCESS_BYTES = 16


@dataclass(frozen=True)
class MemoryAccess:
    """What the pointer analysis knows about one global load or store.

    ``contiguity[d]``: length of runs of consecutive addresses along dim d;
    ``divisibility[d]``: power-of-two byte alignment of the run starts along dim d.
    """

    shape: tuple[int, ...]
    element_bytes: int
    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    is_store: bool = False

    def __post_init__(self) -> None:
        rank = len(self.shape)
        if len(self.contiguity) != rank or len(self.divisibility) != rank:
            raise ValueError("contiguity and divisibility need one entry per dim")
        for d, s in enumerate(self.shape):
            log2_exact(s, f"shape[{d}]")
        log2_exact(self.element_bytes, "element_bytes")

    @property
    def numel(self) -> int:
        """Elements in the tile."""
        return prod(self.shape)

    @property
    def order(self) -> tuple[int, ...]:
        """Dims by contiguity, largest first; ties favour the later (row-major faster) dim."""
        return tuple(sorted(range(len(self.shape)), key=lambda d: (-self.contiguity[d], -d)))

    def vector_elements(self) -> int:
        """Elements one thread may access at once along the fastest dim (alignment-bounded)."""
        fast = self.order[0]
        by_alignment = max(1, _pow2_floor(self.divisibility[fast]) // self.element_bytes)
        by_contiguity = _pow2_floor(min(self.contiguity[fast], self.shape[fast]))
        return max(1, min(by_alignment, by_contiguity, MAX_ACCESS_BYTES // self.element_bytes))


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def elements_per_thread(access: MemoryAccess, num_threads: int, related: Sequence[MemoryAccess] = ()) -> int:
    """Consecutive elements each thread handles along the fastest dim.

    Related accesses (same pointer slice, same order) may raise it; a store never exceeds its
    own alignment-bounded width, and no thread gets more than its share of the tile.
    """
    per_thread = access.vector_elements()
    for other in related:
        if other.order == access.order:
            per_thread = max(per_thread, other.vector_elements())
    per_thread = min(per_thread, max(access.numel // num_threads, 1))
    if access.is_store:
        per_thread = min(per_thread, access.vector_elements())
    return per_thread


def coalesced_encoding(
    access: MemoryAccess,
    num_warps: int,
    related: Sequence[MemoryAccess] = (),
    threads_per_warp: int = 32,
) -> BlockedEncoding:
    """The blocked encoding for a global access: vectors along the fastest dim, lanes and
    warps distributed greedily along the contiguity order (the last dim takes the rest)."""
    log2_exact(num_warps, "num_warps")
    order = access.order
    rank = len(access.shape)
    per_thread = elements_per_thread(access, num_warps * threads_per_warp, related)
    size_per_thread = [1] * rank
    size_per_thread[order[0]] = per_thread
    lanes_left, warps_left, threads_left = threads_per_warp, num_warps, threads_per_warp * num_warps
    threads = [1] * rank
    warps = [1] * rank
    for d in order[:-1]:
        t = min(threads_left, max(1, access.shape[d] // size_per_thread[d]))
        threads[d] = min(t, lanes_left)
        warps[d] = min(max(1, t // threads[d]), warps_left)
        lanes_left //= threads[d]
        warps_left //= warps[d]
        threads_left //= t
    last = order[-1]
    threads[last] = lanes_left
    warps[last] = warps_left
    return BlockedEncoding(tuple(size_per_thread), tuple(threads), tuple(warps), order)


def coalesced_layout(
    access: MemoryAccess, num_warps: int, related: Sequence[MemoryAccess] = ()
) -> LinearLayout:
    """Linear layout of `coalesced_encoding` on the access's tile."""
    return coalesced_encoding(access, num_warps, related).layout(access.shape)


def global_vector_width(layout: LinearLayout, access: MemoryAccess, mask_constancy: int | None = None) -> int:
    """Elements per global vector access at lowering (docs/layouts.md#coalesced-global-accesses).

    The minimum of the layout's aligned register run along the fastest dim, the pointer
    alignment, 16 bytes, and (for masked accesses) the mask's constancy along that dim.
    """
    fast = access.order[0]
    width = min(layout.vector_width(layout.out_dim_names[fast]), access.vector_elements())
    if mask_constancy is not None:
        width = min(width, _pow2_floor(mask_constancy))
    return width


__all__ = [
    "MemoryAccess",
    "coalesced_encoding",
    "coalesced_layout",
    "elements_per_thread",
    "global_vector_width",
]
