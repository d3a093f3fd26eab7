"""The CPU backend's side of the contract (compiler/backends/contract.py): its options, its stages
(fold dot-adds, LLVM IR, machine code), loading a binary into the process's JIT, and the launch,
which splits a grid across CPU threads (runtime/launch.py) or runs programs that wait for each
other concurrently (runtime/waiting.py)."""

from __future__ import annotations

import ctypes
import linecache
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import errors as E
from ...ir import types as T
from ...ir.core import Location
from ...runtime.launch import run_grid
from ...runtime.specialize import check_cluster_grid
from ...runtime.waiting import new_record, run_waiting
from ..contract import Artifacts, Backend, Stage, StageContext, type_from_text
from . import CPUBinary, CPUKernel, build_module, engine, load_binary, optimize_parsed
from .dot import fold_dot_add
from .libcalls import scalar_library_calls

if TYPE_CHECKING:
    from ...runtime.compiled import CompiledKernel
    from ...runtime.specialize import LaunchOptions

__all__ = ["CpuBackend", "CpuOptions", "CpuLauncher", "tensor_extent"]


@dataclass(frozen=True)
class CpuOptions:
    """What changes a CPU binary besides the kernel: checked accesses, and the CPU generated for."""

    checked: bool
    cpu: str
    features: str


def _fold_dot_add(ctx: StageContext) -> None:
    fold_dot_add(ctx.fn)
    return None


def _llir(checked: bool) -> Any:
    def run(ctx: StageContext) -> str:
        t0 = time.perf_counter()
        locs: list[Location] = []
        loc_args: list[int | None] = []
        text, arena, claims = build_module(ctx.fn, ctx.symbol, checked, locs, loc_args)
        t1 = time.perf_counter()
        mod = engine.optimize(text)  # through the module: tests substitute it
        t2 = time.perf_counter()
        ctx.scratch["module"] = mod
        ctx.timings["llvm_ir_ms"] = (t1 - t0) * 1e3
        ctx.timings["llvm_opt_ms"] = (t2 - t1) * 1e3
        ctx.metadata.update(arena_bytes=arena, waits=claims, loc_args=loc_args,
                            locs=[[loc.file, loc.line, loc.col, loc.func] for loc in locs])
        return str(mod)

    return run


def _machine_code(ctx: StageContext) -> bytes | None:
    """Machine code, added to the process's JIT (its address is kept for the load that follows)."""
    addr, obj = engine.jit_engine().add(ctx.scratch.pop("module"), ctx.symbol, ctx.symbol, None)
    ctx.live["addr"] = addr
    llir = ctx.outputs["llir"]
    assert isinstance(llir, str)
    ctx.metadata["notes"] = [_libcall_note(*call) for call in scalar_library_calls(ctx.fn, llir)] + _small_dots(ctx)
    return obj


def _small_dots(ctx: StageContext) -> list[dict[str, object]]:
    """A note for each dot with an inner dimension below 16: the CPU has no minimum, NVIDIA's tensor
    cores do (the same kernel compiled for 'cuda' fails there)."""
    notes: list[dict[str, object]] = []
    for op in ctx.fn.walk():
        if op.opcode != "dot" or T.elem_of(op.operands[0].type) == T.fp64:
            continue
        a, b = T.shape_of(op.operands[0].type), T.shape_of(op.operands[1].type)
        if a and a[-1] < 16 and op.loc is not None:
            notes.append({
                "message": f"portability: this dot's inner dimension is {a[-1]} ({list(a)} @ {list(b)}): the CPU "
                "runs it, but on NVIDIA GPUs tl.dot needs K >= 16, so this kernel does not compile for 'cuda'",
                "hint": "use a K block of 16 or more (masking the loads past the end)",
                "line": op.loc.line, "column": op.loc.col,
            })
    return notes


def _libcall_note(name: str, elem: str, c_name: str, loc: Location) -> dict[str, object]:
    return {
        "message": f"{name} on {elem} tiles is a call of the C library's {c_name} for each element, inside the "
        "vector loop (the CPU backend has no vector form of it for this type): several times slower than the "
        "vectorized math around it",
        "hint": "compute it in float32 where the precision allows (float32 math is vectorized on the CPU)"
        if elem == "fp64" else "expect it to dominate this kernel's time on the CPU",
        "line": loc.line, "column": loc.col,
    }


