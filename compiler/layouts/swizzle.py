"""Shared-memory bank model and the choice of a conflict-free swizzle (docs/layouts.md#conversions).

Bank model: 32 banks of 4 bytes; a warp access is served in phases of 32 lanes (accesses of
at most 4 bytes), 16 lanes (8 bytes) or 8 lanes (16 bytes), lowest lane ids first. A phase
costs one wavefront per distinct 4-byte word in its busiest bank (same word = broadcast).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .gf2 import XorBasis, intersection_dim, log2_exact
from .linear import LANE, OFFSET, REGISTER, LinearLayout, Vectorisation

BANKS = 32
BANK_BYTES = 4
LINE_BITS = BANKS * BANK_BYTES * 8
MAX_VECTOR_BITS = 128


def element_bytes(element_bits: int) -> int:
    """Bytes one element occupies in shared memory (sub-byte types travel as i8)."""
    return max(element_bits, 8) // 8


def lanes_per_phase(access_bytes: int) -> int:
    """Lanes served together by the banks for one access width."""
    return BANKS if access_bytes <= BANK_BYTES else BANKS * BANK_BYTES // access_bytes


def phase_wavefronts(byte_addresses: Sequence[int], access_bytes: int) -> int:
    """Wavefronts of one phase: the most distinct words any bank must serve."""
    words_per_bank: dict[int, set[int]] = {}
    for address in byte_addresses:
        for word in range(address // BANK_BYTES, (address + access_bytes - 1) // BANK_BYTES + 1):
            words_per_bank.setdefault(word % BANKS, set()).add(word)
    return max((len(words) for words in words_per_bank.values()), default=0)


def count_wavefronts(
    access: LinearLayout,
    element_bits: int,
    vectorisation: Vectorisation,
    skip: Mapping[str, int] | None = None,
) -> int:
    """Wavefronts one warp spends on all its vector accesses through ``access``.

    ``access`` maps (register, lane, warp, ...) to an element offset. Every combination of
    the dims other than register and lane is one warp; the result is the worst warp. Threads
    with any bit of ``skip[dim]`` set do not access (duplicates masked off).
    """
    skip = dict(skip or {})
    size = element_bytes(element_bits)
    access_bytes = vectorisation.width * size
    phase = lanes_per_phase(access_bytes)
    starts = vectorisation.vector_starts(access.in_dim_size_log2(REGISTER))
    bases = [r for r in starts if r & skip.get(REGISTER, 0) == 0]
    lanes = [lane for lane in range(access.in_dim_size(LANE)) if lane & skip.get(LANE, 0) == 0]
    lane_offsets = {lane: access.apply_flat({LANE: lane}) for lane in lanes}
    outer = [n for n in access.in_dim_names if n not in (REGISTER, LANE)]
    worst = 0
    for group in _combinations(access, outer, skip):
        group_offset = access.apply_flat(group)
        total = 0
        for r in bases:
            reg_offset = access.apply_flat({REGISTER: r}) ^ group_offset
            for start in range(0, access.in_dim_size(LANE), phase):
                addresses = [
                    (reg_offset ^ lane_offsets[lane]) * size
                    for lane in lanes
                    if start <= lane < start + phase
                ]
                total += phase_wavefronts(addresses, access_bytes)
        worst = max(worst, total)
    return worst


def _combinations(layout: LinearLayout, dims: Sequence[str], skip: Mapping[str, int]) -> list[dict[str, int]]:
    out: list[dict[str, int]] = [{}]
    for name in dims:
        values = [v for v in range(layout.in_dim_size(name)) if v & skip.get(name, 0) == 0]
        out = [{**prefix, name: v} for prefix in out for v in values]
    return out


def conflict_ways(segment: Sequence[int], lane_tile: Sequence[int]) -> int:
    """Wavefronts per phase predicted by linear algebra: 2^dim(span(H) ∩ span(T)).

    ``segment`` (H) are the tile vectors stored on the offset bits above one 128-byte line,
    ``lane_tile`` (T) the tile images of the lane bits served in one phase.
    """
    return 1 << intersection_dim(segment, lane_tile)


def _units(n: int) -> list[int]:
    return [1 << k for k in range(n)]


def optimal_swizzle(src: LinearLayout, dst: LinearLayout, element_bits: int) -> LinearLayout:
    """A shared layout ``offset → tile`` making the src store and dst load conflict-free.

    Offset bits are split as [vector | bank | segment] (docs/layouts.md#conversions): the vector holds
    register bases common to both sides (at most 16 bytes), the bank bits fill one 128-byte
    line, and the segment vectors H avoid the lane spans of one phase on both sides: first
    unit vectors that neither side's phase lanes use, then sums of an src-only and a dst-only
    lane vector, then leftover lane vectors alternating between the sides.
    """
    if src.out_dims != dst.out_dims:
        raise ValueError(f"layouts cover different tiles: {src.out_dims} vs {dst.out_dims}")
    n = src.num_out_bits
    bits = max(element_bits, 8)
    src_regs = [v for v in src.flat_bases(REGISTER) if v]
    dst_regs = [v for v in dst.flat_bases(REGISTER) if v]

    span = XorBasis()
    vector: list[int] = []
    for v in sorted(set(src_regs) & set(dst_regs)):
        if (bits << (len(vector) + 1)) > MAX_VECTOR_BITS:
            break
        if span.insert(v):
            vector.append(v)
    vector_bits = bits << len(vector)
    bank_count = min(log2_exact(LINE_BITS // vector_bits) if vector_bits <= LINE_BITS else 0, n - len(vector))
    segment_count = n - len(vector) - bank_count

    phase_lane_bits = 5 - log2_exact(max(1, vector_bits // 32))
    tile_src = [v for v in src.flat_bases(LANE)[:phase_lane_bits] if v]
    tile_dst = [v for v in dst.flat_bases(LANE)[:phase_lane_bits] if v]

    segment: list[int] = []

    def accept(candidate: int, tolerate: tuple[int, int]) -> bool:
        if len(segment) == segment_count or not candidate:
            return False
        trial = segment + [candidate]
        if intersection_dim(trial, tile_src) > tolerate[0] or intersection_dim(trial, tile_dst) > tolerate[1]:
            return False
        if not span.insert(candidate):
            return False
        segment.append(candidate)
        return True

    used = set(vector) | set(tile_src) | set(tile_dst)
    for u in _units(n):
        if u not in used:
            accept(u, (0, 0))
    only_src = [v for v in tile_src if v not in tile_dst]
    only_dst = [v for v in tile_dst if v not in tile_src]
    for a, b in zip(only_src, only_dst, strict=False):
        accept(a ^ b, (0, 0))
    leftovers = [v for pair in zip(only_src, only_dst, strict=False) for v in pair]
    leftovers += only_src[len(only_dst) :] + only_dst[len(only_src) :] + _units(n)
    for v in leftovers:
        conflicts = (intersection_dim(segment, tile_src), intersection_dim(segment, tile_dst))
        accept(v, (conflicts[0] + 1, conflicts[1] + 1))
    for u in _units(n):
        accept(u, (n, n))
    assert len(segment) == segment_count, "the unit vectors complete any basis"

    bank: list[int] = []
    for v in dst_regs + src_regs + _units(n):
        if len(bank) == bank_count:
            break
        if span.insert(v):
            bank.append(v)
    columns = vector + bank + segment
    assert len(columns) == n
    offset_bases = [src.unflatten_point(v) for v in columns]
    return LinearLayout.from_bases({OFFSET: offset_bases}, dict(src.out_dims))


__all__ = [
    "BANKS",
    "BANK_BYTES",
    "conflict_ways",
    "count_wavefronts",
    "element_bytes",
    "lanes_per_phase",
    "optimal_swizzle",
    "phase_wavefronts",
]
