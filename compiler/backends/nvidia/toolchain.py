"""Finding the CUDA tools (ptxas, libdevice), assembling PTX with the ptxas binary, and reading
ptxas's resource report.

`jitlink.assemble` picks between two ways, the same assembler: in-process through libnvJitLink (no
process start, ~10 ms less per kernel), or the ptxas binary. libnvJitLink is large (100+ MB), so it
is loaded and warmed up on a background thread (`warm_up()`, started when the NVIDIA backend is
imported; the dlopen and the link run outside the GIL); until it is ready, or when it is missing or
fails, ptxas runs.
It is used only when it is the same release as the ptxas binary found (so the cubin does not
depend on which path ran): the first library of that release among those found is used (torch's
wheel and the CUDA toolkit often ship different releases); ANVIL_NVJITLINK=0 turns it off, =any
drops the release check, =<path> names the library. `jitlink.status()` (printed by
benchmarks/compile_phases.py) says which assembler is in use and why.

In a sandboxed server worker, which may not start processes, ANVIL_PTXAS_FD names a socket to a
ptxas process started before the sandbox (server/assembler.py): the version query and the
assembly go through it instead.

Search order for ptxas: $ANVIL_PTXAS, $CUDA_HOME/bin, `ptxas` on PATH, /usr/local/cuda*/bin,
the ptxas bundled with the `triton` package, the `nvidia-cuda-nvcc` wheel.
For libnvJitLink: the `nvidia` wheels torch depends on (nvidia/cu13/lib, nvidia/nvjitlink/lib),
$CUDA_HOME/lib64, /usr/local/cuda*/lib64.
"""

from __future__ import annotations

import base64
import glob
import json
import multiprocessing.connection
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ... import knobs
from ...errors import AnvilError

__all__ = ["find_ptxas", "ptxas_release", "assemble_with_ptxas", "parse_report", "PtxasReport", "PtxasError"]


class PtxasError(AnvilError):
    """ptxas rejected the PTX (a compiler bug, or a resource limit)."""


@dataclass(frozen=True)
class PtxasReport:
    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    stack_bytes: int
    # the assembler's performance remarks, e.g. "(C7515) Potential Performance Loss: wgmma.mma_async
    # instructions are serialized ..." or "(C7519) warpgroup.arrive is injected ..."
    notes: tuple[str, ...] = ()


def _ptxas_candidates() -> Iterator[str]:
    """Candidates in search order, produced lazily: importing triton (~90 ms) only when needed."""
    if knobs.ptxas():
        yield knobs.ptxas()
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            yield os.path.join(os.environ[var], "bin", "ptxas")
    yield shutil.which("ptxas") or ""
    yield from sorted(glob.glob("/usr/local/cuda*/bin/ptxas"), reverse=True)
    try:
        # deferred: optional dependency, only to find the ptxas it bundles
        import triton

        yield str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas")
    except Exception:  # noqa: BLE001 - triton is optional
        pass
    try:
        # deferred: optional dependency (nvidia-cuda-nvcc wheel)
        import nvidia.cuda_nvcc as nvcc  # type: ignore[import-not-found]

        yield str(Path(list(nvcc.__path__)[0]) / "bin" / "ptxas")
    except Exception:  # noqa: BLE001 - the wheel is optional
        pass


@cache
def find_ptxas() -> str | None:
    for c in _ptxas_candidates():
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def _libdevice_candidates() -> Iterator[str]:
    """libdevice (NVIDIA's math library as LLVM bitcode) in search order, like ptxas's."""
    if knobs.libdevice():
        yield knobs.libdevice()
    rel = os.path.join("nvvm", "libdevice", "libdevice.10.bc")
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            yield os.path.join(os.environ[var], rel)
    ptxas = shutil.which("ptxas")
    if ptxas:
        yield str(Path(ptxas).resolve().parent.parent / rel)
    yield from sorted(glob.glob(f"/usr/local/cuda*/{rel}"), reverse=True)
    try:
        # deferred: optional dependency, only to find the ptxas it bundles
        import triton

        yield str(Path(triton.__file__).parent / "backends" / "nvidia" / "lib" / "libdevice.10.bc")
    except Exception:  # noqa: BLE001 - triton is optional
        pass
    try:
        # deferred: optional dependency (nvidia-cuda-nvcc wheel)
        import nvidia.cuda_nvcc as nvcc  # type: ignore[import-not-found]

        yield str(Path(list(nvcc.__path__)[0]) / rel)
    except Exception:  # noqa: BLE001 - the wheel is optional
        pass


