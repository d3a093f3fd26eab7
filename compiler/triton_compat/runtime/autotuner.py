"""`triton.runtime.autotuner`: Anvil's autotuner under Triton's module name."""

from __future__ import annotations

from ...runtime.autotune import Autotuner, Config, Heuristics, autotune, heuristics

__all__ = ["Autotuner", "Config", "Heuristics", "autotune", "heuristics"]
