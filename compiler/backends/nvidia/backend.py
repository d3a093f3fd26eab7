"""The NVIDIA backend's side of the contract (compiler/backends/contract.py): its options, its
stages (the GPU's Tile IR passes, LLVM IR, PTX, cubin), loading a cubin through the driver, and
the launch on torch's current stream.

Compiling needs no GPU: a kernel compiled for any architecture has its PTX and cubin, and loads
(from memory or the disk cache) on first launch.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ... import errors as E
from ... import knobs
from ...ir import types as T
from ...ir.core import Location
from ...passes.pipeline import pipeline_dot_loads
from ...passes.prefetch import prefetch_dot_operands
from ...runtime import cuda
from ...runtime.specialize import check_cluster_grid
from ..contract import Artifacts, Backend, Stage, StageContext, type_from_text
from ..llvm.irtext import module_text
from ..nvidia_targets import nv_target
from . import CudaBinary, driver, optimise, with_launch_bound
from .debug_record import DEBUG_LOCS
from .jitlink import assemble
from .notes import assembler_notes
from .toolchain import PtxasReport

if TYPE_CHECKING:
    from ...runtime.compiled import CompiledKernel
    from ...runtime.specialize import LaunchOptions
    from .lower import NvLowering

__all__ = ["NvidiaBackend", "NvidiaOptions", "NvidiaLauncher"]

DEFAULT_ARCH = "sm_90a"
_SERIALIZED = ("(C7514)", "(C7515)")  # ptxas: "wgmma.mma_async instructions are serialized"


@dataclass(frozen=True)
class NvidiaOptions:
    """What changes a cubin besides the kernel. `codegen`: the knobs the lowering reads
    (knobs.codegen_key: wgmma, pipelining)."""

    arch: str
    num_warps: int
    num_stages: int
    checked: bool
    maxnreg: int | None
    cluster_dims: tuple[int, int, int] | None
    codegen: str


def _module(ctx: StageContext) -> ir.Module:
    """The LLVM module of a kernel, in an LLVM IR context of its own (its named struct types)."""
    return ir.Module(name=ctx.symbol, context=ir.Context())


def _lowering(ctx: StageContext, o: NvidiaOptions) -> NvLowering:
    """The lowering of this compile, made by the first stage that needs it (the GPU passes ask it
    about layouts and shared memory before it lowers)."""
    from .lower import NvLowering  # deferred: start-up cost: the lowering (a kernel from the disk cache never needs it)

    lw = ctx.scratch.get("lowering")
    if lw is None:
        lw = ctx.scratch["lowering"] = NvLowering(ctx.fn, _module(ctx), ctx.symbol, o.num_warps,
                                                  o.arch, o.checked)
    return lw  # type: ignore[no-any-return]


def _mark_kmajor_b(ctx: StageContext) -> None:
    from .async_copy import mark_kmajor_b  # deferred: start-up cost: part of the lowering, as in _lowering

    mark_kmajor_b(ctx.fn)
    return None


def _pipeline(o: NvidiaOptions) -> Callable[[StageContext], None]:
    def run(ctx: StageContext) -> None:
        # deferred: start-up cost: part of the lowering, as in _lowering
        from .async_copy import pipeline_stages, private_budget, private_sizer, reads_shared

        lw, fn = _lowering(ctx, o), ctx.fn
        pipeline_dot_loads(fn, pipeline_stages(lw, fn, o.num_stages), functools.partial(reads_shared, lw),
                           knobs.pipeline_in_flight(), private_sizer(lw, fn),
                           private_budget(o.arch) - lw.held_bytes)
        return None

    return run


def _prefetch(o: NvidiaOptions) -> Callable[[StageContext], None]:
    def run(ctx: StageContext) -> None:
        prefetch_dot_operands(ctx.fn, o.num_warps)
        return None

    return run


def _build(ctx: StageContext, o: NvidiaOptions, lw: NvLowering) -> str:
    """Optimised LLVM IR of the lowering `lw` (its module kept for the PTX stage)."""
    t0 = time.perf_counter()
    lw.m.triple = "nvptx64-nvidia-cuda"
    lw.build()
    text = with_launch_bound(module_text(lw.m), ctx.symbol, 32 * o.num_warps, o.maxnreg, o.cluster_dims)
    t1 = time.perf_counter()
    mod, tm = optimise(text, o.arch, _llvm_speed_level(ctx))
    ctx.scratch["module"] = (mod, tm)
    ctx.timings["llvm_ir_ms"] = ctx.timings.get("llvm_ir_ms", 0.0) + (t1 - t0) * 1e3
    ctx.timings["llvm_opt_ptx_ms"] = ctx.timings.get("llvm_opt_ptx_ms", 0.0) + (time.perf_counter() - t1) * 1e3
    return str(mod)


def _llvm_speed_level(ctx: StageContext) -> int:
    """LLVM's O1 for a kernel with tensor-core dots, O3 for the rest. The lowering of a dot kernel
    leaves LLVM little to do that O3 does beyond O1 (each repeat emitted once, addresses folded,
    loops as the lowering pipelined them), and ptxas schedules and allocates after it: on every
    tensor-core case of the target tests and the benchmarks, O1 gives the same register count (one
    case 3 fewer) and within 1.2% of the same SASS, in 40-60% of O3's time. Memory-bound kernels keep O3: there its
    GVN and unrolling save instructions (a layer norm 448 -> 416 SASS), and they compile fast anyway."""
    forced = knobs.llvm_opt()
    if forced is not None:
        return forced
    return 1 if any(op.opcode == "dot" for op in ctx.fn.walk()) else 3


def _assign_layouts(o: NvidiaOptions) -> Callable[[StageContext], str]:
    """Every tile value's layout, planned before code generation (layout_plan.py); the output is
    the Tile IR with the layouts, the Tile IR the next stage lowers."""
    def run(ctx: StageContext) -> str:
        # deferred: start-up cost: a lowering module (a kernel loaded from the disk cache never needs it)
        from .layout_plan import print_layouts

        return print_layouts(ctx.fn, _lowering(ctx, o).assign_layouts())

    return run


def _llir(o: NvidiaOptions) -> Callable[[StageContext], str]:
    def run(ctx: StageContext) -> str:
        ctx.scratch["in_flight"] = any(op.attrs.get("in_flight") for op in ctx.fn.walk())
        return _build(ctx, o, _lowering(ctx, o))

    return run


def _ptx(ctx: StageContext) -> str:
    t0 = time.perf_counter()
    mod, tm = ctx.scratch.pop("module")
    ptx = str(tm.emit_assembly(mod))
    ctx.timings["llvm_opt_ptx_ms"] = ctx.timings.get("llvm_opt_ptx_ms", 0.0) + (time.perf_counter() - t0) * 1e3
    return ptx


def _cubin(o: NvidiaOptions) -> Callable[[StageContext], bytes]:
    def run(ctx: StageContext) -> bytes:
        ptx = ctx.outputs["ptx"]
        assert isinstance(ptx, str)
        t0 = time.perf_counter()
        cubin, report = assemble(ptx, o.arch)
        ctx.timings["ptxas_ms"] = (time.perf_counter() - t0) * 1e3
        lw: NvLowering = ctx.scratch["lowering"]
        # a wgmma group left in flight that the assembler must serialize anyway ("(C7514)/(C7515)
        # ... wgmma.mma_async instructions are serialized"): lower again, waiting in each iteration.
        # This stage then repeats the LLVM IR and PTX stages, and revises their outputs.
        if (ctx.scratch["in_flight"] or lw.carried) and any(n.startswith(_SERIALIZED) for n in report.notes):
            lw, ptx, cubin, report = _lower_again(ctx, o, in_flight=False, split=lw.split_addresses)
        # registers spilled where shared-memory round trips used a thread address and constant offsets
        # (convert.thread_offsets): LLVM may share that address with an earlier use and keep it live
        # across a loop. Lower again with per-register addresses; keep whichever spills less.
        if report.spill_stores and lw.used_split:
            first = (lw, ctx.outputs["llir"], ptx, cubin, report)
            lw, ptx, cubin, report = _lower_again(ctx, o, in_flight=lw.in_flight, split=False)
            if report.spill_stores > first[4].spill_stores:
                lw, ctx.outputs["llir"], ptx, cubin, report = first
                ctx.outputs["ptx"], ctx.scratch["lowering"] = ptx, lw
        _record_metadata(ctx, o, lw, report)
        _check_shared_memory(ctx.name, o.arch, lw.smem_bytes + report.shared_bytes)
        return cubin

    return run


def _lower_again(ctx: StageContext, o: NvidiaOptions, *, in_flight: bool,
                 split: bool) -> tuple[NvLowering, str, bytes, PtxasReport]:
    """The LLVM IR, PTX and cubin stages once more, from a fresh lowering with these choices (their
    outputs revised); the lowering, PTX, cubin and ptxas's report."""
    from .lower import NvLowering  # deferred: start-up cost, as in _lowering

    lw = ctx.scratch["lowering"] = NvLowering(ctx.fn, _module(ctx), ctx.symbol, o.num_warps, o.arch, o.checked)
    lw.in_flight, lw.split_addresses = in_flight, split
    ctx.outputs["llir"] = _build(ctx, o, lw)
    ptx = ctx.outputs["ptx"] = _ptx(ctx)
    t0 = time.perf_counter()
    cubin, report = assemble(ptx, o.arch)
    ctx.timings["ptxas_ms"] += (time.perf_counter() - t0) * 1e3
    return lw, ptx, cubin, report


