"""Fingerprints of the PTX of every NVIDIA target case, to show a refactor of the backend left the
generated code as it was (no GPU needed).

    python scripts/ptx_fingerprint.py before.json            # on the old tree
    python scripts/ptx_fingerprint.py after.json --against before.json

Each kernel of tests/compiler/nv_target_cases.py (the examples, the op and benchmark kernels) is
compiled for sm_80, sm_90a and sm_100a with the disk cache off and the Tile IR verified after
every stage; the fingerprint is the SHA-256 of its PTX with the kernel symbol's hash suffix (which
changes with the compiler's own source) replaced. With --against, prints the cases whose PTX
changed and exits 1 when any did.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHS = ("sm_80", "sm_90a", "sm_100a")
_SYMBOL_HASH = re.compile(r"_[0-9a-f]{16}(?=\b|_)")


def fingerprints() -> dict[str, str]:
    os.environ["ANVIL_CACHE"] = "0"
    os.environ.setdefault("ANVIL_VERIFY_IR", "1")
    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "compiler")]
    import nv_target_cases

    out: dict[str, str] = {}
    for name, (fn, sig, consts, warps, stages, tags) in sorted(nv_target_cases.all_cases().items()):
        for arch in ARCHS:
            key = f"{name}@{arch}"
            try:
                ck = fn.compile(sig, consts, target=f"cuda:{arch}", num_warps=warps, num_stages=stages,
                                debug="debug" in tags)
            except Exception as e:  # noqa: BLE001 - a failure is part of the fingerprint
                out[key] = f"error: {type(e).__name__}: {str(e)[:120]}"
                continue
            ptx = _SYMBOL_HASH.sub("_H", ck.asm["ptx"])
            out[key] = hashlib.sha256(ptx.encode()).hexdigest()[:16]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="where to write the fingerprints (JSON)")
    ap.add_argument("--against", type=Path, help="earlier fingerprints to compare with")
    args = ap.parse_args()
    now = fingerprints()
    args.out.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    errors = [k for k, v in now.items() if v.startswith("error")]
    print(f"{len(now)} cases, {len(errors)} failed to compile")
    if args.against is None:
        return 0
    before = json.loads(args.against.read_text())
    changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for k in changed:
        print(f"changed: {k}: {before.get(k)} -> {now.get(k)}")
    print(f"{len(changed)} of {len(now)} changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
