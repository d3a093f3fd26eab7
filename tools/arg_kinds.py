"""Argument-kind mistakes: a tensor spec given for a scalar parameter, or a number for a pointer.

Launch args imply the parameters' types (a tensor spec: a pointer; a number: a scalar). A wrong
kind makes the kernel fail to compile at the line that uses the parameter, which is not where
the mistake is. So when a kernel typed by its launch args does not compile, each parameter whose
type came from its arg is tried with the other kind; when one change makes the kernel compile,
the error names that argument and says what to give instead. compile_kernel given no types
assumes them from the names (`assumed_type`: a scalar unless the name has "ptr"); when that fails,
the parameters assumed scalars are made pointers one by one, and the error names those that make
the kernel compile. Nothing is tried on success.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

from tools.errors import ToolInputError
from tools.specs import BY_TRITON
from tools.store import CompileSpec

MAX_TRIES = 6
BUDGET_S = 2.0  # compile time all the tries together may take (a kernel that is slow to fail is not retried long)
# the errors a wrong kind makes (a pointer where an integer goes, or the reverse); other failures are not retried
KIND_ERRORS = ("DtypeError", "ShapeError", "UnsupportedError")


# words of a parameter's name that, by convention, hold a float (sm_scale, eps, dropout_p, lr, softcap ...)
_FLOAT_WORDS = frozenset({"scale", "eps", "epsilon", "alpha", "beta", "lr", "momentum", "decay", "temperature",
                          "temp", "sigma", "std", "p", "prob", "rate", "theta", "softcap", "cap", "factor", "mult",
                          "slope", "weight_decay", "clip", "threshold", "tau", "inv", "rscale"})


def assumed_type(name: str) -> str:
    """The type compile_kernel assumes for a parameter given no signature: a float32 pointer for names
    with `ptr`, fp32 for names made of float words (sm_scale, eps, dropout_p), else i32."""
    lower = name.lower()
    if "ptr" in lower:
        return "*fp32"
    words = [w for w in lower.split("_") if w]
    return "fp32" if any(w in _FLOAT_WORDS for w in words) else "i32"


def _likely_first(name: str, given: str) -> bool:
    """False (sorts first) when the given kind disagrees with the name (x_ptr given a number, n a tensor)."""
    return given.startswith("*") == any(s in name.lower() for s in ("ptr", "pointer"))


def argument_kind_mistake(
    jit: Any, spec: CompileSpec, signature: dict[str, str], options: dict[str, Any], kernel_name: str,
    failure: dict[str, Any],
) -> ToolInputError | None:
    """The error at the argument, when one parameter of the other kind makes the kernel compile; else None.
    ``failure`` is the diagnostic of the failed compile, with ``kind``: the error's class name."""
    if failure.get("kind") not in KIND_ERRORS:
        return None
    deadline = time.monotonic() + BUDGET_S
    typed_by_args = [n for n in signature if n in spec.hints and n not in spec.signature]
    typed_by_args.sort(key=lambda n: _likely_first(n, signature[n]))
    # compile_kernel with no type given: a scalar was assumed (the name has no "ptr") for what may be a tensor
    assumed = [n for n in signature if n not in spec.hints and n not in spec.signature
               and not signature[n].startswith("*")]
    pointers = Counter(t for t in signature.values() if t.startswith("*"))
    pointer = pointers.most_common(1)[0][0] if pointers else "*fp32"
    for name in typed_by_args[:MAX_TRIES]:
        given = signature[name]
        # a scalar's type: the float one first for a name like alpha or eps (as compile_kernel assumes)
        others = [pointer] if not given.startswith("*") else ["fp32", "i32"] if assumed_type(name) == "fp32" \
            else ["i32", "fp32"]
        for other in others:
            if time.monotonic() > deadline:
                return None
            try:
                jit.compile({**signature, name: other}, dict(spec.constexprs), **options)
            except Exception:  # noqa: BLE001 - this kind does not help either
                continue
            return _mistake(name, given, other, kernel_name, failure)
    if assumed and not typed_by_args:
        return _assumed_pointers(jit, spec, signature, options, kernel_name, failure, assumed, pointer, deadline)
    return None


