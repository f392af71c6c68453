"""Plans evaluated at generation time: the expected plan of a kernel for given arguments, the
search for the argument sets the generated tests use (one clause deciding alone, a sweep of
boundary values), and the catalog-wide checks built on them (``kernelgen list`` and
``generate`` both run them)."""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Iterator

from kernelgen import expr, forked, plan, pyexpr
from kernelgen.errors import ExprError, SpecError, raise_collected
from kernelgen.model import Catalog, Clause, Kernel, Module, Target
from kernelgen.plan import NL_NO_VARIANT, code


def expression_names(k: Kernel) -> set[str]:
    """Every name the kernel's expressions (and its variant choice) use."""
    nodes = [*k.grid, *k.block, k.shared_mem, *(c.expr for c in k.skip_if + k.requires + k.applies_if)]
    nodes += [a.size for a in k.all_args if a.size is not None]
    if k.launch is not None and k.launch.cluster is not None:
        nodes += list(k.launch.cluster)
    names = set().union(*(n.names() for n in nodes))
    return names | ({k.variants.on} if k.variants else set())


_U64: dict[int, tuple[Kernel, list[str]]] = {}


def u64_in_expressions(k: Kernel) -> list[str]:
    """u64 arguments that expressions use: values above 2**63 - 1 cannot be evaluated in
    64-bit signed arithmetic, so only these are converted (with an overflow error)."""
    hit = _U64.get(id(k))
    if hit is not None and hit[0] is k:
        return list(hit[1])
    used = expression_names(k)
    out = sorted(a.name for a in k.int_args if a.scalar.is_integer and a.scalar.hi > 2**63 - 1 and a.name in used)
    _U64[id(k)] = (k, out)
    return list(out)


def plain_names(k: Kernel) -> set[str]:
    """The argument names among ``expression_names`` (without device names)."""
    return {n for n in expression_names(k) if "." not in n}


def expected_plan(
    module: Module, k: Kernel, target: Target, env: dict[str, int], u64: Iterable[str] | None = None,
    launch_checks: bool = True,
) -> tuple[int, tuple, tuple, int]:
    """What the generated plan returns for ``env`` without a GPU: (code, grid, block,
    shared_mem), through :func:`kernelgen.plan.expect` with the spec's expressions as
    evaluators and the device names from the target's table. ``u64``: the kernel's
    u64_in_expressions, when the caller has them already; ``launch_checks``: False leaves out
    the checks after the geometry (launch bounds, cluster, co-residency).

    Results are kept per kernel and target: the case search, the cluster check and the Rust
    tests ask for the same argument sets."""
    u64 = u64_in_expressions(k) if u64 is None else u64
    names = tuple(sorted(env))  # the values alone, in name order, keep the key small
    key = (id(module), id(k), id(target), tuple(u64), launch_checks, names, tuple(env[n] for n in names))
    hit = _PLANS.get(key)
    if hit is not None and hit[0][0] is module and hit[0][1] is k and hit[0][2] is target:
        return hit[1]
    out = _expected_plan(module, k, target, env, u64, launch_checks)
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    _PLANS[key] = ((module, k, target), out)
    return out


_PLANS: dict[tuple, tuple[tuple[Module, Kernel, Target], tuple[int, tuple, tuple, int]]] = {}
_PLANS_MAX = 1 << 18


def _expected_plan(
    module: Module, k: Kernel, target: Target, env: dict[str, int], u64: Iterable[str], launch_checks: bool,
) -> tuple[int, tuple, tuple, int]:
    clauses, variant, geometry = _evaluators(k)
    return plan.expect(
        clauses,
        dict(env) | dict(module.constants),
        u64=u64,
        variant=variant,
        geometry=geometry,
        limits=target_limits(target),
        device=plan.target_table(target),
        launch=launch_checks_of(k, module) if launch_checks else plan.LaunchChecks(),
        occupancy=_block_smem(k) if k.needs_occupancy else None,
    )


def _block_smem(k: Kernel):
    return lambda st, e: (tuple(expr.evaluate(n, e, st) for n in k.block), expr.evaluate(k.shared_mem, e, st))


