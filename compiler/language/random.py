"""Counter-based random numbers (Philox 4x32-10), bit-identical to Triton's streams."""

from __future__ import annotations

from ..runtime.function import device_function
from . import builtins as _b
from .core import constexpr, int32, int64, static_range, uint32, uint64

__all__ = ["philox", "randint", "randint4x", "rand", "rand4x", "randn", "randn4x",
           "uint_to_uniform_float", "pair_uniform_to_normal"]

N_ROUNDS_DEFAULT = 10
static_assert = _b.static_assert


@device_function
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    if c0.dtype == uint32:
        KEY_A: constexpr = 0x9E3779B9
        KEY_B: constexpr = 0xBB67AE85
        ROUND_A: constexpr = 0xD2511F53
        ROUND_B: constexpr = 0xCD9E8D57
    else:
        KEY_A: constexpr = 0x9E3779B97F4A7C15
        KEY_B: constexpr = 0xBB67AE8584CAA73B
        ROUND_A: constexpr = 0xD2E7470EE14C6C93
        ROUND_B: constexpr = 0xCA5A826395121157
    for _ in static_range(n_rounds):
        prev0 = c0
        prev2 = c2
        c0 = _b.umulhi(ROUND_B, prev2) ^ c1 ^ k0
        c2 = _b.umulhi(ROUND_A, prev0) ^ c3 ^ k1
        c1 = ROUND_B * prev2
        c3 = ROUND_A * prev0
        k0 = k0 + KEY_A
        k1 = k1 + KEY_B
    return c0, c1, c2, c3


@device_function
def philox(seed, c0, c1, c2, c3, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Run Philox on counters (c0..c3) keyed by `seed`; returns four uint tiles."""
    seed = _b.to_tensor(seed)
    static_assert(seed.dtype.is_int(), "the seed must be an integer")
    seed = seed.to(uint64)
    c0 = _b.to_tensor(c0)
    c1 = _b.to_tensor(c1)
    c2 = _b.to_tensor(c2)
    c3 = _b.to_tensor(c3)
    if c0.dtype.primitive_bitwidth == 32:
        seed_hi = ((seed >> 32) & 0xFFFFFFFF).to(uint32)
        seed_lo = (seed & 0xFFFFFFFF).to(uint32)
        c0 = c0.to(uint32, bitcast=True)
        c1 = c1.to(uint32, bitcast=True)
        c2 = c2.to(uint32, bitcast=True)
        c3 = c3.to(uint32, bitcast=True)
    else:
        seed_hi = _b.full((1,), 0, dtype=uint64)
        seed_lo = seed
        c0 = c0.to(uint64, bitcast=True)
        c1 = c1.to(uint64, bitcast=True)
        c2 = c2.to(uint64, bitcast=True)
        c3 = c3.to(uint64, bitcast=True)
    return philox_impl(c0, c1, c2, c3, seed_lo, seed_hi, n_rounds)


@device_function
def randint4x(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Four tiles of random uint32 for `offset` (a tile of counters) under `seed`."""
    offset_lo = offset.to(uint32)
    zero = offset_lo * 0
    if offset.dtype.primitive_bitwidth > 32:
        offset_hi = (offset >> 32).to(uint32)
    else:
        offset_hi = zero
    return philox(seed, offset_lo, offset_hi, zero, zero, n_rounds)


@device_function
def randint(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """A tile of random uint32 for `offset` under `seed`. `r = tl.randint(seed, offs)`."""
    ret, _, _, _ = randint4x(seed, offset, n_rounds)
    return ret


@device_function
def uint_to_uniform_float(x):
    """Map random integers to floats uniform in [0, 1)."""
    if x.dtype == uint32 or x.dtype == int32:
        x = x.to(int32, bitcast=True)
        scale = 4.6566127342e-10
    else:
        x = x.to(int64, bitcast=True)
        scale = 1.0842020432385337e-19
    x = _b.where(x < 0, -x - 1, x)
    return x * scale


@device_function
def rand(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """A tile of float32 uniform in [0, 1). `keep = tl.rand(seed, offs) > p`."""
    source = randint(seed, offset, n_rounds)
    return uint_to_uniform_float(source)


@device_function
def rand4x(seed, offsets, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Four tiles of float32 uniform in [0, 1)."""
    i1, i2, i3, i4 = randint4x(seed, offsets, n_rounds)
    return (uint_to_uniform_float(i1), uint_to_uniform_float(i2), uint_to_uniform_float(i3),
            uint_to_uniform_float(i4))


@device_function
def pair_uniform_to_normal(u1, u2):
    """Box-Muller: two uniform tiles to two standard normal tiles."""
    u1 = _b.maximum(1.0e-7, u1)
    th = 6.283185307179586 * u2
    r = _b.sqrt(-2.0 * _b.log(u1))
    return r * _b.cos(th), r * _b.sin(th)


@device_function
def randn(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """A tile of float32 from N(0, 1). `z = tl.randn(seed, offs)`."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    u1 = uint_to_uniform_float(i1)
    u2 = uint_to_uniform_float(i2)
    n1, _ = pair_uniform_to_normal(u1, u2)
    return n1


@device_function
def randn4x(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Four tiles of float32 from N(0, 1)."""
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    n3, n4 = pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4
