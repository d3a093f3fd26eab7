"""The issue's attacks through the tools (in-memory client, real worker processes, canaries in the environment).

Every answer is checked for the canary secrets; each attack must end in a clear tool error with no side
effect, and the next valid call must still work.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import Client
from fuzzing import INTERNAL_ERROR_MARKS, leaked
from test_sec_frontend import ATTACK_LINE, CODE_EXECUTION, kernel

from server.app import create_app
from server.demo import VECTOR_ADD
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio

N = 1000
ADD_ARGS: dict[str, Any] = {
    "x_ptr": {"shape": [N]}, "y_ptr": {"shape": [N]}, "out_ptr": {"shape": [N], "init": "empty"}, "n": N,
}
GOOD: dict[str, Any] = {
    "source": VECTOR_ADD, "constexprs": {"BLOCK": 256}, "grid": ["cdiv(n, BLOCK)"], "args": ADD_ARGS,
    "reference": {"out_ptr": "x_ptr + y_ptr"},
}

OOB_STORE = """\
import triton
import triton.language as tl


@triton.jit
def scribble_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32) + 7.0)
"""
OOB_STORE_LINE = 8

OOB_READ = """\
import triton
import triton.language as tl


@triton.jit
def peek_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
"""


def answer_text(result: Any) -> str:
    parts = [getattr(block, "text", "") for block in result.content]
    if result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


async def call(client: Client, tool: str, args: dict[str, Any], timeout: float = 60.0) -> tuple[Any, str]:
    with anyio.fail_after(timeout):
        result = await client.call_tool(tool, args, raise_on_error=False)
    text = answer_text(result)
    assert leaked(text) is None, f"{tool} leaked a canary secret: {text[:500]}"
    return result, text


def assert_clear_error(result: Any, text: str, *words: str) -> None:
    assert result.is_error, f"expected an error, got: {text[:500]}"
    for mark in INTERNAL_ERROR_MARKS:
        assert mark not in text, f"internal detail {mark!r} in: {text[:500]}"
    for word in words:
        assert word.lower() in text.lower(), f"{word!r} not in: {text[:500]}"


async def next_call_works(client: Client) -> None:
    result, text = await call(client, "launch_kernel", GOOD)
    assert not result.is_error, text
    assert result.structured_content["passed"] is True


# --- kernel source -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["issue_payload", "static_assert_environ", "format_walk", "triton_sys",
                                  "mutate_list", "globals_builtins"])
async def test_compile_kernel_refuses_code(client: Client, tmp_path: Path, name: str) -> None:
    marker = tmp_path / "pwned"
    source = kernel(CODE_EXECUTION[name].format(marker=marker))
    for tool, extra in (("compile_kernel", {}), ("launch_kernel", {"grid": [1], "args": {
            "out_ptr": {"shape": [16], "init": "empty"}, "n": 16}})):
        result, text = await call(client, tool, {"source": source, "kernel_name": "attack_kernel",
                                                 "constexprs": {"BLOCK": 16}, **extra})
        assert_clear_error(result, text)
        diag = result.structured_content["diagnostics"][0]
        assert diag["line"] == ATTACK_LINE and diag["column"] > 0, diag
        assert not marker.exists()
    await next_call_works(client)


@pytest.mark.parametrize("body", ['x = "A" * (1 << 32)', "x = " + " + ".join(["1"] * 20000)],
                         ids=["string_bomb", "deep_sum"])
async def test_compile_kernel_bombs(client: Client, body: str) -> None:
    start = time.monotonic()
    result, text = await call(client, "compile_kernel", {"source": kernel(body), "kernel_name": "attack_kernel",
                                                         "constexprs": {"BLOCK": 16}})
    assert_clear_error(result, text)
    assert result.structured_content["diagnostics"][0]["line"] >= ATTACK_LINE
    assert time.monotonic() - start < 10
    await next_call_works(client)


# --- references and baselines ----------------------------------------------------------------------------------

BIG = 1 << 20
BIG_ARGS: dict[str, Any] = {
    "x_ptr": {"shape": [BIG]}, "y_ptr": {"shape": [BIG]}, "out_ptr": {"shape": [BIG], "init": "empty"}, "n": BIG,
}
GROWTH = {
    "eye_keywords": "torch.eye(n=40000, m=40000)[0, :1].sum() + x_ptr",
    "arange_keyword": "torch.arange(end=2**30)[:1].float().sum() + x_ptr",
    "zeros_tensor_size": "torch.zeros(y_ptr.abs().long().max() * 0 + 2**30)[:1].sum() + x_ptr",
    "tile": "x_ptr.tile((1024,))[:n] * 0 + x_ptr",
    "repeat_interleave": "x_ptr.repeat_interleave(1024)[:n] * 0 + x_ptr",
    "repeat": "x_ptr.repeat(1024)[:n] * 0 + x_ptr",
    "expand_contiguous": "x_ptr.expand(1024, n).contiguous()[0] * 0 + x_ptr",
    "cat_copies": "torch.cat([" + ", ".join(["x_ptr"] * 150) + "])[:n] * 0 + x_ptr",
}


@pytest.mark.parametrize("name", sorted(GROWTH))
@pytest.mark.parametrize("where", ["reference", "baseline"])
async def test_reference_size_is_checked_before_allocation(client: Client, name: str, where: str) -> None:
    args = {**GOOD, "args": BIG_ARGS, "constexprs": {"BLOCK": 1024}}
    if where == "reference":
        result, text = await call(client, "launch_kernel", {**args, "reference": {"out_ptr": GROWTH[name]}})
    else:
        result, text = await call(client, "benchmark", {**args, "reference": None, "baseline": GROWTH[name],
                                                        "warmup_ms": 1, "rep_ms": 5})
    assert_clear_error(result, text)
    assert "limit" in text.lower() or "depends on tensor values" in text, text[:500]
    await next_call_works(client)


# --- launches: out-of-bounds writes and reads, debug ------------------------------------------------------------


async def test_out_of_bounds_store_is_not_blamed_on_the_next_launch(client: Client) -> None:
    await next_call_works(client)
    for _ in range(2):
        result, text = await call(client, "launch_kernel", {
            "source": OOB_STORE, "constexprs": {"BLOCK": 32}, "grid": [1],
            "args": {"out_ptr": {"shape": [16], "init": "zeros"}}})  # fmt: skip
        assert result.is_error, f"an out-of-bounds store was reported as success: {text[:400]}"
        assert "scribble_kernel" in text
        for _ in range(3):
            await next_call_works(client)


async def test_out_of_bounds_read_returns_no_process_data(client: Client) -> None:
    result, text = await call(client, "launch_kernel", {
        "source": OOB_READ, "constexprs": {"BLOCK": 4096}, "grid": [1],
        "args": {"x_ptr": {"shape": [16]}, "out_ptr": {"shape": [4096], "init": "empty"}}})  # fmt: skip
    assert result.is_error, f"an out-of-bounds read returned values: {text[:400]}"
    assert "peek_kernel" in text and ("bounds" in text.lower() or "crash" in text.lower())
    await next_call_works(client)


def _assert_located_report(text: str, kernel_name: str) -> None:
    assert kernel_name in text and f":{OOB_STORE_LINE}" in text, text[:600]
    assert "program id" in text and "offset 16 of 'out_ptr'" in text, text[:600]
    assert "SIGSEGV" not in text and "SIGABRT" not in text, text[:600]


async def test_debug_launch_locates_the_access(client: Client) -> None:
    oob = {"source": OOB_STORE, "constexprs": {"BLOCK": 32}, "grid": [1],
           "args": {"out_ptr": {"shape": [16], "init": "zeros"}}}
    result, text = await call(client, "launch_kernel", {**oob, "debug": True})
    assert result.is_error
    _assert_located_report(text, "scribble_kernel")
    compiled, ctext = await call(client, "compile_kernel", {"source": OOB_STORE, "constexprs": {"BLOCK": 32},
                                                            "debug": True})
    assert not compiled.is_error, ctext
    by_id = {k: v for k, v in oob.items() if k not in ("source", "constexprs")}
    result, text = await call(client, "launch_kernel", {**by_id, "kernel_id": compiled.structured_content["kernel_id"]})
    assert result.is_error
    _assert_located_report(text, "scribble_kernel")
    result, text = await call(client, "benchmark", {**oob, "debug": True, "warmup_ms": 1, "rep_ms": 5})
    assert result.is_error or result.structured_content["results"][0]["error"], text[:400]
    _assert_located_report(text, "scribble_kernel")
    await next_call_works(client)


# A pointer made from an integer argument: in a kernel with no tensor arguments there is no tensor for it to be
# inside, and every access through it must be refused as out of bounds (not performed unchecked)
FORGED = """\
import triton
import triton.language as tl


