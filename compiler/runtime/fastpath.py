"""The warm launch path: one front function per kernel, generated as straight-line Python.

`kernel[grid]` returns `functools.partial(front, gx, gy, gz)`, cached per grid value (a grid tuple
of plain ints is checked once, when it is first seen), so `kernel[grid](x, y, out, n, BLOCK=1024)`
is a C-level call of the generated front: Python itself binds the arguments to the kernel's own
parameter names (no *args/**kwargs packing, no lookup by call shape). The front computes a flat key
and the raw values in one pass (each tensor's data_ptr is read once: it gives both the 16-byte
alignment bit of the key and the value passed to the kernel), finds the launch entry and calls it
with the grid, the raw values and every parameter's value.

The front's signature is `(gx, gy, gz, /, p0=<default or MISSING>, ..., *extra, **kw)`: a missing
argument, too many arguments, an unknown keyword or a launch option other than num_warps, num_stages,
maxnreg and cluster_dims (a tuple; a list is taken as one) reaches the general path (Launcher.run)
with the arguments as given, which raises the located errors. One case never reaches it: an
argument given both by position and by keyword is refused by Python's own binding, `TypeError:
<kernel>() got multiple values for argument 'n'`. A key seen for the first time (Launcher.miss)
also goes through the general path, which compiles, launches and then registers the entry for
that key. `gy is None` marks a grid not checked yet (a callable, a list, a
tuple with non-int items or out of range): the front normalises it after the key lookup, as the
general path would.

The key holds three tokens per non-constexpr parameter and one per constexpr, at fixed positions:
  tensor (exactly torch.Tensor or nn.Parameter, specialized): (dtype, get_device(), data_ptr % 16 == 0)
  int in int32 range, specialized:           (1 | 16 | 0  for ==1 / %16==0 / other, None, None)
  float, specialized:                        ("fp32", None, None)
  anything else:                             (arg_key(...): a str or tuple, never an int, None, None)
  constexpr: the value itself if it is an int, else arg_key's ("c", type name, value)
then num_warps, num_stages, maxnreg and cluster_dims as given (None when not). A torch.dtype only appears as a tensor's
first token and an int first token only for ints, so different specializations never share a key;
everything that changes the binary (dtypes, alignment, ==1 and %16 of ints, constexprs, warps,
stages, registers, clusters) is in it, and so is each tensor's device: a launch with tensors on another device (or on
mixed devices) misses and goes to the general path, which compiles for it or says what is wrong.
The device token is `get_device()`, an int (cheaper than a torch.device to make, hash and compare):
the CUDA index, or -1 for CPU and meta tensors alike, so the CPU backend's entry checks the devices
itself (launch.general_entry); a CUDA index never meets another accelerator's, as one torch build
has one accelerator.

Entries (Launcher.miss makes them) are called `entry(gx, gy, gz, r0, ..., r{R-1}, v0, ..., v{P-1})`
with each grid dimension an int in [1, 2**31), the R raw values of the non-constexpr parameters
(tensors as their data_ptr) and the P values of all parameters, and return the compiled kernel
(result_of(entry) gives it without launching).
"""

from __future__ import annotations

import keyword
import types
from collections.abc import Callable
from typing import Any

from .. import errors as E
from .specialize import _FakeTensor, _Parameter, _Tensor, arg_key

__all__ = ["make_front", "bind_grid", "constexpr_token", "raw_value", "MISSING", "grid3"]

_FAST_OPTIONS = ("num_warps", "num_stages", "maxnreg", "cluster_dims")
_OPTION_VARS = {"num_warps": "_Anw", "num_stages": "_Ans", "maxnreg": "_Amr", "cluster_dims": "_Acd"}
_PREFIX = "_A"  # every name the generated code defines starts with it; no kernel parameter may


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def constexpr_token(v: Any) -> Any:
    """A constexpr's key token when it is not an int: arg_key's, which carries the value's type
    (True, 1 and 1.0 are equal in Python but compile differently)."""
    return arg_key(_CONSTEXPR, v)


def raw_value(v: Any) -> Any:
    """What the binary receives for a non-constexpr argument that took the generic key path (a fake
    tensor has no address: its key token, NO_DATA, sends the launch to the general path, which runs nothing)."""
    if hasattr(v, "data_ptr") and hasattr(v, "dtype"):
        return 0 if type(v) is _FakeTensor else v.data_ptr()
    return v


class _ConstexprInfo:
    constexpr = True
    no_specialize = False
    name = ""


_CONSTEXPR: Any = _ConstexprInfo()