def _record_metadata(ctx: StageContext, o: NvidiaOptions, lw: NvLowering, report: PtxasReport) -> None:
    dots = [op.loc for op in ctx.fn.walk() if op.opcode == "dot"]
    ctx.metadata.update(
        arch=o.arch, num_warps=o.num_warps, shared_bytes=lw.smem_bytes,
        report=asdict(report) | {"notes": list(report.notes)},
        notes=assembler_notes(report, ctx.fn.loc, dots),
        # debug mode's failures name a location by number (debug.py): the locations, for a process
        # that loads this kernel from the disk cache
        debug_locs=[[loc.file, loc.line, loc.col, loc.func] for loc in DEBUG_LOCS.get(ctx.symbol, [])],
    )


def _check_shared_memory(name: str, arch: str, nbytes: int) -> None:
    """A kernel that needs more shared memory than a block of `arch` may have never loads there:
    say so at compile time (for a compile-only target nothing else would). A ResourceError
    (Triton's OutOfResources), so an autotuner leaves such a config out, as Triton's does."""
    limit = nv_target(arch).max_shared_bytes
    if nbytes > limit:
        raise E.ResourceError(f"{name} needs {nbytes} bytes of shared memory per program; a block on {arch} may "
                              f"have at most {limit} ({limit // 1024} KB): use smaller blocks, fewer stages or less "
                              "tl.extra.cuda.shared_memory")


