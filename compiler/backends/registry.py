"""The backends by target name: the one place a target picks its backend.

A target name is "<family>" or "<family>:<variant>" ("cpu", "cuda", "cuda:sm_90a", "amd:gfx942"); the family
names the backend, the backend checks the variant. Backends are imported on first use (the NVIDIA
backend's import starts LLVM's NVPTX initialisation), so naming one costs nothing until it compiles.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass

from .. import errors as E
from .contract import Backend

__all__ = ["backend_for", "canonical_target", "device_of", "known_targets", "on_gpu"]


@dataclass(frozen=True)
class _Entry:
    module: str  # the module, relative to compiler.backends, that defines the backend
    cls: str
    device: str  # the torch device type its kernels run on (known without importing the backend)
    examples: tuple[str, ...]  # target names, for error messages


_ENTRIES: dict[str, _Entry] = {
    "cpu": _Entry(".cpu.backend", "CpuBackend", "cpu", ("cpu",)),
    "cuda": _Entry(".nvidia.backend", "NvidiaBackend", "cuda", ("cuda", "cuda:sm_80", "cuda:sm_90a", "cuda:sm_100a")),
    # ROCm builds of torch call AMD GPUs "cuda"
    "amd": _Entry(".amd.backend", "AmdBackend", "cuda", ("amd", "amd:gfx942", "amd:gfx950")),
}
_loaded: dict[str, Backend] = {}
_lock = threading.Lock()


def known_targets() -> list[str]:
    """Example target names of every registered backend."""
    return [t for e in _ENTRIES.values() for t in e.examples]


def _entry(target: str) -> _Entry:
    family = target.partition(":")[0]
    entry = _ENTRIES.get(family)
    if entry is None:
        known = ", ".join(map(repr, known_targets()))
        raise E.ArgumentError(f"unknown target {target!r}; the known targets are {known} (a CUDA target may name "
                              "any architecture of the NVIDIA backend's table, e.g. 'cuda:sm_89')")
    return entry


def backend_for(target: str) -> Backend:
    """The backend that compiles for `target` (ArgumentError naming the known ones if none does)."""
    family = target.partition(":")[0]
    hit = _loaded.get(family)
    if hit is not None:
        return hit
    entry = _entry(target)
    with _lock:
        if family not in _loaded:
            cls = getattr(importlib.import_module(entry.module, __package__), entry.cls)
            _loaded[family] = cls()
        return _loaded[family]


def canonical_target(target: str) -> str:
    """`target` in full ("cuda" -> "cuda:sm_90a"), checked by its backend."""
    return backend_for(target).canonical_target(target)


def device_of(target: str) -> str:
    """The torch device type `target`'s kernels run on, without importing its backend."""
    return _entry(target).device


def on_gpu(target: str) -> bool:
    """Whether `target`'s kernels run on a GPU (what GPU-only language features ask)."""
    return device_of(target) != "cpu"
