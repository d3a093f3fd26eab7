"""The closed world of compile-time values: what kernel code may name, read, call and build.

Kernel source is data. While the frontend turns it into Tile IR it evaluates compile-time
Python (constexpr arithmetic, dtype queries, tuples, `tl.static_range` unrolling), and that
evaluation sees only values of a closed set:

- None, bools, ints (at most `MAX_INT_BITS` bits), floats, strings and tuples/lists (at most
  `MAX_ITEMS` characters or leaves), slices;
- the language's own objects: tensors, dtypes, block types, constexprs, block pointers and
  tensor descriptors; the language's classes, functions and namespaces (`tl`, `tl.math`,
  `tl.extra.*`, the `triton` stand-in's `language`) and `@jit` functions;
- a few pure helpers: the numeric functions of `math` in `MATH_FUNCTIONS`, `cdiv`,
  `next_power_of_2`, the standard library's `_log2` and `_is_power_of_two` (imported by name:
  libraries take them from `triton.language.standard`), and the Python builtins in
  `pybuiltins.PY_BUILTINS`;
- the compile-time helpers of source text (`@triton.constexpr_function`), which are `@jit`
  functions of the text evaluated by compiletime.py, never executed.

Attribute access goes through an allow-list per kind of value (`value_attribute`); no name
starting with `_` is reachable, and modules expose only their closed exports. Whether something
may be called is decided by identity (`allowed_function`, `core.is_builtin`, the JIT resolver),
never by what an object says about itself. Nothing reachable can be mutated: assignment targets
are names, methods on compile-time values are the non-mutating ones listed here, and containers
owned by language objects are handed out as tuples.

Work is bounded too: the size of every value built at compile time is checked before it is
built (`bounded_binary`, `check_value`, `bounded_format`), and `Budget` counts the nodes the
frontend visits and the ops it creates.
"""

from __future__ import annotations

import difflib
import importlib
import math
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..helpers import cdiv, next_power_of_2
from ..language import core as lc
from ..language import standard
from ..runtime.function import DeviceFunction, python_helper
from .limits import (
    MAX_AST_DEPTH,
    MAX_INLINE_DEPTH,
    MAX_INT_BITS,
    MAX_ITEMS,
    MAX_OPS,
    MAX_STEPS,
    MAX_UNROLL,
    Budget,
    LimitError,
    bounded_str_source,
    leaves,
    too_deep,
)
from .values import Shape

__all__ = ["LimitError", "Budget", "MAX_INT_BITS", "MAX_ITEMS", "MAX_UNROLL", "MAX_STEPS", "MAX_OPS",
           "MAX_INLINE_DEPTH", "MAX_AST_DEPTH", "module_export", "value_attribute", "CompileTimeMethod",
           "allowed_function", "is_closed", "too_deep", "bounded_binary", "check_value", "bounded_format", "leaves",
           "language_modules", "DataModule", "admit_data", "bounded_str_source"]

_MAX_FORMAT_WIDTH = 4096


# ---------------------------------------------------------------------- modules
def language_modules() -> dict[int, types.ModuleType]:
    """The namespaces kernel code may reach, by identity: the language and the `triton` stand-in's."""
    global _MODULES
    if _MODULES is None:
        names = ["compiler.language", "compiler.language.core", "compiler.language.builtins",
                 "compiler.language.standard", "compiler.language.math", "compiler.language.random",
                 "compiler.language.extra", "compiler.language.extra.libdevice", "compiler.language.extra.cuda",
                 "compiler.triton_compat.language", "compiler.triton_compat.language.core",
                 "compiler.triton_compat.language.extra"]
        mods = [importlib.import_module(n) for n in names]
        _MODULES = {id(m): m for m in mods}
    return _MODULES


_MODULES: dict[int, types.ModuleType] | None = None
_EXPORTS: dict[int, dict[str, Any]] = {}

# The names the top-level packages offer a kernel (everything else of them is host-side code).
_PACKAGE_NAMES = {"compiler": ("language", "cdiv", "next_power_of_2"),
                  "compiler.triton_compat": ("language", "cdiv", "next_power_of_2")}

