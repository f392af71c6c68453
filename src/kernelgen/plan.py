"""Plan semantics, written once: outcome codes, the clause families in the order a plan
checks them, the geometry limits, and the Python evaluation of a plan.

Every language takes its plan from here. The C++ plan functions are rendered from the steps
that :func:`steps` orders, asking each step's properties (``decides_when``, ``error``);
the outcome codes and CUDA's grid limits reach C++ through the generated header
``kernelgen/plan_codes.h`` (included by ``abi.h``); and the Python expectation, used both at
generation time (the test-case search) and by the generated contract tests, is the one
function :func:`expect`, given the spec's expressions as evaluators.

A plan, for given integer arguments:

1. the clause families of :data:`FAMILIES`, in order (skip_if, requires, applies_if); each
   clause decides the outcome when its value equals the family's ``decides_when``;
2. the variant lookup (not launched when the argument's value has no variant);
3. grid, block and shared memory, checked by :func:`geometry_code`; where the plan reads
   ``kernel.blocks_per_sm`` and it is 0, a grid dimension of 0 is reported as the block or
   shared memory error that made it 0, if there is one;
4. the launch checks (:func:`launch_code`): the block against ``__launch_bounds__``, the grid
   against the cluster (whole clusters, cluster size), and a cooperative grid against the
   co-residency limit ``device.sm_count * kernel.blocks_per_sm``.

Device names (``device.*``, ``kernel.blocks_per_sm``) take the values of :func:`target_table`
here (plans without a GPU); the C++ plans take the current device's when it is the target's.

An expression error (overflow, division by zero, bad shift) at any step is an error outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernelgen import pyexpr

LAUNCHED = 0

# Not-launched categories (> 0 codes) and error categories (< 0 codes): the code of an
# outcome is (category << 16) | detail, negated for errors.
NOT_LAUNCHED = {
    "KILLED": (1, "the module's kill switch is set"),
    "ABSENT": (2, "this target's build lacks the kernel"),
    "EMPTY": (3, "a skip_if clause holds (empty work)"),
    "CLAUSE": (4, "an applies_if clause fails"),
    "NO_VARIANT": (5, "no variant for the value of the variant argument"),
    "EMPTY_GRID": (6, "a grid dimension is 0; detail is the axis"),
    "NO_INSTANCE": (7, "no instantiation (or chain member) takes the arrays' element types"),
    "UNALIGNED": (8, "a tensor map's array is not 16-byte aligned, or its row stride not a multiple of 16 bytes; "
                     "detail is the map's index"),
}
ERRORS = {
    "REQUIRES": (1, "a requires clause fails; detail is its index"),
    "EXPR": (2, "evaluating an expression failed; detail is KG_EXPR_*"),
    "GRID": (3, "a grid dimension is over CUDA's limit, or negative; detail is the axis, + KG_DETAIL_NEGATIVE "
                "when negative"),
    "BLOCK": (4, "a block dimension is out of range; detail is the axis (3 = the product), + KG_DETAIL_NEGATIVE "
                 "when negative, + KG_DETAIL_ZERO when 0"),
    "SHARED_MEM": (5, "dynamic shared memory over the device's opt-in limit (detail 0), or negative "
                      "(KG_DETAIL_NEGATIVE)"),
    "DEVICE": (6, "the current device is not the one this target was built for"),
    "CUDA": (7, "a CUDA call failed; detail is the cudaError_t"),
    "LAUNCH_BOUNDS": (8, "the block has more threads than the kernel's __launch_bounds__"),
    "CLUSTER": (9, "the grid is not a whole number of clusters (detail: the axis), or the cluster is too large "
                   "(detail 3)"),
    "CORESIDENT": (10, "a cooperative grid has more blocks than can be co-resident on the device"),
    "DEVICE_SCALAR": (11, "a device scalar argument is null or not in device memory; detail is its position"),
    "TENSOR_MAP": (12, "the driver refused to encode a tensor map (or has no cuTensorMapEncodeTiled); detail is "
                       "the CUresult"),
}
# Errors from a device limit: a fallback chain tries its next member instead of stopping.
FALLS_THROUGH = ("GRID", "BLOCK", "SHARED_MEM", "LAUNCH_BOUNDS", "CORESIDENT")
# Detail flags of GRID, BLOCK and SHARED_MEM: the value is below the range, not over it (the
# detail's low two bits keep the axis). A grid dimension of 0 is not an error (EMPTY_GRID).
DETAIL_FLAGS = {
    "NEGATIVE": (4, "the value is negative"),
    "ZERO": (8, "the value is 0"),
}
DETAIL_NEGATIVE, DETAIL_ZERO = (v[0] for v in DETAIL_FLAGS.values())
EXPR_ERRORS = {
    "OVERFLOW": (pyexpr.OVERFLOW, "integer overflow"),
    "DIV_ZERO": (pyexpr.DIV_ZERO, "division by zero"),
    "SHIFT": (pyexpr.SHIFT, "shift count outside 0..62"),
}

NL_KILLED, NL_ABSENT, NL_EMPTY, NL_CLAUSE, NL_NO_VARIANT, NL_EMPTY_GRID, NL_NO_INSTANCE, NL_UNALIGNED = (
    v[0] for v in NOT_LAUNCHED.values())
(E_REQUIRES, E_EXPR, E_GRID, E_BLOCK, E_SHARED_MEM, E_DEVICE, E_CUDA, E_LAUNCH_BOUNDS, E_CLUSTER,
 E_CORESIDENT, E_DEVICE_SCALAR, E_TENSOR_MAP) = (v[0] for v in ERRORS.values())

# CUDA's grid limits per axis (x, y, z).
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def code(category: int, detail: int = 0, error: bool = False) -> int:
    c = (category << 16) | detail
    return -c if error else c


def category(c: int) -> int:
    """The category of an outcome code (KG_CATEGORY)."""
    return abs(c) >> 16


def detail(c: int) -> int:
    """The detail of an outcome code (KG_DETAIL): a clause index, an axis, an error number."""
    return abs(c) & 0xFFFF


@dataclass(frozen=True)
class Family:
    """A clause family: the Kernel attribute holding its clauses, what a deciding clause
    means, and the C++ name of its category."""

    name: str  # "skip" | "requires" | "applies"
    attr: str
    category: int
    category_cpp: str
    error: bool  # a deciding clause is an error (else: not launched)
    decides_when: bool  # the clause value that decides the outcome
    reason: str  # how a deciding clause reads in a reason


# The order in which a plan checks the families.
FAMILIES: tuple[Family, ...] = (
    Family("skip", "skip_if", NL_EMPTY, "KG_NL_EMPTY", False, True, "empty work"),
    Family("requires", "requires", E_REQUIRES, "KG_E_REQUIRES", True, False, "requirement failed"),
    Family("applies", "applies_if", NL_CLAUSE, "KG_NL_CLAUSE", False, False, "does not apply"),
)
FAMILY = {f.name: f for f in FAMILIES}


@dataclass(frozen=True)
class Step:
    """One clause in plan order."""

    family: Family
    index: int  # within its family
    text: str  # canonical clause text (the reason)

    @property
    def decides_when(self) -> bool:
        return self.family.decides_when

    @property
    def error(self) -> bool:
        return self.family.error

    @property
    def code(self) -> int:
        return code(self.family.category, self.index, self.family.error)

    @property
    def code_cpp(self) -> str:
        return f"{'-' if self.error else ''}KG_CODE({self.family.category_cpp}, {self.index})"


def steps(kernel: object) -> list[tuple[Step, object]]:
    """The kernel's clauses in plan order, as (step, clause)."""
    return [
        (Step(f, i, c.text), c)
        for f in FAMILIES
        for i, c in enumerate(getattr(kernel, f.attr))
    ]


