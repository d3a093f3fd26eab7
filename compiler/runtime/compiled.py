"""Compiled kernels: source to binary through the stages (stages.py), the memory and disk caches,
and the one kernel type every backend launches through."""

from __future__ import annotations

import functools
import hashlib
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import errors as E
from .. import knobs
from ..backends.contract import Artifacts, Backend, StageContext
from ..backends.registry import backend_for
from ..collector import collector_paused
from ..frontend.codegen import GenOptions
from ..frontend.kernel import generate_kernel
from ..ir import types as T
from ..passes.unmasked import unmasked_program_accesses
from ..version import __version__
from . import disk_cache
from . import stages as stage_loop  # its functions looked up at each call: tests wrap them
from .function import as_device_function
from .specialize import LaunchOptions

__all__ = ["CompiledKernel", "KernelMetadata", "compile_kernel"]


class KernelMetadata(dict):  # type: ignore[type-arg]
    """A compiled kernel's metadata: a dict, whose keys also read as attributes (`metadata.shared`,
    `metadata.num_warps`), as code written for Triton's named tuple reads them."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"kernel metadata has no {name!r}") from None


class CompiledKernel:
    """One specialization of a kernel, compiled for a target and ready to launch, on any backend.

    Triton's attributes are here: `name`, `asm` (the artifacts under Triton's names: 'tir', 'llir',
    and 'ptx', 'cubin' for CUDA or 'asm', the host assembly made on first access, for the CPU),
    `metadata`, `shared`, `n_regs` and `n_spills` (always 0 on the CPU, where there is no register
    file to count or spill from). `artifacts` holds every stage's output (the Tile IR after each
    pass, ...), `binary` the backend's view of them. `launch(grid, params)` runs it, where `params`
    holds a value for every kernel parameter (constants ignored): through the backend's launcher,
    whose warm entries (fast_entry) launch without this object.
    """

    def __init__(self, backend: Backend, artifacts: Artifacts, options: LaunchOptions, timings: dict[str, float],
                 cache_key: str, arg_index: list[int]) -> None:
        self.name = artifacts.name
        self.target = artifacts.target
        self.backend = backend
        self.artifacts = artifacts
        self.options = options
        self.cache_key = cache_key
        self.arg_index = arg_index
        self.binary = backend.binary(artifacts)
        self.arg_types: list[T.Type] = list(self.binary.arg_types)
        self.metadata = KernelMetadata(name=self.name, target=self.target, compile_ms=timings,
                                       num_stages=options.num_stages, debug=options.debug,
                                       **backend.kernel_metadata(artifacts, options))
        self.asm = backend.asm(self)
        self.launcher = backend.launcher(self)

    def launch(self, grid: tuple[int, int, int], params: list[Any]) -> None:
        """Run on `grid`; `params` holds a value for every kernel parameter (constants ignored)."""
        self.launcher.launch(grid, params)

    @property
    def function(self) -> Any:
        """The loaded kernel as its backend's driver holds it (on a GPU: loaded on first use)."""
        return self.launcher.function  # type: ignore[attr-defined]

    @property
    def n_regs(self) -> int:
        if self.metadata.get("n_regs") is None:
            self.function  # noqa: B018 - loading the binary records the driver's count
        return int(self.metadata["n_regs"])

    @property
    def n_spills(self) -> int:
        return int(self.metadata.get("n_spills") or 0)

    @property
    def shared(self) -> int:
        return int(self.metadata["shared"])

    def fast_entry(self, raw_positions: list[int], n_raw: int, n_params: int,
                   install: Callable[[Callable[..., Any]], None] | None = None) -> Callable[..., Any] | None:
        """The backend's warm-launch entry (runtime/fastpath.py's protocol), or None where it has
        none (the general entry of runtime/launch.py then calls `launch`)."""
        fe = getattr(self.launcher, "fast_entry", None)
        return None if fe is None else fe(raw_positions, n_raw, n_params, install)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"CompiledKernel({self.name}, {self.target})"


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
    """Everything that changes the binary: the source (with every @jit dependency), this build of
    the compiler, the target, the launch options and the backend's options (the host CPU, code
    generation knobs), and the specialization."""
    parts = [fn.deep_hash, compiler_fingerprint(), target, repr(opts), repr(backend_for(target).options(target, opts)),
             f"f32_default={knobs.f32_default()}"]
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
    arg_index = [i for i, s in enumerate(specs) if not s.constant]
    disk = _disk_load(key) if knobs.cache_enabled() else None
    if disk is not None and disk.target == target:
        ms = {"cache_load_ms": (time.perf_counter() - t0) * 1e3}
        ck = CompiledKernel(backend_for(target), disk, opts, ms, key, arg_index)
        _remember(key, ck)
        return ck
    try:
        artifacts, timings = _build(fn, specs, opts, target, key, t0)
    except (RecursionError, MemoryError) as e:
        what = "nests too deeply" if isinstance(e, RecursionError) else "needs too much memory"
        loc = fn.source.loc(fn.source.tree)
        raise E.UnsupportedError(f"{fn.__name__}: the kernel {what} to compile", loc, fn.source.source_line(loc),
                                 "split deep expressions and nested blocks, or unroll less") from None
    ck = CompiledKernel(backend_for(target), artifacts, opts, timings, key, arg_index)
    _remember(key, ck)
    if knobs.cache_enabled():
        _disk_store(key, artifacts)
    return ck


def _build(fn: Any, specs: list[Any], opts: LaunchOptions, target: str, key: str,
           t0: float) -> tuple[Artifacts, dict[str, float]]:
    """Frontend, then every stage (stages.py) for one specialization (the disk cache missed)."""
    def resolve(obj: Any) -> Any:
        j = as_device_function(obj)
        return j.source if j is not None else None

    backend = backend_for(target)
    stages = backend.stages(backend.options(target, opts))
    t1 = time.perf_counter()
    ir_fn = generate_kernel(fn.source, specs, GenOptions(opts.debug, target, opts.num_warps), resolve)
    ctx = StageContext(ir_fn, fn.__name__, f"anvil_{_sanitize(fn.__name__)}_{key[:16]}")
    ctx.timings["frontend_ms"] = (time.perf_counter() - t1) * 1e3
    ctx.metadata.update(arg_types=[str(a.type) for a in ir_fn.args], arg_names=list(ir_fn.arg_names),
                        checked=opts.checked)
    if knobs.verify_ir():
        stage_loop.check(ctx, "the frontend")
    stage_loop.run_stages(ctx, stage_loop.tile_ir_passes())
    # facts for the tools' messages, read before the backend's stages rewrite the function
    ctx.metadata["unmasked_accesses"] = [a.to_dict() for a in unmasked_program_accesses(ir_fn)]
    stage_loop.run_stages(ctx, stages)
    artifacts = Artifacts(target, ctx.name, ctx.symbol, ctx.outputs, ctx.metadata, ctx.live)
    if knobs.dump_ir():
        sys.stderr.write(artifacts.tile_ir)
    if knobs.dump_llir():
        sys.stderr.write(artifacts.text("llir"))
    ctx.timings["total_ms"] = (time.perf_counter() - t0) * 1e3
    return artifacts, ctx.timings


def _sanitize(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _disk_store(key: str, artifacts: Artifacts) -> None:
    disk_cache.store(key, artifacts, compiler_fingerprint())


def _disk_load(key: str) -> Artifacts | None:
    return disk_cache.load(key, compiler_fingerprint())
