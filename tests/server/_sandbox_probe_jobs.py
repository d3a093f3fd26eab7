"""Jobs that look at a worker from the inside (tests/server/test_sandbox.py adds them to a worker)."""

from __future__ import annotations

import os
import socket
import subprocess
from typing import Any

from tools.runtime import Report, WorkerState


def _errno_of(action: Any) -> str:
    try:
        action()
    except OSError as exc:
        return f"errno {exc.errno}"
    return "ok"


def _read(path: str, size: int = -1) -> None:
    with open(path, "rb") as f:
        f.read(size)


def probe_env(payload: dict[str, Any], state: WorkerState, report: Report) -> dict[str, Any]:
    with open("/proc/self/environ", "rb") as f:
        exec_env = f.read().decode(errors="replace")
    parent = _errno_of(lambda: _read(f"/proc/{os.getppid()}/environ"))
    parent_mem = _errno_of(lambda: _read(f"/proc/{os.getppid()}/mem", 1))
    return {"environ": dict(os.environ), "exec_environ": exec_env, "parent_environ": parent,
            "parent_mem": parent_mem, "tmpdir": os.environ.get("TMPDIR", "")}


def probe_processes(payload: dict[str, Any], state: WorkerState, report: Report) -> dict[str, Any]:
    def fork() -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    def thread() -> None:
        import threading

        box: list[int] = []
        t = threading.Thread(target=lambda: box.append(1))
        t.start()
        t.join()
        if box != [1]:
            raise OSError(0, "the thread did not run")

    return {
        "fork": _errno_of(fork),
        "exec": _errno_of(lambda: os.execv("/bin/true", ["true"])),
        "subprocess": _errno_of(lambda: subprocess.run(["/bin/true"], check=False)),
        "tcp": _errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),
        "thread": _errno_of(thread),
        "signal_parent": _errno_of(lambda: os.kill(os.getppid(), 0)),
    }


def probe_write(payload: dict[str, Any], state: WorkerState, report: Report) -> dict[str, Any]:
    def write(path: str) -> None:
        with open(path, "w") as f:
            f.write("x")

    return {path: _errno_of(lambda p=path: write(p)) for path in payload["paths"]}


def probe_allocate(payload: dict[str, Any], state: WorkerState, report: Report) -> dict[str, Any]:
    block = bytearray(int(payload["bytes"]))
    return {"allocated": len(block)}


JOBS = {"probe_env": probe_env, "probe_processes": probe_processes, "probe_write": probe_write,
        "probe_allocate": probe_allocate}
