"""``kernelgen plan``: what a kernel's plan, or each member of a chain, gives for given integer
arguments on each target, from the specs alone (no build, no GPU): launched with its grid,
block, shared memory and cluster, or not launched and why, or the error; with the values of
the kernel's ``let`` names and its arrays' sizes (as ``plan()["sizes"]``: a negative count has
none; one that cannot be computed says the error a call raises). Float arguments are checked
and left out: no plan reads them. The device names take the target's table
(specs/targets.yaml), as plans do without a GPU of the target; what only a launch can check
(kill switches, array alignment, tensor-map encoding) is not evaluated.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kernelgen import cases, expr, plan, pyexpr
from kernelgen.errors import KernelgenError, did_you_mean
from kernelgen.loader import array_sizes
from kernelgen.model import Catalog, Fallback, Kernel, KernelRef, Module, Target
from kernelgen.types import ELEM_TYPES, ScalarType

ELEM_NAMES = [e.name for e in ELEM_TYPES]

NOTE = ("(plans from each target's table in specs/targets.yaml; kill switches, array alignment and "
        "tensor maps are checked at launch)")


def parse_values(items: Sequence[str]) -> dict[str, list[str]]:
    """NAME=VALUE pairs as written, a comma-separated list of values sweeping the name over
    them; :func:`convert` reads the values by the arguments' types. A name given twice is
    refused, as Python refuses a keyword given twice."""
    out: dict[str, list[str]] = {}
    given: dict[str, str] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not all(part.isidentifier() for part in name.split(".")):
            raise KernelgenError(f"'{item}' is not NAME=VALUE (e.g. rows=256 n=4096 k=4096, or rows=64,256,2048)")
        if name in out:
            raise KernelgenError(f"got multiple values for argument '{name}' ({given[name]} and {item}); to sweep "
                                 f"it, give one list ({name}=A,B)")
        given[name] = item
        out[name] = [part.strip() for part in text.split(",")]
    return out


# The integers the command line takes: decimal in ASCII digits, as the specs write them
# (kernelgen.yamlio): an optional '-', no '+', '_' or leading zeros.
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)")
# The real numbers a float argument takes, as the specs write them (kernelgen.yamlio): an integer,
# or digits on each side of a decimal point and an exponent only with its sign.
_REAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+([eE][-+][0-9]+)?)?")
# What a bool argument takes besides 0 and 1: the specs' spellings.
_BOOLS = {"true": 1, "false": 0}
SPELLING = "write integers in decimal, as the specs do (e.g. 4096 or -1; no '+', 0x, '_' or leading zeros)"
REAL_SPELLING = "write numbers in decimal, as the specs do (e.g. 2, -0.5 or 1.0e-3)"
ASCII_DIGITS = "write the digits 0-9 (ASCII), as the specs do"


def _integer(text: str) -> int | None:
    return int(text) if _DECIMAL.fullmatch(text) else None


def float_args(kernels: Sequence[Kernel]) -> list[str]:
    """The kernels' float scalar arguments (f16, bf16, f32, f64), in order: no plan reads them, as
    float scalars are no names in expressions (grid, block, clauses, sizes, lets)."""
    return list(dict.fromkeys(a.name for k in kernels for a in k.all_args
                              if a.scalar is not None and not a.scalar.is_integer))


def _real_problem(scalar: ScalarType, text: str) -> str | None:
    """Why ``text`` is no value of float type ``scalar`` as a launcher takes it (a number in the
    specs' decimal spelling whose magnitude does not round beyond the type's largest finite
    value), or None."""
    if not _REAL.fullmatch(text):
        return f"expected a number ({scalar.name}), got {text!r}; {REAL_SPELLING}"
    if scalar.rounds_to_inf(float(text)):
        return f"{text} is out of range for {scalar.name} (finite values up to {scalar.largest:.8g} in magnitude)"
    return None


def convert(raw: dict[str, list[str]], kernels: Sequence[Kernel], keys: dict[str, list[str | None]],
            what: str, axis_of: Mapping[str, tuple[str, str | None]] | None = None) -> dict[str, list[int | str]]:
    """The values of :func:`parse_values` as the Python module's plan() takes them: integer
    arguments range-checked by their types (with its ArgumentError's words), dtype keys as
    element type names; float arguments checked as launchers check them and left out (no plan
    reads them: :func:`float_args`); a pointer or struct argument, or an unknown name, refused.
    ``axis_of``: per array whose element type a type axis chooses, (the axis, the dispatcher to
    plan instead, None when ``what`` is that dispatcher), for the hint of an array given a type."""
    args = {}
    fields = {}  # a struct field's path (s.rows): the host argument read from it
    for k in kernels:
        for a in k.all_args:
            args.setdefault(a.name, a)
            if a.derived:
                fields.setdefault(a.source_text, a.name)
    ints = sorted({n for n, a in args.items() if a.is_int} | set(keys))
    floats = float_args(kernels)
    out: dict[str, list[int | str]] = {}
    for name, texts in raw.items():
        if "." in name:
            if name not in fields:
                raise KernelgenError(f"{what} reads no field '{name}'" + (
                    f" (its fields: {', '.join(sorted(fields))})" if fields else ""))
            name = fields[name]
            if name in raw:
                raise KernelgenError(f"got multiple values for argument '{name}' (and its field's path)")
        if name in keys:
            for text in texts:
                if text not in ELEM_NAMES:
                    example = next((e for e in keys[name] if e), "f32")
                    raise KernelgenError(f"plan of {what}(): {name} must name an element type, such as '{example}'; "
                                         f"got '{text}'")
            out[name] = list(texts)
            continue
        a = args.get(name)
        if a is None:
            raise KernelgenError(f"{what} has no argument '{name}' ({did_you_mean(name, ints)})")
        if name in floats:  # checked, then left out
            for text in texts:
                problem = _real_problem(a.scalar, text)  # type: ignore[arg-type]
                if problem:
                    raise KernelgenError(f"{what}: argument '{name}': {problem}")
            continue
        if not a.is_int:
            kind = "pointer" if a.is_pointer else "struct" if a.is_struct else a.scalar.name  # type: ignore[union-attr]
            hint = ""
            if a.is_pointer and name in (axis_of or {}):
                axis, dispatcher = (axis_of or {})[name]
                example = texts[0] if texts and texts[0] in ELEM_NAMES else "bf16"
                hint = (f" (the axis {axis} chooses its element type: write {axis}={example})" if dispatcher is None
                        else f" (its element type is this instance's; to choose it, plan the dispatcher: "
                             f"kernelgen plan {dispatcher} {axis}={example} ...)")
            raise KernelgenError(f"plan of {what}() takes scalar arguments only; got {kind} '{name}'{hint}")
        scalar = a.scalar
        assert scalar is not None
        vals: list[int | str] = []
        for text in texts:
            v = _BOOLS.get(text) if scalar.kind == "bool" else None
            if v is None:
                v = _integer(text)
            if v is None:
                got = "float" if text.isascii() and _is_float(text) and "_" not in text \
                    and not re.fullmatch(r"[-+]?[0-9]+", text) else repr(text)
                expected = "a bool (true, false, 0 or 1)" if scalar.kind == "bool" else f"an integer ({scalar.name})"
                hint = (f"; {ASCII_DIGITS}" if not text.isascii() and _is_number(text)
                        else f"; {SPELLING}" if _is_number(text) else "")
                raise KernelgenError(f"{what}: argument '{name}': expected {expected}, got {got}{hint}")
            problem = plan.int_argument_problem(scalar, v)
            if problem:
                raise KernelgenError(f"{what}: argument '{name}': {problem}")
            vals.append(v)
        out[name] = vals
    return out


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _is_number(text: str) -> bool:
    """Whether Python reads ``text`` as a number in some spelling (0x10, 1_000, +5, 007)."""
    if _is_float(text):
        return True
    try:
        int(text, 0)
        return True
    except ValueError:
        return bool(re.fullmatch(r"[-+]?[0-9][0-9_]*", text))


MAX_SWEEP = 10000


def sweep(values: dict[str, list[int | str]]) -> list[dict[str, int | str]]:
    """Every combination of the values, the last name varying fastest."""
    combos: list[dict[str, int | str]] = [{}]
    for name, vals in values.items():
        combos = [c | {name: v} for c in combos for v in vals]
        if len(combos) > MAX_SWEEP:
            raise KernelgenError(f"the sweep has more than {MAX_SWEEP} argument sets; give fewer values")
    return combos


def find(catalog: Catalog, name: str) -> tuple[Module, str, list[KernelRef] | None]:
    """(module, what, members): a kernel (members None), or a chain or dispatcher (its members).
    ``name`` is MODULE.NAME, or NAME when one module has it."""
    m, what, members, _ = find_chain(catalog, name)
    return m, what, members


def find_chain(catalog: Catalog, name: str) -> tuple[Module, str, list[KernelRef] | None, Fallback | None]:
    """:func:`find`, and the chain or dispatcher itself (None for a kernel)."""
    found = []
    for m in catalog.modules:
        if "." in name and not name.startswith(m.name + "."):
            continue
        short = name.split(".", 1)[1] if "." in name else name
        for k in m.kernels:
            if k.name == short:
                found.append((m, "kernel", None, None))
        for fb in m.fallbacks:
            if fb.name == short:
                found.append((m, "chain", list(fb.members), fb))
        for d in m.dispatches:
            if d.name == short:
                found.append((m, "dispatcher: the arrays' element types choose", list(d.members), d))
    if not found:
        known = [f"{m.name}.{x.name}" for m in catalog.modules for x in (*m.kernels, *m.fallbacks, *m.dispatches)]
        close = difflib.get_close_matches(name, known + [q.split(".", 1)[1] for q in known], n=3)
        hint = f"did you mean {', '.join(close)}?" if close else "kernelgen list shows them"
        raise KernelgenError(f"no kernel or chain '{name}' ({hint})")
    if len(found) > 1:
        raise KernelgenError(f"'{name}' names more than one kernel or chain; qualify it: "
                             + ", ".join(f"{m.name}.{name}" for m, *_ in found))
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


def dtype_keys(chain: Fallback | None, kernels: Sequence[Kernel]) -> dict[str, list[str | None]]:
    """A chain's or dispatcher's dtype keys (plan()'s keywords naming an element type, as
    kernelgen.lower's _dtype_keys finds them): per key, each member's element type (None: the
    member lacks it)."""
    if chain is None:
        return {}
    elem_of = [{a.name: a.elem.name for a in k.args if a.elem is not None} for k in kernels]
    if chain.dispatch:
        groups = [(axis, tuple(args)) for axis, args in chain.type_axes]
    else:
        seen = list(dict.fromkeys(n for e in elem_of for n in e))
        groups = [(n, (n,)) for n in seen if len({e[n] for e in elem_of if n in e}) > 1]
    return {name: [next((e[a] for a in args if a in e), None) for e in elem_of] for name, args in groups}


def type_axis_of(m: Module, chain: Fallback | None, kernels: Sequence[Kernel]) -> dict[str, tuple[str, str | None]]:
    """Per array whose element type a type axis chooses: (the axis, the dispatcher to plan for
    another element type; None when ``chain`` is that dispatcher)."""
    if chain is not None:
        return {arg: (axis, None) for axis, args in chain.type_axes for arg in args} if chain.dispatch else {}
    k = kernels[0]
    d = next((d for d in m.dispatches if d.name == k.instance_of), None)
    if d is None:
        return {}
    return {arg: (axis, f"{m.name}.{d.name}") for axis, args in d.type_axes for arg in args}


def describe(k: Kernel, c: int, t: Target | None = None, smem: int | None = None, grid: tuple | None = None,
             block: tuple | None = None, expression: str | None = None) -> str:
    """An outcome code as the Python module's reason words it (kernelgen.plan.describe, the
    text of kg_rt_describe), "error: " before an error's; with what the plan computed (the
    shared memory's bytes, a negative dimension's value, the expression that failed)."""
    text = plan.describe(k, c, t.name if t else "", None, shared_mem=smem,
                         max_shared_mem=t.max_shared_mem_per_block_optin if t else None, grid=grid, block=block,
                         expression=expression)
    return text if c >= 0 else f"error: {text}"


@dataclass(frozen=True)
class Outcome:
    code: int
    text: str  # "launched", or the reason
    grid: tuple = ()
    block: tuple = ()
    smem: int = 0
    cluster: tuple | None = None
    lets: tuple[tuple[str, object], ...] = ()
    # the arrays' element counts (those with a size, not negative), or the error of the one that fails
    sizes: tuple[tuple[str, int | str], ...] = ()

    def line(self) -> str:
        if self.code != plan.LAUNCHED:
            return self.text
        out = f"launched  grid {list(self.grid)}  block {list(self.block)}  shared_mem {self.smem}"
        return out + (f"  cluster {list(self.cluster)}" if self.cluster else "")


def one(m: Module, k: Kernel, t: Target, values: dict[str, int]) -> Outcome:
    """The plan of kernel k on target t for these values."""
    if t.name not in k.targets:
        return Outcome(plan.code(plan.NL_ABSENT), f"not launched: absent on target {t.name} (built for "
                                                  f"{', '.join(k.targets)})")
    env = {n: values[n] for n in needed(k)}
    c, grid, block, smem = cases.expected_plan(m, k, t, env)
    if c != plan.LAUNCHED:
        cat = plan.category(c)
        computed = c < 0 and cat in (plan.E_GRID, plan.E_BLOCK, plan.E_SHARED_MEM)
        failed = plan.failed_expression(k, c, env | dict(m.constants), plan.target_table(t))
        return Outcome(c, describe(k, c, t, smem if computed and cat == plan.E_SHARED_MEM else None,
                                   grid if computed else None, block if computed else None, failed))
    counts, failed = array_sizes(k, values | dict(m.constants))
    # as plan()'s "sizes" (negative counts have none); a size that cannot be computed, which plan()
    # gives as None, says the error a call then raises (the plan itself launches)
    sizes: list[tuple[str, int | str]] = [(n, v) for n, v in counts.items() if v >= 0]
    if failed is not None:
        name, detail = failed
        size = next(a.size for a in k.all_args if a.name == name)
        e = plan.code(plan.E_EXPR, detail, True)
        why = describe(k, e, t, expression=f"size of {name} '{expr.to_text(size)}'")  # type: ignore[arg-type]
        sizes = [(name, f"({why.removeprefix('error: ')}: a call raises ArgumentError)")]
    cl = cases.launch_checks_of(k, m).cluster
    if callable(cl):  # a launch-time cluster: the plan's own evaluator
        cl = cl(pyexpr.Status(), env | dict(m.constants))
    cl = tuple(cl) if cl is not None and tuple(cl) != (1, 1, 1) else None
    return Outcome(c, "launched", tuple(grid), tuple(block), smem, cl, let_values(m, k, t, env, block, smem),
                   tuple(sizes))


def let_values(m: Module, k: Kernel, t: Target, values: dict[str, int], block: Sequence[int],
               smem: int) -> tuple[tuple[str, object], ...]:
    """The kernel's let values for a launched plan: over the arguments, the module's constants
    and the target's device names, ``kernel.blocks_per_sm`` from the plan's block and shared
    memory (as :func:`kernelgen.plan.expect` computes it)."""
    table = plan.target_table(t)
    env = dict(values) | dict(m.constants) | plan.device_env(table)
    env["kernel.blocks_per_sm"] = plan.table_blocks_per_sm(table, [int(b) for b in block], int(smem))
    out = []
    for name, tree in k.lets:
        st = pyexpr.Status()
        v = expr.evaluate(tree, env, st)
        out.append((name, "(error)" if st.code else v))
    return tuple(out)


def check_names(values: dict[str, list[int | str]], kernels: Sequence[Kernel], what: str) -> None:
    """Every integer argument a plan needs has a value (:func:`convert` checked the names)."""
    missing = [n for k in kernels for n in needed(k) if n not in values]
    if missing:
        raise KernelgenError(f"{what} needs a value for {', '.join(dict.fromkeys(missing))} (NAME=VALUE)")


def matching(keys: dict[str, list[str | None]], values: dict[str, int | str], n: int) -> list[bool]:
    """Per member, whether it takes the element types the dtype keys name (a key left out
    admits every member; a member lacking the key's arguments is not decided by it), as the
    chain's plan tests its members."""
    return [all(values.get(key, elems[i]) == elems[i] for key, elems in keys.items() if elems[i] is not None)
            for i in range(n)]


def chain_choice(outcomes: Sequence[Outcome | None]) -> int | None:
    """The member a chain (or dispatcher) runs (index), or None; a member's error that does not
    fall through stops the chain (its index, as a negative number minus one). None in
    ``outcomes``: a member the dtype keys leave out."""
    for i, o in enumerate(outcomes):
        if o is None:
            continue
        if o.code == plan.LAUNCHED:
            return i
        if o.code < 0 and not plan.falls_through(o.code):
            return -i - 1
    return None


def outcomes(catalog: Catalog, refs: Sequence[KernelRef], kernels: Sequence[Kernel], t: Target,
             values: dict[str, int | str], keys: dict[str, list[str | None]]) -> list[Outcome | None]:
    """Each member's outcome, None for a member the dtype keys leave out."""
    ok = matching(keys, values, len(kernels))
    ints = {n: v for n, v in values.items() if n not in keys}
    return [one(catalog.module(r.module), k, t, ints) if ok[i] else None  # type: ignore[arg-type]
            for i, (r, k) in enumerate(zip(refs, kernels))]


def _no_instance(keys: dict[str, list[str | None]]) -> str:
    return plan.describe(None, plan.code(plan.NL_NO_INSTANCE), keys=", ".join(keys))


def run(catalog: Catalog, name: str, items: Sequence[str], targets: Sequence[Target]) -> int:
    raw = parse_values(items)
    m, what, members, chain = find_chain(catalog, name)
    short = name.split(".")[-1]
    if members is None:
        refs = [KernelRef(m.name, short, m.loc)]
        kernels = [next(k for k in m.kernels if k.name == short)]
    else:
        refs, kernels = members, [kernel_of(catalog, r) for r in members]
    keys = dtype_keys(chain, kernels)
    if what == "chain" and keys:
        what = "chain: the arrays' element types choose among its members"
    title = f"{m.name}.{short}" + (f" ({what})" if members is not None else "")
    values = convert(raw, kernels, keys, f"{m.name}.{short}", type_axis_of(m, chain, kernels))
    check_names(values, kernels, title)
    ignored = [n for n in float_args(kernels) if n in raw]
    if ignored:
        which = "a float argument" if len(ignored) == 1 else "float arguments"
        print(f"kernelgen: note: {', '.join(ignored)}: {which}, which no plan reads (left out)", file=sys.stderr)
    combos = sweep(values)
    if len(combos) > 1:
        return table(catalog, title, refs, kernels, combos, targets, members is not None, keys)
    values1 = combos[0]
    print(f"{title}  {' '.join(f'{n}={v}' for n, v in values1.items())}")
    width = max(len(r.qualname) for r in refs)
    for t in targets:
        outs = outcomes(catalog, refs, kernels, t, values1, keys)
        if members is None:
            o = outs[0]
            assert o is not None
            print(f"  {t.name} ({t.sm_label}): {o.line()}")
            if o.lets:
                print("    let: " + ", ".join(f"{n} = {v}" for n, v in o.lets))
            if o.sizes:
                print("    sizes: " + ", ".join(f"{n} = {v}" for n, v in o.sizes))
            continue
        print(f"  {t.name} ({t.sm_label}):")
        pick = chain_choice(outs)
        marks = _marks(keys, outs)
        for i, (r, o) in enumerate(zip(refs, outs)):
            if o is None:
                taken = ", ".join(f"{key}={elems[i]}" for key, elems in keys.items() if elems[i] is not None)
                print(f"    {r.qualname:{width}}  (skipped: takes {taken})")
                continue
            print(f"    {r.qualname:{width}}  {o.line()}{marks.get(i, '')}")
            if o.lets:
                print(f"    {'':{width}}    let: " + ", ".join(f"{n} = {v}" for n, v in o.lets))
            if o.sizes:
                print(f"    {'':{width}}    sizes: " + ", ".join(f"{n} = {v}" for n, v in o.sizes))
        if all(o is None for o in outs):
            print(f"    {'':{width}}  ({_no_instance(keys)})")
        elif pick is None:  # the outcome the chain returns: its last member present on the target
            shown = plan.chain_pick([None if o is None else o.code for o in outs])
            who = f": the chain returns {refs[shown].qualname}'s outcome" if shown is not None else ""
            print(f"    {'':{width}}  (no member launches{who})")
    print(NOTE)
    return 0


def _marks(keys: dict[str, list[str | None]], outs: Sequence[Outcome | None]) -> dict[int, str]:
    """The members a chain's (or dispatcher's) table marks: the one that runs, or whose error
    stops the chain. Where dtype keys are left open (their element types differ between the
    members planned), one for each combination of those types, in member order: ``<- runs for
    x=f32 arrays``."""
    open_ = [key for key, elems in keys.items()
             if len({e for e, o in zip(elems, outs) if o is not None and e is not None}) > 1]
    combos: dict[tuple[str | None, ...], list[int]] = {}
    for i, o in enumerate(outs):
        if o is not None:
            combos.setdefault(tuple(keys[key][i] for key in open_), []).append(i)
    marks: dict[int, str] = {}
    for combo, members in combos.items():
        pick = chain_choice([o if i in members else None for i, o in enumerate(outs)])
        if pick is None:
            continue
        types = ", ".join(f"{key}={e}" for key, e in zip(open_, combo) if e is not None)
        where = f" for {types} arrays" if types else ""
        marks[pick if pick >= 0 else -pick - 1] = (f"   <- runs{where}" if pick >= 0 else
                                                   f"   <- the chain stops here{where}")
    return marks


def _reasons(refs: Sequence[KernelRef], outs: Sequence[Outcome | None]) -> str:
    """Why no member of a chain launches: each distinct reason once, with its member (or how many
    members give it)."""
    by_text: dict[str, list[str]] = {}
    for r, o in zip(refs, outs):
        if o is not None:
            by_text.setdefault(o.text, []).append(r.qualname)
    return "; ".join(f"{who[0]}: {text}" if len(who) == 1 else f"{text} ({len(who)} members)"
                     for text, who in by_text.items())


def table(catalog: Catalog, title: str, refs: Sequence[KernelRef], kernels: Sequence[Kernel],
          combos: Sequence[dict[str, int | str]], targets: Sequence[Target], chain: bool,
          keys: dict[str, list[str | None]] | None = None) -> int:
    """A sweep: one markdown table per target, a row per argument set: the kernel's outcome (for
    a chain or dispatcher: the member that runs), grid, block, shared memory, cluster and let
    values."""
    keys = keys or {}
    names = list(combos[0])
    for t in targets:
        print(f"{title} on {t.name} ({t.sm_label})")
        lets = [] if chain else [n for n, _ in kernels[0].lets]
        head = names + (["runs"] if chain else ["outcome"]) + ["grid", "block", "shared_mem", "cluster"] + lets
        sized = any(a.size is not None and a.is_pointer and not a.device for k in kernels for a in k.all_args)
        head += ["sizes"] if sized else []
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
        for values in combos:
            outs = outcomes(catalog, refs, kernels, t, values, keys)
            cells = [str(values[n]) for n in names]
            pick = chain_choice(outs) if chain else 0
            o = outs[pick] if pick is not None and pick >= 0 else None
            if not chain:
                assert o is not None
                cells.append("launched" if o.code == plan.LAUNCHED else o.text)
            elif all(x is None for x in outs):
                cells.append(f"(none: {_no_instance(keys)})")
            elif pick is None:  # no member launches: why, each reason once
                cells.append(f"(none: {_reasons(refs, outs)})")
            else:
                who = refs[pick if pick >= 0 else -pick - 1].qualname
                cells.append(who if pick >= 0 else f"{who}: {outs[-pick - 1].text}")  # type: ignore[union-attr]
            launched = o is not None and o.code == plan.LAUNCHED
            cells += [str(list(o.grid)), str(list(o.block)), str(o.smem)] if launched else ["", "", ""]  # type: ignore[union-attr]
            cells.append(str(list(o.cluster)) if launched and o.cluster else "")  # type: ignore[union-attr]
            cells += [str(dict(o.lets).get(n, "")) if launched else "" for n in lets]  # type: ignore[union-attr]
            if sized:
                cells.append(" ".join(f"{n}={v}" for n, v in o.sizes) if launched else "")  # type: ignore[union-attr]
            print("| " + " | ".join(cells) + " |")
        print()
    print(NOTE)
    return 0
