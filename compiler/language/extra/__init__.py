"""`tl.extra`: vendor math libraries (libdevice names) and `tl.extra.cuda`."""

from . import cuda, libdevice

__all__ = ["cuda", "libdevice"]
