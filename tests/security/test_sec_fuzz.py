"""Bounded fuzz runs for CI: generated kernels, mutated valid sources, and tool arguments from the tools' schemas.

``scripts/fuzz.py --minutes N`` runs the same properties for longer and collects every finding.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastmcp import FastMCP
from fuzzing import (
    CompileChild,
    Findings,
    ToolCaller,
    fuzz_generated_kernel,
    fuzz_mutated_source,
    fuzz_tool_call,
    generated_kernels,
    load_corpus,
    mutated_sources,
    tool_cases,
)
from hypothesis import HealthCheck, given, settings

CI = settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])


def _report(findings: Findings) -> str:
    return "\n".join(f"{problem}\n  input: {reproducer[:2000]}" for problem, reproducer in findings.problems)


def test_generated_kernels_give_only_located_errors(child: CompileChild) -> None:
    findings = Findings()

    @CI
    @given(generated_kernels())
    def run(case: tuple[str, dict[str, Any]]) -> None:
        fuzz_generated_kernel(child, findings, case)

    run()
    assert findings.examples > 0
    assert not findings.problems, _report(findings)


def test_mutated_sources_give_only_located_errors(child: CompileChild) -> None:
    findings = Findings()
    corpus = load_corpus()
    assert len(corpus) >= 20

    @CI
    @given(mutated_sources(corpus))
    def run(case: Any) -> None:
        fuzz_mutated_source(child, findings, case)

    run()
    assert not findings.problems, _report(findings)


@pytest.fixture(scope="module")
def caller(app: FastMCP) -> Iterator[ToolCaller]:
    c = ToolCaller(app, timeout_s=40.0)
    yield c
    c.close()


def test_tool_schemas_give_only_tool_errors(caller: ToolCaller) -> None:
    findings = Findings()
    assert {"compile_kernel", "launch_kernel", "benchmark", "quantize_weights"} <= set(caller.tools)

    @settings(CI, max_examples=80)
    @given(tool_cases(caller.tools))
    def run(case: tuple[str, dict[str, Any]]) -> None:
        fuzz_tool_call(caller, findings, case)

    run()
    assert not findings.problems, _report(findings)
