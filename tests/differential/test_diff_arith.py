"""Arithmetic, comparisons and bitwise operators for every dtype pair, and weakly typed scalars.

One generated kernel per (lhs dtype, rhs dtype) computes every operator that Triton accepts for
the pair; each result is checked against the type Triton's promotion rules give (static_assert,
so both compilers must agree on the type) and stored into an output of that type. Operators
Triton rejects for a pair (// on floats, / // % across signedness) are separate cases that both
compilers must reject.
"""

from __future__ import annotations

import itertools
from math import inf, nan

import pytest
import torch
from diff_harness import DTYPES, HEADER, Case, case_ids, check_case, gen, poison, rand_tensor, register

NAMES = list(DTYPES)
SIZES = [1000, 97, 1, 300]
BLOCK = 256
PAD = 5  # outputs are longer than n: the tail must stay poisoned


def kind(t: str) -> int:
    return 2 if t.startswith("float") or t == "bfloat16" else 1  # Triton: bool < integer < floating


def is_int(t: str) -> bool:
    return kind(t) == 1


def signed(t: str) -> bool:
    return t.startswith("int")


def bits(t: str) -> int:
    return torch.finfo(DTYPES[t]).bits if not is_int(t) else torch.iinfo(DTYPES[t]).bits


def int_promote(a: str, b: str) -> str:
    if signed(a) == signed(b):
        return a if bits(a) > bits(b) else b
    if not signed(a):
        return a if bits(a) >= bits(b) else b
    return b if bits(b) >= bits(a) else a


def promote(a: str, b: str, div_or_mod: bool = False, a_scalar: bool = False, b_scalar: bool = False) -> str:
    """Triton's computation type (triton/language/semantic.py: computation_type_impl), as the spec."""
    if a_scalar != b_scalar:
        s, t = (a, b) if a_scalar else (b, a)
        if kind(s) <= kind(t):
            return "float32" if div_or_mod and t in ("float16", "bfloat16") else t
    for f in ("float64", "float32"):
        if f in (a, b):
            return f
    if "float16" in (a, b):
        return "float32" if div_or_mod else "float16"
    if a == b == "bfloat16":
        return "float32" if div_or_mod else "bfloat16"
    if "bfloat16" in (a, b):
        return "float32"
    if div_or_mod and signed(a) != signed(b):
        raise TypeError("different signedness")
    return int_promote(a, b)


def truediv_type(a: str, b: str) -> str:
    c = promote(a, b, div_or_mod=True)
    return "float32" if is_int(c) else c


def operand(t: str, g: torch.Generator, n: int, divisor: bool) -> torch.Tensor:
    dt = DTYPES[t]
    if not is_int(t):
        x = rand_tensor(n, dt, g, scale=8.0, nonzero=divisor)
        # IEEE specials in both operands: NaN and infinity propagation, signed zeros, x / 0
        specials = [2.0, inf, nan, -0.0, 0.0, -inf, 3.0] if divisor else [inf, -inf, nan, 0.0, -0.0, 1.0, -2.5]
        k = min(len(specials), n)
        x[:k] = torch.tensor(specials[:k], dtype=dt)
        return x
    info = torch.iinfo(dt)
    if divisor:  # half small divisors, half anywhere; never zero
        small = rand_tensor(n, dt, g, lo=max(info.min, -9), hi=9, nonzero=True)
        wide = rand_tensor(n, dt, g, lo=info.min + 1, nonzero=True)
        pick = torch.rand(n, generator=g) < 0.5
        return torch.where(pick, small, wide)
    return rand_tensor(n, dt, g, lo=info.min + 1)  # INT_MIN / -1 is undefined


def pair_ops(a: str, b: str) -> list[tuple[str, str, str]]:
    """(name, expression, result type) of every operator Triton accepts for (a, b)."""
    ops = [(n, f"a {o} b", promote(a, b)) for n, o in (("add", "+"), ("sub", "-"), ("mul", "*"))]
    div_ok = not (is_int(a) and is_int(b) and signed(a) != signed(b))
    if div_ok:
        ops.append(("div", "a / b", truediv_type(a, b)))
        ops.append(("mod", "a % b", promote(a, b, div_or_mod=True)))
        if is_int(a) and is_int(b):
            ops.append(("floordiv", "a // b", promote(a, b, div_or_mod=True)))
    for n, o in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="), ("ne", "!=")):
        ops.append((n, f"a {o} b", "int1"))
    if is_int(a) and is_int(b):
        c = promote(a, b)
        ops += [("and", "a & b", c), ("or", "a | b", c), ("xor", "a ^ b", c)]
        mask = bits(c) - 1
        ops += [("shl", f"a << (b & {mask})", c), ("shr", f"a >> (b & {mask})", c)]
    return ops


