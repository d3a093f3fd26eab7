"""Regenerate docs/language.md from the language's signatures and docstrings."""

from __future__ import annotations

from pathlib import Path

from compiler.language.reference import render_reference

if __name__ == "__main__":
    path = Path(__file__).resolve().parent.parent / "docs" / "language.md"
    path.write_text(render_reference())
    print(f"wrote {path}")
