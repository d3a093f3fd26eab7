"""docs/language.md is the rendered language reference, and every listed op exists with a doc."""

from __future__ import annotations

from pathlib import Path

import compiler.language as tl
from compiler.language.reference import _SECTIONS, render_reference


def test_language_doc_is_up_to_date() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "language.md"
    assert doc.read_text() == render_reference(), "run: python scripts/gen_language_doc.py"


def test_every_listed_op_has_a_docstring() -> None:
    for _, names in _SECTIONS:
        for name in names:
            assert (getattr(tl, name).__doc__ or "").strip(), name
