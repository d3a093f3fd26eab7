"""`autotune`, `Config` and `heuristics` with Triton's signatures.

The autotuner times each config once per key (the values of the `key` arguments) and keeps the
fastest. With CUDA tensors, all configs are compiled first, in parallel, and configs whose
kernels need more shared memory or registers than the device has are dropped before timing
(`Autotuner.pruned` says why); timings synchronize the device. Outputs that configs overwrite
are restored between trials (`reset_to_zero`, `restore_value`), so tuning never changes a
kernel's results.
"""

from __future__ import annotations

import inspect
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from .. import errors as E
from .jit import KernelInterface, as_kernel, jit
from .specialize import without_data

__all__ = ["Config", "Autotuner", "Heuristics", "autotune", "heuristics", "precompile", "exceeds", "device_limits"]


class Config:
    """One set of meta-parameters: `Config({"BLOCK": 128}, num_warps=4, num_stages=3)`."""

    def __init__(self, kwargs: Mapping[str, Any], num_warps: int = 4, num_stages: int = 3, num_ctas: int = 1,
                 maxnreg: int | None = None, pre_hook: Callable[..., Any] | None = None,
                 cluster_dims: Any = None, **_: Any) -> None:
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.cluster_dims = cluster_dims
        self.pre_hook = pre_hook

    def _extra(self) -> dict[str, Any]:
        """The launch options set beyond warps and stages."""
        return {k: v for k, v in (("maxnreg", self.maxnreg), ("cluster_dims", self.cluster_dims)) if v is not None}

    def all_kwargs(self) -> dict[str, Any]:
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages, **self._extra()}

    def __repr__(self) -> str:
        kw = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        extra = "".join(f", {k}: {v}" for k, v in self._extra().items())
        return f"{kw}, num_warps: {self.num_warps}, num_stages: {self.num_stages}{extra}"


