"""Lowering: the typed model -> per-target launchers, the IR every emitter reads.

The IR speaks no output language: arguments keep their types from the registry and
expressions stay trees; each emitter (kernelgen.emit) spells them in its own language. Plan
semantics (the clause families and their order, outcome codes, geometry limits, the Python
evaluation of a plan) live in :mod:`kernelgen.plan` and the search for test cases in
:mod:`kernelgen.cases`; here a kernel's steps are put in plan order, its sized arrays given
slots, and a chain's members and arguments united.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kernelgen import expr, plan
from kernelgen.cases import boundary_cases, expected_plan, launch_check_cases, search_cases, u64_in_expressions
from kernelgen.model import Arg, Catalog, Fallback, Kernel, Module, Struct, Target, TensorMap, chain_arguments
from kernelgen.types import ELEM_TYPES, SCALARS, ElemType, ScalarType
from kernelgen.wording import joined


@dataclass(frozen=True)
class Step:
    """One plan step: a clause in plan order, with its expression."""

    step: plan.Step
    expr: expr.Node

    def __getattr__(self, name: str) -> object:
        return getattr(self.step, name)


@dataclass(frozen=True)
class CArg:
    """One launcher argument: the spec's argument, its slot among the sized arrays, and
    whether a chain takes it untyped (its element type is a dtype key)."""

    arg: Arg
    size_slot: int
    untyped: bool = False
    shown: str = ""  # how a chain's docs spell an argument its members type differently ("const f32|bf16*")

    @property
    def name(self) -> str:
        return self.arg.name

    @property
    def doc_spelling(self) -> str:
        return self.shown or self.arg.spelling

    @property
    def spelling(self) -> str:
        """The spec's spelling (const bf16*)."""
        return self.arg.spelling

    @property
    def elem(self) -> ElemType | None:
        return self.arg.elem

    @property
    def scalar(self) -> ScalarType | None:
        return self.arg.scalar

    @property
    def const(self) -> bool:
        return self.arg.const

    @property
    def is_pointer(self) -> bool:
        return self.arg.is_pointer

    @property
    def struct(self) -> Struct | None:
        return self.arg.struct

    @property
    def is_struct(self) -> bool:
        return self.arg.struct is not None

    @property
    def is_int(self) -> bool:
        return self.arg.is_int

    @property
    def zero(self) -> bool:
        return self.arg.zero

    @property
    def to_symbol(self) -> str | None:
        return self.arg.to_symbol

    @property
    def host(self) -> bool:
        return self.arg.host

    @property
    def reads_only(self) -> bool:
        """The kernel does not write through it: const, or declared read_only (the APIs take a const
        pointer either way)."""
        return self.arg.is_pointer and self.arg.reads_only

    @property
    def writable(self) -> bool:
        return self.arg.is_pointer and not self.arg.reads_only

    @property
    def nullable(self) -> bool:
        return self.arg.is_pointer and self.arg.nullable

    @property
    def indirect(self) -> bool:
        return self.arg.indirect

    @property
    def device(self) -> bool:
        """A device scalar: a pointer to the one element the kernel reads on the device."""
        return self.arg.device

    @property
    def array_elem(self) -> ElemType:
        """The element type of arrays passed for it (``ptr`` for pointer arrays)."""
        return self.arg.array_elem

    @property
    def contiguous(self) -> bool:
        return self.arg.is_pointer and self.arg.contiguous

    @property
    def derived(self) -> bool:
        """A host integer the launchers read from a struct argument's field (``from``), not a
        parameter of theirs; plans take it."""
        return self.arg.derived


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
    doc: str  # longer text after the summary
    present: bool
    symbol: str
    variants: tuple[Variant, ...]
    variant_on: str | None
    args: tuple[CArg, ...]  # kernel args then host args
    kernel_args: tuple[CArg, ...]
    int_args: tuple[CArg, ...]
    steps: tuple[Step, ...]
    skip_texts: tuple[str, ...]
    applies_texts: tuple[str, ...]
    requires_texts: tuple[str, ...]
    grid: tuple[expr.Node, expr.Node, expr.Node]
    block: tuple[expr.Node, expr.Node, expr.Node]
    shared_mem: expr.Node
    u64_int_args: tuple[str, ...]  # u64 arguments the expressions use (converted with an overflow check)
    sizes: tuple[tuple[int, str, expr.Node], ...]  # (slot, arg name, element count)
    signature_text: str  # the kernel's parameters as the spec gives them (args, then tensor maps), for messages
    flips: tuple[tuple[str, int, tuple[tuple[str, int], ...]], ...]  # (kind, index, args)
    cases: tuple[tuple[tuple[str, int], ...], ...]
    slot: str
    zeros: tuple[tuple[CArg, int], ...] = ()  # (pointer, its size slot): zeroed before the launch
    symbol_copies: tuple[CArg, ...] = ()  # host arguments copied into __constant__ variables
    uses_device: bool = False  # the plan reads device values (device names, cooperative launch)
    needs_occupancy: bool = False  # the plan computes kernel.blocks_per_sm
    cooperative: bool = False
    programmatic_dependent: bool = False
    launch_cluster: tuple[expr.Node, expr.Node, expr.Node] | None = None  # launch-time cluster
    launch_cluster_text: str = ""  # the docs' text of it (let names kept, then defined)
    cluster: tuple[int, int, int] | None = None  # compile-time cluster (__cluster_dims__)
    max_threads: int = 0  # __launch_bounds__ maximum, 0: none known
    max_cluster_size: int = 8  # the target's
    tensor_maps: tuple[TensorMap, ...] = ()  # encoded by the launcher, passed after the args
    derived: tuple[CArg, ...] = ()  # host integers read from struct arguments' fields (not in args)

    @property
    def launch_ex(self) -> bool:
        """Whether the launch goes through cudaLaunchKernelEx with attributes."""
        return self.cooperative or self.programmatic_dependent or self.launch_cluster is not None

    @property
    def launch_notes(self) -> tuple[str, ...]:
        """How the kernel is launched and what the launch checks, in words, for every language's docs."""
        out = []
        if self.variants:
            values = [str(v.value) for v in self.variants]
            shown = joined(values, "or")
            out.append(f"Variants on {self.variant_on}: {shown} (another value: not launched).")
        if self.zeros:
            out.append("Set to zero before each launch (cudaMemsetAsync on the launch stream): "
                       + ", ".join(f"{a.name} ({_count_text(a.arg.size)}" + (", unless null" if a.nullable else "")
                                   + ")" for a, _ in self.zeros) + ".")
        if self.cooperative:
            out.append("Cooperative launch: at most device.sm_count * kernel.blocks_per_sm blocks "
                       "(else a CORESIDENT error).")
        if self.programmatic_dependent:
            out.append("Programmatic dependent launch: may start before the previous kernel on the stream ends.")
        if self.launch_cluster is not None:
            out.append(f"Cluster chosen at launch: {self.launch_cluster_text}; the grid must be whole clusters.")
        if self.tensor_maps:
            out.append("TMA descriptors encoded for each launch: "
                       + ", ".join(f"{t.name} (of {t.array})" for t in self.tensor_maps)
                       + "; an array not 16-byte aligned, or with a row stride not a multiple of 16 bytes, is "
                         "not launched (UNALIGNED).")
        if self.derived:
            out.append("Read from struct arguments' fields (not arguments of the launchers; plans take them): "
                       + ", ".join(f"{a.name} ({a.arg.source_text})" for a in self.derived) + ".")
        if self.max_threads:
            out.append(f"__launch_bounds__: at most {self.max_threads} threads a block.")
        reads = [a for a in self.args if a.device]
        if reads:
            out.append("Read on the device when the kernel runs (one-element device arrays, never read by the "
                       "host, so graph replays see their current values): "
                       + ", ".join(f"{a.name} ({a.elem.name}" + (f", at most {a.arg.bound})" if a.arg.bound else ")")
                                   for a in reads) + ".")
        if self.uses_device and not self.cooperative:
            out.append("Plans read device values (device.*, kernel.blocks_per_sm): the current GPU's, or the "
                       "target's table without one.")
        return tuple(out)

    @property
    def nullable_args(self) -> frozenset[str]:
        """The pointer arguments that may be null: the launcher's set-up before the launch (zeroing,
        tensor-map encoding) skips them when they are."""
        return frozenset(a.name for a in self.args if a.nullable)

    @property
    def launch_checks(self) -> bool:
        """Whether the plan checks anything after the geometry."""
        return bool(self.max_threads) or self.cluster is not None or self.launch_cluster is not None \
            or self.cooperative


