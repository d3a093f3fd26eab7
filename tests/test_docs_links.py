"""Every file the code and the docs cite is in the repository.

Scanned: the sources and docs under compiler, tools, server, tests, examples, benchmarks, scripts
and docs, and README.md. Checked:
- every `name.md` or `path/name.md` (optionally `#anchor`): the file exists (a path relative to the
  repository root or, in Markdown, to the citing file; a bare name anywhere in the repository), and
  the anchor is one of its headings (GitHub's slugs);
- every path in backticks ending in .py or .md whose first part is a top-level directory of the
  repository: the file exists.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("compiler", "tools", "server", "tests", "examples", "benchmarks", "scripts", "docs")
SUFFIXES = {".py", ".md", ".cu", ".txt", ".toml"}
SKIP_PARTS = {"__pycache__", ".venv", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules"}

# name.md or dir/name.md, not inside a URL or a longer path (nothing path-like right before it)
MD_REF = re.compile(r"(?<![\w/.\-:])((?:[\w.\-]+/)*[\w.\-]+\.md)(#[\w\-]+)?(?![\w])")
# `path/to/file.py` or `path/file.md` in backticks (a path that names a directory)
TICK_REF = re.compile(r"`((?:[\w.\-]+/)+[\w.\-]+\.(?:py|md))(?:#[\w\-]+)?`")


def _scanned_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in SCANNED:
        for p in sorted((ROOT / top).rglob("*")):
            if p.is_file() and p.suffix in SUFFIXES and not SKIP_PARTS & set(p.relative_to(ROOT).parts):
                files.append(p)
    return files


@cache
def _basenames() -> frozenset[str]:
    return frozenset(p.name for p in _scanned_files()) | frozenset(p.name for p in ROOT.glob("*") if p.is_file())


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation other than '-' and '_'
    dropped, spaces to '-'."""
    text = re.sub(r"[`*_]{1,2}(?=\S)|(?<=\S)[`*]{1,2}", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    out = set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        m = re.match(r"(#{1,6})\s+(.*)", line)
        if m and not in_fence:
            out.add(slug(m.group(2)))
    return frozenset(out)


def _resolve(ref: str, cited_from: Path) -> Path | None:
    """The file `ref` names, or None when the repository does not hold it."""
    candidates = [ROOT / ref]
    if cited_from.suffix == ".md":
        candidates.insert(0, cited_from.parent / ref)
    for c in candidates:
        if c.is_file():
            return c
    if "/" not in ref and ref in _basenames():
        return next(p for p in [*_scanned_files(), *ROOT.glob("*")] if p.name == ref)
    return None


def problems_in(path: Path, text: str) -> list[str]:
    """What `text` (the contents of `path`) cites that the repository does not hold."""
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in MD_REF.finditer(line):
            ref, anchor = m.group(1), m.group(2)
            target = _resolve(ref, path)
            if target is None:
                out.append(f"{rel}:{lineno}: cites {ref}, which the repository does not hold")
            elif anchor and anchor[1:] not in anchors(target):
                out.append(f"{rel}:{lineno}: cites {ref}{anchor}, but {target.relative_to(ROOT)} has no such "
                           f"heading (its anchors: {', '.join(sorted(anchors(target)))})")
        for m in TICK_REF.finditer(line):
            ref = m.group(1)
            if ref.split("/")[0] in (*SCANNED, "benchmarks") and _resolve(ref, path) is None:
                out.append(f"{rel}:{lineno}: names `{ref}`, which the repository does not hold")
    return out


def test_every_cited_file_exists() -> None:
    found = []
    for p in _scanned_files():
        if p == Path(__file__).resolve():
            continue  # its docstring and the checks below name files on purpose
        found += problems_in(p, p.read_text(encoding="utf-8", errors="replace"))
    assert not found, "citations of files the repository does not hold (cite a file it has, or add it):\n" + \
        "\n".join(found)


@pytest.mark.parametrize(("text", "bad"), [
    ("see LAYOUTS.md for the derivation", "LAYOUTS.md"),
    ("(docs/nowhere.md)", "docs/nowhere.md"),
    ("the bank model (docs/layouts.md#no-such-heading)", "no such heading"),
    ("written by `tools/kernels/missing.py`", "tools/kernels/missing.py"),
])
def test_a_missing_citation_is_reported(text: str, bad: str) -> None:
    got = problems_in(ROOT / "tests" / "example.py", text)
    assert len(got) == 1 and bad in got[0], got


@pytest.mark.parametrize("text", [
    "the map (docs/layouts.md#the-map) and benchmarks/RESULTS.md",
    "`tools/kernels/w4a16.py` and `compiler/layouts/linear.py`",
    "https://github.com/owner/repo/blob/main/OTHER.md is a URL",
    "a bare README.md",
])
def test_held_citations_and_urls_pass(text: str) -> None:
    assert problems_in(ROOT / "tests" / "example.py", text) == []


def test_slugs_follow_github() -> None:
    assert slug("Shared-memory layouts and swizzles") == "shared-memory-layouts-and-swizzles"
    assert slug("FP4 (e2m1)") == "fp4-e2m1"
    assert slug("What the NVIDIA lowering uses") == "what-the-nvidia-lowering-uses"
