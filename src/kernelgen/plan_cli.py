"""``kernelgen plan``: what a kernel's plan, or each member of a chain, gives for given integer
arguments on each target, from the specs alone (no build, no GPU): launched with its grid,
block, shared memory and cluster, or not launched and why, or the error; with the values of
the kernel's ``let`` names. The device names take the target's table (specs/targets.yaml), as
plans do without a GPU of the target; what only a launch can check (kill switches, array
alignment, tensor-map encoding) is not evaluated.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from kernelgen import cases, expr, plan, pyexpr
from kernelgen.errors import KernelgenError, did_you_mean
from kernelgen.model import Catalog, Kernel, KernelRef, Module, Target

NOTE = ("(plans from each target's table in specs/targets.yaml; kill switches, array alignment and "
        "tensor maps are checked at launch)")


def parse_values(items: Sequence[str]) -> dict[str, int]:
    """NAME=VALUE pairs: integers (decimal, 0x.., 0b..) or true / false."""
    out: dict[str, int] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.isidentifier():
            raise KernelgenError(f"'{item}' is not NAME=VALUE (e.g. rows=256 n=4096 k=4096)")
        low = text.strip().lower()
        try:
            out[name] = {"true": 1, "false": 0}[low] if low in ("true", "false") else int(low, 0)
        except ValueError:
            raise KernelgenError(f"'{item}': the value of {name} is not an integer") from None
    return out


def find(catalog: Catalog, name: str) -> tuple[Module, str, list[KernelRef] | None]:
    """(module, what, members): a kernel (members None), or a chain or dispatcher (its members).
    ``name`` is MODULE.NAME, or NAME when one module has it."""
    found = []
    for m in catalog.modules:
        if "." in name and not name.startswith(m.name + "."):
            continue
        short = name.split(".", 1)[1] if "." in name else name
        for k in m.kernels:
            if k.name == short:
                found.append((m, "kernel", None))
        for fb in m.fallbacks:
            if fb.name == short:
                found.append((m, "chain", list(fb.members)))
        for d in m.dispatches:
            if d.name == short:
                found.append((m, "dispatcher: the arrays' element types choose", list(d.members)))
    if not found:
        known = [f"{m.name}.{x.name}" for m in catalog.modules for x in (*m.kernels, *m.fallbacks, *m.dispatches)]
        close = difflib.get_close_matches(name, known + [q.split(".", 1)[1] for q in known], n=3)
        hint = f"did you mean {', '.join(close)}?" if close else "kernelgen list shows them"
        raise KernelgenError(f"no kernel or chain '{name}' ({hint})")
    if len(found) > 1:
        raise KernelgenError(f"'{name}' names more than one kernel or chain; qualify it: "
                             + ", ".join(f"{m.name}.{name}" for m, _, _ in found))
    return found[0]


def kernel_of(catalog: Catalog, ref: KernelRef) -> Kernel:
    m = catalog.module(ref.module)
    k = next((k for k in m.kernels if k.name == ref.kernel), None) if m is not None else None
    if k is None:  # the loader checks chains' members; this would be a bug
        raise KernelgenError(f"chain member {ref.qualname} is not a kernel")
    return k


def needed(k: Kernel) -> list[str]:
    """The integer arguments the kernel's expressions use (the values a plan needs)."""
    used = cases.plain_names(k)
    return [a.name for a in k.all_args if a.is_int and a.name in used]


def describe(k: Kernel, c: int) -> str:
    """An outcome code as the launchers word it."""
    if c == plan.LAUNCHED:
        return "launched"
    cat, d = plan.category(c), plan.detail(c)
    if c > 0:
        if cat == plan.NL_EMPTY:
            return f"not launched: {k.skip_if[d].text} (empty work)"
        if cat == plan.NL_CLAUSE:
            return f"not launched: {k.applies_if[d].text} is false"
        if cat == plan.NL_EMPTY_GRID:
            return f"not launched: grid dimension {'xyz'[d]} is 0"
        text = next((t for n, (v, t) in plan.NOT_LAUNCHED.items() if v == cat), "?")
        return f"not launched: {text}"
    if cat == plan.E_REQUIRES:
        return f"error: requires {k.requires[d].text}"
    if cat == plan.E_EXPR:
        text = next((t for n, (v, t) in plan.EXPR_ERRORS.items() if v == d), "?")
        return f"error: evaluating an expression: {text}"
    text = next((t for n, (v, t) in plan.ERRORS.items() if v == cat), "?")
    return f"error: {text}"


