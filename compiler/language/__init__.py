"""The kernel language: `import compiler.language as tl` (Triton's names and semantics)."""

from __future__ import annotations

from typing import Any

from . import extra, math, random  # noqa: F401
from .builtins import *  # noqa: F403
from .builtins import __all__ as _builtins_all
from .core import (  # noqa: F401
                   PropagateNan,
                   Tensor,
                   bfloat16,
                   block_type,
                   builtin,
                   constexpr,
                   dtype,
                   float8e4b8,
                   float8e4b15,
                   float8e4nv,
                   float8e5,
                   float8e5b16,
                   float16,
                   float32,
                   float64,
                   int1,
                   int8,
                   int16,
                   int32,
                   int64,
                   is_builtin,
                   pointer_type,
                   range,
                   static_range,
                   tensor,
                   to_dtype,
                   uint8,
                   uint16,
                   uint32,
                   uint64,
                   void,
)
from .random import (  # noqa: F401
                   pair_uniform_to_normal,
                   philox,
                   rand,
                   rand4x,
                   randint,
                   randint4x,
                   randn,
                   randn4x,
                   uint_to_uniform_float,
)
from .standard import (  # noqa: F401
                   argmax,
                   argmin,
                   cdiv,
                   cumprod,
                   cumsum,
                   flip,
                   interleave,
                   max,
                   min,
                   ravel,
                   reduce_or,
                   sigmoid,
                   softmax,
                   sum,
                   swizzle2d,
                   xor_sum,
                   zeros_like,
)

__all__ = [
    *_builtins_all, "PropagateNan", "Tensor", "tensor", "constexpr", "dtype", "pointer_type", "block_type",
    "static_range", "range", "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "float8e4nv", "float8e5", "float8e4b8", "float8e5b16", "float8e4b15", "float16", "bfloat16",
    "float32", "float64", "void", "rand", "randn", "randint", "randint4x", "rand4x", "randn4x", "philox",
    "argmax", "argmin", "cdiv", "cumprod", "cumsum", "flip", "interleave", "max", "min", "ravel",
    "reduce_or", "sigmoid", "softmax", "sum", "swizzle2d", "xor_sum", "zeros_like", "math", "extra",
]

# Methods a tensor offers inside a kernel: `x.to(...)`, `x.sum(0)`, ... -> the function called
# with the tensor as its first argument.
TENSOR_METHODS: dict[str, Any] = {
    name: globals()[name]
    for name in (
        "to", "sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "reshape", "view", "trans",
        "permute", "expand_dims", "broadcast_to", "split", "exp", "exp2", "log", "log2", "sqrt", "rsqrt",
        "abs", "sin", "cos", "erf", "floor", "ceil", "sigmoid", "softmax", "xor_sum", "ravel", "reduce",
        "associative_scan", "histogram", "gather", "flip", "cast", "reduce_or", "atomic_add",
        "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas",
        "load", "store", "fma", "join", "interleave", "cdiv", "sort", "item",
    )
}
