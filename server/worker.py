"""Worker processes: where untrusted kernels are compiled, launched and timed.

One worker per device runs launches and benchmarks, one job at a time, started on first use
and reused while healthy; a small pool of workers compiles. A worker is a ``spawn`` child
speaking length-prefixed JSON over a socket (never pickle: a worker runs native code built from
agent text, so the server does not unpickle what it sends). Each worker is exec'ed with an
allow-listed environment and confines itself before it reads a job (server/sandbox.py): memory
limit, no new processes, writes only to the compile cache and its own scratch directory. The
server awaits the socket without blocking its event loop, so it can enforce timeouts and
cancellation by killing the child.

A kernel that segfaults, hits an illegal address, hangs or exhausts memory takes down only its
worker: the call gets a :class:`~tools.errors.KernelFault` saying what happened and what to
try, a fresh worker starts in the background, and the next call works.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing.connection
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from server import sandbox
from server.worker_child import BOOT, send
from tools.errors import KernelFault, ToolInputError
from tools.limits import Limits

if TYPE_CHECKING:
    from tools.runtime import Progress

log = logging.getLogger("anvil.worker")

_STARTUP_TIMEOUT_S = 180.0
STAGGER_BELOW_CORES = 8  # machines with fewer cores start the device worker after the compile worker
_MAX_MESSAGE = 256 << 20
_RETIRE_GRACE_S = 5.0  # a retiring child exits by itself within this, else it is killed


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


# --- the parent --------------------------------------------------------------------------------------


@dataclass
class _Child:
    """One started child process: its socket, scratch directory and start time."""

    process: subprocess.Popen[bytes]
    conn: multiprocessing.connection.Connection
    scratch: Path
    started_at: float

    def kill(self) -> int | None:
        self.conn.close()
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        shutil.rmtree(self.scratch, ignore_errors=True)
        return self.process.returncode


class Worker:
    """One child process that runs jobs one at a time, with timeouts and progress forwarding.

    With ``spare``, a second child is kept started beside the serving one: when the serving one
    dies, times out or retires, the spare (already confined, imported and warmed up) takes its
    place at once and a new spare starts in the background. The spare runs no job before then.
    """

    def __init__(
        self, name: str, device: str, *, memory_bytes: int = 0, sandboxed: bool = True, extra_jobs: str = "",
        spare: bool = False, warm_target: str = "",
    ) -> None:
        self.name = name
        self.extra_jobs = extra_jobs  # a module whose JOBS dict adds jobs (tests probe the sandbox with it)
        self.device = device
        self.memory_bytes = memory_bytes
        self.sandboxed = sandboxed
        self.spare = spare
        self.warm_target = warm_target  # the target the child compiles (and launches) a tiny kernel for at start
        self.process: subprocess.Popen[bytes] | None = None
        self.conn: multiprocessing.connection.Connection | None = None
        self.scratch: Path | None = None
        self.protections: dict[str, Any] = {}
        self.ready = False
        self.started_at = 0.0
        self.restarts = -1
        self.promotions = 0  # replacements served by the spare
        self.warm_ms: float | None = None  # what the serving child's warm-up took
        self._standby: _Child | None = None
        self._starting = threading.Lock()  # a staggered start may come from prestart's thread
        self._lock: anyio.Lock | None = None
        self._next_id = 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def gpu(self) -> bool:
        return self.device != "cpu"

    def start(self) -> None:
        """Put a fresh child in place: the spare when one is up, else a new one (which confines itself,
        then imports torch and the compiler and warms up while the parent goes on). With ``spare``, a
        new spare is started too."""
        standby, self._standby = self._standby, None
        if standby is not None and standby.process.poll() is None:
            child = standby
            self.promotions += 1
        else:
            if standby is not None:
                standby.kill()
            child = self._spawn()
        self.process, self.conn, self.scratch = child.process, child.conn, child.scratch
        self.started_at = child.started_at
        self.ready = False
        self.restarts += 1
        log.info("worker %s: serving from pid %s", self.name, child.process.pid)
        if child is standby:  # the next spare starts now; after a fresh start, once that child is ready
            self.ensure_spare()

    def ensure_spare(self) -> None:
        """Start the spare child if it is wanted and not running."""
        if not self.spare or (self._standby is not None and self._standby.process.poll() is None):
            return
        if self._standby is not None:
            self._standby.kill()
        self._standby = self._spawn()

    @property
    def spare_pid(self) -> int | None:
        return self._standby.process.pid if self._standby is not None else None

    def _spawn(self) -> _Child:
        scratch = Path(tempfile.mkdtemp(prefix=f"anvil-{self.name}-"))
        cache = sandbox.cache_dir_of(os.environ)
        with contextlib.suppress(OSError):
            cache.mkdir(parents=True, exist_ok=True)
        config = sandbox.SandboxConfig(
            gpu=self.gpu, memory_bytes=self.memory_bytes, writable=(str(cache), str(scratch)),
            seccomp=self.sandboxed, landlock=self.sandboxed,
        )
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child = {
            "fd": theirs.fileno(), "device": self.device, "scratch": str(scratch), "sandbox": config.to_dict(),
            "sys_path": [p or os.getcwd() for p in sys.path],
            "assembler": self.name.startswith("compile") or self.gpu, "extra_jobs": self.extra_jobs,
            "warm_target": self.warm_target, "name": self.name,
        }
        try:
            process = subprocess.Popen(
                [sys.executable, "-I", "-c", BOOT, json.dumps(child)],
                env=sandbox.worker_environment(os.environ, scratch), pass_fds=(theirs.fileno(),), close_fds=True,
                stdin=subprocess.DEVNULL, stdout=2, cwd=scratch,
            )
        finally:
            theirs.close()
        log.info("started worker process %s for %s", process.pid, self.name)
        return _Child(process, multiprocessing.connection.Connection(ours.detach()), scratch, time.monotonic())

    def _detach(self) -> _Child | None:
        """Take the serving child out of service (it serves no more calls); return it, if there was one."""
        process, conn, scratch = self.process, self.conn, self.scratch
        self.process, self.conn, self.scratch, self.ready = None, None, None, False
        if process is None or conn is None or scratch is None:
            return None
        return _Child(process, conn, scratch, self.started_at)

    def kill(self) -> int | None:
        """Stop the serving child now; return its exit code. The spare stays (see :meth:`close`)."""
        child = self._detach()
        return child.kill() if child is not None else None

    def close(self) -> None:
        """Stop the serving child and the spare."""
        self.kill()
        standby, self._standby = self._standby, None
        if standby is not None:
            standby.kill()

    def _reap(self) -> int | None:
        process = self.process
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(2)
        return self.kill()

    def _retire(self) -> None:
        """Let go of the serving child, which answered and is exiting by itself: a background thread
        gives it a few seconds, then kills it and removes its scratch directory."""
        child = self._detach()
        if child is None:
            return

        def finish() -> None:
            began = time.monotonic()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(_RETIRE_GRACE_S)
            child.kill()
            log.info("worker %s: retired pid %s exited after %.0f ms", self.name, child.process.pid,
                     (time.monotonic() - began) * 1e3)

        threading.Thread(target=finish, name=f"retire-{self.name}", daemon=True).start()

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

    def start_if_stopped(self) -> None:
        """Start the child unless one is running (safe to call from another thread than the event loop's)."""
        with self._starting:
            if not self.alive:
                self.kill()
                self.start()

    async def _ensure_ready(self) -> None:
        self.start_if_stopped()
        if self.ready:
            return
        waiting = time.monotonic()
        try:
            message = await self._receive(self.started_at + _STARTUP_TIMEOUT_S)
        except (EOFError, OSError):
            raise WorkerDied(self._reap(), "start-up") from None
        except TimeoutError:
            self.kill()
            raise WorkerDied(None, "start-up (timed out)") from None
        if message.get("type") == "sandbox-failed":
            self.kill()
            raise WorkerDied(None, "start-up", f"the worker could not confine itself: {message.get('message')}")
        if message.get("type") != "ready":
            self.kill()
            raise WorkerDied(None, "start-up (unexpected message)")
        self.protections = dict(message.get("protections") or {})
        self.warm_ms = message.get("warm_ms")
        log.info("worker %s (pid %s) ready after %.0f ms (warm-up %.0f ms; the call waited %.0f ms); protections: %s",
                 self.name, message.get("pid"), (time.monotonic() - self.started_at) * 1e3,
                 message.get("warm_ms") or 0, (time.monotonic() - waiting) * 1e3, self.protections)
        self.ready = True
        self.ensure_spare()

    async def wait_ready(self) -> None:
        """Start the child if needed and wait until it has confined itself and warmed up."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            await self._ensure_ready()

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
                sent = time.monotonic()
                send(self.conn, {"id": call_id, "job": job, "payload": payload})
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
            log.info("worker %s: %s answered in %.1f ms", self.name, job, (time.monotonic() - sent) * 1e3)
            if message.get("retire") and message.get("kind") not in ("fault", "oom"):  # (those restart in _raise)
                # unchecked code ran in it: replace it now (the spare serves the next call); the old one exits
                # on its own in the background, since a GPU process's teardown can take seconds
                self._retire()
                self.start()
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
    """The server's executor: a worker per device for launches (each with a warm spare), a growing pool
    for compiles.

    ``compile_targets``: what compile workers warm up for at start (default: the CPU, and CUDA when
    this machine has NVIDIA device nodes).
    """

    def __init__(
        self, limits: Limits | None = None, *, extra_jobs: str = "", compile_targets: list[str] | None = None
    ) -> None:
        self.limits = limits or Limits()
        self.extra_jobs = extra_jobs  # see Worker; for tests
        self.compile_targets = compile_targets if compile_targets is not None else default_compile_targets()
        if not sandbox.protect_server():
            log.warning("could not make the server non-dumpable: workers may read its /proc/<pid>/environ")
        self.devices: dict[str, Worker] = {}
        self.compilers: list[Worker] = []
        self.staggered = (os.cpu_count() or 1) < STAGGER_BELOW_CORES
        self._idle: list[Worker] = []
        self._slots: anyio.Semaphore | None = None
        self._client_slots: dict[str, tuple[anyio.Semaphore, list[int]]] = {}

    def device_worker(self, device: str) -> Worker:
        worker = self.devices.get(device)
        if worker is None:
            memory = self.limits.worker_memory_bytes if device == "cpu" else self.limits.gpu_worker_memory_bytes
            worker = self.devices[device] = Worker(
                f"device-{device}", device, memory_bytes=memory, sandboxed=bool(self.limits.worker_sandbox),
                extra_jobs=self.extra_jobs, spare=self.limits.spare_workers > 0,
                warm_target="cpu" if device == "cpu" else "cuda",
            )
        return worker

    def prestart(self, devices: list[str], *, compiler: bool = True) -> None:
        """Start workers ahead of the first call (optional; they start on demand otherwise): the compile worker
        now; the device workers now, or on a machine of few cores (``staggered``) as soon as the compile worker
        reports ready (a thread waits for it), so that the processes starting at once do not slow each other
        and the server down. Spares start once their workers are ready (:meth:`warm`)."""
        if compiler and not self.compilers:
            worker = self._compile_worker()
            worker.start()
            self.compilers.append(worker)
            self._idle.append(worker)
        later = []
        for device in devices:
            worker = self.device_worker(device)
            if worker.alive:
                continue
            if self.staggered and self.compilers and self.compilers[0].conn is not None:
                later.append(worker)
            else:
                worker.start()
        if later:
            first = self.compilers[0]
            threading.Thread(target=_start_after, args=(first, later), name="anvil-stagger", daemon=True).start()

    async def warm(self) -> None:
        """Wait until every started worker is ready, so that their spares start (the server runs this in the
        background after a prestart)."""
        for worker in [*self.compilers, *self.devices.values()]:  # compile workers first: see prestart
            with contextlib.suppress(WorkerDied):
                await worker.wait_ready()

    def protections(self, device: str) -> dict[str, Any] | None:
        """What confines the worker of ``device``, as it reported when it became ready (None before)."""
        worker = self.devices.get(device)
        return dict(worker.protections) if worker is not None and worker.protections else None

    def _compile_worker(self) -> Worker:
        return Worker(f"compile-{len(self.compilers)}", "cpu", memory_bytes=self.limits.compile_memory_bytes,
                      sandboxed=bool(self.limits.worker_sandbox), extra_jobs=self.extra_jobs,
                      warm_target=",".join(self.compile_targets))

    async def compile(
        self, payload: dict[str, Any], *, timeout: float, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Run a compile job on an idle compile worker. Each client (MCP session) may hold at most
        ``max_client_compiles`` workers at once; cancelling the call kills its worker (a fresh one starts)."""
        if self._slots is None:
            self._slots = anyio.Semaphore(max(1, self.limits.compile_workers))
        async with self._client_slot(_client_key()), self._slots:
            if self._idle:
                worker = self._idle.pop()
            else:
                worker = self._compile_worker()
                self.compilers.append(worker)
            try:
                return await worker.call("compile", payload, timeout=timeout, progress=progress)
            except WorkerDied as exc:
                kind = "oom" if exc.during == "oom" else "crash"
                raise _fault(kind, "compile", payload, exc, memory=(worker.memory_bytes, _KNOBS["compile"])) from None
            except WorkerTimedOut as exc:
                raise _fault("timeout", "compile", payload, exc, timeout) from None
            finally:
                self._idle.append(worker)

    @contextlib.asynccontextmanager
    async def _client_slot(self, client: str) -> AsyncIterator[None]:
        cap = self.limits.max_client_compiles or max(1, self.limits.compile_workers - 1)
        slot, users = self._client_slots.setdefault(client, (anyio.Semaphore(cap), [0]))
        users[0] += 1
        try:
            async with slot:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                self._client_slots.pop(client, None)

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
            knob = _KNOBS["cpu"] if device == "cpu" else _KNOBS["gpu"]
            raise _fault(kind, job, payload, exc, memory=(worker.memory_bytes, knob)) from None
        except WorkerTimedOut as exc:
            raise _fault("timeout", job, payload, exc, timeout) from None

    def close(self) -> None:
        for worker in [*self.devices.values(), *self.compilers]:
            worker.close()
        self.devices.clear()
        self.compilers.clear()
        self._idle.clear()


def _start_after(first: Worker, workers: list[Worker], timeout: float = _STARTUP_TIMEOUT_S) -> None:
    """Start ``workers`` once ``first`` has sent its ready message (read later by its caller) or has died."""
    conn, process = first.conn, first.process
    deadline = time.monotonic() + timeout
    while (conn is not None and process is not None and process.poll() is None and time.monotonic() < deadline
           and not first.ready and first.conn is conn):  # (a call may have read the message already)
        try:
            if conn.poll(0.05):
                break
        except (OSError, ValueError):  # closed meanwhile
            break
    for worker in workers:
        worker.start_if_stopped()


def default_compile_targets() -> list[str]:
    """The CPU, and CUDA where NVIDIA device nodes exist (checked without importing torch or touching the
    driver: the server starts its compile workers before it imports either)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    nvidia = os.path.exists("/dev/nvidiactl") and visible not in ("", "-1")
    return ["cpu", "cuda"] if nvidia else ["cpu"]


_KNOBS = {
    "compile": "ANVIL_COMPILE_MEMORY_BYTES",
    "cpu": "ANVIL_WORKER_MEMORY_BYTES",
    "gpu": "ANVIL_GPU_WORKER_MEMORY_BYTES",
}
_SUGGESTIONS = {
    "crash": "A segfault or illegal address usually means an out-of-bounds tl.load/tl.store: check the "
    "offsets and masks of every access against the tensor sizes, or launch again with debug=true to get "
    "the first out-of-bounds access with its source line.",
    "timeout": "Check loop bounds and the exit condition of every while loop (a bound read from a wrong "
    "argument never ends), or reduce the sizes and the grid.",
    "oom": "Use smaller tensors or fewer input sets; check for huge intermediate tiles (BLOCK sizes).",
    "compile-crash": "The compiler itself crashed on this source. Simplify the construct the kernel uses "
    "last and report the source as a compiler bug.",
    "compile-oom": "Compile-time values (long strings or tuples, huge constexpr sizes, unrolled loops) grew past "
    "the compile worker's memory limit: keep compile-time work small.",
    "compile-timeout": "The compilation took too long: unrolled loops (tl.static_range) with large bounds or "
    "huge constexpr block sizes are the usual cause.",
}


def _client_key() -> str:
    """The MCP session of the current tool call ("" outside one: scripts and tests share one slot)."""
    try:
        # deferred: start-up cost: fastmcp (about 2 s); scripts and tests run workers without the MCP server
        from fastmcp.server.dependencies import get_context

        return str(get_context().session_id)
    except Exception:  # noqa: BLE001 - no request context
        return ""


def _fault(
    kind: str, job: str, payload: dict[str, Any], exc: Exception, timeout: float | None = None, *,
    memory: tuple[int, str] = (0, ""),
) -> KernelFault:
    """The tool error for a worker that died, timed out or ran out of memory; ``memory`` is the worker's
    limit and the variable that sets it."""
    kernel = payload.get("kernel") or {}
    name = kernel.get("kernel_name") or payload.get("kernel_name") or "the kernel"
    kernel_id = kernel.get("kernel_id")
    if kind == "timeout":
        what = f"did not finish within {timeout or 0:g} s; its worker was stopped"
    elif kind == "oom":
        limit = f"; the worker's memory limit is {memory[0] / (1 << 30):.3g} GiB ({memory[1]})" if memory[0] else ""
        what = f"ran out of memory ({exc}{limit})"
    else:
        status = describe_exit(getattr(exc, "exitcode", None))
        detail = str(exc)
        what = f"crashed its worker process ({status})" if status in detail else f"failed: {detail} ({status})"
        if job == "benchmark":
            what += (" (the timed runs are unchecked, after one checked run per input set: a kernel that reads "
                     "or writes out of bounds only in later runs, through state kept in an input or a race, "
                     "crashes there; launch_kernel checks every access)")
        elif memory[0] and status == "SIGABRT":
            what += f" (native code aborts when it cannot allocate: the worker's memory limit is {memory[0]:,} bytes, "
            what += f"{memory[1]})"
    suggestion = _SUGGESTIONS[f"compile-{kind}"] if job == "compile" else _SUGGESTIONS[kind]
    subject = f"compiling {name}" if job == "compile" else f"{job} of {name}"
    where = f" (kernel_id {kernel_id})" if kernel_id else ""
    data = {"error": kind, "job": job, "kernel_name": name, "kernel_id": kernel_id, "suggestion": suggestion}
    suspects = ""
    if kind == "crash" and job in ("launch", "benchmark"):
        suspects, extra = _crash_leads(kernel, job)
        data |= extra
    text = (
        f"{subject}{where} {what}. The worker was replaced and the server is fine; the next call works.\n"
        f"{suspects}Suggestion: {suggestion}"
    )
    return KernelFault(text, data=data)


def _crash_leads(kernel: dict[str, Any], job: str) -> tuple[str, dict[str, Any]]:
    """What a crash message adds: the accesses without a mask whose address depends on the program id
    (from the compiler), and the launch that locates the faulting access."""
    accesses = list(kernel.get("unmasked_accesses") or [])
    if accesses:
        listed = "\n".join(
            f"  line {a['line']}:{a['column']}: {a['kind']}"
            + (f" through {a['pointer']}" if a.get("pointer") else "")
            + (f": {a['source_line']}" if a.get("source_line") else "")
            for a in accesses[:8]
        )
        more = f"\n  ... and {len(accesses) - 8} more" if len(accesses) > 8 else ""
        text = (f"Accesses without a mask whose address depends on the program id (the last programs of a grid "
                f"over a size that is not a multiple of the block reach past the tensor):\n{listed}{more}\n")
    else:
        text = ("No load or store without a mask has an address that depends on the program id: check the masks "
                "themselves, and addresses computed from scalar arguments or from values read from memory.\n")
    relaunch: dict[str, Any] = {"tool": "launch_kernel", "kernel_id": kernel.get("kernel_id"), "debug": True,
                                "note": "the same grid and args as this call"}
    how = ("launch_kernel with the same kernel_id, grid and args (every access is checked there; the timed runs "
           "of benchmark are not)") if job == "benchmark" else "the same launch_kernel call with debug=true"
    text += (f"To locate the access: {how} reports the first out-of-bounds access with its line, program id and "
             "offset.\n")
    return text, {"unmasked_accesses": accesses, "debug_relaunch": relaunch}
