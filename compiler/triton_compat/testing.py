"""`triton.testing`: benchmarking and comparison helpers with Triton's signatures, timed on the CPU.

Work launched on the CPU backend finishes before the launch returns, so wall-clock time
(`time.perf_counter`) around each call is the kernel's time; no events or cache flushes are
needed beyond what Triton's own `do_bench` does.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["do_bench", "do_bench_cudagraph", "assert_close", "Benchmark", "Mark", "perf_report",
           "get_dram_gbps", "get_max_tensorcore_tflops", "get_max_simd_tflops", "set_gpu_clock", "nvsmi"]


def _quantile(a: Sequence[float], q: Sequence[float]) -> list[float]:
    """Linear-interpolation quantiles (what torch.quantile / numpy default compute)."""
    n = len(a)
    a = sorted(a)

    def get(qi: float) -> float:
        if not 0 <= qi <= 1:
            raise ValueError("Quantiles must be in the range [0, 1]")
        point = qi * (n - 1)
        lo = math.floor(point)
        hi = math.ceil(point)
        t = point - lo
        return (1 - t) * a[lo] + t * a[hi]

    return [get(qi) for qi in q]


def _summarize_statistics(times: list[float], quantiles: Sequence[float] | None, return_mode: str) -> Any:
    if quantiles is not None:
        ret = _quantile(times, quantiles)
        return ret[0] if len(ret) == 1 else ret
    if return_mode == "all":
        return times
    if return_mode == "min":
        return min(times)
    if return_mode == "max":
        return max(times)
    if return_mode == "mean":
        return statistics.mean(times)
    return statistics.median(times)


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, grad_to_none: Any = None,
             quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
    """Time `fn()` in milliseconds: about `warmup` ms of warm-up calls, then about `rep` ms of
    timed calls. Returns the mean (or min/max/median per `return_mode`, every time with "all",
    or the given `quantiles`, a float for one quantile and a list for several)."""
    assert return_mode in ["min", "max", "mean", "median", "all"]
    fn()
    # Estimate one call's time from five calls.
    t0 = time.perf_counter()
    for _ in range(5):
        fn()
    estimate_ms = max((time.perf_counter() - t0) * 1e3 / 5, 1e-6)
    n_warmup = max(1, int(warmup / estimate_ms))
    n_repeat = max(1, int(rep / estimate_ms))
    n_repeat = min(n_repeat, 100_000)
    for _ in range(min(n_warmup, 100_000)):
        fn()
    times = []
    clock = time.perf_counter
    for _ in range(n_repeat):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        s = clock()
        fn()
        times.append((clock() - s) * 1e3)
    return _summarize_statistics(times, quantiles, return_mode)


def do_bench_cudagraph(fn: Callable[[], Any], rep: float = 20, grad_to_none: Any = None,
                       quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
    """There are no CUDA graphs on the CPU: the same as do_bench."""
    return do_bench(fn, warmup=max(1, rep // 4), rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                    return_mode=return_mode)


def assert_close(x: Any, y: Any, atol: Any = None, rtol: Any = None, err_msg: str = "") -> None:
    """Assert that `x` and `y` (scalars, lists, numpy arrays or tensors) agree within atol (default
    1e-2) and rtol (default 0); NaNs compare equal."""
    if not isinstance(x, torch.Tensor):
        x = torch.tensor(x)
    if not isinstance(y, torch.Tensor):
        y = torch.tensor(y)
    if atol is None:
        atol = 1e-2
    atol = atol(x.dtype) if callable(atol) else atol
    if rtol is None:
        rtol = 0.0
    rtol = rtol(x.dtype) if callable(rtol) else rtol

    def to_np(t: Any) -> Any:
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.cpu().detach().numpy()

    xn, yn = to_np(x), to_np(y)
    if xn.size > 1 or yn.size > 1:
        np.testing.assert_allclose(xn, yn, atol=atol, rtol=rtol, equal_nan=True)
        return
    if not np.allclose(xn, yn, atol=atol, rtol=rtol):
        raise AssertionError(f"{err_msg} {xn} is not close to {yn} (atol={atol}, rtol={rtol})")


class Benchmark:
    """One benchmark table for `perf_report`: x values per row, one line (column) per line value."""

    def __init__(self, x_names: list[str], x_vals: list[Any], line_arg: str, line_vals: list[Any],
                 line_names: list[str], plot_name: str, args: dict[str, Any], xlabel: str = "", ylabel: str = "",
                 x_log: bool = False, y_log: bool = False, styles: Any = None) -> None:
        self.x_names = x_names
        self.x_vals = x_vals
        self.x_log = x_log
        self.line_arg = line_arg
        self.line_vals = line_vals
        self.line_names = line_names
        self.y_log = y_log
        self.styles = styles
        self.xlabel = xlabel
        self.ylabel = ylabel
        self.plot_name = plot_name
        self.args = args


class _Table:
    """What `Mark.run(return_df=True)` returns when pandas is missing: rows and column names."""

    def __init__(self, columns: list[str], rows: list[list[Any]]) -> None:
        self.columns = columns
        self.rows = rows

    def to_string(self) -> str:
        widths = [max(len(str(c)), *(len(_fmt(r[i])) for r in self.rows)) for i, c in enumerate(self.columns)]
        lines = ["  ".join(str(c).rjust(w) for c, w in zip(self.columns, widths, strict=True))]
        for r in self.rows:
            lines.append("  ".join(_fmt(v).rjust(w) for v, w in zip(r, widths, strict=True)))
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return self.to_string()


def _fmt(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


class Mark:
    """A function marked by `perf_report`; `.run(print_data=True)` measures and prints the table."""

    def __init__(self, fn: Callable[..., Any], benchmarks: Benchmark | list[Benchmark]) -> None:
        self.fn = fn
        self.benchmarks = benchmarks

    def _run(self, bench: Benchmark, save_path: str, show_plots: bool, print_data: bool, diff_col: bool = False,
             save_precision: int = 6, **kwargs: Any) -> Any:
        x_names = list(bench.x_names)
        columns = x_names + [f"{n} ({bench.ylabel})" if bench.ylabel else str(n) for n in bench.line_names]
        rows: list[list[Any]] = []
        for x in bench.x_vals:
            xs = list(x) if isinstance(x, (list, tuple)) else [x for _ in x_names]
            if len(xs) != len(x_names):
                raise ValueError(f"Expected {len(x_names)} values, got {x}")
            x_args = dict(zip(x_names, xs, strict=True))
            row = []
            for y in bench.line_vals:
                ret = self.fn(**x_args, **{bench.line_arg: y}, **bench.args, **kwargs)
                row.append(ret[0] if isinstance(ret, (tuple, list)) else ret)
            rows.append(xs + row)
        table: Any = _Table(columns, rows)
        try:
            # deferred: optional dependency, only for perf_report tables
            import pandas as pd

            table = pd.DataFrame(rows, columns=columns)
            if diff_col and len(columns) == len(x_names) + 2:
                table["Diff"] = table[columns[-1]] - table[columns[-2]]
        except ImportError:
            pass
        if print_data:
            print(bench.plot_name + ":")
            print(table.to_string())
        if save_path:
            os.makedirs(save_path, exist_ok=True)
            with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as f:
                f.write(",".join(columns) + "\n")
                for r in rows:
                    f.write(",".join(f"{v:.{save_precision}f}" if isinstance(v, float) else str(v) for v in r) + "\n")
        if show_plots:
            _plot(bench, columns, rows, x_names, save_path)
        return table

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "", return_df: bool = False,
            **kwargs: Any) -> Any:
        single = isinstance(self.benchmarks, Benchmark)
        b = self.benchmarks
        benches: list[Benchmark] = [b] if isinstance(b, Benchmark) else list(b)
        results = [self._run(b, save_path, show_plots, print_data, **kwargs) for b in benches]
        if return_df:
            return results[0] if single else results
        return None


def _plot(bench: Benchmark, columns: list[str], rows: list[list[Any]], x_names: list[str], save_path: str) -> None:
    try:
        # deferred: optional dependency, only for perf_report plots
        import matplotlib.pyplot as plt
    except ImportError:
        return
    plt.figure()
    ax = plt.subplot()
    for j, name in enumerate(columns[len(x_names):]):
        ax.plot([r[0] for r in rows], [r[len(x_names) + j] for r in rows], label=name)
    ax.legend()
    ax.set_xlabel(bench.xlabel or x_names[0])
    ax.set_ylabel(bench.ylabel)
    ax.set_xscale("log" if bench.x_log else "linear")
    ax.set_yscale("log" if bench.y_log else "linear")
    if save_path:
        plt.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
    plt.show()


def perf_report(benchmarks: Benchmark | list[Benchmark]) -> Callable[[Callable[..., Any]], Mark]:
    """Mark a function for benchmarking: `@perf_report(Benchmark(...)) def bench(N, provider): ...`."""
    return lambda fn: Mark(fn, benchmarks)


def get_dram_gbps(device: Any = None) -> float:
    """Not measurable without a GPU; a nominal figure for roofline estimates (GB/s)."""
    return 50.0


def get_max_tensorcore_tflops(dtype: Any, clock_rate: Any = None, device: Any = None) -> float:
    return 1.0


def get_max_simd_tflops(dtype: Any, clock_rate: Any = None, device: Any = None) -> float:
    return 1.0


class set_gpu_clock:  # noqa: N801 - Triton's name
    """A context manager in Triton that locks GPU clocks; nothing to lock on the CPU."""

    def __init__(self, ref_sm_clock: int = 1350, ref_mem_clock: int = 1215) -> None:
        self.ref_sm_clock = ref_sm_clock
        self.ref_mem_clock = ref_mem_clock

    def __enter__(self) -> tuple[float, float]:
        return 1.0, 1.0

    def __exit__(self, *exc: Any) -> None:
        return None


def nvsmi(attrs: list[str]) -> list[Any]:
    raise RuntimeError("nvidia-smi is not available: Anvil's triton stand-in runs on the CPU")
