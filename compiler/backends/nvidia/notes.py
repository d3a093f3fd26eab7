"""What the assembler said that costs speed: register spills and serialized wgmma.

ptxas reports spilled bytes and, for sm_90a, performance remarks such as "(C7515) Potential
Performance Loss: wgmma.mma_async instructions are serialized ...". Each becomes a note: spills
at the kernel's definition (ptxas names no line), serialized wgmma at each tl.dot.
"""

from __future__ import annotations

from ...ir.core import Location
from .toolchain import PtxasReport

__all__ = ["assembler_notes"]

_SERIALIZED = ("(C7514)", "(C7515)")


def assembler_notes(report: PtxasReport | None, kernel: Location, dots: list[Location]) -> list[dict[str, object]]:
    """Notes (message, hint, location) from ptxas's report of one kernel."""
    if report is None:
        return []
    notes: list[dict[str, object]] = []
    spilled = report.spill_stores + report.spill_loads
    if spilled:
        notes.append(_note(kernel, f"the assembler spilled registers to local memory: {report.spill_stores} bytes "
                           f"stored, {report.spill_loads} bytes loaded ({report.registers} registers per thread)",
                           "use smaller BLOCK sizes or fewer num_stages (or a higher maxnreg): spills are memory "
                           "traffic in the innermost loop"))
    for remark in report.notes:
        if remark.startswith(_SERIALIZED):
            for loc in dots or [kernel]:
                notes.append(_note(loc, f"the assembler serializes the wgmma instructions of this tl.dot: {remark}",
                                   "keep the accumulator of each tl.dot in its loop (no use between iterations) and "
                                   "tiles a multiple of 64 x 16; num_stages changes how the loads overlap"))
        else:
            notes.append(_note(kernel, f"the assembler reports: {remark}", None))
    return notes


def _note(loc: Location, message: str, hint: str | None) -> dict[str, object]:
    return {"message": message, "hint": hint, "line": loc.line, "column": loc.col}
