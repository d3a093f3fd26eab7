"""A `Group` and its inputs' layouts at one launch -> the fused kernel's source text.

The text is ordinary kernel source (readable, and what `ANVIL_FUSION_DUMP` writes out), compiled by
Anvil like any kernel. Its parameters: the input pointers, the output pointers, the scalar parameters
(if any), the domain size (`n`, or `R` and `C`), then per strided input its (divisor, size, stride)
triples (the innermost dim's divisor is 1 and is left out), then the constexpr block sizes. `Names`
says what each is called: `in0`, `out0`, `x0`, `in0_stride0` unless the caller names them.
"""

from __future__ import annotations

import builtins
import keyword
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .graph import COL, FULL, ROW, Group, Layout, Op, Ref
from .ops import COMPUTE, ELEMENTWISE, REDUCTIONS, TL_DTYPE

__all__ = ["Kernel", "Names", "emit", "MAX_ROW", "is_free_name"]

# Widest row a rows kernel holds in registers; wider rows are not fused (torch computes them).
MAX_ROW = 16384


# Names the kernel bodies use themselves (this module's and matmul.py's); caller-chosen names avoid them.
_OWN = frozenset({
    "rows", "cols", "lin", "mask", "rmask", "cmask", "n", "R", "C", "M", "N", "K", "ROWS", "BLOCK", "BLOCK_C",
    "BLOCK_R", "BLOCK_M", "BLOCK_N", "BLOCK_K", "RSPLIT", "chunk", "acc", "kk", "k0", "r0", "a_tile", "b_tile",
    "tl", "triton", "libdevice",
})
_GENERATED = re.compile(r"^(v|x|in|out|acc)\d+(_.*)?$")


def is_free_name(name: str) -> bool:
    """Whether a caller may give `name` to a parameter or loaded value: an identifier that is not a
    keyword, a builtin, or a name the emitted body uses itself."""
    return (name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")
            and name not in _OWN and not hasattr(builtins, name) and not _GENERATED.match(name))


@dataclass(frozen=True)
class Names:
    """What a kernel calls its pointers, scalar parameters and loaded values.

    `prefixes[k]` starts the names of input k's layout parameters (`{prefix}_stride0`, ...).
    `scalars`: scalar parameters, placed after the pointers; an op operand that is a string names one.
    """

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    values: tuple[str, ...]
    prefixes: tuple[str, ...]
    scalars: tuple[str, ...] = ()

    @staticmethod
    def default(group: Group) -> Names:
        n = len(group.inputs)
        return Names(tuple(f"in{k}" for k in range(n)), tuple(f"out{j}" for j in range(len(group.outputs))),
                     tuple(f"x{k}" for k in range(n)), tuple(f"in{k}" for k in range(n)))


@dataclass(frozen=True)
class Kernel:
    name: str
    source: str
    params: tuple[str, ...]  # runtime parameters after the pointers, in order


def _literal(v: object) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "float('-inf')"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    raise TypeError(f"not a scalar operand: {v!r}")


def _compute(dtype: str) -> str:
    return TL_DTYPE[COMPUTE.get(dtype, dtype)]


_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "bool": 1}


def _identity(reduction: str, dtype: str) -> str:
    """What masked-off elements hold for a reduction over values of `dtype` (exact for integers)."""
    bits = _INT_BITS.get(dtype)
    if bits is None:
        return REDUCTIONS[reduction]
    if reduction == "amax":
        return "0" if dtype in ("uint8", "bool") else str(-(1 << (bits - 1)))
    if reduction == "amin":
        return str((1 << bits) - 1) if dtype in ("uint8", "bool") else str((1 << (bits - 1)) - 1)
    return "0"


def _acc_dtype(dtype: str) -> str:
    """Cols kernels accumulate floats in float32 (float64 stays) and integers in int64."""
    return "tl.int64" if dtype in _INT_BITS else "tl.float64" if dtype == "float64" else "tl.float32"


