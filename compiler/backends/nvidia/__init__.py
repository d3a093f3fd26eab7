"""The NVIDIA backend: Tile IR -> per-thread LLVM IR (linear layouts) -> PTX -> cubin.

Codegen runs LLVM's O3 pipeline for the NVPTX target machine, then ptxas for the device's
architecture. The driver module (driver.py) loads and launches the cubin.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cache

import llvmlite.binding as llvm
from llvmlite import ir

from ...ir import types as T
from ...ir.core import Function
from ...passes.prefetch import prefetch_dot_operands
from .jitlink import warm_up as _warm_up_assembler
from .lower import NvLowering
from .toolchain import PtxasReport, assemble

__all__ = ["CudaBinary", "compile_function", "ptx_version_for", "emit_ptx"]

# libnvJitLink loads on another thread while the first kernel is lowered (see toolchain.py)
_warm_up_assembler()


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
    """The PTX ISA the target needs: fp8 mma.sync wants 8.4 (sm_89/sm_90), sm_100 8.6, sm_120 8.7."""
    num = int("".join(c for c in arch.removeprefix("sm_") if c.isdigit()) or 0)
    if num >= 120:
        return "+ptx87"
    if num >= 100:
        return "+ptx86"
    return "+ptx84" if num >= 89 else "+ptx78"


@cache
def _target_machine(arch: str) -> llvm.TargetMachine:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    t = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    return t.create_target_machine(cpu=arch, features=ptx_version_for(arch), opt=3)


def emit_ptx(llir: str, arch: str) -> tuple[str, str]:
    """Optimise LLVM IR for `arch` and emit PTX; returns (optimised IR, PTX)."""
    tm = _target_machine(arch)
    mod = llvm.parse_assembly(llir)
    mod.triple = "nvptx64-nvidia-cuda"
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    opt = str(mod)
    return opt, tm.emit_assembly(mod)


def compile_function(fn: Function, symbol: str, num_warps: int, arch: str, assemble_cubin: bool = True) -> CudaBinary:
    t0 = time.perf_counter()
    m = ir.Module(name=symbol)
    m.triple = "nvptx64-nvidia-cuda"
    prefetch_dot_operands(fn, num_warps)
    lw = NvLowering(fn, m, symbol, num_warps, arch)
    lw.build()
    text = _with_launch_bound(str(m), symbol, 32 * num_warps)
    t1 = time.perf_counter()
    opt, ptx = emit_ptx(text, arch)
    t2 = time.perf_counter()
    cubin, report = (None, None)
    if assemble_cubin:
        cubin, report = assemble(ptx, arch)
    t3 = time.perf_counter()
    return CudaBinary(fn.name, symbol, arch, opt, ptx, cubin, num_warps, lw.smem_bytes, [a.type for a in fn.args],
                      report, {"llvm_ir_ms": (t1 - t0) * 1e3, "llvm_opt_ptx_ms": (t2 - t1) * 1e3,
                               "ptxas_ms": (t3 - t2) * 1e3}, list(fn.arg_names))


def _with_launch_bound(text: str, symbol: str, threads: int) -> str:
    """Attach `.maxntid` (threads per program) to the kernel: ptxas then budgets registers."""
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if line.startswith(f'define ptx_kernel void @"{symbol}"('):
            lines[k] = line + " #0"
            break
    return "\n".join(lines) + f'\nattributes #0 = {{ nounwind "nvvm.maxntid"="{threads}" }}\n'