class Unchecked:
    """A grid the front normalises (or rejects) at launch time, as the general path would: a
    function of the arguments, a list, a tuple with items that are not plain ints, out of range,
    or with an empty dimension."""

    __slots__ = ("grid",)

    def __init__(self, grid: Any) -> None:
        self.grid = grid


def checked_grid(grid: Any) -> tuple[int, int, int] | Unchecked:
    """(gx, gy, gz) for a grid of 1-3 plain ints in [1, 2**31); Unchecked(grid) for anything else."""
    if grid.__class__ is int:
        grid = (grid,)
    if grid.__class__ is tuple and 1 <= len(grid) <= 3:
        dims = (*grid, 1, 1)
        if all(d.__class__ is int and 0 < d < 2147483648 for d in dims):
            return dims[0], dims[1], dims[2]
    return Unchecked(grid)


def bind_grid(front: Callable[..., Any], grid: Any) -> Callable[..., Any]:
    """`kernel[grid]`: the front as a method of the checked grid. A bound method's call prepends its
    `self` without copying the arguments (a partial with several bound arguments copies them)."""
    return types.MethodType(front, checked_grid(grid))


def grid_of(g: tuple[int, int, int] | Unchecked) -> Any:
    """The grid as the caller gave it (for the general path)."""
    return g.grid if isinstance(g, Unchecked) else g


def make_front(launcher: Any) -> Callable[..., Any]:
    """Generate the front of `launcher`'s kernel (see the module docstring)."""
    names: list[str] = launcher.names
    if len(set(names)) != len(names) or any(n.startswith(_PREFIX) or not n.isidentifier() or keyword.iskeyword(n)
                                            for n in names):
        return _general_front(launcher)
    fname = launcher.fn.__name__
    if not fname.isidentifier() or keyword.iskeyword(fname) or fname.startswith(_PREFIX) or fname in names:
        fname = "kernel"
    ns: dict[str, Any] = {"_ATensor": _Tensor, "_AParam": _Parameter,
                          "_Aarg_key": arg_key, "_Acx": constexpr_token, "_Araw": raw_value,
                          "_Afast_get": launcher.fast.get, "_Amiss": launcher.miss, "_Aslow": launcher.slow,
                          "_Agrid3": _grid3_of(launcher), "_AM": MISSING,
                          "_Aresult_of": result_of, "_Atrue": constexpr_token(True), "_Afalse": constexpr_token(False),
                          "_Astr": constexpr_token("")[:-1]}
    sig = ["_Ag", "/"]
    for i, n in enumerate(names):
        if n in launcher.defaults:
            ns[f"_Ad{i}"] = launcher.defaults[n]
            sig.append(f"{n}=_Ad{i}")
        else:
            sig.append(f"{n}=_AM")
    sig += ["*_Aextra", "**_Akw"]
    values = "(" + "".join(f"{n}, " for n in names) + ")"
    opts = [o for o in _FAST_OPTIONS if o not in launcher.index]
    # A missing argument is not checked here: MISSING takes the generic key branch, whose token
    # ("?", "_Missing") no entry is ever registered under, so the lookup misses and Launcher.miss
    # hands the call to the general path, which reports it.
    lines = [f"def {fname}({', '.join(sig)}):", "    _Anw = _Ans = _Amr = _Acd = None", "    if _Akw or _Aextra:",
             "        if _Akw:"]
    lines += [f"            {_OPTION_VARS[o]} = _Akw.pop({o!r}, None)" for o in opts] or ["            pass"]
    if "cluster_dims" in opts:  # a list as the tuple; a tuple of anything but ints (hashable or not: (2.0,)
        # is the key of (2,)) goes to the general path, which checks it
        lines += ["            if _Acd is not None:", "                if _Acd.__class__ is list:",
                  "                    _Acd = tuple(_Acd)",
                  "                if _Acd.__class__ is not tuple or not all(v.__class__ is int for v in _Acd):",
                  "                    _Akw['cluster_dims'] = _Acd"]
    lines += ["        if _Akw or _Aextra:",
              f"            return _Aslow(_Ag, {values}, _Aextra, _Akw, _Anw, _Ans, _Amr, _Acd)"]
    keys: list[str] = []
    raws: list[str] = []
    for i, (n, p) in enumerate(zip(names, launcher.params, strict=True)):
        if p.constexpr:  # constexpr_token's tokens, those of bools and strings made here (no call)
            lines += [f"    _At = {n}.__class__",
                      "    if _At is int:",
                      f"        _Ak{i} = {n}",
                      "    elif _At is bool:",
                      f"        _Ak{i} = _Atrue if {n} else _Afalse",
                      "    elif _At is str:",
                      f"        _Ak{i} = _Astr + ({n},)",
                      "    else:",
                      f"        _Ak{i} = _Acx({n})"]
            keys.append(f"_Ak{i}")
            continue
        ns[f"_Ap{i}"] = p
        if p.no_specialize:
            lines += [f"    _Ak{i} = _Aarg_key(_Ap{i}, {n})", f"    _Aa{i} = _Ab{i} = None", f"    _Ar{i} = _Araw({n})"]
        else:
            lines += [
                f"    _At = {n}.__class__",
                "    if _At is _ATensor or _At is _AParam:",
                f"        _Ar{i} = {n}.data_ptr()",
                f"        _Ak{i} = {n}.dtype",
                f"        _Aa{i} = {n}.get_device()",
                f"        _Ab{i} = not _Ar{i} & 15",
                f"    elif _At is int and -2147483648 <= {n} < 2147483648:",
                f"        _Ar{i} = {n}",
                f"        _Ak{i} = 1 if {n} == 1 else (0 if {n} & 15 else 16)",
                f"        _Aa{i} = _Ab{i} = None",
                "    elif _At is float:",
                f"        _Ar{i} = {n}",
                f"        _Ak{i} = 'fp32'",
                f"        _Aa{i} = _Ab{i} = None",
                "    else:",
                f"        _Ar{i} = _Araw({n})",
                f"        _Ak{i} = _Aarg_key(_Ap{i}, {n})",
                f"        _Aa{i} = _Ab{i} = None",
            ]
        keys += [f"_Ak{i}", f"_Aa{i}", f"_Ab{i}"]
        raws.append(f"_Ar{i}")
    nw, ns_, mr, cd = (_OPTION_VARS[o] if o in opts else "None" for o in _FAST_OPTIONS)
    args = "".join(f", {r}" for r in raws) + "".join(f", {n}" for n in names)
    lines += [
        f"    _Akey = ({''.join(k + ', ' for k in keys)}{nw}, {ns_}, {mr}, {cd})",
        "    _Ae = _Afast_get(_Akey)",
        "    if _Ae is None:",
        f"        return _Amiss(_Ag, {values}, _Akey, {nw}, {ns_}, {mr}, {cd})",
        "    if _Ag.__class__ is tuple:",
        "        _Agx, _Agy, _Agz = _Ag",
        "    else:",
        f"        _Agx, _Agy, _Agz = _Agrid3(_Ag.grid, {values})",
        "        if not (_Agx and _Agy and _Agz):",
        "            return _Aresult_of(_Ae)",
        f"    return _Ae(_Agx, _Agy, _Agz{args})",
    ]
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<anvil front {launcher.fn.__name__}>", "exec"), ns)  # noqa: S102 - generated above
    front: Callable[..., Any] = ns[fname]
    front.__anvil_source__ = src  # type: ignore[attr-defined]
    return front


