"""`triton.language.extra` (and `.cuda`, `.hip`): the libdevice math functions."""

from __future__ import annotations

import sys

from ...language.extra import libdevice

__all__ = ["libdevice", "cuda", "hip"]

# `tl.extra.cuda.libdevice` and `tl.extra.hip.libdevice` name the same functions.
cuda = sys.modules[__name__]
hip = sys.modules[__name__]
