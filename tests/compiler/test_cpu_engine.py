"""The CPU backend's LLVM pipeline (O3; loop unrolling and the loop vectorizer only for modules of
moderate size) and its exp."""

from __future__ import annotations

from compiler.backends.cpu.engine import LARGE_MODULE_LINES, optimize

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
    """Over LARGE_MODULE_LINES lines the loop stays a loop (unrolling huge kernels cost minutes)."""
    body = _fill_body(LOOP + _filler(LARGE_MODULE_LINES))
    assert "phi" in body and body.count("store volatile") == 1


SCALE = """
define void @fill(ptr noalias %p, ptr noalias %q, i64 %n) {
entry:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %loop, label %exit
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %a = getelementptr i32, ptr %p, i64 %i
  %b = getelementptr i32, ptr %q, i64 %i
  %v = load i32, ptr %a
  %w = mul i32 %v, 3
  store i32 %w, ptr %b
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"""


def test_loop_vectorizer_only_for_moderate_modules() -> None:
    """A loop of n iterations is vectorized in an ordinary module; over LARGE_MODULE_LINES lines
    it stays scalar (the loop vectorizer took most of the compile time of emulated tensor-core
    kernels)."""
    assert "x i32>" in _fill_body(SCALE)
    assert "x i32>" not in _fill_body(SCALE + _filler(LARGE_MODULE_LINES))


EXP_SRC = """
import triton
import triton.language as tl


@triton.jit
def exps(x_ptr, e_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(e_ptr + offs, tl.exp(x) + tl.exp2(x), mask=m)
"""


def test_exp_converts_its_exponent_without_saturation() -> None:
    """exp / exp2's exponent is clamped before it becomes an integer, so the plain conversion does
    (x86 expands the saturating one into several instructions: 3x the whole exp); NaN is mapped
    to 0 first (a plain conversion of NaN is poison), and the result stays NaN."""
    import torch

    import compiler

    k = compiler.compile_source(EXP_SRC, kernel="exps")
    ck = k.compile({"x_ptr": "*fp32", "e_ptr": "*fp32", "n": "i32"}, {"BLOCK": 256}, target="cpu")
    assert "fptosi.sat" not in ck.asm["llir"] and "fptosi" in ck.asm["llir"]
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1.5, -200.0, 200.0, 88.0])
    out = torch.full_like(x, -1.0)
    k[(1,)](x, out, x.numel(), BLOCK=256)
    want = torch.exp(x) + torch.exp2(x)
    assert torch.isnan(out[0]) and torch.equal(out[1:3], want[1:3]) and torch.equal(out[5:7], want[5:7])
    torch.testing.assert_close(out[3:5], want[3:5], rtol=4e-7, atol=0)
    torch.testing.assert_close(out[7:], want[7:], rtol=4e-7, atol=0)
