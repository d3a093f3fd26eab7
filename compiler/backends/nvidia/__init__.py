"""The NVIDIA backend: Tile IR -> per-thread LLVM IR (linear layouts) -> PTX -> cubin.

Codegen runs LLVM's O3 pipeline for the NVPTX target machine, then ptxas for the device's
architecture. backend.py lists the stages (the contract of compiler/backends/contract.py) and
launches; the driver module (driver.py) loads the cubin.
"""

from __future__ import annotations

import functools
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm

from ...ir import types as T
from ..llvm.lock import llvm_lock
from ..nvidia_targets import nv_target
from .driver import device_arch
from .jitlink import warm_up as _warm_up_assembler
from .toolchain import PtxasReport, libdevice_bitcode

__all__ = ["CudaBinary", "ptx_version_for", "emit_ptx", "optimise", "with_launch_bound", "warm_up"]

_llvm_initialised = False
_target_machines: dict[str, llvm.TargetMachine] = {}


@dataclass
class CudaBinary:
    name: str
    symbol: str
    arch: str
    llir: str
    ptx: str
    cubin: bytes | None
    num_warps: int
    shared_bytes: int
    arg_types: list[T.Type]
    report: PtxasReport | None
    timings: dict[str, float] = field(default_factory=dict)
    arg_names: list[str] = field(default_factory=list)


def ptx_version_for(arch: str) -> str:
    """The LLVM feature of the PTX ISA version `arch` needs (targets.py's table: sm_90a 8.4,
    sm_100a 8.6, sm_120a 8.7, sm_103a 8.8); ArgumentError for an architecture it does not hold."""
    return nv_target(arch).ptx_feature


def _new_target_machine(arch: str) -> llvm.TargetMachine:
    global _llvm_initialised
    with llvm_lock:  # target registration is not thread-safe, and the warm-up thread does it too
        if not _llvm_initialised:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _llvm_initialised = True
    t = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    return t.create_target_machine(cpu=arch, features=ptx_version_for(arch), opt=3)


_per_thread = threading.local()


def _target_machine(arch: str) -> llvm.TargetMachine:
    """The target machine compiles use: one per architecture, kept for the process, for the first
    thread that compiles; other threads (parallel autotuning) get their own, so no LLVM object is
    shared between two compiles running at the same time."""
    if threading.current_thread() is threading.main_thread():
        tm = _target_machines.get(arch)
        if tm is None:
            tm = _target_machines.setdefault(arch, _new_target_machine(arch))
        return tm
    mine: dict[str, llvm.TargetMachine] = getattr(_per_thread, "machines", None) or {}
    _per_thread.machines = mine
    if arch not in mine:
        mine[arch] = _new_target_machine(arch)
    return mine[arch]


_TINY_LL = """define ptx_kernel void @anvil_warm_up(ptr addrspace(1) %p, float %x) {
  %y = fmul contract float %x, %x
  store float %y, ptr addrspace(1) %p
  ret void
}
"""


