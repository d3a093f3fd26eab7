"""Launching: bind arguments, specialize, look up or compile, split the grid across threads."""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from .. import errors as E
from .. import knobs
from ..backends.registry import canonical_target
from ..collector import collector_paused
from ..frontend.constants import module_constant
from ..frontend.kernel import ParamSpec
from ..ir import types as T
from .compiled import CompiledKernel, compile_kernel
from .fastpath import MISSING, Unchecked, bind_grid, grid3, grid_of, make_front
from .specialize import (
    LaunchOptions,
    ParamInfo,
    _Parameter,
    _Tensor,
    arg_key,
    parse_signature_type,
    spec_for,
    without_data,
)

__all__ = ["Launcher", "compile_for_signature", "run_grid", "grid3"]

_OPTION_NAMES = {"num_warps", "num_stages", "num_ctas", "maxnreg", "cluster_dims", "enable_fp_fusion", "debug",
                 "bounds_check",
                 "launch_cooperative_grid", "launch_pdl"}
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


@functools.cache
def _threads() -> int:
    return max(1, knobs.cpu_threads())


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_threads(), thread_name_prefix="anvil-grid")
        return _pool


def run_grid(call: Callable[[int, int], None], total: int) -> None:
    """Run program ids [0, total) through `call(start, end)`, split across CPU threads."""
    n = min(_threads(), total)
    if n <= 1:
        call(0, total)
        return
    chunk = (total + n - 1) // n
    pool = _get_pool()
    futs = [pool.submit(call, s, min(s + chunk, total)) for s in range(chunk, total, chunk)]
    call(0, min(chunk, total))
    for f in futs:
        f.result()