class _Writer:
    def __init__(self, group: Group, layouts: list[Layout], wide: bool, even_rows: bool, even_cols: bool,
                 names: Names | None = None) -> None:
        self.g = group
        self.layouts = layouts
        self.wide = wide
        self.n = names or Names.default(group)
        # masks: None where the sizes are known to fill every block (then no mask is emitted)
        rows = group.kind != "pointwise"
        self.cmask = None if even_cols or not rows else "cmask"
        self.rmask = None if even_rows else "rmask" if rows else "mask"
        self.mask = ("mask" if self.rmask and self.cmask else self.rmask or self.cmask) if rows else self.rmask
        self.lines: list[str] = []
        self.params: list[str] = []
        self.names: dict[Ref, str] = {}
        self.kinds: dict[Ref, str] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def param(self, k: int, what: str) -> str:
        """A layout parameter of input k (added to the kernel's parameters once)."""
        name = f"{self.n.prefixes[k]}_{what}"
        if name not in self.params:
            self.params.append(name)
        return name

    def offset(self, k: int, index: str) -> str:
        """The element offset of input k for a (flat or row) index expression."""
        lay = self.layouts[k]
        if lay.linear:
            return index
        terms = []
        last = len(lay.row_dims) - 1
        for d, (_, stride) in enumerate(lay.row_dims):
            if stride == 0:
                continue
            # the innermost dim's divisor is 1; the outermost index is below its size already
            idx = index if d == last else f"({index} // {self.param(k, f'div{d}')})"
            if not (d == 0 and lay.outer):
                idx = f"({idx} % {self.param(k, f'size{d}')})"
            terms.append(f"{idx} * {self.param(k, f'stride{d}')}")
        return " + ".join(terms) or "0"

    def col_offset(self, k: int, cols: str = "cols") -> str:
        """The offset along C of input k: `cols` scaled by its stride ("0" when broadcast along C)."""
        stride = self.layouts[k].col_stride
        return cols if stride == 1 else "0" if stride == 0 else f"{cols} * {self.param(k, 'cstride')}"

    def operand(self, a: Ref | object) -> str:
        if isinstance(a, Ref):
            return self.names[a]
        if isinstance(a, str) and a in self.n.scalars:
            return a
        return _literal(a)

    def op(self, i: int, op: Op) -> None:
        ref = Ref(i)
        name = f"v{i}"
        refs = [a for a in op.args if isinstance(a, Ref)]
        self.kinds[ref] = op.kind
        if op.name in REDUCTIONS:
            self.reduction(name, op)
        elif op.name == "convert":
            expr = f"{self.operand(op.args[0])}.to({TL_DTYPE[op.dtype]})"
            if op.dtype in COMPUTE:  # rounded to the narrow type, then computed on in float32 as torch does
                expr += f".to({_compute(op.dtype)})"
            self.line(f"{name} = {expr}")
        else:
            template = ELEMENTWISE[op.name]
            expr = template.format(*(self.operand(a) for a in op.args))
            if (self.g.kind == "rows" and op.kind == FULL and refs
                    and all(self.kinds[r] == ROW for r in refs)):
                expr = f"tl.broadcast_to({expr}, (ROWS, BLOCK_C))"
            self.line(f"{name} = ({expr}).to({_compute(op.dtype)})")
        self.names[ref] = name

    def _dtype_of(self, a: object) -> str:
        """The dtype of an operand (a group input or an op's result)."""
        if isinstance(a, Ref):
            return self.g.inputs[a.index][0] if a.input else self.g.ops[a.index].dtype
        return "float32"

    def reduction(self, name: str, op: Op) -> None:
        a = op.args[0]
        x = self.operand(a)
        if isinstance(a, Ref) and self.kinds.get(a) == ROW:  # one value per row stands for C of them
            x = f"tl.broadcast_to({x}, (ROWS, BLOCK_C))"
        ident = _identity(op.name, self._dtype_of(a))
        masked = f"tl.where(cmask, {x}, {ident})" if self.cmask else x
        ctype = _compute(op.dtype)
        if op.name == "sum":
            self.line(f"{name} = tl.sum({masked}, axis=1, keep_dims=True).to({ctype})")
        elif op.name == "amax":
            self.line(f"{name} = tl.max({masked}, axis=1, keep_dims=True).to({ctype})")
        elif op.name == "amin":
            self.line(f"{name} = tl.min({masked}, axis=1, keep_dims=True).to({ctype})")
        elif op.name == "mean":
            self.line(f"{name} = (tl.sum({masked}, axis=1, keep_dims=True) / C).to({ctype})")
        else:  # var, two passes over the registers: the mean, then squared deviations
            correction = op.args[1] if len(op.args) > 1 else 1
            self.line(f"{name}_m = tl.sum({masked}, axis=1, keep_dims=True) / C")
            dev = f"{x} - {name}_m"
            self.line(f"{name}_d = tl.where(cmask, {dev}, 0.0)" if self.cmask else f"{name}_d = {dev}")
            self.line(f"{name} = (tl.sum({name}_d * {name}_d, axis=1, keep_dims=True) "
                      f"/ (C - {_literal(correction)})).to({ctype})")

    def body(self) -> None:
        g = self.g
        rows = g.kind == "rows"
        if rows:
            pid = "tl.program_id(0).to(tl.int64)" if self.wide else "tl.program_id(0)"
            self.line(f"rows = {pid} * ROWS + tl.arange(0, ROWS)[:, None]")
            self.line("cols = tl.arange(0, BLOCK_C)[None, :]")
            if self.rmask:
                self.line("rmask = rows < R")
            if self.cmask:
                self.line("cmask = cols < C")
            if self.mask == "mask":
                self.line("mask = rmask & cmask")
        else:
            pid = "tl.program_id(0).to(tl.int64)" if self.wide else "tl.program_id(0)"
            self.line(f"lin = {pid} * BLOCK + tl.arange(0, BLOCK)")
            if self.mask:
                self.line("mask = lin < n")
        for k in range(len(g.inputs)):
            if rows:
                self.load_row_input(k)
            else:
                self.load(k, self.offset(k, "lin"), self.mask, FULL)
        for i, op in enumerate(g.ops):
            self.op(i, op)
        for j, i in enumerate(g.outputs):
            if not rows:
                self.store(j, i, "lin", self.mask)
            elif g.ops[i].kind == FULL:
                self.store(j, i, "rows * C + cols", self.mask)
            else:
                self.store(j, i, "rows", self.rmask)

    def load(self, k: int, off: str, m: str | None, kind: str) -> None:
        """`values[k] = tl.load(inputs[k] + off)`, masked by m, in the compute dtype."""
        dtype, ptr, value = self.g.inputs[k][0], self.n.inputs[k], self.n.values[k]
        if off == "0":  # broadcast everywhere: one scalar (the tensor is not empty: the domain is not)
            self.line(f"{value} = tl.load({ptr}).to({_compute(dtype)})")
        else:
            masked = f", mask={m}, other=0" if m else ""
            self.line(f"{value} = tl.load({ptr} + {off}{masked}).to({_compute(dtype)})")
        self.names[Ref(k, input=True)] = value
        self.kinds[Ref(k, input=True)] = kind

    def load_row_input(self, k: int) -> None:
        """Input k of a domain walked as `rows` x `cols`: a full tile, or one value per row when the
        input is broadcast along C (or read per row)."""
        off = self.offset(k, "rows")
        if self.g.inputs[k][1] == FULL and self.layouts[k].col_stride != 0:
            col = self.col_offset(k)
            self.load(k, f"{off} + {col}" if off != "0" else col, self.mask, FULL)
        else:
            self.load(k, off, self.rmask, ROW)

    def store(self, j: int, i: int, off: str, m: str | None) -> None:
        """Output j (op i's value, in the op's dtype) at `outputs[j] + off`."""
        value = f"{self.names[Ref(i)]}.to({TL_DTYPE[self.g.ops[i].dtype]})"
        ptr = f"{self.n.outputs[j]} + {off}"
        self.line(f"tl.store({ptr}, {value}, mask={m})" if m else f"tl.store({ptr}, {value})")


