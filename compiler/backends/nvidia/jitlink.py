"""PTX -> cubin in-process through libnvJitLink (ctypes), warmed up on a background thread.

The library exports its entry points with the API version in the name (`__nvJitLinkCreate_13_0`);
the `_<major>_0` names exist in every release of a major version, so those are used. Every call
here goes through ctypes, which releases the GIL: the warm-up (dlopen of a 100+ MB library and one
small link, ~100 ms) overlaps the first kernel's frontend and LLVM work on another core.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import Any

from ... import knobs
from .toolchain import PtxasReport, assemble_with_ptxas, parse_report, ptxas_release

__all__ = ["assemble", "warm_up", "ready_linker", "status", "JitLinker"]

_PTX_INPUT = 2  # NVJITLINK_INPUT_PTX
_TINY_PTX = (".version 8.0\n.target sm_80\n.address_size 64\n"
             ".visible .entry anvil_warm_up()\n{\n\tret;\n}\n")


def _library_candidates() -> list[str]:
    env = knobs.nvjitlink()
    if env and env.lower() not in ("1", "on", "yes", "true", "any"):
        return [env]
    cands: list[str] = []
    try:
        # deferred: optional dependency (NVIDIA wheels), only to find libnvJitLink
        import nvidia  # the namespace package of NVIDIA's wheels (torch's CUDA dependencies)

        for root in list(nvidia.__path__):
            cands += sorted(glob.glob(os.path.join(root, "cu1*", "lib", "libnvJitLink.so*")), reverse=True)
            cands += sorted(glob.glob(os.path.join(root, "nvjitlink", "lib", "libnvJitLink.so*")), reverse=True)
    except ImportError:
        pass
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            cands += sorted(glob.glob(os.path.join(os.environ[var], "lib64", "libnvJitLink.so*")), reverse=True)
    cands += sorted(glob.glob("/usr/local/cuda*/lib64/libnvJitLink.so*"), reverse=True)
    return cands


class JitLinker:
    """One loaded libnvJitLink."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        major, minor = ctypes.c_uint(), ctypes.c_uint()
        if lib.nvJitLinkVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
            raise OSError(f"nvJitLinkVersion failed in {path}")
        self.version = (major.value, minor.value)
        v = f"_{major.value}_0"

        def sym(name: str) -> Any:
            f = getattr(lib, f"__nvJitLink{name}{v}")
            f.restype = ctypes.c_int
            return f

        self._create, self._add, self._complete = sym("Create"), sym("AddData"), sym("Complete")
        self._size, self._cubin, self._destroy = sym("GetLinkedCubinSize"), sym("GetLinkedCubin"), sym("Destroy")
        self._info_size, self._info = sym("GetInfoLogSize"), sym("GetInfoLog")
        self._err_size, self._err = sym("GetErrorLogSize"), sym("GetErrorLog")
        self._lib = lib
        self.path = path

    def _log(self, h: ctypes.c_void_p, size_fn: Any, get_fn: Any) -> str:
        n = ctypes.c_size_t()
        if size_fn(h, ctypes.byref(n)) != 0 or n.value == 0:
            return ""
        buf = ctypes.create_string_buffer(n.value)
        get_fn(h, buf)
        return buf.value.decode(errors="replace")

    def assemble(self, ptx: str, arch: str, opt_level: int = 3) -> tuple[bytes, str] | None:
        """(cubin, ptxas's verbose log), or None when the link fails (the caller then runs ptxas,
        whose error message is the one users know)."""
        opts = [f"-arch={arch}".encode(), f"-O{opt_level}".encode(), b"-verbose"]
        argv = (ctypes.c_char_p * len(opts))(*opts)
        h = ctypes.c_void_p()
        if self._create(ctypes.byref(h), len(opts), argv) != 0:
            return None
        try:
            data = ptx.encode()
            if self._add(h, _PTX_INPUT, data, ctypes.c_size_t(len(data)), b"kernel.ptx") != 0:
                return None
            if self._complete(h) != 0:
                return None
            n = ctypes.c_size_t()
            if self._size(h, ctypes.byref(n)) != 0:
                return None
            buf = ctypes.create_string_buffer(n.value)
            if self._cubin(h, buf) != 0:
                return None
            return buf.raw[:n.value], self._log(h, self._info_size, self._info)
        finally:
            self._destroy(ctypes.byref(h))


