"""Test helpers: brute-force enumeration, random layouts and a reference executor of plans.

The executor runs a conversion plan the way the hardware would (per-lane registers, shuffles
that read another lane's register, a shared-memory scratch array) without looking at the
layouts it was planned from, so comparing its output with the destination layout checks the
plan end to end.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

from compiler.layouts import (
    LANE,
    OFFSET,
    REGISTER,
    ConversionKind,
    ConversionPlan,
    LinearLayout,
    SharedAccess,
    dim_names,
)

Slot = tuple[int, ...]
"""A hardware location: one value per input dim, in the layout's input-dim order."""


def all_inputs(layout: LinearLayout) -> Iterator[dict[str, int]]:
    """Every input of a layout as a dict."""
    names = layout.in_dim_names
    for values in itertools.product(*(range(layout.in_dim_size(n)) for n in names)):
        yield dict(zip(names, values, strict=True))


def table(layout: LinearLayout) -> dict[Slot, tuple[int, ...]]:
    """The whole map: input slot → output point."""
    return {tuple(x.values()): layout.apply(x) for x in all_inputs(layout)}


def random_general(rng: random.Random, in_sizes: dict[str, int], out_sizes: dict[str, int]) -> LinearLayout:
    """A layout with uniformly random bases (not necessarily surjective)."""
    bases = {
        name: [tuple(rng.randrange(s) for s in out_sizes.values()) for _ in range(size.bit_length() - 1)]
        for name, size in in_sizes.items()
    }
    return LinearLayout.from_bases(bases, out_sizes, require_surjective=False)


def random_distributed(
    rng: random.Random,
    shape: tuple[int, ...],
    lane_bits: int = 5,
    warp_bits: int = 2,
    zeros: int = 0,
) -> LinearLayout:
    """A random surjective layout whose bases are distinct unit vectors or zero.

    ``zeros`` zero bases (broadcast) are placed at random among all slots; registers make up
    whatever the lanes and warps do not cover.
    """
    rank = len(shape)
    units = [
        tuple((1 << k) if i == d else 0 for i in range(rank))
        for d in range(rank)
        for k in range(shape[d].bit_length() - 1)
    ]
    slots = units + [tuple(0 for _ in range(rank))] * zeros
    reg_bits = len(slots) - lane_bits - warp_bits
    if reg_bits < 0:
        raise ValueError("tile too small for that many lanes and warps")
    rng.shuffle(slots)
    bases = {
        REGISTER: slots[:reg_bits],
        LANE: slots[reg_bits : reg_bits + lane_bits],
        "warp": slots[reg_bits + lane_bits :],
    }
    return LinearLayout.from_bases(bases, dict(zip(dim_names(rank), shape, strict=True)))


def holdings(layout: LinearLayout) -> dict[Slot, tuple[int, ...]]:
    """Element held at every (register, lane, warp, ...) slot: the identity data set."""
    return table(layout)


def _thread_key(slot: Slot) -> Slot:
    return slot[1:]


def run_conversion(
    plan: ConversionPlan, src: LinearLayout, dst: LinearLayout, values: dict[Slot, object]
) -> dict[Slot, object]:
    """Execute a plan: ``values`` per full src slot → values per full dst slot.

    ``src`` and ``dst`` are only used for their input-dim sizes (which slots exist).
    """
    assert src.in_dim_names[0] == REGISTER and dst.in_dim_names[0] == REGISTER
    threads = list(itertools.product(*(range(src.in_dim_size(n)) for n in src.in_dim_names[1:])))
    src_compact: dict[Slot, object] = {}
    for thread in threads:
        for r in range(plan.src.in_dim_size(REGISTER)):
            src_compact[(r, *thread)] = values[(plan.src_registers.expand(r), *thread)]
    dst_compact: dict[Slot, object] = {}
    dst_regs = plan.dst.in_dim_size(REGISTER)
    if plan.kind in (ConversionKind.NOOP, ConversionKind.REGISTER_PERMUTATION):
        for thread in threads:
            for r in range(dst_regs):
                dst_compact[(r, *thread)] = src_compact[(plan.register_sources[r], *thread)]
    elif plan.kind == ConversionKind.WARP_SHUFFLE:
        dst_compact = _run_shuffle(plan, src_compact, threads)
    else:
        dst_compact = _run_shared(plan, src_compact, threads)
    out: dict[Slot, object] = {}
    for thread in threads:
        for r in range(dst.in_dim_size(REGISTER)):
            out[(r, *thread)] = dst_compact[(plan.dst_registers.compact(r), *thread)]
    return out