def binop_source(name: str, ops: list[tuple[str, str, str]]) -> str:
    outs = ", ".join(f"{o}_ptr" for o, _, _ in ops)
    body = []
    for o, expr, ty in ops:
        body.append(f"    r_{o} = {expr}")
        body.append(f"    tl.static_assert(r_{o}.dtype == tl.{ty}, '{o}: ' + str(r_{o}.dtype))")
        body.append(f"    tl.store({o}_ptr + offs, r_{o}, mask=m)")
    return (
        HEADER
        + f"""@triton.jit
def {name}(a_ptr, b_ptr, {outs}, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
"""
        + "\n".join(body)
        + "\n"
    )


_TORCH_BINOPS = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "eq": torch.eq,
    "ne": torch.ne,
}


def _bf16_pair_reference(ops: list[tuple[str, str, str]], n: int):
    # bf16 op bf16 rounds once from the exact result (torch computes in fp32 and rounds to bf16,
    # which is exact for + - * of bf16 values); / and % run in fp32.
    def ref(args: list) -> list[torch.Tensor]:
        a, b = args[0], args[1]
        outs = []
        for i, (o, _, _) in enumerate(ops):
            out = args[2 + i]
            if o in _TORCH_BINOPS:
                r = _TORCH_BINOPS[o](a[:n], b[:n])
            elif o == "div":
                r = a[:n].float() / b[:n].float()
            else:
                r = torch.fmod(a[:n].float(), b[:n].float())
            out[:n] = r
            outs.append(out)
        return outs

    return ref


