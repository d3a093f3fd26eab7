"""What makes first calls and recoveries fast: warmed-up workers, a spare per device, device
descriptions kept on disk, inputs kept on the device, workers started before the server imports.

Only the mechanisms are tested here; the times are measured by benchmarks/mcp_latency.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import torch

from server.demo import NEVER_ENDS, VECTOR_ADD
from server.worker import ProcessExecutor, Worker
from tools.bench import benchmark
from tools.device import describe_device, device_info, machine_key
from tools.errors import KernelFault
from tools.launch import launch_kernel
from tools.launch_job import build_args
from tools.limits import Limits
from tools.models import BenchmarkRequest, LaunchRequest
from tools.runtime import InProcessExecutor, Runtime, WorkerState

pytestmark = pytest.mark.anyio

ADD_ARGS: dict[str, Any] = {
    "x_ptr": {"shape": [300]}, "y_ptr": {"shape": [300]}, "out_ptr": {"shape": [300], "init": "empty"}, "n": 300,
}  # fmt: skip
GOOD = LaunchRequest(source=VECTOR_ADD, constexprs={"BLOCK": 128}, grid=["cdiv(n, BLOCK)"], args=ADD_ARGS,
                     reference={"out_ptr": "x_ptr + y_ptr"})


async def test_a_spare_takes_over_when_the_worker_hangs_and_a_new_spare_starts() -> None:
    limits = Limits(launch_timeout_s=3.0, compile_workers=1)
    rt = Runtime(limits=limits, executor=ProcessExecutor(limits))
    executor = rt.executor
    assert isinstance(executor, ProcessExecutor)
    try:
        assert (await launch_kernel(rt, GOOD)).passed is True
        worker = executor.devices["cpu"]
        assert worker.ready and worker.spare_pid is not None  # the spare started once the worker was ready
        serving, spare = worker.process.pid if worker.process else None, worker.spare_pid
        await _spare_readied(worker)
        spin = LaunchRequest(source=NEVER_ENDS, constexprs={"BLOCK": 16}, grid=[1],
                             args={"out_ptr": {"shape": [16], "init": "zeros"}, "n": 1 << 60})
        with pytest.raises(KernelFault, match="did not finish"):
            await launch_kernel(rt, spin)
        assert worker.process is not None and worker.process.pid == spare != serving  # the spare serves now
        assert worker.promotions == 1 and worker.spare_pid not in (None, spare, serving)  # and has a spare itself
        assert (await launch_kernel(rt, GOOD)).passed is True
    finally:
        executor.close()


async def test_a_retiring_worker_is_not_waited_for(monkeypatch: Any) -> None:
    """A benchmark retires its worker (unchecked code ran in it). A GPU process can take seconds to tear
    down, so the call and the next launch go on with the spare while the old process exits in the
    background: here its exit is made to take 3 s, and neither call waits for it."""
    import subprocess
    import time

    real_wait = subprocess.Popen.wait
    slow_pids: set[int] = set()

    def slow_wait(self: subprocess.Popen[bytes], timeout: float | None = None) -> int:
        if self.pid in slow_pids:
            slow_pids.discard(self.pid)
            time.sleep(3.0)  # a slow teardown, seen by whoever waits for the retiring process
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", slow_wait)
    limits = Limits(compile_workers=1)
    rt = Runtime(limits=limits, executor=ProcessExecutor(limits))
    executor = rt.executor
    assert isinstance(executor, ProcessExecutor)
    try:
        assert (await launch_kernel(rt, GOOD)).passed is True
        worker = executor.devices["cpu"]
        await _spare_readied(worker)
        assert worker.process is not None
        serving = worker.process.pid
        slow_pids.add(serving)
        req = BenchmarkRequest(source=VECTOR_ADD, constexprs={"BLOCK": 128}, grid=["cdiv(n, BLOCK)"], args=ADD_ARGS,
                               warmup_ms=1, rep_ms=2)
        began = time.monotonic()
        await benchmark(rt, req)
        assert worker.process is not None and worker.process.pid != serving  # the spare took over
        assert (await launch_kernel(rt, GOOD)).passed is True
        assert time.monotonic() - began < 2.5  # neither call waited for the retiring process
    finally:
        executor.close()


async def _spare_readied(worker: Worker) -> None:
    """Wait until the worker's spare is ready to take over."""
    with anyio.fail_after(120):
        while not _spare_ready(worker):
            await anyio.sleep(0.2)


