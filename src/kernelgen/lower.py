"""Lowering: the typed model -> per-target launch plans made of ready-to-render strings.

Templates only place what this module computes. The C++ plan function and the Python
expectation used by the generated tests are both produced from one ordered list of
:class:`Step` objects, so the two check the same things in the same order:

1. ``skip_if`` clauses (a true one: "not launched", empty work);
2. ``requires`` clauses (a false one: error);
3. ``applies_if`` clauses (a false one: "not launched" with the clause as reason);
4. the variant lookup;
5. grid (a 0 dimension: "not launched"; over CUDA's limits: error), block (outside the
   target's limits: error) and shared memory (outside the target's opt-in limit: error).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kernelgen import expr, pyexpr
from kernelgen.errors import ExprError, SpecError
from kernelgen.model import Arg, Catalog, Clause, Fallback, Kernel, Module, Target
from kernelgen.types import ELEM_TYPES, ScalarKind

# Outcome categories, mirrored from kernelgen/abi.h.
NL_KILLED, NL_ABSENT, NL_EMPTY, NL_CLAUSE, NL_NO_VARIANT, NL_EMPTY_GRID, NL_NO_INSTANCE = 1, 2, 3, 4, 5, 6, 7
E_REQUIRES, E_EXPR, E_GRID, E_BLOCK, E_SHARED_MEM = 1, 2, 3, 4, 5
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def code(category: int, detail: int = 0, error: bool = False) -> int:
    c = (category << 16) | detail
    return -c if error else c


# The clause families in the order the plan checks them: (kind, Kernel attribute, category,
# whether a deciding clause is an error, the truth value with which a clause decides).
_FAMILIES = (
    ("skip", "skip_if", NL_EMPTY, False, True),
    ("requires", "requires", E_REQUIRES, True, False),
    ("applies", "applies_if", NL_CLAUSE, False, False),
)
_CAT_NAMES = {NL_EMPTY: "KG_NL_EMPTY", E_REQUIRES: "KG_E_REQUIRES", NL_CLAUSE: "KG_NL_CLAUSE"}


@dataclass(frozen=True)
class Clausal:
    """One clause in plan order, with what it decides."""

    kind: str
    index: int
    clause: Clause
    decides_when: bool  # the clause's value that decides the outcome
    category: int
    error: bool

    @property
    def code(self) -> int:
        return code(self.category, self.index, self.error)


def ordered_clauses(k: Kernel) -> list[Clausal]:
    """The kernel's skip_if, requires and applies_if clauses in the order the plan checks them."""
    return [
        Clausal(kind, i, c, decides_when, category, error)
        for kind, attr, category, error, decides_when in _FAMILIES
        for i, c in enumerate(getattr(k, attr))
    ]


@dataclass(frozen=True)
class Step:
    kind: str  # "skip" | "requires" | "applies"
    index: int
    text: str  # canonical clause text (the reason)
    cpp: str
    py: str
    code_cpp: str
    code: int


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
    module: str
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


def comment_text(s: str) -> str:
    """Text safe inside any comment: // and /* */ in C and C++, # in Python and CMake.

    Printable ASCII only; no backslashes (a trailing one would splice the next line into
    a // comment); no comment delimiters that could end a /* */ block or open another."""
    out = []
    for ch in s.replace("\n", " "):
        if ch == "\\":
            out.append("/")
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append(f"U+{ord(ch):04X}")
    return "".join(out).replace("*/", "* /").replace("/*", "/ *")


def c_string(s: str) -> str:
    """A C/C++ string literal holding ``s`` exactly (UTF-8, octal-escaped)."""
    out = ['"']
    for b in s.encode("utf-8"):
        ch = chr(b)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F and ch != "?":
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def expression_names(k: Kernel) -> set[str]:
    """Every name the kernel's expressions (and its variant choice) use."""
    nodes = [*k.grid, *k.block, k.shared_mem, *(c.expr for c in k.skip_if + k.requires + k.applies_if)]
    nodes += [a.size for a in k.all_args if a.size is not None]
    names = set().union(*(n.names() for n in nodes))
    return names | ({k.variants.on} if k.variants else set())