def binop_cases() -> list[Case]:
    out = []
    for i, (a, b) in enumerate(itertools.product(NAMES, NAMES)):
        name = f"binop_{a}_{b}"
        g = gen(name)
        n = SIZES[i % len(SIZES)]
        ops = pair_ops(a, b)
        tdt = {**DTYPES, "int1": torch.bool}
        args = [operand(a, g, n + PAD, False), operand(b, g, n + PAD, True)]
        args += [poison(n + PAD, tdt[ty]) for _, _, ty in ops]
        args.append(n)
        ref, reason = None, ""
        if a == b == "bfloat16":
            # Triton's interpreter keeps bf16 as raw uint16 and applies numpy's integer add/mul/
            # compare to the bits (interpreter.py binary_op), so bf16 op bf16 is garbage there.
            ref, reason = _bf16_pair_reference(ops, n), "interpreter computes bf16 arithmetic on raw uint16 bits"
        out.append(
            Case(
                name,
                binop_source(name, ops),
                name,
                args,
                ((n + BLOCK - 1) // BLOCK,),
                outputs=range(2, 2 + len(ops)),
                meta=dict(BLOCK=BLOCK),
                reference=ref,
                reason=reason,
            )
        )
    return out


def rejected_cases() -> list[Case]:
    """Operators Triton refuses; Anvil must refuse them too."""
    exprs = {
        "floordiv_float32_float32": ("float32", "float32", "a // b"),
        "floordiv_float16_int32": ("float16", "int32", "a // b"),
        "floordiv_int8_uint8": ("int8", "uint8", "a // b"),
        "mod_uint32_int32": ("uint32", "int32", "a % b"),
        "div_int64_uint32": ("int64", "uint32", "a / b"),
        "and_float32_int32": ("float32", "int32", "a & b"),
        "shl_float16_int8": ("float16", "int8", "a << b"),
        "uint8_plus_negative": ("uint8", "uint8", "a + -1"),
        "int8_plus_out_of_range": ("int8", "int8", "a + 1000"),
        "int32_plus_int64_constant": ("int32", "int32", "a + 2**40"),
        "invert_float32": ("float32", "float32", "~a"),
    }
    out = []
    for key, (a, b, expr) in exprs.items():
        name = f"reject_{key}"
        src = (
            HEADER
            + f"""@triton.jit
def {name}(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    tl.store(c_ptr + offs, {expr})
"""
        )
        g = gen(name)
        args = [
            rand_tensor(16, DTYPES[a], g, lo=1, hi=5),
            rand_tensor(16, DTYPES[b], g, lo=1, hi=5),
            poison(16, torch.float64),
        ]
        out.append(Case(name, src, name, args, (1,), outputs=[2], meta=dict(BLOCK=16), expect_error=True))
    return out


# Python numbers are weakly typed (they adopt the tensor's type when their kind is not higher);
# runtime scalar arguments are typed (i32 / fp32) and promote like tensors.
WEAK_EXPRS = [
    ("add1", "x + 1"),
    ("rsub3", "3 - x"),
    ("mul2", "x * 2"),
    ("mulf", "x * 2.5"),
    ("fmul", "2.5 * x"),
    ("div2", "x / 2"),
    ("divf", "x / 0.75"),
    ("addbig", "x + 1e10"),
    ("gt", "x > 2"),
    ("eqf", "x == 1.0"),
    ("sarg", "x + s"),
    ("farg", "x * f"),
    ("sargmul", "x * s"),
    ("neg", "-x"),
    ("add_true", "x + True"),
]
INT_EXPRS = [
    ("fdiv3", "x // 3"),
    ("mod5", "x % 5"),
    ("and3", "x & 3"),
    ("shl1", "x << 1"),
    ("shr2", "x >> 2"),
    ("or1", "x | 1"),
    ("xor7", "x ^ 7"),
    ("mod_s", "x % s2"),
    ("fdivneg", "x // -3"),
    ("modneg", "x % -3"),
    ("absi", "tl.abs(x)"),
]
FLOAT_EXPRS = [("fmod", "x % 1.5"), ("absf", "tl.abs(x)")]
_SIGNED_ONLY = ("neg", "mod_s", "fdivneg", "modneg")  # unsigned: negative operands are errors
# Triton's interpreter passes float arguments through as Python floats, which are weakly typed,
# so x_fp16 * f stays fp16 there; compiled Triton (and Anvil) type float arguments fp32, so the
# product is fp32. Checked against torch in float_arg_cases instead.
_INTERPRETER_ONLY_WRONG = {("farg", "float16")}


def weak_source(name: str, exprs: list[tuple[str, str]]) -> str:
    outs = ", ".join(f"{o}_ptr" for o, _ in exprs)
    body = "\n".join(f"    tl.store({o}_ptr + offs, {e}, mask=m)" for o, e in exprs)
    return (
        HEADER
        + f"""@triton.jit
def {name}(x_ptr, {outs}, s, f, s2, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
"""
        + body
        + "\n"
    )


def weak_cases() -> list[Case]:
    """Values of the weakly typed expressions, stored into float64 / int64 / bool outputs, which
    hold every result type exactly; `typed_weak_cases` asserts the result types themselves."""
    out = []
    for i, t in enumerate(NAMES):
        exprs = WEAK_EXPRS + (INT_EXPRS if is_int(t) else FLOAT_EXPRS)
        exprs = [(o, e) for o, e in exprs if (o, t) not in _INTERPRETER_ONLY_WRONG]
        if not signed(t) and is_int(t):
            exprs = [(o, e) for o, e in exprs if o not in _SIGNED_ONLY]
        name = f"weak_{t}"
        g = gen(name)
        n = SIZES[(i + 1) % len(SIZES)]
        dt = DTYPES[t]
        x = (
            rand_tensor(n + PAD, dt, g, lo=0 if not signed(t) else -100, hi=100)
            if is_int(t)
            else rand_tensor(n + PAD, dt, g, scale=4.0)
        )
        wide = [
            torch.float64
            if (not is_int(t) or o in ("mulf", "fmul", "div2", "divf", "addbig", "farg", "eqf"))
            else torch.int64
            for o, _ in exprs
        ]
        wide = [torch.bool if o in ("gt", "eqf") else w for (o, _), w in zip(exprs, wide, strict=True)]
        args = [x] + [poison(n + PAD, w) for w in wide] + [7, 1.25, 3, n]
        ref, reason = None, ""
        if t == "bfloat16":
            # Same interpreter defect: bf16 results computed on the raw bits.
            ref, reason = _weak_bf16_reference(exprs, n), "interpreter computes bf16 arithmetic on raw uint16 bits"
        out.append(
            Case(
                name,
                weak_source(name, exprs),
                name,
                args,
                ((n + BLOCK - 1) // BLOCK,),
                outputs=range(1, 1 + len(exprs)),
                meta=dict(BLOCK=BLOCK),
                reference=ref,
                reason=reason,
            )
        )
    return out


def _weak_bf16_reference(exprs: list[tuple[str, str]], n: int):
    bf = torch.bfloat16

    def ref(args: list) -> list[torch.Tensor]:
        x = args[0][:n]
        f32 = x.float()
        vals = {
            "add1": x + 1,
            "rsub3": 3 - x,
            "mul2": x * 2,
            "mulf": x * 2.5,
            "fmul": 2.5 * x,
            "div2": f32 / 2,
            "divf": f32 / 0.75,
            "addbig": (f32 + 1e10).to(bf),
            "gt": x > 2,
            "eqf": x == 1.0,
            "sarg": f32 + 7,
            "farg": f32 * 1.25,
            "sargmul": f32 * 7,
            "neg": -x,
            "add_true": x + 1,
            "fmod": torch.fmod(f32, 1.5),
            "absf": x.abs(),
        }
        outs = []
        for i, (o, _) in enumerate(exprs):
            buf = args[1 + i]
            buf[:n] = vals[o]
            outs.append(buf)
        return outs

    return ref


def typed_weak_cases() -> list[Case]:
    """The result dtype of each weakly typed expression, asserted in both compilers."""
    out = []
    for t in NAMES:
        exprs = WEAK_EXPRS + (INT_EXPRS if is_int(t) else FLOAT_EXPRS)
        exprs = [(o, e) for o, e in exprs if (o, t) not in _INTERPRETER_ONLY_WRONG]
        if not signed(t) and is_int(t):
            exprs = [(o, e) for o, e in exprs if o not in _SIGNED_ONLY]
        lines = []
        for o, e in exprs:
            ty = weak_type(t, o)
            lines.append(f"    tl.static_assert(({e}).dtype == tl.{ty}, '{o}: ' + str(({e}).dtype))")
        name = f"weaktype_{t}"
        src = (
            HEADER
            + f"""@triton.jit
def {name}(x_ptr, y_ptr, s, f, s2):
    x = tl.load(x_ptr + tl.arange(0, 16))
"""
            + "\n".join(lines)
            + "\n    tl.store(y_ptr, 1)\n"
        )
        g = gen(name)
        args = [
            rand_tensor(16, DTYPES[t], g, lo=0, hi=9) if is_int(t) else rand_tensor(16, DTYPES[t], g),
            poison(1, torch.int32),
            7,
            1.25,
            3,
        ]
        ref, reason = None, ""
        if t == "bfloat16":
            # The interpreter cannot even build a bf16 constant (InterpreterBuilder has no
            # get_bf16), so only Anvil checks the types; the kernel stores 1 if all asserts pass.
            ref, reason = _stored_one, "interpreter cannot create bf16 constants (no get_bf16)"
        out.append(Case(name, src, name, args, (1,), outputs=[1], reference=ref, reason=reason))
    return out


def _stored_one(a: list) -> list[torch.Tensor]:
    a[1][0] = 1
    return [a[1]]


def weak_type(t: str, o: str) -> str:
    float_scalar = o in ("mulf", "fmul", "divf", "addbig", "eqf", "fmod")
    if o in ("gt", "eqf"):
        return "int1"
    if o in ("sarg", "sargmul", "mod_s"):
        return promote(t, "int32", div_or_mod=o == "mod_s")
    if o == "farg":
        return promote(t, "float32")
    if o in ("neg", "absf", "absi"):
        return t
    if o == "add_true":
        return t
    div = o in ("div2", "divf", "fdiv3", "mod5", "fmod", "fdivneg", "modneg")
    c = promote(t, "float32" if float_scalar else "int32", div_or_mod=div, b_scalar=True)
    if o in ("div2", "divf"):
        return "float32" if is_int(c) else c
    return c


def float_arg_cases() -> list[Case]:
    name = "float_arg_float16"
    src = (
        HEADER
        + f"""@triton.jit
def {name}(x_ptr, y_ptr, f, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.static_assert((x * f).dtype == tl.float32)
    tl.store(y_ptr + offs, x * f, mask=offs < n)
"""
    )
    g = gen(name)
    args = [rand_tensor(64, torch.float16, g), poison(64, torch.float32), 1.1, 60]

    def ref(a: list) -> list[torch.Tensor]:
        a[1][:60] = a[0][:60].float() * torch.tensor(1.1, dtype=torch.float32)
        return [a[1]]

    reason = "the interpreter passes float arguments as weakly typed Python floats (fp16 result), not fp32"
    return [Case(name, src, name, args, (1,), outputs=[1], meta=dict(BLOCK=64), reference=ref, reason=reason)]


def invert_cases() -> list[Case]:
    out = []
    for t in [t for t in NAMES if is_int(t)]:
        name = f"invert_{t}"
        src = HEADER + f"""@triton.jit
def {name}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.static_assert((~x).dtype == x.dtype)
    tl.store(y_ptr + offs, ~x, mask=offs < n)
"""
        g = gen(name)
        n = 300
        args = [rand_tensor(n + PAD, DTYPES[t], g), poison(n + PAD, DTYPES[t]), n]
        ref, reason = None, ""
        if not signed(t):
            # Triton's interpreter builds ~x as x ^ (Python -1), which numpy 2 refuses to convert
            # to an unsigned dtype (OverflowError), so ~x on unsigned tensors cannot run there.
            def ref(a: list, n: int = n) -> list[torch.Tensor]:
                a[1][:n] = (~a[0][:n].to(torch.int64)).to(a[0].dtype)
                return [a[1]]
            reason = "interpreter: ~x on unsigned fails (numpy 2 rejects the Python -1 all-ones constant)"
        out.append(Case(name, src, name, args, (2,), outputs=[1], meta=dict(BLOCK=256), reference=ref,
                        reason=reason))
    return out


CASES = register(binop_cases() + rejected_cases() + weak_cases() + typed_weak_cases() + invert_cases()
                 + float_arg_cases())


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_arith(case: Case, diff_selected: list[str]) -> None:
    check_case(case, diff_selected)
