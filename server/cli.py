"""The ``anvil`` command: ``anvil serve`` (the MCP server) and ``anvil demo`` (an agent-style session)."""

from __future__ import annotations

import argparse
import hmac
import io
import logging
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from tools.limits import Limits


class _ProtocolStdout(io.TextIOBase):
    """``sys.stdout`` while serving over stdio.

    Text written with ``print`` goes to stderr; ``.buffer`` is the protocol channel (a duplicate of
    the original fd 1), which only the MCP transport uses. fd 1 itself points at stderr, so native
    code and child processes that write to it cannot corrupt the protocol.
    """

    def __init__(self, protocol: BinaryIO) -> None:
        super().__init__()
        self.buffer = protocol

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def fileno(self) -> int:
        return 2

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


def isolate_stdout() -> None:
    """Keep the stdio protocol on a duplicate of fd 1 and point fd 1 at stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = _ProtocolStdout(os.fdopen(protocol_fd, "wb"))


def _token_verifier(token: str) -> Any:
    # deferred: start-up cost: the CLI parses its arguments before loading fastmcp (about 2 s)
    from fastmcp.server.auth.providers.debug import DebugTokenVerifier

    return DebugTokenVerifier(validate=lambda offered: hmac.compare_digest(offered, token), client_id="anvil")


def serve(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING)
    if not args.http:
        isolate_stdout()
    overrides = {
        "launch_timeout_s": args.launch_timeout,
        "max_concurrent_calls": args.max_concurrent,
        "compile_memory_bytes": args.compile_memory,
        "worker_memory_bytes": args.worker_memory,
        "allow_inline_asm": 1 if args.allow_inline_asm else None,
    }
    limits = Limits.from_env(**overrides)
    executor = None
    if not args.lazy_workers:
        # The workers start first (the compile worker, and the default device's unless the machine has few
        # cores: then once the compile worker is ready): each imports torch and the compiler and warms up while
        # this process imports the server, so the first calls find them ready. The device is guessed from the
        # device nodes; the server starts the right one if it differs.
        # deferred: start-up cost: the CLI parses its arguments before loading the server (fastmcp, torch, the compiler)
        from server.worker import ProcessExecutor, default_compile_targets

        executor = ProcessExecutor(limits)
        executor.prestart(["cuda:0" if "cuda" in default_compile_targets() else "cpu"], compiler=True)
    # deferred: start-up cost: the CLI parses its arguments before loading the server (fastmcp, torch, the compiler)
    from server.app import create_app, env_allowed_paths

    if not args.verbose:
        logging.getLogger("fastmcp").setLevel(logging.WARNING)

    token = args.token or os.environ.get("ANVIL_TOKEN")
    if token and not args.http:
        print("anvil: --token applies to --http only; ignored for stdio", file=sys.stderr)
    app = create_app(
        limits=limits,
        # --allow-path DIR (repeatable) replaces ANVIL_ALLOWED_PATHS; with neither, the tools that read or
        # write files (source_file, quantize_weights) refuse.
        allowed_paths=[Path(p).expanduser().resolve() for p in args.allow_path] or env_allowed_paths(),
        auth=_token_verifier(token) if token and args.http else None,
        prestart=not args.lazy_workers,
        executor=executor,
    )
    if args.http:
        print(f"anvil: serving MCP over HTTP at http://{args.host}:{args.port}/mcp", file=sys.stderr)
        # Host and Origin are checked on every request (DNS rebinding: a web page whose name is made
        # to resolve to 127.0.0.1 reaches the server with its own Host, and a browser's Origin)
        app.run(transport="http", host=args.host, port=args.port, path="/mcp", show_banner=False,
                host_origin_protection=True, allowed_hosts=[args.host, *args.allow_host],
                allowed_origins=list(args.allow_origin))
    else:
        app.run(transport="stdio", show_banner=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="anvil", description="Anvil: write, compile, check and benchmark kernels.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    p_serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p_serve.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    p_serve.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    p_serve.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                         help="another name clients may reach the HTTP server by (the Host header; loopback names "
                              "and --host are allowed; repeatable)")
    p_serve.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                         help="a browser origin trusted to call the HTTP server, e.g. https://app.example "
                              "(repeatable; none by default)")
    p_serve.add_argument("--token", default=None, help="require this bearer token over HTTP (or ANVIL_TOKEN)")
    p_serve.add_argument(
        "--allow-path",
        action="append",
        default=[],
        metavar="DIR",
        help="let tools read kernel files and quantize_weights read and write weights under DIR (repeatable; "
        "default: ANVIL_ALLOWED_PATHS, os.pathsep-separated; with neither, no tool reads or writes files)",
    )
    p_serve.add_argument("--launch-timeout", type=float, default=None,
                         help="seconds of launching per launch_kernel call, its variants included (default 30)")
    p_serve.add_argument("--max-concurrent", type=int, default=None, help="tool calls in flight (default 32)")
    p_serve.add_argument(
        "--compile-memory", type=int, default=None, metavar="BYTES",
        help="data memory limit of each compile worker (default 2 GiB; 0: none; or ANVIL_COMPILE_MEMORY_BYTES)",
    )
    p_serve.add_argument(
        "--worker-memory", type=int, default=None, metavar="BYTES",
        help="data memory limit of the CPU launch worker (default 8 GiB; 0: none; or ANVIL_WORKER_MEMORY_BYTES)",
    )
    p_serve.add_argument(
        "--prestart", action="store_true", help="start the worker processes at once (the default; kept for scripts)"
    )
    p_serve.add_argument(
        "--lazy-workers", action="store_true",
        help="start worker processes on first use instead of at once (slower first calls, less memory while idle)",
    )
    p_serve.add_argument(
        "--allow-inline-asm", action="store_true",
        help="let kernels use tl.inline_asm_elementwise (GPU assembly is not bounds-checked: only for clients "
        "you trust with the GPU worker's memory; or ANVIL_ALLOW_INLINE_ASM=1)",
    )
    p_serve.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    p_demo = sub.add_parser("demo", help="run an agent-style session against `anvil serve` over stdio")
    p_demo.add_argument("--quiet", action="store_true", help="print only the one-line summaries")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args)
    # deferred: start-up cost: only the demo command needs it
    from server.demo import run_demo

    return run_demo(verbose=not args.quiet)


if __name__ == "__main__":
    raise SystemExit(main())