@triton.jit
def forged_kernel({params}addr, val):
    p = addr.to(tl.int64).to(tl.pointer_type(tl.uint8), bitcast=True)
    {body}
"""
FORGED_ACCESS = {
    "store": "tl.store(p, val.to(tl.uint8))",
    "load": "tl.store(p + 1, tl.load(p) + val.to(tl.uint8))",
    "atomic_add": "tl.atomic_add(p.to(tl.pointer_type(tl.int32), bitcast=True), val)",
    "atomic_cas": "tl.atomic_cas(p.to(tl.pointer_type(tl.int32), bitcast=True), 0, val)",
}


@pytest.mark.parametrize("with_tensor", [False, True], ids=["no_tensors", "beside_a_tensor"])
@pytest.mark.parametrize("access", sorted(FORGED_ACCESS))
async def test_pointer_made_from_an_integer_is_checked(client: Client, access: str, with_tensor: bool) -> None:
    source = FORGED.format(params="x_ptr, " if with_tensor else "", body=FORGED_ACCESS[access])
    args: dict[str, Any] = {"addr": 4096, "val": 1}
    if with_tensor:
        args["x_ptr"] = {"shape": [16]}
    for debug in (False, True):
        result, text = await call(client, "launch_kernel", {"source": source, "grid": [1], "args": args,
                                                             "debug": debug})
        assert result.is_error, f"an access through a forged pointer was performed: {text[:400]}"
        assert "forged_kernel" in text and "bounds" in text.lower(), text[:600]
        assert "SIGSEGV" not in text and "crash" not in text.lower(), text[:600]
    await next_call_works(client)


# --- paths ---------------------------------------------------------------------------------------------------


async def test_huge_source_file_is_refused_before_reading(client: Client, kernel_dir: Path) -> None:
    huge = kernel_dir / "huge.py"
    with huge.open("wb") as f:
        f.truncate(300 << 20)  # sparse: no disk used, but reading it whole takes memory and time
    try:
        start = time.monotonic()
        result, text = await call(client, "compile_kernel", {"source_file": str(huge), "constexprs": {"BLOCK": 16}})
        assert_clear_error(result, text, "bytes", "limit")
        assert time.monotonic() - start < 0.5, "the file was read before its size was checked"
    finally:
        huge.unlink()


async def test_fifo_source_file_is_refused_without_blocking(client: Client, kernel_dir: Path) -> None:
    fifo = kernel_dir / "pipe.py"
    os.mkfifo(fifo)
    stop = threading.Event()

    def unblock() -> None:  # if the server opens the pipe to read it, end the read after a while
        if not stop.wait(3.0):
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        start = time.monotonic()
        result, text = await call(client, "compile_kernel", {"source_file": str(fifo), "constexprs": {"BLOCK": 16}})
        elapsed = time.monotonic() - start
        assert_clear_error(result, text, "source_file")
        assert elapsed < 2.0, f"the server blocked {elapsed:.1f} s reading a pipe"
    finally:
        stop.set()
        thread.join()
        fifo.unlink()


@pytest.mark.parametrize(
    ("name", "words"),
    [("a" * 5000 + ".py", ("source_file", "long")), ("ker\x00nel.py", ("source_file",)),
     ("", ("source_file",)), (".", ("source_file",)), ("link.py", ("outside",))],
    ids=["long_name", "nul_byte", "empty", "directory", "symlink_out"],
)
async def test_bad_source_file_names(client: Client, kernel_dir: Path, name: str, words: tuple[str, ...]) -> None:
    link = kernel_dir / "link.py"
    if name == "link.py" and not link.exists():
        link.symlink_to("/etc/passwd")
    path = str(kernel_dir / name) if name else ""
    result, text = await call(client, "compile_kernel", {"source_file": path, "constexprs": {"BLOCK": 16}})
    assert_clear_error(result, text, *words)
    assert "passwd" not in text.replace(path, "") or "root:" not in text


@pytest.mark.parametrize("field", ["source_path", "output_path"])
@pytest.mark.parametrize("bad", ["a" * 5000 + ".safetensors", "w\x00.safetensors"], ids=["long", "nul"])
async def test_bad_quantize_names(client: Client, kernel_dir: Path, field: str, bad: str) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"layer.weight": torch.randn(64, 64)}, str(kernel_dir / "w.safetensors"))
    args = {"source_path": str(kernel_dir / "w.safetensors"), "output_path": str(kernel_dir / "q.safetensors"),
            "format": "fp8_e4m3"}
    args[field] = str(kernel_dir / bad)
    result, text = await call(client, "quantize_weights", args)
    assert_clear_error(result, text, field)


async def test_no_allowed_path_refuses_file_tools(runtime: Runtime, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from safetensors.torch import save_file

    monkeypatch.delenv("ANVIL_ALLOWED_PATHS", raising=False)
    monkeypatch.chdir(tmp_path)  # a stdio host often starts the server in / or $HOME
    save_file({"layer.weight": torch.randn(64, 64)}, str(tmp_path / "w.safetensors"))
    (tmp_path / "k.py").write_text(VECTOR_ADD)
    bare = Runtime(limits=runtime.limits, executor=runtime.executor, allowed_paths=[])
    async with Client(create_app(bare, allowed_paths=[])) as c:
        result, text = await call(c, "quantize_weights", {"source_path": "w.safetensors", "format": "fp8_e4m3",
                                                          "output_path": "q.safetensors", "overwrite": True})
        assert_clear_error(result, text, "--allow-path")
        assert not (tmp_path / "q.safetensors").exists()
        result, text = await call(c, "compile_kernel", {"source_file": "k.py", "constexprs": {"BLOCK": 16}})
        assert_clear_error(result, text, "--allow-path")


# --- one client's bombs do not starve the others (last: its bombs may hold the compile workers) -------------------


async def test_bombs_do_not_starve_other_clients(app: Any) -> None:
    bomb = kernel("x = 2 ** 10**10")
    named = {"source": bomb, "kernel_name": "attack_kernel", "constexprs": {"BLOCK": 16}}
    done: list[float] = []

    async def bomber() -> None:
        async with Client(app) as c:
            with anyio.move_on_after(40):
                await c.call_tool("compile_kernel", named, raise_on_error=False)

    async with anyio.create_task_group() as tg:
        tg.start_soon(bomber)
        tg.start_soon(bomber)
        await anyio.sleep(1.0)
        async with Client(app) as c:
            start = time.monotonic()
            result, text = await call(c, "compile_kernel", {"source": VECTOR_ADD, "constexprs": {"BLOCK": 512}})
            done.append(time.monotonic() - start)
            assert not result.is_error, text
        tg.cancel_scope.cancel()
    assert done[0] < 10, f"a valid compile waited {done[0]:.1f} s behind two bombs"


async def test_a_spec_cannot_ask_for_meta_or_fake_tensors(client: Client) -> None:
    """Launches given meta (or fake) tensors do nothing, for torch's tracing; a client must not be able to
    get one into a launch and have a kernel that never ran checked against a reference."""
    args = json.loads(json.dumps(GOOD))
    args["args"]["x_ptr"]["device"] = "meta"
    result, text = await call(client, "launch_kernel", args)
    assert_clear_error(result, text, "device")
    await next_call_works(client)


async def test_many_long_unknown_argument_names_get_a_short_answer(client: Client) -> None:
    """The "did you mean" hint compares each unknown name with the kernel's own parameters: many long
    names cost bounded time and give a bounded answer."""
    junk = {f"x_ptr{'q' * 1000}{i}": 1 for i in range(300)}
    t0 = time.monotonic()
    result, text = await call(client, "launch_kernel", {**GOOD, "args": {**ADD_ARGS, **junk}})
    assert time.monotonic() - t0 < 20
    assert_clear_error(result, text, "not a parameter")
    assert len(text) < 20_000, len(text)
    await next_call_works(client)


async def test_many_long_unknown_constexpr_and_signature_names_get_a_short_answer(client: Client) -> None:
    junk = {f"BLOCK{'z' * 2000}{i}": 1 for i in range(300)}
    result, text = await call(client, "compile_kernel", {"source": VECTOR_ADD, "constexprs": {"BLOCK": 64, **junk},
                                                         "signature": {f"n{'s' * 2000}{i}": "i32" for i in range(300)}})
    assert_clear_error(result, text, "not a parameter", "more like these")
    assert len(text) < 20_000, len(text)


# --- values a client now passes into the compiler and the reference evaluator -------------------------------

COPY = """\
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