_COL_REDUCTIONS = ("sum", "mean", "amax", "amin")


class _ColsWriter(_Writer):
    """A cols kernel: BLOCK_C columns a program; the rows walked BLOCK_R at a time, each reduction
    accumulated elementwise in a (BLOCK_R, BLOCK_C) tile of float32 across the walk and reduced over
    its rows after it; per-column work after that. `split`: the rows are walked
    RSPLIT at a time, chunk `program_id(1)`, and the per-column outputs (the reductions' partial
    results, split.py) written to that row of an (S, C) workspace."""

    split = False

    def body(self) -> None:
        g = self.g
        pid = "tl.program_id(0)"
        self.line(f"cols = {pid} * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]")
        if self.cmask:
            self.line("cmask = cols < C")
        reductions = [i for i, op in enumerate(g.ops) if op.name in _COL_REDUCTIONS]
        for i in reductions:
            src_dtype = self._dtype_of(g.ops[i].args[0])
            init = _identity(g.ops[i].name, src_dtype)
            self.line(f"acc{i} = tl.full((BLOCK_R, BLOCK_C), {init}, {_acc_dtype(src_dtype)})")
        if self.split:
            self.line("chunk = tl.program_id(1)")
            self.line("for r0 in range(chunk * RSPLIT, chunk * RSPLIT + RSPLIT, BLOCK_R):")
        else:
            self.line("for r0 in range(0, R, BLOCK_R):")
        outer = self.lines
        self.lines = []
        start = "(r0 + tl.arange(0, BLOCK_R)[:, None])"
        self.line(f"rows = {start}.to(tl.int64)" if self.wide else f"rows = {start}")
        if self.rmask:
            self.line("rmask = rows < R")
        if self.mask == "mask":
            self.line("mask = rmask & cmask")
        col_inputs = []
        for k, (dtype, kind) in enumerate(g.inputs):
            if kind == COL:
                col_inputs.append(k)
                continue
            off = self.offset(k, "rows")
            col = self.col_offset(k)
            if col != "0":
                off = f"{off} + {col}" if off != "0" else col
            ptr, value = self.n.inputs[k], self.n.values[k]
            masked = f", mask={self.mask}, other=0" if self.mask else ""
            load = f"tl.load({ptr} + {off}{masked})" if off != "0" else f"tl.load({ptr})"
            if "rows" not in off or "cols" not in off:  # broadcast along the walk or the columns: a full tile
                load = f"tl.broadcast_to({load}, (BLOCK_R, BLOCK_C))"
            self.line(f"{value} = {load}.to({_compute(dtype)})")
            self.names[Ref(k, input=True)] = value
            self.kinds[Ref(k, input=True)] = FULL
        for i, op in enumerate(g.ops):
            if op.kind != FULL:
                continue
            self.op(i, op)
        for i in reductions:
            op = g.ops[i]
            x = self.operand(op.args[0])
            ident = _identity(op.name, self._dtype_of(op.args[0]))
            part = f"tl.where({self.mask}, {x}, {ident})" if self.mask else x
            # elementwise into a tile of accumulators: no exchange between threads inside the walk
            if op.name in ("amax", "amin"):
                self.line(f"acc{i} = {'tl.maximum' if op.name == 'amax' else 'tl.minimum'}(acc{i}, {part})")
            else:
                self.line(f"acc{i} += {part}")
        for j, i in enumerate(g.outputs):
            if g.ops[i].kind == FULL:
                self.store(j, i, "rows * C + cols", self.mask)
        outer += ["    " + line for line in self.lines]
        self.lines = outer
        for i in reductions:
            fn = {"amax": "tl.max", "amin": "tl.min"}.get(g.ops[i].name, "tl.sum")
            self.line(f"acc{i} = {fn}(acc{i}, axis=0, keep_dims=True)")
        for k in col_inputs:
            self.load(k, self.col_offset(k), self.cmask, COL)
        for i, op in enumerate(g.ops):
            if op.kind == FULL:
                continue
            if i in reductions:
                scale = " / R" if op.name == "mean" else ""
                self.line(f"v{i} = (acc{i}{scale}).to({_compute(op.dtype)})")
                self.names[Ref(i)] = f"v{i}"
                self.kinds[Ref(i)] = COL
            else:
                self.op(i, op)
        for j, i in enumerate(g.outputs):
            if g.ops[i].kind != FULL:
                self.store(j, i, "chunk * C + cols" if self.split else "cols", self.cmask)


