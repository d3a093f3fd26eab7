"""tl.rand / randn / randint / randint4x / rand4x / randn4x / philox: Triton's Philox streams bit
for bit, for 32- and 64-bit seeds and offsets and a non-default number of rounds.

Integers and uniform floats are compared exactly. randn goes through log, sqrt, cos and sin,
which numpy (the interpreter) and Anvil's math library round differently in the last bits, so
it is compared with a tight tolerance.
"""

from __future__ import annotations

import pytest
import torch
from diff_harness import HEADER, Case, case_ids, check_case, poison, register

K = HEADER + """@triton.jit
def rng(seed, o_int, o_rand, o_randn, o_i4, o_f4, o_n4, o_ph, o_r7, n, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    if WIDE:
        roffs = offs.to(tl.int64) + 2**33
    else:
        roffs = offs
    tl.store(o_int + offs, tl.randint(seed, roffs), mask=m)
    tl.store(o_rand + offs, tl.rand(seed, roffs), mask=m)
    tl.store(o_randn + offs, tl.randn(seed, roffs), mask=m)
    a, b, c, d = tl.randint4x(seed, roffs)
    tl.store(o_i4 + offs * 4, a, mask=m)
    tl.store(o_i4 + offs * 4 + 1, b, mask=m)
    tl.store(o_i4 + offs * 4 + 2, c, mask=m)
    tl.store(o_i4 + offs * 4 + 3, d, mask=m)
    f0, f1, f2, f3 = tl.rand4x(seed, roffs)
    tl.store(o_f4 + offs * 2, f0, mask=m)
    tl.store(o_f4 + offs * 2 + 1, f3, mask=m)
    n0, n1, n2, n3 = tl.randn4x(seed, roffs)
    tl.store(o_n4 + offs * 2, n1, mask=m)
    tl.store(o_n4 + offs * 2 + 1, n2, mask=m)
    c0 = offs.to(tl.uint32)
    z = tl.zeros_like(c0)
    p0, p1, p2, p3 = tl.philox(seed, c0, z + 7, z, z)
    tl.store(o_ph + offs * 2, p0 ^ p3, mask=m)
    tl.store(o_ph + offs * 2 + 1, p1 + p2, mask=m)
    tl.store(o_r7 + offs, tl.randint(seed, roffs, n_rounds=7), mask=m)
"""


def rng_cases() -> list[Case]:
    out = []
    for seed, n, wide in ((0, 1000, False), (12345, 77, False), (2**31 + 17, 300, False), (2**40 + 3, 200, True),
                          (7, 256, True)):
        name = f"rng_seed{seed}_n{n}{'_wide' if wide else ''}"
        args = [seed, poison(n, torch.uint32), poison(n, torch.float32), poison(n, torch.float32),
                poison(4 * n, torch.uint32), poison(2 * n, torch.float32), poison(2 * n, torch.float32),
                poison(2 * n, torch.uint32), poison(n, torch.uint32), n]
        tol = [None, None, (1e-5, 1e-5), None, None, (1e-5, 1e-5), None, None]
        out.append(Case(name, K, "rng", args, ((n + 127) // 128,), outputs=range(1, 9),
                        meta=dict(BLOCK=128, WIDE=wide), tol=tol))
    return out


CASES = register(rng_cases())


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_random(case: Case, diff_selected: list[str]) -> None:
    check_case(case, diff_selected)
