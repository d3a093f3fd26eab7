"""One kernel specialization's Tile IR function: its parameters (constexpr values or typed
arguments) and the generator run over its body."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import errors as E
from ..ir import types as T
from ..ir.builder import Builder
from ..ir.core import Block, Function
from ..language import core as lc
from .closed import LimitError, check_value
from .codegen import GenContext, GenOptions
from .compiletime import call_compile_time, call_python_helper
from .descriptor import DescriptorArg, from_packed
from .semantic import Semantic
from .source import FunctionSource
from .statements import KernelGenerator
from .values import Returned

__all__ = ["ParamSpec", "generate_kernel"]


@dataclass(frozen=True)
class ParamSpec:
    """How one kernel parameter is specialised: a constant, or a runtime value of `type`."""

    name: str
    constant: bool
    value: Any = None
    type: T.Type | None = None
    divisibility: int = 1


def generate_kernel(src: FunctionSource, params: list[ParamSpec], options: GenOptions,
                    resolve_jit: Callable[[Any], FunctionSource | None]) -> Function:
    """Specialise `src` on `params` and generate its Tile IR function."""
    body = Block()
    builder = Builder(body, src.loc(src.tree))
    sem = Semantic(builder)
    ctx = GenContext(builder, sem, options, resolve_jit, call_compile_time, call_python_helper)
    gen = KernelGenerator(ctx, src, {})
    sem.gen = gen  # type: ignore[attr-defined]
    arg_names: list[str] = []
    arg_attrs: list[dict[str, Any]] = []
    for p in params:
        if p.constant:
            try:
                gen.scope[p.name] = check_value(p.value)
            except LimitError as e:
                loc = src.loc(src.tree)
                raise LimitError(f"constexpr {p.name!r}: {e.message}", loc, src.source_line(loc), e.hint) from None
            continue
        assert p.type is not None
        v = body.add_arg(p.type, p.name)
        arg_names.append(p.name)
        arg_attrs.append({"divisibility": p.divisibility} if p.divisibility > 1 else {})
        gen.scope[p.name] = lc.Tensor(v)
        if isinstance(p.value, DescriptorArg):  # a host tensor descriptor: its packed words
            gen.scope[p.name] = from_packed(sem, lc.Tensor(v), p.value)
    r = gen.visit_body(src.tree.body)
    if isinstance(r, Returned) and r.value is not None:
        loc = src.loc(r.node or src.tree)
        raise E.UnsupportedError("a kernel cannot return a value", loc, src.source_line(loc),
                                 "store results through an output pointer with tl.store")
    return Function(src.name, body, arg_names, arg_attrs, src.loc(src.tree))
