"""The Tile IR op set, declared once: `SPECS[opcode]` says what each opcode takes and gives.

For every op: its operands (named; some present only when an attribute says so, the last may be
variadic), every attribute it may carry (kind, required or optional with its default, allowed
values), the number of regions, the rule its result types follow, whether it is elementwise (and
how), whether it is pure, and its constant folding where there is one (ir/folding.py). The
verifier (ir/verifier.py) checks ops against this table; passes and backends take their op sets
(ELEMENTWISE and the others below) from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import rules as R
from .folding import FOLDS, Fold
from .rules import Attr, Check, Operand, Rule
from .types import ScalarType, i1, i32

__all__ = [
    "OpSpec", "SPECS", "Attr", "Operand", "COMMON_ATTRS", "is_pure", "operand_range",
    "BINARY", "FLOAT_BINARY", "EXPENSIVE_BINARY", "ASSOCIATIVE", "ELEMENTWISE", "ELEMENTWISE_COMPUTE", "MOVEMENT",
    "MATH_FNS", "MATH_RESULTS", "CMP_PREDICATES", "ATOMIC_KINDS", "MEMORY_ORDERS", "SCOPES", "DOT_PRECISIONS",
]

MEMORY_ORDERS = ("acq_rel", "acquire", "release", "relaxed")  # an atomic's `sem`
SCOPES = ("gpu", "cta", "sys")  # an atomic's `scope`
DOT_PRECISIONS = ("tf32", "tf32x3", "ieee")  # tl.dot's input_precision for float32 operands

# How an elementwise op computes its result: from operands at the result's index ("unary",
# "binary", "ternary", "variadic": math, by function), from an operand at a projected index
# ("broadcast"), from the index alone ("generator"), or from memory at its pointers ("memory").
ELEMENTWISE_KINDS = ("unary", "binary", "ternary", "variadic", "broadcast", "generator", "memory")


@dataclass(frozen=True)
class OpSpec:
    """One opcode's definition (see the module docstring)."""

    name: str
    operands: tuple[Operand, ...]
    result: Rule
    attrs: tuple[Attr, ...] = ()
    regions: int = 0
    pure: bool = True
    elementwise: str = ""  # one of ELEMENTWISE_KINDS, or "" when not elementwise
    moves: bool = False  # only moves or repeats its operand's elements (no arithmetic)
    expensive: bool = False  # a library call or a long sequence: not worth recomputing
    associative: bool = False  # binary, associative and commutative: a reduction may reorder it
    checks: tuple[Check, ...] = ()  # operand type constraints beyond the counts
    fold: Fold | None = None  # scalar constant folding (ir/folding.py)
    doc: str = ""

    def attr(self, name: str) -> Attr | None:
        return next((a for a in (*self.attrs, *COMMON_ATTRS) if a.name == name), None)

    @property
    def required_attrs(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs if a.required)


# Attributes any op with one result may carry.
COMMON_ATTRS = (
    Attr("axis_hints", "hints", False, (), doc="the kernel's promises on the value (tl.multiple_of, "
         "tl.max_contiguous, tl.max_constancy), sorted by name; read by passes/axis_info.py"),
)

BINARY = (
    "add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "shr",
    "max", "min", "umulhi", "pow", "atan2", "copysign", "hypot",
)
# Binary ops on floats only (libdevice's two-argument functions that are opcodes, not `math`).
FLOAT_BINARY = ("pow", "atan2", "copysign", "hypot")

# Unary and ternary math functions by name (the `fn` attribute of `math`): their arity.
MATH_FNS = {
    "neg": 1, "not": 1, "abs": 1, "exp": 1, "exp2": 1, "log": 1, "log2": 1, "log10": 1, "log1p": 1,
    "expm1": 1, "sqrt": 1, "rsqrt": 1, "cbrt": 1, "sin": 1, "cos": 1, "tan": 1, "asin": 1,
    "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "tanh": 1, "asinh": 1, "acosh": 1, "atanh": 1,
    "erf": 1, "erfc": 1, "floor": 1, "ceil": 1, "trunc": 1, "round": 1, "rint": 1,
    "nearbyint": 1, "isnan": 1, "isinf": 1, "isfinite": 1, "signbit": 1, "popc": 1,
    "clz": 1, "ffs": 1, "brev": 1, "sigmoid": 1, "fma": 3, "lgamma": 1, "tgamma": 1,
    "exp10": 1, "j0": 1, "j1": 1, "y0": 1, "y1": 1, "erfinv": 1, "fast_expf": 1, "fast_logf": 1,
    "fast_dividef": 2, "div_rn": 2, "fmod": 2, "remainder": 2, "nextafter": 2, "ldexp": 2,
    "fdim": 2, "sqrt_rn": 1, "saturate": 1, "ilogb": 1,
}
# The math functions whose result element type is fixed (the others keep operand 0's).
MATH_RESULTS: dict[str, ScalarType] = {
    "isnan": i1, "isinf": i1, "isfinite": i1, "signbit": i1, "popc": i32, "clz": i32, "ffs": i32, "ilogb": i32,
}

CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
ATOMIC_KINDS = ("add", "fadd", "max", "min", "fmax", "fmin", "umax", "umin", "and", "or", "xor", "xchg")
_LOAD_CACHE = (".ca", ".cg", ".cv")
_STORE_CACHE = (".wb", ".cg", ".cs", ".wt")
_EVICTION = ("evict_first", "evict_last")

_P = Operand("ptr")
_MASK = Operand("mask", when="has_mask")


def _math_arity(op: Any) -> str | None:
    fn = op.attrs.get("fn")
    n = MATH_FNS.get(fn) if isinstance(fn, str) else None
    if n is not None and len(op.operands) != n:
        return f"math function {fn!r} takes {n} operand(s), got {len(op.operands)}"
    return None


def _cache(choices: tuple[str, ...]) -> tuple[Attr, ...]:
    return (Attr("cache", "str", False, None, choices, "cache modifier (backends/nvidia/cache_hints.py)"),
            Attr("eviction", "str", False, None, _EVICTION, "eviction policy"))


_SEM = Attr("sem", "str", choices=MEMORY_ORDERS, doc="memory order")
_SCOPE = Attr("scope", "str", choices=SCOPES, doc="which threads the order is with")
_HAS_MASK = Attr("has_mask", "bool", doc="a mask operand follows")


def _binary(name: str) -> OpSpec:
    attrs: tuple[Attr, ...] = ()
    if name in ("max", "min"):
        attrs = (Attr("propagate_nan", "str", False, "none", ("none", "all"),
                      "floats: 'all' returns NaN if either operand is NaN"),)
    return OpSpec(name, (Operand("lhs"), Operand("rhs")), R.same_as(0), attrs, elementwise="binary",
                  expensive=name in ("div", "pow", "atan2", "hypot"),
                  associative=name in ("add", "mul", "max", "min", "and", "or", "xor"), checks=(R.same_types(0, 1),),
                  fold=FOLDS.get(name))


