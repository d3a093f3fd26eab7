"""Tile IR: SSA values, ops with structured regions, types, builder, printer, verifier."""

from . import types
from .builder import Builder
from .core import UNKNOWN_LOC, Block, Function, Location, Module, Op, Value
from .ops import SPECS, OpSpec
from .printer import print_function
from .verifier import VerificationError, verify, verify_op

__all__ = [
    "types", "Builder", "Block", "Function", "Location", "Module", "Op", "Value", "UNKNOWN_LOC",
    "SPECS", "OpSpec", "print_function", "VerificationError", "verify", "verify_op",
]
