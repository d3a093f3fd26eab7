"""Every environment variable Anvil reads, with its default, in one place.

- ANVIL_CACHE_DIR: on-disk compile cache (default ~/.cache/anvil). ANVIL_CACHE=0 disables it.
- ANVIL_DEBUG=1: compile kernels in debug mode (bounds checks, device_assert).
- ANVIL_CPU_THREADS: threads the CPU backend splits a grid across (default: CPU count).
- ANVIL_CPU_CONCURRENT_PROGRAMS: the most programs of one launch the CPU backend runs at the same
  time when the kernel's programs may wait for each other (spin loops on atomics; default 256).
- ANVIL_CPU_WAIT_TIMEOUT: seconds every running program of such a launch may wait, with no other
  program left to start, before the launch is stopped with a DeadlockError (default 10).
- ANVIL_DUMP_IR=1: print the Tile IR of every kernel compiled, as lowered (after the backend's own
  Tile IR passes), to stderr.
- ANVIL_DUMP_LLIR=1: print the LLVM IR of every kernel compiled, to stderr.
- ANVIL_TRACEBACK=1: show internal tracebacks instead of only located errors.
- ANVIL_VERIFY_IR=1: verify the Tile IR after the frontend and after every Tile IR stage of a
  compile (compiler/runtime/stages.py), naming the stage that broke an invariant (default: off,
  as a verification costs about half a printing of the IR; the tests and CI turn it on).
- ANVIL_CPU_TARGET: the CPU the CPU backend generates code for, "name[,+feature,...]"
  (default: the host's, as LLVM detects it), e.g. "x86-64-v3".
- ANVIL_NATIVE_LAUNCH=0: launch GPU kernels through ctypes instead of a generated native entry.
- ANVIL_WGMMA=0: on Hopper (sm_90a), lower tl.dot to mma.sync instead of wgmma (default: wgmma).
- ANVIL_TCGEN05=0: on datacenter Blackwell (sm_100a, sm_103a), lower tl.dot to mma.sync instead of
  tcgen05.mma (default: tcgen05 for the dots its planner takes, compiler/backends/nvidia/tcgen05.py,
  a K loop's accumulator kept in tensor memory); =readback: tcgen05, the accumulator read back into
  registers after every dot.
- ANVIL_PIPELINE=0: do not pipeline the loads feeding wgmma dots through cp.async into shared
  memory (default: pipelined `num_stages` deep, a dot's wgmma group left in flight into the next
  iteration where its accumulator allows); =sync: pipelined, each group waited for in its iteration.
- ANVIL_LLVM_OPT: LLVM's optimisation level (0-3) for NVIDIA kernels (default: 1 for kernels with
  tensor-core dots, 3 for the rest; compiler/backends/nvidia/backend.py says why).
- ANVIL_PTXAS: the ptxas binary the NVIDIA backend uses (default: searched, see toolchain.py).
- ANVIL_LIBDEVICE: libdevice.10.bc, NVIDIA's math library in LLVM bitcode (default: searched like
  ptxas: the CUDA toolkit's nvvm/libdevice, then the triton package's copy).
- ANVIL_NVJITLINK: the in-process assembler (libnvJitLink): unset uses one of the same release as
  ptxas when found, 0 never, `any` any release, or a path to the library.
- TRITON_F32_DEFAULT: the input precision of a float32 `tl.dot` that names none, as in Triton:
  "tf32" (default: inputs rounded to tf32 on NVIDIA tensor cores), "tf32x3" or "ieee" (full
  float32 products). Part of the compile cache key.
- ANVIL_LD_LLD: the ld.lld the AMD backend links code objects with (default: searched, see
  compiler/backends/amd/toolchain.py: ROCm's, PATH, then the ziglang package's).
- ANVIL_FUSION_DUMP: a directory: the `anvil` torch.compile backend writes the source of every
  kernel it generates there (`<name>.py`) and of every graph's function (`graphs/<name>.py`), and
  logs each graph's fusion groups to stderr.
- ANVIL_PTXAS_FD: set by sandboxed server workers (which may not start processes): the socket of
  their ptxas process (server/assembler.py), through which ptxas runs instead. Not for users.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "cache_enabled", "debug", "cpu_threads", "cpu_concurrent_programs", "cpu_wait_timeout",
           "dump_ir", "dump_llir", "traceback", "verify_ir", "cpu_target",
           "wgmma", "tcgen05", "llvm_opt", "tcgen05_resident", "f32_default", "ptxas", "ptxas_fd", "nvjitlink",
           "libdevice", "ld_lld", "fusion_dump"]


def _flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")


def cache_dir() -> Path:
    d = os.environ.get("ANVIL_CACHE_DIR")
    return Path(d) if d else Path.home() / ".cache" / "anvil"


def cache_enabled() -> bool:
    return os.environ.get("ANVIL_CACHE", "1").lower() not in ("0", "false", "no", "off")


def debug() -> bool:
    return _flag("ANVIL_DEBUG")


def cpu_threads() -> int:
    v = os.environ.get("ANVIL_CPU_THREADS")
    if v:
        return max(1, int(v))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def cpu_concurrent_programs() -> int:
    v = os.environ.get("ANVIL_CPU_CONCURRENT_PROGRAMS")
    return max(1, int(v)) if v else 256


def cpu_wait_timeout() -> float:
    v = os.environ.get("ANVIL_CPU_WAIT_TIMEOUT")
    return max(0.0, float(v)) if v else 10.0


def dump_ir() -> bool:
    return _flag("ANVIL_DUMP_IR")


def dump_llir() -> bool:
    return _flag("ANVIL_DUMP_LLIR")


def verify_ir() -> bool:
    return _flag("ANVIL_VERIFY_IR")


def cpu_target() -> str:
    return os.environ.get("ANVIL_CPU_TARGET", "")


def traceback() -> bool:
    return _flag("ANVIL_TRACEBACK")


def wgmma() -> bool:
    return os.environ.get("ANVIL_WGMMA", "1").lower() not in ("0", "false", "no", "off")


def tcgen05() -> bool:
    return os.environ.get("ANVIL_TCGEN05", "1").lower() not in ("0", "false", "no", "off")


def tcgen05_resident() -> bool:
    """A K loop's tcgen05 accumulator stays in tensor memory (ANVIL_TCGEN05 not 0 nor readback)."""
    return tcgen05() and os.environ.get("ANVIL_TCGEN05", "1").lower() != "readback"


