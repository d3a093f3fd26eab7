"""The AMDGPU lowering table: one function per Tile IR op (register by register).

Scalar semantics (arithmetic, comparisons, conversions, bf16, fp8, the float32 math library) are
the shared ones of compiler/backends/llvm; this table adds what is the GPU's: program and thread
ids, tiles in registers, memory, the hardware exp2/log2 instructions. An op it has no entry for
raises an UnsupportedError naming the op, its source line and the target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ...ir.ops import ELEMENTWISE_COMPUTE
from ...layouts import LinearLayout, dim_names
from ..llvm import scalar as S
from ..llvm.elementwise import emit_scalar_op
from .atomic import lower_atomic_cas, lower_atomic_rmw
from .control import lower_for, lower_if, lower_while
from .convert import move, row_major
from .dot import lower_dot
from .histogram import lower_histogram
from .memory import lower_load, lower_store
from .reduce import lower_reduce
from .scan import lower_scan
from .shape_ops import RENAMING, lower_gather, lower_reshape, lower_sort
from .tiles import GPUTile, amd_type, num_regs, reg_coords, unsupported

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["lower_op", "LOWER", "F64_NATIVE"]

# what the user wrote, for the ops the slice does not lower
_NAMES = {
    "print": "tl.device_print", "assert": "tl.device_assert", "inline_asm": "tl.inline_asm_elementwise",
    "shared_alloc": "tl.extra.cuda.shared_memory",
}
# why, and what to do instead, for the ops this backend refuses
_HINTS = {
    "print": "printing from an AMD GPU needs ROCm's hostcall buffer protocol, which this backend does not "
             "implement: run the kernel on 'cpu' (or a 'cuda' target), where tl.device_print works, or remove it",
    "assert": "asserting on an AMD GPU needs ROCm's hostcall buffer protocol, which this backend does not "
              "implement: run the kernel on 'cpu' (or a 'cuda' target), where tl.device_assert works, or remove it",
    "inline_asm": "the asm text is target specific (PTX on NVIDIA), and the LLVM this backend emits code objects "
                  "with has no AMDGPU assembly parser for inline AMDGCN: keep the asm on a 'cuda' target and give "
                  "the AMD target a tl.constexpr branch in plain tl operations",
    "shared_alloc": "tl.extra.cuda.shared_memory is a CUDA extension: compile for a 'cuda' target",
}
_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
# float64 functions the AMDGPU backend of LLVM lowers to instructions; the others are calls into
# ROCm's device library (ocml), which the slice does not link
F64_NATIVE = frozenset({"neg", "not", "abs", "fma", "floor", "ceil", "trunc", "round", "rint", "nearbyint", "isnan",
                        "isinf", "isfinite", "signbit", "sqrt", "sqrt_rn", "rsqrt", "div_rn", "fast_dividef",
                        "saturate", "ldexp", "ilogb", "popc", "clz", "ffs", "brev"})


def lower_op(lw: AmdLowering, op: Op) -> None:
    fn = LOWER.get(op.opcode)
    if fn is not None:
        fn(lw, op)
    elif op.opcode in ELEMENTWISE_COMPUTE:
        _elementwise(lw, op)
    else:
        raise unsupported(_NAMES.get(op.opcode, f"the Tile IR op {op.opcode}"), op, lw.arch,
                          _HINTS.get(op.opcode, ""))


def _check_math(lw: AmdLowering, op: Op) -> None:
    et = T.elem_of(op.operands[0].type)
    if et != T.fp64:
        return
    if op.opcode == "math" and op.attrs["fn"] not in F64_NATIVE:
        name = f"tl.{op.attrs['fn']} on float64"
    elif op.opcode in ("pow", "atan2", "hypot"):
        name = f"{op.opcode} on float64"
    else:
        return
    raise unsupported(name, op, lw.arch, "float64 math functions need ROCm's device library (ocml), not linked "
                      "yet: cast to tl.float32 first")


def _math(lw: AmdLowering, fn: str, t: T.ScalarType, args: list[ir.Value]) -> ir.Value:
    """fp32 exp, exp2, log, log2 and sigmoid on the hardware's v_exp_f32 / v_log_f32 (LLVM's
    llvm.exp2 / llvm.log2, which handle the denormal range); fp16 and bf16 computed in fp32;
    everything else the shared semantics (the float32 math library: straight-line arithmetic)."""
    b = lw.b
    if t in (T.fp16, T.bf16) and fn in ("exp", "exp2", "log", "log2", "sigmoid", "fast_expf", "fast_logf"):
        r = _math(lw, fn, T.fp32, [S.emit_cast(b, t, T.fp32, a) for a in args])
        return S.emit_cast(b, T.fp32, t, r)
    if t != T.fp32:
        return S.emit_math(b, fn, t, args)
    x = args[0]

    def mul(v: ir.Value, c: float) -> ir.Value:
        r = b.fmul(v, ir.Constant(S.F32, c))
        r.flags.extend(lw.fmf)
        return r

    def exp2(v: ir.Value) -> ir.Value:
        return lw.intrinsic("llvm.exp2.f32", S.F32, [v])

    def log2(v: ir.Value) -> ir.Value:
        return lw.intrinsic("llvm.log2.f32", S.F32, [v])

    if fn in ("exp", "fast_expf"):
        return exp2(mul(x, _LOG2E))
    if fn == "exp2":
        return exp2(x)
    if fn in ("log", "fast_logf"):
        return mul(log2(x), _LN2)
    if fn == "log2":
        return log2(x)
    if fn == "sigmoid":
        one = ir.Constant(S.F32, 1.0)
        return b.fdiv(one, b.fadd(one, exp2(mul(x, -_LOG2E))))
    return S.emit_math(b, fn, t, args)


def _scalar_op(lw: AmdLowering, op: Op, args: list[ir.Value]) -> ir.Value:
    out = emit_scalar_op(lw.b, op, args, lw.fmf, math=lambda fn, t, a: _math(lw, fn, t, a), pointee=amd_type)
    if out is None:
        raise unsupported(f"the elementwise op {op.opcode}", op, lw.arch)
    return out


def _elementwise(lw: AmdLowering, op: Op) -> None:
    _check_math(lw, op)
    r = op.results[0]
    if not isinstance(r.type, T.TileType):
        lw.vals[r] = _scalar_op(lw, op, [lw.scalar(o) for o in op.operands])
        return
    layout = lw.result_layout(op)
    ins = [lw.tile(o, layout) for o in op.operands]
    lw.vals[r] = GPUTile(layout, [_scalar_op(lw, op, [t.regs[i] for t in ins]) for i in range(num_regs(layout))])


def _constant(lw: AmdLowering, op: Op) -> None:
    t = op.result.type
    assert isinstance(t, T.ScalarType)
    lw.vals[op.result] = S.const(t, op.attrs["value"])


def _pid(lw: AmdLowering, op: Op) -> None:
    lw.vals[op.result] = lw.pid[op.attrs["axis"]]


def _nprog(lw: AmdLowering, op: Op) -> None:
    lw.vals[op.result] = lw.num_programs(op.attrs["axis"])


def _make_range(lw: AmdLowering, op: Op) -> None:
    layout = lw.canonical(T.shape_of(op.result.type))
    hw = lw.hw_coords(layout)[0]
    start = op.attrs["start"]
    b = lw.b
    base = b.add(hw, ir.Constant(S.I32, start)) if start else hw
    regs = [b.add(base, ir.Constant(S.I32, reg_coords(layout, r)[0])) for r in range(num_regs(layout))]
    lw.vals[op.result] = GPUTile(layout, regs)


def _splat(lw: AmdLowering, op: Op) -> None:
    layout = lw.canonical(T.shape_of(op.result.type))
    lw.vals[op.result] = GPUTile(layout, [lw.scalar(op.operands[0])] * num_regs(layout))


def _relabel(lw: AmdLowering, op: Op, bases_of: Callable[[tuple[int, ...]], tuple[int, ...]]) -> None:
    """A result holding the operand's registers unchanged, in a layout whose bases are the
    operand's mapped by `bases_of` (expand_dims inserts a dim of size 1, trans permutes dims)."""
    x = lw.vals[op.operands[0]]
    shape = T.shape_of(op.result.type)
    if not isinstance(x, GPUTile):
        layout = lw.canonical(shape)
        lw.vals[op.result] = GPUTile(layout, [x] * num_regs(layout))
        return
    bases = {name: [bases_of(bs) for bs in rows] for name, rows in x.layout.in_dims}
    new = LinearLayout.from_bases(bases, dict(zip(dim_names(len(shape)), shape, strict=True)))
    lw.vals[op.result] = GPUTile(new, list(x.regs))


