"""The on-disk compile cache: a kernel's artifacts (every stage's output and the metadata) by
cache key, for every target. A kernel compiled by one process loads in another without running
a stage: `Backend.load` needs nothing else.

An entry is `<key>.json` (metadata and the text outputs) and `<key>.<stage>` for each binary
output (an object file, a cubin). The JSON file is written last, by rename: an entry whose JSON
exists is complete. The cache is an optimisation: any failure to read or write it costs only a
compile.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import knobs
from ..backends.contract import Artifacts

__all__ = ["store", "load"]

_FORMAT = 2  # the layout of an entry; entries of another layout are ignored


def store(key: str, artifacts: Artifacts, version: str) -> None:
    d = knobs.cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        texts: dict[str, str | None] = {}
        repeats: dict[str, str] = {}  # an output equal to an earlier one (a pass that changed nothing)
        binaries: list[str] = []
        earlier: dict[str, str] = {}
        for name, out in artifacts.outputs.items():
            if isinstance(out, bytes):
                (d / f"{key}.{name}").write_bytes(out)
                binaries.append(name)
            elif out is not None and out in earlier:
                repeats[name] = earlier[out]
            else:
                texts[name] = out
                if out is not None:
                    earlier[out] = name
        entry = {"format": _FORMAT, "version": version, "target": artifacts.target, "name": artifacts.name,
                 "symbol": artifacts.symbol, "order": list(artifacts.outputs), "texts": texts, "repeats": repeats,
                 "binaries": binaries, "metadata": dict(artifacts.metadata)}
        tmp = d / f"{key}.tmp"
        tmp.write_text(json.dumps(entry))
        tmp.replace(d / f"{key}.json")
    except (OSError, TypeError, ValueError):
        pass  # an unwritable directory (or metadata JSON cannot hold) only costs recompiles


def load(key: str, version: str) -> Artifacts | None:
    """The artifacts cached under `key` by this build of the compiler (`version`), or None."""
    d = knobs.cache_dir()
    try:
        entry: dict[str, Any] = json.loads((d / f"{key}.json").read_text())
        if entry.get("format") != _FORMAT or entry.get("version") != version:
            return None
        blobs = {name: Path(d / f"{key}.{name}").read_bytes() for name in entry["binaries"]}
        texts = entry["texts"]
        texts.update({name: texts[same] for name, same in entry["repeats"].items()})
        outputs = {name: blobs[name] if name in blobs else texts[name] for name in entry["order"]}
        return Artifacts(entry["target"], entry["name"], entry["symbol"], outputs, entry["metadata"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