def geometry_code(grid: Sequence[int], block: Sequence[int], smem: int, max_block: Sequence[int],
                  max_threads: int, max_smem: int) -> int:
    """The outcome code of computed geometry; kg::check_geometry (runtime.h) does the same. A
    dimension below its range has the detail flag that says how (:data:`DETAIL_FLAGS`)."""
    for axis in range(3):
        if grid[axis] < 0:
            return code(E_GRID, axis | DETAIL_NEGATIVE, True)
    for axis in range(3):
        if grid[axis] == 0:
            return code(NL_EMPTY_GRID, axis)
    for axis in range(3):
        if grid[axis] > GRID_LIMITS[axis]:
            return code(E_GRID, axis, True)
    return block_code(block, smem, max_block, max_threads, max_smem)


def block_code(block: Sequence[int], smem: int, max_block: Sequence[int], max_threads: int, max_smem: int) -> int:
    """The block and shared memory checks of :func:`geometry_code` (kg::check_block)."""
    for axis in range(3):
        if block[axis] < 0:
            return code(E_BLOCK, axis | DETAIL_NEGATIVE, True)
        if block[axis] == 0:
            return code(E_BLOCK, axis | DETAIL_ZERO, True)
        if block[axis] > max_block[axis]:
            return code(E_BLOCK, axis, True)
    if block[0] * block[1] * block[2] > max_threads:
        return code(E_BLOCK, 3, True)
    if smem < 0:
        return code(E_SHARED_MEM, DETAIL_NEGATIVE, True)
    if smem > max_smem:
        return code(E_SHARED_MEM, 0, True)
    return LAUNCHED