class Launcher:
    """Per-JITFunction launch state: parameter facts computed once, the specialization cache."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        src = fn.source
        self.names: list[str] = list(src.params)
        cexpr = fn.constexpr_names
        dns = set()
        for d in fn._dns:
            dns.add(self.names[d] if isinstance(d, int) else d)
        self.params = [ParamInfo(n, n in cexpr, n in dns) for n in self.names]
        self.defaults: dict[str, Any] = {}

        py = getattr(fn, "fn", None)
        if py is not None and not src.text_module:
            # a Python kernel: Python evaluated its defaults when it ran the def (any expression the
            # module can reach, e.g. tl.core.CONSTEXPR_0); source text keeps the closed-world rules below

            with contextlib.suppress(TypeError, ValueError):
                for name, p in inspect.signature(py).parameters.items():
                    if p.default is not inspect.Parameter.empty and name in src.defaults:
                        self.defaults[name] = p.default
        for name, node in src.defaults.items():
            if name in self.defaults:
                continue
            try:
                self.defaults[name] = ast.literal_eval(node)
            except ValueError:
                with contextlib.suppress(Exception):  # an unresolvable default is simply required
                    self.defaults[name] = module_constant(node, dict(src.globals))
        self.cache: dict[Any, tuple[CompiledKernel, bool]] = {}
        self.has_descriptors = False  # set once a launch passes a host tensor descriptor
        self.index = {n: i for i, n in enumerate(self.names)}
        self._default_opts: LaunchOptions | None = None  # ANVIL_DEBUG is read at the first launch
        # The warm path (fastpath.py): the generated front, the launch entries it finds by a flat key,
        # and `kernel[grid]`'s partials of the front per grid value.
        self.fast: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self.grids: dict[Any, Callable[..., Any]] = {}
        nonconst = [i for i, p in enumerate(self.params) if not p.constexpr]
        self.raw_pos = {i: j for j, i in enumerate(nonconst)}  # parameter index -> place among the raw values
        self.front = make_front(self)

    def bound(self, grid: Any) -> Callable[..., Any]:
        """`kernel[grid]`: the front with `grid` bound, remembered for grids of plain ints (hashable,
        and few in a program; a grid function is often a new lambda per call: never remembered)."""
        b = bind_grid(self.front, grid)
        if not isinstance(b.__self__, Unchecked):  # type: ignore[attr-defined]
            if len(self.grids) >= 4096:  # a program that sweeps grids: start over rather than grow
                self.grids.clear()
            self.grids[grid] = b
        return b

    def call(self, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """`kernel.run(*args, grid=grid, **kwargs)`: the front, except for an argument given twice (by
        position and by keyword), which the general path reports as a LaunchError."""
        if kwargs and args:
            index = self.index
            if any(index.get(k, len(args)) < len(args) for k in kwargs):
                return self.run_clean(args, kwargs, grid)
        try:
            b = self.grids.get(grid)
        except TypeError:  # an unhashable grid
            b = None
        return (b or self.bound(grid))(*args, **kwargs)

    def run_clean(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> Any:
        """The general path, with its errors' internal frames dropped (jit.clean_error)."""
        try:
            return self._run(args, kwargs, grid, False)[0]
        except E.AnvilError as e:
            raise clean_error(e) from None

    def slow(self, g: Any, vals: tuple[Any, ...], extra: tuple[Any, ...], kw: dict[str, Any], nw: Any,
             ns: Any, mr: Any, cd: Any = None) -> Any:
        """The front got an unusual call (a missing argument, too many, a keyword it does not know or
        another launch option): rebuild the call as given and take the general path, which launches
        or raises the located error."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        by_keyword = False  # from the first missing parameter on, the values given went by keyword
        for n, v in zip(self.names, vals, strict=True):
            if v is MISSING:
                by_keyword = True
            elif by_keyword:
                kwargs[n] = v
            else:
                args.append(v)
        kwargs.update(_given_options(nw, ns, mr, cd))
        kwargs.update(kw)
        return self.run_clean((*args, *extra), kwargs, grid_of(g))

    def miss(self, g: Any, vals: tuple[Any, ...], fkey: tuple[Any, ...], nw: Any, ns: Any, mr: Any,
             cd: Any = None) -> Any:
        """The front found no entry for `fkey`: launch through the general path, then remember the entry."""
        if any(v is MISSING for v in vals):  # an argument not given: the general path says which
            return self.slow(g, vals, (), {}, nw, ns, mr, cd)
        kwargs = _given_options(nw, ns, mr, cd)
        try:
            # a first launch (compile, module load, launch) starts no automatic garbage collection:
            # with torch loaded a full one takes tens of ms (compiled.collector_paused)
            with collector_paused():
                ck, eligible = self._run(vals, kwargs, grid_of(g), False)
        except E.AnvilError as e:
            raise clean_error(e) from None
        if ck is not None and eligible:  # None: a traced launch (fake or meta tensors), nothing to remember
            raw_positions = [self.raw_pos[i] for i in ck.arg_index]
            n_raw, n_params = len(self.raw_pos), len(self.names)
            fe = getattr(ck, "fast_entry", None)
            placed = threading.Event()

            def install(faster: Callable[..., Any]) -> None:  # CUDA's native entry, built in the background
                placed.wait()
                self.fast[fkey] = faster

            try:
                entry = fe(raw_positions, n_raw, n_params, install) if fe is not None else None
                self.fast[fkey] = entry if entry is not None else general_entry(ck, n_raw, self.fn.__name__)
            finally:
                placed.set()
        return ck

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], LaunchOptions]:
        names = self.names
        if len(args) <= len(names):
            # fast path: remaining parameters by keyword or default, no launch options
            vals = list(args)
            used = 0
            for nm in names[len(args):]:
                v = kwargs.get(nm, _MISSING)
                if v is _MISSING:
                    v = self.defaults.get(nm, _MISSING)
                    if v is _MISSING:
                        break
                else:
                    used += 1
                vals.append(v)
            else:
                if used == len(kwargs):
                    if self._default_opts is None:
                        self._default_opts = LaunchOptions.from_kwargs({}, self.fn.debug)
                    return vals, self._default_opts
        return self._bind_slow(args, kwargs)

    def _bind_slow(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], LaunchOptions]:
        names = self.names
        if len(args) > len(names):
            raise E.LaunchError(f"{self.fn.__name__} takes {len(names)} arguments but {len(args)} were given")
        vals: list[Any] = list(args) + [_MISSING] * (len(names) - len(args))
        opts: dict[str, Any] = {}
        for k, v in kwargs.items():
            i = self.index.get(k)
            if i is None:
                if k in _OPTION_NAMES:
                    opts[k] = v
                    continue
                raise E.LaunchError(
                    f"{self.fn.__name__}() got an unexpected keyword argument {k!r}; parameters are "
                    f"{', '.join(names)} and launch options {', '.join(sorted(_OPTION_NAMES))}")
            if vals[i] is not _MISSING:
                raise E.LaunchError(f"{self.fn.__name__}() got multiple values for argument {k!r}")
            vals[i] = v
        for i, v in enumerate(vals):
            if v is _MISSING:
                n = names[i]
                if n in self.defaults:
                    vals[i] = self.defaults[n]
                else:
                    raise E.LaunchError(f"{self.fn.__name__}() is missing argument {n!r}")
        if not opts:
            if self._default_opts is None:
                self._default_opts = LaunchOptions.from_kwargs({}, self.fn.debug)
            return vals, self._default_opts
        return vals, LaunchOptions.from_kwargs(opts, self.fn.debug)

    def _key(self, vals: list[Any]) -> tuple[Any, ...]:
        """The specialization key (the hot path: tensors and ints inline, the rest via arg_key)."""
        out: list[Any] = []
        for p, v in zip(self.params, vals, strict=True):
            tv = type(v)
            if p.constexpr:  # an int as itself; other values with their type (True == 1 == 1.0)
                out.append(v if tv is int else arg_key(p, v))
            elif (tv is _Tensor or tv is _Parameter) and not p.no_specialize:
                out.append((v.dtype, v.device, not v.data_ptr() & 15))
            elif tv is int and not p.no_specialize and -(2**31) <= v < 2**31:
                out.append(1 if v == 1 else (16 if not v & 15 else 0))
            else:
                out.append(arg_key(p, v))
        return tuple(out)

    def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any, warmup: bool) -> CompiledKernel | None:
        return self._run(args, kwargs, grid, warmup)[0]

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any,
             warmup: bool) -> tuple[CompiledKernel | None, bool]:
        """The general path; also says whether the warm path may launch this specialization (no
        host tensor descriptors, no debug option other than the default). A launch with a fake or
        meta tensor (tracing a torch op for shapes) binds its arguments, then returns (None, False)
        without compiling or running anything."""
        vals, opts = self.bind(args, kwargs)
        key = self._key(vals)
        if opts is not self._default_opts:
            key = (key, opts)
        hit = self.cache.get(key)
        if hit is None:
            if without_data(vals):  # traced (fake or meta tensors): nothing to compile or run, nothing cached
                return None, False
            specs = [spec_for(p, v, self.fn.__name__) for p, v in zip(self.params, vals, strict=True)]
            ck = compile_kernel(self.fn, specs, opts, _target_for(vals, self.fn.__name__))
            desc = any(type(s.value).__name__ == "DescriptorArg" for s in specs)
            hit = self.cache[key] = (ck, not desc and opts.debug == self._default_debug()
                                    and not opts.bounds_check)
            self.has_descriptors |= desc
        ck, eligible = hit
        if warmup:
            return ck, eligible
        if self.has_descriptors:  # host tensor descriptors travel as their packed int64 words
            vals = [v.__anvil_packed__() if hasattr(v, "__anvil_packed__") else v for v in vals]
        g = grid(dict(zip(self.names, vals, strict=True))) if callable(grid) else grid
        if type(g) is tuple and len(g) == 1 and type(g[0]) is int and 0 <= g[0] < 2**31:
            ck.launch((g[0], 1, 1), vals)  # the common case, without _grid3's checks
        else:
            ck.launch(grid3(g), vals)
        return ck, eligible

    def _default_debug(self) -> bool:
        if self._default_opts is None:
            self._default_opts = LaunchOptions.from_kwargs({}, self.fn.debug)
        return self._default_opts.debug


def general_entry(ck: Any, n_raw: int, name: str) -> Callable[..., Any]:
    """A launch entry that calls `ck.launch` (the CPU backend). The key's device token (get_device)
    is -1 for CPU and meta tensors alike: the devices are checked here, with the general path's errors,
    and a launch with meta tensors runs nothing, as on the general path."""
    launch = ck.launch

    def entry(gx: int, gy: int, gz: int, *rest: Any) -> Any:
        params = list(rest[n_raw:])
        try:
            _target_for(params, name)
        except E.LaunchError:
            if without_data(params):  # meta tensors: shape inference, nothing to run
                return None
            raise
        launch((gx, gy, gz), params)
        return ck

    entry.__anvil_result__ = ck  # type: ignore[attr-defined]
    return entry


def clean_error(e: E.AnvilError) -> E.AnvilError:
    """Drop the compiler's internal frames unless ANVIL_TRACEBACK=1 asks for them."""
    return e if knobs.traceback() else e.with_traceback(None)


