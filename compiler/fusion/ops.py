"""The ops a fused kernel can compute, each as the kernel-language expression it becomes.

Templates take their operands as `{0}`, `{1}`, ... (already in the compute dtype: float32 for the
16-bit float types, as torch computes them, else the value's own dtype). Reductions run over the
row (rows groups only) and are written by the emitter, which knows the mask.
"""

from __future__ import annotations

__all__ = ["ELEMENTWISE", "REDUCTIONS", "COMPUTE", "TL_DTYPE", "is_float"]

# dtype name -> the language's dtype
TL_DTYPE = {
    "float32": "tl.float32", "float16": "tl.float16", "bfloat16": "tl.bfloat16", "float64": "tl.float64",
    "int8": "tl.int8", "int16": "tl.int16", "int32": "tl.int32", "int64": "tl.int64", "uint8": "tl.uint8",
    "bool": "tl.int1",
}
# the dtype values are computed in
COMPUTE = {"float16": "float32", "bfloat16": "float32"}


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


_SQRT1_2 = "0.7071067811865476"
_SQRT_2_OVER_PI = "0.7978845608028654"

ELEMENTWISE: dict[str, str] = {
    "add": "{0} + {1}",
    "sub": "{0} - {1}",
    "mul": "{0} * {1}",
    "div": "{0} / {1}",
    "neg": "-{0}",
    "abs": "tl.abs({0})",
    "exp": "tl.exp({0})",
    "exp2": "tl.exp2({0})",
    "expm1": "libdevice.expm1({0})",
    "log": "tl.log({0})",
    "log2": "tl.log2({0})",
    "log1p": "libdevice.log1p({0})",
    "sqrt": "tl.sqrt({0})",
    "rsqrt": "tl.rsqrt({0})",
    "reciprocal": "1.0 / {0}",
    "sin": "tl.sin({0})",
    "cos": "tl.cos({0})",
    "tanh": "libdevice.tanh({0})",
    "erf": "tl.erf({0})",
    "sigmoid": "tl.sigmoid({0})",
    "relu": "tl.maximum({0}, 0)",
    "silu": "{0} * tl.sigmoid({0})",
    "gelu": "0.5 * {0} * (1.0 + tl.erf({0} * " + _SQRT1_2 + "))",
    "gelu_tanh": "0.5 * {0} * (1.0 + libdevice.tanh(" + _SQRT_2_OVER_PI + " * ({0} + 0.044715 * {0} * {0} * {0})))",
    "pow": "libdevice.pow({0}, {1})",
    "square": "{0} * {0}",
    "maximum": "tl.maximum({0}, {1})",
    "minimum": "tl.minimum({0}, {1})",
    "where": "tl.where({0}, {1}, {2})",
    "gt": "{0} > {1}",
    "lt": "{0} < {1}",
    "ge": "{0} >= {1}",
    "le": "{0} <= {1}",
    "eq": "{0} == {1}",
    "ne": "{0} != {1}",
    "logical_not": "{0} == 0",
    "logical_and": "({0} != 0) & ({1} != 0)",
    "logical_or": "({0} != 0) | ({1} != 0)",
    "copy": "{0}",
    "clone": "{0}",  # a copy torch would make too (into a new layout): worth a kernel of its own
}

# reduction -> the value masked-off columns take (the reduction's identity)
REDUCTIONS: dict[str, str] = {"sum": "0.0", "amax": "float('-inf')", "amin": "float('inf')", "mean": "0.0",
                              "var": "0.0"}
