"""Device functions: the handle of a `@jit` function as the frontend and the language see it.

A `DeviceFunction` holds a function's Python object (or source text), where its source lives, the
globals it reads, its flags (noinline, debug, do_not_specialize, compile-time), its parsed source
and the deep hash of everything it reaches. The frontend resolves calls to it; the language's own
library (language/standard.py, random.py) is written as device functions. The kernel users launch,
`JITFunction` (runtime/jit.py), is a DeviceFunction with the launch methods, in the runtime layer
above the frontend: nothing here reaches the compile pipeline.

Also here: compile-time helpers (`ConstexprFunction`, `python_helper`) and the tokens that put a
kernel's global data into its cache key (`value_token`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import linecache
import sys
import types
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .. import errors as E

__all__ = ["DeviceFunction", "device_function", "as_device_function", "ConstexprFunction", "constexpr_function",
           "python_helper", "value_token", "register_source_lines"]


class DeviceFunction:
    """A function compiled from Python source (or source text) when a kernel that calls it is compiled."""

    def __init__(self, fn: Callable[..., Any] | None = None, *, text: str | None = None,
                 name: str | None = None, filename: str = "<kernel>", first_line: int = 1,
                 globals: Mapping[str, Any] | None = None, debug: bool | None = None,
                 do_not_specialize: Iterable[int | str] = (), noinline: bool = False,
                 compile_time: bool = False) -> None:
        self.fn = fn
        self.compile_time = compile_time  # a constexpr_function of source text (frontend/compiletime.py)
        if fn is not None:
            try:
                lines, first_line = inspect.getsourcelines(fn)
            except (OSError, TypeError) as e:
                raise E.AnvilError(f"cannot read the source of {getattr(fn, '__name__', fn)}: {e}; "
                                   "kernels must be defined in a file (or passed as text to "
                                   "compile_source)") from None
            text = "".join(lines)
            filename = inspect.getsourcefile(fn) or "<kernel>"
            name = fn.__name__
            # The module's live globals (not a copy): like Triton, a kernel may call a @jit
            # function defined further down the file, resolved when the kernel is compiled.
            cells: dict[str, Any] = {}
            if fn.__closure__:
                cells = {k: c.cell_contents for k, c in zip(fn.__code__.co_freevars, fn.__closure__, strict=True)
                         if _cell_ok(c)}
            globals = ChainMap(cells, fn.__globals__)
            self.__doc__ = fn.__doc__
            self.__module__ = fn.__module__
        assert text is not None
        self.text = text
        self.__name__ = name or "kernel"
        self.filename = filename
        self.first_line = first_line
        self.globals: Mapping[str, Any] = globals or {}
        self.debug = debug
        self.noinline = noinline
        self._source: Any = None
        self._deep_hash: str | None = None
        self._dns = tuple(do_not_specialize)

    # ------------------------------------------------------------------ source
    @property
    def source(self) -> Any:
        """The parsed FunctionSource (parsed once)."""
        if self._source is None:
            # deferred: compiler.frontend's __init__ loads codegen, which needs the language (made of these)
            from ..frontend.source import parse_function

            self._source = parse_function(self.text, self.filename, self.first_line, self.globals,
                                          self.__name__)
            self._source.text_module = self.fn is None
            self._source.compile_time = self.compile_time
        return self._source

    @property
    def arg_names(self) -> list[str]:
        return list(self.source.params)

    @property
    def constexpr_names(self) -> set[str]:
        # deferred: as in `source`: compiler.frontend's __init__ loads the language, made of these
        from ..frontend.source import is_constexpr_annotation

        src = self.source
        return {p for p, a in src.annotations.items() if is_constexpr_annotation(a, src.globals)}

    @property
    def deep_hash(self) -> str:
        """Hash of this function's source and of every @jit function and constant it reaches."""
        if self._deep_hash is None:
            # where the source lives too: compiled code carries file:line locations for its errors
            h = hashlib.sha256(f"{self.filename}:{self.first_line}\n{self.text}".encode())
            self._deep_hash = "pending"
            for name in sorted(_free_names(self.source.tree)):
                if name not in self.globals:
                    continue
                self._hash_global(h, name, self.globals[name])
            for name, attr in sorted(_module_attributes(self.source.tree, self.globals)):
                self._hash_global(h, f"{name}.{attr}", getattr(self.globals[name], attr))
            self._deep_hash = h.hexdigest()
        return self._deep_hash

    def _hash_global(self, h: Any, name: str, obj: Any) -> None:
        """A global the kernel reads: an @jit function by its own deep hash, data (numbers, strings,
        tuples, lists, dicts, dtypes...) by its value, anything else (modules, classes) not at all."""
        dep = as_device_function(obj)
        if dep is not None:
            if dep is not self:
                h.update(f"{name}:{dep.deep_hash}".encode())
            return
        token = value_token(obj)
        if token is not None:
            h.update(f"{name}={token}".encode())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise E.AnvilError(f"{self.__name__} is a device function: call it from a @jit function")

    def __repr__(self) -> str:
        return f"JITFunction({self.__name__})"  # as Triton names its library functions, and as ours did