def _expand_dims(lw: AmdLowering, op: Op) -> None:
    ax = op.attrs["axis"]
    _relabel(lw, op, lambda bs: (*bs[:ax], 0, *bs[ax:]))


def _trans(lw: AmdLowering, op: Op) -> None:
    perm = op.attrs["perm"]
    _relabel(lw, op, lambda bs: tuple(bs[p] for p in perm))


def _broadcast(lw: AmdLowering, op: Op) -> None:
    """The result in the canonical layout of its shape, each element read from the operand at
    the same coordinates with the broadcast dims at 0 (the thread's own registers when it holds
    them: a reduction's result broadcast back over the reduced dim moves no data)."""
    src_v = op.operands[0]
    shape = T.shape_of(op.result.type)
    x = lw.vals[src_v]
    layout = lw.canonical(shape)
    if not isinstance(x, GPUTile):
        lw.vals[op.result] = GPUTile(layout, [x] * num_regs(layout))
        return
    src_shape = x.layout.out_shape
    strides = tuple(0 if s == 1 and n != 1 else st for s, n, st in zip(src_shape, shape, row_major(src_shape),
                                                                         strict=True))
    lw.vals[op.result] = move(lw, x, layout, strides, T.elem_of(src_v.type), op)


def _noop(lw: AmdLowering, op: Op) -> None:
    return None


def _barrier(lw: AmdLowering, op: Op) -> None:
    lw.barrier()


LOWER: dict[str, Callable[[AmdLowering, Op], None]] = {
    "constant": _constant,
    "program_id": _pid,
    "num_programs": _nprog,
    "make_range": _make_range,
    "splat": _splat,
    "expand_dims": _expand_dims,
    "broadcast": _broadcast,
    "reshape": lower_reshape,
    "trans": _trans,
    "load": lower_load,
    "store": lower_store,
    "for": lower_for,
    "if": lower_if,
    "while": lower_while,
    "reduce": lower_reduce,
    "atomic_rmw": lower_atomic_rmw,
    "atomic_cas": lower_atomic_cas,
    "scan": lower_scan,
    "histogram": lower_histogram,
    "dot": lower_dot,
    "join": RENAMING["join"],
    "split": RENAMING["split"],
    "cat": RENAMING["cat"],
    "gather": lower_gather,
    "sort": lower_sort,
    "assume": _noop,
    "barrier": _barrier,
}
