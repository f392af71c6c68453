"""The generated contract tests: the only place that spells the tests' Python (expected
plans as kernelgen.plan.expect evaluators, the argument sweeps, the clause flips).

Files per module: ``tests/test_<module>_<target>_contract.py`` (``test_<package>_<module>_...``
in a project with a package of its own). The target and the package are in the name because
pytest's default import mode imports a test file by its basename: with one name for every
target, ``pytest generated/`` would stop at the second target's file ("import file mismatch"),
and with one name for every project, a run over two projects' tests at their first module of a
common name. :func:`kernelgen.names.contract_test` is the one place that spells it.
"""

from __future__ import annotations

import functools
import hashlib
import json

from kernelgen import expr, names, plan, types
from kernelgen.emit.base import ModuleView, View, render, stamp
from kernelgen.emit.python import struct_zero
from kernelgen.escape import comment_text
from kernelgen.lower import LModule
from kernelgen.plan import NL_NO_INSTANCE, code


def name_map(constants: set[str]):
    """How a test's Python reads a name: constants as module globals, arguments from ``_a``."""
    return lambda n: f"C_{n}" if n in constants else f"_a[{n!r}]"


def derived_py(derived) -> str:
    """The host integers a launcher reads from struct arguments' fields: name -> (struct argument,
    field path), for kernelgen.testing.launch_args."""
    return "{" + ", ".join(f"{a.name!r}: ({a.arg.source!r}, {tuple(f.name for f in a.arg.source_fields)!r})"
                           for a in derived) + "}"


def other_args_py(args) -> str:
    """The non-integer arguments of a launcher's calls in the tests: fake pointers, zeroed
    structs, 1.0 for float scalars."""
    other = {}
    for i, a in enumerate(args):
        if a.is_pointer:
            other[a.name] = f"fake_pointer({i})"
        elif a.struct is not None:
            other[a.name] = repr(struct_zero(a.struct))
        elif not a.is_int:
            other[a.name] = "1.0"
    return "{" + ", ".join(f"{n!r}: {v}" for n, v in other.items()) + "}"


