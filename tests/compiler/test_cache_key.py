"""The compile cache key covers where a kernel's source lives, not only its text: compiled code
carries file:line locations for its errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import compiler

SRC = '''
import triton
import triton.language as tl

@triton.jit
def k(x_ptr):
    tl.store(x_ptr, 1.0)
'''


def test_same_text_in_two_files_gets_two_keys() -> None:
    a = compiler.compile_source(SRC, kernel="k", filename="a.py")
    b = compiler.compile_source(SRC, kernel="k", filename="b.py")
    again = compiler.compile_source(SRC, kernel="k", filename="a.py")
    assert a.deep_hash != b.deep_hash
    assert a.deep_hash == again.deep_hash


def test_another_build_of_the_compiler_gets_other_keys(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Kernels cached by another build of the compiler (its source changed, same version number)
    are not reused: the key holds a hash of the compiler's source."""
    from compiler.runtime import compiled
    from compiler.runtime.specialize import LaunchOptions

    k = compiler.compile_source(SRC, kernel="k", filename="a.py")
    opts = LaunchOptions(4, 3, False)
    fp = compiled.compiler_fingerprint()
    assert fp.startswith(compiler.__version__ + "+")
    key = compiled._cache_key(k, [], opts, "cpu")
    monkeypatch.setattr(compiled, "compiler_fingerprint", lambda: fp + "x")
    assert compiled._cache_key(k, [], opts, "cpu") != key


TABLE_KERNEL = '''
import torch
import compiler.language as tl
from compiler import jit
import consts

TABLE = {table}
SCALE = {{"a": {scale}}}

@jit
def k(x_ptr):
    i = tl.arange(0, 4)
    tl.store(x_ptr + i, i * 0 + TABLE[1] * SCALE["a"] + consts.OFFSET[0])

x = torch.zeros(4)
k[(1,)](x)
print(int(x[0]))
'''


@pytest.mark.parametrize("change", ["table", "scale", "module"])
def test_a_changed_global_table_is_not_served_from_the_disk_cache(tmp_path: Path, change: str) -> None:
    """The key holds the values of the tuples, dicts and module attributes a kernel reads, not
    only its text and scalar globals: after the table changes, the kernel is compiled again."""
    # no .pyc: consts.py is rewritten within the same second at the same size
    env = dict(os.environ, ANVIL_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(tmp_path),
               PYTHONDONTWRITEBYTECODE="1")
    values = {"table": (1, 2, 3), "scale": 10, "module": (100,)}

    def run() -> int:
        (tmp_path / "consts.py").write_text(f"OFFSET = {values['module']!r}\n")
        (tmp_path / "kern.py").write_text(TABLE_KERNEL.format(table=values["table"], scale=values["scale"]))
        out = subprocess.run([sys.executable, str(tmp_path / "kern.py")], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.split()[-1])

    assert run() == 2 * 10 + 100
    values[change] = {"table": (1, 5, 3), "scale": 7, "module": (300,)}[change]
    assert run() == values["table"][1] * values["scale"] + values["module"][0]  # type: ignore[index, operator]


def test_value_tokens() -> None:
    import compiler.language as tl
    from compiler.runtime.jit import value_token

    class Lazy(dict):  # type: ignore[type-arg]
        def __missing__(self, key: int) -> int:
            self[key] = key * 2
            return key * 2

    assert value_token((1, "a")) != value_token((1, "b")) != value_token([1, "b"])
    assert value_token({"a": 1, "b": 2}) != value_token({"a": 1, "b": 3})
    assert value_token({1, 2}) == value_token({2, 1}) and value_token(1) != value_token(True)
    assert value_token(tl.constexpr(3)) == value_token(3) and value_token(tl.float16) != value_token(tl.bfloat16)
    lazy = Lazy()
    before = value_token(lazy)
    lazy[3]  # noqa: B018
    assert value_token(lazy) == before  # what a dict filled on demand holds so far is left out
    assert value_token(object()) is None and value_token(os) is None
