"""Tile IR -> Tile IR passes; `run_pipeline` lists them in order."""

from __future__ import annotations

from ..ir.core import Function
from ..ir.verifier import verify
from .cse import cse
from .dce import dce
from .fold import fold

__all__ = ["run_pipeline", "PIPELINE"]

PIPELINE = (fold, cse, dce)


def run_pipeline(fn: Function, check: bool = False) -> Function:
    """Inlining happens in the frontend (calls are expanded at their call sites, keeping the
    call chain in every location); then folding, CSE and DCE. With `check`, verify after each."""
    if check:
        verify(fn)
    for p in PIPELINE:
        p(fn)
        if check:
            verify(fn)
    return fn
