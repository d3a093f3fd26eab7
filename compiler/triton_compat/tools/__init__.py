"""`triton.tools`: host-side helpers (tensor descriptors)."""

from __future__ import annotations

from . import tensor_descriptor

__all__ = ["tensor_descriptor"]
