"""Validate tool results against their output schemas without re-checking the schema each time.

The MCP SDK's low-level server calls `jsonschema.validate(instance, schema)` on every tool
result; that call first checks the schema itself against the JSON Schema meta-schema, which
costs several milliseconds per call. The schemas are fixed when the tools are registered, so the
server checks each one once and keeps its validator: the same validation, at a fraction of the
cost per call.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import jsonschema
from mcp.server.lowlevel import server as lowlevel

__all__ = ["install"]

_validators: dict[str, Any] = {}


def _validate(instance: Any, schema: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    if args or kwargs:
        jsonschema.validate(instance, schema, *args, **kwargs)
        return
    key = json.dumps(schema, sort_keys=True, default=str)
    v = _validators.get(key)
    if v is None:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        v = _validators[key] = cls(schema)
    error = jsonschema.exceptions.best_match(v.iter_errors(instance))
    if error is not None:
        raise error


def install() -> None:
    """Point the SDK's low-level server at the caching validator (idempotent)."""
    if getattr(lowlevel.jsonschema, "_anvil_cached", False):
        return
    lowlevel.jsonschema = SimpleNamespace(  # type: ignore[assignment]
        validate=_validate, ValidationError=jsonschema.ValidationError, SchemaError=jsonschema.SchemaError,
        _anvil_cached=True)
