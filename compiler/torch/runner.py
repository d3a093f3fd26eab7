"""Running one fusion group: sizes from the actual inputs, one kernel per input layout pattern.

Sizes and strides are kernel arguments, so one compiled kernel serves every size with the same
pattern (which inputs are contiguous, broadcast or strided, and in how many dims): new sizes of a
dynamic dimension launch the same kernel. The kernel text depends only on the pattern.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from .. import knobs
from ..frontend.textmodule import compile_source
from ..fusion.emit import MAX_ROW, emit
from ..fusion.graph import Group, Layout
from ..fusion.split import ColsSplit, split_cols
from .partition import FxGroup

__all__ = ["GroupRunner", "layout_of", "layout_values", "fusion_dump", "dump_source"]

# Kernels by name (which carries a hash of their text), shared by every runner of the process.
_SHARED: dict[str, Any] = {}
_MAX_SHARED = 4096
_MAX_PLANS = 64
_FALLBACK = object()  # a plan: rows too wide for a kernel, torch computes the group



# Launch configurations, from a sweep on the H200 (benchmarks/probes/fusion_configs.py; its output is
# beside it): pointwise kernels run best at 2048 elements a program on 4 warps; rows kernels at about
# 2048 values a program (several short rows, or one long row), 16 or more values a thread: few warps.

def pointwise_config(numel: int, device: str) -> tuple[int, int]:
    """(BLOCK, num_warps) of a pointwise kernel."""
    return 2048, 4


def rows_config(R: int, C: int, device: str) -> tuple[int, int]:
    """(ROWS per program, num_warps) of a rows kernel whose rows hold C values (BLOCK_C = C rounded
    up to a power of two)."""
    block_c = _next_pow2(C)
    per_prog = max(1, min(_next_pow2(R), 2048 // block_c))
    return per_prog, max(1, min(8, per_prog * block_c // 512))


def cols_config(R: int, C: int, device: str) -> tuple[int, int, int]:
    """(BLOCK_R, BLOCK_C, num_warps) of a cols kernel: enough column blocks to spread over the device,
    each walking the rows in tiles of about 2048 values."""
    block_c = max(16, min(128, _next_pow2(C) // 16))
    return max(1, min(_next_pow2(R), 2048 // block_c)), block_c, 4


def cols_split(R: int, C: int, device: str) -> int:
    """How many chunks of rows a cols group's walk is split into (1: one kernel walks them all). On a
    GPU, one program per column block is too few for a few hundred columns: about four programs a
    multiprocessor of an H200 (132), each walking at least four tiles of rows."""
    if device != "cuda":
        return 1
    block_r, block_c, _ = cols_config(R, C, device)
    col_blocks = -(-C // block_c)
    return max(1, min(-(-528 // col_blocks), R // (4 * block_r)))


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, step = [], 1
    for size in reversed(shape):
        out.append(step)
        step *= max(size, 1)
    return tuple(reversed(out))


def _next_pow2(n: int) -> int:  # noqa: E302
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _merge(dims: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """(size, stride) pairs, outermost first, with size-1 dims dropped and adjacent dims that are
    contiguous with each other merged."""
    out: list[tuple[int, int]] = []
    for size, stride in dims:
        if size == 1:
            continue
        if out and out[-1][1] == stride * size:
            out[-1] = (out[-1][0] * size, stride)
        else:
            out.append((size, stride))
    return tuple(out)


def _trim(dims: tuple[tuple[int, int], ...]) -> tuple[tuple[tuple[int, int], ...], bool]:
    """Outermost broadcast dims dropped (nothing inside needs their size); whether none was."""
    i = 0
    while i < len(dims) and dims[i][1] == 0:
        i += 1
    return dims[i:], i == 0


def layout_of(t: torch.Tensor, pad: tuple[int, bool], domain: Sequence[int], rows: bool) -> Layout:
    """How `t`, lined up with the domain by `pad` and broadcast to it, is addressed by a flat index
    (pointwise) or by a row index and a column (rows: broadcast along C, it loads one value per row)."""
    lead, trail = pad
    if lead or trail:
        t = t[(None,) * lead + (Ellipsis,) + ((None,) if trail else ())]
    strides = t.expand(tuple(domain)).stride() if tuple(t.shape) != tuple(domain) else t.stride()
    pairs = list(zip(domain, strides, strict=True))
    if not rows:
        dims, outer = _trim(_merge(pairs))
        numel = 1
        for size in domain:
            numel *= size
        return Layout(linear=len(dims) == 1 and dims[0] == (numel, 1), row_dims=dims, outer=outer)
    *row_pairs, (size_c, cstride) = pairs
    dims, outer = _trim(_merge(row_pairs))
    return Layout(linear=False, row_dims=dims, col_stride=0 if size_c == 1 else cstride, outer=outer)


def layout_values(k: int, lay: Layout, prefix: str | None = None) -> dict[str, int]:
    """The size and stride parameters emit.py names for input k laid out as `lay` (`prefix`: the
    input's `Names.prefixes` entry, `in{k}` by default)."""
    p = f"in{k}" if prefix is None else prefix
    out: dict[str, int] = {}
    if lay.linear:
        return out
    divs, div = [], 1
    for size, _ in reversed(lay.row_dims):
        divs.append(div)
        div *= size
    for d, ((size, stride), dv) in enumerate(zip(lay.row_dims, reversed(divs), strict=True)):
        if stride != 0:  # a broadcast dim reads nothing (emit.py leaves it out of the offset)
            out.update({f"{p}_div{d}": dv, f"{p}_size{d}": size, f"{p}_stride{d}": stride})
    out[f"{p}_cstride"] = lay.col_stride
    return out


class GroupRunner:
    """Callable that computes a group's outputs. Its arguments: the tensors the kernel loads, then
    the other graph values the group's ops mention (for the fallback), then one value per size
    symbol the group's shapes mention (a tensor whose dim `d` is that size, or the size itself)."""

    def __init__(self, fxg: FxGroup, name: str, fallback: Callable[..., Any], n_extra: int,
                 symbols: Sequence[tuple[Any, int | None]]) -> None:
        outputs = fxg.outputs()
        self.group: Group = fxg.to_group(outputs)
        self.name = self.__name__ = self.__qualname__ = name  # FX names the call after it
        self.fallback = fallback
        self.n_inputs = len(fxg.inputs)
        self.n_extra = n_extra
        self.symbols = [s for s, _ in symbols]  # sympy symbols
        self.symbol_dims = [d for _, d in symbols]
        self.domain = fxg.domain
        self.pads = [fxg.pads[n] for n in fxg.inputs]
        self.out_shapes = [tuple(n.meta["val"].shape) for n in outputs]
        self.out_dtypes = [n.meta["val"].dtype for n in outputs]
        self.kernels: dict[Any, Any] = {}
        self.plans: dict[Any, Any] = {}  # per input shapes and strides: what to launch
        self.shapes: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._cols_split: ColsSplit | None = None

    # ---------------------------------------------------------------- sizes
    def _eval(self, shape: tuple[Any, ...], env: dict[Any, int]) -> tuple[int, ...]:
        out = []
        for s in shape:
            if isinstance(s, int):
                out.append(s)
            else:
                expr = s.node.expr if hasattr(s, "node") else s
                out.append(int(expr.xreplace(env)) if env else int(expr))
        return tuple(out)

    def _sizes(self, sym_values: tuple[int, ...]) -> tuple[Any, ...]:
        hit = self.shapes.get(sym_values)
        if hit is None:
            # deferred: start-up cost: sympy (about 0.9 s); the server imports this module (tools.generate)
            import sympy

            env = {s: sympy.Integer(v) for s, v in zip(self.symbols, sym_values, strict=True)}
            hit = (self._eval(self.domain, env), [self._eval(o, env) for o in self.out_shapes])
            self.shapes[sym_values] = hit
        return hit

    # ---------------------------------------------------------------- kernels
    def _kernel(self, layouts: list[Layout], wide: bool, even: tuple[bool, bool],
                baked: dict[str, int] | None, part: str = "") -> Any:
        """The compiled kernel of the group (`part` "partial" or "finish": of its split, split.py)."""
        values = baked
        key = (part, tuple(lay.key() for lay in layouts), wide, even, tuple(values.items()) if values else None)
        k = self.kernels.get(key)
        if k is None:
            group = self.group if not part else getattr(self._split(), part)
            # Named by content: groups (and graphs) computing the same thing share one kernel.
            text = emit(group, layouts, "KERNEL", wide=wide, values=values, even_rows=even[0],
                        even_cols=even[1], split=part == "partial").source
            name = f"{self.name}_{hashlib.sha256(text.encode()).hexdigest()[:8]}"
            k = _SHARED.get(name)
            if k is None:
                source = text.replace("def KERNEL(", f"def {name}(", 1)
                dump_source(name, source)
                if len(_SHARED) >= _MAX_SHARED:
                    _SHARED.clear()
                k = _SHARED[name] = compile_source(source, name, filename=f"<anvil {name}>")
            self.kernels[key] = k
        return k

    def prepare(self, traced: Sequence[Any]) -> None:
        """A static group on a GPU, at graph compile time: plan the launch for the traced inputs'
        layouts and start compiling its kernel on a background thread, so that a graph's kernels
        compile at once, and while torch finishes the graph; the first call finds each compiled (or
        waits for it: compiled.compile_kernel). A first call whose inputs are laid out otherwise
        plans and compiles as usual."""
        if self.symbols or not traced or any(getattr(t, "device", None) is None or t.device.type != "cuda"
                                             for t in traced):
            return
        metas = tuple(torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")
                      for t in traced)
        plan = self._plan(metas, (), traced[0].device)
        if plan is _FALLBACK or plan[0] is None:  # nothing to launch
            return
        self.plans[((), *[(m.shape, m.stride()) for m in metas])] = plan
        launch, tail, options, outs_like, kernel = plan
        if isinstance(kernel, tuple):  # a split cols group: its two kernels
            for k, dtypes, grid, opts in kernel:
                _compile_ahead(k, dtypes, traced[0].device, (), opts, grid)
            return
        dtypes = [t.dtype for t in traced] + [d for _, _, d in outs_like]
        _compile_ahead(kernel, dtypes, traced[0].device, tail, options, launch.__self__)

    def __call__(self, *args: Any) -> tuple[torch.Tensor, ...]:
        if torch.autograd.profiler._is_profiler_enabled:  # name the launch in profiles
            with torch.profiler.record_function(self.name):
                return self._run(args)
        return self._run(args)

    def _run(self, args: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        inputs = args[:self.n_inputs]
        first_sym = self.n_inputs + self.n_extra
        syms = tuple(int(v) if d is None else int(v.shape[d])
                     for v, d in zip(args[first_sym:], self.symbol_dims, strict=True)) if self.symbols else ()
        key = (syms, *[(t.shape, t.stride()) for t in inputs])
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) >= _MAX_PLANS:
                self.plans.clear()
            plan = self.plans[key] = self._plan(inputs, syms, inputs[0].device)
        if plan is _FALLBACK:
            return tuple(self.fallback(*args[:first_sym]))
        launch, tail, options, outs_like, _ = plan
        device = inputs[0].device
        outs = tuple([torch.empty_strided(s, st, dtype=d, device=device) for s, st, d in outs_like])
        if launch is not None:
            launch(*inputs, *outs, *tail, **options)
        return outs

    def _plan(self, inputs: tuple[Any, ...], syms: tuple[int, ...], device: torch.device) -> Any:
        """What a call with these input shapes and strides launches: (the launcher bound to its grid,
        the size and stride arguments, the launch options, each output's shape, strides and dtype,
        the kernel, or for a split cols group each kernel's (kernel, dtypes, grid, options)).
        `device`: where they run (`inputs` may be meta tensors of the traced layouts)."""
        domain, out_shapes = self._sizes(syms)
        outs_like = [(s, contiguous_strides(s), d) for s, d in zip(out_shapes, self.out_dtypes, strict=True)]
        kind = self.group.kind
        numel = 1
        for s in domain:
            numel *= s
        C = domain[-1] if kind != "pointwise" else 0
        if kind == "rows" and C > MAX_ROW:
            return _FALLBACK
        if numel == 0:
            return (None, (), {}, outs_like, None)
        rows = kind != "pointwise"
        layouts = [layout_of(t, pad, domain, rows) for t, pad in zip(inputs, self.pads, strict=True)]
        reach = max([numel] + [sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride(), strict=True)) + 1
                               for t in inputs])
        wide = reach >= 2**31 - 1
        values: dict[str, int] = {}
        for k, lay in enumerate(layouts):
            values.update(layout_values(k, lay))
        static = not self.symbols  # sizes written into the kernel; masks its sizes make moot left out
        R = numel // C if C else 0
        if kind == "rows":
            per_prog, warps = rows_config(R, C, device.type)
            block_c = _next_pow2(C)
            grid: tuple[int, ...] = ((R + per_prog - 1) // per_prog,)
            blocks = {"ROWS": per_prog, "BLOCK_C": block_c}
            even = (static and R % per_prog == 0, static and block_c == C)
            values.update(R=R, C=C)
        elif kind == "cols":
            block_r, block_c, warps = cols_config(R, C, device.type)
            chunks = cols_split(R, C, device.type)
            if chunks > 1 and static:
                return self._split_plan(inputs, layouts, wide, R, C, chunks, outs_like)
            grid = ((C + block_c - 1) // block_c,)
            blocks = {"BLOCK_R": block_r, "BLOCK_C": block_c}
            even = (static and R % block_r == 0, static and C % block_c == 0)
            values.update(R=R, C=C)
        else:
            block, warps = pointwise_config(numel, device.type)
            grid, blocks = ((numel + block - 1) // block,), {"BLOCK": block}
            even = (static and numel % block == 0, False)
            values.update(n=numel)
        params = emit(self.group, layouts, "KERNEL", wide=wide).params
        if not static:
            kernel = self._kernel(layouts, wide, even, None)
            return (kernel[grid], tuple(values[p] for p in params), {**blocks, "num_warps": warps}, outs_like,
                    kernel)
        kernel = self._kernel(layouts, wide, even, baked={**{p: values[p] for p in params}, **blocks})
        return kernel[grid], (), {"num_warps": warps}, outs_like, kernel


    def _split(self) -> ColsSplit:
        if self._cols_split is None:
            self._cols_split = split_cols(self.group)
        return self._cols_split

    def _split_plan(self, inputs: tuple[Any, ...], layouts: list[Layout], wide: bool, R: int, C: int,
                    chunks: int, outs_like: list[Any]) -> Any:
        """A static cols group in two launches (split.py): the walk over `chunks` chunks of rows into
        (S, C) workspaces, then the per-column work on them."""
        sp = self._split()
        block_r, block_c, warps = cols_config(R, C, "cuda")
        block_r = min(block_r, _next_pow2(-(-R // chunks)))
        rsplit = -(-R // chunks)
        rsplit = -(-rsplit // block_r) * block_r
        S = -(-R // rsplit)
        lay_a = [layouts[k] for k in sp.walk_inputs]
        values: dict[str, int] = {"R": R, "C": C, "BLOCK_R": block_r, "BLOCK_C": block_c, "RSPLIT": rsplit}
        for j, lay in enumerate(lay_a):
            values.update(layout_values(j, lay))
        params = emit(sp.partial, lay_a, "KERNEL", wide=wide, split=True).params
        baked = {**{p: values[p] for p in params}, "BLOCK_R": block_r, "BLOCK_C": block_c, "RSPLIT": rsplit}
        ka = self._kernel(lay_a, wide, (R % rsplit == 0, C % block_c == 0), baked, "partial")
        part_like = [(S, C, getattr(torch, d)) for d in sp.partial_dtypes]
        lay_ws = layout_of(torch.empty((S, C), device="meta"), (0, False), (S, C), True)
        lay_b = [lay_ws] * len(part_like) + [layouts[k] for k in sp.col_inputs]
        fb_r, fb_c, fb_warps = cols_config(S, C, "cuda")
        values = {"R": S, "C": C}
        for j, lay in enumerate(lay_b):
            values.update(layout_values(j, lay))
        params = emit(sp.finish, lay_b, "KERNEL").params
        baked = {**{p: values[p] for p in params}, "BLOCK_R": fb_r, "BLOCK_C": fb_c}
        kb = self._kernel(lay_b, False, (S % fb_r == 0, C % fb_c == 0), baked, "finish")
        grid_a, grid_b = (-(-C // block_c), S), (-(-C // fb_c),)
        run_a, run_b = ka[grid_a], kb[grid_b]
        walk, cols, full_pos, col_pos = sp.walk_inputs, sp.col_inputs, sp.full_outputs, sp.col_outputs
        n_in = len(inputs)
        parts_dtypes = [d for _, _, d in part_like]
        ahead = ((ka, [inputs[k].dtype for k in walk] + [outs_like[j][2] for j in full_pos] + parts_dtypes,
                  grid_a, {"num_warps": warps}),
                 (kb, parts_dtypes + [inputs[k].dtype for k in cols] + [outs_like[j][2] for j in col_pos],
                  grid_b, {"num_warps": fb_warps}))

        def launch(*args: Any) -> None:
            ins, outs = args[:n_in], args[n_in:]
            device = ins[0].device
            parts = [torch.empty((s, c), dtype=d, device=device) for s, c, d in part_like]
            run_a(*[ins[k] for k in walk], *[outs[j] for j in full_pos], *parts, num_warps=warps)
            run_b(*parts, *[ins[k] for k in cols], *[outs[j] for j in col_pos], num_warps=fb_warps)
        return launch, (), {}, outs_like, ahead


_ahead: ThreadPoolExecutor | None = None


def _compile_ahead(kernel: Any, dtypes: list[torch.dtype], device: torch.device, tail: tuple[Any, ...],
                   options: dict[str, Any], grid: Any) -> None:
    """Compile `kernel` for arguments of these dtypes on `device` on a background thread. Its
    arguments are one-element tensors (the compile depends on dtypes and alignment only), made on
    that thread: the graph compile calling this may run under a fake-tensor mode, which is
    per thread."""
    global _ahead
    if _ahead is None:
        _ahead = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1), thread_name_prefix="anvil-ahead")

    def warm() -> None:
        with contextlib.suppress(Exception):  # the first launch compiles again and reports the error
            if device.type == "cuda":  # this thread's current context: where the module loads
                torch.cuda.set_device(device)
            args = [torch.empty(1, dtype=d, device=device) for d in dtypes]
            kernel.warmup(*args, *tail, grid=grid, **options)
    _ahead.submit(warm)


def external_values(fxg: FxGroup) -> list[fx.Node]:
    """Graph values the group's ops mention besides the tensors the kernel loads (sizes of views)."""
    members, out = set(fxg.nodes), []
    for n in fxg.nodes:
        for a in n.all_input_nodes:
            if a not in members and a not in fxg.inputs and a not in out:
                out.append(a)
    return out


def fallback_module(gm: fx.GraphModule, fxg: FxGroup) -> fx.GraphModule:
    """The group's ops as torch computes them: for rows wider than a kernel holds. Its arguments:
    the group's inputs, then its `external_values`."""
    g = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for n in list(fxg.inputs) + external_values(fxg):
        env[n] = g.placeholder(f"a{len(env)}")
    for n in fxg.nodes:
        env[n] = g.node_copy(n, lambda x: env[x])
    g.output(tuple(env[n] for n in fxg.outputs()))
    return fx.GraphModule(gm, g)


@contextmanager
def fusion_dump(directory: Path) -> Iterator[Path]:
    """While inside, the anvil backend writes each kernel it generates to `directory` and logs each
    graph's fusion groups to stderr: ANVIL_FUSION_DUMP, set, then restored."""
    before = os.environ.get("ANVIL_FUSION_DUMP")
    os.environ["ANVIL_FUSION_DUMP"] = str(directory)
    try:
        yield directory
    finally:
        if before is None:
            del os.environ["ANVIL_FUSION_DUMP"]
        else:
            os.environ["ANVIL_FUSION_DUMP"] = before


def dump_source(name: str, source: str, folder: str = "") -> None:
    """Under ANVIL_FUSION_DUMP: write a generated kernel's source to `<dump>/<name>.py` (a graph's
    function: to `<dump>/graphs/`)."""
    dump = knobs.fusion_dump()
    if dump is not None:
        path = dump / folder / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        log(f"anvil: {name}: {path}")


def log(message: str) -> None:
    if knobs.fusion_dump() is not None:
        print(message, file=sys.stderr)
