"""A program polling a flag that another program sets finishes on the GPU (ld.volatile inside the
loop; tests/compiler/volatile_kernels.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
from test_volatile import run_handoff  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("cv", [False, True])
def test_polling_finishes_on_the_gpu(cv: bool) -> None:
    assert run_handoff("cuda", cv) == "[1, 1]"
