"""The table of lowerings and what a lowering is written with.

A lowering receives the translator (translate.py) and its bound arguments (tensors and numbers as
values.Val, other constants as values.Const, defaults as Python values) and builds ops of the fusion
library through it. The lowerings themselves live in lowerings.py and rowwise.py and register here
when imported; the translator is handed the filled table, so it never imports them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tools.generate.catalog import FUSED_KEYS
from tools.generate.values import Const, Val

if TYPE_CHECKING:
    from tools.generate.translate import Translator

__all__ = ["LOWERINGS", "Lowering", "lowering", "py", "num", "up", "operand"]

Lowering = Callable[["Translator", list[Any], dict[str, Any]], Any]
LOWERINGS: dict[str, Lowering] = {}
_REQUIRED = object()


def _parse(signature: str) -> list[tuple[str, Any]]:
    params: list[tuple[str, Any]] = []
    for part in signature.split(","):
        name, _, default = part.strip().partition("=")
        params.append((name, _REQUIRED if not default else ast.literal_eval(default)))
    return params


def lowering(signature: str, *keys: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `fn(tr, **arguments)` under `keys`. `signature`: "input, dim=None, *shape" (the
    defaults are literals of this module, never text from a caller)."""
    params = _parse(signature)
    unlisted = [key for key in keys if key not in FUSED_KEYS]
    if unlisted:
        raise ValueError(f"lowerings of {', '.join(unlisted)} must be listed in tools/generate/catalog.py (FUSED)")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        def lower(tr: Translator, args: list[Any], kwargs: dict[str, Any]) -> Any:
            return fn(tr, **_bind(tr, keys[0], params, args, kwargs))

        for key in keys:
            LOWERINGS[key] = lower
        return fn

    return register


def _bind(tr: Translator, key: str, params: list[tuple[str, Any]], args: list[Any],
          kwargs: dict[str, Any]) -> dict[str, Any]:
    name = key.split(".", 1)[1]
    bound: dict[str, Any] = {}
    rest = [p for p, _ in params if p.startswith("*")]
    positional = [p for p, _ in params if not p.startswith("*")]
    if len(args) > len(positional) and not rest:
        tr.fail(None, f"{name} takes at most {len(positional)} positional arguments, got {len(args)}")
    for p, v in zip(positional, args, strict=False):
        bound[p] = v
    if rest:
        extra = args[len(positional):]
        if len(extra) == 1 and isinstance(extra[0], Const) and isinstance(extra[0].value, tuple):
            extra = [Val(x, None, x) for x in extra[0].value]  # x.reshape((a, b)) as x.reshape(a, b)
        bound[rest[0][1:]] = extra
    for k, v in kwargs.items():
        if k not in positional or k in bound:
            tr.fail(None, f"{name} got an unexpected or repeated argument {k!r}",
                    f"Its arguments here: {', '.join(p for p, _ in params)}.")
        bound[k] = v
    for p, default in params:
        if p.startswith("*"):
            continue
        if p not in bound:
            if default is _REQUIRED:
                tr.fail(None, f"{name} needs the argument {p!r}")
            bound[p] = default
    return bound


def py(tr: Translator, v: Any, what: str) -> Any:
    """A compile-time Python value: a literal, a size, a dtype, a tuple, None."""
    if isinstance(v, Const):
        return v.value
    if isinstance(v, Val):
        if v.is_tensor:
            tr.fail(None, f"{what} must be known before the launch, not a tensor")
        return v.number
    return v


def num(value: float) -> Val:
    return Val(value, None, value)


def up(v: Val) -> Val:
    """A 16-bit float value as the float32 it is computed in (no op: kernels compute them in float32)."""
    if v.meta is not None and v.meta.dtype in (torch.float16, torch.bfloat16):
        return Val(v.operand, v.meta.float(), v.number, v.row, v.view)
    return v


def operand(tr: Translator, v: Any, what: str) -> Val:
    if isinstance(v, bool | int | float):
        return num(v)
    return tr.operand(v, what)
