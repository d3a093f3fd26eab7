"""The vocabulary of tool work, below the tool modules: a job is a plain function of
``(payload, state, report)`` run inside a worker by an :class:`Executor`, which the tool functions
reach through their Runtime (tools/runtime.py); the state a worker keeps between jobs; how a
target names its device.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Progress", "Report", "Job", "WorkerState", "Executor", "gpu_available", "resolve_target", "device_for",
           "noop_progress"]

Progress = Callable[[float, float | None, str], Awaitable[None]]
Report = Callable[[float, float | None, str], None]
Job = Callable[[dict[str, Any], "WorkerState", Report], dict[str, Any]]


@dataclass
class WorkerState:
    """What a worker keeps between jobs: loaded kernels and measured device ceilings."""

    device: str
    jit_cache: dict[str, Any] = field(default_factory=dict)
    ceilings: dict[str, Any] = field(default_factory=dict)
    protections: dict[str, Any] = field(default_factory=dict)  # what confines the worker (server/sandbox.py)
    max_cached: int = 256
    # unchecked kernel code ran here (benchmark's timed runs): what it did to this process's memory is
    # unknown, so the worker retires after answering and a fresh one serves the next call
    tainted: bool = False
    # input tensors generated on the host (random, arange, listed values), kept on the device by spec, least
    # recently used first; launches get copies (tools/launch.py: input_tensor)
    inputs: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    input_cache_bytes: int = 1 << 30

    def keep_input(self, key: str, tensor: Any) -> None:
        self.inputs[key] = tensor
        while sum(t.nbytes for t in self.inputs.values()) > self.input_cache_bytes and len(self.inputs) > 1:
            self.inputs.popitem(last=False)

    def remember(self, key: str, value: Any) -> Any:
        if len(self.jit_cache) >= self.max_cached:
            self.jit_cache.pop(next(iter(self.jit_cache)))
        self.jit_cache[key] = value
        return value


class Executor(Protocol):
    async def compile(
        self, payload: dict[str, Any], *, timeout: float, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Run a "compile" job."""
        ...

    async def run(
        self,
        device: str,
        job: str,
        payload: dict[str, Any],
        *,
        timeout: float,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Run ``job`` on the worker of ``device`` (one job at a time per device)."""
        ...

    def close(self) -> None: ...


def gpu_available() -> bool:
    try:
        # deferred: start-up cost: torch (about 2 s), needed only to resolve the target 'auto'
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def resolve_target(target: str) -> str:
    """'auto' -> 'cuda' when a GPU is visible ('amd' under a ROCm build of torch), else 'cpu'; other
    targets unchanged."""
    if target == "auto":
        if not gpu_available():
            return "cpu"
        # deferred: start-up cost: torch (about 2 s), needed only to resolve the target 'auto'
        import torch

        return "amd" if getattr(torch.version, "hip", None) else "cuda"  # ROCm builds call AMD GPUs "cuda"
    return target


def device_for(target: str) -> str:
    """The torch device (and worker key) a resolved target runs on."""
    if target.startswith("cuda"):
        return "cuda:0"
    if target.startswith("amd"):
        return "cuda:0"  # ROCm builds of torch expose AMD GPUs as "cuda"
    return "cpu"


async def noop_progress(done: float, total: float | None, message: str) -> None:
    return None
