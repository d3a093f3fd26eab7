"""The AMD backend's side of the contract (compiler/backends/contract.py): its options, its stages
(LLVM IR for AMDGPU, AMDGCN assembly, the linked HSA code object) and the metadata a loader needs.

Kernels load and launch through the HIP runtime (hip.py: ctypes against libamdhip64, on torch's
current stream); no AMD GPU has run them yet. Compiling needs neither a GPU nor ROCm (LLVM's
AMDGPU target is in llvmlite; the linker is searched for by toolchain.py, and without one the
`hsaco` stage leaves nothing and a warning).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ... import errors as E
from ...ir import types as T
from ...runtime import cuda
from ..contract import Artifacts, Backend, Stage, StageContext, type_from_text
from . import ARCHS, DEFAULT_ARCH, AmdBinary, hip, toolchain
from .hip import values_of
from .metadata import kernel_metadata
from .toolchain import INSTALL_HINT, LinkerNotFoundError, link

if TYPE_CHECKING:
    from ...runtime.compiled import CompiledKernel
    from ...runtime.specialize import LaunchOptions

__all__ = ["AmdBackend", "AmdOptions", "AmdLauncher"]

# the entries of the code object's metadata kept in the artifacts (the rest is derivable)
_KEPT = ("symbol", "kernarg_segment_size", "kernarg_segment_align", "group_segment_fixed_size",
         "private_segment_fixed_size", "wavefront_size", "max_flat_workgroup_size", "sgpr_count", "vgpr_count",
         "agpr_count", "sgpr_spill_count", "vgpr_spill_count", "uses_dynamic_stack")


@dataclass(frozen=True)
class AmdOptions:
    """What changes a code object besides the kernel: the architecture and the wavefronts per
    program (the workgroup is 64 * num_warps threads); whether a linker was found (a kernel
    compiled without one has no code object, so the cache keeps it apart)."""

    arch: str
    num_warps: int
    linker: bool


def _llir(o: AmdOptions) -> Any:
    def run(ctx: StageContext) -> str:
        # the lowering and LLVM's AMDGPU code generation (a kernel loaded from the disk cache never needs them)
        # deferred: start-up cost
        from .codegen import finish_module, optimise
        from .lower import AmdLowering  # deferred: start-up cost, as the import above

        t0 = time.perf_counter()
        lw = AmdLowering(ctx.fn, ir.Module(name=ctx.symbol), ctx.symbol, o.num_warps, o.arch)
        lw.build()
        text = finish_module(str(lw.m), ctx.symbol, lw.lds_bytes, 64 * o.num_warps)
        t1 = time.perf_counter()
        mod, tm = optimise(text, o.arch, ctx.name)
        ctx.scratch["module"] = (mod, tm)
        ctx.metadata.update(arch=o.arch, num_warps=o.num_warps, lds_bytes=lw.lds_bytes)
        ctx.timings["llvm_ir_ms"] = ctx.timings.get("llvm_ir_ms", 0.0) + (t1 - t0) * 1e3
        ctx.timings["llvm_opt_ms"] = ctx.timings.get("llvm_opt_ms", 0.0) + (time.perf_counter() - t1) * 1e3
        return str(mod)

    return run


def _amdgcn(ctx: StageContext) -> str:
    mod, tm = ctx.scratch["module"]
    # code generation rewrites the module it runs on (the control flow annotations of divergent
    # branches), so each emission gets its own copy
    asm = str(tm.emit_assembly(mod.clone()))
    meta = kernel_metadata(asm, ctx.symbol)
    ctx.metadata["kernel"] = {k: meta[k] for k in _KEPT if k in meta}
    ctx.metadata["kernel"]["args"] = [{k.lstrip("."): v for k, v in a.items()} for a in meta.get("args", [])
                                      if not str(a.get(".value_kind", "")).startswith("hidden_")]
    return asm


def _hsaco(o: AmdOptions) -> Any:
    def run(ctx: StageContext) -> bytes | None:
        mod, tm = ctx.scratch.pop("module")
        obj = bytes(tm.emit_object(mod.clone()))
        try:
            return link(obj, o.arch)
        except LinkerNotFoundError as e:  # the assembly is still a result: compile-only use needs no linker
            ctx.metadata.setdefault("warnings", []).append(f"no code object was linked: {e}")
            return None

    return run


class AmdBackend(Backend):
    name = "amd"
    device = "cuda"  # ROCm builds of torch call AMD GPUs "cuda"

    def canonical_target(self, target: str) -> str:
        if target == "amd":
            return f"amd:{DEFAULT_ARCH}"
        arch = target.partition(":")[2]
        if arch not in ARCHS:
            known = ", ".join(f"'amd:{a}'" for a in ARCHS)
            raise E.ArgumentError(f"unknown target {target!r}; the AMD targets are 'amd' and {known} (AMD Instinct "
                                  "MI300 and MI350)")
        return target

    def options(self, target: str, launch: LaunchOptions) -> AmdOptions:
        arch = self.canonical_target(target).partition(":")[2]
        if launch.checked:
            raise E.UnsupportedError(f"debug mode (bounds checks, device_assert) is not supported by the AMD backend "
                                     f"for amd:{arch} yet", hint="compile without debug=True, or debug on 'cpu'")
        if launch.cluster_dims is not None:
            raise E.UnsupportedError(f"cluster_dims is an NVIDIA feature; amd:{arch} has no thread block clusters",
                                     hint="launch without cluster_dims")
        if launch.num_warps not in (1, 2, 4, 8, 16):
            raise E.ArgumentError(f"num_warps={launch.num_warps}: an amd:{arch} program is 1, 2, 4, 8 or 16 "
                                  "wavefronts of 64 threads (at most 1024 threads)")
        return AmdOptions(arch, launch.num_warps, toolchain.find_linker() is not None)

    def stages(self, options: AmdOptions) -> list[Stage]:
        """No Tile IR passes of its own yet; then LLVM IR (O3), assembly, the linked code object."""
        return [Stage("llir", _llir(options)), Stage("amdgcn", _amdgcn, timing="codegen_ms"),
                Stage("hsaco", _hsaco(options), timing="link_ms")]

    def binary(self, artifacts: Artifacts) -> AmdBinary:
        m = artifacts.metadata
        co = artifacts.outputs.get("hsaco")
        return AmdBinary(artifacts.name, artifacts.symbol, m["arch"], artifacts.text("llir"), artifacts.text("amdgcn"),
                         co if isinstance(co, bytes) else None, m["num_warps"], m["lds_bytes"],
                         [type_from_text(t) for t in m["arg_types"]], list(m["arg_names"]), dict(m.get("kernel", {})))

    def load(self, artifacts: Artifacts) -> Any:
        """The code object loaded on the current device through the HIP runtime (hip.py)."""
        b = self.binary(artifacts)
        if b.hsaco is None:
            raise E.LaunchError(f"{artifacts.name}: no code object was linked for amd:{b.arch} ({INSTALL_HINT})")
        return hip.HipFunction.load(hip.hip_api(), b, hip.device_arch())

    def launcher(self, kernel: CompiledKernel) -> AmdLauncher:
        return AmdLauncher(kernel)

    def kernel_metadata(self, artifacts: Artifacts, launch: LaunchOptions) -> dict[str, Any]:
        m = artifacts.metadata
        k = m.get("kernel", {})
        return {
            "arch": m["arch"], "num_warps": m["num_warps"], "warp_size": k.get("wavefront_size", 64),
            "shared": k.get("group_segment_fixed_size", m["lds_bytes"]), "n_regs": k.get("vgpr_count"),
            "n_spills": (k["vgpr_spill_count"] + k["sgpr_spill_count"]) if "vgpr_spill_count" in k else None,
            "scratch_bytes": k.get("private_segment_fixed_size"), "sgpr_count": k.get("sgpr_count"),
            "unmasked_accesses": list(m.get("unmasked_accesses", [])), "notes": [],
            "warnings": list(m.get("warnings", [])),
        }

    def asm(self, kernel: CompiledKernel) -> dict[str, Any]:
        a = kernel.artifacts
        out: dict[str, Any] = {"tir": a.tile_ir, "llir": a.text("llir"), "amdgcn": a.text("amdgcn")}
        if isinstance(a.outputs.get("hsaco"), bytes):
            out["hsaco"] = a.outputs["hsaco"]
        return out


class AmdLauncher:
    """Launches on torch's current stream (a ROCm build of torch calls it the CUDA stream); the code
    object is loaded on first use (compiling needs no GPU)."""

    def __init__(self, kernel: CompiledKernel) -> None:
        self.kernel = kernel
        self._is_ptr = [isinstance(t, T.PointerType) for t in kernel.binary.arg_types]
        self._fn: Any = None

    @property
    def function(self) -> Any:
        """The loaded kernel (hip.HipFunction)."""
        if self._fn is None:
            ck = self.kernel
            self._fn = ck.backend.load(ck.artifacts)
        return self._fn

    def launch(self, grid: tuple[int, int, int], params: list[Any]) -> None:
        if grid[0] * grid[1] * grid[2] == 0:
            return
        fn = self._fn or self.function
        fn.launch(grid, cuda.current_stream(), values_of(params, self.kernel.arg_index, self._is_ptr))
