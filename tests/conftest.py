"""Shared test setup: a private compile cache per session, the Tile IR verified after every stage,
fixed seeds, a GPU marker."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-test-cache-"))
os.environ.setdefault("ANVIL_VERIFY_IR", "1")  # the Tile IR verified after every stage of every compile


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


class _PoisonedEmpty:
    """torch as the anvil backend's runner sees it, except that fresh tensors are full of poison."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def empty(self, *args: Any, **kwargs: Any) -> Any:
        t = self._torch.empty(*args, **kwargs)
        if t.is_floating_point():
            return t.fill_(float("nan"))
        return t.fill_(True) if t.dtype == self._torch.bool else t.fill_(self._torch.iinfo(t.dtype).min + 7)


@pytest.fixture
def anvil_poisoned(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The outputs the anvil torch.compile backend allocates for its fused kernels start as poison, so an
    element a kernel fails to write shows; torch.compile's caches start and end empty."""
    import torch

    from compiler.torch import runner

    monkeypatch.setattr(runner, "torch", _PoisonedEmpty(torch))
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