@pytest.mark.parametrize("reference", [
    "F.embedding(torch.arange(16), x_ptr, max_norm=1.0)",  # renormalizes x_ptr's rows in place
    "F.relu(x_ptr, True)",  # in place, by position
    "F.relu(x_ptr, inplace=True)",
])
async def test_a_reference_cannot_change_the_kernels_input(client: Client, reference: str) -> None:
    """References run on the launch's own inputs: one that wrote into x_ptr would have a copy kernel
    copy the written values, and pass."""
    args = {"x_ptr": {"shape": [16, 4], "std": 10.0}, "out_ptr": {"shape": [16, 4], "init": "empty"}, "n": 64}
    result, text = await call(client, "launch_kernel", {"source": COPY, "constexprs": {"BLOCK": 64}, "grid": [1],
                                                         "args": args, "reference": {"out_ptr": reference}})
    assert_clear_error(result, text, "not allowed" if "inplace=" in reference else "changed its argument in place")
    await next_call_works(client)


STRING_CONSTEXPR = """\
import triton
import triton.language as tl


@triton.jit
def k(out_ptr, ACT: tl.constexpr):
    {body}
    tl.store(out_ptr, 1.0)
"""


@pytest.mark.parametrize(("body", "value", "words"), [
    ("tl.static_assert(False, ACT.format(tl))", "{0.__class__.__mro__}", ("has no attribute 'format'",)),
    ("tl.static_assert(False, ACT * (1 << 40))", "x" * 128, ("limit",)),  # a string bomb from the value
    ("tl.static_assert(False, ACT)", "x" * 129, ("at most 128 characters",)),  # past the value's own limit
])
async def test_a_string_constexpr_is_only_a_bounded_compile_time_string(client: Client, body: str, value: str,
                                                                        words: tuple[str, ...]) -> None:
    result, text = await call(client, "compile_kernel", {"source": STRING_CONSTEXPR.format(body=body),
                                                          "constexprs": {"ACT": value}, "target": "cpu"})
    assert result.is_error and any(w in text for w in words), text[:600]
    assert "<class" not in text  # no object walked to
    for mark in INTERNAL_ERROR_MARKS:
        assert mark not in text, text[:600]
    await next_call_works(client)