def _count_text(size: expr.Node | None) -> str:
    """An array's element count in the docs' words: "1 element", "n * 4 elements"."""
    if isinstance(size, expr.Lit) and size.value == 1:
        return "1 element"
    return f"{expr.to_text(size)} elements" if size is not None else "its elements"


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
        return f"kg_dtypes_{self.name}"


@dataclass(frozen=True)
class LChain:
    name: str
    module: str
    spec: str
    members: tuple[tuple[str, str], ...]  # (module, kernel)
    member_args: tuple[tuple[str, ...], ...]  # per member: names of its arguments in order
    member_int_args: tuple[tuple[str, ...], ...]
    member_sizes: tuple[tuple[tuple[int, str], ...], ...]  # per member: (its slot, union arg name)
    args: tuple[CArg, ...]
    kernel_args: tuple[CArg, ...]
    int_args: tuple[CArg, ...]
    nsizes: int
    summary: str  # what the chain does, in words
    cross_modules: tuple[str, ...]
    cases: tuple[tuple[tuple[str, int], ...], ...] = ()
    dispatch: bool = False  # the dispatching launcher of an instantiated kernel
    keys: tuple[LKey, ...] = ()  # empty when every member takes the same pointer types
    member_ptr_args: tuple[tuple[CArg, ...], ...] = ()  # per member: its pointer arguments
    member_type_names: tuple[tuple[tuple[str, str], ...], ...] = ()  # per member: (key, element type name)
    derived: tuple[CArg, ...] = ()  # host integers read from struct arguments' fields (not in args)
    # per member: its scalar type of each float argument the chain takes as a double (members differ)
    member_scalars: tuple[dict[str, ScalarType], ...] = ()


