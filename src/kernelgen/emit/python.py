"""The Python bindings: the only place that spells the pybind11 modules and the binding
support's tables (ArgSpec rows, how a launcher reads its Python values).

Files per module: ``python/<module>.cpp``; per target: ``python/_runtime.cpp``,
``python/__init__.py`` (the target's package: modules, compute capability) and
``include/kernelgen/types.h`` (the binding support's type tables, from the type registry).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from kernelgen import names, types
from kernelgen.emit import c
from kernelgen.emit.base import ModuleView, View, render, stamp
from kernelgen.escape import c_string
from kernelgen.lower import CArg, LChain, LKernel, LModule
from kernelgen.model import Struct, StructField, Target
from kernelgen.types import ScalarKind

_VALUE_FIELD = {ScalarKind.UNSIGNED: "u", ScalarKind.SIGNED: "i", ScalarKind.FLOAT: "f", ScalarKind.BOOL: "u"}


def doc_type(a: CArg) -> str:
    """An argument's type in a launcher's docstring: the spec's type (a chain's: the types its
    members take), ``| None`` added where a null pointer (None) is accepted."""
    return a.doc_spelling + (" | None" if a.nullable else "")


def launcher_doc(summary: str, args: tuple[CArg, ...], doc: str = "") -> str:
    """A launcher's docstring: its Python call signature (spec types), the summary, then the
    spec's longer doc when it has one."""
    pos = ", ".join(f"{a.name}: {doc_type(a)}" for a in args if not a.host)
    kw = ", ".join(f"{a.name}: {doc_type(a)}" for a in args if a.host)
    parts = [pos] if pos else []
    parts += ["*", kw] if kw else ["*"]
    sig = f"({', '.join(parts)}, stream=None) -> Outcome"
    return f"{sig}\n\n{summary}" + (f"\n\n{doc}" if doc else "")


def kernel_plan_names(k: LKernel) -> frozenset[str]:
    """The names a kernel's plan reads: its grid, block, shared memory, clauses, array sizes,
    launch-time cluster and variant choice (as kernelgen.cases.expression_names finds them in
    the spec)."""
    nodes = [*k.grid, *k.block, k.shared_mem, *(st.expr for st in k.steps), *(n for _, _, n in k.sizes)]
    nodes += list(k.launch_cluster or ())
    used = set().union(*(n.names() for n in nodes))
    return frozenset(used | ({k.variant_on} if k.variant_on else set()))


def plan_args(lm: LModule, launcher: LKernel | LChain) -> frozenset[str]:
    """The integer arguments a launcher's plan() needs: those its plan expressions use (a chain's:
    any member's), the values `kernelgen plan` asks for. A member in another module, whose
    expressions are not at hand here, needs all its integer arguments."""
    if isinstance(launcher, LKernel):
        used = kernel_plan_names(launcher)
    else:
        own = {k.name: k for k in lm.kernels}
        used = set()
        for (mod, name), ints in zip(launcher.members, launcher.member_int_args):
            used |= kernel_plan_names(own[name]) if mod == lm.name and name in own else set(ints)
    return frozenset(a.name for a in launcher.int_args if a.name in used)


def with_notes(doc: str, notes: tuple[str, ...]) -> str:
    """A kernel's longer doc followed by its launch notes (LKernel.launch_notes)."""
    return "\n\n".join(p for p in (doc, " ".join(notes)) if p)


def kernel_doc(lm: LModule, k: LKernel) -> str:
    """A kernel launcher's docstring text after the summary: that it is absent on the module's
    target (when it is), its longer doc and its launch notes."""
    absent = () if k.present else (f'Absent on {lm.target.name}: always "not launched".',)
    return with_notes(k.doc, absent + k.launch_notes)


def value_read(a: CArg, i: int) -> str:
    """Expression reading slot ``i`` of a ``kg::py::Value`` array as the C ABI's type."""
    if a.is_pointer:
        return f"v[{i}].p" if a.reads_only else f"const_cast<void*>(v[{i}].p)"
    if a.struct is not None:
        return f"*static_cast<const {c.c_type(a)}*>(v[{i}].p)"
    assert a.scalar is not None
    field = "u" if a.scalar.as_bits else _VALUE_FIELD[a.scalar.kind]  # f16/bf16: rounded bits
    return f"static_cast<{c.c_type(a)}>(v[{i}].{field})"