def _wanted_release() -> tuple[int, int] | None:
    """The assembler release the library must have: the ptxas binary's (another release allocates
    registers differently, so the cubin would depend on which path ran); None when any will do
    (ANVIL_NVJITLINK=any, or no ptxas binary at all: the library is then the assembler)."""
    if knobs.nvjitlink().lower() == "any":
        return None
    return ptxas_release()


_ready = threading.Event()
_linker: JitLinker | None = None
_started = False
_lock = threading.Lock()
_passed_over: list[str] = []  # libraries found but not used, and why (status())


def _load() -> None:
    """Use the first library of the wanted release that assembles a tiny kernel; the next candidate
    when one is another release (the nvidia wheel and the CUDA toolkit often differ)."""
    global _linker
    try:
        want = _wanted_release()
        for path in _library_candidates():
            try:
                lk = JitLinker(path)
            except (OSError, AttributeError):
                continue
            if want is not None and lk.version != want:
                _passed_over.append(f"{path} is release {lk.version[0]}.{lk.version[1]}, "
                                    f"ptxas is {want[0]}.{want[1]}")
                continue
            out = lk.assemble(_TINY_PTX, "sm_80")  # pages the assembler in and checks it works
            if out is not None and out[0][:4] == b"\x7fELF":
                _linker = lk
                return
            _passed_over.append(f"{path} failed to assemble a test kernel")
    except Exception as e:  # noqa: BLE001 - a background probe: any failure means "use ptxas"
        _passed_over.append(f"probing libnvJitLink failed: {type(e).__name__}: {e}")
    finally:
        _ready.set()


def warm_up() -> None:
    """Start loading libnvJitLink in the background (once per process)."""
    global _started
    if (knobs.nvjitlink() or "1").lower() in ("0", "off", "no", "false"):
        return
    with _lock:
        if _started:
            return
        _started = True
    threading.Thread(target=_load, name="anvil-nvjitlink", daemon=True).start()


def ready_linker() -> JitLinker | None:
    """The in-process assembler if it has finished loading; None means: use ptxas now (never waits)."""
    return _linker if _ready.is_set() else None


def assemble(ptx: str, arch: str, opt_level: int = 3) -> tuple[bytes, PtxasReport]:
    """PTX -> cubin for `arch` (e.g. 'sm_90a'), with ptxas's resource report: in-process through the
    library once it has loaded, else through the ptxas binary."""
    linker = ready_linker()
    if linker is not None:
        out = linker.assemble(ptx, arch, opt_level)
        if out is not None:
            return out[0], parse_report(out[1])
    return assemble_with_ptxas(ptx, arch, opt_level)


def status(wait_s: float = 0.0) -> str:
    """Which assembler compiles use, in words (after waiting up to `wait_s` for the warm-up)."""
    if (knobs.nvjitlink() or "1").lower() in ("0", "off", "no", "false"):
        return "ptxas (ANVIL_NVJITLINK=0)"
    if not _started:
        return "ptxas (libnvJitLink not loaded yet: the NVIDIA backend starts it on import)"
    if not _ready.wait(wait_s):
        return "ptxas until libnvJitLink has loaded (still loading)"
    lk = _linker
    why = "; ".join(_passed_over)
    if lk is not None:
        return f"libnvJitLink {lk.version[0]}.{lk.version[1]} in-process ({lk.path})" + (f"; {why}" if why else "")
    return "ptxas: " + (why or "no libnvJitLink found")