@dataclass(frozen=True)
class LModule:
    name: str
    spec: str
    summary: str
    doc: str  # longer text after the summary
    target: Target
    kill_switch: str | None
    constants: tuple[tuple[str, int], ...]
    sources: tuple[str, ...]
    kernels: tuple[LKernel, ...]
    chains: tuple[LChain, ...]
    includes: tuple[str, ...] = field(default=())
    structs: tuple[Struct, ...] = ()  # those passed by callers (with fields)
    stateless_structs: tuple[Struct, ...] = ()  # functors the launchers pass value-initialised

    @property
    def any_present(self) -> bool:
        return any(k.present for k in self.kernels)

    @property
    def any_tensor_maps(self) -> bool:
        return any(k.present and k.tensor_maps for k in self.kernels)


def lower_kernel(module: Module, k: Kernel, target: Target) -> LKernel:
    u64 = set(u64_in_expressions(k))
    size_slot = 0
    cargs = []
    sizes = []
    kernel_cargs_all = []  # the kernel's parameters in order, stateless structs included
    for a in k.all_args:
        slot = -1
        if a.is_pointer and a.size is not None:
            slot = size_slot
            sizes.append((slot, a.name, a.size))
            size_slot += 1
        c = CArg(a, slot)
        if not a.host:
            kernel_cargs_all.append(c)
        if not a.implicit:  # the launcher passes a stateless struct itself: not an argument of it
            cargs.append(c)
    int_cargs = tuple(c for c in cargs if c.is_int)
    derived = tuple(c for c in cargs if c.derived)
    cargs = [c for c in cargs if not c.derived]  # read from a struct argument: not the launchers' to take
    steps = [Step(st, c.expr) for st, c in plan.steps(k)]
    present = target.name in k.targets
    slot = f"kg_slot_{k.name}"
    variants = ()
    if k.variants:
        variants = tuple(Variant(v, s, f"kg_vslot{i}_{k.name}") for i, (v, s) in enumerate(k.variants.symbols))
    kernel_cargs = tuple(kernel_cargs_all)
    sig_text = ", ".join([f"{c.spelling} {c.name}" for c in kernel_cargs]
                         + [f"const CUtensorMap {t.name}" for t in k.tensor_maps])
    lk = LKernel(
        name=k.name,
        spec=f"{k.loc}",
        summary=k.summary,
        doc=k.doc,
        present=present,
        symbol=k.symbol,
        variants=variants,
        variant_on=k.variants.on if k.variants else None,
        args=tuple(cargs),
        kernel_args=kernel_cargs,
        int_args=int_cargs,
        derived=derived,
        steps=tuple(steps),
        skip_texts=tuple(c.text for c in k.skip_if),
        applies_texts=tuple(c.text for c in k.applies_if),
        requires_texts=tuple(c.text for c in k.requires),
        grid=k.grid,
        block=k.block,
        shared_mem=k.shared_mem,
        u64_int_args=tuple(sorted(u64)),
        sizes=tuple(sizes),
        signature_text=sig_text,
        flips=(),
        cases=(),
        slot=slot,
        zeros=tuple((c, c.size_slot) for c in cargs if c.zero),
        symbol_copies=tuple(c for c in cargs if c.to_symbol),
        uses_device=k.uses_device,
        needs_occupancy=k.needs_occupancy,
        cooperative=bool(k.launch and k.launch.cooperative),
        programmatic_dependent=bool(k.launch and k.launch.programmatic_dependent),
        launch_cluster=k.launch.cluster if k.launch else None,
        launch_cluster_text=(k.launch.cluster_text or "") if k.launch else "",
        cluster=k.cluster,
        max_threads=k.launch_bounds[0] if k.launch_bounds else 0,
        max_cluster_size=target.max_cluster_size,
        tensor_maps=k.tensor_maps,
    )
    flips, cases = search_cases(module, k, target)
    return _replace(lk, flips=flips, cases=cases)


