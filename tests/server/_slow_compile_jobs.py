"""A compile job that takes its time when the source asks for it (tests/server/test_sandbox.py)."""

from __future__ import annotations

import time
from typing import Any

from tools.compile import run_compile_job
from tools.runtime import Report, WorkerState


def compile_or_sleep(payload: dict[str, Any], state: WorkerState, report: Report) -> dict[str, Any]:
    if "# slow" in payload["source"]:
        report(0, 1, "compiling slowly")
        time.sleep(60)
    return run_compile_job(payload, state, report)


JOBS = {"compile": compile_or_sleep}