def device_function(fn: Callable[..., Any] | None = None, *, noinline: bool = False) -> Any:
    """A device function of the language's library: `@device_function def sigmoid(x): ...`.
    Kernels call it; it is not launched (users' kernels are `compiler.jit`, runtime/jit.py)."""

    def wrap(f: Callable[..., Any]) -> DeviceFunction:
        return DeviceFunction(f, noinline=noinline)

    return wrap(fn) if fn is not None else wrap


def _cell_ok(c: Any) -> bool:
    try:
        c.cell_contents  # noqa: B018
        return True
    except ValueError:
        return False


def _free_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _module_attributes(tree: ast.AST, globals: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(module, attribute) for each `module.attribute` read of a global module other than the
    language's own (`consts.TABLE`: its value is data the kernel depends on)."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and isinstance(n.ctx, ast.Load):
            mod = globals.get(n.value.id)
            if isinstance(mod, type(ast)) and not mod.__name__.startswith(_LANGUAGE_MODULES):
                out.add((n.value.id, n.attr))
    return out


_LANGUAGE_MODULES = ("compiler", "triton", "math", "builtins", "torch", "numpy")
_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def value_token(obj: Any, _depth: int = 0) -> str | None:
    """A text that changes when a global's value does, for the compile cache key: numbers and
    strings by repr, containers item by item (a dict in key order, a set sorted), constexpr by
    its value, dtypes by name; a container subclass also by its class's module source (a dict
    filled on demand, by __missing__, holds what its code makes), a compile-time helper
    (python_helper) by its source. None: not data (a module, a class, another function), which the
    key leaves out."""
    if _depth > 32:
        return "<deep>"
    t = type(obj)
    if t in _SCALARS:
        return f"{t.__name__}:{obj!r}"
    helper = python_helper(obj)
    if helper is not None:  # a compile-time helper: by its code
        return f"helper:{_function_token(helper.fn)}"
    if t.__name__ == "constexpr":
        return value_token(getattr(obj, "value", None), _depth + 1)
    if isinstance(obj, (tuple, list, dict, set, frozenset)):
        if hasattr(t, "__missing__"):  # filled on demand: its code, not what it holds so far
            return f"{t.__module__}.{t.__qualname__}:{_module_source_hash(t.__module__)}"
        if isinstance(obj, dict):
            items = [f"{value_token(k, _depth + 1)}:{value_token(v, _depth + 1)}" for k, v in obj.items()]
        else:
            items = [str(value_token(v, _depth + 1)) for v in obj]
            if isinstance(obj, (set, frozenset)):
                items.sort()
        head = t.__name__
        if t not in (tuple, list, dict, set, frozenset):
            head = f"{t.__module__}.{t.__qualname__}:{_module_source_hash(t.__module__)}"
        return f"{head}({','.join(items)})"
    if isinstance(obj, (int, float, str)):  # an enum member or another subclass of a scalar
        return f"{t.__module__}.{t.__qualname__}:{obj!r}"
    mod = getattr(t, "__module__", "") or ""
    if mod.startswith(("compiler.language", "triton.language")) and hasattr(obj, "name"):
        return f"{t.__name__}:{obj.name}"  # a dtype
    return None


def _function_token(fn: Any) -> str:
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        text = repr((code.co_code, code.co_consts)) if code is not None else repr(fn)
    return f"{getattr(fn, '__qualname__', '?')}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


@functools.cache
def _module_source_hash(module: str) -> str:
    mod = sys.modules.get(module)
    try:
        text = inspect.getsource(mod) if mod is not None else ""
    except (OSError, TypeError):
        text = ""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ConstexprFunction:
    """A Python function a kernel calls at compile time (Triton's `@triton.constexpr_function`):
    its arguments are compile-time values and so is its result. On the host it is the function.

    A kernel written in Python calls it as Python, in the compiling process (the user's own code,
    as Triton does). Kernel source text never holds one: there a helper decorated this way is read
    from the text and its body evaluated by the compiler's closed-world evaluator
    (frontend/compiletime.py), never executed."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        def plain(x: Any) -> Any:
            return x.value if type(x).__name__ == "constexpr" else x

        return self.fn(*[plain(a) for a in args], **{k: plain(v) for k, v in kwargs.items()})

    def __repr__(self) -> str:
        return f"<constexpr_function {getattr(self.fn, '__qualname__', self.fn)}>"


def constexpr_function(fn: Callable[..., Any]) -> ConstexprFunction:
    """Mark `fn` as evaluated at compile time when a kernel calls it (`@triton.constexpr_function`)."""
    return ConstexprFunction(fn)


def python_helper(obj: Any) -> ConstexprFunction | None:
    """The compile-time helper a Python kernel's global is, if it is one: a ConstexprFunction (ours, or
    Triton's, by its function), or a Python function wrapped in a constexpr (`@tl.constexpr` on a def)."""
    if isinstance(obj, ConstexprFunction):
        return obj
    t = type(obj)
    if t.__name__ == "ConstexprFunction" and t.__module__.startswith("triton"):
        fn = getattr(obj, "fn", None)
        return ConstexprFunction(fn) if isinstance(fn, types.FunctionType) else None
    if t.__name__ == "constexpr" and (t.__module__ or "").startswith(("triton", "compiler")):
        value = getattr(obj, "value", None)
        return ConstexprFunction(value) if isinstance(value, types.FunctionType) else None
    return None


_TRITON_WRAPS: dict[int, DeviceFunction] = {}


def as_device_function(obj: Any, wrap: type[DeviceFunction] = DeviceFunction) -> DeviceFunction | None:
    """The DeviceFunction for `obj`: one of ours (a library function or a kernel), or a real
    `triton.JITFunction`, wrapped once as `wrap` (the launchable kernel class asks for its own)."""
    if isinstance(obj, DeviceFunction):
        return obj
    tname = type(obj).__name__
    if tname in ("JITFunction", "JITCallable") and type(obj).__module__.startswith("triton"):
        fn = getattr(obj, "fn", None)
        if fn is None:
            return None
        mod = getattr(fn, "__module__", "") or ""
        if mod.startswith("triton.language"):
            return None  # the stdlib: mapped to ours by name
        key = id(obj)
        wrapped = _TRITON_WRAPS.get(key)
        if wrapped is None or wrapped.fn is not fn or not isinstance(wrapped, wrap):
            dns = getattr(obj, "do_not_specialize", ()) or ()
            wrapped = wrap(fn, do_not_specialize=dns, debug=getattr(obj, "debug", None))
            _TRITON_WRAPS[key] = wrapped
        return wrapped
    return None


def register_source_lines(filename: str, text: str) -> None:
    """Let tracebacks and inspect find lines of kernels given as text."""
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
