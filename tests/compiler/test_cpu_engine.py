"""The CPU backend's LLVM pipeline: O3, with loop unrolling only for modules of moderate size."""

from __future__ import annotations

from compiler.backends.cpu.engine import UNROLL_MAX_LINES, optimize

LOOP = """
define void @fill(ptr %p) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %q = getelementptr i32, ptr %p, i64 %i
  %v = trunc i64 %i to i32
  %w = mul i32 %v, %v
  store volatile i32 %w, ptr %q
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, 8
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"""


def _filler(lines: int) -> str:
    """Functions that stay in the module (external), about `lines` lines of IR."""
    return "".join(f"define i32 @f{i}(i32 %x) {{\n  %y = add i32 %x, {i}\n  ret i32 %y\n}}\n"
                   for i in range(lines // 4 + 1))


def _fill_body(text: str) -> str:
    out = str(optimize(text))
    return out[out.index("@fill("):].split("\n}\n", 1)[0]


def test_small_modules_unroll_their_loops() -> None:
    body = _fill_body(LOOP)
    assert "phi" not in body and body.count("store volatile") == 8


def test_large_modules_keep_their_loops() -> None:
    """Over UNROLL_MAX_LINES lines the loop stays a loop (unrolling huge kernels cost minutes)."""
    body = _fill_body(LOOP + _filler(UNROLL_MAX_LINES))
    assert "phi" in body and body.count("store volatile") == 1
