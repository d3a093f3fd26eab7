"""The worker sandbox, seen from inside real worker processes (server/sandbox.py).

Each test starts workers with a canary secret in the server's environment and probes them with
test-only jobs (tests/server/_sandbox_probe_jobs.py): the environment, processes, sockets,
signals, file writes, memory; then a normal CPU compile and launch and a CUDA-target compile.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import Client

from server import sandbox
from server.app import create_app
from server.demo import VECTOR_ADD
from server.worker import ProcessExecutor, Worker
from tools.errors import KernelFault
from tools.limits import Limits
from tools.runtime import Runtime
from tools.store import CompileSpec

pytestmark = pytest.mark.anyio

CANARY = "canary-" + secrets.token_hex(8)
EPERM, EACCES = "errno 1", "errno 13"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("anvil-cache")


@pytest.fixture(scope="module")
def probed(cache_dir: Path) -> Iterator[Worker]:
    """One sandboxed CPU worker with the probe jobs, started with secrets in the environment."""
    saved = dict(os.environ)
    os.environ.update(ANVIL_TOKEN=CANARY, AWS_SECRET_ACCESS_KEY=CANARY, CUDA_AUTH_TOKEN=CANARY,
                      ANVIL_CACHE_DIR=str(cache_dir))
    worker = Worker("device-cpu", "cpu", memory_bytes=1 << 30, extra_jobs="_sandbox_probe_jobs")
    try:
        worker.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    yield worker
    worker.kill()


async def call(worker: Worker, job: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    return await worker.call(job, payload or {}, timeout=60)


async def test_environment_has_no_secrets(probed: Worker) -> None:
    out = await call(probed, "probe_env")
    assert CANARY not in str(out["environ"])
    assert CANARY not in out["exec_environ"]  # what the process was exec'ed with, not only os.environ
    assert "ANVIL_TOKEN" not in out["exec_environ"] and "PATH=" in out["exec_environ"]
    assert out["tmpdir"] == str(probed.scratch)
    # the server (here: the test process, which holds the canary) is not readable from the worker
    assert out["parent_environ"] in (EPERM, EACCES) and out["parent_mem"] in (EPERM, EACCES)
    assert probed.protections["environment"] == "allow-listed at exec"


def test_environment_allow_list() -> None:
    env = sandbox.worker_environment(
        {"PATH": "/bin", "ANVIL_TOKEN": "x", "ANVIL_DEBUG": "1", "CUDA_VISIBLE_DEVICES": "0", "LC_ALL": "C",
         "CUDA_API_KEY": "x", "GITHUB_TOKEN": "x", "OPENAI_API_KEY": "x", "LD_PRELOAD": "/evil.so"},
        Path("/scratch"),
    )
    assert env["PATH"] == "/bin" and env["ANVIL_DEBUG"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["TMPDIR"] == "/scratch" and env["LC_ALL"] == "C"
    assert not {"ANVIL_TOKEN", "CUDA_API_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY", "LD_PRELOAD"} & set(env)


async def test_no_new_processes_sockets_or_signals(probed: Worker) -> None:
    await call(probed, "probe_env")  # the worker reports its protections once it is up
    if not probed.protections["seccomp"].startswith("on"):
        pytest.skip(f"seccomp: {probed.protections['seccomp']}")
    out = await call(probed, "probe_processes")
    assert out["fork"] == EPERM and out["exec"] == EPERM and out["subprocess"] == EPERM
    assert out["tcp"] == EPERM
    assert out["thread"] == "ok"  # torch and the CPU backend need threads
    if "no signals" in probed.protections["landlock"]:
        assert out["signal_parent"] == EPERM


async def test_writes_only_to_cache_and_scratch(probed: Worker, cache_dir: Path, tmp_path: Path) -> None:
    await call(probed, "probe_env")  # the worker reports its protections once it is up
    if not probed.protections["landlock"].startswith("on"):
        pytest.skip(f"Landlock: {probed.protections['landlock']}")
    assert probed.scratch is not None
    inside = [str(probed.scratch / "ok.txt"), str(cache_dir / "ok.txt"), "/dev/null"]
    outside = [str(tmp_path / "outside.txt"), f"/tmp/anvil-probe-{secrets.token_hex(4)}",
               str(Path.home() / f".anvil-probe-{secrets.token_hex(4)}")]
    out = await call(probed, "probe_write", {"paths": inside + outside})
    assert [out[p] for p in inside] == ["ok"] * 3
    assert [out[p] for p in outside] == [EACCES] * 3
    assert not any(os.path.exists(p) for p in outside)


async def test_memory_past_the_limit_is_a_clear_error_and_the_worker_is_replaced(cache_dir: Path) -> None:
    executor = ProcessExecutor(Limits(worker_memory_bytes=1 << 30), extra_jobs="_sandbox_probe_jobs")
    try:
        assert (await executor.run("cpu", "probe_allocate", {"bytes": 1 << 20}, timeout=60))["allocated"] == 1 << 20
        worker = executor.devices["cpu"]
        assert worker.protections["memory_limit_bytes"] == 1 << 30
        first = worker.process.pid if worker.process else None
        with pytest.raises(KernelFault) as info:
            await executor.run("cpu", "probe_allocate", {"bytes": 3 << 30}, timeout=60)
        assert "ran out of memory" in info.value.message and "ANVIL_WORKER_MEMORY_BYTES" in info.value.message
        assert "Traceback" not in info.value.message
        assert (await executor.run("cpu", "probe_allocate", {"bytes": 1 << 20}, timeout=60))["allocated"] == 1 << 20
        assert worker.process is not None and worker.process.pid != first
    finally:
        executor.close()


def test_limits_are_on_by_default() -> None:
    limits = Limits.from_env({})
    assert limits.compile_memory_bytes > 0 and limits.worker_memory_bytes > 0 and limits.worker_sandbox == 1
    assert Limits.from_env({"ANVIL_COMPILE_MEMORY_BYTES": "123"}).compile_memory_bytes == 123


def test_seccomp_programs_check_the_architecture() -> None:
    for arch, audit in (("x86_64", 0xC000003E), ("aarch64", 0xC00000B7)):
        prog = sandbox.seccomp_program(arch, allow_unix_sockets=False)
        assert all(len(insn) == 8 for insn in prog) and len(prog) < 64
        assert int.from_bytes(prog[1][4:], "little") == audit  # the second instruction compares the arch
        assert prog[-1] == sandbox._insn(sandbox._RET_K, sandbox._RET_ALLOW)


async def _compile(executor: ProcessExecutor, target: str, source: str = VECTOR_ADD) -> dict[str, Any]:
    spec = CompileSpec(source=source, kernel_name=None, hints={}, constexprs={"BLOCK": 128}, target=target,
                       signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"})
    return await executor.compile(spec.to_dict(), timeout=120)


def _ptxas_present() -> bool:
    return bool(os.environ.get("ANVIL_PTXAS") or shutil.which("ptxas") or glob.glob("/usr/local/cuda*/bin/ptxas"))


@pytest.mark.skipif(not _ptxas_present(), reason="no ptxas binary on this machine")
async def test_cuda_target_compiles_in_a_sandboxed_compile_worker(cache_dir: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("ANVIL_CACHE_DIR", str(cache_dir / f"cuda-{secrets.token_hex(4)}"))  # a cold cache
    executor = ProcessExecutor(Limits(compile_workers=1))
    try:
        out = await _compile(executor, "cuda")
        assert out["resources"]["registers"] > 0  # ptxas's resource report came back through its process
        protections = executor.compilers[0].protections
        assert protections["seccomp"].startswith("on") or "unavailable" in protections["seccomp"]
        assert protections["memory_limit_bytes"] == Limits().compile_memory_bytes
    finally:
        executor.close()


async def test_cancelling_a_compile_kills_its_worker() -> None:
    executor = ProcessExecutor(Limits(compile_workers=1), extra_jobs="_slow_compile_jobs")
    try:
        started = anyio.Event()

        async def progress(done: float, total: float | None, message: str) -> None:
            started.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: executor.compile({"source": "# slow"}, timeout=120, progress=progress))
            with anyio.fail_after(60):
                await started.wait()
            worker = executor.compilers[0]
            old = worker.process
            tg.cancel_scope.cancel()
        assert old is not None and old.poll() is not None  # killed, not left compiling
        assert worker.process is not None and worker.process.pid != old.pid  # a fresh one is starting
        assert (await _compile(executor, "cpu"))["resources"] is not None
    finally:
        executor.close()


SLOW_SOURCE = "# slow {n}\n" + VECTOR_ADD


@pytest.fixture
async def two_clients(cache_dir: Path) -> AsyncIterator[tuple[Client, Client]]:
    limits = Limits(compile_workers=2, compile_timeout_s=90)
    runtime = Runtime(limits=limits, executor=ProcessExecutor(limits, extra_jobs="_slow_compile_jobs"))
    runtime.executor.prestart([], compiler=True)  # type: ignore[attr-defined]
    app = create_app(runtime)
    try:
        async with Client(app) as a, Client(app) as b:
            yield a, b
    finally:
        runtime.executor.close()


async def test_one_clients_slow_compiles_leave_a_worker_for_another(two_clients: tuple[Client, Client]) -> None:
    a, b = two_clients
    compile_args = {"constexprs": {"BLOCK": 128}, "target": "cpu",
                    "signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}}
    async with anyio.create_task_group() as tg:
        for n in range(2):  # client A: two compiles that would each hold a worker for a minute
            tg.start_soon(lambda n=n: a.call_tool("compile_kernel", {"source": SLOW_SOURCE.format(n=n), **compile_args},
                                                  raise_on_error=False))
        await anyio.sleep(0.5)
        t0 = time.monotonic()
        with anyio.fail_after(45):
            result = await b.call_tool("compile_kernel", {"source": VECTOR_ADD, **compile_args}, raise_on_error=False)
        elapsed = time.monotonic() - t0
        assert not result.is_error, result.content
        assert elapsed < 45
        tg.cancel_scope.cancel()


async def test_device_info_reports_the_protections(client: Client) -> None:
    result = await client.call_tool("device_info", {}, raise_on_error=False)
    assert not result.is_error
    cpu = result.structured_content["devices"][0]
    assert cpu["kind"] == "cpu"
    assert {"environment", "memory_limit_bytes", "seccomp", "landlock", "capabilities"} <= set(cpu["protections"])


def test_serve_flags_set_the_memory_limits(monkeypatch: Any) -> None:
    import server.app
    from server import cli

    seen: dict[str, Any] = {}

    def fake_create_app(**kwargs: Any) -> Any:
        seen.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr(server.app, "create_app", fake_create_app)
    monkeypatch.setattr(cli, "isolate_stdout", lambda: None)
    with pytest.raises(SystemExit):
        cli.main(["serve", "--compile-memory", "1234", "--worker-memory", "0"])
    assert seen["limits"].compile_memory_bytes == 1234 and seen["limits"].worker_memory_bytes == 0


def test_a_worker_retires_when_its_data_memory_passes_three_quarters_of_its_limit() -> None:
    """Compiled native code stays in a process's JIT engine: a worker that has compiled thousands of kernels
    answers, then retires, before an allocation past its limit would abort it mid-job."""
    import subprocess
    import sys

    code = (
        "import resource; from server.worker_child import _grown\n"
        "kb = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmData:'))\n"
        "resource.setrlimit(resource.RLIMIT_DATA, (kb * 1024 * 4, kb * 1024 * 4)); a = _grown()\n"
        "resource.setrlimit(resource.RLIMIT_DATA, (kb * 1024 * 5 // 4, kb * 1024 * 5 // 4)); b = _grown()\n"
        "print(a, b)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["False", "True"], out.stderr