_MISSING = object()


def _target_for(vals: list[Any], name: str) -> str:
    devices = set()
    for v in vals:
        dev = getattr(v, "device", None)
        if dev is not None and hasattr(v, "data_ptr"):
            devices.add(str(dev.type))
    if len(devices) > 1:
        raise E.LaunchError(f"{name}: tensors are on different devices ({', '.join(sorted(devices))}); "
                            "move them to one device (e.g. .cpu() or .cuda())")
    dev = devices.pop() if devices else "cpu"
    if dev == "cuda":
        amd = _rocm_arch()
        if amd is not None:  # a ROCm build of torch: its "cuda" tensors live on an AMD GPU
            return f"amd:{amd}"
        # deferred: the NVIDIA backend loads on the first CUDA launch (backends load on first use)
        from ..backends.nvidia.driver import device_arch

        return f"cuda:{device_arch()}"
    if dev != "cpu":
        raise E.LaunchError(f"{name}: tensors on {dev!r} are not supported; use CPU or CUDA tensors")
    return "cpu"


def _rocm_arch() -> str | None:
    """The current device's AMD architecture (gfx942, ...) under a ROCm build of torch, else None."""
    if not getattr(torch.version, "hip", None):
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return str(getattr(props, "gcnArchName", "") or "gfx942").split(":")[0]