def _report(m: Any) -> PtxasReport | None:
    r = m.get("report")
    return None if r is None else PtxasReport(**(r | {"notes": tuple(r["notes"])}))


class NvidiaBackend(Backend):
    name = "cuda"
    device = "cuda"

    def canonical_target(self, target: str) -> str:
        if target == "cuda":
            return f"cuda:{DEFAULT_ARCH}"
        family, _, arch = target.partition(":")
        if family != "cuda" or not arch.startswith("sm_"):
            raise E.ArgumentError(f"unknown target {target!r}; a CUDA target is 'cuda' or 'cuda:sm_<NN>' "
                                  "(e.g. 'cuda:sm_80', 'cuda:sm_90a', 'cuda:sm_100a')")
        nv_target(arch)  # an architecture outside the table: ArgumentError naming the ones it holds
        return target

    def options(self, target: str, launch: LaunchOptions) -> NvidiaOptions:
        arch = self.canonical_target(target).partition(":")[2]
        if launch.cluster_dims is not None and not nv_target(arch).clusters:
            raise E.UnsupportedError(f"cluster_dims {launch.cluster_dims} needs sm_90 or newer (thread block "
                                     f"clusters), the target is {arch}", hint="launch without cluster_dims on this GPU")
        return NvidiaOptions(arch, launch.num_warps, launch.num_stages, launch.checked, launch.maxnreg,
                             launch.cluster_dims, knobs.codegen_key())

    def stages(self, options: NvidiaOptions) -> list[Stage]:
        """`num_stages`: depth of the shared-memory pipeline of the loads that feed tensor-core dots
        in loops (passes/pipeline.py; at most what fits in shared memory; none in checked mode).
        `maxnreg`: `.maxnreg` (more programs per SM, ptxas may spill). `cluster_dims`:
        `.reqnctapercluster` (sm_90 and newer: a cluster's programs run at once on one GPC)."""
        # the lowering's modules, imported before the stages run (a kernel loaded from the disk cache never needs them)
        # deferred: start-up cost
        from . import async_copy, lower  # noqa: F401

        o = options
        passes = [Stage("tir.mark_kmajor_b", _mark_kmajor_b, tile_ir=True, timing="passes_ms")]
        if not o.checked:
            passes.append(Stage("tir.pipeline_dot_loads", _pipeline(o), tile_ir=True, timing="passes_ms"))
        passes.append(Stage("tir.prefetch_dot_operands", _prefetch(o), tile_ir=True, timing="passes_ms"))
        passes.append(Stage("tir.assign_layouts", _assign_layouts(o), tile_ir=True, timing="passes_ms"))
        return [*passes, Stage("llir", _llir(o)), Stage("ptx", _ptx), Stage("cubin", _cubin(o))]

    def binary(self, artifacts: Artifacts) -> CudaBinary:
        m = artifacts.metadata
        cubin = artifacts.outputs.get("cubin")
        return CudaBinary(artifacts.name, artifacts.symbol, m["arch"], artifacts.text("llir"), artifacts.text("ptx"),
                          cubin if isinstance(cubin, bytes) else None, m["num_warps"], m["shared_bytes"],
                          [type_from_text(t) for t in m["arg_types"]], _report(m), {}, list(m["arg_names"]))

    def load(self, artifacts: Artifacts) -> Any:
        b = self.binary(artifacts)
        locs = artifacts.metadata.get("debug_locs")
        if locs and b.symbol not in DEBUG_LOCS:  # compiled by another process
            DEBUG_LOCS[b.symbol] = [Location(f, ln, c, fn) for f, ln, c, fn in locs]
        if b.cubin is None:
            raise E.LaunchError(f"{artifacts.name}: the kernel's artifacts hold no cubin to load; compile it again")
        try:
            return driver.load_cubin(b.cubin, b.symbol, b.arg_types, b.num_warps, b.shared_bytes, artifacts.name)
        except E.LaunchError as e:
            if "NO_BINARY_FOR_GPU" not in str(e):
                raise
            # a cubin loads only on its own architecture (an arch-specific one, sm_90a or sm_100a,
            # on exactly that one): say which, and whether its target ever ran on hardware
            here, t = driver.device_arch(), nv_target(b.arch)
            status = f"verified on an {t.verified_on}" if t.verified_on else "compile only, not verified on hardware"
            raise E.LaunchError(f"{artifacts.name} was compiled for {b.arch} ({t.family}; {status}), which this GPU "
                                f"({here}) cannot run; compile for 'cuda:{here}'") from None

    def launcher(self, kernel: CompiledKernel) -> NvidiaLauncher:
        return NvidiaLauncher(kernel)

    def kernel_metadata(self, artifacts: Artifacts, launch: LaunchOptions) -> dict[str, Any]:
        m = artifacts.metadata
        rep = _report(m)
        return {
            "arch": m["arch"], "num_warps": m["num_warps"],
            # the compiler's dynamic shared memory and what ptxas counts as static (inline asm's .shared)
            "shared": m["shared_bytes"] + (rep.shared_bytes if rep else 0), "n_regs": rep.registers if rep else None,
            "n_spills": (rep.spill_stores + rep.spill_loads) if rep else None,
            "ptxas_notes": list(rep.notes) if rep else [],
            "unmasked_accesses": list(m.get("unmasked_accesses", [])), "notes": list(m.get("notes", [])),
        }

    def asm(self, kernel: CompiledKernel) -> dict[str, Any]:
        a = kernel.artifacts
        out: dict[str, Any] = {"tir": a.tile_ir, "llir": a.text("llir"), "ptx": a.text("ptx")}
        if isinstance(a.outputs.get("cubin"), bytes):
            out["cubin"] = a.outputs["cubin"]
        return out


