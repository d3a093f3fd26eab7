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
