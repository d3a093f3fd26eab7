"""Where tool work runs: the Runtime the tool functions take, and the executors behind it.

The tool functions (compile_kernel, launch_kernel, benchmark, device_info) validate in the
calling process and hand the work that touches untrusted code (compiling, launching, timing)
to an :class:`Executor` as a named *job* with a JSON payload. A job is a plain function of
``(payload, state, report)`` listed in :func:`job_table`; it runs inside a worker process in the
server (``server.worker.ProcessExecutor``) or, for scripts and tests that accept the risk, in
this process (:class:`InProcessExecutor`).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.from_thread
import anyio.to_thread

from tools.limits import Limits
from tools.store import KernelStore

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


def job_table() -> dict[str, Job]:
    """Job name -> function. Imported lazily: workers import the compiler, the server need not."""
    from tools import bench, compile, device, launch

    return {
        "compile": compile.run_compile_job,
        "launch": launch.run_launch_job,
        "benchmark": bench.run_benchmark_job,
        "device": device.run_device_job,
    }


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


class InProcessExecutor:
    """Runs jobs in threads of this process: no isolation from faulting kernels, no hard timeouts."""

    def __init__(self) -> None:
        self._states: dict[str, WorkerState] = {}
        self._locks: dict[str, anyio.Lock] = {}

    async def _call(self, device: str, job: str, payload: dict[str, Any], progress: Progress | None) -> dict[str, Any]:
        state = self._states.setdefault(device, WorkerState(device))
        fn = job_table()[job]

        async def forward(done: float, total: float | None, message: str) -> None:
            if progress is not None:
                await progress(done, total, message)

        def report(done: float, total: float | None, message: str) -> None:
            if progress is not None:
                anyio.from_thread.run(forward, done, total, message)

        lock = self._locks.setdefault(device, anyio.Lock())
        async with lock:
            return await anyio.to_thread.run_sync(functools.partial(fn, payload, state, report))

    async def compile(
        self, payload: dict[str, Any], *, timeout: float, progress: Progress | None = None
    ) -> dict[str, Any]:
        return await self._call("compile", "compile", payload, progress)

    async def run(
        self,
        device: str,
        job: str,
        payload: dict[str, Any],
        *,
        timeout: float,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        return await self._call(device, job, payload, progress)

    def close(self) -> None:
        self._states.clear()


@dataclass
class Runtime:
    """Everything the tool functions share: limits, the kernel store, the executor, paths."""

    limits: Limits = field(default_factory=Limits)
    executor: Executor = field(default_factory=InProcessExecutor)
    store: KernelStore = field(default_factory=KernelStore)
    allowed_paths: list[Path] = field(default_factory=list)
    # where the server keeps what it measured about this machine (tools/device.py); None: memory only
    state_dir: Path | None = None
    device_info_cache: dict[str, Any] = field(default_factory=dict)
    _compiling: dict[str, anyio.Event] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.store.max_kernels = self.limits.max_kernels


def gpu_available() -> bool:
    try:
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


def resolve_source_file(path: str, allowed: list[Path], max_bytes: int = Limits.max_source_bytes) -> str:
    """Read a kernel source file that lies inside one of the ``--allow-path`` directories.

    Blocking (it opens and reads a file): the server calls it in a worker thread.
    """
    from tools.errors import ToolInputError
    from tools.paths import read_regular_file, resolve_inside

    resolved = resolve_inside(path, allowed, "source_file")
    data = read_regular_file(resolved, "source_file", path, max_bytes, "max_source_bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolInputError(
            f"source_file {path!r} is not UTF-8 text (byte {exc.start} is invalid); save it as UTF-8."
        ) from None
