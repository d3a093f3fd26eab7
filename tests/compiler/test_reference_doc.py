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


def test_the_reference_lists_every_libdevice_name_and_each_resolves() -> None:
    """Agents look the math library up by section: every name listed is one `tl.extra.libdevice` answers."""
    from pathlib import Path

    from compiler.language.extra import libdevice
    from server.resources import language_text

    section = language_text(Path(__file__).resolve().parents[2] / "docs" / "language.md", "libdevice")
    assert section.startswith("## libdevice math")
    for name in libdevice.names():
        assert f"`{name}`" in section
        assert callable(getattr(libdevice, name))
    assert {"tanh", "erf", "pow", "rint", "log1p", "atan2"} <= set(libdevice.names())
