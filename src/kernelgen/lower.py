"""Lowering: the typed model -> per-target launch plans made of ready-to-render strings.

Templates only place what this module computes. Plan semantics (the clause families and their
order, outcome codes, geometry limits, the Python evaluation of a plan) live in
:mod:`kernelgen.plan`; here each step gets its C++ and Python spellings.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from kernelgen import expr, names, plan
from kernelgen.errors import ExprError, SpecError
from kernelgen.model import Arg, Catalog, Clause, Fallback, Kernel, Module, Target
from kernelgen.plan import NL_NO_VARIANT, code
from kernelgen.types import ScalarKind


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
    """What the generated plan returns for ``env``: (code, grid, block, shared_mem), through
    :func:`kernelgen.plan.expect` with the spec's expressions as evaluators. ``u64``: the
    kernel's u64_in_expressions, when the caller has them already."""
    clauses, variant, geometry = _evaluators(k)
    return plan.expect(
        clauses,
        dict(env) | dict(module.constants),
        u64=u64_in_expressions(k) if u64 is None else u64,
        variant=variant,
        geometry=geometry,
        limits=target_limits(target),
    )


_EVALUATORS: dict[int, tuple[Kernel, tuple]] = {}


def _evaluators(k: Kernel) -> tuple:
    """The kernel's plan as evaluators for kernelgen.plan.expect, made once per kernel (the
    test-case search asks for thousands of plans)."""
    hit = _EVALUATORS.get(id(k))
    if hit is not None and hit[0] is k:
        return hit[1]

    def evaluator(n: expr.Node):
        return lambda st, e: expr.evaluate(n, e, st)

    def geometry(st, e):
        return (tuple(expr.evaluate(n, e, st) for n in k.grid), tuple(expr.evaluate(n, e, st) for n in k.block),
                expr.evaluate(k.shared_mem, e, st))

    parts = (
        [(st.code, st.decides_when, evaluator(c.expr)) for st, c in plan.steps(k)],
        (k.variants.on, frozenset(v for v, _ in k.variants.symbols)) if k.variants else None,
        geometry,
    )
    _EVALUATORS[id(k)] = (k, parts)
    return parts


def target_limits(target: Target) -> tuple[tuple[int, int, int], int, int]:
    """(max block dims, max threads per block, max shared memory): what geometry is checked against."""
    return target.max_block_dims, target.max_threads_per_block, target.max_shared_mem_per_block_optin


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
    clauses = plan.steps(k)
    u64 = u64_in_expressions(k)
    wanted: list[tuple[plan.Step, Clause] | None] = [*clauses, None] if k.variants else list(clauses)
    for o in wanted:  # None: the variant lookup
        if o is None:
            names = [k.variants.on]  # type: ignore[union-attr]
        else:
            names = sorted(o[1].expr.names() - {c for c, _ in module.constants})
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
        if found is None:
            where = o[1].loc if o else k.variants.loc  # type: ignore[union-attr]
            text = o[1].text if o else f"variants.on {k.variants.on}"  # type: ignore[union-attr]
            raise SpecError(
                where, f"kernels.{k.name}",
                f"cannot find arguments for which only '{text}' decides the outcome",
                "if an earlier clause implies it, remove it; otherwise add an example under 'examples' "
                "where this clause alone fails (or holds, for skip_if)",
            )
        kind, index = (o[0].family.name, o[0].index) if o else ("variant", 0)
        flips.append((kind, index, tuple(sorted(found.items()))))
    rng = random.Random(f"{module.name}.{k.name}")  # the same cases on every target
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
    module: Module, k: Kernel, target: Target, env: dict[str, int], want: tuple[plan.Step, Clause] | None,
    clauses: list[tuple[plan.Step, Clause]], u64: list[str],
) -> bool:
    """The plan's outcome for ``env`` is decided by ``want`` (None: by the variant lookup),
    and no other clause disagrees.

    Clauses are evaluated in order and the first decides, so a later clause that cannot
    be evaluated (``num_q_heads % num_kv_heads`` once ``num_kv_heads > 0`` fails) is fine.
    """
    want_code = want[0].code if want else code(NL_NO_VARIANT)
    if expected_plan(module, k, target, env, u64)[0] != want_code:
        return False
    full = env | dict(module.constants)

    def passes(o: tuple[plan.Step, Clause]) -> bool:
        try:
            return bool(expr.evaluate(o[1].expr, full)) != o[0].decides_when
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
        c = _carg(a, size_of.get(n, -1))
        cargs.append(c)
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
    )


def lower_module(catalog: Catalog, module: Module, target: Target) -> LModule:
    kernels = tuple(lower_kernel(module, k, target) for k in module.kernels)
    chains = tuple(lower_chain(catalog, module, fb, target) for fb in module.fallbacks)
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


def check_catalog(catalog: Catalog) -> None:
    """The checks generation makes beyond the loader's, run when a catalog is loaded so that
    ``kernelgen list`` accepts exactly the specs ``kernelgen generate`` accepts.

    For every kernel and target: the search for test cases (an error when some clause never
    decides the outcome alone), and, for a kernel with a ``cluster``, that every grid its
    examples and generated test cases launch is a whole number of clusters.
    """
    for m in catalog.modules:
        for k in m.kernels:
            for t in catalog.targets:
                flips, cases = _test_cases(m, k, t)
                if k.cluster is None or t.name not in k.targets:
                    continue
                for env in [dict(f[2]) for f in flips] + [dict(c) for c in cases]:
                    outcome, grid, _, _ = expected_plan(m, k, t, env)
                    if outcome != 0 or all(g % c == 0 for g, c in zip(grid, k.cluster)):
                        continue
                    shown = ", ".join(f"{n}={v}" for n, v in sorted(env.items()))
                    raise SpecError(
                        k.cluster_loc or k.loc, f"kernels.{k.name}.grid",
                        f"the grid {list(grid)} for {shown} is not a whole number of clusters {list(k.cluster)}",
                        "a cluster launch needs each grid dimension to be a multiple of the cluster's: round the grid "
                        f"up, e.g. div_ceil(n, {k.cluster[0]}) * {k.cluster[0]}",
                    )
