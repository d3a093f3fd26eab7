"""torch's current CUDA stream, read on every launch of a kernel compiled for an NVIDIA GPU
(compiler/backends/nvidia/backend.py launches on it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["current_stream", "stream_source"]


def _stream_reader() -> tuple[Callable[[Any], int], Any]:
    """(read, arg): `read(arg)` is torch's current CUDA stream on the current device, as a raw handle.
    Read on every launch (never cached): CUDA graph capture and `torch.cuda.stream(...)` work by
    changing it. torch's `_cuda_getCurrentRawStream(-1)` asks for the current device's stream in one
    call (c10::cuda::getCurrentCUDAStream treats -1 as the current device); it is used once checked
    against the two-call form on a side stream, which it must see."""
    c = torch._C
    raw, device = c._cuda_getCurrentRawStream, c._cuda_getDevice
    try:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            if raw(-1) == raw(device()) == side.cuda_stream:
                return raw, -1
    except Exception:  # noqa: BLE001 - an older torch that refuses -1: the two-call form
        pass
    return (lambda _: raw(device())), None


_stream: tuple[Callable[[Any], int], Any] | None = None


def stream_source() -> tuple[Callable[[Any], int], Any]:
    global _stream
    if _stream is None:
        _stream = _stream_reader()
    return _stream


def current_stream() -> int:
    read, arg = _stream or stream_source()
    return read(arg)
