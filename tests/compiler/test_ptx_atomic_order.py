"""Atomic read-modify-writes keep their memory ordering on NVIDIA. LLVM lowers every `atomicrmw`
to a relaxed `atom`, so the ordering is carried by fences: a release (or acq_rel) atomic has a
`fence.acq_rel` at its scope before it, an acquire (or acq_rel) one has it after; relaxed has none.
Without them a program that publishes data and then counts itself (split-K's last-program sum, a
lock's release) could be read before its data is visible."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from compiler.backends.nvidia.toolchain import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atomic_kernels import rmw_k  # noqa: E402

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

SCOPES = {"gpu": "gpu", "cta": "cta", "sys": "sys"}


@pytest.mark.parametrize("tile", [False, True])
@pytest.mark.parametrize("scope", ["gpu", "cta", "sys"])
@pytest.mark.parametrize(("sem", "before", "after"), [("acq_rel", True, True), ("release", True, False),
                                                      ("acquire", False, True), ("relaxed", False, False)])
def test_rmw_ordering_becomes_fences(sem: str, before: bool, after: bool, scope: str, tile: bool) -> None:
    ck = rmw_k.compile({"p": "*i32", "out": "*i32"}, {"SEM": sem, "SCOPE": scope, "TILE": tile},
                       target="cuda:sm_90a", num_warps=4)
    lines = [ln.strip() for ln in ck.asm["ptx"].splitlines()]  # type: ignore[attr-defined]
    atoms = [i for i, ln in enumerate(lines) if re.match(r"(@%p\d+ )?atom\.global\.", ln)]
    assert atoms
    fences = [i for i, ln in enumerate(lines) if ln.startswith("fence.")]
    assert all(lines[i] == f"fence.acq_rel.{SCOPES[scope]};" for i in fences)
    assert any(f < atoms[0] for f in fences) == before
    assert any(f > atoms[-1] for f in fences) == after
    assert ck.asm["cubin"][:4] == b"\x7fELF"  # type: ignore[attr-defined]
