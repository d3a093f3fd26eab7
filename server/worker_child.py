"""The worker side of server/worker.py: confine the process, then serve jobs from the socket.

The server execs ``python -I -c BOOT`` with an allow-listed environment (server/sandbox.py) and
one inherited socket; :func:`main` runs before anything but the standard library is imported.
Order matters: the ptxas process is started while processes may still be started, the sandbox
is applied while the process has one thread, and only then are torch and the compiler imported
and the first job read.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing.connection
import os
import resource
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from server.assembler import start as start_assembler
from server.sandbox import SandboxConfig, apply

BOOT = ("import sys, json; c = json.loads(sys.argv[1]); sys.path[:] = c['sys_path']; "
        "from server.worker_child import main; main(c)")


def send(conn: multiprocessing.connection.Connection, message: dict[str, Any]) -> None:
    conn.send_bytes(json.dumps(message, default=str).encode())


def main(config: dict[str, Any]) -> None:
    """Entry point of a worker: confine, report what is in force, serve jobs until the socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when workers stop
    conn = multiprocessing.connection.Connection(int(config["fd"]))
    sandbox = SandboxConfig.from_dict(config["sandbox"])
    if config.get("assembler"):
        _helper, fd = start_assembler(Path(config["scratch"]), sandbox.memory_bytes)
        os.environ["ANVIL_PTXAS_FD"] = str(fd)
    try:
        protections = apply(sandbox)
    except Exception as exc:  # noqa: BLE001 - reported to the server, which refuses to use the worker
        send(conn, {"type": "sandbox-failed", "message": f"{type(exc).__name__}: {exc}"})
        return
    warm = [t for t in str(config.get("warm_target") or "").split(",") if t]
    serve(conn, str(config["device"]), protections, str(config.get("extra_jobs") or ""), warm,
          launch=not str(config.get("name", "")).startswith("compile"))


def serve(
    conn: multiprocessing.connection.Connection, device: str, protections: dict[str, Any], extra_jobs: str = "",
    warm_targets: list[str] | None = None, *, launch: bool = True,
) -> None:
    """Import the jobs, warm up (tools/warmup.py: a compile, or a launch on ``device``, per target),
    report ready, then run jobs until the socket closes."""
    # deferred: security: tools/ (torch, the compiler) is imported only after the sandbox is applied (main)
    from tools.launch_job import is_device_fault

    # deferred: security: tools/ (torch, the compiler) is imported only after the sandbox is applied (main)
    from tools.runtime import WorkerState, job_table

    jobs = job_table()
    if extra_jobs:
        jobs.update(importlib.import_module(extra_jobs).JOBS)
    state = WorkerState(device, protections=protections)
    warm_ms = None
    if warm_targets:
        # deferred: security: tools/ (torch, the compiler) is imported only after the sandbox is applied (main)
        from tools.warmup import warm_up

        try:
            warm_ms = warm_up(state, warm_targets, launch=launch)
        except Exception as exc:  # noqa: BLE001 - a warm-up that fails costs only the first call's speed
            print(f"anvil worker: warm-up failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    try:
        send(conn, {"type": "ready", "pid": os.getpid(), "protections": protections, "warm_ms": warm_ms})
    except OSError:  # the server is gone (it stopped while this worker warmed up): nothing to serve
        return
    while True:
        try:
            message = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        call_id = message["id"]

        def report(done: float, total: float | None, text: str, call_id: int = call_id) -> None:
            send(conn, {"type": "progress", "id": call_id, "done": done, "total": total, "message": text})

        fatal = False
        try:
            result = jobs[message["job"]](message["payload"], state, report)
            reply: dict[str, Any] = {"type": "result", "id": call_id, "result": result}
        except MemoryError:
            reply = {"type": "error", "id": call_id, "kind": "oom", "message": "MemoryError"}
            fatal = True
        except Exception as exc:
            reply, fatal = _error_reply(call_id, exc, is_device_fault(exc))
        if state.tainted or _grown():  # unchecked kernel code ran, or compiled code piled up: answer,
            reply["retire"] = True      # then make way for a fresh worker
        try:
            send(conn, reply)
        except MemoryError:  # the reply itself did not fit: say so in a few bytes
            send(conn, {"type": "error", "id": call_id, "kind": "oom", "message": "MemoryError"})
            fatal = True
        if fatal or reply.get("retire"):  # a faulted CUDA context (or a fragmented heap) is not worth keeping
            sys.stderr.flush()
            os._exit(3 if fatal else 0)


def _grown() -> bool:
    """Whether this worker's data memory passed 3/4 of its limit. Native code of every kernel compiled
    in a process stays in its one JIT engine (about 0.1 MB each), so a worker that has compiled many
    thousands retires before an allocation past its limit would abort it in the middle of a job."""
    limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    if limit in (resource.RLIM_INFINITY, -1) or limit <= 0:
        return False
    try:
        with open("/proc/self/status") as f:
            data_kb = next((int(line.split()[1]) for line in f if line.startswith("VmData:")), 0)
    except (OSError, ValueError):
        return False
    return data_kb * 1024 > limit * 3 // 4


def _error_reply(call_id: int, exc: Exception, device_fault: bool) -> tuple[dict[str, Any], bool]:
    # deferred: security: tools/ (torch, the compiler) is imported only after the sandbox is applied (main)
    from tools.errors import ToolInputError

    if isinstance(exc, ToolInputError):
        return {"type": "error", "id": call_id, "kind": "input", "message": exc.message, "data": exc.data}, False
    text = f"{type(exc).__name__}: {exc}"
    if device_fault:
        return {"type": "error", "id": call_id, "kind": "fault", "message": text}, True
    if "out of memory" in text.lower() or "can't allocate memory" in text.lower():
        return {"type": "error", "id": call_id, "kind": "oom", "message": text}, True
    tb = traceback.format_exc(limit=8)
    return {"type": "error", "id": call_id, "kind": "internal", "message": text, "traceback": tb}, False
