"""Worker processes: where untrusted kernels are compiled, launched and timed.

One worker per device runs launches and benchmarks, one job at a time, started on first use
and reused while healthy; a small pool of workers compiles. A worker is a ``spawn`` child
speaking length-prefixed JSON over a pipe (never pickle: a worker runs native code built from
agent text, so the server does not unpickle what it sends). The server awaits the pipe without
blocking its event loop, so it can enforce timeouts and cancellation by killing the child.

A kernel that segfaults, hits an illegal address, hangs or exhausts memory takes down only its
worker: the call gets a :class:`~tools.errors.KernelFault` saying what happened and what to
try, a fresh worker starts in the background, and the next call works.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
import traceback
from typing import Any

import anyio

from tools.errors import KernelFault, ToolInputError
from tools.limits import Limits
from tools.runtime import Progress

log = logging.getLogger("anvil.worker")

_STARTUP_TIMEOUT_S = 180.0
_MAX_MESSAGE = 256 << 20


class WorkerDied(Exception):
    """The child exited (or was killed) before answering."""

    def __init__(self, exitcode: int | None, during: str, detail: str = "") -> None:
        self.exitcode = exitcode
        self.during = during
        super().__init__(detail or f"worker exited with {describe_exit(exitcode)} during {during}")


class WorkerTimedOut(Exception):
    """The child did not answer within the call's time limit (it has been killed)."""


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "no exit status"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


# --- the child ---------------------------------------------------------------------------------------


def _send(conn: multiprocessing.connection.Connection, message: dict[str, Any]) -> None:
    conn.send_bytes(json.dumps(message, default=str).encode())


def _child_main(conn: multiprocessing.connection.Connection, device: str, memory_bytes: int) -> None:
    """Entry point of a worker: serve jobs from the pipe until it closes."""
    os.dup2(2, 1)  # native printf from kernels must never reach the server's protocol stream
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when workers stop
    if memory_bytes > 0 and device == "cpu":
        import resource

        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    from tools.launch import is_device_fault
    from tools.runtime import WorkerState, job_table

    jobs = job_table()
    state = WorkerState(device)
    _send(conn, {"type": "ready", "pid": os.getpid()})
    while True:
        try:
            message = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        call_id = message["id"]

        def report(done: float, total: float | None, text: str, call_id: int = call_id) -> None:
            _send(conn, {"type": "progress", "id": call_id, "done": done, "total": total, "message": text})

        fatal = False
        try:
            result = jobs[message["job"]](message["payload"], state, report)
            reply: dict[str, Any] = {"type": "result", "id": call_id, "result": result}
        except ToolInputError as exc:
            reply = {
                "type": "error",
                "id": call_id,
                "kind": "input",
                "message": exc.message,
                "data": exc.data,
            }
        except MemoryError:
            reply = {"type": "error", "id": call_id, "kind": "oom", "message": "MemoryError"}
            fatal = True
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            if is_device_fault(exc):
                reply, fatal = {"type": "error", "id": call_id, "kind": "fault", "message": text}, True
            elif "out of memory" in str(exc).lower():
                reply, fatal = {"type": "error", "id": call_id, "kind": "oom", "message": text}, True
            else:
                tb = traceback.format_exc(limit=8)
                reply = {"type": "error", "id": call_id, "kind": "internal", "message": text, "traceback": tb}
        _send(conn, reply)
        if fatal:  # a faulted CUDA context (or a fragmented heap) is not worth keeping
            os._exit(3)


# --- the parent --------------------------------------------------------------------------------------


