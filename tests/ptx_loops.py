"""Loops in PTX text, for tests that check what a kernel's loop holds."""

from __future__ import annotations

import re


def loop_spans(ptx: str) -> list[str]:
    """The text of each loop: from a label that a later branch jumps back to, to that branch."""
    spans = []
    for m in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx):
        start = ptx.find(m.group(1) + ":")
        if 0 <= start < m.start():
            spans.append(ptx[start:m.end()])
    return spans


def inner_loop(ptx: str) -> str:
    """The innermost loop (the shortest span)."""
    spans = loop_spans(ptx)
    assert spans, "no loop found"
    return min(spans, key=len)