def _run_shuffle(plan: ConversionPlan, src: dict[Slot, object], threads: list[Slot]) -> dict[Slot, object]:
    shuffle = plan.shuffle
    assert shuffle is not None
    pack = shuffle.elements_per_word
    lanes = plan.src.in_dim_size(LANE)
    outers = sorted({t[1:] for t in threads})
    out: dict[Slot, object] = {}
    for outer in outers:

        def word(lane: int, index: int, outer: Slot = outer) -> tuple[object, ...]:
            return tuple(src[(index * pack + i, lane, *outer)] for i in range(pack))

        for move in shuffle.moves:
            received = {
                r.selector: [word(shuffle.source_lane(move, lane), r.src_word) for lane in range(lanes)]
                for r in move.rounds
            }
            for lane in range(lanes):
                chosen = received[shuffle.selector(lane)][lane]
                for i in range(pack):
                    out[(move.dst_word * pack + i, lane, *outer)] = chosen[i]
    return out


def _skipped(access: SharedAccess, slot: dict[str, int]) -> bool:
    return any(slot.get(name, 0) & mask for name, mask in access.predicate)


def _run_shared(plan: ConversionPlan, src: dict[Slot, object], threads: list[Slot]) -> dict[Slot, object]:
    shared = plan.shared
    assert shared is not None
    outer_names = plan.src.in_dim_names[1:]
    scratch: dict[int, object] = {}
    loaded: dict[Slot, object] = {}
    for thread in threads:
        for r, offset in _vector_offsets(shared.store, outer_names, thread):
            if _skipped(shared.store, {REGISTER: r, **dict(zip(outer_names, thread, strict=True))}):
                continue
            value = src[(r, *thread)]
            assert scratch.setdefault(offset, value) == value, "two different elements stored at one offset"
    assert len(scratch) == shared.shared.in_dim_size(OFFSET), "every scratch element is written"
    for thread in threads:
        for r, offset in _vector_offsets(shared.load, outer_names, thread):
            loaded[(r, *thread)] = scratch[offset]
    return loaded


def _vector_offsets(
    access: SharedAccess, outer_names: tuple[str, ...], thread: Slot
) -> Iterator[tuple[int, int]]:
    """(register, offset) of every element a thread accesses, vector by vector.

    Checks the addressing scheme of docs/layouts.md#conversions: one runtime term per thread XOR one
    constant per vector, and consecutive offsets inside a vector.
    """
    named = dict(zip(outer_names, thread, strict=True))
    thread_offset = access.layout.apply_flat(named)
    for base in access.vector_bases():
        start = access.layout.apply_flat({REGISTER: base}) ^ thread_offset
        assert start % access.vector == 0, "vector accesses must be aligned"
        for i, r in enumerate(access.vector_registers(base)):
            offset = access.layout.apply_flat({REGISTER: r, **named})
            assert offset == start + i, "vector registers must be contiguous"
            yield r, offset


def check_conversion(plan: ConversionPlan, src: LinearLayout, dst: LinearLayout) -> None:
    """Run the plan on the identity data set of ``src`` and compare with ``dst``."""
    moved = run_conversion(plan, src, dst, dict(holdings(src)))
    expected = holdings(dst)
    assert moved.keys() == expected.keys()
    wrong = [slot for slot in expected if moved[slot] != expected[slot]]
    assert not wrong, f"{len(wrong)} slots wrong, e.g. {wrong[0]}: {moved[wrong[0]]} != {expected[wrong[0]]}"