class ContractKernel(View):
    @functools.cached_property
    def _names(self):
        return name_map({name for name, _ in self.m.constants})

    def _py(self, n: expr.Node) -> str:
        return expr.to_python(n, self._names)

    @property
    def grid_py(self) -> tuple[str, ...]:
        return tuple(self._py(n) for n in self.ir.grid)

    @property
    def block_py(self) -> tuple[str, ...]:
        return tuple(self._py(n) for n in self.ir.block)

    @property
    def smem_py(self) -> str:
        return self._py(self.ir.shared_mem)

    @property
    def steps(self) -> list[dict[str, object]]:
        return [
            {"family": s.family.name, "py": self._py(s.expr), "code": s.code, "decides_when": s.decides_when,
             "comment": comment_text(s.text)}
            for s in self.ir.steps
        ]

    @property
    def device_args_py(self) -> list[str]:
        """The keyword arguments of kernelgen.plan.expect for device values and launch checks."""
        ir = self.ir
        if not (ir.uses_device or ir.launch_checks):
            return []
        out = ["device=DEVICE"]
        if ir.launch_checks:
            out.append(f"launch=_plan.LaunchChecks(max_threads={ir.max_threads}, cluster={self.cluster_py}, "
                       f"cooperative={ir.cooperative})")
        if ir.needs_occupancy:
            out.append(f"occupancy=lambda _st, _a: (({', '.join(self.block_py)}), {self.smem_py})")
        return out

    @property
    def cluster_py(self) -> str:
        """The kernel's cluster for kernelgen.plan: a tuple, a function of the arguments for a
        launch-time cluster, or None."""
        ir = self.ir
        if ir.launch_cluster is not None:
            return "lambda _st, _a: (" + ", ".join(self._py(n) for n in ir.launch_cluster) + ")"
        return repr(ir.cluster)

    @property
    def variant_py(self) -> str:
        """The variant lookup for kernelgen.plan.expect: (argument, values) or None."""
        if not self.ir.variant_on:
            return "None"
        return f"({self.ir.variant_on!r}, {[v.value for v in self.ir.variants]!r})"

    @property
    def variant_index_py(self) -> str:
        """The plan's "variant" where it launches: the index of the argument's value among the
        spec's variants (-1 without variants)."""
        if not self.ir.variant_on:
            return "-1"
        return f"{[v.value for v in self.ir.variants]!r}.index(args[{self.ir.variant_on!r}])"

    @property
    def base_case_py(self) -> str:
        """The first case (the first example): the others are written as changes to it."""
        return repr(dict(self.ir.cases[0]))

    def _from_base(self, case: tuple[tuple[str, int], ...]) -> str:
        base = self.ir.cases[0]
        if [n for n, _ in case] != [n for n, _ in base]:
            return repr(dict(case))
        changed = ", ".join(f"{n!r}: {v!r}" for (n, v), (_, b) in zip(case, base) if v != b)
        return f"{{**BASE_{self.ir.name}, {changed}}}" if changed else f"dict(BASE_{self.ir.name})"

    @property
    def cases_py(self) -> list[str]:
        return [self._from_base(c) for c in self.ir.cases]

    @property
    def flips_py(self) -> list[str]:
        texts = {"skip": self.ir.skip_texts, "requires": self.ir.requires_texts, "applies": self.ir.applies_texts}
        out = []
        for kind, i, args in self.ir.flips:
            clause = texts[kind][i] if kind in texts else ""
            out.append(f"({kind!r}, {i!r}, {clause!r}, {self._from_base(args)})")
        return out

    @property
    def pointers_nullable_py(self) -> str:
        """[(pointer argument, nullable)], for the null-pointer test."""
        return repr([(a.name, a.nullable) for a in self.ir.args if a.is_pointer])

    @property
    def device_scalar_cases(self) -> list[tuple[str, str, str]]:
        """(name, its typestr, another element type's typestr) per device scalar."""
        out = []
        for a in self.ir.args:
            if a.device:
                own = a.elem.typestr[0].typestr
                out.append((a.name, own, "<f4" if own != "<f4" else "<i4"))
        return out

    @property
    def not_launched_case_py(self) -> str | None:
        """Arguments of a case that is not launched (a skip or applies flip), or None."""
        for kind, _i, args in self.ir.flips:
            if kind in ("skip", "applies"):
                return repr(dict(args))
        return None

    @property
    def other_args_py(self) -> str:
        return other_args_py(self.ir.args)

    @property
    def derived_py(self) -> str:
        return derived_py(self.ir.derived)

    @property
    def out_of_range_py(self) -> list[str]:
        """(argument, value, what the ArgumentError says) per integer argument, just outside its
        type's range at each end: kernelgen.plan.int_argument_problem's words, which ``kernelgen
        plan`` uses, held against the built plan's refusal."""
        out = []
        for a in self.ir.args:
            if not a.is_int:
                continue
            s = a.scalar
            for v in ((2,) if s.kind == "bool" else (s.lo - 1, s.hi + 1)):
                problem = plan.int_argument_problem(s, v) or ""
                if s.kind == "bool":  # the module names the value's type ("got int"), the CLI its value
                    problem = problem.rsplit(", got", 1)[0]
                out.append(f"({a.name!r}, {v!r}, {problem!r})")
        return out

    @property
    def sizes_py(self) -> list[str]:
        """(argument, its size expression as an evaluator) per sized array argument, in the
        order of the plan's size slots: what the built plan's "sizes" is compared with."""
        return [f"({name!r}, lambda _st, _a: {self._py(n)})" for _, name, n in self.ir.sizes]

    @property
    def sized_arrays_py(self) -> list[str]:
        """(argument, typestr, element count of one typestr item, lanes of one element) per sized
        array argument (device scalars aside: a test of their own): how a fake array of the
        argument's element type is made a given number of elements long."""
        sized = {name for _, name, _ in self.ir.sizes}
        out = []
        for a in self.ir.args:
            if a.name not in sized or a.device:
                continue
            e = a.array_elem
            if e.any_dtype:
                typestr, per = "|u1", 1  # counted in bytes
            else:
                enc = next((t for t in e.typestr if t.per_item == 1), e.typestr[0])
                typestr, per = enc.typestr, enc.per_item
            out.append(f"({a.name!r}, {typestr!r}, {per}, {e.lanes})")
        return out

    @property
    def struct_args(self) -> list[tuple[str, str]]:
        """(argument, its struct's first field) per struct argument."""
        return [(a.name, a.struct.fields[0].name) for a in self.ir.args if a.struct is not None]