def launch_checks_of(k: Kernel, module: Module | None = None) -> plan.LaunchChecks:
    """The plan's checks after the geometry, for :func:`kernelgen.plan.expect`."""
    cluster: object = k.cluster
    if k.launch is not None and k.launch.cluster is not None:
        nodes = k.launch.cluster
        cluster = lambda st, e: tuple(expr.evaluate(n, e, st) for n in nodes)  # noqa: E731
    return plan.LaunchChecks(
        max_threads=k.launch_bounds[0] if k.launch_bounds else 0,
        cluster=cluster,  # type: ignore[arg-type]
        cooperative=bool(k.launch and k.launch.cooperative),
    )


_EVALUATORS: dict[int, tuple[Kernel, tuple]] = {}


def _evaluators(k: Kernel) -> tuple:
    """The kernel's plan as evaluators for kernelgen.plan.expect, made once per kernel (the
    test-case search asks for thousands of plans)."""
    hit = _EVALUATORS.get(id(k))
    if hit is not None and hit[0] is k:
        return hit[1]

    def evaluator(n: expr.Node):
        fn = expr.compiled(n)
        return lambda st, e: fn(e, st)

    grid, block, smem = [expr.compiled(n) for n in k.grid], [expr.compiled(n) for n in k.block], \
        expr.compiled(k.shared_mem)

    def geometry(st, e):
        return tuple(f(e, st) for f in grid), tuple(f(e, st) for f in block), smem(e, st)

    parts = (
        [(st.code, st.decides_when, evaluator(c.expr)) for st, c in plan.steps(k)],
        (k.variants.on, frozenset(v for v, _ in k.variants.symbols)) if k.variants else None,
        plan.Geometry(geometry, launch_checks_of(k)),  # with the checks after it (launch bounds, cluster, ...)
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


@functools.lru_cache(maxsize=4096)
def _candidates(v: int, lo: int, hi: int) -> tuple[int, ...]:
    raw = [v - 1, v + 1, v * 2, v // 2, v + 7, *_BOUNDARIES, -1, -(2**31)]
    # dict.fromkeys: first-seen order without a quadratic membership scan
    return tuple(dict.fromkeys(c for c in raw if lo <= c <= hi and c != v))


# Cached by identity: hashing a frozen Module hashes every kernel in it, which made each
# lookup cost the size of the module (quadratic generation time in the number of kernels).
_CASES: dict[tuple[int, int, int], tuple[tuple[Module, Kernel, Target], tuple]] = {}


def search_cases(module: Module, k: Kernel, target: Target):
    """Flips (one clause made to fail alone) and a sweep of argument sets for the plan tests
    (computed once per kernel and target: a chain asks again for its members' cases)."""
    return _per_kernel(_CASES, _search_cases, module, k, target)


def _per_kernel(cache: dict, compute, module: Module, k: Kernel, target: Target):
    """``compute(module, k, target)``, kept in ``cache`` by the three objects' identities (the
    objects are kept beside the result, so that an identity reused by another object misses)."""
    key = (id(module), id(k), id(target))
    hit = cache.get(key)
    if hit is not None and hit[0][0] is module and hit[0][1] is k and hit[0][2] is target:
        return hit[1]
    out = compute(module, k, target)
    cache[key] = ((module, k, target), out)
    return out


def variants_cover(k: Kernel) -> bool:
    """Whether the kernel's ``variants`` map every value of its argument's type (a bool's 0 and 1, a
    u8's 256 values), so that "no variant" cannot happen and has no test case."""
    if k.variants is None:
        return False
    arg = next(a for a in k.int_args if a.name == k.variants.on)
    lo, hi = arg.scalar.lo, arg.scalar.hi  # type: ignore[union-attr]
    values = {v for v, _ in k.variants.symbols}
    return lo is not None and hi is not None and hi - lo + 1 <= len(values) and all(
        v in values for v in range(lo, hi + 1))


def _search_cases(module: Module, k: Kernel, target: Target):
    base = dict(k.examples[0])
    ranges = {a.name: (a.scalar.lo, a.scalar.hi) for a in k.int_args if a.scalar is not None}
    flips: list[tuple[str, int, tuple[tuple[str, int], ...]]] = []
    clauses = plan.steps(k)
    u64 = u64_in_expressions(k)
    # Every clause passes on the first example (it launches), so an argument set that changes
    # one argument can only change the clauses that read it: those are all that need evaluating.
    constants = dict(module.constants)
    base_passes = all(_passes(o, base | constants | k_device_env(module, k, target, base)) for o in clauses)
    by_name: dict[str, list[tuple[plan.Step, Clause]]] = {}
    for o in clauses:
        for n in o[1].expr.names():
            by_name.setdefault(n, []).append(o)
    wanted: list[tuple[plan.Step, Clause] | None] = [*clauses, None] if k.variants and not variants_cover(k) \
        else list(clauses)
    for o in wanted:  # None: the variant lookup
        if o is None:
            names = [k.variants.on]  # type: ignore[union-attr]
        else:
            names = sorted(n for n in o[1].expr.names() - {c for c, _ in module.constants} if "." not in n)
        found = None

        def envs(names: list[str] = names, o=o) -> Iterator[tuple[dict[str, int], str | None]]:
            # made lazily: the search usually stops at one of the first
            for e in k.examples:
                yield dict(e), None
            # Most candidates leave the wanted clause undecided: that is checked on one
            # reused dict first, and only the others are copied and checked in full.
            prefilter = o is not None and not k.device_names
            bound = expr.name_bound(o[1].expr) if prefilter else None  # type: ignore[index]
            full = base | constants
            for name in names:
                lo, hi = ranges[name]
                for cand in _candidates(base[name], lo, hi):  # type: ignore[arg-type]
                    if bound is not None and bound[0] == name:
                        if bound[1](cand) != o[0].decides_when:  # type: ignore[index]
                            continue
                    elif prefilter:
                        full[name] = cand
                        decided = _decides(o, full)  # type: ignore[arg-type]
                        full[name] = base[name]
                        if decided is False:
                            continue
                    yield base | {name: cand}, name if base_passes else None

        for env, changed in envs():
            if _fails_alone(module, k, target, env, o, clauses, u64, changed, by_name, constants):
                found = env
                break
        if found is None and o is not None:
            # No argument set isolates the clause; one where it decides first, ahead of a later
            # clause that would decide too (skip_if [n == 0] beside applies_if [n >= 64]), still
            # tests that the plan checks it, and in its place.
            found = next((env for env, _ in envs() if _decides_first(module, k, target, env, o, clauses, u64,
                                                                      constants)), None)
        if found is None and k.instance_of is not None:
            continue  # constant in this instance (n % VEC == 0 with VEC 1): nothing to test
        if found is None:
            where = o[1].loc if o else k.variants.loc  # type: ignore[union-attr]
            text = o[1].text if o else f"variants.on {k.variants.on}"  # type: ignore[union-attr]
            why = _other_clause(module, k, target, base, envs(), o, clauses, constants) if o else ""
            raise SpecError(
                where, f"kernels.{k.name}",
                f"cannot find arguments for which only '{text}' decides the outcome{why}",
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
            pool = [*_candidates(env[name], lo, hi), rng.randint(lo, min(hi, 1 << 20))]  # type: ignore[arg-type]
            env[name] = rng.choice(pool)
        cases.append(env)
    cases += [dict(c) for c in boundary_cases(module, k, target)]
    cases += _launch_check_cases(module, k, target, base, ranges, u64)
    unique: dict[tuple[tuple[str, int], ...], None] = {}  # first-seen order
    for c in cases:
        unique.setdefault(tuple(sorted(c.items())))
    return tuple(flips), tuple(unique)


def launch_check_cases(module: Module, k: Kernel, target: Target) -> list[dict[str, int]]:
    """:func:`_launch_check_cases` around the kernel's first example (a chain's tests add its
    members')."""
    ranges = {a.name: (a.scalar.lo, a.scalar.hi) for a in k.int_args if a.scalar is not None}
    return _launch_check_cases(module, k, target, dict(k.examples[0]), ranges, u64_in_expressions(k))


LAUNCH_CHECK_CATEGORIES = (plan.E_LAUNCH_BOUNDS, plan.E_CLUSTER, plan.E_CORESIDENT)


def _launch_check_cases(module: Module, k: Kernel, target: Target, base: dict[str, int],
                        ranges: dict[str, tuple], u64: list[str]) -> list[dict[str, int]]:
    """For a kernel whose plan checks the launch (launch bounds, a launch-time cluster, a
    cooperative grid): the first argument set, changing one argument of the first example, for
    each outcome of those checks the boundary values reach (grid y not whole clusters, the
    cluster too large, ...), so that the generated tests compare them with the built plan.
    A compile-time cluster is left out: every case must launch whole clusters of it
    (:func:`check_catalog`)."""
    lc = launch_checks_of(k)
    if not (lc.max_threads or lc.cooperative or (k.launch is not None and k.launch.cluster is not None)):
        return []
    wanted = {c for c in LAUNCH_CHECK_CATEGORIES if not (c == plan.E_CLUSTER and k.cluster is not None)}
    out: dict[int, dict[str, int]] = {}
    for name in sorted(ranges):
        lo, hi = ranges[name]
        for cand in _candidates(base[name], lo, hi):  # type: ignore[arg-type]
            env = base | {name: cand}
            c = expected_plan(module, k, target, env, u64)[0]
            if c < 0 and plan.category(c) in wanted and c not in out:
                out[c] = env
    return [out[c] for c in sorted(out, reverse=True)]


_BOUNDARY_CASES: dict[tuple[int, int, int], tuple[tuple[Module, Kernel, Target], tuple]] = {}
# Transitions kept per comparison of one argument with constants (a threshold has one; a
# periodic one, n % 4 == 0, gives a multiple and a non-multiple with two), and per argument
# for the plan's outcome (device limits among them: co-residency, cluster size, grid limits).
_PER_COMPARISON = 2
_PER_ARGUMENT = 8


def boundary_cases(module: Module, k: Kernel, target: Target) -> tuple[tuple[tuple[str, int], ...], ...]:
    """Argument sets at the boundaries of the kernel's plan, each changing one argument of the
    first example: for every comparison in its expressions that reads one argument (beside
    constants and device names), and for every change of the plan's outcome along one argument
    (the limits derived from the target's table: grid limits, co-residency, cluster size, shared
    memory), the values c - 1, c and c + 1 around the value c where it changes. The boundaries
    are found exactly, by bisection between the values the search draws from, so that a clause
    or limit off by one gives another outcome in some case. Kept per kernel and target: a chain
    asks again for its members'."""
    return _per_kernel(_BOUNDARY_CASES, _boundary_cases, module, k, target)


def _boundary_cases(module: Module, k: Kernel, target: Target) -> tuple[tuple[tuple[str, int], ...], ...]:
    base = dict(k.examples[0])
    ranges = {a.name: (a.scalar.lo, a.scalar.hi) for a in k.int_args if a.scalar is not None}
    constants = dict(module.constants)
    u64 = u64_in_expressions(k)
    comparisons = _comparisons(k, set(constants))
    out: dict[tuple[tuple[str, int], ...], None] = {}  # first-seen order
    for name in sorted(ranges):
        lo, hi = ranges[name]
        if lo is None or hi is None or name not in base:
            continue
        values = sorted({base[name], *_candidates(base[name], lo, hi)})
        points: list[int] = []
        for node in comparisons.get(name, ()):
            fn = expr.compiled(node)

            def truth(v: int, fn=fn, name=name) -> bool | None:
                st = pyexpr.Status()
                try:
                    value = fn(_clause_env(module, k, target, base | {name: v}, constants), st)
                except KeyError:  # a name the search has no value for
                    return None
                return None if st.code else bool(value)

            points += _transitions(values, truth, _PER_COMPARISON)
        points += _transitions(values, lambda v, name=name: expected_plan(module, k, target, base | {name: v}, u64)[0],
                               _PER_ARGUMENT, by_pair=True)
        for t in points:
            for v in (t - 1, t, t + 1):
                if lo <= v <= hi:
                    out.setdefault(tuple(sorted((base | {name: v}).items())))
    return tuple(out)


def _comparisons(k: Kernel, constants: set[str]) -> dict[str, list[expr.Node]]:
    """The comparisons in the kernel's expressions (clauses, geometry, sizes, cluster) that read
    one argument beside constants and device names, by that argument."""
    nodes = [*(c.expr for c in k.skip_if + k.requires + k.applies_if), *k.grid, *k.block, k.shared_mem]
    nodes += [a.size for a in k.all_args if a.size is not None]
    if k.launch is not None and k.launch.cluster is not None:
        nodes += list(k.launch.cluster)
    out: dict[str, list[expr.Node]] = {}
    stack = list(nodes)
    while stack:
        n = stack.pop()
        stack.extend(n.children())
        if not isinstance(n, expr.Cmp):
            continue
        args = {x for x in n.names() if "." not in x and x not in constants}
        if len(args) == 1:
            found = out.setdefault(args.pop(), [])
            if n not in found:
                found.append(n)
    return out


def _transitions(values: list[int], fn, limit: int, by_pair: bool = False) -> list[int]:
    """Up to ``limit`` values t where ``fn(t - 1) != fn(t)``, one between each two neighbours of
    the sorted ``values`` whose results differ (found by bisection), lowest first; ``by_pair``:
    one per pair (fn(t - 1), fn(t)) of results."""
    out: list[int] = []
    seen: set[tuple] = set()
    prev, at_prev = values[0], fn(values[0])
    for v in values[1:]:
        at_v = fn(v)
        if at_v != at_prev:
            a, fa, b, fb = prev, at_prev, v, at_v
            while b - a > 1:
                mid = (a + b) // 2
                fm = fn(mid)
                if fm != fa:
                    b, fb = mid, fm
                else:
                    a, fa = mid, fm
            if not (by_pair and (fa, fb) in seen):
                seen.add((fa, fb))
                out.append(b)
                if len(out) >= limit:
                    break
        prev, at_prev = v, at_v
    return out


def _decides_first(
    module: Module, k: Kernel, target: Target, env: dict[str, int], want: tuple[plan.Step, Clause],
    clauses: list[tuple[plan.Step, Clause]], u64: list[str], constants: dict[str, int],
) -> bool:
    """``want`` decides the plan's outcome for ``env``: every clause before it passes (later
    ones may fail: the plan never reaches them)."""
    full = _clause_env(module, k, target, env, constants)
    if _decides(want, full) is not True:
        return False
    before = clauses[:clauses.index(want)]
    if not all(_passes(o, full) for o in before):
        return False
    return expected_plan(module, k, target, env, u64)[0] == want[0].code


def _other_clause(
    module: Module, k: Kernel, target: Target, base: dict[str, int], envs: Iterator[tuple[dict[str, int], str | None]],
    want: tuple[plan.Step, Clause], clauses: list[tuple[plan.Step, Clause]], constants: dict[str, int],
) -> str:
    """For the error when ``want`` never decides (alone, or first): the first searched arguments
    where its value would decide, and the other clause that fails (or holds, for skip_if) there
    too, as " (where it does, at n = 0, '...' fails too)"; "" when the search met none."""
    for env, _ in envs:
        full = _clause_env(module, k, target, env, constants)
        if _decides(want, full) is not True:
            continue
        other = next((o for o in clauses if o is not want and not _passes(o, full)), None)
        if other is None:
            continue
        changed = ", ".join(f"{n} = {v}" for n, v in env.items() if base.get(n) != v) or "the first example"
        verb = "holds" if other[0].decides_when else "fails"
        return f" (where it does, at {changed}, '{other[1].text}' {verb} too)"
    return ""


def _decides(o: tuple[plan.Step, Clause], full: dict[str, int]) -> bool | None:
    """Whether clause ``o`` decides the plan's outcome for ``full``; None when it cannot be
    evaluated there (then the plan's own evaluation error decides)."""
    st = pyexpr.Status()
    value = expr.compiled(o[1].expr)(full, st)
    return None if st.code else bool(value) == o[0].decides_when


def _passes(o: tuple[plan.Step, Clause], full: dict[str, int]) -> bool:
    """Whether clause ``o`` lets the plan go on for ``full`` as far as the search can tell."""
    return _decides(o, full) is not True


def _fails_alone(
    module: Module, k: Kernel, target: Target, env: dict[str, int], want: tuple[plan.Step, Clause] | None,
    clauses: list[tuple[plan.Step, Clause]], u64: list[str], changed: str | None = None,
    by_name: dict[str, list[tuple[plan.Step, Clause]]] | None = None, constants: dict[str, int] | None = None,
) -> bool:
    """The plan's outcome for ``env`` is decided by ``want`` (None: by the variant lookup),
    and no other clause disagrees.

    Clauses are evaluated in order and the first decides, so a later clause that cannot
    be evaluated (``num_q_heads % num_kv_heads`` once ``num_kv_heads > 0`` fails) is fine.
    ``changed``: ``env`` is the first example with only this argument changed, so only the
    clauses that read it (``by_name``) can differ from the first example, where all pass.
    The cheap conditions are tested first; the plan is computed only when they hold.
    """
    full = _clause_env(module, k, target, env, constants)
    if k.device_names:  # kernel.blocks_per_sm reads the block and shared memory: every clause may change
        changed = None
    if want is not None and _decides(want, full) is False:
        return False  # (an evaluation error may decide: the plan below tells)
    others = clauses if changed is None or by_name is None else by_name.get(changed, [])
    if not all(_passes(o, full) for o in others if o is not want):
        return False
    want_code = want[0].code if want else code(NL_NO_VARIANT)
    return expected_plan(module, k, target, env, u64)[0] == want_code



def _clause_env(module: Module, k: Kernel, target: Target, env: dict[str, int],
                constants: dict[str, int] | None = None) -> dict[str, int]:
    """What the clauses are evaluated over: the arguments, the module's constants and the device
    names' values."""
    return env | (constants if constants is not None else dict(module.constants)) | k_device_env(module, k, target, env)


def k_device_env(module: Module, k: Kernel, target: Target, env: dict[str, int]) -> dict[str, int]:
    """The device names' values for ``env`` from the target's table (for evaluating clauses alone)."""
    if not k.device_names:
        return {}
    table = plan.target_table(target)
    full = dict(env) | dict(module.constants)
    values = plan.device_env(table)
    blocks = 0
    try:
        block = [int(expr.evaluate(b, full | values)) for b in k.block]
        smem = int(expr.evaluate(k.shared_mem, full | values))
        blocks = plan.table_blocks_per_sm(table, block, smem)
    except ExprError:
        pass
    return values | {"kernel.blocks_per_sm": blocks}


def check_catalog(catalog: Catalog) -> None:
    """The checks generation makes beyond the loader's, run when a catalog is loaded so that
    ``kernelgen list`` accepts exactly the specs ``kernelgen generate`` accepts.

    For every kernel and target: the search for test cases (an error when some clause never
    decides the outcome alone), and, for a kernel with a ``cluster``, that every grid its
    examples and generated test cases launch is a whole number of clusters.
    """
    work = [(m, k, t) for m in catalog.modules for k in m.kernels for t in catalog.targets]
    # On a large catalog a child process (a fork: the same objects at the same ids) searches
    # the second half meanwhile, on another core, up to its first spec error; its results are
    # stored as if found here, and anything it did not deliver is searched here in order, so
    # errors are reported exactly as without it.
    half = len(work) // 2
    wait = None
    if half and forked.possible(sum(len(k.all_args) for _, k, _ in work)):
        def second_half() -> dict[tuple[int, int, int], tuple]:
            out = {}
            for m, k, t in work[half:]:
                try:
                    out[(id(m), id(k), id(t))] = _search_cases(m, k, t)
                except SpecError:  # searched again (and reported) here
                    pass
            return out

        wait = forked.start(second_half)
    # The first error of each module, reported together (the module's later kernels skipped).
    failed: dict[int, SpecError] = {}

    def check(m: Module, k: Kernel, t: Target) -> None:
        if id(m) in failed:
            return
        try:
            _check_kernel(m, k, t)
        except SpecError as exc:
            failed[id(m)] = exc

    try:
        for m, k, t in work[:half]:
            check(m, k, t)
    finally:
        found = wait() if wait is not None else {}
    for m, k, t in work[half:]:
        hit = found.get((id(m), id(k), id(t)))
        if hit is not None:
            _CASES[(id(m), id(k), id(t))] = ((m, k, t), hit)
        check(m, k, t)
    raise_collected(list(failed.values()))


def _check_kernel(m: Module, k: Kernel, t: Target) -> None:
    flips, cases = search_cases(m, k, t)
    if k.cluster is None or t.name not in k.targets:
        return
    for env in [dict(f[2]) for f in flips] + [dict(c) for c in cases]:
        outcome, grid, _, _ = expected_plan(m, k, t, env, launch_checks=False)
        if outcome != 0 or all(g % c == 0 for g, c in zip(grid, k.cluster)):
            continue
        shown = ", ".join(f"{n}={v}" for n, v in sorted(env.items()))
        raise SpecError(
            k.cluster_loc or k.loc, f"kernels.{k.name}.grid",
            f"the grid {list(grid)} for {shown} is not a whole number of clusters {list(k.cluster)}",
            "a cluster launch needs each grid dimension to be a multiple of the cluster's: round the grid "
            f"up, e.g. div_ceil(n, {k.cluster[0]}) * {k.cluster[0]}",
        )