def u64_in_expressions(k: Kernel) -> list[str]:
    """u64 arguments that expressions use: values above 2**63 - 1 cannot be evaluated in
    64-bit signed arithmetic, so only these are converted (with an overflow error)."""
    used = expression_names(k)
    return sorted(a.name for a in k.int_args if a.scalar.is_integer and a.scalar.hi > 2**63 - 1 and a.name in used)


def lower_kernel(module: Module, k: Kernel, target: Target) -> LKernel:
    constants = dict(module.constants)
    u64 = set(u64_in_expressions(k))
    cpp_name = _name_cpp(u64, set(constants))

    def py_name(n: str) -> str:
        return f"C_{n}" if n in constants else n

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
    steps = [
        Step(o.kind, o.index, o.clause.text, cpp(o.clause.expr), py(o.clause.expr),
             f"{'-' if o.error else ''}KG_CODE({_CAT_NAMES[o.category]}, {o.index})", o.code)
        for o in ordered_clauses(k)
    ]
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
        module=module.name,
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
    flips, cases = _test_cases(module, k, target)
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


# --------------------------------------------------------- expected plans (Python)


def expected_plan(
    module: Module, k: Kernel, target: Target, env: dict[str, int], u64: Iterable[str] | None = None
) -> tuple[int, tuple, tuple, int]:
    """What the generated plan returns for ``env``: (code, grid, block, shared_mem).

    Mirrors the C++ plan function step for step, including where expression errors are
    checked. The generated tests carry their own copy of this logic, emitted as Python from
    the same steps; this one drives the search for test cases at generation time. ``u64``:
    the kernel's u64_in_expressions, when the caller has them already.
    """
    none = (0, 0, 0)
    st = pyexpr.Status()
    full = dict(env) | dict(module.constants)
    for name in u64_in_expressions(k) if u64 is None else u64:
        full[name] = pyexpr.from_u64(st, full[name])
    for o in ordered_clauses(k):
        holds = bool(expr.evaluate(o.clause.expr, full, st))
        if st.code:
            return code(E_EXPR, st.code, True), none, none, 0
        if holds == o.decides_when:
            return o.code, none, none, 0
    if k.variants and full[k.variants.on] not in dict(k.variants.symbols):
        return code(NL_NO_VARIANT), none, none, 0
    grid = tuple(int(expr.evaluate(n, full, st)) for n in k.grid)
    block = tuple(int(expr.evaluate(n, full, st)) for n in k.block)
    smem = int(expr.evaluate(k.shared_mem, full, st))
    if st.code:
        return code(E_EXPR, st.code, True), none, none, 0
    return geometry_code(grid, block, smem, target), grid, block, smem


def geometry_code(grid: tuple, block: tuple, smem: int, target: Target) -> int:
    return geometry_code_for(
        grid, block, smem, target.max_block_dims, target.max_threads_per_block, target.max_shared_mem_per_block_optin
    )


def geometry_code_for(
    grid: tuple, block: tuple, smem: int, max_block: tuple, max_threads: int, max_smem: int
) -> int:
    """The outcome code of computed geometry; mirrors kg::check_geometry in runtime.h."""
    for axis in range(3):
        if grid[axis] < 0:
            return code(E_GRID, axis, True)
    for axis in range(3):
        if grid[axis] == 0:
            return code(NL_EMPTY_GRID, axis)
    for axis in range(3):
        if grid[axis] > GRID_LIMITS[axis]:
            return code(E_GRID, axis, True)
    for axis in range(3):
        if not 1 <= block[axis] <= max_block[axis]:
            return code(E_BLOCK, axis, True)
    if block[0] * block[1] * block[2] > max_threads:
        return code(E_BLOCK, 3, True)
    if not 0 <= smem <= max_smem:
        return code(E_SHARED_MEM, 0, True)
    return 0


_BOUNDARIES = tuple(sorted(
    {0, 1, 2, 3, 5, 7, 17, 100, 1000, 10**6, 10**9}
    | {2**k + d for k in range(33) for d in (-1, 0, 1)}
))