class CpuBackend(Backend):
    name = "cpu"
    device = "cpu"

    def canonical_target(self, target: str) -> str:
        if target not in ("cpu", "auto"):
            raise E.ArgumentError(f"unknown target {target!r}; the CPU target is 'cpu'")
        return "cpu"

    def options(self, target: str, launch: LaunchOptions) -> CpuOptions:
        h = engine.host()
        return CpuOptions(launch.checked, h.cpu, h.features)

    def stages(self, options: CpuOptions) -> list[Stage]:
        return [
            Stage("tir.fold_dot_add", _fold_dot_add, tile_ir=True, timing="passes_ms"),
            Stage("llir", _llir(options.checked)),
            Stage("obj", _machine_code, timing="codegen_ms"),
        ]

    def binary(self, artifacts: Artifacts) -> CPUBinary:
        m = artifacts.metadata
        obj = artifacts.outputs.get("obj")
        binary = CPUBinary(artifacts.name, artifacts.symbol, artifacts.text("llir"),
                           obj if isinstance(obj, bytes) else None, m["arena_bytes"],
                           [Location(f, ln, c, fn) for f, ln, c, fn in m["locs"]],
                           [type_from_text(t) for t in m["arg_types"]], m["checked"])
        binary.arg_names = list(m["arg_names"])
        binary.loc_args = list(m["loc_args"])
        binary.waits = bool(m["waits"])
        binary.unmasked = list(m.get("unmasked_accesses", []))
        binary.notes = list(m.get("notes", []))
        addr = artifacts.live.get("addr")
        if addr is not None:
            binary._addr = addr  # type: ignore[attr-defined]
        return binary

    def load(self, artifacts: Artifacts) -> CPUKernel:
        return load_binary(self.binary(artifacts))

    def launcher(self, kernel: CompiledKernel) -> CpuLauncher:
        return CpuLauncher(kernel, load_binary(kernel.binary))

    def kernel_metadata(self, artifacts: Artifacts, launch: LaunchOptions) -> dict[str, Any]:
        m = artifacts.metadata
        return {"num_warps": launch.num_warps, "arena_bytes": m["arena_bytes"], "shared": 0, "n_regs": 0,
                "n_spills": 0, "unmasked_accesses": list(m.get("unmasked_accesses", [])),
                "notes": list(m.get("notes", []))}

    def asm(self, kernel: CompiledKernel) -> dict[str, Any]:
        return _Asm(kernel.artifacts)


class _Asm(dict):  # type: ignore[type-arg]
    """`kernel.asm` on the CPU: 'tir', 'llir', and 'asm' (host assembly, produced on first access)."""

    def __init__(self, artifacts: Artifacts) -> None:
        super().__init__(tir=artifacts.tile_ir, llir=artifacts.text("llir"))

    def __missing__(self, key: str) -> str:
        if key in ("asm", "x86", "ptx"):
            if key == "ptx":
                raise KeyError("ptx exists only for CUDA targets; this kernel was compiled for the CPU")
            text = engine.jit_engine().asm(optimize_parsed(self["llir"]))
            self[key] = text
            return text
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in ("tir", "llir", "asm")


def tensor_extent(a: Any) -> tuple[int, int]:
    """The [lo, hi) byte addresses a tensor's elements occupy (strides of either sign)."""
    if a.numel() == 0:
        return a.data_ptr(), a.data_ptr()
    lo_el = sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.stride(), strict=True))
    hi_el = sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.stride(), strict=True)) + 1
    return a.data_ptr() + lo_el * a.element_size(), a.data_ptr() + hi_el * a.element_size()


