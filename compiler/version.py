"""The compiler's version: part of every cache key (runtime/compiled.py)."""

__version__ = "0.1.0"