def _assumed_pointers(jit: Any, spec: CompileSpec, signature: dict[str, str], options: dict[str, Any],
                      kernel_name: str, failure: dict[str, Any], assumed: list[str], pointer: str,
                      deadline: float) -> ToolInputError | None:
    """The parameters assumed scalars that are pointers: each is made one in turn (those named on the
    failing line first), kept when the compile then gets past that failure (fails elsewhere, or not
    at all); the error when the kernel compiles so (never a guess: only a signature that compiles)."""
    line = str(failure.get("source_line") or "")
    order = sorted(assumed, key=lambda n: not re.search(rf"\b{re.escape(n)}\b", line))
    at = (int(failure.get("line") or 0), int(failure.get("column") or 0))
    trial = dict(signature)
    made: list[str] = []
    for name in order[:MAX_TRIES]:
        if time.monotonic() > deadline:
            return None
        attempt = {**trial, name: pointer}
        try:
            jit.compile(attempt, dict(spec.constexprs), **options)
        except Exception as exc:  # noqa: BLE001 - kept only if the compile got past that failure
            now = (getattr(exc, "lineno", 0), getattr(exc, "col", 0))
            if now != at and type(exc).__name__ in KIND_ERRORS:  # failing elsewhere: this one was a pointer
                trial, at = attempt, now
                made.append(name)
            continue
        made.append(name)
        return _assumed_mistake(made, signature, pointer, kernel_name, failure)
    return None


def _assumed_mistake(names: list[str], signature: dict[str, str], pointer: str, kernel_name: str,
                     failure: dict[str, Any]) -> ToolInputError:
    where = f" at line {failure['line']}" if failure.get("line") else ""
    listed_names = ", ".join(repr(n) for n in names)
    given = ", ".join(f"{n}: {signature[n]}" for n in names)
    fix = ", ".join(f"'{n}': '{pointer}'" for n in names)
    message = (f"no types were given for {listed_names}, so they were assumed scalars ({given}: a name without "
               f"'ptr' is taken for a scalar), but {kernel_name} uses them as pointers: it compiles with them as "
               f"{pointer}, and fails as given{where}: {failure.get('message')}. Fix: pass signature={{{fix}}} "
               f"(other element types as needed), or launch it with launch_kernel, whose args give every type.")
    data: dict[str, object] = {"error": "argument_kind", "argument": names[0], "arguments": names,
                               "given": signature[names[0]], "expected": "pointer",
                               "diagnostics": [{k: v for k, v in failure.items() if k != "kind"}]}
    return ToolInputError(message, data=data)


def _mistake(name: str, given: str, other: str, kernel_name: str, failure: dict[str, Any]) -> ToolInputError:
    if given.startswith("*"):
        what = f"a tensor spec was given, but {kernel_name} uses {name} as a scalar"
        example = "1.0" if other.startswith(("fp", "bf")) else "1024"
        fix = f'give a number, e.g. "{name}": {example} (or signature={{"{name}": "{other}"}} to fix its type)'
        expected = "scalar"
    else:
        what = f"a number was given, but {kernel_name} uses {name} as a pointer"
        dtype = BY_TRITON[other[1:]].name if other[1:] in BY_TRITON else "float32"
        fix = f'give a tensor spec, e.g. "{name}": {{"shape": [1024], "dtype": "{dtype}"}}'
        expected = "pointer"
    where = f" at line {failure['line']}" if failure.get("line") else ""
    message = (f"args[{name!r}]: {what} (it compiles with {name}: {other}; with {name}: {given} it fails{where}: "
               f"{failure.get('message')}). Fix: {fix}.")
    data: dict[str, object] = {"error": "argument_kind", "argument": name, "given": given, "expected": expected,
            "diagnostics": [{k: v for k, v in failure.items() if k != "kind"}]}
    return ToolInputError(message, data=data)
