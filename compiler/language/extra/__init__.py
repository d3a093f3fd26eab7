"""`tl.extra`: vendor math libraries (libdevice names)."""

from . import libdevice

__all__ = ["libdevice"]