def _replace(lk: LKernel, **kw: object) -> LKernel:
    from dataclasses import replace

    return replace(lk, **kw)


# --------------------------------------------------------------------- chains


def lower_chain(catalog: Catalog, module: Module, fb: Fallback, target: Target) -> LChain:
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
        members.append((ref.module, ref.kernel))
        member_args.append(tuple(a.name for a in k.all_args if not a.implicit and not a.derived))
        member_int.append(tuple(a.name for a in k.int_args))
        slots = []
        n = 0
        for a in k.all_args:
            if a.is_pointer and a.size is not None:
                slots.append((n, a.name))
                n += 1
        member_sizes.append(tuple(slots))
    seen = chain_arguments(k for _, k in kernels)  # kernel arguments, then host ones
    order_pos = list(seen)
    size_of: dict[str, int] = {}
    for slots in member_sizes:
        for _, name in slots:
            size_of.setdefault(name, len(size_of))
    # Float scalars the members take in different types (f32 in one, f16 in another): a double here.
    widened = {n for n, a in seen.items() if a.scalar is not None and len(
        {b.scalar.name for _, k in kernels for b in k.all_args if b.name == n and b.scalar is not None}) > 1}
    member_scalars = tuple({b.name: b.scalar for b in k.all_args if b.name in widened and b.scalar}
                           for _, k in kernels)
    cargs = []
    for n in order_pos:
        a = seen[n]
        if n in widened:
            a = replace(a, scalar=SCALARS["f64"])
        if a.is_pointer and a.reads_only and any(not b.reads_only for _, k in kernels for b in k.args if b.name == n):
            a = replace(a, const=False, read_only=False)  # written by some member: the chain's argument is writable
        if a.is_pointer and a.nullable and any(not b.nullable for _, k in kernels for b in k.args if b.name == n):
            a = replace(a, nullable=False)  # a member needs it: the chain refuses null
        if a.is_pointer and not a.contiguous and any(b.contiguous for _, k in kernels for b in k.args if b.name == n):
            a = replace(a, contiguous=True)
        cargs.append(CArg(a, size_of.get(n, -1)))
    int_cargs = [c for c in cargs if c.is_int]
    derived = tuple(c for c in cargs if c.derived)  # (every member that has it reads it from the same field)
    cargs = [c for c in cargs if not c.derived]
    keys, ptr_args, type_names = _dtype_keys(fb, [k for _, k in kernels], cargs)
    if keys:
        varying = {cargs[i].name for key in keys for i in key.args}
        cargs = [replace(c, untyped=True) if c.name in varying else c for c in cargs]
    # Docs spell what the members type differently by the types they take ('const f32|bf16*',
    # 'f32|f64'), a dispatcher's arguments of a type axis included.
    shown = []
    for c in cargs:
        if not (c.untyped or c.name in widened):
            shown.append(c)
            continue
        if c.name in widened:
            text = "|".join(dict.fromkeys(own[c.name].name for own in member_scalars))
        else:
            elems = [b.elem.name for _, k in kernels for b in k.all_args if b.name == c.name and b.elem]
            text = f"{'const ' if c.reads_only else ''}{'|'.join(dict.fromkeys(elems))}*"
        shown.append(replace(c, shown=text))
    cargs = shown
    cross = sorted({r.module for r in fb.members if r.module != module.name})
    # Cases for the chain's tests: each member's examples, clause flips, boundary cases and
    # launch-check cases (where a device limit makes the chain fall through to the next member),
    # completed with the other members' first examples, so every member gets to decide at least
    # once and every boundary of a member's plan is met in the chain.
    int_names = [c.name for c in int_cargs]
    base: dict[str, int] = {}
    for _, k in kernels:
        for n, v in k.examples[0]:
            base.setdefault(n, v)
    chain_cases: dict[tuple[tuple[str, int], ...], None] = {}  # first-seen order
    for owner, k in kernels:
        flips, _ = search_cases(owner, k, target)
        envs = [dict(e) for e in k.examples] + [dict(f[2]) for f in flips]
        envs += [dict(c) for c in boundary_cases(owner, k, target)] + launch_check_cases(owner, k, target)
        for env in envs:
            merged = base | env
            case = tuple(sorted((n, merged[n]) for n in int_names))
            chain_cases.setdefault(case)
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
        member_scalars=member_scalars,
        args=tuple(cargs),
        kernel_args=tuple(c for c in cargs if not c.host),
        int_args=tuple(int_cargs),
        derived=derived,
        nsizes=len(size_of),
        summary=summary,
        cross_modules=tuple(cross),
        cases=tuple(chain_cases),
        dispatch=fb.dispatch,
        keys=keys,
        member_ptr_args=ptr_args,
        member_type_names=type_names,
    )


