"""Shared test setup: a private compile cache per session, fixed seeds, a GPU marker."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-test-cache-"))


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed() -> None:
    import torch

    torch.manual_seed(0)


@pytest.fixture
def triton_stand_in() -> Iterator[Any]:
    """`triton` is Anvil's stand-in for the test's duration, then whatever it was before."""
    from compiler import triton_compat

    was = triton_compat.installed()
    triton_compat.install()
    try:
        import triton

        yield triton
    finally:
        if not was:
            triton_compat.uninstall()
