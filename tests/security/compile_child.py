"""A compile worker for the security tests and fuzzers: one JSON request per line on stdin, one answer per line.

Runs ``compiler.compile_source(...).compile(...)`` on each request and answers with the outcome class
(``ok``, ``compilation_error`` or ``exception``), the error's type, message and location. The protocol
uses a private duplicate of fd 1; fd 1 itself points at stderr so a kernel's prints cannot corrupt it.
The process limits its own data segment (``--memory-mb`` above what it holds after the imports), so a
bomb that gets past the frontend ends in MemoryError here, not in the machine's memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import traceback
from typing import Any


def _answer(req: dict[str, Any]) -> dict[str, Any]:
    import compiler

    try:
        fn = compiler.compile_source(req["source"], req.get("kernel"), filename="<source>")
        fn.compile(req.get("signature") or {}, req.get("constexprs") or {}, target=req.get("target", "cpu"),
                   debug=bool(req.get("debug", False)))
    except compiler.CompilationError as exc:
        return {"outcome": "compilation_error", "type": type(exc).__name__, "message": str(exc),
                "line": exc.lineno, "col": exc.col}
    except BaseException as exc:  # noqa: BLE001 - every other exception is what the caller looks for
        return {"outcome": "exception", "type": type(exc).__name__, "message": str(exc)[:4000],
                "traceback": traceback.format_exc()[-4000:], "line": 0, "col": 0}
    return {"outcome": "ok", "type": "", "message": "", "line": 0, "col": 0}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memory-mb", type=int, default=1024)
    args = parser.parse_args()
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import compiler  # noqa: F401 - imported before the memory limit is set

    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    held = int(fields["VmData"].split()[0]) * 1024
    limit = held + args.memory_mb * (1 << 20)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    protocol.write(json.dumps({"ready": True}) + "\n")
    protocol.flush()
    for line in sys.stdin:
        try:
            answer = _answer(json.loads(line))
        except BaseException as exc:  # noqa: BLE001 - e.g. MemoryError while answering
            answer = {"outcome": "exception", "type": type(exc).__name__, "message": str(exc)[:4000],
                      "line": 0, "col": 0}
        protocol.write(json.dumps(answer) + "\n")
        protocol.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
