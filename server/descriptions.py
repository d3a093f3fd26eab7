"""Tool descriptions that state what comes back: every result field, from the result models.

A client shows a model the tool's description and input schema; the output schema is often not
shown. So each description ends with the fields of its result (and of the objects nested in it),
each with its description, generated from the pydantic model so they cannot drift apart. A nested
result another tool returns whole (generate_kernel's compile, check and benchmark) is named with
that tool instead of repeated: the descriptions stay short enough to read.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (in Optional, list[...], dict[str, ...])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, dict, typing.Annotated):
        for arg in typing.get_args(annotation):
            found += _models_in(arg)
    return found


def result_fields(model: type[BaseModel], elsewhere: Mapping[type[BaseModel], str] | None = None) -> str:
    """'Result fields:' with each field of ``model`` and its description, then the fields of each object
    type nested in it (once each, in order of appearance). A nested model in ``elsewhere`` is referred to
    the tool named there, whose description lists its fields."""
    lines = [f"Result fields ({model.__name__}):"]
    seen: set[type[BaseModel]] = {model}
    queue: list[tuple[str, type[BaseModel]]] = []

    def describe(m: type[BaseModel]) -> str:
        parts = []
        for name, info in m.model_fields.items():
            text = info.description or ""
            text = text[:-1] if text.endswith(".") and not text.endswith("..") else text
            parts.append(f"{name}: {text}" if text else name)
            for nested in _models_in(info.annotation):
                if nested not in seen:
                    seen.add(nested)
                    queue.append((name, nested))
        return "; ".join(parts) + "."

    lines.append(describe(model))
    while queue:
        field, nested = queue.pop(0)
        owner = (elsewhere or {}).get(nested)
        if owner is not None:
            lines.append(f"{field}: the {nested.__name__} {owner} returns (its fields are in {owner}'s description).")
            continue
        lines.append(f"Each {nested.__name__} (in {field}): {describe(nested)}")
    return "\n".join(lines)


def tool_description(
    fn: Any, result: type[BaseModel] | None = None, *extra: str, elsewhere: Mapping[type[BaseModel], str] | None = None
) -> str:
    """The docstring of ``fn``, then ``extra`` paragraphs, then the fields of ``result``."""
    parts = [inspect.cleandoc(fn.__doc__ or ""), *extra]
    if result is not None:
        parts.append(result_fields(result, elsewhere))
    return "\n\n".join(p for p in parts if p)
