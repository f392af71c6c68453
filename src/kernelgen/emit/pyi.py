"""The ``.pyi`` stubs: the only place that spells Python type annotations of the bindings.

Files per module: ``python/<module>.pyi``.
"""

from __future__ import annotations

from kernelgen.emit.base import render, stamp
from kernelgen.emit.python import kernel_doc, launcher_doc, plan_args
from kernelgen.lower import CArg, LKey, LModule
from kernelgen.model import StructField


def docstring(text: str) -> str:
    """Text safe inside a triple-quoted Python docstring: every quote and backslash escaped,
    so no run of quotes (a summary ending in one included) can close it early."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def builtin(name: str) -> str:
    """A builtin type as the stub spells it: through ``_kg_builtins``, which no name the stub
    declares (a struct, a launcher, a struct's field) can shadow."""
    return f"_kg_builtins.{name}"


def struct_annotation(name: str) -> str:
    """A struct's value: its TypedDict or any object with its fields as attributes (the stub's
    ``_kg_arg_<struct>``)."""
    return f"_kg_arg_{name}"


def annotation(a: CArg) -> str:
    if a.is_pointer:
        return "_kg_Array | None" if a.nullable else "_kg_Array"
    if a.struct is not None:
        return struct_annotation(a.struct.name)
    assert a.scalar is not None
    return builtin(a.scalar.py)


def field_annotation(f: StructField) -> str:
    """A struct field's annotation in its TypedDict: a scalar's, or a nested struct's (its
    TypedDict or any object with its fields); a sequence of those for an array."""
    one = struct_annotation(f.struct.name) if f.struct is not None else builtin(f.scalar.py)
    return f"_kg_Sequence[{one}]" if f.count else one


def _launcher(name: str, args: tuple[CArg, ...], summary: str, keys: tuple[LKey, ...], in_plan: frozenset[str],
              doc: str = "", derived: tuple[CArg, ...] = ()) -> dict[str, object]:
    pos = [a for a in args if not a.host]
    kw = [a for a in args if a.host]
    pyi = "".join(f"{a.name}: {annotation(a)}, " for a in pos)
    pyi += "*, " + "".join(f"{a.name}: {annotation(a)}, " for a in kw)
    # plan() takes the integer arguments its expressions use; the other scalars (the floats among
    # them: no plan reads one) may be left out (or None)
    ints = [f"{a.name}: {annotation(a)}" if a.name in in_plan else f"{a.name}: {annotation(a)} | None = None"
            for a in (*args, *derived) if a.scalar is not None]  # (in the binding's order: the derived ones last)
    ints += [f"{k.name}: {builtin('str')} | None = None" for k in keys]
    return {"name": name, "doc_py": docstring(launcher_doc(summary, args, doc)), "pyi_params": pyi,
            "pyi_int_params": ("*, " + ", ".join(ints)) if ints else ""}  # keyword-only; none: no bare *


class _Module:
    def __init__(self, lm: LModule) -> None:
        self.lm = lm
        self.summary_doc = docstring(lm.summary + (f"\n\n{lm.doc}" if lm.doc else ""))
        self.structs = [{"name": st.name, "cpp": st.cpp, "fields": [(f.name, field_annotation(f)) for f in st.fields]}
                        for st in lm.structs]
        self.launchers = [_launcher(k.name, k.args, k.summary, (), plan_args(lm, k), kernel_doc(lm, k), k.derived)
                          for k in lm.kernels]
        self.launchers += [_launcher(ch.name, ch.args, ch.summary, ch.keys, plan_args(lm, ch), derived=ch.derived)
                           for ch in lm.chains]


def render_module(lm: LModule) -> dict[str, str]:
    return {f"python/{lm.name}.pyi": render("stub.pyi.j2", {"m": _Module(lm), "stamp": stamp(lm.spec)})}
