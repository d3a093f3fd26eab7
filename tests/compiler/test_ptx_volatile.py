"""tl.load(volatile=True) and cache_modifier=".cv" on NVIDIA read memory every time they run: a
`ld.volatile.global` that stays inside the polling loop (a plain load would be hoisted out of it
and the program would spin forever). The GPU run: tests/gpu/test_gpu_volatile.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compiler.backends.nvidia.toolchain import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ptx_loops import loop_spans  # noqa: E402
from volatile_kernels import handoff  # noqa: E402

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")


@pytest.mark.parametrize("cv", [False, True])
def test_polling_load_stays_in_the_loop(cv: bool) -> None:
    ck = handoff.compile({"flag_ptr": "*i32", "out_ptr": "*i32"}, {"CV": cv}, target="cuda:sm_90a", num_warps=1)
    ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
    assert any("ld.volatile.global.b32" in loop for loop in loop_spans(ptx))