def lets_line(m: Module, k: Kernel, t: Target, values: dict[str, int]) -> str:
    if not k.lets:
        return ""
    env = dict(values) | dict(m.constants) | plan.device_env(plan.target_table(t))
    env["kernel.blocks_per_sm"] = 0
    parts = []
    for name, tree in k.lets:
        st = pyexpr.Status()
        v = expr.evaluate(tree, env, st)
        parts.append(f"{name} = {'(error)' if st.code else v}")
    return "let: " + ", ".join(parts)


def one(m: Module, k: Kernel, t: Target, values: dict[str, int]) -> tuple[int, list[str]]:
    """The plan of kernel k on target t: its code, an outcome line, then the let values when
    launched."""
    if t.name not in k.targets:
        return plan.code(plan.NL_ABSENT), [f"absent (built for {', '.join(k.targets)})"]
    env = {n: values[n] for n in needed(k)}
    c, grid, block, smem = cases.expected_plan(m, k, t, env)
    if c != plan.LAUNCHED:
        return c, [describe(k, c)]
    line = f"launched  grid {list(grid)}  block {list(block)}  shared_mem {smem}"
    cl = k.cluster
    if k.launch is not None and k.launch.cluster is not None:
        full = env | dict(m.constants)
        cl = tuple(expr.evaluate(n, full) for n in k.launch.cluster)
    if cl is not None and tuple(cl) != (1, 1, 1):
        line += f"  cluster {list(cl)}"
    lets = lets_line(m, k, t, env)
    return c, [line] + ([lets] if lets else [])


def check_names(values: dict[str, int], kernels: Sequence[Kernel], what: str) -> None:
    """Every value names an argument, and every integer argument a plan needs has a value."""
    known = {a.name for k in kernels for a in k.all_args}
    unknown = sorted(set(values) - known)
    if unknown:
        raise KernelgenError(f"{what} has no argument '{unknown[0]}' ({did_you_mean(unknown[0], sorted(known))})")
    missing = [n for k in kernels for n in needed(k) if n not in values]
    if missing:
        raise KernelgenError(f"{what} needs a value for {', '.join(dict.fromkeys(missing))} (NAME=VALUE)")


def run(catalog: Catalog, name: str, items: Sequence[str], targets: Sequence[Target]) -> int:
    values = parse_values(items)
    m, what, members = find(catalog, name)
    short = name.split(".")[-1]
    shown = " ".join(f"{n}={v}" for n, v in values.items())
    if members is None:
        k = next(k for k in m.kernels if k.name == short)
        check_names(values, [k], f"{m.name}.{k.name}")
        print(f"{m.name}.{k.name}  {shown}")
        for t in targets:
            _, lines = one(m, k, t, values)
            print(f"  {t.name} ({t.sm_count} SMs): {lines[0]}")
            for extra in lines[1:]:
                print(f"    {extra}")
        print(NOTE)
        return 0
    kernels = [kernel_of(catalog, r) for r in members]
    check_names(values, kernels, f"{m.name}.{short}")
    print(f"{m.name}.{short} ({what})  {shown}")
    width = max(len(r.qualname) for r in members)
    for t in targets:
        print(f"  {t.name} ({t.sm_count} SMs):")
        decided = what != "chain"
        for ref, k in zip(members, kernels):
            c, lines = one(catalog.module(ref.module), k, t, values)
            mark = ""
            if not decided and c == plan.LAUNCHED:
                mark, decided = "   <- runs", True
            elif not decided and c < 0 and not plan.falls_through(c):
                mark, decided = "   <- the chain stops here", True
            print(f"    {ref.qualname:{width}}  {lines[0]}{mark}")
            for extra in lines[1:]:
                print(f"    {'':{width}}    {extra}")
        if not decided:
            print(f"    {'':{width}}  (no member launches)")
    print(NOTE)
    return 0