class CpuLauncher:
    """Runs a loaded grid function over a launch's programs."""

    def __init__(self, kernel: CompiledKernel, loaded: CPUKernel) -> None:
        self.name = kernel.name
        self.options = kernel.options
        self.binary = loaded.binary
        self.cfunc = loaded.cfunc
        self.arg_index = kernel.arg_index
        self._is_ptr = [isinstance(t, T.PointerType) for t in loaded.binary.arg_types]

    def launch(self, grid: tuple[int, int, int], params: list[Any]) -> None:
        """Run on `grid`; `params` holds a value for every kernel parameter (constants ignored)."""
        gx, gy, gz = grid
        total = gx * gy * gz
        if total == 0:
            return
        if self.options.cluster_dims is not None:  # programs run independently here; the grid as on a GPU
            check_cluster_grid(grid, self.options.cluster_dims, self.name)
        vals = [params[i].data_ptr() if p else params[i] for i, p in zip(self.arg_index, self._is_ptr, strict=True)]
        if self.options.checked:
            return self._launch_debug(grid, [params[i] for i in self.arg_index], vals)
        cfunc = self.cfunc
        if self.binary.waits:  # programs may wait for each other: run concurrently (waiting.py)
            record = new_record()
            self._run_waiting(lambda: cfunc(*vals, 0, total, gx, gy, gz, record, None), total, record)
            return
        if total == 1:
            cfunc(*vals, 0, 1, gx, gy, gz, None, None)
            return
        run_grid(lambda s, e: cfunc(*vals, s, e, gx, gy, gz, None, None), total)

    def _launch_debug(self, grid: tuple[int, int, int], args: list[Any], vals: list[Any]) -> None:
        gx, gy, gz = grid
        bounds = (ctypes.c_int64 * max(4, 4 * len(args)))()  # per argument: [lo, hi) and a descriptor's
        for i, (a, p) in enumerate(zip(args, self._is_ptr, strict=True)):
            if p:
                bounds[4 * i], bounds[4 * i + 1] = tensor_extent(a)
                described = getattr(a, "_anvil_described", None)  # the packed words of a host descriptor
                if described is not None:
                    bounds[4 * i + 2], bounds[4 * i + 3] = tensor_extent(described)
        err = new_record()
        total = gx * gy * gz
        if self.binary.waits:
            self._run_waiting(lambda: self.cfunc(*vals, 0, total, gx, gy, gz, err, bounds), total, err)
        else:
            run_grid(lambda s, e: self.cfunc(*vals, s, e, gx, gy, gz, err, bounds), total)
        if err[0]:
            self._raise(err, args)

    def _run_waiting(self, run: Any, total: int, record: Any) -> None:
        run_waiting(run, total, record, self.name, self.binary.locs, _source_line)

    def _raise(self, err: Any, args: list[Any]) -> None:
        kind, loc_id = err[0] >> 32, err[0] & 0xFFFFFFFF
        loc: Location = self.binary.locs[loc_id - 1]
        line = _source_line(loc)
        where = f"{loc.file}:{loc.line}:{loc.col}"
        pid = (err[1], err[2], err[3])
        info: dict[str, Any] = {"kernel": self.name, "file": loc.file, "line": loc.line, "column": loc.col,
                                "program_id": list(pid)}
        if kind == 2:
            raise E.DeviceAssertError(f"device_assert failed in kernel {self.name} at {where}, program id {pid}\n"
                                      f"    {line.strip()}", **info)
        addr = err[4]
        info["address"] = addr
        detail = ""
        loc_args = self.binary.loc_args
        which = loc_args[loc_id - 1] if loc_id - 1 < len(loc_args) else None
        tensors = [(i, a, name) for i, (a, p, name) in enumerate(zip(args, self._is_ptr, self.binary.arg_names,
                                                                        strict=True)) if p]
        if which is None and tensors:  # a pointer of no single tensor: name the nearest one, and say so
            def distance(t: tuple[int, Any, str]) -> int:
                lo, hi = tensor_extent(t[1])
                return 0 if lo <= addr < hi else min(abs(addr - lo), abs(addr - hi))

            which = min(tensors, key=distance)[0]
            info["single_tensor"] = False
        for i, a, name in tensors:
            if i == which:  # the tensor the access went through (or the nearest)
                base = a.data_ptr()
                off = (addr - base) // max(1, a.element_size())
                nearest = "" if info.get("single_tensor", True) else "the pointer comes from no single tensor; "
                detail = f"; {nearest}{off} elements from the start of {name!r} (which holds {a.numel()} elements)"
                info.update(tensor=name, offset=off, numel=a.numel())
                break
        raise E.OutOfBoundsError(
            f"out-of-bounds access in kernel {self.name} at {where}, program id {pid}, "
            f"address 0x{addr:x}{detail}\n    {line.strip()}\n"
            "hint: mask the load/store (mask=offs < n) or fix the offsets", **info)


def _source_line(loc: Location) -> str:
    return linecache.getline(loc.file, loc.line)
