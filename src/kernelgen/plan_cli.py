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
from dataclasses import dataclass

from kernelgen import cases, expr, plan, pyexpr
from kernelgen.errors import KernelgenError, did_you_mean
from kernelgen.model import Catalog, Kernel, KernelRef, Module, Target

NOTE = ("(plans from each target's table in specs/targets.yaml; kill switches, array alignment and "
        "tensor maps are checked at launch)")


def parse_values(items: Sequence[str]) -> dict[str, list[int]]:
    """NAME=VALUE pairs: integers (decimal, 0x.., 0b..) or true / false; a comma-separated list
    of values sweeps the name over them."""
    out: dict[str, list[int]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.isidentifier():
            raise KernelgenError(f"'{item}' is not NAME=VALUE (e.g. rows=256 n=4096 k=4096, or rows=64,256,2048)")
        vals = []
        for part in text.split(","):
            low = part.strip().lower()
            try:
                vals.append({"true": 1, "false": 0}[low] if low in ("true", "false") else int(low, 0))
            except ValueError:
                raise KernelgenError(f"'{item}': '{part}' is not an integer") from None
        out[name] = vals
    return out


MAX_SWEEP = 10000


def sweep(values: dict[str, list[int]]) -> list[dict[str, int]]:
    """Every combination of the values, the last name varying fastest."""
    combos: list[dict[str, int]] = [{}]
    for name, vals in values.items():
        combos = [c | {name: v} for c in combos for v in vals]
        if len(combos) > MAX_SWEEP:
            raise KernelgenError(f"the sweep has more than {MAX_SWEEP} argument sets; give fewer values")
    return combos


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
    """An outcome code as the launchers word it (kernelgen.plan.reason), or the category's
    description for codes whose detail the launchers do not spell out."""
    text = plan.reason(k, c)
    if text:
        return text if c > 0 else f"error: {text}"
    cat, d = plan.category(c), plan.detail(c)
    if c > 0:
        return "not launched: " + next((t for v, t in plan.NOT_LAUNCHED.values() if v == cat), "?")
    if cat == plan.E_EXPR:
        return "error: evaluating an expression: " + next((t for v, t in plan.EXPR_ERRORS.values() if v == d), "?")
    return "error: " + next((t for v, t in plan.ERRORS.values() if v == cat), "?")


@dataclass(frozen=True)
class Outcome:
    code: int
    text: str  # "launched", or the reason
    grid: tuple = ()
    block: tuple = ()
    smem: int = 0
    cluster: tuple | None = None
    lets: tuple[tuple[str, object], ...] = ()

    def line(self) -> str:
        if self.code != plan.LAUNCHED:
            return self.text
        out = f"launched  grid {list(self.grid)}  block {list(self.block)}  shared_mem {self.smem}"
        return out + (f"  cluster {list(self.cluster)}" if self.cluster else "")


def one(m: Module, k: Kernel, t: Target, values: dict[str, int]) -> Outcome:
    """The plan of kernel k on target t for these values."""
    if t.name not in k.targets:
        return Outcome(plan.code(plan.NL_ABSENT), f"absent (built for {', '.join(k.targets)})")
    env = {n: values[n] for n in needed(k)}
    c, grid, block, smem = cases.expected_plan(m, k, t, env)
    if c != plan.LAUNCHED:
        return Outcome(c, describe(k, c))
    cl = cases.launch_checks_of(k, m).cluster
    if callable(cl):  # a launch-time cluster: the plan's own evaluator
        cl = cl(pyexpr.Status(), env | dict(m.constants))
    cl = tuple(cl) if cl is not None and tuple(cl) != (1, 1, 1) else None
    return Outcome(c, "launched", tuple(grid), tuple(block), smem, cl, let_values(m, k, t, env))


def let_values(m: Module, k: Kernel, t: Target, values: dict[str, int]) -> tuple[tuple[str, object], ...]:
    env = dict(values) | dict(m.constants) | plan.device_env(plan.target_table(t))
    env["kernel.blocks_per_sm"] = 0
    out = []
    for name, tree in k.lets:
        st = pyexpr.Status()
        v = expr.evaluate(tree, env, st)
        out.append((name, "(error)" if st.code else v))
    return tuple(out)


def check_names(values: dict[str, list[int]], kernels: Sequence[Kernel], what: str) -> None:
    """Every value names an argument, and every integer argument a plan needs has a value."""
    known = {a.name for k in kernels for a in k.all_args}
    unknown = sorted(set(values) - known)
    if unknown:
        raise KernelgenError(f"{what} has no argument '{unknown[0]}' ({did_you_mean(unknown[0], sorted(known))})")
    missing = [n for k in kernels for n in needed(k) if n not in values]
    if missing:
        raise KernelgenError(f"{what} needs a value for {', '.join(dict.fromkeys(missing))} (NAME=VALUE)")


def chain_choice(outcomes: Sequence[Outcome]) -> int | None:
    """The member a chain runs (index), or None; a member's error that does not fall through
    stops the chain (its index, as a negative number minus one)."""
    for i, o in enumerate(outcomes):
        if o.code == plan.LAUNCHED:
            return i
        if o.code < 0 and not plan.falls_through(o.code):
            return -i - 1
    return None


def run(catalog: Catalog, name: str, items: Sequence[str], targets: Sequence[Target]) -> int:
    values = parse_values(items)
    m, what, members = find(catalog, name)
    short = name.split(".")[-1]
    if members is None:
        refs = [KernelRef(m.name, short, m.loc)]
        kernels = [next(k for k in m.kernels if k.name == short)]
    else:
        refs, kernels = members, [kernel_of(catalog, r) for r in members]
    title = f"{m.name}.{short}" + (f" ({what})" if members is not None else "")
    check_names(values, kernels, title)
    combos = sweep(values)
    if len(combos) > 1:
        return table(catalog, title, refs, kernels, combos, targets, chain=what == "chain")
    values1 = combos[0]
    print(f"{title}  {' '.join(f'{n}={v}' for n, v in values1.items())}")
    width = max(len(r.qualname) for r in refs)
    for t in targets:
        outs = [one(catalog.module(r.module), k, t, values1) for r, k in zip(refs, kernels)]
        if members is None:
            print(f"  {t.name} ({t.sm_count} SMs): {outs[0].line()}")
            if outs[0].lets:
                print("    let: " + ", ".join(f"{n} = {v}" for n, v in outs[0].lets))
            continue
        print(f"  {t.name} ({t.sm_count} SMs):")
        pick = chain_choice(outs) if what == "chain" else None
        for i, (r, o) in enumerate(zip(refs, outs)):
            mark = "   <- runs" if pick == i else "   <- the chain stops here" if pick == -i - 1 else ""
            print(f"    {r.qualname:{width}}  {o.line()}{mark}")
            if o.lets:
                print(f"    {'':{width}}    let: " + ", ".join(f"{n} = {v}" for n, v in o.lets))
        if what == "chain" and pick is None:
            print(f"    {'':{width}}  (no member launches)")
    print(NOTE)
    return 0


def table(catalog: Catalog, title: str, refs: Sequence[KernelRef], kernels: Sequence[Kernel],
          combos: Sequence[dict[str, int]], targets: Sequence[Target], chain: bool) -> int:
    """A sweep: one markdown table per target, a row per argument set: the kernel's outcome (for
    a chain or dispatcher: the member that runs, or each member's), grid, block, shared memory,
    cluster and let values."""
    names = list(combos[0])
    for t in targets:
        print(f"{title} on {t.name} ({t.sm_count} SMs)")
        single = len(refs) == 1
        lets = [n for n, _ in kernels[0].lets] if single else []
        head = names + (["outcome"] if single else ["runs"] if chain else [r.qualname for r in refs])
        head += ["grid", "block", "shared_mem", "cluster"] + lets if single or chain else []
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
        for values in combos:
            outs = [one(catalog.module(r.module), k, t, values) for r, k in zip(refs, kernels)]
            cells = [str(values[n]) for n in names]
            if single or chain:
                pick = 0 if single else chain_choice(outs)
                o = outs[pick] if pick is not None and pick >= 0 else None
                if single:
                    cells.append("launched" if o.code == plan.LAUNCHED else o.text)
                elif pick is None:
                    cells.append("(none)")
                else:
                    who = refs[pick if pick >= 0 else -pick - 1].qualname
                    cells.append(who if pick >= 0 else f"{who}: {outs[-pick - 1].text}")
                launched = o is not None and o.code == plan.LAUNCHED
                cells += [str(list(o.grid)), str(list(o.block)), str(o.smem)] if launched else ["", "", ""]
                cells.append(str(list(o.cluster)) if launched and o.cluster else "")
                cells += [str(dict(o.lets).get(n, "")) if launched else "" for n in lets]
            else:
                cells += ["launched" if o.code == plan.LAUNCHED else o.text for o in outs]
            print("| " + " | ".join(cells) + " |")
        print()
    print(NOTE)
    return 0