MATH_FUNCTIONS = frozenset((
    "sqrt", "isqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "ceil", "floor", "trunc",
    "fabs", "copysign", "fmod", "gcd", "isnan", "isinf", "isfinite", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "tanh", "erf", "erfc", "hypot", "radians", "degrees", "frexp", "ldexp",
    "isclose",
))
MATH_CONSTANTS = frozenset(("pi", "e", "tau", "inf", "nan"))


def _package(mod: types.ModuleType) -> tuple[str, ...] | None:
    for name, allowed in _PACKAGE_NAMES.items():
        if sys.modules.get(name) is mod:
            return allowed
    return None


def module_export(mod: Any, name: str) -> tuple[bool, Any]:
    """(True, value) when kernel code may read `mod.name`; (False, None) otherwise."""
    if name.startswith("_"):
        return False, None
    if mod is math:
        if name in MATH_FUNCTIONS or name in MATH_CONSTANTS:
            return True, getattr(math, name)
        return False, None
    exports = _EXPORTS.get(id(mod))
    if exports is None:
        allowed = _package(mod) if isinstance(mod, types.ModuleType) else None
        if allowed is not None:
            exports = {n: getattr(mod, n) for n in allowed if hasattr(mod, n)}
        elif language_modules().get(id(mod)) is mod:
            exports = {}
        else:
            return False, None
        _EXPORTS[id(mod)] = exports
        _PACKAGE_EXPORTS[id(mod)] = allowed is not None
    if name in exports:
        return True, exports[name]
    if _PACKAGE_EXPORTS[id(mod)]:
        return False, None
    # A language namespace: any public name whose value is of the closed world (looked up once; some
    # namespaces make their functions on first use through a module-level __getattr__).
    try:
        value = getattr(mod, name)
    except AttributeError:
        return False, None
    if not is_closed(value, exported=True):
        return False, None
    exports[name] = value
    return True, value


_PACKAGE_EXPORTS: dict[int, bool] = {}


# ---------------------------------------------------------------------- closed values
def _language_classes() -> frozenset[Any]:
    return frozenset((lc.constexpr, lc.Tensor, lc.dtype, lc.pointer_type, lc.block_type, lc.static_range,
                      lc.range, lc.PropagateNan))


def allowed_function(fn: Any) -> bool:
    """The pure host functions a kernel may call with compile-time numbers (by identity)."""
    return _pure_functions().get(id(fn)) is fn


_PURE: dict[int, Any] | None = None


def _pure_functions() -> dict[int, Any]:
    global _PURE
    if _PURE is None:
        fns = [getattr(math, n) for n in MATH_FUNCTIONS] + [cdiv, next_power_of_2, standard._log2,
                                                           standard._is_power_of_two]
        _PURE = {id(f): f for f in fns}
    return _PURE


def is_closed(v: Any, exported: bool = False, _depth: int = 0) -> bool:
    """True for a value of the closed world (see the module docstring)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, (tuple, list)):
        return _depth < 8 and all(is_closed(x, exported, _depth + 1) for x in v[:64]) and len(v) <= MAX_ITEMS
    if isinstance(v, (lc.dtype, lc.block_type, lc.Tensor)):
        return True
    if isinstance(v, types.ModuleType):
        return id(v) in language_modules() or v is math or _package(v) is not None
    if lc.is_builtin(v) or allowed_function(v):
        return True
    if isinstance(v, type):
        return v in _language_classes()
    return isinstance(v, DeviceFunction)


# ---------------------------------------------------------------------- a Python kernel's own data
@dataclass(frozen=True)
class DataModule:
    """A module of the user's own that a Python kernel's globals hold (`consts.TABLE`): its public
    attributes are read as data, admitted by the same rule as the kernel's globals (`admit_data`).
    Never made for source text, whose imports resolve only to the language's modules."""

    module: types.ModuleType


def admit_data(v: Any, _depth: int = 0) -> Any:
    """A Python kernel's global as a compile-time value: a value of the closed world, a dict of such
    values (read with constant keys), or another module of the user's (a DataModule); _MISSING if not."""
    if is_closed(v):
        return v
    if isinstance(v, dict) and _depth < 8 and len(v) <= MAX_ITEMS:
        for key, value in v.items():
            if not is_closed(key) or admit_data(value, _depth + 1) is _MISSING:
                return _MISSING
        return v
    if isinstance(v, types.ModuleType):
        return DataModule(v)
    return _MISSING