@dataclass
class PyArg(View):
    """An argument's row in the launcher's ArgSpec table."""

    in_plan: bool = True  # an integer argument the launcher's plan expressions use
    from_arg: int = -1  # a derived argument: its struct argument's row

    @property
    def nullable_flag(self) -> int:
        """ArgSpec::nullable: a pointer that may be null; an integer scalar the plan does not use
        (plan() may leave it out)."""
        if self.ir.is_pointer:
            return 1 if self.ir.nullable else 0
        return 1 if self.ir.is_int and not self.in_plan else 0

    @property
    def type_code(self) -> int:
        if self.ir.is_pointer:
            return self.ir.array_elem.code
        if self.ir.struct is not None:
            return [st.name for st in self.m.structs].index(self.ir.struct.name)
        return self.ir.scalar.code

    @property
    def kind(self) -> str:
        if self.ir.is_pointer:
            return "kg::py::kPointer"
        if self.ir.derived:
            return "kg::py::kDerived"
        return "kg::py::kStruct" if self.ir.struct is not None else "kg::py::kScalar"

    @property
    def from_offset(self) -> int:
        return self.ir.arg.source_offset if self.ir.derived else 0


def _launcher(lm: LModule, name: str, args: tuple[CArg, ...], int_args: tuple[CArg, ...], summary: str,
              infos: list[str], is_chain: bool, nsizes: int, chain: LChain | None = None, doc: str = "",
              in_plan: frozenset[str] = frozenset(), derived: tuple[CArg, ...] = ()) -> dict[str, object]:
    """A launcher's tables: its arguments' rows, then those of the host integers it reads from its
    struct arguments (rows plan() takes and the call fills in), then the dtype keys' masks."""
    keys = chain.keys if chain is not None else ()
    table = (*args, *derived)
    row = {a.name: i for i, a in enumerate(table)}
    key_values = "".join(f"static_cast<uint32_t>(v[{len(table) + j}].u), " for j in range(len(keys)))
    pos = [a for a in args if not a.host]
    return {
        "name": name,
        "c": c.function_names(lm.name, name),
        "args": [PyArg(a, lm, a.name in in_plan, row[a.arg.source] if a.derived else -1) for a in table],
        "value_args": "".join(f"{value_read(a, i)}, " for i, a in enumerate(args)) + key_values,
        "value_int_args": "".join(f"{value_read(a, row[a.name])}, " for a in int_args) + key_values,
        "npositional": len(pos),
        "nsizes": nsizes,
        "infos": ", ".join(infos),
        "ninfos": len(infos),
        "doc_literal": c_string(launcher_doc(summary, args, doc)),
        "is_chain": is_chain,
        "dtype_keys": [(k.name, sum(1 << a for a in k.args)) for k in keys],
        "member_types": ", ".join(str(k.member_elems[i]) for i in range(len(chain.members)) for k in keys)
        if keys else "",
    }


def launchers(lm: LModule) -> list[dict[str, object]]:
    """Every launcher of the module (kernels, then chains) as the binding's tables see it."""
    def info(mod: str, kernel: str) -> str:
        return f"{names.c_function(mod, kernel, 'info')}()"

    out = [_launcher(lm, k.name, k.args, k.int_args, k.summary, [info(lm.name, k.name)], False, len(k.sizes),
                     doc=kernel_doc(lm, k), in_plan=plan_args(lm, k), derived=k.derived)
           for k in lm.kernels]
    for ch in lm.chains:
        infos = [info(mod, kernel) for mod, kernel in ch.members] + ([info(lm.name, ch.name)] if ch.keys else [])
        out.append(_launcher(lm, ch.name, ch.args, ch.int_args, ch.summary, infos, True, ch.nsizes, ch,
                             in_plan=plan_args(lm, ch), derived=ch.derived))
    return out


def struct_tables(lm: LModule) -> list[dict[str, object]]:
    """The module's struct types as the binding's StructSpec rows: per field its name, scalar
    code, array length, offset, and its struct's index in the table (-1 for a scalar)."""
    index = {st.name: i for i, st in enumerate(lm.structs)}
    out = []
    for st in lm.structs:
        fields = [f"{{{c_string(f.name)}, {0 if f.struct else f.scalar.code}, {f.count}, {f.offset}, "
                  f"{index[f.struct.name] if f.struct else -1}}}" for f in st.fields]
        out.append({"name": st.name, "literal": c_string(st.name), "size": st.size, "align": st.align,
                    "fields": fields})
    return out


