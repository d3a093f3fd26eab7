"""`tl.extra.cuda`: the CUDA spelling of the libdevice module."""

from .. import libdevice

__all__ = ["libdevice"]