def falls_through(c: int) -> bool:
    """Whether a chain tries its next member after outcome ``c`` (a device-limit error)."""
    return c < 0 and category(c) in {ERRORS[n][0] for n in FALLS_THROUGH}


def chain_pick(codes: Sequence[int | None]) -> int | None:
    """The member whose outcome a fallback chain (or dispatcher) returns, from its members' plan
    codes in order (None: a member the dtype keys leave out): the first that launches or stops
    with an error that does not fall through; else, none applying, the last member present on
    the target, the absent ones passed over so that the reason is a real one; else (every member
    absent) the last considered; None when none is considered."""
    considered = [i for i, c in enumerate(codes) if c is not None]
    for i in considered:
        c = codes[i]
        if c is not None and c <= 0 and not falls_through(c):
            return i
    present = [i for i in considered if not (codes[i] > 0 and category(codes[i]) == NL_ABSENT)]  # type: ignore[operator,arg-type]
    return (present or considered or [None])[-1]


def table_blocks_per_sm(table: Mapping[str, int], block: Sequence[int], smem: int) -> int:
    """``kernel.blocks_per_sm`` without a GPU: a bound from the target's table (kg_rt_blocks_per_sm
    in runtime.cpp does the same). Threads are counted in whole warps, each block's shared memory
    with the reserved per-block amount; registers and static shared memory are not counted, so
    the device's occupancy may be lower. 0 when the block or shared memory does not fit."""
    threads = block[0] * block[1] * block[2]
    if min(block) < 1 or threads > table["max_threads_per_block"] or not 0 <= smem <= table["max_shared_mem_optin"]:
        return 0
    warps = (threads + 31) // 32
    n = min(table["max_blocks_per_sm"], table["max_threads_per_sm"] // (warps * 32))
    per_block = smem + table["reserved_shared_mem_per_block"]  # (0: no shared memory, none reserved)
    return min(n, table["max_shared_mem_per_sm"] // per_block) if per_block else n


def reason(kernel: object, c: int, target: str = "", kill_switch: str | None = None) -> str | None:
    """The text kg_rt_describe gives after the kernel's name for an outcome whose detail names a
    clause, an axis or the kernel's switch ("not launched: rows <= 8 is false", "invalid
    arguments: requires k >= 1"), or None for the other codes."""
    k: Any = kernel
    cat, d = category(c), detail(c)
    if c > 0:
        texts = {
            NL_KILLED: lambda: f"kill switch {kill_switch} is set",
            NL_ABSENT: lambda: f"absent on target {target}",
            NL_EMPTY: lambda: f"empty work ({k.skip_if[d].text})",
            NL_CLAUSE: lambda: f"{k.applies_if[d].text} is false",
            NL_NO_VARIANT: lambda: f"no variant for this {k.variants.on if k.variants else 'value'}",
            NL_EMPTY_GRID: lambda: f"grid {'xyz'[d]} is 0",
        }
        return f"not launched: {texts[cat]()}" if cat in texts else None
    if c < 0 and cat == E_REQUIRES:
        return f"invalid arguments: requires {k.requires[d].text}"
    return None


_AXES = ("x", "y", "z", "x*y*z")


def describe(kernel: object, c: int, target: str = "", kill_switch: str | None = None,
             shared_mem: int | None = None, max_shared_mem: int | None = None, keys: str = "?",
             grid: Sequence[int] | None = None, block: Sequence[int] | None = None,
             expression: str | None = None) -> str:
    """The text kg_rt_describe (runtime.cpp) gives after "<kernel>: " for outcome ``c``, for
    every code a plan returns: what the Python module's reasons say, word for word
    (tests/unit/test_plan_parity.py holds the two together). The runtime's reason has only the
    code; given, these add what the plan computed: ``shared_mem`` and ``max_shared_mem`` the
    byte counts to the shared-memory error, ``grid`` and ``block`` the value of a negative
    dimension, ``expression`` the expression that failed to an expression error
    (:func:`failed_expression`). ``keys``: a chain's dtype keys, for NO_INSTANCE."""
    text = reason(kernel, c, target, kill_switch)
    if text is not None:
        return text
    cat, d = category(c), detail(c)
    if c == LAUNCHED:
        return "launched"
    if c > 0:
        if cat == NL_NO_INSTANCE:
            return f"not launched: no instantiation for this dtype ({keys})"
        if cat == NL_UNALIGNED:
            return (f"not launched: the array of tensor map {d} is not 16-byte aligned, or its row stride is not a "
                    "multiple of 16 bytes")
        return f"not launched (code {c})"
    if cat == E_EXPR:
        name = next((t for v, t in EXPR_ERRORS.values() if v == d), "invalid value")
        return f"invalid arguments: {name} while computing the launch" + (f", in {expression}" if expression else "")
    axis = d & 3

    def value(dims: Sequence[int] | None) -> str:
        return f" ({dims[axis]})" if dims is not None and axis < 3 else ""

    if cat == E_GRID:
        if d & DETAIL_NEGATIVE:
            return f"grid {_AXES[axis]} is negative{value(grid)}"
        return f"grid {_AXES[axis]} exceeds the CUDA limit ({GRID_LIMITS[min(axis, 2)]})"
    if cat == E_BLOCK:
        if d & DETAIL_NEGATIVE:
            return f"block {_AXES[axis]} is negative{value(block)}"
        if d & DETAIL_ZERO:
            return f"block {_AXES[axis]} is 0"
        return f"block {_AXES[axis]} is outside the target's limits"
    if cat == E_SHARED_MEM:
        if d & DETAIL_NEGATIVE:
            return "dynamic shared memory is negative" + (f" ({shared_mem} bytes)" if shared_mem is not None else "")
        text = "dynamic shared memory exceeds the device's opt-in limit"
        if shared_mem is not None:
            text += f" ({shared_mem} bytes" + (f"; the limit is {max_shared_mem})" if max_shared_mem is not None
                                               else ")")
        return text
    if cat == E_DEVICE:
        return f"built for target {target} but the current device has compute capability {d // 10}.{d % 10}"
    if cat == E_LAUNCH_BOUNDS:
        return "the block has more threads than the kernel's __launch_bounds__"
    if cat == E_CLUSTER:
        if d == 3:
            return "the cluster has more blocks than the device allows (or a dimension < 1)"
        return f"grid {_AXES[d & 3]} is not a whole number of clusters"
    if cat == E_CORESIDENT:
        return ("the cooperative grid has more blocks than can be co-resident "
                "(device.sm_count * kernel.blocks_per_sm)")
    if cat == E_DEVICE_SCALAR:
        return (f"argument {d + 1} is a device scalar: it must point to one element in device memory (null, "
                "host or unregistered memory given)")
    if cat == E_TENSOR_MAP:
        return (f"the driver refused to encode a tensor map (CUresult {d}; 0: no cuTensorMapEncodeTiled in "
                "this driver)")
    if cat == E_CUDA:
        return f"CUDA error {d}"
    return f"error (code {c})"


def failed_expression(kernel: object, c: int, env: Mapping[str, int],
                      device: Mapping[str, int] | None = None) -> str | None:
    """Which of the kernel's expressions made outcome ``c`` an expression error, for ``env`` (the
    argument values and the module's constants), as :func:`describe` names it: "grid x 'n // 0'",
    "requires[0] 'n % d == 0'", "let tiles 'n // 0' (in grid x)", "argument n (...)". None
    when ``c`` is not an expression error or no expression fails.

    The expressions are evaluated in plan order, each on its own, up to where the plan checks
    its status and stops: a u64 argument's conversion, each clause, then grid, block and shared
    memory together, then the launch-time cluster. Of those that fail, the first with the error
    of ``c`` is named (the plan keeps the highest error), else the first. ``device``: the
    target's table (:func:`target_table`), for the device names."""
    if c >= 0 or category(c) != E_EXPR:
        return None
    from kernelgen import expr  # the spec's trees; the plan itself takes evaluators

    k: Any = kernel
    clauses = steps(k)
    cluster = tuple(k.launch.cluster or ()) if k.launch is not None else ()
    trees = [*k.grid, *k.block, k.shared_mem, *(clause.expr for _, clause in clauses), *cluster]
    used = set().union(*(t.names() for t in trees))
    full = dict(env)
    failed: list[tuple[str, int]] = []  # (what, its error), in plan order
    for a in k.int_args:
        v = full.get(a.name)
        if a.name in used and isinstance(v, int) and v > pyexpr.INT64_MAX:
            failed.append((f"argument {a.name} ({v} is over 2**63 - 1, the limit of 64-bit arithmetic)",
                           pyexpr.OVERFLOW))
            full[a.name] = 0
    if device is not None:
        full.update(device_env(device))
        block, smem = [_value(expr, n, full) for n in k.block], _value(expr, k.shared_mem, full)
        fit = all(isinstance(b, int) for b in block) and isinstance(smem, int)
        full["kernel.blocks_per_sm"] = table_blocks_per_sm(device, block, smem) if fit else 0  # type: ignore[arg-type]

    def check(where: str, text: str, tree: Any) -> None:
        error = _error(expr, tree, full)
        if error:
            let = next((name for name, t in k.lets if _contains(tree, t) and _error(expr, t, full)), None)
            shown = f"{where} '{text}'" if let is None else \
                f"let {let} '{expr.to_text(dict(k.lets)[let])}' (in {where})"
            failed.append((shown, error))

    def pick() -> str | None:
        return next((what for what, e in failed if e == detail(c)), failed[0][0]) if failed else None

    for step, clause in clauses:
        check(f"{step.family.attr}[{step.index}]", clause.text, clause.expr)
        if failed:
            return pick()
        if bool(_value(expr, clause.expr, full)) == step.decides_when:
            return None  # the plan stops here
    if k.variants and full.get(k.variants.on) not in {v for v, _ in k.variants.symbols}:
        return None
    for axis, tree in zip("xyz", k.grid):
        check(f"grid {axis}", expr.to_text(tree), tree)
    for axis, tree in zip("xyz", k.block):
        check(f"block {axis}", expr.to_text(tree), tree)
    check("shared_mem", expr.to_text(k.shared_mem), k.shared_mem)
    if not failed:
        for axis, tree in zip("xyz", cluster):
            check(f"cluster {axis}", expr.to_text(tree), tree)
    return pick()


def _error(expr: Any, tree: Any, env: Mapping[str, int]) -> int:
    """The error evaluating ``tree`` alone gives (0: none, or a name without a value)."""
    own = pyexpr.Status()
    try:
        expr.evaluate(tree, env, own)
    except KeyError:
        return 0
    return own.code


def _value(expr: Any, tree: Any, env: Mapping[str, int]) -> int | bool | None:
    """``tree``'s value, or None where it cannot be evaluated."""
    own = pyexpr.Status()
    try:
        v = expr.evaluate(tree, env, own)
    except KeyError:
        return None
    return None if own.code else v


def _contains(tree: Any, part: Any) -> bool:
    """Whether expression ``part`` is written out in ``tree`` (as a let name is where it is used)."""
    stack = [tree]
    while stack:
        n = stack.pop()
        if n == part:
            return True
        stack.extend(n.children())
    return False


def int_argument_problem(scalar: object, value: int) -> str | None:
    """Why the Python module refuses integer ``value`` for an integer argument of type
    ``scalar`` (convert_scalar in py_scalars.cpp: "n: 4294967296 is out of range for u32
    [0, 2**32-1]"), or None when it takes it. bool arguments take 0 and 1."""
    s: Any = scalar
    if s.kind == "bool":
        return None if value in (0, 1) else f"expected a bool (True, False, 0 or 1), got {value}"
    if not s.lo <= value <= s.hi:
        return f"{value} is out of range for {s.name} {s.range_text}"
    return None


def target_table(target: object) -> dict[str, int]:
    """A target's device table as the runtime holds it (kg_device_values)."""
    t = target
    return {
        "sm_count": t.sm_count,  # type: ignore[attr-defined]
        "max_shared_mem_optin": t.max_shared_mem_per_block_optin,  # type: ignore[attr-defined]
        "max_shared_mem_per_sm": t.smem_per_sm,  # type: ignore[attr-defined]
        "max_threads_per_sm": t.max_threads_per_sm,  # type: ignore[attr-defined]
        "max_threads_per_block": t.max_threads_per_block,  # type: ignore[attr-defined]
        "max_blocks_per_sm": t.max_blocks_per_sm,  # type: ignore[attr-defined]
        "reserved_shared_mem_per_block": t.reserved_shared_mem_per_block,  # type: ignore[attr-defined]
        "max_cluster_size": t.max_cluster_size,  # type: ignore[attr-defined]
    }


@dataclass(frozen=True)
class LaunchChecks:
    """What a plan checks after the geometry: ``max_threads`` from __launch_bounds__ (0: none),
    the cluster (compile-time dims, or an evaluator of the launch-time ones), and whether the
    grid must be co-resident (cooperative launch)."""

    max_threads: int = 0
    cluster: tuple[int, int, int] | Callable[[pyexpr.Status, Mapping[str, int]], tuple] | None = None
    cooperative: bool = False


def launch_code(grid: Sequence[int], block: Sequence[int], cluster: Sequence[int] | None, checks: LaunchChecks,
                blocks_per_sm: int, table: Mapping[str, int]) -> int:
    """The checks of :class:`LaunchChecks`, in order, on a plan whose geometry passed
    (kg::check_launch in runtime.h does the same)."""
    if checks.max_threads and block[0] * block[1] * block[2] > checks.max_threads:
        return code(E_LAUNCH_BOUNDS, 0, True)
    if cluster is not None:
        if min(cluster) < 1 or cluster[0] * cluster[1] * cluster[2] > table["max_cluster_size"]:
            return code(E_CLUSTER, 3, True)
        for axis in range(3):
            if grid[axis] % cluster[axis]:
                return code(E_CLUSTER, axis, True)
    if checks.cooperative and grid[0] * grid[1] * grid[2] > table["sm_count"] * blocks_per_sm:
        return code(E_CORESIDENT, 0, True)
    return LAUNCHED


DEVICE_ENV = {
    "device.sm_count": "sm_count",
    "device.max_shared_mem_optin": "max_shared_mem_optin",
    "device.max_shared_mem_per_sm": "max_shared_mem_per_sm",
    "device.max_threads_per_sm": "max_threads_per_sm",
    "device.max_threads_per_block": "max_threads_per_block",
}


def device_env(table: Mapping[str, int]) -> dict[str, int]:
    """The device names' values (device.sm_count, ...) from a device table (:func:`target_table`)."""
    return {name: table[key] for name, key in DEVICE_ENV.items()}


Evaluator = Callable[[pyexpr.Status, Mapping[str, int]], int]
NONE3 = (0, 0, 0)
NO_GEOMETRY = (None, None, None)  # an expression error's: no geometry was computed


@dataclass(frozen=True)
class Geometry:
    """A kernel's geometry evaluator, (st, env) -> (grid, block, shared_mem), with the checks
    its plan makes after the geometry: given as ``geometry`` to :func:`expect`, those checks
    are made unless ``launch`` says otherwise, so that no caller leaves them out by mistake."""

    evaluate: Callable[[pyexpr.Status, Mapping[str, int]], tuple[tuple, tuple, int]]
    launch: LaunchChecks = LaunchChecks()

    def __call__(self, st: pyexpr.Status, env: Mapping[str, int]) -> tuple[tuple, tuple, int]:
        return self.evaluate(st, env)


def expect(
    clauses: Iterable[tuple[int, bool, Evaluator]],
    env: Mapping[str, int],
    *,
    u64: Iterable[str] = (),
    variant: tuple[str, Iterable[int]] | None = None,
    geometry: Callable[[pyexpr.Status, Mapping[str, int]], tuple[tuple, tuple, int]],
    limits: tuple[Sequence[int], int, int],
    device: Mapping[str, int] | None = None,
    launch: LaunchChecks | None = None,
    occupancy: Callable[[pyexpr.Status, Mapping[str, int]], tuple[tuple, int]] | None = None,
) -> tuple[int, tuple, tuple, int]:
    """(code, grid, block, shared_mem) of a plan for ``env``, step for step as the C++ plan;
    an expression error has None for grid, block and shared memory (:data:`NO_GEOMETRY`), a
    clause or the variant lookup that decides zeros.

    ``clauses``: (code, decides_when, evaluator) in plan order; ``u64``: u64 arguments that
    expressions use (converted to signed 64-bit, an overflow above 2**63 - 1); ``variant``:
    (argument, values that have a variant); ``geometry``: evaluates (grid, block, smem);
    ``limits``: (max block dims, max threads per block, max shared memory); ``device``: the
    device values (:func:`target_table`) when the kernel uses device names or launch checks;
    ``launch``: the checks after the geometry (None: those of ``geometry`` when it is a
    :class:`Geometry`, else none); ``occupancy``: evaluates (block, shared memory)
    when the plan needs ``kernel.blocks_per_sm``, computed before the clauses from block and
    shared memory evaluated on their own (0 when they cannot be evaluated or do not fit).
    """
    if launch is None:
        launch = geometry.launch if isinstance(geometry, Geometry) else LaunchChecks()
    st = pyexpr.Status()
    full = _signed(st, env, u64)
    blocks_per_sm = 0
    if device is not None:
        full.update(device_env(device))
        if occupancy is not None:
            own = pyexpr.Status()
            block, smem = occupancy(own, full)
            if not own.code:
                blocks_per_sm = table_blocks_per_sm(device, [int(b) for b in block], int(smem))
        full["kernel.blocks_per_sm"] = blocks_per_sm
    for clause_code, decides_when, evaluate in clauses:
        holds = bool(evaluate(st, full))
        if st.code:
            return code(E_EXPR, st.code, True), NO_GEOMETRY, NO_GEOMETRY, None
        if holds == decides_when:
            return clause_code, NONE3, NONE3, 0
    if variant is not None and full[variant[0]] not in set(variant[1]):
        return code(NL_NO_VARIANT), NONE3, NONE3, 0
    grid, block, smem = geometry(st, full)
    if st.code:
        return code(E_EXPR, st.code, True), NO_GEOMETRY, NO_GEOMETRY, None
    grid, block = tuple(int(g) for g in grid), tuple(int(b) for b in block)
    outcome = geometry_code(grid, block, int(smem), *limits)
    if occupancy is not None and device is not None and outcome > 0 and category(outcome) == NL_EMPTY_GRID \
            and blocks_per_sm == 0:
        # a grid sized by the co-residency limit is 0 because the block or shared memory does not
        # fit: that error is the outcome (kg::check_geometry_occupancy)
        outcome = block_code(block, int(smem), *limits) or outcome
    if outcome == LAUNCHED and (launch.max_threads or launch.cluster is not None or launch.cooperative):
        cluster = _cluster(launch.cluster, st, full)
        if st.code:
            return code(E_EXPR, st.code, True), NO_GEOMETRY, NO_GEOMETRY, None
        table = device if device is not None else {"max_cluster_size": 8, "sm_count": 1}
        outcome = launch_code(grid, block, cluster, launch, blocks_per_sm, table)
    return outcome, grid, block, int(smem)


def expect_cluster(
    cluster: tuple[int, int, int] | Callable[[pyexpr.Status, Mapping[str, int]], tuple] | None,
    env: Mapping[str, int], u64: Iterable[str] = (),
) -> tuple[int, int, int] | None:
    """The plan's ``cluster`` where it launches: the spec's cluster, or its ``launch.cluster``
    evaluated for ``env`` (None without one, or when evaluating fails)."""
    st = pyexpr.Status()
    out = _cluster(cluster, st, _signed(st, env, u64))
    return None if st.code else out


def _signed(st: pyexpr.Status, env: Mapping[str, int], u64: Iterable[str]) -> dict[str, int]:
    """``env`` with its u64 arguments as the plan reads them (signed 64-bit; an overflow in ``st``)."""
    full = dict(env)
    for name in u64:
        full[name] = pyexpr.from_u64(st, full[name])
    return full


def _cluster(cluster, st: pyexpr.Status, full: Mapping[str, int]):
    """A kernel's cluster: the spec's (or None), or a launch-time one evaluated for ``full``."""
    if not callable(cluster):
        return cluster
    x, y, z = (int(c) for c in cluster(st, full))
    return (x, y, z)


def codes_header() -> dict[str, object]:
    """What the generated kernelgen/plan_codes.h defines."""
    return {
        "not_launched": [(f"KG_NL_{k}", v, doc) for k, (v, doc) in NOT_LAUNCHED.items()],
        "errors": [(f"KG_E_{k}", v, doc) for k, (v, doc) in ERRORS.items()],
        "expr_errors": [(f"KG_EXPR_{k}", v, doc) for k, (v, doc) in EXPR_ERRORS.items()],
        "detail_flags": [(f"KG_DETAIL_{k}", v, doc) for k, (v, doc) in DETAIL_FLAGS.items()],
        "grid_limits": GRID_LIMITS,
        "falls_through": [f"KG_E_{k}" for k in FALLS_THROUGH],
    }