def _likely_arch() -> str:
    """The current device's architecture when torch has initialised CUDA already, else sm_90a."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return device_arch()
    except Exception:  # noqa: BLE001 - only a guess for the warm-up
        pass
    return "sm_90a"


def _warm_up_llvm() -> None:
    """Initialise LLVM's NVPTX target and take a tiny kernel through the whole pipeline: the first
    parse / O3 / PTX emission in a process costs ~5-10 ms of one-time work (lazily registered
    passes, code paged in). It runs in its own LLVM context with its own target machine, so it
    shares nothing with a compile running at the same time; llvmlite calls release the GIL."""
    try:
        arch = _likely_arch()
        tm = _new_target_machine(arch)
        _target_machines.setdefault(arch, _new_target_machine(arch))
        _optimise_and_emit(tm, _TINY_LL, llvm.create_context())
    except Exception:  # noqa: BLE001 - a warm-up: the first compile does the work if this fails
        pass


def warm_up() -> None:
    """Start the one-time work of the first CUDA compile on background threads (once per process):
    LLVM's NVPTX initialisation, and loading libnvJitLink (see jitlink.py). Called when this
    backend is imported, i.e. at the first launch with CUDA tensors or the first CUDA compile."""
    global _warm_started
    with llvm_lock:
        if _warm_started:
            return
        _warm_started = True
    _warm_up_assembler()
    threading.Thread(target=_warm_up_llvm, name="anvil-llvm-warm-up", daemon=True).start()


_warm_started = False
warm_up()


def emit_ptx(llir: str, arch: str) -> tuple[str, str]:
    """Optimise LLVM IR for `arch` and emit PTX; returns (optimised IR, PTX)."""
    # a fresh LLVM context per compile: compiles may run on several threads at once
    return _optimise_and_emit(_target_machine(arch), llir, llvm.create_context())


def optimise(llir: str, arch: str, speed_level: int = 3) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """Parse LLVM IR, link the libdevice functions it calls, verify it and run LLVM's pipeline at
    `speed_level` (O3 unless told) for `arch`; the module and the target machine that emits its PTX
    (`tm.emit_assembly(mod)`)."""
    tm = _target_machine(arch)
    return _optimise(tm, llir, llvm.create_context(), speed_level), tm


def _optimise_and_emit(tm: llvm.TargetMachine, llir: str, context: Any) -> tuple[str, str]:
    mod = _optimise(tm, llir, context)
    return str(mod), tm.emit_assembly(mod)


def _optimise(tm: llvm.TargetMachine, llir: str, context: Any, speed_level: int = 3) -> llvm.ModuleRef:
    mod = llvm.parse_assembly(llir, context=context)
    mod.triple = "nvptx64-nvidia-cuda"
    mod.data_layout = str(tm.target_data)
    if "__nv_" in llir:
        _link_libdevice(mod, context)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def _drop_unused(mod: llvm.ModuleRef, tm: llvm.TargetMachine | None = None) -> None:
    """Global dead-code elimination: internal functions nothing calls are deleted (before O3, which
    would otherwise optimise every one of libdevice's functions)."""
    pb = llvm.create_pass_builder(tm or _target_machine(_likely_arch()), llvm.create_pipeline_tuning_options(0))
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.run(mod, pb)


def _link_libdevice(mod: llvm.ModuleRef, context: Any) -> None:
    """Link the part of NVIDIA's libdevice that `mod` calls, internal, so O3 inlines it (its
    __nvvm_reflect queries fold in the NVPTX pipeline: no flush-to-zero, as CUDA's default)."""
    wanted = frozenset(f.name for f in mod.functions if f.is_declaration and f.name.startswith("__nv_"))
    lib = llvm.parse_bitcode(_libdevice_part(wanted), context=context)
    lib.triple = mod.triple
    lib.data_layout = mod.data_layout
    mod.link_in(lib)
    for f in mod.functions:
        if f.name.startswith("__nv_") and not f.is_declaration:
            f.linkage = "internal"


_libdevice_lock = threading.Lock()


@functools.lru_cache(maxsize=256)
def _libdevice_part(names: frozenset[str]) -> bytes:
    """libdevice's functions `names` and what they call, as bitcode: parsing the whole library
    (about 40 ms), linking it (20 ms) and dropping the rest is done once per set of functions a
    process's kernels call."""
    with _libdevice_lock:
        lib = llvm.parse_bitcode(libdevice_bitcode(), context=llvm.create_context())
        for f in lib.functions:
            if not f.is_declaration and f.name not in names:
                f.linkage = "internal"
        _drop_unused(lib)
        return bytes(lib.as_bitcode())


def with_launch_bound(text: str, symbol: str, threads: int, maxnreg: int | None = None,
                       cluster_dims: tuple[int, int, int] | None = None) -> str:
    """Attach `.maxntid` (threads per program) to the kernel, and `.maxnreg` when given: ptxas then
    budgets registers; `.reqnctapercluster` for cluster_dims."""
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if line.startswith(f'define ptx_kernel void @"{symbol}"('):
            lines[k] = line + " #0"
            break
    regs = f' "nvvm.maxnreg"="{maxnreg}"' if maxnreg else ""
    if cluster_dims is not None:
        regs += ' "nvvm.cluster_dim"="{},{},{}"'.format(*cluster_dims)
    return "\n".join(lines) + f'\nattributes #0 = {{ nounwind "nvvm.maxntid"="{threads}"{regs} }}\n'
