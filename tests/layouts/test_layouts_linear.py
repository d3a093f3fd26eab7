"""LinearLayout algebra checked against brute-force enumeration of the maps."""

from __future__ import annotations

import itertools
import random

import pytest
from layout_sim import all_inputs, random_distributed, random_general, table

from compiler.layouts import LANE, OFFSET, REGISTER, WARP, LinearLayout, Vectorisation
from compiler.layouts.gf2 import XorBasis, deposit, extract, rank, span

SEEDS = range(25)

# The 64×64 fp16 blocked layout of docs/layouts.md#the-map.
BLOCKED_64 = LinearLayout.from_bases(
    {
        REGISTER: [(0, 1), (0, 2), (0, 4), (16, 0), (32, 0)],
        LANE: [(0, 8), (0, 16), (0, 32), (1, 0), (2, 0)],
        WARP: [(4, 0), (8, 0)],
    },
    {"dim0": 64, "dim1": 64},
)


def xor(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(x ^ y for x, y in zip(a, b, strict=True))


# ----------------------------------------------------------------------------- construction


def test_validation_rejects_bad_layouts() -> None:
    with pytest.raises(ValueError):
        LinearLayout.from_bases({REGISTER: [(0, 1)]}, {"dim0": 3, "dim1": 2})
    with pytest.raises(ValueError):
        LinearLayout.from_bases({REGISTER: [(0, 4)]}, {"dim0": 1, "dim1": 4})
    with pytest.raises(ValueError):
        LinearLayout.from_bases({REGISTER: [(1,)]}, {"dim0": 2, "dim1": 2})
    with pytest.raises(ValueError, match="surjective"):
        LinearLayout.from_bases({REGISTER: [1, 1]}, {"x": 4})
    layout = LinearLayout.from_bases({REGISTER: [1, 1]}, {"x": 4}, require_surjective=False)
    assert not layout.is_surjective


def test_inferred_output_sizes() -> None:
    layout = LinearLayout.from_bases({REGISTER: [(0, 1), (4, 0)], LANE: [(1, 0), (2, 0), (0, 2)]}, ["a", "b"])
    assert layout.out_dims == (("a", 8), ("b", 4))


def test_apply_is_xor_of_bases_brute_force() -> None:
    rng = random.Random(0)
    layout = random_general(rng, {REGISTER: 8, LANE: 4}, {"dim0": 8, "dim1": 4})
    for x in all_inputs(layout):
        expected = (0, 0)
        for name, value in x.items():
            for k, b in enumerate(layout.bases(name)):
                if (value >> k) & 1:
                    expected = xor(expected, b)
        assert layout.apply(x) == expected


def test_worked_example_forward_and_inverse() -> None:
    # docs/layouts.md#the-map: L(reg=21, lane=13, warp=1) = (37, 45) and back.
    assert BLOCKED_64.apply({REGISTER: 21, LANE: 13, WARP: 1}) == (37, 45)
    inverse = BLOCKED_64.invert()
    assert inverse.apply({"dim0": 37, "dim1": 45}) == (21, 13, 1)
    assert BLOCKED_64.is_invertible and BLOCKED_64.is_distributed()
    assert len(set(table(BLOCKED_64).values())) == 4096


def test_building_block_products() -> None:
    # docs/layouts.md#operations.
    i4 = LinearLayout.identity_1d(4, "i", "o")
    assert i4 * LinearLayout.identity_1d(2, "i", "o") == LinearLayout.identity_1d(8, "i", "o")
    mod4 = i4 * LinearLayout.zeros_1d(2, "i", "o")
    assert [mod4.apply({"i": x})[0] for x in range(8)] == [x % 4 for x in range(8)]
    layout = (
        LinearLayout.identity_1d(4, "r", "dim1")
        * LinearLayout.identity_1d(8, "l", "dim1")
        * LinearLayout.identity_1d(4, "l", "dim0")
    )
    assert layout.out_dims == (("dim1", 32), ("dim0", 4))
    assert layout.transpose_outs(["dim0", "dim1"]).bases("r") == ((0, 1), (0, 2))
    assert layout.transpose_outs(["dim0", "dim1"]).bases("l") == ((0, 4), (0, 8), (0, 16), (1, 0), (2, 0))
    assert LinearLayout.strided_1d(4, 8, "i", "o").bases("i") == ((8,), (16,))


@pytest.mark.parametrize("seed", SEEDS)
def test_product_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    inner = random_general(rng, {REGISTER: 4, LANE: 2}, {"a": 4, "b": 2})
    outer = random_general(rng, {LANE: 4, WARP: 2}, {"b": 4, "c": 2})
    product = inner * outer
    assert product.in_dim_names == (REGISTER, LANE, WARP)
    assert product.out_dims == (("a", 4), ("b", 8), ("c", 2))
    for x in all_inputs(product):
        lane_in, lane_out = x[LANE] % 2, x[LANE] // 2
        a = inner.apply({REGISTER: x[REGISTER], LANE: lane_in})
        o = outer.apply({LANE: lane_out, WARP: x[WARP]})
        assert product.apply(x) == (a[0], a[1] ^ (o[0] << 1), o[1])


@pytest.mark.parametrize("seed", SEEDS)
def test_compose_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    inner = random_general(rng, {REGISTER: 8, LANE: 4}, {"x": 8, "y": 2})
    outer = random_general(rng, {"y": 4, "x": 8}, {OFFSET: 64})
    composed = inner.compose(outer)
    for x in all_inputs(inner):
        mid = dict(zip(inner.out_dim_names, inner.apply(x), strict=True))
        assert composed.apply(x) == outer.apply(mid)
    with pytest.raises(ValueError):
        outer.compose(inner)


def test_store_addresses_by_composition() -> None:
    # docs/layouts.md#operations: row-major global G(i, j) = 64 i + j composed with the blocked layout.
    global_map = LinearLayout.from_bases(
        {"dim0": [64 << k for k in range(6)], "dim1": [1 << k for k in range(6)]}, {OFFSET: 4096}
    )
    addresses = BLOCKED_64.compose(global_map)
    assert [b[0] for b in addresses.bases(REGISTER)] == [1, 2, 4, 1024, 2048]
    assert [b[0] for b in addresses.bases(LANE)] == [8, 16, 32, 64, 128]
    assert [b[0] for b in addresses.bases(WARP)] == [256, 512]
    assert addresses.vector_width(OFFSET) == 8


@pytest.mark.parametrize("seed", SEEDS)
def test_rank_and_properties_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    layout = random_general(rng, {REGISTER: rng.choice([1, 2, 4, 8]), LANE: 4}, {"x": 4, "y": 4})
    image = set(table(layout).values())
    assert len(image) == 1 << layout.rank
    assert layout.is_surjective == (len(image) == 16)
    assert layout.is_injective == (len(image) == layout.total_in_size)
    assert layout.is_invertible == (layout.is_surjective and layout.is_injective)


@pytest.mark.parametrize("seed", SEEDS)
def test_free_variable_masks_give_unique_canonical_owner(seed: int) -> None:
    rng = random.Random(seed)
    layout = random_general(rng, {REGISTER: 4, LANE: 8, WARP: 2}, {"x": 8, "y": 2})
    masks = layout.free_variable_masks()
    canonical = [x for x in all_inputs(layout) if all(x[n] & masks[n] == 0 for n in x)]
    images = [layout.apply(x) for x in canonical]
    assert len(set(images)) == len(images) == 1 << layout.rank
    assert set(images) == set(table(layout).values())
    # Lower bits win: every non-canonical input has a canonical twin that is not larger in
    # (block, warp, lane, register) lexicographic order.
    for x in all_inputs(layout):
        twin = canonical[images.index(layout.apply(x))]
        assert (twin[WARP], twin[LANE], twin[REGISTER]) <= (x[WARP], x[LANE], x[REGISTER])


def test_slice_free_mask_example() -> None:
    # docs/layouts.md#slices: the row-sum slice has lanes 0-2 free.
    sliced = LinearLayout.from_bases(
        {REGISTER: [(16,), (32,)], LANE: [(0,), (0,), (0,), (1,), (2,)], WARP: [(4,), (8,)]}, {"dim0": 64}
    )
    assert sliced.free_variable_masks() == {REGISTER: 0, LANE: 0b00111, WARP: 0}


@pytest.mark.parametrize("seed", SEEDS)
def test_invert_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    layout = random_distributed(rng, (16, 8), lane_bits=3, warp_bits=1)
    inverse = layout.invert()
    for x in all_inputs(layout):
        point = dict(zip(layout.out_dim_names, layout.apply(x), strict=True))
        assert inverse.apply(point) == tuple(x.values())
    with pytest.raises(ValueError):
        random_distributed(rng, (16, 8), lane_bits=3, warp_bits=1, zeros=1).invert()


@pytest.mark.parametrize("seed", SEEDS)
def test_invert_and_compose_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    target = random_distributed(rng, (8, 8), lane_bits=3, warp_bits=1, zeros=rng.randrange(3))
    source = random_distributed(rng, (8, 8), lane_bits=3, warp_bits=1, zeros=rng.randrange(3))
    c = target.invert_and_compose(source)
    assert c.in_dim_names == target.in_dim_names and c.out_dim_names == source.in_dim_names
    free = source.free_variable_masks()
    for x in all_inputs(target):
        y = dict(zip(c.out_dim_names, c.apply(x), strict=True))
        assert source.apply(y) == target.apply(x)
    # Free variables are zero: every solved column lands on canonical owners.
    solved = [n for n in c.in_dim_names if not (source.has_in_dim(n) and source.bases(n) == target.bases(n))]
    for name in solved:
        for b in c.bases(name):
            assert all(v & free[n] == 0 for v, n in zip(b, c.out_dim_names, strict=True))


def test_invert_and_compose_prefers_registers_and_identity_dims() -> None:
    # Element held by register 1 and by lane 1: the register owner is chosen.
    source = LinearLayout.from_bases({REGISTER: [1], LANE: [1, 2]}, {"x": 4})
    target = LinearLayout.from_bases({REGISTER: [], LANE: [1, 2]}, {"x": 4})
    c = target.invert_and_compose(source)
    assert c.bases(LANE) == ((0, 1), (0, 2))  # identical lane sublayouts map by identity
    target2 = LinearLayout.from_bases({REGISTER: [], LANE: [2, 1]}, {"x": 4})
    assert target2.invert_and_compose(source).bases(LANE) == ((0, 2), (1, 0))
    # Warp-broadcast in both: the identity heuristic keeps warp w on warp w.
    a = LinearLayout.from_bases({REGISTER: [1], LANE: [2, 4], WARP: [0, 8]}, {"x": 16})
    b = LinearLayout.from_bases({REGISTER: [2], LANE: [1, 4], WARP: [0, 8]}, {"x": 16})
    assert b.invert_and_compose(a).bases(WARP) == ((0, 0, 1), (0, 0, 2))


def test_invert_and_compose_rejects_missing_image() -> None:
    small = LinearLayout.from_bases({REGISTER: [1]}, {"x": 4}, require_surjective=False)
    full = LinearLayout.from_bases({REGISTER: [1, 2]}, {"x": 4})
    with pytest.raises(ValueError, match="not in the image"):
        full.invert_and_compose(small)


@pytest.mark.parametrize("seed", SEEDS)
def test_pseudo_invert_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    layout = random_general(rng, {REGISTER: 4, LANE: 4}, {"x": 8, "y": 4})
    pinv = layout.pseudo_invert()
    assert pinv.in_dim_names == ("x", "y") and pinv.out_dim_names == (REGISTER, LANE)
    for point in set(table(layout).values()):
        pre = dict(
            zip(pinv.out_dim_names, pinv.apply(dict(zip(("x", "y"), point, strict=True))), strict=True)
        )
        assert layout.apply(pre) == point


@pytest.mark.parametrize("seed", SEEDS)
def test_divide_left_recovers_factor(seed: int) -> None:
    rng = random.Random(seed)
    divisor = random_general(rng, {REGISTER: 4, LANE: 2}, {"x": 4, "y": 2})
    quotient = random_general(rng, {REGISTER: 2, LANE: 4, WARP: 2}, {"x": 2, "y": 4})
    product = divisor * quotient
    assert product.divide_left(divisor) == quotient
    assert product.divide_left(LinearLayout.empty()) == product


def test_divide_left_failures() -> None:
    layout = LinearLayout.from_bases({REGISTER: [1, 4], LANE: [2, 8]}, {OFFSET: 16})
    assert layout.divide_left(LinearLayout.identity_1d(2, REGISTER, OFFSET)) is not None
    assert layout.divide_left(LinearLayout.identity_1d(4, REGISTER, OFFSET)) is None
    misaligned = LinearLayout.from_bases(
        {REGISTER: [1, 2], LANE: [6, 8]}, {OFFSET: 16}, require_surjective=False
    )
    assert misaligned.divide_left(LinearLayout.identity_1d(4, REGISTER, OFFSET)) is None
    assert misaligned.divide_left(LinearLayout.identity_1d(2, REGISTER, OFFSET)) is not None


def brute_vector_width(layout: LinearLayout, out_dim: str) -> int:
    """Largest 2^k for which some ordered choice of k register bits yields aligned runs."""
    o = layout.out_dim_names.index(out_dim)
    regs = layout.in_dim_size_log2(REGISTER)
    inputs = list(all_inputs(layout))
    best = 1
    for k in range(1, regs + 1):
        for chosen in itertools.permutations(range(regs), k):
            mask = sum(1 << b for b in chosen)
            ok = True
            for x in inputs:
                if x[REGISTER] & mask:
                    continue
                start = layout.apply(x)
                if start[o] % (1 << k):
                    ok = False
                    break
                for i in range(1 << k):
                    reg = x[REGISTER]
                    for j, b in enumerate(chosen):
                        if (i >> j) & 1:
                            reg |= 1 << b
                    want = tuple(v + i if d == o else v for d, v in enumerate(start))
                    if layout.apply({**x, REGISTER: reg}) != want:
                        ok = False
                        break
                if not ok:
                    break
            if ok:
                best = 1 << k
                break
    return best


@pytest.mark.parametrize("seed", SEEDS)
def test_vectorisation_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    layout = random_distributed(rng, (4, 16), lane_bits=2, warp_bits=1, zeros=rng.randrange(2))
    vec = layout.vectorisation("dim1")
    assert vec.width == brute_vector_width(layout, "dim1")
    assert sorted(vec.register_order) == list(range(layout.in_dim_size_log2(REGISTER)))
    for j, bit in enumerate(vec.vector_bits):
        assert layout.bases(REGISTER)[bit] == (0, 1 << j)
    permuted = layout.with_in_dim(REGISTER, [layout.bases(REGISTER)[b] for b in vec.register_order])
    assert permuted.divide_left(LinearLayout.identity_1d(vec.width, REGISTER, "dim1")) is not None


def test_vectorisation_needs_aligned_starts() -> None:
    # docs/layouts.md#operations, the vectorisation counter-example: registers at 1, 2, 4 but a lane at 514.
    layout = LinearLayout.from_bases(
        {REGISTER: [1, 2, 4], LANE: [514, 8]}, {OFFSET: 1024}, require_surjective=False
    )
    assert layout.vectorisation(OFFSET) == Vectorisation(2, (0, 1, 2))
    assert layout.vector_width(OFFSET, max_width=1) == 1
    shuffled = LinearLayout.from_bases({REGISTER: [4, 1, 2], LANE: [8]}, {OFFSET: 16})
    assert shuffled.vectorisation(OFFSET) == Vectorisation(8, (1, 2, 0))


def test_reshape_and_transpose() -> None:
    flat = BLOCKED_64.flatten_outs()
    assert flat.out_dims == ((OFFSET, 4096),)
    for x in all_inputs(BLOCKED_64):
        i, j = BLOCKED_64.apply(x)
        assert flat.apply(x) == (64 * i + j,)
    back = flat.reshape_outs([("dim0", 64), ("dim1", 64)])
    assert back == BLOCKED_64
    t = BLOCKED_64.transpose_outs(["dim1", "dim0"])
    assert t.apply({REGISTER: 21, LANE: 13, WARP: 1}) == (45, 37)
    three = BLOCKED_64.reshape_outs([("a", 16), ("b", 16), ("c", 16)])
    assert three.apply({REGISTER: 21, LANE: 13, WARP: 1}) == divmod(37 * 64 + 45, 256)[0:1] + divmod(
        (37 * 64 + 45) % 256, 16
    )
    threads = BLOCKED_64.flatten_ins("thread")
    for x in all_inputs(BLOCKED_64):
        index = x[REGISTER] | x[LANE] << 5 | x[WARP] << 10
        assert threads.apply({"thread": index}) == BLOCKED_64.apply(x)
    regrouped = threads.reshape_ins([(REGISTER, 32), (LANE, 32), (WARP, 4)])
    assert regrouped == BLOCKED_64
    assert BLOCKED_64.transpose_ins([WARP, LANE, REGISTER]).in_dim_names == (WARP, LANE, REGISTER)


def test_sublayout_resize_and_zero_bases() -> None:
    sub = BLOCKED_64.sublayout([LANE], ["dim0"])
    assert sub.bases(LANE) == ((0,), (0,), (0,), (1,), (2,))
    grown = BLOCKED_64.resize_in_dim(REGISTER, 128)
    assert grown.bases(REGISTER)[5:] == ((0, 0), (0, 0))
    stripped, kept = grown.remove_zero_bases(REGISTER)
    assert stripped == BLOCKED_64 and kept == 0b11111
    assert grown.resize_in_dim(REGISTER, 8).bases(REGISTER) == ((0, 1), (0, 2), (0, 4))


def test_equal_up_to_register_permutation() -> None:
    perm = BLOCKED_64.with_in_dim(REGISTER, [BLOCKED_64.bases(REGISTER)[i] for i in (3, 0, 4, 2, 1)])
    assert perm != BLOCKED_64
    assert perm.equal_up_to_register_permutation(BLOCKED_64)
    padded = perm.resize_in_dim(REGISTER, 64)
    assert padded.equal_up_to_register_permutation(BLOCKED_64)
    swapped = BLOCKED_64.with_in_dim(REGISTER, [(0, 8), (0, 2), (0, 4), (16, 0), (32, 0)]).with_in_dim(
        LANE, [(0, 1), (0, 16), (0, 32), (1, 0), (2, 0)]
    )
    assert not swapped.equal_up_to_register_permutation(BLOCKED_64)


def test_trivial_and_quotient() -> None:
    identity = LinearLayout.identity({REGISTER: 4, LANE: 32, WARP: 4})
    assert identity.is_trivial_over([REGISTER, LANE, WARP])
    assert identity.quotient([WARP]).in_dim_names == (REGISTER, LANE)
    mixed = identity.with_in_dim(REGISTER, [(1, 0, 0), (0, 1, 0)])
    assert mixed.is_trivial_over([WARP])
    assert not mixed.is_trivial_over([LANE])
    assert not mixed.is_trivial_over([REGISTER])
    with pytest.raises(ValueError):
        mixed.quotient([LANE])


def test_input_basis_mask_and_text_form() -> None:
    assert BLOCKED_64.input_basis_mask(LANE, "dim0") == 0b11000
    assert BLOCKED_64.input_basis_mask(REGISTER, "dim1") == 0b00111
    assert str(BLOCKED_64) == (
        "register: [(0,1), (0,2), (0,4), (16,0), (32,0)]\n"
        "lane: [(0,8), (0,16), (0,32), (1,0), (2,0)]\n"
        "warp: [(4,0), (8,0)]\n"
        "-> dim0=64, dim1=64"
    )
    assert str(LinearLayout.identity_1d(4, REGISTER, OFFSET)) == "register: [1, 2]\n-> offset=4"


@pytest.mark.parametrize("seed", SEEDS)
def test_gf2_helpers(seed: int) -> None:
    rng = random.Random(seed)
    vectors = [rng.randrange(64) for _ in range(5)]
    elements = set(span(vectors))
    assert len(elements) == 1 << rank(vectors)
    basis = XorBasis(vectors)
    for v in range(64):
        combination = basis.express(v)
        assert (combination is not None) == (v in elements)
        if combination is not None:
            total = 0
            for k, w in enumerate(vectors):
                if (combination >> k) & 1:
                    total ^= w
            assert total == v
    mask = rng.randrange(1 << 10)
    for value in range(1 << bin(mask).count("1")):
        assert extract(deposit(value, mask), mask) == value
