"""Argument-kind mistakes: a tensor spec given for a scalar parameter, or a number for a pointer.

Launch args imply the parameters' types (a tensor spec: a pointer; a number: a scalar). A wrong
kind makes the kernel fail to compile at the line that uses the parameter, which is not where
the mistake is. So when a kernel typed by its launch args does not compile, each parameter whose
type came from its arg is tried with the other kind; when one change makes the kernel compile,
the error names that argument and says what to give instead. Nothing is tried on success.
"""

from __future__ import annotations

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
    pointers = Counter(t for t in signature.values() if t.startswith("*"))
    pointer = pointers.most_common(1)[0][0] if pointers else "*fp32"
    for name in typed_by_args[:MAX_TRIES]:
        if time.monotonic() > deadline:
            break
        given = signature[name]
        other = "i32" if given.startswith("*") else pointer
        try:
            jit.compile({**signature, name: other}, dict(spec.constexprs), **options)
        except Exception:  # noqa: BLE001 - this kind does not help either
            continue
        return _mistake(name, given, other, kernel_name, failure)
    return None


def _mistake(name: str, given: str, other: str, kernel_name: str, failure: dict[str, Any]) -> ToolInputError:
    if given.startswith("*"):
        what = f"a tensor spec was given, but {kernel_name} uses {name} as a scalar"
        fix = f'give a number, e.g. "{name}": 1024 (or signature={{"{name}": "i64"}} for another integer type)'
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
