"""Run the security fuzzers for a while: generated kernels, mutated valid sources, tool arguments from schemas.

    python scripts/fuzz.py --minutes 30

The same properties as tests/security/test_sec_fuzz.py (which runs them bounded in CI), with fresh random
examples. Prints a summary of examples run and each finding with an input that reproduces it; exits 1 if
there is any finding.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "security")]


def _run(name: str, strategy: Any, body: Any, until: float, findings: Any) -> None:
    from hypothesis import HealthCheck, given, settings

    print(f"fuzz: {name} ...", file=sys.stderr)
    while time.monotonic() < until:
        @settings(max_examples=50, deadline=None, derandomize=False, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def one(case: Any) -> None:
            if time.monotonic() < until:
                body(findings, case)

        one()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="total time, shared by the fuzzers (default 5)")
    parser.add_argument("--only", choices=["kernels", "mutations", "tools"], action="append",
                        help="run only these fuzzers (repeatable)")
    args = parser.parse_args(argv)
    import fuzzing as fz

    os.environ.update(fz.canary_env())  # the server's workers inherit the secrets an attack would look for
    chosen = args.only or ["kernels", "mutations", "tools"]
    share = args.minutes * 60 / len(chosen)
    results: dict[str, Any] = {}
    child = fz.CompileChild(deadline_s=20.0)
    try:
        if "kernels" in chosen:
            results["kernels"] = fz.Findings()
            _run("generated kernels", fz.generated_kernels(),
                 lambda f, c: fz.fuzz_generated_kernel(child, f, c), time.monotonic() + share, results["kernels"])
        if "mutations" in chosen:
            results["mutations"] = fz.Findings()
            _run("mutated sources", fz.mutated_sources(fz.load_corpus()),
                 lambda f, c: fz.fuzz_mutated_source(child, f, c), time.monotonic() + share, results["mutations"])
    finally:
        child.kill()
    if "tools" in chosen:
        # every refused call logs a warning: millions of lines in a long run, none of them a finding
        logging.getLogger("fastmcp").setLevel(logging.ERROR)
        from server.app import create_app
        from server.worker import ProcessExecutor
        from tools.limits import Limits
        from tools.runtime import Runtime

        limits = Limits(launch_timeout_s=8.0, compile_timeout_s=20.0, max_tensor_elements=1 << 20,
                        compile_workers=1, worker_memory_bytes=3 << 30, benchmark_time_s=1.0,
                        benchmark_timeout_s=20.0, max_grid_programs=1 << 16)
        with tempfile.TemporaryDirectory() as allowed:
            rt = Runtime(limits=limits, executor=ProcessExecutor(limits), allowed_paths=[Path(allowed)])
            caller = fz.ToolCaller(create_app(rt, allowed_paths=[Path(allowed)]), timeout_s=40.0)
            try:
                results["tools"] = fz.Findings()
                _run("tool schemas", fz.tool_cases(caller.tools), lambda f, c: fz.fuzz_tool_call(caller, f, c),
                     time.monotonic() + share, results["tools"])
            finally:
                caller.close()
                rt.executor.close()
    total = 0
    print("\nfuzz summary")
    for name, found in results.items():
        print(f"  {name}: {found.examples} examples, {len(found.problems)} findings")
        total += len(found.problems)
    for name, found in results.items():
        for problem, reproducer in found.problems:
            print(f"\n[{name}] {problem}\n  reproduce with: {reproducer}")
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
