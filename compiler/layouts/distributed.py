"""Register-tile (distributed) layouts as linear layouts: blocked, slice, mma.sync, wgmma.

Every builder returns a surjective ``(register, lane, warp) → (dim0, dim1, ...)`` layout for
a concrete tile shape (docs/layouts.md#blocked-layouts). Fitting to the shape: a tile larger than
the hardware footprint gets extra register bases ("repetitions"), a smaller one gets its
out-of-range bases zeroed (broadcast).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .gf2 import log2_exact
from .linear import LANE, REGISTER, WARP, LinearLayout, dim_names


class _TileBuilder:
    """Accumulates identity-like bases per input dim while tracking the covered extent.

    Invariant: ``covered[d]`` is the power of two that the next basis appended along dim d
    will map to, i.e. the extent already spanned along d.
    """

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.bases: dict[str, list[tuple[int, ...]]] = {REGISTER: [], LANE: [], WARP: []}
        self.covered = [1] * rank

    def extend(self, in_dim: str, dim: int, count: int) -> None:
        for _ in range(log2_exact(count, f"{in_dim} count along dim{dim}")):
            self.bases[in_dim].append(tuple(self.covered[d] if d == dim else 0 for d in range(self.rank)))
            self.covered[dim] *= 2

    def broadcast(self, in_dim: str, count: int) -> None:
        for _ in range(log2_exact(count, f"{in_dim} broadcast count")):
            self.bases[in_dim].append(tuple(0 for _ in range(self.rank)))

    def build(self, shape: Sequence[int], repeat_order: Sequence[int]) -> LinearLayout:
        for d in repeat_order:
            while self.covered[d] < shape[d]:
                self.extend(REGISTER, d, 2)
        fitted = {
            name: [b if all(v < s for v, s in zip(b, shape, strict=True)) else (0,) * self.rank for b in rows]
            for name, rows in self.bases.items()
        }
        names = dim_names(self.rank)
        return LinearLayout.from_bases(fitted, dict(zip(names, shape, strict=True)))


def _check_shape(shape: Sequence[int]) -> None:
    for d, s in enumerate(shape):
        log2_exact(s, f"shape[{d}]")


def _check_order(order: Sequence[int], rank: int) -> None:
    if sorted(order) != list(range(rank)):
        raise ValueError(f"order {list(order)} is not a permutation of range({rank})")


@dataclass(frozen=True)
class BlockedEncoding:
    """Parameters of a blocked layout; ``order`` lists dims fastest first.

    Invariant: all entries are powers of two and the four tuples have the tile's rank.
    """

    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]

    def __post_init__(self) -> None:
        rank = len(self.order)
        _check_order(self.order, rank)
        for field in (self.size_per_thread, self.threads_per_warp, self.warps_per_cta):
            if len(field) != rank:
                raise ValueError(f"{field} does not have rank {rank}")
            _check_shape(field)

    def layout(self, shape: Sequence[int]) -> LinearLayout:
        """The linear layout of this encoding on a tile of ``shape``."""
        return blocked_layout(
            shape, self.size_per_thread, self.threads_per_warp, self.warps_per_cta, self.order
        )


def blocked_layout(
    shape: Sequence[int],
    size_per_thread: Sequence[int],
    threads_per_warp: Sequence[int],
    warps_per_cta: Sequence[int],
    order: Sequence[int],
) -> LinearLayout:
    """Blocked layout: registers, then lanes, then warps, each filling dims in ``order``.

    Repetitions beyond the CTA footprint become register bases, fastest dim first; bases
    beyond a smaller shape become zero (docs/layouts.md#blocked-layouts).
    """
    rank = len(shape)
    _check_shape(shape)
    _check_order(order, rank)
    builder = _TileBuilder(rank)
    for in_dim, sizes in ((REGISTER, size_per_thread), (LANE, threads_per_warp), (WARP, warps_per_cta)):
        if len(sizes) != rank:
            raise ValueError(f"{in_dim} sizes {list(sizes)} do not have rank {rank}")
        for d in order:
            builder.extend(in_dim, d, sizes[d])
    return builder.build(shape, order)


def fill_blocked(shape: Sequence[int], vec: int, num_warps: int, lanes: int, fast: int = -1) -> LinearLayout:
    """The blocked layout a tile of ``shape`` gets by default on a GPU with ``lanes`` threads per
    warp (32 on NVIDIA, 64 in a wave64 AMD wavefront): ``vec`` consecutive elements per thread
    along dim ``fast`` (default the last), lanes then warps filling the dims from that one, then
    from the last dim down; lanes or warps left over repeat along the slowest dim (they hold
    copies)."""
    rank = len(shape)
    fast %= rank
    order = [fast] + [d for d in reversed(range(rank)) if d != fast]
    spt = [1] * rank
    spt[fast] = vec
    rem = [s // p for s, p in zip(shape, spt, strict=True)]
    tpw, left = [1] * rank, lanes
    for d in order:
        t = min(left, rem[d])
        tpw[d], left, rem[d] = t, left // t, rem[d] // t
    tpw[order[-1]] *= left
    wpc, warps = [1] * rank, num_warps
    for d in order:
        w = min(warps, max(1, rem[d]))
        wpc[d], warps, rem[d] = w, warps // w, max(1, rem[d] // w)
    wpc[order[-1]] *= warps
    return blocked_layout(shape, spt, tpw, wpc, order)


def slice_layout(parent: LinearLayout, dim: int) -> LinearLayout:
    """The layout of a tile reduced along ``dim`` (docs/layouts.md#slices).

    Bases moving along ``dim`` become zero (those threads hold copies), output ``dim`` is
    deleted, the remaining outputs are renamed ``dim0..`` and zero register bases are dropped.
    """
    names = parent.out_dim_names
    if not 0 <= dim < len(names):
        raise ValueError(f"cannot slice dim {dim} of a rank-{len(names)} layout")
    keep = [i for i in range(len(names)) if i != dim]
    new_names = dim_names(len(keep))
    in_dims = []
    for name, bases in parent.in_dims:
        rows = [tuple(0 for _ in keep) if b[dim] else tuple(b[i] for i in keep) for b in bases]
        if name == REGISTER:
            rows = [r for r in rows if any(r)]
        in_dims.append((name, rows))
    sizes = {new_names[j]: parent.out_shape[i] for j, i in enumerate(keep)}
    return LinearLayout.from_bases(dict(in_dims), sizes)


def _warp_order(version: int) -> tuple[int, int]:
    # Ampere packs consecutive warps along N, Hopper along M (docs/layouts.md#tensor-core-layouts).
    return (1, 0) if version == 2 else (0, 1)


def mma_v2_accumulator(shape: Sequence[int], warps_per_cta: Sequence[int]) -> LinearLayout:
    """Accumulator of ``mma.sync.m16n8k16`` over a 2-D tile.

    Per instruction (16×8): register bases (0,1), (8,0); lane bases (0,2), (0,4), (1,0),
    (2,0), (4,0). Warps fill N first, then M; repetitions go along N, then M.
    """
    _check_2d(shape, warps_per_cta)
    builder = _TileBuilder(2)
    builder.extend(REGISTER, 1, 2)
    builder.extend(LANE, 1, 4)
    builder.extend(LANE, 0, 8)
    builder.extend(REGISTER, 0, 2)
    for d in _warp_order(2):
        builder.extend(WARP, d, warps_per_cta[d])
    return builder.build(shape, (1, 0))


def mma_v2_operand(
    shape: Sequence[int],
    operand: int,
    warps_per_cta: Sequence[int],
    k_width: int = 2,
    element_bits: int = 16,
) -> LinearLayout:
    """A (``operand=0``, M×K) or B (``operand=1``, K×N) fragment of ``mma.sync``.

    Each thread holds ``k_width`` consecutive K values; 4 lanes run along K and 8 along the
    other dim; A repeats its rows once more (16 rows per instruction). The instruction's K
    (256 bits of elements) is completed with a register basis along K when ``4·k_width`` is
    short of it. ``warps_per_cta`` is the accumulator's: warps along the other operand's dim
    hold copies (zero warp bases). Repetitions go along K, then the other dim.
    """
    _check_2d(shape, warps_per_cta)
    if operand not in (0, 1):
        raise ValueError("operand must be 0 (A) or 1 (B)")
    k_dim, other_dim = (1, 0) if operand == 0 else (0, 1)
    instr_k = 256 // element_bits
    builder = _TileBuilder(2)
    builder.extend(REGISTER, k_dim, k_width)
    builder.extend(LANE, k_dim, 4)
    builder.extend(LANE, other_dim, 8)
    builder.extend(REGISTER, other_dim, 2 if operand == 0 else 1)
    builder.extend(REGISTER, k_dim, max(1, instr_k // (4 * k_width)))
    for d in _warp_order(2):
        if d == other_dim:
            builder.extend(WARP, other_dim, warps_per_cta[d])
        else:
            builder.broadcast(WARP, warps_per_cta[d])
    return builder.build(shape, (k_dim, other_dim))


def wgmma_accumulator(shape: Sequence[int], warps_per_cta: Sequence[int], instr_n: int) -> LinearLayout:
    """Accumulator of ``wgmma.mma_async.m64nNk16`` (N = ``instr_n``) over a 2-D tile.

    Inside a warp it is the mma.sync pattern repeated every 8 columns; the 4 warps of a
    warpgroup stack along M (16 rows each). Further warps go along M, then N; repetitions
    along N, then M.
    """
    _check_2d(shape, warps_per_cta)
    if warps_per_cta[0] % 4:
        raise ValueError(f"wgmma needs a multiple of 4 warps along M, got {warps_per_cta[0]}")
    builder = _TileBuilder(2)
    builder.extend(REGISTER, 1, 2)
    builder.extend(LANE, 1, 4)
    builder.extend(LANE, 0, 8)
    builder.extend(REGISTER, 0, 2)
    builder.extend(REGISTER, 1, instr_n // 8)
    builder.extend(WARP, 0, 4)
    builder.extend(WARP, 0, warps_per_cta[0] // 4)
    builder.extend(WARP, 1, warps_per_cta[1])
    return builder.build(shape, (1, 0))


def tcgen05_accumulator(shape: Sequence[int], num_warps: int) -> LinearLayout:
    """An M = 128 accumulator of ``tcgen05.mma`` (cta_group::1) read from tensor memory with
    ``tcgen05.ld.32x32b``, over a [128, N] tile.

    Row i of the accumulator is tensor-memory lane i and column j is column j (32-bit cells). A
    warp may only read the 32 lanes of its quarter, 32 · (warp mod 4), and ``32x32b`` gives
    thread t of the warp lane 32 · (warp mod 4) + t, with its ``.xN`` registers the N consecutive
    columns. So: register bases along N, lane bases along M (rows 1..16), the first two warp
    bases along M (rows 32, 64); with 8 warps the second warpgroup reads the right half of the
    columns (a third warp basis along N). Every thread holds whole runs of one row.
    """
    _check_2d(shape, (1, 1))
    m, n = shape
    if m != 128 or num_warps not in (4, 8):
        raise ValueError(f"tcgen05 accumulators are 128 rows on 4 or 8 warps, got {m} rows, {num_warps} warps")
    groups = num_warps // 4
    builder = _TileBuilder(2)
    builder.extend(REGISTER, 1, n // groups)
    builder.extend(LANE, 0, 32)
    builder.extend(WARP, 0, 4)
    builder.extend(WARP, 1, groups)
    return builder.build(shape, (1, 0))


def _check_2d(shape: Sequence[int], warps_per_cta: Sequence[int]) -> None:
    if len(shape) != 2 or len(warps_per_cta) != 2:
        raise ValueError(f"mma layouts are 2-D, got shape {list(shape)}, warps {list(warps_per_cta)}")
    _check_shape(shape)
    _check_shape(warps_per_cta)


__all__ = [
    "BlockedEncoding",
    "blocked_layout",
    "fill_blocked",
    "mma_v2_accumulator",
    "mma_v2_operand",
    "slice_layout",
    "tcgen05_accumulator",
    "wgmma_accumulator",
]