def _dtype_keys(fb: Fallback, kernels: list[Kernel], cargs: list[CArg]):
    """The launcher's dtype keys (none when all members take the same pointer types), and per
    member its pointer arguments and the element type name of each key."""
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
    ptr_args = tuple(tuple(CArg(a, -1) for a in k.args if a.is_pointer) for k in kernels)
    type_names = tuple(
        tuple((key.name, ELEM_TYPES[key.member_elems[m] - 1].name) for key in keys if key.member_elems[m])
        for m in range(len(kernels))
    )
    return tuple(keys), ptr_args, type_names


def lower_module(catalog: Catalog, module: Module, target: Target) -> LModule:
    kernels = tuple(lower_kernel(module, k, target) for k in module.kernels)
    chains = tuple(lower_chain(catalog, module, fb, target) for fb in module.dispatches + module.fallbacks)
    includes = sorted({m for c in chains for m in c.cross_modules})
    return LModule(
        name=module.name,
        spec=module.path,
        summary=module.summary,
        doc=module.doc,
        target=target,
        kill_switch=module.kill_switch,
        constants=module.constants,
        sources=module.sources,
        kernels=kernels,
        chains=chains,
        includes=tuple(includes),
        structs=tuple(st for st in module.structs if not st.stateless),
        stateless_structs=tuple(st for st in module.structs if st.stateless),
    )


def chain_kernels(catalog: Catalog, c: LChain) -> list[tuple[Module, Kernel]]:
    """The chain's members as (module, kernel), in order."""
    out = []
    for mod_name, name in c.members:
        owner = catalog.module(mod_name)
        assert owner is not None
        k = owner.kernel(name)
        assert k is not None
        out.append((owner, k))
    return out


