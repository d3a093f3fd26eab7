"""Compiled kernels: the pipeline from source to binary, caches, and the launch of one binary."""

from __future__ import annotations

import ctypes
import functools
import gc
import hashlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import __version__, knobs
from .. import errors as E
from ..ir import types as T
from ..ir.core import Location
from ..passes.unmasked import unmasked_program_accesses
from .specialize import LaunchOptions, check_cluster_grid, torch_elem

__all__ = ["CompiledKernel", "KernelMetadata", "compile_kernel"]


def tensor_extent(a: Any) -> tuple[int, int]:
    """The [lo, hi) byte addresses a tensor's elements occupy (strides of either sign)."""
    if a.numel() == 0:
        return a.data_ptr(), a.data_ptr()
    lo_el = sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.stride(), strict=True))
    hi_el = sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.stride(), strict=True)) + 1
    return a.data_ptr() + lo_el * a.element_size(), a.data_ptr() + hi_el * a.element_size()


class KernelMetadata(dict):  # type: ignore[type-arg]
    """A compiled kernel's metadata: a dict, whose keys also read as attributes (`metadata.shared`,
    `metadata.num_warps`), as code written for Triton's named tuple reads them."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"kernel metadata has no {name!r}") from None


class CompiledKernel:
    """One specialization of a kernel, compiled for a target and ready to launch.

    Triton's attributes are here too: `name`, `asm`, `metadata`, `shared`, and `n_regs` and
    `n_spills`, always 0 on the CPU, where there is no register file to count or spill from.
    """

    def __init__(self, name: str, target: str, tir: str, binary: Any, options: LaunchOptions,
                 timings: dict[str, float], cache_key: str) -> None:
        from ..backends.cpu import load_binary

        self.name = name
        self.target = target
        self.binary = binary
        self.options = options
        self.cache_key = cache_key
        self.kernel = load_binary(binary)
        self.cfunc = self.kernel.cfunc
        self.arg_types: list[T.Type] = binary.arg_types
        self._is_ptr = [isinstance(t, T.PointerType) for t in self.arg_types]
        self._tir = tir
        self.metadata = KernelMetadata(
            name=name, target=target, compile_ms=timings, num_warps=options.num_warps,
            num_stages=options.num_stages, debug=options.debug, arena_bytes=binary.arena_bytes,
            shared=0, n_regs=0, n_spills=0, unmasked_accesses=binary.unmasked, notes=binary.notes,
        )
        self.asm = _Artifacts(self)
        self.arg_index: list[int] = []

    @property
    def n_regs(self) -> int:
        return 0

    @property
    def n_spills(self) -> int:
        return 0

    @property
    def shared(self) -> int:
        return int(self.metadata["shared"])

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
            from .waiting import new_record

            record = new_record()
            self._run_waiting(lambda: cfunc(*vals, 0, total, gx, gy, gz, record, None), total, record)
            return
        if total == 1:
            cfunc(*vals, 0, 1, gx, gy, gz, None, None)
            return
        from .launch import run_grid

        run_grid(lambda s, e: cfunc(*vals, s, e, gx, gy, gz, None, None), total)

    def _launch_debug(self, grid: tuple[int, int, int], args: list[Any], vals: list[Any]) -> None:
        from .launch import run_grid
        from .waiting import new_record

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
        from .waiting import run_waiting

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
        loc_args = getattr(self.binary, "loc_args", [])
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

    def __repr__(self) -> str:
        return f"CompiledKernel({self.name}, {self.target})"


def _source_line(loc: Location) -> str:
    import linecache

    return linecache.getline(loc.file, loc.line)


class _Artifacts(dict):  # type: ignore[type-arg]
    """`kernel.asm`: 'tir', 'llir', and 'asm' (host assembly, produced on first access)."""

    def __init__(self, ck: CompiledKernel) -> None:
        super().__init__(tir=ck._tir, llir=ck.binary.llir)
        self._ck = ck

    def __missing__(self, key: str) -> str:
        if key in ("asm", "x86", "ptx"):
            if key == "ptx":
                raise KeyError("ptx exists only for CUDA targets; this kernel was compiled for the CPU")
            from ..backends.cpu import optimize_parsed
            from ..backends.cpu.engine import jit_engine

            text = jit_engine().asm(optimize_parsed(self._ck.binary.llir))
            self[key] = text
            return text
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in ("tir", "llir", "asm")


@functools.cache
def compiler_fingerprint() -> str:
    """The version and a hash of the compiler's own source files (their names, sizes and
    modification times): kernels cached by another build of the compiler (an upgrade, a change in
    a checkout) are compiled again, not reused."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):  # name, size and time of each file: no reading on the first compile
        st = p.stat()
        h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return f"{__version__}+{h.hexdigest()[:16]}"


