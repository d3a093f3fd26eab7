"""Axis info (passes/axis_info.py): the contiguity, divisibility and constancy facts the NVIDIA
lowering relies on for vector widths and for computing a mask once per run of equal values. A
fact that is too strong is a wrong answer on the GPU, so each case checks the facts against the
values themselves, element by element."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

import compiler.language as tl
from compiler import jit
from compiler.passes.axis_info import analyze_axis_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_prefetch import _ir  # noqa: E402


@jit
def masks(out_ptr, start, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = start + tl.arange(0, BM)
    cols = start + tl.arange(0, BN)
    in_n = cols[None, :] < N  # N a multiple of 16, start of BN: runs of 16 columns
    causal = rows[:, None] >= cols[None, :]  # varies along both dims
    both = in_n & causal
    tl.store(out_ptr + rows[:, None] * BN + cols[None, :], both.to(tl.int32) + in_n.to(tl.int32) * 2)


SIG = {"out_ptr": "*i32", "start": "i32:16", "N": "i32:16"}


def _facts(consts: dict[str, Any]) -> dict[str, Any]:
    fn = _ir(masks, SIG, consts)
    info = analyze_axis_info(fn)
    out: dict[str, Any] = {}
    for op in fn.walk():
        if op.opcode == "cmp":
            out.setdefault(op.attrs["pred"], info[op.result])
        if op.opcode == "expand_dims":
            out.setdefault("expand", []).append(info[op.result])
    return out


def _runs_hold(values: np.ndarray, constancy: tuple[int, ...]) -> bool:
    """Every aligned run of constancy[d] elements along d holds one value."""
    for d, k in enumerate(constancy):
        if k == 1:
            continue
        shape = list(values.shape)
        v = np.moveaxis(values, d, -1).reshape(-1, shape[d] // k, k)
        if not (v == v[..., :1]).all():
            return False
    return True


def test_constancy_of_masks_is_true_of_the_values() -> None:
    bm, bn = 32, 64
    facts = _facts({"BM": bm, "BN": bn})
    lt, ge = facts["lt"], facts["ge"]
    assert lt.constancy[1] == 16  # cols < N: N and the first column multiples of 16
    assert ge.constancy == (1, 1)  # rows >= cols: no run along either dim
    rng = np.random.default_rng(0)
    for _ in range(50):
        start = int(rng.integers(0, 64)) * 16  # what "i32:16" promises
        n = int(rng.integers(0, 64)) * 16
        rows = start + np.arange(bm)[:, None]
        cols = start + np.arange(bn)[None, :]
        assert _runs_hold(np.broadcast_to(cols < n, (1, bn)), lt.constancy)
        assert _runs_hold(rows >= cols, ge.constancy)


def test_expand_dims_of_a_contiguous_range_is_not_divisible_along_the_new_dim() -> None:
    facts = _facts({"BM": 32, "BN": 64})
    for e in facts["expand"]:
        # rows[:, None] / cols[None, :]: start + 0, start + 1, ... are not all multiples of 16
        assert min(e.divisibility) == 1 or max(e.contiguity) == 1
        new_dim = 1 if e.contiguity[0] > 1 else 0
        assert e.divisibility[new_dim] == 1
