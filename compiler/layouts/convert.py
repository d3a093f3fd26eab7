"""Planning a layout conversion of a register tile (docs/layouts.md#conversions).

`plan_conversion` computes the conversion map ``C`` (for every destination slot, the source
slot holding the same element), removes the hardware dims over which it is trivial and picks
the cheapest mechanism that handles what is left: nothing, a register renaming, warp shuffles
or a round trip through shared memory. The returned plan holds everything a lowering needs
to emit the code; it is pure data.

Register indices in a plan are *compact*: zero register bases (pure in-thread copies) are
removed from both layouts first; `RegisterCompression` maps full indices to compact ones.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .gf2 import deposit, extract, span, xor_combination
from .linear import BLOCK, LANE, OFFSET, REGISTER, WARP, LinearLayout, Vectorisation
from .shared import unswizzled_shared
from .swizzle import MAX_VECTOR_BITS, count_wavefronts, element_bytes, optimal_swizzle


class ConversionKind(enum.Enum):
    """Mechanism of a conversion, cheapest first."""

    NOOP = "noop"
    REGISTER_PERMUTATION = "register_permutation"
    WARP_SHUFFLE = "warp_shuffle"
    SHARED_MEMORY = "shared_memory"
    CLUSTER_SHARED_MEMORY = "cluster_shared_memory"


class BarrierKind(enum.Enum):
    """Synchronisation between the shared-memory store and load."""

    WARP = "warp"
    CTA = "cta"
    CLUSTER = "cluster"


@dataclass(frozen=True)
class RegisterCompression:
    """Maps the full register index of a layout to the index without zero register bases.

    Invariant: ``kept`` has a bit for every register basis that is nonzero; registers that
    differ only outside ``kept`` hold the same element.
    """

    kept: int
    size: int

    def compact(self, register: int) -> int:
        """Compact index of a full register index."""
        return extract(register, self.kept)

    def expand(self, compact: int) -> int:
        """The lowest full register index with this compact index."""
        return deposit(compact, self.kept)


@dataclass(frozen=True)
class ShuffleRound:
    """One ``shfl.idx``: every lane sends source word ``src_word``; kept where ``selector`` matches."""

    selector: int
    src_word: int


@dataclass(frozen=True)
class WordShuffle:
    """How one destination word is assembled.

    All lanes read from lane ``lane_xor ⊕ Ll(laneId)``; a lane keeps the round whose
    ``selector`` equals ``Rl(laneId)`` (see `WarpShuffle`).
    """

    dst_word: int
    lane_xor: int
    rounds: tuple[ShuffleRound, ...]


@dataclass(frozen=True)
class WarpShuffle:
    """Generic shuffle conversion inside a warp (docs/layouts.md#conversions).

    Registers are packed ``elements_per_word`` at a time into 32-bit words (the low compact
    register bits move together); elements wider than 32 bits take ``words_per_element``
    shuffles each. ``lane_bases`` is Ll (destination lane bit → XOR into the source lane)
    and ``select_bases`` is Rl (destination lane bit → XOR into the source word). With
    ``butterfly`` set Ll is the identity and every round is a ``shfl.bfly`` by ``lane_xor``.
    """

    elements_per_word: int
    words_per_element: int
    lane_bases: tuple[int, ...]
    select_bases: tuple[int, ...]
    butterfly: bool
    moves: tuple[WordShuffle, ...]

    def source_lane(self, move: WordShuffle, lane: int) -> int:
        """The lane that ``lane`` reads from while assembling ``move``."""
        return move.lane_xor ^ xor_combination(self.lane_bases, lane)

    def selector(self, lane: int) -> int:
        """Which round's value ``lane`` keeps."""
        return xor_combination(self.select_bases, lane)

    @property
    def num_shuffles(self) -> int:
        """Shuffle instructions per thread."""
        return sum(len(m.rounds) for m in self.moves) * self.words_per_element


@dataclass(frozen=True)
class SharedAccess:
    """One side of a shared-memory transfer: ``layout`` maps (register, lane, warp) → offset.

    ``vectorisation`` groups the compact registers into contiguous, aligned vectors;
    ``predicate`` lists (dim, mask) pairs: a thread or register with any masked bit set skips
    the access (it holds a duplicate). ``wavefronts`` is the bank cost of the worst warp.
    """

    layout: LinearLayout
    vectorisation: Vectorisation
    wavefronts: int
    predicate: tuple[tuple[str, int], ...]

    @property
    def vector(self) -> int:
        """Elements per access."""
        return self.vectorisation.width

    def vector_bases(self) -> tuple[int, ...]:
        """First register of every vector access, ascending."""
        return self.vectorisation.vector_starts(self.layout.in_dim_size_log2(REGISTER))

    def vector_registers(self, base: int) -> tuple[int, ...]:
        """Registers of the vector starting at ``base``, element by element."""
        return self.vectorisation.vector_registers(base)

    def is_additive(self, register: int) -> bool:
        """True when the register's offset can be added (not XORed) to the thread's base."""
        constant = self.layout.apply_flat({REGISTER: register})
        runtime = 0
        for name in self.layout.in_dim_names:
            if name != REGISTER:
                for v in self.layout.flat_bases(name):
                    runtime |= v
        return constant & runtime == 0


@dataclass(frozen=True)
class SharedMemoryTransfer:
    """Store the source through ``shared`` (offset → tile), synchronise, load the destination."""

    shared: LinearLayout
    store: SharedAccess
    load: SharedAccess
    barrier: BarrierKind
    element_bits: int

    @property
    def scratch_bytes(self) -> int:
        """Shared memory needed (one element per offset)."""
        return self.shared.in_dim_size(OFFSET) * element_bytes(self.element_bits)


@dataclass(frozen=True)
class ConversionPlan:
    """How to convert a register tile from ``src`` to ``dst`` (both without zero registers).

    ``conversion`` is C: destination (register, lane, warp, ...) → source slot with the same
    element, ``dims`` the input dims left after removing the trivial ones. Exactly one of
    ``register_sources`` (no-op and permutation: compact dst register → compact src
    register), ``shuffle`` and ``shared`` is filled, according to ``kind``.
    """

    kind: ConversionKind
    src: LinearLayout
    dst: LinearLayout
    src_registers: RegisterCompression
    dst_registers: RegisterCompression
    conversion: LinearLayout
    dims: tuple[str, ...]
    register_sources: tuple[int, ...] = ()
    shuffle: WarpShuffle | None = None
    shared: SharedMemoryTransfer | None = None

    def source_register(self, dst_register: int) -> int:
        """Full source register feeding a full destination register (no-op and permutation)."""
        compact = self.register_sources[self.dst_registers.compact(dst_register)]
        return self.src_registers.expand(compact)

    def __str__(self) -> str:
        head = f"{self.kind.value} over ({', '.join(self.dims)})" if self.dims else self.kind.value
        if self.shuffle is not None:
            s = self.shuffle
            mode = "bfly" if s.butterfly else "idx"
            return f"{head}: {s.num_shuffles} shfl.{mode}, {s.elements_per_word} element(s) per word"
        if self.shared is not None:
            t = self.shared
            return (
                f"{head}: store v{t.store.vector} ({t.store.wavefronts} wavefronts), "
                f"load v{t.load.vector} ({t.load.wavefronts} wavefronts), "
                f"{t.barrier.value} barrier, {t.scratch_bytes} B scratch"
            )
        if self.kind == ConversionKind.REGISTER_PERMUTATION:
            return f"{head}: dst[r] = src[{list(self.register_sources)}[r]]"
        return head


def _check_compatible(src: LinearLayout, dst: LinearLayout) -> None:
    if src.out_dims != dst.out_dims:
        raise ValueError(f"layouts cover different tiles: {src.out_dims} vs {dst.out_dims}")
    for layout in (src, dst):
        if not layout.is_surjective:
            raise ValueError(f"conversion needs surjective layouts:\n{layout}")
        unknown = set(layout.in_dim_names) - {REGISTER, LANE, WARP, BLOCK}
        if unknown:
            raise ValueError(f"unexpected input dims {sorted(unknown)}")
    for name in (LANE, WARP, BLOCK):
        if src.in_dim_size(name) != dst.in_dim_size(name):
            raise ValueError(f"{name} counts differ: {src.in_dim_size(name)} vs {dst.in_dim_size(name)}")


def _minimal_dims(conversion: LinearLayout) -> tuple[str, ...]:
    minimal = conversion
    for name in reversed(conversion.in_dim_names):
        if minimal.is_trivial_over([name]):
            minimal = minimal.quotient([name])
    return minimal.in_dim_names


def plan_conversion(
    src: LinearLayout,
    dst: LinearLayout,
    element_bits: int = 32,
    *,
    use_shuffles: bool = True,
    swizzle: bool = True,
) -> ConversionPlan:
    """Plan the conversion of a register tile from layout ``src`` to layout ``dst``.

    ``use_shuffles=False`` sends lane-only conversions through shared memory; ``swizzle=False``
    uses a plain row-major scratch instead of the conflict-minimising swizzle.
    """
    _check_compatible(src, dst)
    if element_bits <= 0:
        raise ValueError(f"element_bits must be positive, got {element_bits}")
    src_c, src_kept = src.remove_zero_bases(REGISTER)
    dst_c, dst_kept = dst.remove_zero_bases(REGISTER)
    src_regs = RegisterCompression(src_kept, src.in_dim_size(REGISTER))
    dst_regs = RegisterCompression(dst_kept, dst.in_dim_size(REGISTER))
    conversion = dst_c.invert_and_compose(src_c)
    dims = _minimal_dims(conversion)
    shuffle = None
    shared = None
    sources: tuple[int, ...] = ()
    if BLOCK in dims:
        kind = ConversionKind.CLUSTER_SHARED_MEMORY
    elif WARP in dims or (LANE in dims and not use_shuffles):
        kind = ConversionKind.SHARED_MEMORY
    elif LANE in dims:
        kind = ConversionKind.WARP_SHUFFLE
    elif REGISTER in dims:
        kind = ConversionKind.REGISTER_PERMUTATION
    else:
        kind = ConversionKind.NOOP
    if kind in (ConversionKind.SHARED_MEMORY, ConversionKind.CLUSTER_SHARED_MEMORY):
        shared = _plan_shared(src_c, dst_c, dims, element_bits, swizzle)
    elif kind == ConversionKind.WARP_SHUFFLE:
        shuffle = _plan_shuffle(conversion, element_bits)
    else:
        column = conversion.out_dim_names.index(REGISTER)
        sources = tuple(conversion.apply({REGISTER: r})[column] for r in range(dst_c.in_dim_size(REGISTER)))
    return ConversionPlan(
        kind=kind,
        src=src_c,
        dst=dst_c,
        src_registers=src_regs,
        dst_registers=dst_regs,
        conversion=conversion,
        dims=dims,
        register_sources=sources,
        shuffle=shuffle,
        shared=shared,
    )


def _plan_shuffle(conversion: LinearLayout, element_bits: int) -> WarpShuffle:
    restricted = conversion.sublayout([REGISTER, LANE], [REGISTER, LANE])
    reg_col = restricted.out_dim_names.index(REGISTER)
    lane_col = restricted.out_dim_names.index(LANE)
    reg_bases = [(b[reg_col], b[lane_col]) for b in restricted.bases(REGISTER)]
    lane_bases = [(b[reg_col], b[lane_col]) for b in restricted.bases(LANE)]

    max_pack = max(0, (32 // element_bits).bit_length() - 1) if element_bits <= 32 else 0
    pack = 0
    while pack < max_pack and pack < len(reg_bases):
        if reg_bases[pack] != (1 << pack, 0):
            break
        if any(r >> pack & 1 for r, _ in reg_bases[pack + 1 :] + lane_bases):
            break
        pack += 1

    ll = tuple(lane for _, lane in lane_bases)
    rl = tuple(reg >> pack for reg, _ in lane_bases)
    selectors = list(span(rl))
    moves = []
    for word in range(1 << (len(reg_bases) - pack)):
        src_reg = 0
        src_lane = 0
        for k in range(pack, len(reg_bases)):
            if (word >> (k - pack)) & 1:
                src_reg ^= reg_bases[k][0]
                src_lane ^= reg_bases[k][1]
        rounds = tuple(ShuffleRound(selector=u, src_word=(src_reg >> pack) ^ u) for u in selectors)
        moves.append(WordShuffle(dst_word=word, lane_xor=src_lane, rounds=rounds))
    return WarpShuffle(
        elements_per_word=1 << pack,
        words_per_element=max(1, element_bits // 32),
        lane_bases=ll,
        select_bases=rl,
        butterfly=ll == tuple(1 << k for k in range(len(ll))),
        moves=tuple(moves),
    )


def _owner_predicate(layout: LinearLayout) -> tuple[tuple[str, int], ...]:
    return tuple((name, mask) for name, mask in layout.free_variable_masks().items() if mask)


def _plan_shared(
    src: LinearLayout, dst: LinearLayout, dims: tuple[str, ...], element_bits: int, swizzle: bool
) -> SharedMemoryTransfer:
    shape = src.out_shape
    shared = optimal_swizzle(src, dst, element_bits) if swizzle else unswizzled_shared(shape)
    store_map = src.invert_and_compose(shared)
    load_map = dst.invert_and_compose(shared)
    max_width = max(1, MAX_VECTOR_BITS // max(element_bits, 8))
    store_pred = _owner_predicate(src)

    def side(layout: LinearLayout, predicate: tuple[tuple[str, int], ...]) -> SharedAccess:
        vec = layout.vectorisation(OFFSET, max_width=max_width)
        waves = count_wavefronts(layout, element_bits, vec, dict(predicate))
        return SharedAccess(layout=layout, vectorisation=vec, wavefronts=waves, predicate=predicate)

    if BLOCK in dims:
        barrier = BarrierKind.CLUSTER
    elif WARP in dims or src.free_variable_masks().get(WARP, 0) or dst.free_variable_masks().get(WARP, 0):
        barrier = BarrierKind.CTA
    else:
        barrier = BarrierKind.WARP
    return SharedMemoryTransfer(
        shared=shared,
        store=side(store_map, store_pred),
        load=side(load_map, ()),
        barrier=barrier,
        element_bits=element_bits,
    )


__all__ = [
    "BarrierKind",
    "ConversionKind",
    "ConversionPlan",
    "RegisterCompression",
    "SharedAccess",
    "SharedMemoryTransfer",
    "ShuffleRound",
    "WarpShuffle",
    "WordShuffle",
    "plan_conversion",
]
