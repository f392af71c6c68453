"""Lowering: the typed model -> per-target launch plans made of ready-to-render strings.

Templates only place what this module computes. Plan semantics (the clause families and their
order, outcome codes, geometry limits, the Python evaluation of a plan) live in
:mod:`kernelgen.plan`, the search for test cases in :mod:`kernelgen.cases` and escaping in
:mod:`kernelgen.escape`; here is the lowered form (the IR) and how each step and argument is
spelled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kernelgen import expr, names, plan
from kernelgen.cases import search_cases, u64_in_expressions
from kernelgen.model import Arg, Catalog, Fallback, Kernel, Module, Target
from kernelgen.types import ELEM_TYPES, ScalarKind


@dataclass(frozen=True)
class Step:
    """One plan step (a clause) with its C++ and Python spellings."""

    step: plan.Step
    cpp: str
    py: str

    def __getattr__(self, name: str) -> object:
        return getattr(self.step, name)


@dataclass(frozen=True)
class CArg:
    """One argument as each language spells it."""

    name: str
    cpp_type: str  # typed C++ (const __nv_bfloat16*)
    c_type: str  # C ABI (const void*)
    spelling: str  # spec spelling (const bf16*)
    is_pointer: bool
    is_int: bool
    host: bool
    value_field: str  # kg::py::Value member: p, u, i or f
    scalar_code: int
    elem_code: int
    writable: bool
    contiguous: bool
    size_slot: int
    py_type: str  # for .pyi stubs

    @property
    def c_param(self) -> str:
        return f"{self.c_type} {self.name}"

    @property
    def cpp_param(self) -> str:
        return f"{self.cpp_type} {self.name}"

    @property
    def to_cpp(self) -> str:
        """Expression converting the C ABI parameter to the C++ API type."""
        if self.is_pointer:
            return f"static_cast<{self.cpp_type}>({self.name})"
        return self.name

    def from_value(self, i: int) -> str:
        """Expression reading slot ``i`` of a ``kg::py::Value`` array as the C type."""
        if self.is_pointer:
            return f"v[{i}].p" if self.c_type.startswith("const") else f"const_cast<void*>(v[{i}].p)"
        return f"static_cast<{self.c_type}>(v[{i}].{self.value_field})"


@dataclass(frozen=True)
class Variant:
    value: int
    symbol: str
    slot: str


@dataclass(frozen=True)
class LKernel:
    name: str
    spec: str  # spec path:line, for messages and stamps
    summary: str
    present: bool
    symbol: str
    variants: tuple[Variant, ...]
    variant_on: str | None
    variant_on_cpp: str | None  # the variant argument as the plan's C++ reads it
    args: tuple[CArg, ...]  # kernel args then host args
    kernel_args: tuple[CArg, ...]
    int_args: tuple[CArg, ...]
    steps: tuple[Step, ...]
    skip_texts: tuple[str, ...]
    applies_texts: tuple[str, ...]
    requires_texts: tuple[str, ...]
    grid_cpp: tuple[str, str, str]
    block_cpp: tuple[str, str, str]
    smem_cpp: str
    grid_py: tuple[str, str, str]
    block_py: tuple[str, str, str]
    smem_py: str
    u64_int_args: tuple[str, ...]
    sizes: tuple[tuple[int, str, str, str], ...]  # (slot, arg name, cpp expr, py expr)
    signature_cpp: str  # the __global__ type the spec declares
    signature_text: str  # the spec's argument list, for the static_assert message
    flips: tuple[tuple[str, int, tuple[tuple[str, int], ...]], ...]  # (kind, index, args)
    cases: tuple[tuple[tuple[str, int], ...], ...]
    doc: str
    slot: str


@dataclass(frozen=True)
class LKey:
    """A dtype key of a launcher whose members differ in pointer element types: a type axis
    of a dispatcher, or a chain argument whose element type differs between members."""

    name: str  # the axis or argument name: plan()'s keyword
    args: tuple[int, ...]  # the launcher arguments whose element type it is (indices)
    member_elems: tuple[int, ...]  # per member: the element code it takes (0: the member lacks it)

    @property
    def param(self) -> str:
        """The C/C++ parameter carrying the accepted element types as a mask of 1 << code."""
        return f"{self.name}_dtypes"


@dataclass(frozen=True)
class LChain:
    name: str
    module: str
    spec: str
    members: tuple[tuple[str, str, str], ...]  # (module, kernel, C++ qualified name)
    member_args: tuple[tuple[str, ...], ...]  # per member: names of its arguments in order
    member_int_args: tuple[tuple[str, ...], ...]
    member_sizes: tuple[tuple[tuple[int, str], ...], ...]  # per member: (its slot, union arg name)
    args: tuple[CArg, ...]
    kernel_args: tuple[CArg, ...]
    int_args: tuple[CArg, ...]
    nsizes: int
    doc: str
    cross_modules: tuple[str, ...]
    cases: tuple[tuple[tuple[str, int], ...], ...] = ()
    dispatch: bool = False  # the dispatching launcher of an instantiated kernel
    keys: tuple[LKey, ...] = ()  # empty when every member takes the same pointer types
    member_ptr_types: tuple[tuple[tuple[str, str], ...], ...] = ()  # per member: (arg, C++ pointer type)
    member_type_names: tuple[tuple[tuple[str, str], ...], ...] = ()  # per member: (key, element type name)


@dataclass(frozen=True)
class LModule:
    name: str
    spec: str
    summary: str
    target: Target
    kill_switch: str | None
    constants: tuple[tuple[str, int], ...]
    sources: tuple[str, ...]
    kernels: tuple[LKernel, ...]
    chains: tuple[LChain, ...]
    includes: tuple[str, ...] = field(default=())

    @property
    def any_present(self) -> bool:
        return any(k.present for k in self.kernels)


def _py_type(a: Arg) -> str:
    if a.is_pointer:
        return "Array"
    assert a.scalar is not None
    return a.scalar.py


def _carg(a: Arg, size_slot: int) -> CArg:
    if a.is_pointer:
        assert a.elem is not None
        return CArg(
            a.name, a.cpp_type, "const void*" if a.const else "void*", a.spelling, True, False, a.host, "p",
            0, a.elem.code, not a.const, a.contiguous, size_slot, "Array",
        )
    assert a.scalar is not None
    field_ = {ScalarKind.UNSIGNED: "u", ScalarKind.SIGNED: "i", ScalarKind.FLOAT: "f"}[a.scalar.kind]
    return CArg(
        a.name, a.scalar.cpp, a.scalar.cpp, a.spelling, False, a.is_int, a.host, field_,
        a.scalar.code, 0, False, False, -1, _py_type(a),
    )


def _name_cpp(u64: set[str], constants: set[str]) -> callable:  # type: ignore[valid-type]
    def m(n: str) -> str:
        if n in constants:
            return n
        if n in u64:
            return f"kg_i64_{n}"
        return f"int64_t{{{n}}}"
    return m


def lower_kernel(module: Module, k: Kernel, target: Target) -> LKernel:
    constants = dict(module.constants)
    u64 = set(u64_in_expressions(k))
    cpp_name = _name_cpp(u64, set(constants))

    def py_name(n: str) -> str:
        return f"C_{n}" if n in constants else f"_a[{n!r}]"

    def cpp(n: expr.Node) -> str:
        return expr.to_cpp(n, cpp_name)

    def py(n: expr.Node) -> str:
        return expr.to_python(n, py_name)

    size_slot = 0
    cargs = []
    sizes = []
    for a in k.all_args:
        slot = -1
        if a.is_pointer and a.size is not None:
            slot = size_slot
            sizes.append((slot, a.name, cpp(a.size), py(a.size)))
            size_slot += 1
        cargs.append(_carg(a, slot))
    steps = [Step(st, cpp(c.expr), py(c.expr)) for st, c in plan.steps(k)]
    present = target.name in k.targets
    slot = f"g_slot_{k.name}"
    variants = ()
    if k.variants:
        variants = tuple(Variant(v, s, f"{slot}_v{v}") for v, s in k.variants.symbols)
    kernel_cargs = tuple(c for c in cargs if not c.host)
    sig = "void (*)(" + ", ".join(c.cpp_type for c in kernel_cargs) + ")"
    sig_text = ", ".join(f"{c.spelling} {c.name}" for c in kernel_cargs)
    lk = LKernel(
        name=k.name,
        spec=f"{k.loc}",
        summary=k.summary,
        present=present,
        symbol=k.symbol,
        variants=variants,
        variant_on=k.variants.on if k.variants else None,
        variant_on_cpp=cpp_name(k.variants.on) if k.variants else None,
        args=tuple(cargs),
        kernel_args=kernel_cargs,
        int_args=tuple(c for c in cargs if c.is_int),
        steps=tuple(steps),
        skip_texts=tuple(c.text for c in k.skip_if),
        applies_texts=tuple(c.text for c in k.applies_if),
        requires_texts=tuple(c.text for c in k.requires),
        grid_cpp=tuple(cpp(n) for n in k.grid),  # type: ignore[arg-type]
        block_cpp=tuple(cpp(n) for n in k.block),  # type: ignore[arg-type]
        smem_cpp=cpp(k.shared_mem),
        grid_py=tuple(py(n) for n in k.grid),  # type: ignore[arg-type]
        block_py=tuple(py(n) for n in k.block),  # type: ignore[arg-type]
        smem_py=py(k.shared_mem),
        u64_int_args=tuple(sorted(u64)),
        sizes=tuple(sizes),
        signature_cpp=sig,
        signature_text=sig_text,
        flips=(),
        cases=(),
        doc=_doc(k.summary, cargs),
        slot=slot,
    )
    flips, cases = search_cases(module, k, target)
    return _replace(lk, flips=flips, cases=cases)


def _replace(lk: LKernel, **kw: object) -> LKernel:
    from dataclasses import replace

    return replace(lk, **kw)


def _doc(summary: str, cargs: Iterable[CArg]) -> str:
    cargs = list(cargs)
    pos = ", ".join(f"{c.name}: {c.spelling}" for c in cargs if not c.host)
    kw = ", ".join(f"{c.name}: {c.spelling}" for c in cargs if c.host)
    sig = f"({pos}{', *, ' + kw if kw else ', *'}, stream=0) -> Outcome"
    return f"{sig}\n\n{summary}"


# --------------------------------------------------------------------- chains


def lower_chain(catalog: Catalog, module: Module, fb: Fallback, target: Target) -> LChain:
    seen: dict[str, Arg] = {}
    members = []
    member_args = []
    member_int = []
    member_sizes = []
    kernels: list[tuple[Module, Kernel]] = []
    for ref in fb.members:
        owner = catalog.module(ref.module)
        assert owner is not None
        k = owner.kernel(ref.kernel)
        assert k is not None
        kernels.append((owner, k))
        members.append((ref.module, ref.kernel, names.cpp_launcher(ref.module, ref.kernel)))
        member_args.append(tuple(a.name for a in k.all_args))
        member_int.append(tuple(a.name for a in k.int_args))
        slots = []
        n = 0
        for a in k.all_args:
            if a.is_pointer and a.size is not None:
                slots.append((n, a.name))
                n += 1
        member_sizes.append(tuple(slots))
        for a in k.all_args:
            if a.name not in seen:
                seen[a.name] = a
            elif seen[a.name].host and not a.host:
                seen[a.name] = a  # a kernel argument anywhere makes it positional
    kernel_names = [n for n, a in seen.items() if not a.host]
    host_names = [n for n, a in seen.items() if a.host]
    order_pos = kernel_names + host_names
    size_of: dict[str, int] = {}
    for slots in member_sizes:
        for _, name in slots:
            size_of.setdefault(name, len(size_of))
    cargs = []
    for n in order_pos:
        a = seen[n]
        if a.is_pointer and a.const and any(not b.const for _, k in kernels for b in k.args if b.name == n):
            a = replace(a, const=False)  # written by some member: the chain's argument is writable
        if a.is_pointer and not a.contiguous and any(b.contiguous for _, k in kernels for b in k.args if b.name == n):
            a = replace(a, contiguous=True)
        c = _carg(a, size_of.get(n, -1))
        cargs.append(c)
    keys, ptr_types, type_names = _dtype_keys(fb, [k for _, k in kernels], cargs)
    if keys:
        varying = {cargs[i].name for key in keys for i in key.args}
        cargs = [replace(c, cpp_type=c.c_type) if c.name in varying else c for c in cargs]
    cross = sorted({r.module for r in fb.members if r.module != module.name})
    # Cases for the chain's tests: each member's examples and clause flips, completed with
    # the other members' first examples, so every member gets to decide at least once.
    int_names = [c.name for c in cargs if c.is_int]
    base: dict[str, int] = {}
    for _, k in kernels:
        for n, v in k.examples[0]:
            base.setdefault(n, v)
    chain_cases: list[tuple[tuple[str, int], ...]] = []
    for owner, k in kernels:
        flips, _ = search_cases(owner, k, target)
        for env in [dict(e) for e in k.examples] + [dict(f[2]) for f in flips]:
            merged = base | env
            case = tuple(sorted((n, merged[n]) for n in int_names))
            if case not in chain_cases:
                chain_cases.append(case)
    if fb.dispatch:
        by = [f"the arrays' element types ({', '.join(a for a, _ in fb.type_axes)})"] if fb.type_axes else []
        summary = (f"Dispatches {fb.name} to its instances: " + ", then ".join(r.qualname for r in fb.members)
                   + "; picks by " + " and ".join(by + ["the first whose plan launches"]) + ".")
    else:
        summary = "Tries " + ", then ".join(r.qualname for r in fb.members) + "; launches the first that applies."
    return LChain(
        name=fb.name,
        module=module.name,
        spec=str(fb.loc),
        members=tuple(members),
        member_args=tuple(member_args),
        member_int_args=tuple(member_int),
        member_sizes=tuple(member_sizes),
        args=tuple(cargs),
        kernel_args=tuple(c for c in cargs if not c.host),
        int_args=tuple(c for c in cargs if c.is_int),
        nsizes=len(size_of),
        doc=_doc(summary, cargs),
        cross_modules=tuple(cross),
        cases=tuple(chain_cases),
        dispatch=fb.dispatch,
        keys=keys,
        member_ptr_types=ptr_types,
        member_type_names=type_names,
    )


def _dtype_keys(fb: Fallback, kernels: list[Kernel], cargs: list[CArg]):
    """The launcher's dtype keys (none when all members take the same pointer types), and per
    member the C++ type of each pointer argument and the element type name of each key."""
    index = {c.name: i for i, c in enumerate(cargs)}
    elem_of = [{a.name: a.elem for a in k.args if a.elem is not None} for k in kernels]
    if fb.dispatch:
        groups = [(axis, args) for axis, args in fb.type_axes]
    else:
        groups = []
        for c in cargs:
            if c.is_pointer and len({e[c.name].name for e in elem_of if c.name in e}) > 1:
                groups.append((c.name, (c.name,)))
    keys = []
    for name, args in groups:
        elems = []
        for e in elem_of:
            present = [e[a] for a in args if a in e]
            elems.append(present[0].code if present else 0)
        keys.append(LKey(name, tuple(index[a] for a in args), tuple(elems)))
    if not keys:
        return (), (), ()
    ptr_types = tuple(
        tuple((a.name, a.cpp_type) for a in k.args if a.is_pointer) for k in kernels
    )
    type_names = tuple(
        tuple((key.name, ELEM_TYPES[key.member_elems[m] - 1].name) for key in keys if key.member_elems[m])
        for m in range(len(kernels))
    )
    return tuple(keys), ptr_types, type_names


def lower_module(catalog: Catalog, module: Module, target: Target) -> LModule:
    kernels = tuple(lower_kernel(module, k, target) for k in module.kernels)
    chains = tuple(lower_chain(catalog, module, fb, target) for fb in module.dispatches + module.fallbacks)
    includes = sorted({m for c in chains for m in c.cross_modules})
    return LModule(
        name=module.name,
        spec=module.path,
        summary=module.summary,
        target=target,
        kill_switch=module.kill_switch,
        constants=module.constants,
        sources=module.sources,
        kernels=kernels,
        chains=chains,
        includes=tuple(includes),
    )
