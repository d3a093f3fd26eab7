"""Where tool work runs: the Runtime the tool functions take, and the executors behind it.

The tool functions (compile_kernel, launch_kernel, benchmark, device_info) validate in the
calling process and hand the work that touches untrusted code (compiling, launching, timing)
to an :class:`Executor` as a named *job* with a JSON payload (tools/executor.py). A job is a plain
function of ``(payload, state, report)`` listed in :func:`job_table`; it runs inside a worker process in the
server (``server.worker.ProcessExecutor``) or, for scripts and tests that accept the risk, in
this process (:class:`InProcessExecutor`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from tools.errors import ToolInputError
from tools.executor import (
    Executor,
    Job,
    Progress,
    Report,
    WorkerState,
    device_for,
    gpu_available,
    noop_progress,
    resolve_target,
)
from tools.limits import Limits
from tools.paths import read_regular_file, resolve_inside
from tools.store import KernelStore

# the executor's names are re-exported: scripts and the server take them from here with Runtime
__all__ = ["Runtime", "InProcessExecutor", "job_table", "resolve_source_file", "Executor", "Job", "Progress", "Report",
           "WorkerState", "device_for", "gpu_available", "noop_progress", "resolve_target"]

def job_table() -> dict[str, Job]:
    """Job name -> function. The jobs import torch and the compiler: only the workers (and an
    :class:`InProcessExecutor`) load them, on their first job, never the server process."""
    # deferred: start-up cost: torch and the compiler (about 3 s), which only the processes that run jobs need
    from tools import bench_job, compile, device_job, launch_job

    return {
        "compile": compile.run_compile_job,
        "launch": launch_job.run_launch_job,
        "benchmark": bench_job.run_benchmark_job,
        "device": device_job.run_device_job,
    }


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
        self.store.max_bytes = self.limits.max_kernel_bytes


def resolve_source_file(path: str, allowed: list[Path], max_bytes: int = Limits.max_source_bytes) -> str:
    """Read a kernel source file that lies inside one of the ``--allow-path`` directories.

    Blocking (it opens and reads a file): the server calls it in a worker thread.
    """
    resolved = resolve_inside(path, allowed, "source_file")
    data = read_regular_file(resolved, "source_file", path, max_bytes, "max_source_bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolInputError(
            f"source_file {path!r} is not UTF-8 text (byte {exc.start} is invalid); save it as UTF-8."
        ) from None
