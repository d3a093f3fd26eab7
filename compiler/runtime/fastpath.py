"""The warm launch path: per-call-shape binders generated as straight-line Python.

`kernel[grid](x, y, out, n, BLOCK=1024)` looks up a binder by the call's shape (how many positional
arguments, which keywords) and calls it. A binder unpacks the arguments into locals, computes a flat
key and the raw values in one pass (each tensor's data_ptr is read once: it gives both the 16-byte
alignment bit of the key and the value passed to the kernel), finds the launch entry and calls it.
Anything unusual goes to the general path (Launcher.run), which raises the located errors:

- a shape with unknown keywords, too many arguments, a missing argument or a launch option other
  than num_warps/num_stages gets a binder that only calls the general path;
- a key seen for the first time (Launcher.miss) goes through the general path, which compiles,
  launches and then registers the entry for that key.

The key holds three tokens per non-constexpr parameter and one per constexpr, at fixed positions:
  tensor (exactly torch.Tensor, specialized): (dtype, device, data_ptr % 16 == 0)
  int in int32 range, specialized:           (1 | 16 | 0  for ==1 / %16==0 / other, None, None)
  anything else:                             (arg_key(...): a str or tuple, never an int, None, None)
  constexpr: the value itself if it is an int, else arg_key's ("c", type name, value)
then num_warps and num_stages as given (None when not). A torch.dtype only appears as a tensor's
first token and an int first token only for ints, so different specializations never share a key;
everything that changes the binary (dtypes, alignment, ==1 and %16 of ints, constexprs, warps,
stages) is in it, and so is each tensor's device: a launch with tensors on another device (or on
mixed devices) misses and goes to the general path, which compiles for it or says what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .specialize import _Tensor, arg_key

__all__ = ["make_binder", "constexpr_token", "raw_value"]

_FAST_OPTIONS = ("num_warps", "num_stages")


def constexpr_token(v: Any) -> Any:
    """A constexpr's key token when it is not an int: arg_key's, which carries the value's type
    (True, 1 and 1.0 are equal in Python but compile differently)."""
    return arg_key(_CONSTEXPR, v)


def raw_value(v: Any) -> Any:
    """What the binary receives for a non-constexpr argument that took the generic key path."""
    return v.data_ptr() if hasattr(v, "data_ptr") and hasattr(v, "dtype") else v


class _ConstexprInfo:
    constexpr = True
    no_specialize = False
    name = ""


_CONSTEXPR: Any = _ConstexprInfo()


def make_binder(launcher: Any, nargs: int, kwnames: tuple[str, ...]) -> Callable[..., Any]:
    """Generate the binder for calls with `nargs` positional arguments and keywords `kwnames`."""
    names: list[str] = launcher.names
    index = launcher.index
    given: dict[int, str] = {i: f"_args[{i}]" for i in range(min(nargs, len(names)))}
    opts = {o: "None" for o in _FAST_OPTIONS}
    ok = nargs <= len(names)
    for k in kwnames:
        i = index.get(k)
        if k in opts and i is None:
            opts[k] = f"_kw[{k!r}]"
        elif i is None or i in given:
            ok = False
        else:
            given[i] = f"_kw[{k!r}]"
    ns: dict[str, Any] = {"_Tensor": _Tensor, "_arg_key": arg_key, "_cx": constexpr_token, "_raw": raw_value,
                          "_fast_get": launcher.fast.get, "_miss": launcher.miss, "_grid3": _grid3_of(launcher),
                          "_names": tuple(names)}
    for i, n in enumerate(names):
        if i not in given:
            if n not in launcher.defaults:
                ok = False
                break
            ns[f"_d{i}"] = launcher.defaults[n]
            given[i] = f"_d{i}"
    if not ok:
        run = launcher.run

        def general(_grid: Any, _args: tuple[Any, ...], _kw: dict[str, Any]) -> Any:
            return run(_args, _kw, _grid, False)

        return general
    lines = ["def binder(_grid, _args, _kw):"]
    lines += [f"    _v{i} = {given[i]}" for i in range(len(names))]
    keys: list[str] = []
    raws: list[str] = []
    for i, p in enumerate(launcher.params):
        v = f"_v{i}"
        if p.constexpr:
            lines.append(f"    _k{i} = {v} if {v}.__class__ is int else _cx({v})")
            keys.append(f"_k{i}")
            continue
        ns[f"_p{i}"] = p
        if p.no_specialize:
            lines += [f"    _k{i} = _arg_key(_p{i}, {v})", f"    _a{i} = _b{i} = None", f"    _r{i} = _raw({v})"]
        else:
            lines += [
                f"    _t = {v}.__class__",
                "    if _t is _Tensor:",
                f"        _r{i} = {v}.data_ptr()",
                f"        _k{i} = {v}.dtype",
                f"        _a{i} = {v}.device",
                f"        _b{i} = not _r{i} & 15",
                f"    elif _t is int and -2147483648 <= {v} < 2147483648:",
                f"        _r{i} = {v}",
                f"        _k{i} = 1 if {v} == 1 else (0 if {v} & 15 else 16)",
                f"        _a{i} = _b{i} = None",
                "    else:",
                f"        _r{i} = _raw({v})",
                f"        _k{i} = _arg_key(_p{i}, {v})",
                f"        _a{i} = _b{i} = None",
            ]
        keys += [f"_k{i}", f"_a{i}", f"_b{i}"]
        raws.append(f"_r{i}")
    raw_tuple = "(" + "".join(f"{r}, " for r in raws) + ")"
    params = "(" + "".join(f"_v{i}, " for i in range(len(names))) + ")"
    lines += [
        f"    _key = ({''.join(k + ', ' for k in keys)}{opts['num_warps']}, {opts['num_stages']})",
        "    _e = _fast_get(_key)",
        "    if _e is None:",
        f"        return _miss(_grid, _args, _kw, _key, {len(raws)})",
        "    if _grid.__class__ is not tuple or len(_grid) != 1:",
        f"        _g0, _g1, _g2 = _grid3(_grid, {params})",
        f"        return _e(_g0, _g1, _g2, {raw_tuple}, {params})",
        "    _g0 = _grid[0]",
        "    if _g0.__class__ is not int or not 0 <= _g0 < 2147483648:",
        f"        _g0, _g1, _g2 = _grid3(_grid, {params})",
        f"        return _e(_g0, _g1, _g2, {raw_tuple}, {params})",
        f"    return _e(_g0, 1, 1, {raw_tuple}, {params})",
    ]
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<anvil binder {launcher.fn.__name__}>", "exec"), ns)  # noqa: S102 - generated above
    binder: Callable[..., Any] = ns["binder"]
    binder.__anvil_source__ = src  # type: ignore[attr-defined]
    return binder


def _grid3_of(launcher: Any) -> Callable[[Any, tuple[Any, ...]], tuple[int, int, int]]:
    from .launch import grid3

    names = launcher.names

    def norm(grid: Any, params: tuple[Any, ...]) -> tuple[int, int, int]:
        if callable(grid):
            grid = grid(dict(zip(names, params, strict=True)))
        return grid3(grid)

    return norm

