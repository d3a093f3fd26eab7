"""`triton.compiler`: the compile errors and the compiled-kernel class under Triton's names."""

from __future__ import annotations

from typing import Any

from ...runtime.compiled import CompiledKernel
from ..errors import CompilationError, CompileTimeAssertionFailure, UnsupportedLanguageConstruct

__all__ = ["CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct", "CompiledKernel",
           "ASTSource", "compile", "errors"]

from .. import errors  # noqa: E402


class ASTSource:
    """Triton's description of what to compile: a JIT function, a signature and constexprs."""

    def __init__(self, fn: Any, signature: dict[str, str], constexprs: dict[Any, Any] | None = None,
                 attrs: Any = None) -> None:
        self.fn = fn
        self.signature = dict(signature)
        self.constexprs = dict(constexprs or {})
        self.attrs = attrs


def compile(src: ASTSource, target: Any = None, options: dict[str, Any] | None = None) -> CompiledKernel:
    """Compile an ASTSource for the CPU (Triton's `triton.compile`)."""
    opts = dict(options or {})
    names = src.fn.arg_names
    constexprs = {}
    for k, v in src.constexprs.items():
        name = names[k[0]] if isinstance(k, tuple) else names[k] if isinstance(k, int) else k
        constexprs[name] = v
    sig = {k: v for k, v in src.signature.items() if v != "constexpr" and k not in constexprs}
    return src.fn.compile(sig, constexprs, num_warps=int(opts.get("num_warps", 4)),
                          num_stages=int(opts.get("num_stages", 3)), debug=bool(opts.get("debug", False)))
