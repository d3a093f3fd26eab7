"""Debug mode's error record on NVIDIA GPUs, as the host and the lowering share it: the module
global the first failure of a launch is written to (debug.py), its length in 64-bit words, and per
kernel symbol the source locations its location ids (1-based) name (debug_host.py reads them)."""

from __future__ import annotations

from ...ir.core import Location

__all__ = ["DEBUG_LOCS", "ERR_GLOBAL", "ERR_WORDS"]

ERR_GLOBAL = "__anvil_debug_err"
ERR_WORDS = 8  # kind << 32 | loc id, pid x, y, z, detail, argument position + 1 (bounds checks), (spare)
DEBUG_LOCS: dict[str, list[Location]] = {}
