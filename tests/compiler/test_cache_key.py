"""The compile cache key covers where a kernel's source lives, not only its text: compiled code
carries file:line locations for its errors."""

from __future__ import annotations

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
