"""Python AST -> Tile IR for one kernel specialization."""

from __future__ import annotations

from .codegen import GenOptions
from .kernel import ParamSpec, generate_kernel
from .source import FunctionSource, parse_function

__all__ = ["ParamSpec", "GenOptions", "generate_kernel", "FunctionSource", "parse_function"]