def _spare_ready(worker: Worker) -> bool:
    """Whether the spare has sent its ready message (without reading it)."""
    standby = worker._standby
    return standby is not None and standby.conn.poll()


async def test_workers_warm_up_before_they_report_ready() -> None:
    worker = Worker("compile-t", "cpu", memory_bytes=Limits().compile_memory_bytes, warm_target="cpu")
    try:
        worker.start()
        await worker.wait_ready()
        assert worker.warm_ms is not None and worker.warm_ms > 0  # the tool path ran once, in the worker
        assert worker.spare_pid is None  # compile workers have no spare
    finally:
        worker.close()


class _CountingExecutor(InProcessExecutor):
    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[str] = []

    async def run(self, device: str, job: str, payload: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.jobs.append(job)
        return await super().run(device, job, payload, **kwargs)


async def test_device_ceilings_are_measured_once_per_machine(tmp_path: Path) -> None:
    first = Runtime(executor=_CountingExecutor(), state_dir=tmp_path)
    info = await device_info(first)
    assert first.executor.jobs == ["device"] and info.devices[0].copy_gbps  # type: ignore[attr-defined]
    stored = json.loads((tmp_path / "devices.json").read_text())
    assert stored[machine_key("cpu")]["copy_gbps"] == info.devices[0].copy_gbps
    again = Runtime(executor=_CountingExecutor(), state_dir=tmp_path)  # a fresh server on the same machine
    cached = await device_info(again)
    assert again.executor.jobs == []  # type: ignore[attr-defined]
    assert cached.devices[0].model_dump(exclude={"protections"}) == info.devices[0].model_dump(
        exclude={"protections"})
    # benchmark reports against the same ceilings without measuring them in its (fresh) worker
    req = BenchmarkRequest(source=VECTOR_ADD, constexprs={"BLOCK": 128}, grid=["cdiv(n, BLOCK)"], args=ADD_ARGS,
                           warmup_ms=1, rep_ms=3, reference={"out_ptr": "x_ptr + y_ptr"})
    result = await benchmark(again, req)
    assert again.executor.jobs == ["benchmark"]  # type: ignore[attr-defined]
    assert f"{info.devices[0].copy_gbps} GB/s copy" in result.method


async def test_a_changed_machine_is_measured_again(tmp_path: Path, monkeypatch: Any) -> None:
    rt = Runtime(executor=_CountingExecutor(), state_dir=tmp_path)
    await describe_device(rt, "cpu")
    monkeypatch.setattr(torch, "__version__", "0.0.1-other")
    other = Runtime(executor=_CountingExecutor(), state_dir=tmp_path)
    await describe_device(other, "cpu")
    assert other.executor.jobs == ["device"]  # type: ignore[attr-defined]
    assert len(json.loads((tmp_path / "devices.json").read_text())) == 2


async def test_a_damaged_cache_file_is_measured_over(tmp_path: Path) -> None:
    (tmp_path / "devices.json").write_text("{not json")
    rt = Runtime(executor=_CountingExecutor(), state_dir=tmp_path)
    assert (await describe_device(rt, "cpu")).copy_gbps
    assert machine_key("cpu") in json.loads((tmp_path / "devices.json").read_text())


def test_inputs_are_generated_once_per_worker_and_copied_for_each_launch() -> None:
    state = WorkerState("cpu")
    spec = {"shape": [1000], "dtype": "float32", "init": "randn", "low": None, "high": None, "value": None,
            "seed": None, "mean": 0.0, "std": 1.0}
    payload = {"kernel": {"signature": {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}}, "device": "cpu",
               "args": {"x_ptr": spec, "out_ptr": spec | {"init": "empty"}, "n": 1000}}
    first = build_args(payload, state)
    assert len(state.inputs) == 1  # the random input is kept; the poisoned output is filled in place
    first["x_ptr"].add_(1.0)  # what a kernel does to its copy never reaches the kept tensor
    second = build_args(payload, state)
    fresh = build_args(payload)  # the same values without the cache
    assert torch.equal(second["x_ptr"], fresh["x_ptr"]) and not torch.equal(first["x_ptr"], fresh["x_ptr"])
    assert second["x_ptr"].data_ptr() != next(iter(state.inputs.values())).data_ptr()
    assert torch.isnan(second["out_ptr"]).all()
    other = payload | {"args": {**payload["args"], "x_ptr": spec | {"seed": 5}}}
    assert not torch.equal(build_args(other, state)["x_ptr"], fresh["x_ptr"]) and len(state.inputs) == 2
    state.input_cache_bytes = 9000  # room for two 4000-byte tensors: the least recently used goes
    build_args(payload, state)
    build_args(other | {"args": {**payload["args"], "x_ptr": spec | {"seed": 6}}}, state)
    assert len(state.inputs) == 2 and not any('"seed": 5,' in key for key in state.inputs)
    state.input_cache_bytes = 7000  # a tensor over half of it is built each time, not kept
    build_args(other | {"args": {**payload["args"], "x_ptr": spec | {"seed": 7}}}, state)
    assert not any('"seed": 7,' in key for key in state.inputs)


def test_serve_starts_the_workers_before_it_imports_the_server(monkeypatch: Any) -> None:
    import server.app
    from server import cli

    seen: dict[str, Any] = {}
    started: list[list[str]] = []

    def fake_create_app(**kwargs: Any) -> Any:
        seen.update(kwargs)
        raise SystemExit(0)

    class FakeExecutor:
        def __init__(self, limits: Limits) -> None:
            self.limits = limits

        def prestart(self, devices: list[str], *, compiler: bool = True) -> None:
            started.append(devices)

    monkeypatch.setattr(server.app, "create_app", fake_create_app)
    monkeypatch.setattr("server.worker.ProcessExecutor", FakeExecutor)
    monkeypatch.setattr(cli, "isolate_stdout", lambda: None)
    with pytest.raises(SystemExit):
        cli.main(["serve"])
    assert started and isinstance(seen["executor"], FakeExecutor) and seen["prestart"] is True
    started.clear()
    with pytest.raises(SystemExit):
        cli.main(["serve", "--lazy-workers"])
    assert not started and seen["executor"] is None and seen["prestart"] is False


async def test_on_few_cores_the_device_worker_starts_after_the_compile_worker() -> None:
    executor = ProcessExecutor(Limits(compile_workers=1))
    executor.staggered = True
    try:
        executor.prestart(["cpu"])
        device = executor.devices["cpu"]
        assert executor.compilers[0].alive and not device.alive  # waiting for the compile worker
        with anyio.fail_after(120):
            while not device.alive:  # started by prestart's thread once the compile worker is ready
                await anyio.sleep(0.05)
        assert executor.compilers[0].conn is not None and executor.compilers[0].conn.poll()
        await executor.warm()
        assert executor.compilers[0].ready and device.ready and device.spare_pid is not None
    finally:
        executor.close()
    parallel = ProcessExecutor(Limits(compile_workers=1))
    parallel.staggered = False
    try:
        parallel.prestart(["cpu"])
        assert parallel.devices["cpu"].alive
    finally:
        parallel.close()


def test_a_staggered_start_does_not_wait_for_a_ready_message_already_read() -> None:
    """When a call has read the compile worker's ready message first, the stagger thread starts the device
    worker at once instead of polling a socket that will stay quiet."""
    from types import SimpleNamespace

    from server.worker import _start_after

    class Quiet:
        def poll(self, timeout: float = 0) -> bool:
            return False

    started: list[str] = []
    first = SimpleNamespace(conn=Quiet(), process=SimpleNamespace(poll=lambda: None), ready=True)
    later = SimpleNamespace(start_if_stopped=lambda: started.append("device"))
    _start_after(first, [later], timeout=60)  # type: ignore[arg-type,list-item]
    assert started == ["device"]