@cache
def find_libdevice() -> str | None:
    for c in _libdevice_candidates():
        if c and os.path.isfile(c):
            return c
    return None


@cache
def libdevice_bitcode() -> bytes:
    path = find_libdevice()
    if path is None:
        raise AnvilError("the kernel calls a math function from libdevice (NVIDIA's math library), and "
                         "libdevice.10.bc was not found; install the CUDA toolkit (or the triton package), "
                         "or set ANVIL_LIBDEVICE to its path")
    return Path(path).read_bytes()


@cache
def ptxas_release() -> tuple[int, int] | None:
    """The release of the ptxas binary found ((13, 0) for CUDA 13.0); None when there is none,
    (0, 0) when it does not say."""
    if knobs.ptxas_fd() is not None:
        try:
            text = str(_ask_ptxas_process({"op": "version"}).get("text", ""))
        except (OSError, PtxasError):
            return None
        m = re.search(r"release (\d+)\.(\d+)", text)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    ptxas = find_ptxas()
    if ptxas is None:
        return None
    try:
        text = subprocess.run([ptxas, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return (0, 0)
    m = re.search(r"release (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


_RE = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "shared_bytes": re.compile(r"(\d+) bytes smem"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
}


def parse_report(log: str) -> PtxasReport:
    vals = {k: int(m.group(1)) if (m := r.search(log)) else 0 for k, r in _RE.items()}
    notes = tuple(m.group(1).strip() for m in re.finditer(r"^ptxas info\s*:\s*(\(C7\d+\).*)$", log, re.M))
    return PtxasReport(**vals, notes=notes)


def assemble_with_ptxas(ptx: str, arch: str, opt_level: int = 3) -> tuple[bytes, PtxasReport]:
    """The same through the ptxas binary (a process per kernel)."""
    if knobs.ptxas_fd() is not None:
        reply = _ask_ptxas_process({"op": "assemble", "ptx": ptx, "arch": arch, "opt": opt_level})
        if reply["returncode"] != 0:
            raise PtxasError(f"ptxas failed for {arch}:\n{str(reply['stderr']).strip()}")
        return base64.b64decode(reply["cubin_b64"]), parse_report(str(reply["log"]))
    ptxas = find_ptxas()
    if ptxas is None:
        raise PtxasError("ptxas not found: install the CUDA toolkit (or `pip install nvidia-cuda-nvcc`) "
                         "or set ANVIL_PTXAS to its path")
    with tempfile.TemporaryDirectory(prefix="anvil-ptx-") as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        Path(src).write_text(ptx)
        try:
            proc = subprocess.run([ptxas, f"-arch={arch}", "-v", f"-O{opt_level}", src, "-o", out],
                                  capture_output=True, text=True, timeout=PTXAS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            lines = ptx.count("\n")
            raise PtxasError(f"ptxas did not finish within {PTXAS_TIMEOUT_S} s for {arch} ({lines} lines of PTX): "
                             "its time grows faster than the code, and a kernel holding hundreds of elements per "
                             "thread is slow to assemble; use smaller blocks or more warps") from None
        if proc.returncode != 0:
            raise PtxasError(f"ptxas failed for {arch}:\n{proc.stderr.strip()}")
        return Path(out).read_bytes(), parse_report(proc.stdout + proc.stderr)


PTXAS_TIMEOUT_S = 300
_service_lock = threading.Lock()
_service: list[multiprocessing.connection.Connection] = []  # the one connection, made on first use


def _ask_ptxas_process(request: dict[str, object]) -> dict[str, Any]:
    """One request to the worker's ptxas process (server/assembler.py describes the protocol)."""
    fd = knobs.ptxas_fd()
    assert fd is not None
    with _service_lock:
        if not _service:
            _service.append(multiprocessing.connection.Connection(fd))
        try:
            _service[0].send_bytes(json.dumps(request).encode())
            reply: dict[str, Any] = json.loads(_service[0].recv_bytes())
        except EOFError:
            raise PtxasError("the worker's ptxas process has exited; the next compile starts a fresh worker") from None
    if not reply.get("ok"):
        raise PtxasError(f"ptxas: {reply.get('error')}")
    return reply