_TABLE: tuple[OpSpec, ...] = (
    *(_binary(b) for b in BINARY),
    # ----------------------------------------------------------------- values from nothing
    OpSpec("constant", (), R.constant_of(),
           (Attr("value", "number", doc="int, float or bool, as the result type"),), elementwise="generator"),
    OpSpec("program_id", (), R.fixed(i32), (Attr("axis", "int", choices=(0, 1, 2)),)),
    OpSpec("num_programs", (), R.fixed(i32), (Attr("axis", "int", choices=(0, 1, 2)),)),
    OpSpec("make_range", (), R.range_of(), (Attr("start", "int"), Attr("end", "int")), elementwise="generator"),
    # ----------------------------------------------------------------- shapes
    OpSpec("splat", (Operand("value"),), R.splat_of(), elementwise="broadcast"),
    OpSpec("broadcast", (Operand("src"),), R.broadcast_of(), elementwise="broadcast", moves=True),
    OpSpec("expand_dims", (Operand("src"),), R.expand_dims_of(), (Attr("axis", "int"),),
           elementwise="broadcast", moves=True),
    OpSpec("reshape", (Operand("src"),), R.reshape_of(), moves=True),
    OpSpec("trans", (Operand("src"),), R.trans_of(), (Attr("perm", "ints"),), moves=True),
    OpSpec("join", (Operand("lhs"), Operand("rhs")), R.join_of(), moves=True, checks=(R.same_types(0, 1),)),
    OpSpec("split", (Operand("src"),), R.split_of(), moves=True),
    OpSpec("cat", (Operand("lhs"), Operand("rhs")), R.cat_of()),
    OpSpec("gather", (Operand("src"), Operand("index")), R.gather_of(), (Attr("axis", "int"),), moves=True),
    OpSpec("histogram", (Operand("input"), Operand("mask", optional=True)), R.bins()),
    # ----------------------------------------------------------------- elementwise arithmetic
    OpSpec("cmp", (Operand("lhs"), Operand("rhs")), R.bool_of(0), (Attr("pred", "str", choices=CMP_PREDICATES),),
           elementwise="binary", checks=(R.same_types(0, 1),)),
    OpSpec("math", (Operand("args", variadic=True),), R.math_result(MATH_RESULTS.get),
           (Attr("fn", "str", choices=tuple(MATH_FNS)),), elementwise="variadic", expensive=True,
           checks=(_math_arity,)),
    OpSpec("cast", (Operand("src"),), R.cast_of(),
           (Attr("rounding", "str", False, None, ("rtne", "rtz"), "float downcasts: the rounding mode"),),
           elementwise="unary"),
    OpSpec("bitcast", (Operand("src"),), R.bitcast_of(), elementwise="unary"),
    OpSpec("select", (Operand("cond"), Operand("lhs"), Operand("rhs")), R.same_as(1), elementwise="ternary",
           checks=(R.same_types(1, 2), R.bool_first)),
    OpSpec("addptr", (Operand("ptr"), Operand("offset")), R.same_as(0), elementwise="binary",
           checks=(R.int_offsets,)),
    # ----------------------------------------------------------------- memory
    OpSpec("load", (_P, _MASK, Operand("other", when="has_other")), R.pointee_of(0),
           (_HAS_MASK, Attr("has_other", "bool", doc="an `other` operand (value where masked off) follows"),
            *_cache(_LOAD_CACHE), Attr("volatile", "bool", False, False, doc="never cached, removed or moved")),
           elementwise="memory", checks=(R.pointer_first, R.other_is_result)),
    OpSpec("store", (_P, Operand("value"), _MASK), R.none(), (_HAS_MASK, *_cache(_STORE_CACHE)), pure=False,
           checks=(R.pointer_first, R.pointee_typed(1))),
    OpSpec("atomic_rmw", (_P, Operand("value"), _MASK), R.pointee_of(0),
           (Attr("kind", "str", choices=ATOMIC_KINDS), _SEM, _SCOPE, _HAS_MASK), pure=False,
           checks=(R.pointer_first, R.pointee_typed(1))),
    OpSpec("atomic_cas", (_P, Operand("cmp"), Operand("value")), R.pointee_of(0), (_SEM, _SCOPE), pure=False,
           checks=(R.pointer_first, R.pointee_typed(1, 2))),
    OpSpec("shared_alloc", (), R.fixed(i32), (Attr("nbytes", "int"),), pure=False,
           doc="reserves shared memory; the result is its address"),
    # ----------------------------------------------------------------- tile computations
    OpSpec("dot", (Operand("a"), Operand("b"), Operand("acc")), R.same_as(2),
           (Attr("input_precision", "str", choices=DOT_PRECISIONS, doc="for float32 operands"),
            Attr("b_kmajor", "bool", False, False, doc="B is loaded K-contiguous (backends/nvidia/async_copy.py)"),
            Attr("in_flight", "bool", False, False, doc="may complete after the next dot (passes/pipeline.py)"))),
    OpSpec("reduce", (Operand("inputs", variadic=True),), R.reduced(), (Attr("axis", "int"),), regions=1,
           checks=(R.combine_region,)),
    OpSpec("scan", (Operand("inputs", variadic=True),), R.same_as_operands(),
           (Attr("axis", "int"), Attr("reverse", "bool")), regions=1, checks=(R.combine_region,)),
    OpSpec("sort", (Operand("src"),), R.same_as(0), (Attr("axis", "int"), Attr("descending", "bool"))),
    # ----------------------------------------------------------------- control flow
    OpSpec("for", (Operand("lower"), Operand("upper"), Operand("step"), Operand("inits", variadic=True)),
           R.loop_carried(3),
           (Attr("step_sign", "int", False, 0, (-1, 0, 1), "the sign of a constant step (0: not constant)"),
            Attr("num_stages", "int", False, None, doc="pipeline depth asked for this loop's loads")),
           regions=1, pure=False, checks=(R.scalar_ints(0, 1, 2), R.same_types(0, 1, 2), R.loop_body)),
    OpSpec("if", (Operand("cond"),), R.given("what the regions yield"), regions=2, pure=False,
           checks=(R.branches,)),
    OpSpec("while", (Operand("inits", variadic=True),), R.given("what the condition forwards"), regions=2,
           pure=False, checks=(R.while_regions,)),
    OpSpec("yield", (Operand("values", variadic=True),), R.none(), pure=False, doc="ends a region"),
    OpSpec("condition", (Operand("cond"), Operand("values", variadic=True)), R.none(), pure=False,
           doc="ends a while loop's first region: continue if cond, forwarding the values"),
    # ----------------------------------------------------------------- debugging and hints
    OpSpec("print", (Operand("values", variadic=True),), R.none(), (Attr("prefix", "str"), Attr("hex", "bool")),
           pure=False),
    OpSpec("assert", (Operand("cond"),), R.none(), (Attr("msg", "str"),), pure=False),
    OpSpec("barrier", (), R.none(), pure=False),
    OpSpec("assume", (Operand("cond"),), R.none(), pure=False),
    OpSpec("inline_asm", (Operand("args", variadic=True),), R.given("the dtypes asked for, in the args' shape"),
           (Attr("asm", "str"), Attr("constraints", "str"),
            Attr("pure", "bool", doc="False: kept and ordered though its results are unused"),
            Attr("pack", "int", doc="elements per asm instance")), doc="see is_pure"),
    # ----------------------------------------------------------------- GPU only (passes/pipeline.py)
    OpSpec("async_copy", (_P, _MASK, Operand("pred"), Operand("slot")), R.none(),
           (Attr("buffer", "int"), Attr("stages", "int"), _HAS_MASK, Attr("commit", "bool"),
            Attr("transposed", "bool"), Attr("private", "bool")), pure=False,
           checks=(R.pointer_first, R.pred_and_slot), doc="copies a tile into a shared-memory slot, asynchronously"),
    OpSpec("async_wait", (Operand("slot"),), R.given("the tile the copies of `buffer` hold"),
           (Attr("buffer", "int"), Attr("stages", "int"), Attr("sync", "bool"), Attr("pending", "int"),
            Attr("private", "bool")), pure=False, checks=(R.slot_and_tile,)),
    OpSpec("async_drain", (Operand("values", variadic=True),), R.same_as_operands(), pure=False,
           doc="no copy in flight after it; passes the values through"),
)