# ---------------------------------------------------------------------- attributes of values
# Methods of compile-time values kernels may call: none of them mutates or grows anything.
_STR_METHODS = frozenset((
    "startswith", "endswith", "lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "isdigit",
    "isalpha", "isalnum", "isspace", "isupper", "islower", "count", "find", "rfind", "index", "rindex",
    "partition", "rpartition", "removeprefix", "removesuffix", "join",
))
_SEQ_METHODS = frozenset(("index", "count"))
_DTYPE_METHODS = frozenset((
    "is_floating", "is_int", "is_int_signed", "is_int_unsigned", "is_bool", "is_ptr", "is_fp8", "is_fp16",
    "is_bf16", "is_fp32", "is_fp64", "is_block",
))
_DTYPE_PROPERTIES = frozenset((
    "name", "primitive_bitwidth", "int_bitwidth", "fp_mantissa_width", "exponent_bias", "scalar", "element_ty",
))
_DTYPE_CLASS_LISTS = frozenset(("SINT_TYPES", "UINT_TYPES", "FP_TYPES", "STANDARD_FP_TYPES", "OTHER_TYPES"))


@dataclass(frozen=True)
class CompileTimeMethod:
    """`value.name` for an allowed method of a compile-time value: called by name on that value."""

    value: Any
    name: str

    def __call__(self, *args: Any) -> Any:
        if self.name == "join":  # the one method that can build a long string: sized first
            parts = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else None
            if parts is None or not all(isinstance(p, str) for p in parts):
                raise LimitError("str.join takes one tuple or list of strings in kernels")
            total = sum(len(p) for p in parts) + len(self.value) * max(len(parts) - 1, 0)
            if total > MAX_ITEMS:
                raise LimitError(_too_big(f"joining gives {total:,} characters"))
        return getattr(self.value, self.name)(*args)


_MISSING = object()


def value_attribute(base: Any, attr: str) -> Any:
    """`base.attr` for a compile-time value (not a tensor or module), or _MISSING when not allowed."""
    if isinstance(base, DataModule):
        if attr.startswith("_"):
            return _MISSING
        value = getattr(base.module, attr, _MISSING)
        helper = python_helper(value)  # a compile-time helper of the user's module (compiletime.py)
        return helper if helper is not None else admit_data(value)
    if isinstance(base, lc.dtype):
        if attr in _DTYPE_METHODS:
            return CompileTimeMethod(base, attr)
        if attr in _DTYPE_PROPERTIES:
            return getattr(base, attr)
        if attr in _DTYPE_CLASS_LISTS:
            return tuple(getattr(base, attr))
        if attr == "value":  # Triton holds a dtype argument as constexpr(dtype), whose .value is the dtype
            return base
        return _MISSING
    if base is lc.dtype or base is lc.pointer_type:
        return tuple(getattr(base, attr)) if attr in _DTYPE_CLASS_LISTS else _MISSING
    if base is lc.PropagateNan:
        return getattr(base, attr) if attr in ("NONE", "ALL") else _MISSING
    if isinstance(base, lc.block_type):
        if attr in ("element_ty", "scalar"):
            return base.element_ty
        if attr == "shape":
            return Shape(tuple(base.shape))
        if attr == "is_block":
            return CompileTimeMethod(base, attr)
        return _MISSING
    if isinstance(base, lc.constexpr):
        return base.value if attr == "value" else _MISSING
    if attr == "value" and (base is None or isinstance(base, (bool, int, float, str))):
        return base  # Triton passes constexprs to @jit helpers as constexpr(x), whose .value is x
    if isinstance(base, str):
        return CompileTimeMethod(base, attr) if attr in _STR_METHODS else _MISSING
    if isinstance(base, (tuple, list)):
        return CompileTimeMethod(base, attr) if attr in _SEQ_METHODS else _MISSING
    if isinstance(base, bool):
        return _MISSING
    if isinstance(base, int):
        return CompileTimeMethod(base, attr) if attr == "bit_length" else _MISSING
    if isinstance(base, float):
        return CompileTimeMethod(base, attr) if attr == "is_integer" else _MISSING
    return _MISSING


