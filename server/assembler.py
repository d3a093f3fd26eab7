"""The ptxas process of a sandboxed worker.

A worker may not start processes (server/sandbox.py), yet the NVIDIA backend assembles PTX with
the ``ptxas`` binary when libnvJitLink is not available. So before the worker confines itself it
starts this small helper, which may fork and exec, and keeps one end of a socket pair to it. The
helper accepts two requests and nothing else: the version of ptxas, and "assemble this PTX text
for this architecture at this optimisation level". It picks the ptxas binary itself (the
backend's search), validates the arguments, runs ptxas in a fresh temporary directory and
returns the cubin and the log. It confines itself too: writes only under its own scratch
directory, the worker's memory limit.

Protocol (compiler/backends/nvidia/toolchain.py is the client): length-prefixed JSON messages
over the socket, ``{"op": "version"}`` -> ``{"ok": true, "text": ...}`` and
``{"op": "assemble", "ptx", "arch", "opt"}`` -> ``{"ok": true, "returncode", "log", "cubin_b64"}``;
``{"ok": false, "error": ...}`` when the request is refused.
"""

from __future__ import annotations

import base64
import json
import multiprocessing.connection
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from server.sandbox import SandboxConfig, apply

__all__ = ["start", "serve"]

_ARCH = re.compile(r"sm_\d{2,3}[af]?")
_MAX_PTX = 64 << 20
_BOOT = ("import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
         "from server.assembler import serve; serve(int(sys.argv[2]), json.loads(sys.argv[3]))")


def start(scratch: Path, memory_bytes: int) -> tuple[subprocess.Popen[bytes], int]:
    """Start the helper (call before the sandbox is applied); return it and the worker's socket fd.

    The fd is inheritable only by the helper; the caller passes its number to the backend
    through ``ANVIL_PTXAS_FD``.
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    helper_scratch = scratch / "ptxas"
    helper_scratch.mkdir(mode=0o700, exist_ok=True)
    env = dict(os.environ, TMPDIR=str(helper_scratch), ANVIL_NVJITLINK="0")
    env.pop("ANVIL_PTXAS_FD", None)
    config = {"scratch": str(helper_scratch), "memory_bytes": memory_bytes}
    process = subprocess.Popen(
        [sys.executable, "-I", "-c", _BOOT, json.dumps(sys.path), str(theirs.fileno()), json.dumps(config)],
        pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL, stdout=2, close_fds=True,
    )
    theirs.close()
    return process, ours.detach()


def serve(fd: int, config: dict[str, Any]) -> None:
    """The helper's loop: answer requests until the worker closes its end."""
    apply(SandboxConfig(gpu=False, memory_bytes=int(config["memory_bytes"]), writable=(config["scratch"],),
                        seccomp=False, allow_exec=True))
    conn = multiprocessing.connection.Connection(fd)
    while True:
        try:
            request = json.loads(conn.recv_bytes(_MAX_PTX + 4096))
        except (EOFError, OSError, ValueError):
            return
        try:
            reply = _answer(request)
        except Exception as exc:  # noqa: BLE001 - a refused request, never a dead helper
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        conn.send_bytes(json.dumps(reply).encode())


def _ptxas() -> str:
    # A worker imports this module before its sandbox; the helper imports the compiler once confined (serve).
    # deferred: security: never the compiler before the sandbox, in the helper or in a worker
    from compiler.backends.nvidia.toolchain import find_ptxas

    path = find_ptxas()
    if path is None:
        raise FileNotFoundError("ptxas not found: install the CUDA toolkit (or `pip install nvidia-cuda-nvcc`) "
                                "or set ANVIL_PTXAS to its path")
    return path


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "version":
        proc = subprocess.run([_ptxas(), "--version"], capture_output=True, text=True, timeout=30)
        return {"ok": True, "text": proc.stdout}
    if op != "assemble":
        return {"ok": False, "error": f"unknown request {op!r}"}
    ptx, arch, opt = request.get("ptx"), request.get("arch"), request.get("opt")
    if not isinstance(ptx, str) or not isinstance(arch, str) or not _ARCH.fullmatch(arch):
        return {"ok": False, "error": "assemble needs PTX text and an architecture like sm_90a"}
    if not isinstance(opt, int) or not 0 <= opt <= 3:
        return {"ok": False, "error": "the optimisation level must be 0-3"}
    with tempfile.TemporaryDirectory(prefix="anvil-ptx-") as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        Path(src).write_text(ptx)
        proc = subprocess.run([_ptxas(), f"-arch={arch}", "-v", f"-O{opt}", src, "-o", out],
                              capture_output=True, text=True, timeout=120)
        cubin = Path(out).read_bytes() if proc.returncode == 0 else b""
    return {"ok": True, "returncode": proc.returncode, "log": proc.stdout + proc.stderr,
            "stderr": proc.stderr, "cubin_b64": base64.b64encode(cubin).decode()}
