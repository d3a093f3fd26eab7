"""The language reference, rendered from the language's own signatures and docstrings.

docs/language.md is this text (a test keeps it in sync); the MCP server serves it to agents.
"""

from __future__ import annotations

import inspect
from typing import Any

from .. import language as tl
from .extra import libdevice

__all__ = ["render_reference"]

_SECTIONS: list[tuple[str, list[str]]] = [
    ("Programs", ["program_id", "num_programs"]),
    ("Creating tiles", ["arange", "zeros", "full", "zeros_like", "cast", "to_tensor"]),
    ("Memory", ["load", "store", "make_block_ptr", "advance"]),
    ("Elementwise", ["where", "maximum", "minimum", "clamp", "fdiv", "div_rn", "umulhi", "fma", "exp", "exp2",
                     "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "abs", "erf", "floor", "ceil",
                     "sigmoid", "softmax", "cdiv"]),
    ("Shapes", ["reshape", "view", "trans", "permute", "expand_dims", "broadcast", "broadcast_to", "join",
                "split", "cat", "interleave", "ravel", "flip", "gather"]),
    ("Reductions and scans", ["sum", "max", "min", "argmax", "argmin", "xor_sum", "reduce_or", "reduce",
                              "cumsum", "cumprod", "associative_scan", "histogram"]),
    ("Matrix multiply", ["dot", "dot_scaled"]),
    ("Atomics", ["atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
                 "atomic_xchg", "atomic_cas"]),
    ("Random numbers (Philox, bit-identical to Triton)", ["rand", "randn", "randint", "randint4x"]),
    ("Compile time and debugging", ["static_assert", "static_print", "device_assert", "device_print",
                                    "multiple_of", "max_contiguous", "assume", "debug_barrier"]),
]

_PREAMBLE = """# Anvil kernel language reference

Kernels are written exactly as for Triton: `@jit` functions over block-level tiles, launched as
`kernel[grid](*args, **constexprs)`. Write `import triton.language as tl` (source text sent to
the server) or `import compiler.language as tl` (Python).

- Parameters annotated `tl.constexpr` are compile-time constants (block sizes, flags); tile
  shapes must be powers of two.
- Integer `//` and `%` truncate toward zero like C. Tiles broadcast like numpy; add axes with
  `x[:, None]` / `x[None, :]`.
- Control flow: `if`, `for i in range(...)` / `tl.range(...)`, `while`, `break`, `continue`,
  early `return`; `tl.static_range` unrolls at compile time. Loop-carried values keep their type.
  `tl.range(lo, hi, step, num_stages=S)` (S a compile-time integer): on NVIDIA, the loop's loads are
  issued S-1 iterations ahead through shared memory (the operands of tensor-core dots in the
  layout the dot reads; any other tile load of 4 bytes or more per run, each thread's own elements,
  with no barrier; a load with a nonzero `other` stays a load). The CPU backend runs the loop as
  written.
- Calls to other `@jit` functions are inlined. Python's `len`, `min`, `max`, `int`, `float`,
  `bool`, `abs`, `round`, `str`, `tuple`, `list`, `isinstance`, `getattr`, `hasattr`,
  `enumerate`, `zip` work on compile-time values, as do `math`'s numeric functions, `triton.cdiv`
  and `triton.next_power_of_2`. A helper decorated `@triton.constexpr_function` (or
  `@tl.constexpr`) runs at compile time on compile-time arguments: as Python in a kernel written
  in Python; in source text its body is evaluated by the compiler (loops run at compile time,
  nothing is executed as Python). A constexpr's `.value` is its value. Compile-time code sees only
  numbers, strings, tuples, dtypes, constexprs and the language's own objects: no other modules,
  no names starting with `_`, no
  `type`/`eval`/`open`; integers up to 1024 bits, strings and tuples up to 65,536 items,
  `tl.static_range` up to 65,536 iterations (docs/security.md lists every limit).
- Dtypes: `tl.int1/int8/int16/int32/int64`, `tl.uint8..uint64`, `tl.float16`, `tl.bfloat16`,
  `tl.float32`, `tl.float64`, `tl.float8e4nv`, `tl.float8e5`. Tensor methods: `x.to(dtype)`,
  `x.sum(axis)`, `x.max(axis)`, `x.reshape(...)`, `x.T`, `x.shape`, `x.dtype`.
- Math beyond the list below: `tl.extra.libdevice.<name>` (tanh, pow, erfinv, log1p, ...).
  On the CPU backend float32 math is vectorized code of Anvil's own, within 1 ulp of the exact
  result except exp, exp2 and log2 (1.1 ulp), erf (1.3), tanh (1.5), sigmoid (2.5), erfinv (4),
  lgamma near its zeros below -2 and j0/j1/y0/y1 near their zeros below 8 (absolute errors there:
  < 1e-12 and < 2e-14); float64 math calls the C library.
- Debug mode (`@jit(debug=True)`, or ANVIL_DEBUG=1) checks every load and store against the
  tensor it points into and activates `tl.device_assert`.
- Programs may wait for each other in a `while` loop that polls memory through an atomic or a
  volatile load (a lock: `while tl.atomic_cas(lock, 0, 1) == 1: pass`; a flag a later program
  sets). The CPU backend runs such kernels' programs concurrently, up to 256 at once
  (ANVIL_CPU_CONCURRENT_PROGRAMS); a launch whose every running program has waited 10 s
  (ANVIL_CPU_WAIT_TIMEOUT) with none left to start fails with a DeadlockError naming the loop.
  An `if` on a compile-time value keeps only the branch taken: the other is not compiled, and a
  loop does not carry what only that branch assigns.
"""


def _signature(fn: Any) -> str:
    target = getattr(fn, "fn", None) or getattr(fn, "__wrapped__", None) or fn
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return "(...)"
    params = [p for p in sig.parameters.values() if p.name != "_sem"]
    return "(" + ", ".join(str(p.replace(annotation=inspect.Parameter.empty)) for p in params) + ")"


def _doc(fn: Any) -> str:
    d = getattr(fn, "__doc__", None) or ""
    return " ".join(line.strip() for line in d.strip().splitlines())


def render_reference() -> str:
    out = [_PREAMBLE]
    for title, names in _SECTIONS:
        out.append(f"\n## {title}\n")
        for name in names:
            fn = getattr(tl, name)
            src_fn = getattr(fn, "fn", None)
            sig = _signature(src_fn if src_fn is not None else fn)
            out.append(f"- `tl.{name}{sig}`: {_doc(fn)}")
    out.append("\n## libdevice math (`tl.extra.libdevice.<name>`)\n")
    out.append("Elementwise functions of tiles (popc, clz, ffs and brev take integers, the others floats): "
               + ", ".join(f"`{n}`" for n in libdevice.names()) + ".")
    return "\n".join(out) + "\n"
