"""LLVM for the host CPU: one target machine, the optimization pipeline, and an MCJIT engine."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache

import llvmlite.binding as llvm

from ... import knobs

__all__ = ["Host", "host", "vector_bits", "optimize", "JIT", "jit_engine"]


@dataclass(frozen=True)
class Host:
    triple: str
    cpu: str
    features: str


@cache
def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


@cache
def host() -> Host:
    """The CPU to generate code for: the host's, or ANVIL_CPU_TARGET ("cpu-name[,+feature,...]")."""
    _init()
    override = knobs.cpu_target()
    if override:
        name, _, feats = override.partition(",")
        return Host(llvm.get_process_triple(), name, feats)
    return Host(llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())


def vector_bits() -> int:
    """The widest vector registers of the target CPU, in bits."""
    features = host().features
    return 512 if "+avx512f" in features else 256 if "+avx2" in features else 128


@cache
def target_machine() -> llvm.TargetMachine:
    h = host()
    target = llvm.Target.from_triple(h.triple)
    return target.create_target_machine(cpu=h.cpu, features=h.features, opt=3, reloc="default",
                                        codemodel="jitdefault")


# Modules above this many lines of IR are optimized without loop unrolling and without the loop
# vectorizer (the SLP vectorizer stays): kernels of ordinary DSL code lower to 200-2,100 lines,
# an emulated tensor-core GEMV to 20-47 K. Unrolling the tile loops of such a kernel multiplied
# its code (20 K lines became 72 K; O3 took 57 s instead of 7), and the loop vectorizer alone
# took 14 of the 20 s that O3 and code generation took for a 47 K-line one (a first call of
# awq_gemv on the CPU: 59-73 s with it, 17-23 s without; its run 2x slower, 40-90 ms for
# 4096x4096: a compile costs a thousand runs).
LARGE_MODULE_LINES = 10_000


def optimize(text: str) -> llvm.ModuleRef:
    """Parse LLVM IR text, verify it, and run the O3 pipeline for the host (without loop
    unrolling and loop vectorization for modules over LARGE_MODULE_LINES)."""
    _init()
    tm = target_machine()
    mod = llvm.parse_assembly(text)
    mod.triple = host().triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    moderate = text.count("\n") <= LARGE_MODULE_LINES
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = moderate
    pto.slp_vectorization = True
    pto.loop_unrolling = moderate
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(mod, pb)
    return mod


class JIT:
    """One MCJIT engine per process; kernels are added as modules (object code cached on disk)."""

    def __init__(self) -> None:
        _init()
        self.lock = threading.Lock()
        tm = target_machine()
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        self._objects: dict[str, bytes] = {}
        self._pending_key: str | None = None
        self._produced: bytes | None = None
        self.engine.set_object_cache(self._notify, self._getbuffer)

    def _notify(self, module: llvm.ModuleRef, buf: bytes) -> None:
        self._produced = bytes(buf)

    def _getbuffer(self, module: llvm.ModuleRef) -> bytes | None:
        key = self._pending_key
        return self._objects.get(key) if key else None

    def add(self, mod: llvm.ModuleRef, symbol: str, key: str, obj: bytes | None) -> tuple[int, bytes | None]:
        """Add a module; returns the address of `symbol` and the object code (if produced)."""
        with self.lock:
            if obj is not None:
                self._objects[key] = obj
            self._pending_key = key
            self._produced = None
            self.engine.add_module(mod)
            self.engine.finalize_object()
            addr = self.engine.get_function_address(symbol)
            self._pending_key = None
            return addr, self._produced

    def asm(self, mod: llvm.ModuleRef) -> str:
        return target_machine().emit_assembly(mod)


@cache
def jit_engine() -> JIT:
    return JIT()
