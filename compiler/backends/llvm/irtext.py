"""Faster printing of an llvmlite module (the text of str(module), sooner).

llvmlite prints an instruction through several layers (a string cache, a buffer, `descr`, the
metadata suffix, a final strip), a few microseconds each; a tensor-core kernel has thousands.
`module_text(m)` is `str(m)` with the common classes (arithmetic, casts, compares, selects, GEPs,
phis, extractvalue) formatted directly, to the same text; instructions with metadata, or of
other classes, and everything outside the functions' bodies are printed by llvmlite.
tests/compiler/test_ir_text.py checks that the text is llvmlite's, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

__all__ = ["module_text", "instruction_text"]


_REF = "_StringReferenceCaching__cached_refstr"  # where llvmlite caches a value's reference


def _ref(v: ir.Value) -> str:
    """v.get_reference(), an integer constant's without llvmlite's layers."""
    if type(v) is ir.Constant and type(v.constant) is int and type(v.type) is ir.IntType:
        return str(v.constant)
    return v.get_reference()  # type: ignore[no-any-return]


def _generic(i: ir.Instruction) -> str:
    ops = ", ".join([_ref(op) for op in i.operands])
    opname = " ".join([i.opname, *i.flags]) if i.flags else i.opname
    return f"{opname} {i.type} {ops}"


def _cast(i: ir.CastInstr) -> str:
    src = i.operands[0]
    return f"{i.opname} {src.type} {_ref(src)} to {i.type}"


def _gep(i: ir.GEPInstr) -> str:
    idx = ", ".join([f"{x.type} {_ref(x)}" for x in i.indices])
    op = "getelementptr inbounds" if i.inbounds else "getelementptr"
    p = i.pointer
    return f"{op} {i.source_etype}, {p.type} {p.get_reference()}, {idx}"


def _phi(i: ir.PhiInstr) -> str:
    incs = ", ".join([f"[{_ref(v)}, {b.get_reference()}]" for v, b in i.incomings])
    return f"phi {' '.join(i.flags)} {i.type} {incs}"


def _select(i: ir.SelectInstr) -> str:
    c, a, b = i.operands
    return f"select {' '.join(i.flags)} {c.type} {_ref(c)}, {a.type} {_ref(a)}, {b.type} {_ref(b)}"


def _compare(i: ir.ICMPInstr) -> str:
    a, b = i.operands
    flags = "".join([" " + f for f in i.flags])
    return f"{i.opname}{flags} {i.op} {a.type} {_ref(a)}, {_ref(b)}"


def _extract_value(i: ir.ExtractValue) -> str:
    return f"extractvalue {i.aggregate.type} {i.aggregate.get_reference()}, {', '.join(map(str, i.indices))}"


_FORMATS: dict[type, Callable[..., str]] = {ir.Instruction: _generic, ir.CastInstr: _cast, ir.GEPInstr: _gep,
                                            ir.PhiInstr: _phi, ir.ExtractValue: _extract_value, ir.SelectInstr: _select,
                                            ir.ICMPInstr: _compare, ir.FCMPInstr: _compare}


def instruction_text(i: ir.Instruction) -> str | None:
    """`str(i)` for an instruction of the classes above without metadata, else None."""
    fmt = _FORMATS.get(type(i))
    if fmt is None or i.metadata:
        return None
    body = fmt(i)
    text = body if isinstance(i.type, ir.VoidType) else f"{i.get_reference()} = {body}"
    return text.rstrip()


def _function_text(fn: ir.Function) -> str:
    """str(fn) for a function with a body."""
    formats = _FORMATS
    for block in fn.blocks:  # the instructions' references, as llvmlite makes (and caches) them
        for i in block.instructions:
            d = i.__dict__
            if _REF not in d:
                name = i._name
                if "\\" not in name and '"' not in name:
                    d[_REF] = f'%"{name}"'
    buf: list[str] = []
    fn.descr_prototype(buf)
    buf.append("{\n")
    for block in fn.blocks:
        buf.append(f"{block._format_name()}:\n")
        for i in block.instructions:
            fmt = formats.get(type(i))
            if fmt is None or i.metadata:
                buf.append(f"  {i}\n")
                continue
            body = fmt(i)
            text = body if isinstance(i.type, ir.VoidType) else f"{i.get_reference()} = {body}"
            buf.append(f"  {text.rstrip()}\n")
    buf.append("}\n")
    return "".join(buf)


def module_text(m: ir.Module) -> str:
    """str(m), the bodies of its functions printed as above (module doc)."""
    lines = [f'; ModuleID = "{m.name}"', f'target triple = "{m.triple}"', f'target datalayout = "{m.data_layout}"', ""]
    lines += [t.get_declaration() for t in m.get_identified_types().values()]
    lines += [_function_text(v) if isinstance(v, ir.Function) and v.blocks else str(v) for v in m.globals.values()]
    lines += m._get_metadata_lines()
    return "\n".join(lines)