F32_PRECISIONS = ("tf32", "tf32x3", "ieee")


def f32_default() -> str:
    """The input precision of a float32 tl.dot that names none (TRITON_F32_DEFAULT, as in Triton).
    An unknown value is returned as given: the compile that reads it reports it, located."""
    return os.environ.get("TRITON_F32_DEFAULT", "") or "tf32"


def codegen_key() -> str:
    """The knobs that change generated GPU code (part of the compile cache key)."""
    # tcgen05 is named only when not the default: the default key (and so every kernel's symbol) stays
    # what it was before the knob existed
    off = "" if tcgen05_resident() else f",tcgen05={int(tcgen05())}"
    opt = "" if llvm_opt() is None else f",llvm_opt={llvm_opt()}"
    return f"wgmma={int(wgmma())},pipeline={int(pipeline())}{int(pipeline_in_flight())}{off}{opt}"


def llvm_opt() -> int | None:
    """LLVM's speed level for NVIDIA kernels when ANVIL_LLVM_OPT names one (0-3), else None (the
    backend's choice). Any other value is None too."""
    v = os.environ.get("ANVIL_LLVM_OPT", "").strip()
    return int(v) if v in ("0", "1", "2", "3") else None


def pipeline() -> bool:
    return os.environ.get("ANVIL_PIPELINE", "1").lower() not in ("0", "false", "no", "off")


def pipeline_in_flight() -> bool:
    return os.environ.get("ANVIL_PIPELINE", "1").lower() != "sync"



def native_launch() -> bool:
    return os.environ.get("ANVIL_NATIVE_LAUNCH", "1").lower() not in ("0", "false", "no", "off")


def ptxas() -> str:
    return os.environ.get("ANVIL_PTXAS", "")


def ptxas_fd() -> int | None:
    v = os.environ.get("ANVIL_PTXAS_FD", "")
    return int(v) if v.isdigit() else None


def nvjitlink() -> str:
    """ANVIL_NVJITLINK as given ("" when unset)."""
    return os.environ.get("ANVIL_NVJITLINK", "")


def libdevice() -> str:
    return os.environ.get("ANVIL_LIBDEVICE", "")


def ld_lld() -> str:
    return os.environ.get("ANVIL_LD_LLD", "")


def fusion_dump() -> Path | None:
    d = os.environ.get("ANVIL_FUSION_DUMP")
    return Path(d) if d else None
