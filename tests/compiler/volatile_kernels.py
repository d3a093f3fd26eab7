"""A program that waits for another one: it polls a flag with tl.load(..., volatile=True) until the
other program sets it. Shared by test_ptx_volatile.py (sm_90a PTX) and tests/gpu/test_gpu_volatile.py."""

from __future__ import annotations

import compiler.language as tl
from compiler import jit


@jit
def handoff(flag_ptr, out_ptr, CV: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:
        tl.atomic_xchg(flag_ptr, 1)
    else:
        seen = 0
        spins = 0
        while seen == 0:
            if CV:
                seen = tl.load(flag_ptr, cache_modifier=".cv")
            else:
                seen = tl.load(flag_ptr, volatile=True)
            spins += 1
        tl.store(out_ptr, seen)
        tl.store(out_ptr + 1, tl.minimum(spins, 1))