class NvidiaLauncher:
    """Launches on torch's current stream; the cubin is loaded on first use (compiling needs no GPU)."""

    def __init__(self, kernel: CompiledKernel) -> None:
        self.kernel = kernel
        self.options = kernel.options
        self._is_ptr = [isinstance(t, T.PointerType) for t in kernel.binary.arg_types]
        self._fn: Any = None

    @property
    def function(self) -> Any:
        """The loaded function (driver.CudaFunction); loading records the driver's register count."""
        if self._fn is None:
            ck = self.kernel
            self._fn = ck.backend.load(ck.artifacts)
            ck.metadata["n_regs"] = self._fn.registers
        return self._fn

    def launch(self, grid: tuple[int, int, int], params: list[Any]) -> None:
        """The general path: `params` holds a value for every kernel parameter (constants ignored)."""
        if grid[0] * grid[1] * grid[2] == 0:
            return
        ck = self.kernel
        if self.options.cluster_dims is not None:
            check_cluster_grid(grid, self.options.cluster_dims, ck.name)
        fn = self._fn or self.function
        vals = tuple(params[i].data_ptr() if p else params[i]
                     for i, p in zip(ck.arg_index, self._is_ptr, strict=True))
        if self.options.checked:  # the tensors' bounds for the kernel's checks (debug_host.py)
            # deferred: start-up cost: debug mode only; the host side reads the lowering's debug globals
            from .debug_host import check_debug_record, write_debug_bounds

            write_debug_bounds(ck, params)
        fn.launch(grid[0], grid[1], grid[2], cuda.current_stream(), vals)
        if self.options.checked:  # debug-mode hook: a failed tl.device_assert or bounds check raises here
            check_debug_record(ck)

    def fast_entry(self, raw_positions: list[int], n_raw: int, n_params: int,
                   install: Callable[[Callable[..., Any]], None] | None = None) -> Callable[..., Any] | None:
        """The warm launch of this specialization (fastpath.py's entry protocol): `entry(gx, gy, gz,
        r0, ..., r{n_raw-1}, v0, ..., v{n_params-1}) -> kernel`, where the r are the values of the
        launch's non-constexpr parameters, tensors already read with data_ptr (`raw_positions[i]` is
        where kernel argument i sits among them), and the v (every parameter's value) are unused.
        None in debug mode: every debug launch goes through `launch` (bounds before, record after).
        `install`: called later with the native entry that replaces the one returned (driver.entry)."""
        if self.options.checked:
            return None
        ck = self.kernel
        fn = self._fn or self.function
        read, arg = cuda.stream_source()
        cd = self.options.cluster_dims
        if cd is None:
            return fn.entry(raw_positions, n_raw, n_params, read, arg, ck,  # type: ignore[no-any-return]
                            install=install)
        # clusters: the grid is checked before each warm launch (the driver's error names no cause)
        wrapped = None if install is None else (lambda f: install(_cluster_checked(f, cd, ck)))
        return _cluster_checked(fn.entry(raw_positions, n_raw, n_params, read, arg, ck, install=wrapped), cd, ck)


def _cluster_checked(entry: Callable[..., Any], dims: tuple[int, int, int], ck: Any) -> Callable[..., Any]:
    def checked(gx: int, gy: int, gz: int, *rest: Any) -> Any:
        if gx % dims[0] or gy % dims[1] or gz % dims[2]:
            check_cluster_grid((gx, gy, gz), dims, ck.name)
        return entry(gx, gy, gz, *rest)

    checked.__anvil_result__ = ck  # type: ignore[attr-defined]
    return checked
