"""Public Triton kernel libraries, unchanged, on Anvil: one test per row of the table and device.

The rows are in the `compat_*.py` modules beside this file (one per library); compat_harness.py
says how a row runs. On the CPU backend everywhere; on CUDA (marked `gpu`) where a GPU is present.
"""

from __future__ import annotations

from typing import Any

import pytest
from compat_harness import Case, all_cases, params, run_case


@pytest.mark.parametrize("case, device", params(all_cases()))
def test_library_kernel(case: Case, device: str, triton_stand_in: Any) -> None:
    run_case(case, device)
