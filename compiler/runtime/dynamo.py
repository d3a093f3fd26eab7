"""How torch.compile sees `kernel[grid](...)`: a graph break, and the launch run eagerly.

torch.compile must not trace into Anvil's launcher (Python-level caches, native calls, worker
threads) nor compile its frames one by one. `kernel[grid]` evaluated while torch.compile traces
returns a call of a function made with `torch._dynamo.disable`: dynamo breaks the graph there and
runs the launch as it stands, its frame hook off. That wrapper is made as soon as `torch._dynamo`
is imported (a one-shot import hook; importing dynamo eagerly would cost Anvil's import a second),
so it exists before anything is traced. To keep one graph, launch kernels inside a function
registered with `compiler.torch.op`.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["outside_graph"]

_eager: Callable[..., Any] | None = None
_REASON = ("an Anvil kernel launch runs eagerly, outside the compiled graph; to keep one graph, launch it inside "
           "a function registered with compiler.torch.op")


def _launch(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> Any:
    return kernel.run(*args, grid=grid, **kwargs)


def outside_graph(kernel: Any, grid: Any) -> Callable[..., Any]:
    """`kernel[grid]` while torch.compile traces: the launch as one eager call dynamo does not trace."""
    return functools.partial(_eager or _launch, kernel, grid)


def _dynamo_ready(dynamo: ModuleType) -> None:
    global _eager
    try:
        _eager = dynamo.disable(_launch, recursive=True, reason=_REASON)
    except TypeError:  # torch versions whose disable takes no reason
        _eager = dynamo.disable(_launch, recursive=True)


class _WhenDynamoLoads(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds nothing itself: lets the path finder load `torch._dynamo`, then makes the wrapper."""

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> Any:
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        self.inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: Any) -> ModuleType | None:
        return self.inner.create_module(spec)  # type: ignore[attr-defined,no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)  # type: ignore[attr-defined]
        _dynamo_ready(module)


def _watch() -> None:
    loaded = sys.modules.get("torch._dynamo")
    if loaded is not None and hasattr(loaded, "disable"):
        _dynamo_ready(loaded)
    else:
        sys.meta_path.insert(0, _WhenDynamoLoads())


_watch()