class Worker:
    """One child process that runs jobs one at a time, with timeouts and progress forwarding."""

    def __init__(self, name: str, device: str, *, memory_bytes: int = 0) -> None:
        self.name = name
        self.device = device
        self.memory_bytes = memory_bytes
        self.process: multiprocessing.process.BaseProcess | None = None
        self.conn: multiprocessing.connection.Connection | None = None
        self.ready = False
        self.started_at = 0.0
        self.restarts = -1
        self._lock: anyio.Lock | None = None
        self._next_id = 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def start(self) -> None:
        """Spawn the child (it imports torch and the compiler while the parent goes on)."""
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        process = ctx.Process(
            target=_child_main,
            args=(child, self.device, self.memory_bytes),
            name=f"anvil-{self.name}",
            daemon=True,
        )
        process.start()
        child.close()
        self.process, self.conn, self.ready = process, parent, False
        self.started_at = time.monotonic()
        self.restarts += 1
        log.info("started worker %s (pid %s)", self.name, process.pid)

    def kill(self) -> int | None:
        """Stop the child now; return its exit code."""
        process, conn = self.process, self.conn
        self.process, self.conn, self.ready = None, None, False
        if conn is not None:
            conn.close()
        if process is None:
            return None
        if process.is_alive():
            process.kill()
        process.join(5)
        return process.exitcode

    def _reap(self) -> int | None:
        process = self.process
        if process is not None:
            process.join(2)
        return self.kill()

    async def _receive(self, deadline: float) -> dict[str, Any]:
        conn = self.conn
        assert conn is not None
        while not conn.poll():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            with anyio.move_on_after(remaining):
                await anyio.wait_readable(conn.fileno())
        raw = conn.recv_bytes(_MAX_MESSAGE)
        return json.loads(raw)

    async def _ensure_ready(self) -> None:
        if not self.alive:
            self.kill()
            self.start()
        if self.ready:
            return
        try:
            message = await self._receive(self.started_at + _STARTUP_TIMEOUT_S)
        except (EOFError, OSError):
            raise WorkerDied(self._reap(), "start-up") from None
        except TimeoutError:
            self.kill()
            raise WorkerDied(None, "start-up (timed out)") from None
        if message.get("type") != "ready":
            self.kill()
            raise WorkerDied(None, "start-up (unexpected message)")
        self.ready = True

    async def call(
        self, job: str, payload: dict[str, Any], *, timeout: float, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Run ``job`` in the child; raise ToolInputError, WorkerDied or WorkerTimedOut on failure."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            await self._ensure_ready()
            assert self.conn is not None
            self._next_id += 1
            call_id = self._next_id
            try:
                _send(self.conn, {"id": call_id, "job": job, "payload": payload})
                deadline = time.monotonic() + timeout
                while True:
                    message = await self._receive(deadline)
                    if message.get("id") != call_id:
                        continue
                    if message["type"] != "progress":
                        break
                    if progress is not None:
                        await progress(message["done"], message["total"], message["message"])
            except TimeoutError:
                self.kill()
                self.start()  # the replacement warms up while the caller reads the error
                raise WorkerTimedOut(f"{job} did not finish within {timeout:g} s") from None
            except (EOFError, OSError, BrokenPipeError):
                exitcode = self._reap()
                self.start()
                raise WorkerDied(exitcode, job) from None
            except BaseException:  # cancelled mid-job: the child may be anywhere, so replace it
                self.kill()
                self.start()
                raise
            if message["type"] == "result":
                return message["result"]
            return self._raise(message)

    def _raise(self, message: dict[str, Any]) -> dict[str, Any]:
        kind = message.get("kind")
        if kind == "input":
            raise ToolInputError(message["message"], data=message.get("data") or {})
        if kind in ("fault", "oom"):
            exitcode = self._reap()
            self.start()
            raise WorkerDied(exitcode, kind, message["message"])
        raise RuntimeError(
            f"internal error in worker {self.name}: {message.get('message')}\n{message.get('traceback', '')}"
        )


class ProcessExecutor:
    """The server's executor: a worker per device for launches, a growing pool for compiles."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.devices: dict[str, Worker] = {}
        self.compilers: list[Worker] = []
        self._idle: list[Worker] = []
        self._slots: anyio.Semaphore | None = None

    def device_worker(self, device: str) -> Worker:
        worker = self.devices.get(device)
        if worker is None:
            memory = self.limits.worker_memory_bytes if device == "cpu" else 0
            worker = self.devices[device] = Worker(f"device-{device}", device, memory_bytes=memory)
        return worker

    def prestart(self, devices: list[str], *, compiler: bool = True) -> None:
        """Start workers ahead of the first call (optional; they start on demand otherwise)."""
        for device in devices:
            worker = self.device_worker(device)
            if not worker.alive:
                worker.start()
        if compiler and not self.compilers:
            worker = Worker("compile-0", "cpu")
            worker.start()
            self.compilers.append(worker)
            self._idle.append(worker)

    async def compile(
        self, payload: dict[str, Any], *, timeout: float, progress: Progress | None = None
    ) -> dict[str, Any]:
        if self._slots is None:
            self._slots = anyio.Semaphore(max(1, self.limits.compile_workers))
        async with self._slots:
            if self._idle:
                worker = self._idle.pop()
            else:
                worker = Worker(f"compile-{len(self.compilers)}", "cpu")
                self.compilers.append(worker)
            try:
                return await worker.call("compile", payload, timeout=timeout, progress=progress)
            except WorkerDied as exc:
                raise _fault("crash", "compile", payload, exc) from None
            except WorkerTimedOut as exc:
                raise _fault("timeout", "compile", payload, exc, timeout) from None
            finally:
                self._idle.append(worker)

    async def run(
        self,
        device: str,
        job: str,
        payload: dict[str, Any],
        *,
        timeout: float,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        worker = self.device_worker(device)
        try:
            return await worker.call(job, payload, timeout=timeout, progress=progress)
        except WorkerDied as exc:
            kind = "oom" if exc.during == "oom" else "crash"
            raise _fault(kind, job, payload, exc) from None
        except WorkerTimedOut as exc:
            raise _fault("timeout", job, payload, exc, timeout) from None

    def close(self) -> None:
        for worker in [*self.devices.values(), *self.compilers]:
            worker.kill()
        self.devices.clear()
        self.compilers.clear()
        self._idle.clear()


_SUGGESTIONS = {
    "crash": "A segfault or illegal address usually means an out-of-bounds tl.load/tl.store: check the "
    "offsets and masks of every access against the tensor sizes, or launch again with debug=true to get "
    "the first out-of-bounds access with its source line.",
    "timeout": "Check loop bounds and the exit condition of every while loop (a bound read from a wrong "
    "argument never ends), or reduce the sizes and the grid.",
    "oom": "Use smaller tensors or fewer input sets; check for huge intermediate tiles (BLOCK sizes).",
    "compile-crash": "The compiler itself crashed on this source. Simplify the construct the kernel uses "
    "last and report the source as a compiler bug.",
    "compile-timeout": "The compilation took too long: unrolled loops (tl.static_range) with large bounds or "
    "huge constexpr block sizes are the usual cause.",
}


def _fault(kind: str, job: str, payload: dict[str, Any], exc: Exception, timeout: float | None = None) -> KernelFault:
    kernel = payload.get("kernel") or {}
    name = kernel.get("kernel_name") or payload.get("kernel_name") or "the kernel"
    kernel_id = kernel.get("kernel_id")
    if kind == "timeout":
        what = f"did not finish within {timeout or 0:g} s; its worker was stopped"
    elif kind == "oom":
        what = f"ran out of memory ({exc})"
    else:
        status = describe_exit(getattr(exc, "exitcode", None))
        detail = str(exc)
        what = f"crashed its worker process ({status})" if status in detail else f"failed: {detail} ({status})"
    suggestion = _SUGGESTIONS[f"compile-{kind}"] if job == "compile" and kind != "oom" else _SUGGESTIONS[kind]
    subject = f"compiling {name}" if job == "compile" else f"{job} of {name}"
    where = f" (kernel_id {kernel_id})" if kernel_id else ""
    text = (
        f"{subject}{where} {what}. The worker was replaced and the server is fine; the next call works.\n"
        f"Suggestion: {suggestion}"
    )
    data = {"error": kind, "job": job, "kernel_name": name, "kernel_id": kernel_id, "suggestion": suggestion}
    return KernelFault(text, data=data)