def _candidates(v: int, lo: int, hi: int) -> list[int]:
    raw = [v - 1, v + 1, v * 2, v // 2, v + 7, *_BOUNDARIES, -1, -(2**31)]
    out = []
    for c in raw:
        if lo <= c <= hi and c != v and c not in out:
            out.append(c)
    return out


@functools.cache  # a chain asks again for its members' cases
def _test_cases(module: Module, k: Kernel, target: Target):
    """Flips (one clause made to fail alone) and a sweep of argument sets for the plan tests."""
    base = dict(k.examples[0])
    ranges = {a.name: (a.scalar.lo, a.scalar.hi) for a in k.int_args if a.scalar is not None}
    flips: list[tuple[str, int, tuple[tuple[str, int], ...]]] = []
    clauses = ordered_clauses(k)
    u64 = u64_in_expressions(k)
    wanted: list[Clausal | None] = [*clauses, None] if k.variants else list(clauses)  # None: the variant
    for o in wanted:
        if o is None:
            names = [k.variants.on]  # type: ignore[union-attr]
        else:
            names = sorted(o.clause.expr.names() - {c for c, _ in module.constants})
        found = None
        envs = [dict(e) for e in k.examples]
        for name in names:
            lo, hi = ranges[name]
            for cand in _candidates(base[name], lo, hi):  # type: ignore[arg-type]
                envs.append(base | {name: cand})
        for env in envs:
            if _fails_alone(module, k, target, env, o, clauses, u64):
                found = env
                break
        if found is None and k.instance_of is not None:
            continue  # constant in this instance (n % VEC == 0 with VEC 1): nothing to test
        if found is None:
            where = o.clause.loc if o else k.variants.loc  # type: ignore[union-attr]
            text = o.clause.text if o else f"variants.on {k.variants.on}"  # type: ignore[union-attr]
            raise SpecError(
                where, f"kernels.{k.name}",
                f"cannot find arguments for which only '{text}' decides the outcome",
                "if an earlier clause implies it, remove it; otherwise add an example under 'examples' "
                "where this clause alone fails (or holds, for skip_if)",
            )
        kind, index = (o.kind, o.index) if o else ("variant", 0)
        flips.append((kind, index, tuple(sorted(found.items()))))
    rng = random.Random(f"{module.name}.{k.name}.{target.name}")
    cases: list[dict[str, int]] = [dict(e) for e in k.examples]
    names = sorted(ranges)
    for _ in range(40):
        env = dict(rng.choice(k.examples))
        for name in rng.sample(names, min(len(names), rng.randint(1, 2))):
            lo, hi = ranges[name]
            pool = _candidates(env[name], lo, hi) + [rng.randint(lo, min(hi, 1 << 20))]  # type: ignore[arg-type]
            env[name] = rng.choice(pool)
        cases.append(env)
    unique = []
    for c in cases:
        t = tuple(sorted(c.items()))
        if t not in unique:
            unique.append(t)
    return tuple(flips), tuple(unique)


def _fails_alone(
    module: Module, k: Kernel, target: Target, env: dict[str, int], want: Clausal | None,
    clauses: list[Clausal], u64: list[str],
) -> bool:
    """The plan's outcome for ``env`` is decided by ``want`` (None: by the variant lookup),
    and no other clause disagrees.

    Clauses are evaluated in order and the first decides, so a later clause that cannot
    be evaluated (``num_q_heads % num_kv_heads`` once ``num_kv_heads > 0`` fails) is fine.
    """
    want_code = want.code if want else code(NL_NO_VARIANT)
    if expected_plan(module, k, target, env, u64)[0] != want_code:
        return False
    full = env | dict(module.constants)

    def passes(o: Clausal) -> bool:
        try:
            return bool(expr.evaluate(o.clause.expr, full)) != o.decides_when
        except ExprError:
            return True

    return all(passes(o) for o in clauses if o is not want)


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
        members.append((ref.module, ref.kernel, f"kernelgen::{ref.module}::{ref.kernel}"))
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
        flips, _ = _test_cases(owner, k, target)
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