class ContractChain(View):
    @property
    def absent_types_py(self) -> str:
        """Per key, an element type that no member takes."""
        out = {}
        for k in self.ir.keys:
            out[k.name] = next(e.name for e in types.ELEM_TYPES if e.code not in k.member_elems)
        return repr(out)

    @property
    def key_types_py(self) -> str:
        return repr([dict(t) for t in self.ir.member_type_names])

    @property
    def members_py(self) -> str:
        return repr([(mod, k, list(args)) for (mod, k), args in zip(self.ir.members, self.ir.member_int_args)])

    @property
    def cases_py(self) -> str:
        return "[\n" + "".join(f"    {dict(c)!r},\n" for c in self.ir.cases) + "]"

    @property
    def other_args_py(self) -> str:
        return other_args_py(self.ir.args)

    @property
    def derived_py(self) -> str:
        return derived_py(self.ir.derived)


class ContractModule(ModuleView):
    @property
    def kill_switch_py(self) -> str:
        return json.dumps(self.lm.kill_switch) if self.lm.kill_switch else "None"

    @property
    def device_table_py(self) -> str | None:
        """The target's device table, when some kernel's plan reads device values or checks launches."""
        if not any(k.uses_device or k.launch_checks for k in self.lm.kernels):
            return None
        return repr(plan.target_table(self.lm.target))

    @property
    def uses_device(self) -> bool:
        return any(k.uses_device for k in self.lm.kernels if k.present)

    @property
    def switch_modules_py(self) -> str | None:
        """The modules whose kill switches the tests must see unset: this one, and the other
        modules of its chains' members (their plans decide the chains' outcomes); None when no
        launcher the tests call reads a kill switch."""
        others = sorted({mod for c in self.lm.chains for mod, _ in c.members} - {self.lm.name})
        if not (self.lm.kill_switch or others):
            return None
        return repr([self.lm.name, *others])


def plan_digest(lm: LModule) -> str:
    """A digest of what the module's plans depend on for its target (each kernel's clauses,
    variants, geometry and launch checks, each chain's members, the constants and the target's
    limits): the generated tests record it, and a built module that exposes ``PLAN_DIGEST``
    (its value when built) tells them it was built from other specs
    (:func:`kernelgen.testing.built_module`)."""
    lines = [f"module {lm.name} target {lm.target.name}", repr(plan.target_table(lm.target)),
             repr((lm.target.max_block_dims, lm.target.max_threads_per_block)), repr(tuple(lm.constants))]
    for k in lm.kernels:
        lines.append(" | ".join([
            f"kernel {k.name} present={k.present} symbol={k.symbol}",
            ";".join(f"{s.family.name}[{s.index}] {expr.to_text(s.expr)}" for s in k.steps),
            f"variants {k.variant_on} {[(v.value, v.symbol) for v in k.variants]}",
            "geometry " + ", ".join(expr.to_text(n) for n in (*k.grid, *k.block, k.shared_mem)),
            "sizes " + ", ".join(f"{name} {expr.to_text(n)}" for _, name, n in k.sizes),
            f"launch {k.cooperative} {k.programmatic_dependent} {k.cluster} {k.max_threads} "
            + (", ".join(expr.to_text(n) for n in k.launch_cluster) if k.launch_cluster else ""),
        ]))
    for c in lm.chains:
        lines.append(f"chain {c.name} {list(c.members)} {[(key.name, key.member_elems) for key in c.keys]}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def render_module(lm: LModule) -> dict[str, str]:
    ctx = {
        "m": ContractModule(lm, ContractKernel, ContractChain),
        "stamp": stamp(lm.spec),
        "no_instance_code": code(NL_NO_INSTANCE),
        "plan_digest": plan_digest(lm),
    }
    return {names.contract_test(lm.name, lm.target.name): render("test_contract.py.j2", ctx)}