MISSING = _MISSING


# ---------------------------------------------------------------------- bounded arithmetic
def _size(v: Any) -> int:
    return len(v) if isinstance(v, str) else leaves(v)


def _too_big(what: str) -> str:
    return f"{what}; the limit is {MAX_ITEMS:,} characters or items"


def bounded_binary(op: str, pyop: Callable[[Any, Any], Any], lhs: Any, rhs: Any) -> Any:
    """`lhs op rhs` on compile-time values; a LimitError (located by the caller) when the result would
    pass a limit, raised before the result is built."""
    seqs = (str, tuple, list)
    if isinstance(lhs, str) and op == "mod":
        raise LimitError("%-formatting of strings is not supported in kernels", hint="use an f-string")
    if op == "mul" and (isinstance(lhs, seqs) or isinstance(rhs, seqs)):
        seq, n = (lhs, rhs) if isinstance(lhs, seqs) else (rhs, lhs)
        if isinstance(n, int) and not isinstance(n, bool) and not isinstance(n, seqs) and n > 0:
            total = _size(seq) * n
            if total > MAX_ITEMS:
                raise LimitError(_too_big(f"repeating a sequence {n:,} times gives {total:,} items"))
    elif op == "add" and isinstance(lhs, seqs) and isinstance(rhs, seqs):
        total = _size(lhs) + _size(rhs)
        if total > MAX_ITEMS:
            raise LimitError(_too_big(f"joining two sequences gives {total:,} items"))
    elif isinstance(lhs, int) and isinstance(rhs, int):
        a, b = abs(lhs).bit_length(), abs(rhs).bit_length()
        if op == "mul" and a + b > MAX_INT_BITS + 1:
            raise LimitError(f"an integer product of {a + b} bits; compile-time integers are limited to "
                             f"{MAX_INT_BITS} bits")
        if op == "pow" and rhs > 0 and abs(lhs) > 1 and (a - 1) * rhs > MAX_INT_BITS:
            raise LimitError(f"{lhs} ** {rhs} has more than {MAX_INT_BITS} bits")
        if op == "shl" and rhs > 0 and a + rhs > MAX_INT_BITS + 1:
            raise LimitError(f"{lhs} << {rhs} has more than {MAX_INT_BITS} bits")
    return check_value(pyop(lhs, rhs))


def check_value(v: Any) -> Any:
    """`v`, when it is within the size limits of compile-time values."""
    if isinstance(v, int) and not isinstance(v, bool):
        if v.bit_length() > MAX_INT_BITS:
            raise LimitError(f"a compile-time integer of {v.bit_length()} bits; the limit is {MAX_INT_BITS}")
    elif isinstance(v, (str, tuple, list)) and _size(v) > MAX_ITEMS:
        raise LimitError(_too_big(f"a compile-time value of {_size(v):,} items"))
    return v


_DIGITS = re.compile(r"\d+")


def bounded_format(value: Any, spec: str) -> str:
    """format(value, spec), with the widths and precisions a spec asks for bounded."""
    for m in _DIGITS.finditer(spec):
        if len(m.group()) > 5 or int(m.group()) > _MAX_FORMAT_WIDTH:
            raise LimitError(f"format width or precision {m.group()} in {spec!r}; the limit is {_MAX_FORMAT_WIDTH}")
    return check_value(format(bounded_str_source(value), spec))


def close_exports(mod: Any, name: str, limit: int = 3) -> list[str]:
    """Names kernel code may read from ``mod`` that are spelled like ``name`` (for 'did you mean')."""
    public = [n for n in dir(mod) if not n.startswith("_")]
    near = difflib.get_close_matches(name, public, n=3 * limit, cutoff=0.6)
    near += [n for n in public if n not in near and len(name) >= 3 and (name in n or n in name) and len(n) >= 4]
    return [n for n in near if module_export(mod, n)[0]][:limit]