SPECS: dict[str, OpSpec] = {s.name: s for s in _TABLE}

# Ops computed element by element over their result's shape: fusable into one loop.
ELEMENTWISE = frozenset(n for n, s in SPECS.items() if s.elementwise)
# Elementwise arithmetic: each result element from the operands' elements at the same index.
ELEMENTWISE_COMPUTE = frozenset(n for n, s in SPECS.items() if s.elementwise in ("unary", "binary", "ternary",
                                                                                 "variadic"))
# Ops that only move or repeat their operand's elements.
MOVEMENT = frozenset(n for n, s in SPECS.items() if s.moves)
EXPENSIVE_BINARY = frozenset(b for b in BINARY if SPECS[b].expensive)
# Combines a reduction may reorder (reassociate): a combine region of only these is one.
ASSOCIATIVE = frozenset(n for n, s in SPECS.items() if s.associative)


def operand_range(spec: OpSpec, attrs: dict[str, Any]) -> tuple[int, int | None]:
    """How many operands an op of `spec` with `attrs` takes: (at least, at most; None: any)."""
    lo = hi = 0
    for o in spec.operands:
        if o.variadic:
            return lo, None
        if o.when and not attrs.get(o.when):
            continue
        hi += 1
        if not o.optional:
            lo += 1
    return lo, hi


def is_pure(op: Any) -> bool:
    """No side effects: the opcode's spec says so, and an inline_asm op was not declared with
    is_pure=False (a barrier, a store: kept, in order, even when its result is unused)."""
    return SPECS[op.opcode].pure and not (op.opcode == "inline_asm" and not op.attrs.get("pure", True))