def _given_options(nw: Any, ns: Any, mr: Any, cd: Any = None) -> dict[str, Any]:
    """The launch options the front took out of a call (None: not given)."""
    return {k: v for k, v in (("num_warps", nw), ("num_stages", ns), ("maxnreg", mr), ("cluster_dims", cd))
            if v is not None}


def compile_for_signature(fn: Any, signature: dict[str, str], constexprs: dict[str, Any], target: str,
                          num_warps: int, num_stages: int, debug: bool,
                          maxnreg: int | None = None, cluster_dims: Any = None) -> CompiledKernel:
    """Compile for an explicit signature (no tensors needed): what the tools use."""
    names = list(fn.source.params)
    cexpr = fn.constexpr_names
    launcher = fn.launcher
    src = fn.source

    def at(name: str | None, message: str, hint: str = "") -> E.ArgumentError:
        """The error located at parameter `name` of the kernel's definition (its def line if None)."""
        node = next((a for a in src.tree.args.args if a.arg == name), src.tree)
        loc = src.loc(node)
        return E.ArgumentError(message, loc, src.source_line(loc), hint)

    specs = []
    for n in names:
        if n in cexpr or n in constexprs:
            if n in constexprs:
                v = constexprs[n]
            elif n in launcher.defaults:
                v = launcher.defaults[n]
            else:
                raise at(n, f"constexpr parameter {n!r} of {fn.__name__} needs a value",
                         f"pass constexprs={{{n!r}: ...}}")
            specs.append(ParamSpec(n, True, getattr(v, "value", v)))
            continue
        if n not in signature:
            raise at(n, f"the signature gives no type for parameter {n!r} of {fn.__name__} "
                     "(e.g. '*fp32' for a tensor, 'i32' for an integer)")
        text, _, div = signature[n].partition(":")  # Triton's "i32:16" marks an int divisible by 16
        ty = parse_signature_type(text)
        divisibility = int(div) if div.isdigit() else (16 if isinstance(ty, T.PointerType) else 1)
        specs.append(ParamSpec(n, False, None, ty, divisibility))
    extra = set(signature) - set(names)
    if extra:
        raise at(None, f"the signature names unknown parameters of {fn.__name__}: {', '.join(sorted(extra))}; "
                 f"its parameters are {', '.join(names)}")
    extra = set(constexprs) - set(names)
    if extra:
        raise at(None, f"the constexprs name unknown parameters of {fn.__name__}: {', '.join(sorted(extra))}; "
                 f"its parameters are {', '.join(names)}")

    tgt = canonical_target("cpu" if target == "auto" else target)
    opts = LaunchOptions.from_kwargs({"num_warps": num_warps, "num_stages": num_stages, "maxnreg": maxnreg,
                                      "cluster_dims": cluster_dims}, debug)
    return compile_kernel(fn, specs, opts, tgt)