def result_of(entry: Callable[..., Any]) -> Any:
    """What `entry` returns (for an empty grid, which launches nothing): a native entry's
    `__self__`, a Python entry's `__anvil_result__`."""
    r = getattr(entry, "__anvil_result__", None)
    return r if r is not None else entry.__self__  # type: ignore[attr-defined]


def _general_front(launcher: Any) -> Callable[..., Any]:
    """For parameter names the generator cannot use: every launch takes the general path."""
    def front(g: Any, /, *args: Any, **kwargs: Any) -> Any:
        return launcher.run_clean(args, kwargs, grid_of(g))

    return front


def _grid3_of(launcher: Any) -> Callable[[Any, tuple[Any, ...]], tuple[int, int, int]]:
    names = launcher.names

    def norm(grid: Any, params: tuple[Any, ...]) -> tuple[int, int, int]:
        if callable(grid):
            grid = grid(dict(zip(names, params, strict=True)))
        return grid3(grid)

    return norm


def grid3(g: Any) -> tuple[int, int, int]:
    if isinstance(g, int):
        g = (g,)
    try:
        dims = [int(x) for x in g]
    except (TypeError, ValueError):
        raise E.LaunchError(f"grid must be a tuple of 1-3 integers (or a function returning one), got {g!r}") from None
    if not 1 <= len(dims) <= 3:
        raise E.LaunchError(f"grid must have 1 to 3 dimensions, got {len(dims)}")
    if any(d < 0 for d in dims):
        raise E.LaunchError(f"grid dimensions must be non-negative, got {dims}")
    if any(d >= 2**31 for d in dims):
        raise E.LaunchError(f"grid dimension too large: {dims} (limit 2**31 - 1)")
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]
