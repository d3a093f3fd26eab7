"""Subprocesses of the differential tests.

    python diff_driver.py interpret DIR CHUNK
        Runs DIR/batch.pt (a list of case dicts) under Triton's interpreter and writes
        DIR/chunk{k}.pt for every CHUNK cases: name -> {"outputs": [tensors]} or {"error": "..."}.
        Each distinct kernel source becomes a module file, because triton.jit reads its
        function's source through `inspect`.
    python diff_driver.py warm DIR
        Compiles the Anvil kernels of DIR/anvil.pt, last first, into Anvil's disk cache, and stops
        where the test process (which writes its position to DIR/progress) has got to.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from pathlib import Path


def interpret(out: Path, chunk: int) -> None:
    os.environ["TRITON_INTERPRET"] = "1"
    import numpy as np
    import torch
    import triton  # noqa: F401 - imported after TRITON_INTERPRET is set

    np.seterr(all="ignore")  # integer wrap-around and float overflow are part of what is tested
    batch = torch.load(out / "batch.pt", weights_only=False)
    modules: dict[str, object] = {}
    results: dict[str, dict] = {}
    for i, case in enumerate(batch):
        try:
            mod = modules.get(case["source"])
            if mod is None:
                path = out / f"kernels_{len(modules)}.py"
                path.write_text(case["source"])
                spec = importlib.util.spec_from_file_location(f"anvil_diff_kernels_{len(modules)}", path)
                assert spec is not None and spec.loader is not None
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                modules[case["source"]] = mod
            args = case["args"]
            getattr(mod, case["kernel"])[tuple(case["grid"])](*args, **case["meta"])
            results[case["name"]] = {"outputs": [args[j] for j in case["outputs"]]}
        except Exception as e:  # noqa: BLE001 - reported to the test, which decides
            tb = traceback.format_exc(limit=4)
            results[case["name"]] = {"error": f"{type(e).__name__}: {e}\n{tb}"}
        if (i + 1) % chunk == 0 or i + 1 == len(batch):
            k = i // chunk
            tmp = out / f"chunk{k}.tmp"
            torch.save(results, tmp)
            os.replace(tmp, out / f"chunk{k}.pt")
            results = {}


def warm(out: Path) -> None:
    import torch

    import compiler

    batch = torch.load(out / "anvil.pt", weights_only=False)
    fns: dict[tuple[str, str], object] = {}
    for i in range(len(batch) - 1, -1, -1):
        try:
            if i <= int((out / "progress").read_text()) + 1:
                return
        except (OSError, ValueError):
            pass
        case = batch[i]
        try:
            key = (case["source"], case["kernel"])
            fn = fns.get(key)
            if fn is None:
                fn = fns[key] = compiler.compile_source(case["source"], kernel=case["kernel"],
                                                        filename=f"<diff:{case['name']}>")
            fn.warmup(*case["args"], grid=tuple(case["grid"]), **case["meta"])  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - the test process compiles it again and reports
            pass


if __name__ == "__main__":
    if sys.argv[1] == "interpret":
        interpret(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        warm(Path(sys.argv[2]))
