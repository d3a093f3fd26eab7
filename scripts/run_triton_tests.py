#!/usr/bin/env python3
"""Run Triton's own language tests on Anvil and count the results per test function.

    python scripts/run_triton_tests.py /path/to/triton/python/test/unit/language/test_core.py
    python scripts/run_triton_tests.py TEST_CORE --tests test_bin_op,test_where -n 2
    python scripts/run_triton_tests.py TEST_CORE --tests test_dot -k "float32" --json out.json

Pytest runs the given file in a subprocess with `compiler.triton_compat` installed as `triton`
(through a plugin loaded with `-p`, before collection) and `--device=cpu`. The Triton file is
read where it lies (with the conftest.py beside or above it, if any); nothing is copied into
this repository. To get the files from a Triton checkout:

    git --git-dir=TRITON/.git show HEAD:python/test/unit/language/test_core.py > DIR/test_core.py
    git --git-dir=TRITON/.git show HEAD:python/test/conftest.py > DIR/conftest.py

Prints one line per test function (passed / failed / skipped cases) and a total; `--json`
also writes them, with the ids of failing cases, to a file. The exit status is 0 unless
pytest itself could not run (a failing case is a result, not an error).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# The functions of test_core.py that Anvil's CPU backend is expected to run.
DEFAULT_TESTS = [
    "test_empty_kernel", "test_bin_op", "test_addptr", "test_floordiv", "test_unsigned_name_mangling",
    "test_bitwise_op", "test_shift_op", "test_compare_op", "test_broadcast", "test_slice", "test_expand_dims",
    "test_where", "test_where_broadcast", "test_unary_op", "test_math_op", "test_math_erf_op",
    "test_math_fma_op", "test_math_divide_op", "test_abs", "test_transpose", "test_cast", "test_cat",
    "test_store_constant", "test_umulhi", "test_join", "test_interleave", "test_split", "test_masked_load",
    "test_arange", "test_reduce1d", "test_reduce", "test_scan2d", "test_scan_1d", "test_generic_reduction",
    "test_permute", "test_trans_2d", "test_dot", "test_full", "test_atomic_rmw", "test_atomic_cas",
    "test_tensor_atomic_rmw", "test_if", "test_if_else", "test_if_return", "test_while", "test_nested_while",
    "test_static_range", "test_num_programs", "test_for_iv", "test_call", "test_reshape", "test_histogram",
    "test_gather", "test_clamp", "test_propagate_nan", "test_max_returns_zero", "test_default",
    "test_noop", "test_pointer_arguments", "test_constexpr", "test_unary_math", "test_zero_strided_tensors",
    "test_strided_load", "test_strided_store", "test_indirect_load", "test_indirect_store", "test_dtype_tensor",
    "test_cumsum_dtype", "test_tensor_member", "test_chained_reductions", "test_sum_dtype", "test_scaled_dot",
]


def _conftest_dir(test_file: Path) -> Path | None:
    """The nearest directory at or above the test file holding a conftest.py (up to 4 levels)."""
    d = test_file.parent
    for _ in range(4):
        if (d / "conftest.py").exists():
            return d
        if d.parent == d:
            break
        d = d.parent
    return None


def _has_xdist() -> bool:
    try:
        import xdist  # noqa: F401
    except ImportError:
        return False
    return True


def build_command(test_file: Path, tests: list[str], keyword: str | None, workers: int, junit: Path,
                  timeout: float, extra: list[str], runxfail: bool = True) -> list[str]:
    ids = [f"{test_file}::{t}" for t in tests] if tests else [str(test_file)]
    cmd = [sys.executable, "-m", "pytest", *ids, "-p", "compiler.triton_compat.pytest_plugin",
           "-p", "no:cacheprovider", "--device=cpu", "-q", "--tb=line", "-rN", f"--junitxml={junit}",
           "-o", "junit_family=xunit1", "-o", "addopts=", f"--rootdir={test_file.parent}",
           f"--anvil-test-timeout={timeout}", "-W", "ignore::DeprecationWarning"]
    if runxfail:
        # triton-cpu's suite marks what *its* CPU backend lacks with pytest.xfail(); run those too.
        cmd.append("--runxfail")
    if _conftest_dir(test_file) is None:
        cmd += ["-p", "compiler.triton_compat.device_plugin"]
    if keyword:
        cmd += ["-k", keyword]
    if workers > 1 and _has_xdist():
        cmd += ["-n", str(workers)]
    return cmd + extra


def parse_junit(path: Path) -> dict[str, dict[str, Any]]:
    """{function: {"passed": n, "failed": n, "skipped": n, "failures": [ids], "skips": {reason: n}}}."""
    out: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"passed": 0, "failed": 0, "skipped": 0, "failures": [], "skips": defaultdict(int)})
    if not path.exists():
        return {}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = case.get("name", "")
        func = re.sub(r"\[.*$", "", name)
        rec = out[func]
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skip = case.find("skipped")
        if bad is not None:
            rec["failed"] += 1
            msg = (bad.get("message") or "").strip().splitlines()
            rec["failures"].append(f"{name}: {msg[0][:200] if msg else ''}")
        elif skip is not None:
            rec["skipped"] += 1
            rec["skips"][(skip.get("message") or "").strip()[:120]] += 1
        else:
            rec["passed"] += 1
    return {k: {**v, "skips": dict(v["skips"])} for k, v in out.items()}


def run(test_file: Path, tests: list[str], keyword: str | None = None, workers: int = 1, timeout: float = 300.0,
        extra: list[str] | None = None, env: dict[str, str] | None = None, runxfail: bool = True,
        keep_cache: bool = False, log: Path | None = None) -> tuple[dict[str, dict[str, Any]], int, str]:
    """Run the tests; return (per-function counts, pytest's exit status, pytest's output tail).

    Kernels compile into a fresh cache directory unless `keep_cache` (the disk cache is keyed by
    kernel source, not by the compiler's own code, so a stale one could hide a compiler change).
    pytest's output goes to `log` as it runs, if given."""
    test_file = test_file.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="anvil-triton-tests-"))
    junit = tmp / "junit.xml"
    cmd = build_command(test_file, tests, keyword, workers, junit, timeout, extra or [], runxfail)
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [e.get("PYTHONPATH")])])
    e.pop("TRITON_INTERPRET", None)
    if not keep_cache:
        e["ANVIL_CACHE_DIR"] = str(tmp / "cache")
    if workers > 1:
        e["ANVIL_CPU_THREADS"] = "1"  # the workers already use the cores
    out_path = log if log is not None else tmp / "pytest.log"
    with open(out_path, "w") as out:
        p = subprocess.run(cmd, cwd=test_file.parent, env=e, stdout=out, stderr=subprocess.STDOUT, text=True)
    output = out_path.read_text(errors="replace")
    results = parse_junit(junit)
    shutil.rmtree(tmp, ignore_errors=True)
    return results, p.returncode, output[-20000:]