def unreachable_members(catalog: Catalog) -> list[str]:
    """Warnings for fallback-chain members that no argument set of the chain's tests launches (its
    examples, clause flips and boundaries, and every other member's) on any target the member is
    built for: earlier members launch each argument set the member would take, so the chain
    never reaches it (a specialised kernel listed after a general one). A chain that picks its
    members by element type is checked per element-type combination, over the members that take
    it. Not reported where one of those earlier members can be turned off alone (a kill switch of
    another module: the member is then its fallback) or reads device values (the tests plan with
    the target's table; another GPU may make it decline)."""
    out = []
    for m in catalog.modules:
        for fb in m.dispatches + m.fallbacks:
            chains = [(target, lower_chain(catalog, m, fb, target)) for target in catalog.targets]
            if not chains:
                continue
            keys = chains[0][1].keys
            kernels = chain_kernels(catalog, chains[0][1])
            # Each member's element types, one a key (0: the member has none of the key's arrays).
            types = [tuple(key.member_elems[j] for key in keys) for j in range(len(kernels))]

            def takes(i: int, j: int) -> bool:  # member i is tried for the arrays member j takes
                return all(a in (0, b) for a, b in zip(types[i], types[j]))

            codes: dict[tuple[int, str, tuple[tuple[str, int], ...]], int] = {}

            def launches(j: int, target: Target, case: tuple[tuple[str, int], ...]) -> int:
                """Member j's plan code for the argument set (each planned once: every later member asks)."""
                key = (j, target.name, case)
                if key not in codes:
                    owner, k = kernels[j]
                    env = dict(case)
                    codes[key] = expected_plan(owner, k, target, {a.name: env[a.name] for a in k.int_args})[0]
                return codes[key]

            for j, (owner, k) in enumerate(kernels):
                built = [(t, lc) for t, lc in chains if t.name in k.targets]
                earlier = [i for i in range(j) if takes(i, j)]
                if not built or not earlier:
                    continue
                takers: dict[int, None] = {}
                example = dict(k.examples[0])
                first: tuple[Target, dict[str, int]] | None = None
                reached = False
                for target, lc in built:
                    for case in lc.cases:
                        if launches(j, target, case) != 0:
                            continue
                        taker = None  # the earlier member that launches it; -1: one that ends the chain
                        for i in earlier:
                            if target.name not in kernels[i][1].targets:
                                continue
                            c = launches(i, target, case)
                            if c == 0 or (c < 0 and not plan.falls_through(c)):
                                taker = i if c == 0 else -1
                                break
                        if taker is None:
                            reached = True
                            break
                        if taker < 0:
                            continue
                        takers.setdefault(taker)
                        env = dict(case)
                        if first is None or (_same(example, env) and not _same(example, first[1])):
                            first = (target, env)
                    if reached:
                        break
                if reached or first is None:
                    continue
                if any((kernels[i][0].kill_switch and kernels[i][0].kill_switch != owner.kill_switch)
                       or kernels[i][1].uses_device for i in takers):
                    continue
                target, env = first
                names = [fb.members[i].qualname for i in takers]
                who = joined(names, "and")
                shown = ", ".join(f"{n}={v}" for n, v in (example if _same(example, env) else env).items())
                which = "its first example, " if _same(example, env) else ""
                typed = chains[0][1].member_type_names[j] if keys else ()
                where = f" ({', '.join(f'{key}: {elem}' for key, elem in typed)})" if typed else ""
                ref = fb.members[j]
                verb = "launches" if len(names) == 1 else "launch"
                if fb.dispatch:
                    out.append(
                        f"{fb.loc}: kernels.{fb.name}: the dispatcher {m.name}.{fb.name} launches {ref.qualname} "
                        f"for none of the argument sets its tests try{where}: {who} before it {verb} each one it "
                        f"would take (among them {which}{shown}, on {target.name}); it stays callable by its own "
                        "name, but list the instantiate values that make the more specific kernel first, or "
                        "narrow applies_if")
                    continue
                out.append(
                    f"{ref.loc}: fallbacks.{fb.name}: {ref.qualname} is launched for none of the argument sets "
                    f"the chain's tests try{where}: {who} before it {verb} each one it would take (among them "
                    f"{which}{shown}, on {target.name}), so the chain never reaches it; list the more specific "
                    "kernel first, or narrow the earlier one's applies_if")
    return out


def _same(example: dict[str, int], env: dict[str, int]) -> bool:
    return all(env.get(n) == v for n, v in example.items() if n in env)