def struct_zero(st: Struct) -> dict[str, object]:
    """A value of struct ``st`` as Python passes it, every scalar zero: a mapping of its fields, a
    nested struct's a mapping of its own, an array field's a list."""
    def one(f: StructField) -> object:
        return struct_zero(f.struct) if f.struct is not None else 0

    return {f.name: [one(f) for _ in range(f.count)] if f.count else one(f) for f in st.fields}


class PyModule(ModuleView):
    @property
    def structs(self) -> list[dict[str, object]]:
        return struct_tables(self.lm)

    @property
    def doc_literal(self) -> str:
        doc = f"\n\n{self.lm.doc}" if self.lm.doc else ""
        return c_string(f"{self.lm.summary}{doc}\n\nGenerated from {self.lm.spec} for target {self.lm.target.name}.")

    @functools.cached_property
    def launchers(self) -> list[dict[str, object]]:
        return launchers(self.lm)


def render_module(lm: LModule) -> dict[str, str]:
    from kernelgen.emit.tests import plan_digest  # the digest the module's contract tests record

    ctx = {
        "m": PyModule(lm, View, View),
        "stamp": stamp(lm.spec),
        "kill_switch_literal": c_string(lm.kill_switch) if lm.kill_switch else "nullptr",
        "plan_digest": plan_digest(lm),
    }
    return {f"python/{lm.name}.cpp": render("binding.cpp.j2", ctx)}


class _TargetView:
    def __init__(self, t: Target) -> None:
        self.t = t

    def __getattr__(self, name: str) -> object:
        return getattr(self.t, name)

    @property
    def cc(self) -> str:
        return f"{self.t.compute_capability[0]}.{self.t.compute_capability[1]}"


def _enum(prefix: str, name: str) -> str:
    return f"k{prefix}_{name}"


def type_tables() -> dict[str, object]:
    """The binding support's type tables (kernelgen/types.h), from the type registry."""
    kinds = {ScalarKind.UNSIGNED: "kUnsigned", ScalarKind.SIGNED: "kSigned", ScalarKind.FLOAT: "kFloat",
             ScalarKind.BOOL: "kBool"}
    scalars = [
        {"enum": _enum("Scalar", s.name), "code": s.code,
         "row": f"{{{c_string(s.name)}, {kinds[s.kind]}, {s.bits}, {c_string(s.range_text)}, {s.mant}}}"}
        for s in types.SCALAR_TYPES
    ]
    torch_code = {t.attr: i + 1 for i, t in enumerate(types.TORCH_DTYPES)}
    torch = [
        {"enum": _enum("Torch", t.attr), "code": torch_code[t.attr], "attr": t.attr, "c10": t.c10, "bits": t.bits,
         "guard": "" if t.since <= (2, 0) else
         f"TORCH_VERSION_MAJOR > {t.since[0]} || (TORCH_VERSION_MAJOR == {t.since[0]} && "
         f"TORCH_VERSION_MINOR >= {t.since[1]})"}
        for t in types.TORCH_DTYPES
    ]

    def encodings(items: list[str]) -> str:
        return "{" + ", ".join(items) + "}"

    elems = []
    for e in types.ELEM_TYPES:
        tor = encodings([f"{{{_enum('Torch', t.dtype)}, 0, 0, {t.per_item}}}" for t in e.torch])
        dl = encodings([f"{{{d.code}, {d.bits}, {d.lanes}, {d.per_item}}}" for d in e.dlpack])
        ts = encodings([f"{{{c_string(t.typestr)}, {t.per_item}}}" for t in e.typestr])
        row = (f"{{{c_string(e.name)}, {e.bits}, {len(e.torch)}, {len(e.dlpack)}, {len(e.typestr)}, "
               f"{tor}, {dl}, {ts}, {e.lanes}, {e.align}, {1 if e.any_dtype else 0}}}")
        elems.append({"enum": _enum("Elem", e.name), "code": e.code, "row": row})
    return {
        "stamp": stamp("the type registry (kernelgen/types.py)"),
        "scalars": scalars,
        "torch": torch,
        "elems": elems,
        "max_encodings": types.MAX_ENCODINGS,
    }


def render_target(t: Target, modules: list[str]) -> dict[str, str]:
    ctx = {"t": _TargetView(t), "modules": modules, "stamp": stamp("specs/targets.yaml and the module specs")}
    return {
        "python/__init__.py": render("target_init.py.j2", ctx),
        "python/_runtime.cpp": render("runtime_module.cpp.j2", ctx),
        "include/kernelgen/types.h": render("types.h.j2", type_tables()),
    }