def format_table(results: dict[str, dict[str, Any]], order: list[str]) -> str:
    names = [t for t in order if t in results] + sorted(set(results) - set(order))
    missing = [t for t in order if t not in results]
    w = max([len(n) for n in names + missing] + [8])
    lines = [f"{'test':<{w}}  {'passed':>6}  {'failed':>6}  {'skipped':>7}"]
    tot = [0, 0, 0]
    for n in names:
        r = results[n]
        lines.append(f"{n:<{w}}  {r['passed']:>6}  {r['failed']:>6}  {r['skipped']:>7}")
        tot[0] += r["passed"]
        tot[1] += r["failed"]
        tot[2] += r["skipped"]
    for n in missing:
        lines.append(f"{n:<{w}}  {'-':>6}  {'-':>6}  {'-':>7}   (not collected)")
    lines.append(f"{'TOTAL':<{w}}  {tot[0]:>6}  {tot[1]:>6}  {tot[2]:>7}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("test_file", type=Path, help="path to Triton's test_core.py (or another test file)")
    ap.add_argument("--tests", default=None,
                    help="comma-separated test functions (default: the curated list; 'all' for the whole file)")
    ap.add_argument("-k", dest="keyword", default=None, help="pytest -k expression to narrow the cases")
    ap.add_argument("-n", dest="workers", type=int, default=min(2, os.cpu_count() or 1),
                    help="pytest-xdist workers (default: 2 where available)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one test case may run")
    ap.add_argument("--json", type=Path, default=None, help="write the per-function results here")
    ap.add_argument("--failures", action="store_true", help="list the failing case ids")
    ap.add_argument("--show-output", action="store_true", help="print pytest's own output")
    ap.add_argument("--log", type=Path, default=None, help="write pytest's output here as it runs")
    ap.add_argument("--no-runxfail", action="store_true",
                    help="honour the suite's pytest.xfail() calls instead of running those cases")
    ap.add_argument("--keep-cache", action="store_true",
                    help="use the normal Anvil compile cache instead of a fresh one")
    ap.add_argument("pytest_args", nargs="*", help="extra arguments passed to pytest (after --)")
    a = ap.parse_args(argv)
    if not a.test_file.exists():
        print(f"error: {a.test_file} does not exist", file=sys.stderr)
        return 2
    tests = DEFAULT_TESTS if a.tests is None else ([] if a.tests == "all" else
                                                   [t.strip() for t in a.tests.split(",") if t.strip()])
    t0 = time.perf_counter()
    results, rc, output = run(a.test_file, tests, a.keyword, a.workers, a.timeout, a.pytest_args,
                              runxfail=not a.no_runxfail, keep_cache=a.keep_cache, log=a.log)
    dt = time.perf_counter() - t0
    if a.show_output or not results:
        print(output)
    print(format_table(results, tests))
    print(f"({dt:.0f} s, pytest exit status {rc})")
    if a.failures:
        for r in results.values():
            for f in r["failures"]:
                print(f"FAILED {f}")
    if a.json:
        a.json.write_text(json.dumps({"results": results, "returncode": rc, "seconds": dt}, indent=1))
    # pytest: 0 all passed, 1 some failed, 5 nothing collected; anything else is a broken run.
    return 0 if rc in (0, 1, 5) and results else 1


if __name__ == "__main__":
    sys.exit(main())