class Autotuner(KernelInterface):
    """Triton's `Autotuner`, with its constructor, for libraries that subclass or build it directly.

    `pre_hook(nargs, reset_only=False)` and `post_hook(nargs, exception)` behave as in Triton: around
    every benchmarked run of a config they get the arguments by name with the config's
    meta-parameters (`exception` is what the run raised, or None), and after tuning `pre_hook` is
    called once more with `reset_only=True` before the chosen config runs. A config's own `pre_hook`
    runs first. Unlike Triton, where a `pre_hook` replaces it, `reset_to_zero`/`restore_value`
    handling stays on beside the hooks, so tuning never changes results.

    Accepted for Triton's signature, without effect here: `use_cuda_graph` (launches are timed
    directly; the CPU has no graphs), `warmup` and `rep` (deprecated in Triton; each config is timed
    for about 0.2 s) and `cache_results` (choices are kept for the process, not on disk).
    `do_bench(fn, quantiles=...)`, when given, times the configs instead of Anvil's own loop.
    """

    def __init__(self, fn: Any, arg_names: list[str], configs: list[Config], key: list[str],
                 reset_to_zero: Iterable[str] | None, restore_value: Iterable[str] | None,
                 pre_hook: Callable[..., Any] | None = None, post_hook: Callable[..., Any] | None = None,
                 prune_configs_by: Mapping[str, Any] | None = None, warmup: int | None = None,
                 rep: int | None = None, use_cuda_graph: bool = False, do_bench: Callable[..., Any] | None = None,
                 cache_results: bool = False) -> None:
        self.fn = fn
        self.arg_names = arg_names
        self.configs = configs or [Config({})]
        self.key = list(key)
        self.keys = self.key  # Triton's name for it
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.user_pre_hook = pre_hook
        self.user_post_hook = post_hook
        self.user_defined_pre_hook = pre_hook is not None
        self.user_defined_post_hook = post_hook is not None
        prune = dict(prune_configs_by or {})
        # Triton's attribute names: code that rebuilds a tuner from one (torch's wrap_triton) reads them
        self.early_config_prune = prune.get("early_config_prune")
        self.perf_model = prune.get("perf_model")
        self.configs_top_k = prune.get("top_k")
        self.base_fn = fn  # the innermost Python function, under any heuristics and JIT wrappers
        while not inspect.isfunction(self.base_fn) and hasattr(self.base_fn, "fn"):
            self.base_fn = self.base_fn.fn
        self.num_warmups, self.num_reps = warmup, rep
        self.use_cuda_graph = use_cuda_graph
        self.user_do_bench = do_bench
        self.cache_results = cache_results
        self.cache: dict[Any, Config] = {}
        self.best_config: Config | None = None
        self.timings: dict[Config, float] = {}
        self.pruned: dict[Config, str] = {}  # configs dropped before timing, and why
        self.__name__ = getattr(fn, "__name__", "kernel")

    def _named(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        named = dict(zip(self.arg_names, args, strict=False))
        named.update(kwargs)
        return named

    def _pruned(self, named: dict[str, Any]) -> list[Config]:
        configs = self.configs
        if self.early_config_prune is not None:
            configs = list(self.early_config_prune(configs, named))
        model = self.perf_model
        top_k = self.configs_top_k
        if model is not None and top_k:
            k = top_k if isinstance(top_k, int) else int(len(configs) * top_k)
            configs = sorted(configs, key=lambda c: model(**named, **c.all_kwargs()))[:max(1, k)]
        return configs

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        named = self._named(args, kwargs)
        key = tuple(_key_of(named.get(k)) for k in self.key)
        cfg = self.cache.get(key)
        if cfg is None:
            if without_data(named.values()):  # traced (fake or meta tensors): nothing to time, no choice to keep
                return None
            configs = self._pruned(named)
            if len(configs) == 1:
                cfg = configs[0]
            else:
                cfg = self._tune(configs, args, kwargs, grid, named)
                self._reset(named)  # the benchmarks' sums are not the launch's
                if self.user_pre_hook is not None:
                    self.user_pre_hook({**named, **cfg.all_kwargs()}, reset_only=True)
            self.cache[key] = cfg
        self.best_config = cfg
        clash = set(cfg.kwargs) & set(kwargs)
        if clash:
            raise E.LaunchError(f"{self.__name__}: {', '.join(sorted(clash))} are set by the autotuner's configs; "
                                "do not pass them at launch")
        if cfg.pre_hook is not None:
            cfg.pre_hook({**named, **cfg.all_kwargs()})
        return self.fn.run(*args, grid=grid, **kwargs, **cfg.all_kwargs())

    def _tune(self, configs: list[Config], args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any,
              named: dict[str, Any]) -> Config:
        saved = {n: named[n].clone() for n in self.restore_value if hasattr(named.get(n), "clone")}
        cuda = _cuda_device(named)
        if cuda is not None:
            configs = self._precompiled(configs, args, kwargs, grid, cuda)
        best, best_t = configs[0], float("inf")
        for cfg in configs:
            try:
                t = self._bench(cfg, args, kwargs, grid, named)
            except E.CompilationError:
                raise
            except E.AnvilError:
                continue
            self.timings[cfg] = t
            if t < best_t:
                best, best_t = cfg, t
            for n, v in saved.items():
                named[n].copy_(v)
        return best

    def _bench(self, cfg: Config, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any,
               named: dict[str, Any]) -> float:
        nargs = {**named, **cfg.all_kwargs()}

        def once() -> None:
            self._reset(named)
            if cfg.pre_hook is not None:
                cfg.pre_hook(nargs)
            if self.user_pre_hook is not None:
                self.user_pre_hook(nargs)
            try:
                self.fn.run(*args, grid=grid, **kwargs, **cfg.all_kwargs())
            except Exception as e:
                if self.user_post_hook is not None:
                    self.user_post_hook(nargs, exception=e)
                raise
            if self.user_post_hook is not None:
                self.user_post_hook(nargs, exception=None)

        if self.user_do_bench is not None:
            t = self.user_do_bench(once, quantiles=(0.5, 0.2, 0.8))
            return float(t[0] if isinstance(t, (list, tuple)) else t)
        once()  # compile + warm
        sync = _synchronizer(named)
        times: list[float] = []
        deadline = time.perf_counter() + 0.2
        while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 25):
            sync()
            t0 = time.perf_counter()
            once()
            sync()  # GPU launches are asynchronous: time the kernel, not its launch
            times.append(time.perf_counter() - t0)
        times.sort()
        return times[len(times) // 2]

    def _reset(self, named: Mapping[str, Any]) -> None:
        for n in self.reset_to_zero:
            t = named.get(n)
            if t is not None and hasattr(t, "zero_"):
                t.zero_()

    def _precompiled(self, configs: list[Config], args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any,
                     device: Any) -> list[Config]:
        """Compile every config at once (threads: LLVM and ptxas run outside the GIL), then drop
        those the device cannot run; `self.pruned` says why each was dropped."""

        def compile_one(cfg: Config) -> Any:
            return self.fn.warmup(*args, grid=grid, **kwargs, **cfg.all_kwargs())

        limits = device_limits(device)
        keep = []
        for cfg, kernel in precompile(configs, compile_one):
            if isinstance(kernel, E.CompilationError):
                raise kernel
            why = str(kernel) if isinstance(kernel, E.AnvilError) else exceeds(getattr(kernel, "metadata", {}), limits)
            if why is None:
                keep.append(cfg)
            else:
                self.pruned[cfg] = why
        if not keep:
            detail = "; ".join(f"{c}: {w}" for c, w in self.pruned.items())
            raise E.ResourceError(f"{self.__name__}: no autotuning config fits the device ({detail}); "
                                  "add configs with smaller blocks or fewer stages")
        return keep

    def warmup(self, *args: Any, **kwargs: Any) -> list[Any]:
        return [self.fn.warmup(*args, **kwargs, **c.all_kwargs()) for c in self.configs]


# A config still compiling this long, and STRAGGLER_FACTOR times longer than the median config
# took, is left out of the tuning. Such a config holds hundreds of elements a thread, fully
# unrolled: ptxas's time grows faster than the code (measured: 5,000 PTX lines 3 s, 10,000 lines
# 26 s, 20,000 lines more than 120 s), as it does for Triton's own code, and such a kernel spills
# far too much to be the fastest.
STRAGGLER_MIN_S = 60.0
STRAGGLER_FACTOR = 20.0


def precompile(configs: list[Config], compile_one: Callable[[Config], Any],
               min_s: float = STRAGGLER_MIN_S, factor: float = STRAGGLER_FACTOR) -> list[tuple[Config, Any]]:
    """`compile_one` for every config on daemon threads; an AnvilError is returned in place of the
    kernel (the others still compile). A straggler (see STRAGGLER_MIN_S) is not waited for: it gets
    a ResourceError saying so, and its compile finishes in the background (the kernel cache keeps it)."""
    n = len(configs)
    results: dict[int, Any] = {}
    started: dict[int, float] = {}
    took: list[float] = []
    cond = threading.Condition()
    todo = list(range(n))[::-1]
    state = {"stop": False, "workers": 0}

    def work() -> None:
        while True:
            with cond:
                if state["stop"] or not todo:
                    state["workers"] -= 1
                    return
                i = todo.pop()
                started[i] = time.perf_counter()
            try:
                r = compile_one(configs[i])
            except Exception as e:  # noqa: BLE001 - an AnvilError is the config's verdict; others re-raised below
                r = e
            with cond:
                if i not in results:
                    results[i] = r
                    if not isinstance(r, E.AnvilError):
                        took.append(time.perf_counter() - started[i])
                cond.notify_all()

    def spawn() -> None:  # with cond held
        state["workers"] += 1
        threading.Thread(target=work, name="anvil-autotune", daemon=True).start()

    workers = max(1, min(n, os.cpu_count() or 1, 16))
    with cond:
        for _ in range(workers):
            spawn()
        while len(results) < n:
            now = time.perf_counter()
            budget = max(min_s, factor * sorted(took)[len(took) // 2]) if took else None
            late = [i for i, t in started.items() if i not in results and budget is not None and now - t > budget]
            for i in late:
                results[i] = E.ResourceError(
                    f"still compiling after {now - started[i]:.0f} s, while half the configs compiled in "
                    f"{sorted(took)[len(took) // 2]:.1f} s or less: left out of the tuning (a config this slow "
                    "to compile holds far too much work per thread to be the fastest)")
                if todo:  # the straggler's thread is taken: another one goes on with the queue
                    spawn()
            if len(results) == n:
                break
            waits = [budget - (now - t) for i, t in started.items() if i not in results and budget is not None]
            cond.wait(max(0.05, min(waits)) if waits else None)
        state["stop"] = True
    for r in results.values():
        if isinstance(r, Exception) and not isinstance(r, E.AnvilError):
            raise r
    return [(c, results[i]) for i, c in enumerate(configs)]


def device_limits(device: Any) -> dict[str, int]:
    """What one program may use on `device`: dynamic shared memory (bytes, with the opt-in) and
    registers per multiprocessor."""
    props = torch.cuda.get_device_properties(device)
    return {"shared": int(getattr(props, "shared_memory_per_block_optin", 0) or 48 * 1024),
            "registers": int(getattr(props, "regs_per_multiprocessor", 0) or 65536)}


def exceeds(meta: Mapping[str, Any], limits: Mapping[str, int]) -> str | None:
    """Why a compiled kernel (its metadata) cannot run within `limits`, or None when it can."""
    shared = int(meta.get("shared") or 0)
    if shared > limits["shared"]:
        return f"needs {shared} bytes of shared memory per program, the device allows {limits['shared']}"
    regs, warps = int(meta.get("n_regs") or 0), int(meta.get("num_warps") or 0)
    if regs * 32 * warps > limits["registers"]:
        return (f"needs {regs} registers x {32 * warps} threads = {regs * 32 * warps} registers per program, "
                f"the multiprocessor has {limits['registers']}")
    return None


def _cuda_device(named: Mapping[str, Any]) -> Any:
    for v in named.values():
        if getattr(v, "is_cuda", False):
            return v.device
    return None


def _synchronizer(named: Mapping[str, Any]) -> Callable[[], None]:
    device = _cuda_device(named)
    if device is None:
        return lambda: None

    return lambda: torch.cuda.synchronize(device)


def _key_of(v: Any) -> Any:
    if hasattr(v, "dtype") and hasattr(v, "shape"):
        return str(v.dtype)
    return v


def autotune(configs: list[Config], key: list[str], prune_configs_by: Mapping[str, Any] | None = None,
             reset_to_zero: Iterable[str] | None = None, restore_value: Iterable[str] | None = None,
             pre_hook: Any = None, post_hook: Any = None, warmup: int | None = None, rep: int | None = None,
             use_cuda_graph: bool = False, do_bench: Any = None, cache_results: bool = False) -> Any:
    """Pick the fastest of `configs` for each value of the `key` arguments."""

    def decorator(fn: Any) -> Autotuner:
        inner = fn if isinstance(fn, KernelInterface) else as_kernel(fn)
        if inner is None:
            inner = jit(fn)
        names = inner.arg_names if hasattr(inner, "arg_names") else []
        return Autotuner(inner, list(names), configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
                         post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results)

    return decorator


class Heuristics(KernelInterface):
    def __init__(self, fn: Any, arg_names: list[str], values: Mapping[str, Callable[[dict[str, Any]], Any]]):
        self.fn = fn
        self.arg_names = arg_names
        self.values = dict(values)
        self.__name__ = getattr(fn, "__name__", "kernel")

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        named = dict(zip(self.arg_names, args, strict=False))
        named.update(kwargs)
        for k, f in self.values.items():
            kwargs[k] = f(named)
            named[k] = kwargs[k]
        return self.fn.run(*args, grid=grid, **kwargs)

    def warmup(self, *args: Any, **kwargs: Any) -> Any:
        named = dict(zip(self.arg_names, args, strict=False))
        named.update(kwargs)
        for k, f in self.values.items():
            kwargs[k] = f(named)
        return self.fn.warmup(*args, **kwargs)


def heuristics(values: Mapping[str, Callable[[dict[str, Any]], Any]]) -> Any:
    """Compute meta-parameters from the arguments: `@heuristics({"EVEN": lambda a: a["n"] % 128 == 0})`."""

    def decorator(fn: Any) -> Heuristics:
        inner = fn if isinstance(fn, KernelInterface) else as_kernel(fn)
        if inner is None:
            inner = jit(fn)
        return Heuristics(inner, list(getattr(inner, "arg_names", [])), values)

    return decorator
