"""LLVM's AMDGPU target: the module's finishing touches, O3, assembly and the object file.

The target machine is made per architecture (gfx942, gfx950) and kept per thread: compiles may
run on several threads at once, and no LLVM object is shared between two of them.
"""

from __future__ import annotations

import re
import threading

import llvmlite.binding as llvm

from ...errors import UnsupportedError
from .tiles import LDS_SYMBOL

__all__ = ["TRIPLE", "target_machine", "finish_module", "optimise", "foreign_calls"]

TRIPLE = "amdgcn-amd-amdhsa"
_init_lock = threading.Lock()
_initialised = False
_per_thread = threading.local()


def target_machine(arch: str) -> llvm.TargetMachine:
    global _initialised
    with _init_lock:  # target registration is not thread-safe
        if not _initialised:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialised = True
    mine: dict[str, llvm.TargetMachine] = getattr(_per_thread, "machines", None) or {}
    _per_thread.machines = mine
    if arch not in mine:
        # wave64 is the only wavefront size of gfx9; "+wavefrontsize64" states it in the IR's features
        mine[arch] = llvm.Target.from_triple(TRIPLE).create_target_machine(
            cpu=arch, features="+wavefrontsize64", opt=3, reloc="pic")
    return mine[arch]


def finish_module(text: str, symbol: str, lds_bytes: int, threads: int) -> str:
    """The kernel's attributes (its workgroup size, so registers are budgeted for it), and the
    LDS scratch area with its final size (static LDS: the code object's group segment size)."""
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if line.startswith(f'define amdgpu_kernel void @"{symbol}"('):
            lines[k] = line + " #0"
        elif line.startswith(f'@"{LDS_SYMBOL}" = external addrspace(3) global [0 x i8]'):
            lines[k] = f'@"{LDS_SYMBOL}" = internal addrspace(3) global [{lds_bytes} x i8] undef, align 16'
    attrs = f'nounwind "amdgpu-flat-work-group-size"="1,{threads}" "uniform-work-group-size"="true"'
    return "\n".join(lines) + f"\nattributes #0 = {{ {attrs} }}\n"


# float64 intrinsics the AMDGPU backend turns into instructions; any other would be a call into a
# math library the module does not have, which LLVM's code generator cannot select
_F64_NATIVE = frozenset({"sqrt", "fabs", "fma", "fmuladd", "floor", "ceil", "trunc", "round", "rint", "nearbyint",
                         "roundeven", "copysign", "minnum", "maxnum", "minimum", "maximum", "ldexp", "frexp",
                         "is.fpclass", "canonicalize"})
_INTRINSIC_F64 = re.compile(r"^llvm\.([a-z.]+?)\.f64")


def foreign_calls(mod: llvm.ModuleRef) -> list[str]:
    """Functions `mod` calls that nothing here defines: library calls (ocml) the slice cannot link."""
    out = []
    for f in mod.functions:
        if not f.is_declaration:
            continue
        if not f.name.startswith("llvm."):
            out.append(f.name)
            continue
        m = _INTRINSIC_F64.match(f.name)
        if m and m.group(1) not in _F64_NATIVE:
            out.append(f.name)
    return out


def optimise(text: str, arch: str, kernel: str) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """Parse, verify, check for library calls (before codegen, which would abort the process on
    one), and run O3 for `arch`."""
    tm = target_machine(arch)
    mod = llvm.parse_assembly(text, context=llvm.create_context())
    mod.triple = TRIPLE
    mod.data_layout = str(tm.target_data)
    mod.verify()
    calls = foreign_calls(mod)
    if calls:
        raise UnsupportedError(f"{kernel}: the AMD backend for amd:{arch} cannot link the math library calls "
                               f"{', '.join(sorted(calls))} (ROCm's ocml is not linked yet)",
                               hint="cast float64 math to tl.float32, or compile for 'cpu' or a 'cuda' target")
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return mod, tm