def _cache_key(fn: Any, specs: list[Any], opts: LaunchOptions, target: str) -> str:
    parts = [fn.deep_hash, compiler_fingerprint(), target, repr(opts)]
    if target == "cpu":  # the host CPU only matters to CPU code (and reading it initialises LLVM's JIT)
        from ..backends.cpu.engine import host

        parts += [host().cpu, host().features]
    else:
        parts.append(knobs.codegen_key())
    for s in specs:
        parts.append(f"{s.name}:{s.constant}:{s.value!r}:{s.type}:{s.divisibility}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


_MEMORY: dict[str, CompiledKernel] = {}  # by cache key, oldest first; at most _MEMORY_KERNELS
_MEMORY_KERNELS = 256  # a long-running process compiling many kernels keeps only the most recent


def forget_compiled() -> None:
    """Drop every kernel compiled in this process from the in-memory cache (a compile worker keeps none
    between jobs: each holds its native code, about 0.6 MB for a small kernel)."""
    _MEMORY.clear()


def _remember(key: str, ck: Any) -> None:
    _MEMORY[key] = ck
    while len(_MEMORY) > _MEMORY_KERNELS:
        _MEMORY.pop(next(iter(_MEMORY)))


_gc_lock = threading.Lock()
_gc_depth = 0  # compiles in flight (any thread)
_gc_ours = False  # the collector was on when the first of them started, and they turned it off


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic garbage collection while kernels compile. A compile allocates 10^4-10^5 objects
    (Tile IR, llvmlite IR); with torch and triton loaded, a full collection that they trigger walks
    the whole heap (~100 ms during a layer norm compile, measured). Afterwards the young generations
    are collected explicitly (the compile's garbage: llvmlite modules are cyclic): that costs what
    the automatic young collections would have, and it leaves the counters at zero, so the launch
    that follows the compile starts no collection either. Full collections still happen, between
    compiles, when Python's own thresholds call for them. A collector the program turned off stays off."""
    global _gc_depth, _gc_ours
    with _gc_lock:
        if _gc_depth == 0 and gc.isenabled():
            gc.disable()
            _gc_ours = True
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            last = _gc_depth == 0 and _gc_ours
        if last:
            gc.collect(1)
            with _gc_lock:
                if _gc_depth == 0 and _gc_ours:
                    _gc_ours = False
                    gc.enable()


_IN_FLIGHT: dict[str, threading.Event] = {}  # compiles under way, by cache key
_in_flight_lock = threading.Lock()


def compile_kernel(fn: Any, specs: list[Any], opts: LaunchOptions, target: str) -> CompiledKernel:
    """Frontend -> passes -> backend, through the memory and disk caches. A compile of the same
    key already under way on another thread (a compile started ahead of the first launch) is waited
    for, not repeated; if it failed, this one compiles and raises the error itself."""
    key = _cache_key(fn, specs, opts, target)
    hit = _MEMORY.get(key)
    if hit is not None:
        return hit
    with _in_flight_lock:
        other = _IN_FLIGHT.get(key)
        if other is None:
            mine = _IN_FLIGHT[key] = threading.Event()
    if other is not None:
        other.wait()
        hit = _MEMORY.get(key)
        if hit is not None:
            return hit
        with collector_paused():
            return _compile(fn, specs, opts, target, key)
    try:
        with collector_paused():
            return _compile(fn, specs, opts, target, key)
    finally:
        with _in_flight_lock:
            del _IN_FLIGHT[key]
        mine.set()


def _compile(fn: Any, specs: list[Any], opts: LaunchOptions, target: str, key: str) -> CompiledKernel:
    t0 = time.perf_counter()
    disk = _disk_load(key) if knobs.cache_enabled() and target == "cpu" else None
    if disk is not None:
        tir, binary = disk
        ck = CompiledKernel(fn.__name__, target, tir, binary, opts, {"cache_load_ms": (time.perf_counter() - t0) * 1e3},
                            key)
        ck.arg_index = [i for i, s in enumerate(specs) if not s.constant]
        _remember(key, ck)
        return ck
    try:
        return _build(fn, specs, opts, target, key, t0)
    except (RecursionError, MemoryError) as e:
        what = "nests too deeply" if isinstance(e, RecursionError) else "needs too much memory"
        loc = fn.source.loc(fn.source.tree)
        raise E.UnsupportedError(f"{fn.__name__}: the kernel {what} to compile", loc, fn.source.source_line(loc),
                                 "split deep expressions and nested blocks, or unroll less") from None


def _build(fn: Any, specs: list[Any], opts: LaunchOptions, target: str, key: str, t0: float) -> CompiledKernel:
    """Frontend, passes and backend for one specialization (the disk cache missed)."""
    from ..frontend import GenOptions, generate_kernel
    from ..ir.printer import print_function
    from ..passes import run_pipeline
    from .jit import as_jit

    def resolve(obj: Any) -> Any:
        j = as_jit(obj)
        return j.source if j is not None else None

    ir_fn = generate_kernel(fn.source, specs, GenOptions(opts.debug, target, opts.num_warps), resolve)
    t1 = time.perf_counter()
    run_pipeline(ir_fn)
    tir = print_function(ir_fn)
    if knobs.dump_ir():
        sys.stderr.write(tir)
    # facts for the tools' messages, read before a backend rewrites the function
    unmasked = [a.to_dict() for a in unmasked_program_accesses(ir_fn)]
    t2 = time.perf_counter()
    symbol = f"anvil_{_sanitize(fn.__name__)}_{key[:16]}"
    if target.startswith("cuda"):
        return _finish_cuda(fn, specs, opts, target, key, ir_fn, tir, symbol, t0, t1, t2, unmasked)
    from ..backends import cpu
    from ..backends.cpu.libcalls import scalar_library_calls

    binary = cpu.compile_function(ir_fn, symbol, opts.checked)
    binary.arg_names = list(ir_fn.arg_names)
    if knobs.dump_llir():
        sys.stderr.write(binary.llir)
    binary.unmasked = unmasked
    binary.notes = [_libcall_note(*call) for call in scalar_library_calls(ir_fn, binary.llir)]
    timings = {"frontend_ms": (t1 - t0) * 1e3, "passes_ms": (t2 - t1) * 1e3, **binary.timings}
    timings["total_ms"] = (time.perf_counter() - t0) * 1e3
    ck = CompiledKernel(fn.__name__, target, tir, binary, opts, timings, key)
    ck.arg_index = [i for i, s in enumerate(specs) if not s.constant]
    _remember(key, ck)
    if knobs.cache_enabled():
        _disk_store(key, tir, binary)
    return ck


def _libcall_note(name: str, elem: str, c_name: str, loc: Location) -> dict[str, object]:
    return {
        "message": f"{name} on {elem} tiles is a call of the C library's {c_name} for each element, inside the "
        "vector loop (the CPU backend has no vector form of it for this type): several times slower than the "
        "vectorized math around it",
        "hint": "compute it in float32 where the precision allows (float32 math is vectorized on the CPU)"
        if elem == "fp64" else "expect it to dominate this kernel's time on the CPU",
        "line": loc.line, "column": loc.col,
    }


def _finish_cuda(fn: Any, specs: list[Any], opts: LaunchOptions, target: str, key: str, ir_fn: Any, tir: str,
                 symbol: str, t0: float, t1: float, t2: float, unmasked: list[dict[str, object]]) -> Any:
    from ..backends.nvidia.notes import assembler_notes
    from .cuda import CudaCompiledKernel, compile_cuda

    dots = [op.loc for op in ir_fn.walk() if op.opcode == "dot"]
    binary = compile_cuda(ir_fn, symbol, opts, target)
    if knobs.dump_llir():
        sys.stderr.write(binary.llir)
    timings = {"frontend_ms": (t1 - t0) * 1e3, "passes_ms": (t2 - t1) * 1e3, **binary.timings}
    timings["total_ms"] = (time.perf_counter() - t0) * 1e3
    ck = CudaCompiledKernel(fn.__name__, target, tir, binary, opts, timings, key)
    ck.metadata["unmasked_accesses"] = unmasked
    ck.metadata["notes"] = assembler_notes(binary.report, ir_fn.loc, dots)
    ck.arg_index = [i for i, s in enumerate(specs) if not s.constant]
    _remember(key, ck)
    return ck


def _sanitize(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _disk_store(key: str, tir: str, binary: Any) -> None:
    d = knobs.cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        meta = {
            "name": binary.name, "symbol": binary.symbol, "arena_bytes": binary.arena_bytes,
            "locs": [[loc.file, loc.line, loc.col, loc.func] for loc in binary.locs],
            "loc_args": list(binary.loc_args),
            "arg_types": [str(t) for t in binary.arg_types], "arg_names": binary.arg_names,
            "debug": binary.debug, "tir": tir, "version": compiler_fingerprint(), "waits": binary.waits,
            "unmasked": binary.unmasked, "notes": binary.notes,
        }
        tmp = d / f"{key}.tmp"
        (d / f"{key}.ll").write_text(binary.llir)
        if binary.obj:
            (d / f"{key}.o").write_bytes(binary.obj)
        tmp.write_text(json.dumps(meta))
        tmp.replace(d / f"{key}.json")
    except OSError:
        pass  # the cache is an optimisation: an unwritable directory only costs recompiles


def _parse_type(s: str) -> T.Type:
    from .specialize import parse_signature_type

    if s.startswith("!ptr<"):
        return T.PointerType(T.scalar(s[5:-1]))
    return parse_signature_type(s)


def _disk_load(key: str) -> tuple[str, Any] | None:
    from ..backends.cpu import CPUBinary

    d = knobs.cache_dir()
    try:
        meta = json.loads((d / f"{key}.json").read_text())
        llir = (d / f"{key}.ll").read_text()
        objp = d / f"{key}.o"
        obj = objp.read_bytes() if objp.exists() else None
    except (OSError, ValueError):
        return None
    if meta.get("version") != compiler_fingerprint():
        return None
    binary = CPUBinary(meta["name"], meta["symbol"], llir, obj, meta["arena_bytes"],
                       [Location(f, ln, c, fn) for f, ln, c, fn in meta["locs"]],
                       [_parse_type(t) for t in meta["arg_types"]], meta["debug"])
    binary.arg_names = meta["arg_names"]
    binary.loc_args = meta.get("loc_args", [])
    binary.waits = bool(meta.get("waits", False))
    binary.unmasked = meta.get("unmasked", [])
    binary.notes = meta.get("notes", [])
    return meta["tir"], binary


_ = torch_elem