def emit(group: Group, layouts: list[Layout], name: str, *, wide: bool = False,
         values: Mapping[str, int] | None = None, even_rows: bool = False, even_cols: bool = False,
         names: Names | None = None, comments: Sequence[str] = (), split: bool = False) -> Kernel:
    """The kernel for `group` with its inputs laid out as `layouts`; `wide`: 64-bit indexing.

    `values`: the sizes, strides and block sizes of a static shape (`Kernel.params` and the block
    constants), written into the text: one kernel per shape, its index arithmetic folded, and a
    launch that passes only pointers. Without them they are parameters: one kernel for all shapes.
    `even_rows`: the programs cover the rows (pointwise: the elements) exactly; `even_cols`: C is
    BLOCK_C. Each drops its mask. `names`: what the parameters and loaded values are called;
    `comments`: lines written as comments at the top of the body. `split` (cols groups): the rows
    walked in chunks of RSPLIT, one a program along the grid's second axis (split.py)."""
    w = (_ColsWriter if group.kind == "cols" else _Writer)(group, layouts, wide, even_rows, even_cols, names)
    if isinstance(w, _ColsWriter):
        w.split = split
    w.body()
    size = ["n"] if group.kind == "pointwise" else ["R", "C"]
    blocks = {"rows": ["ROWS", "BLOCK_C"], "cols": ["BLOCK_R", "BLOCK_C"]}.get(group.kind, ["BLOCK"])
    if split:
        blocks = [*blocks, "RSPLIT"]
    return finish(w, name, size, blocks, values, comments)


def finish(w: _Writer, name: str, size: list[str], blocks: list[str], values: Mapping[str, int] | None,
           comments: Sequence[str]) -> Kernel:
    """The kernel text around a written body: the header, then the sizes written in (`values`) or not."""
    ptrs = [*w.n.inputs, *w.n.outputs]
    params = tuple([*w.n.scalars, *size, *w.params])
    if values is None:
        header = f"def {name}({', '.join(ptrs + list(params) + [f'{b}: tl.constexpr' for b in blocks])}):"
        prelude = []
    else:
        header = f"def {name}({', '.join(ptrs + list(w.n.scalars))}):"
        prelude = [f"    {p} = {int(values[p])}" for p in (*params[len(w.n.scalars):], *blocks)]
    notes = [f"    # {c}" for c in comments]
    text = "\n".join(["import triton", "import triton.language as tl",
                      "from triton.language.extra import libdevice", "", "", "@triton.jit", header, *notes,
                      *prelude, *w.lines, ""])
    return Kernel(name, text, params)
