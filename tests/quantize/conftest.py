"""Poison every buffer the quantization kernels' launchers allocate, so an element a kernel
never writes shows up as NaN (floats, fp8) or a sentinel (integers) instead of leftover memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

import tools.kernels.fp4
import tools.kernels.fp8
import tools.kernels.int4

_SENTINEL = {torch.int32: -0x5A5A5A5B, torch.int8: -0x5B, torch.uint8: 0xA5}


def poisoned_empty(*shape: Any, dtype: torch.dtype | None = None, **kw: Any) -> torch.Tensor:
    t = torch.empty(*shape, dtype=dtype, **kw)
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        t.view(torch.uint8).fill_(0x7F)
    elif t.is_floating_point():
        t.fill_(float("nan"))
    else:
        t.fill_(_SENTINEL.get(t.dtype, -1))
    return t


class _TorchProxy:
    def __getattr__(self, name: str) -> Any:
        return poisoned_empty if name == "empty" else getattr(torch, name)


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for mod in (tools.kernels.int4, tools.kernels.fp8, tools.kernels.fp4):
        monkeypatch.setattr(mod, "torch", _TorchProxy())
    yield
