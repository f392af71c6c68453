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
3. grid, block and shared memory, checked by :func:`geometry_code`.

An expression error (overflow, division by zero, bad shift) at any step is an error outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

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
}
ERRORS = {
    "REQUIRES": (1, "a requires clause fails; detail is its index"),
    "EXPR": (2, "evaluating an expression failed; detail is KG_EXPR_*"),
    "GRID": (3, "a grid dimension is over the device limit; detail is the axis"),
    "BLOCK": (4, "a block dimension is out of range; detail is the axis, 3 = product"),
    "SHARED_MEM": (5, "dynamic shared memory over the device's opt-in limit"),
    "DEVICE": (6, "the current device is not the one this target was built for"),
    "CUDA": (7, "a CUDA call failed; detail is the cudaError_t"),
}
EXPR_ERRORS = {
    "OVERFLOW": (pyexpr.OVERFLOW, "integer overflow"),
    "DIV_ZERO": (pyexpr.DIV_ZERO, "division by zero"),
    "SHIFT": (pyexpr.SHIFT, "shift count outside 0..62"),
}

NL_KILLED, NL_ABSENT, NL_EMPTY, NL_CLAUSE, NL_NO_VARIANT, NL_EMPTY_GRID, NL_NO_INSTANCE = (
    v[0] for v in NOT_LAUNCHED.values())
E_REQUIRES, E_EXPR, E_GRID, E_BLOCK, E_SHARED_MEM, E_DEVICE, E_CUDA = (v[0] for v in ERRORS.values())

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
    """The outcome code of computed geometry; kg::check_geometry (runtime.h) does the same."""
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
    return LAUNCHED


Evaluator = Callable[[pyexpr.Status, Mapping[str, int]], int]
NONE3 = (0, 0, 0)


def expect(
    clauses: Iterable[tuple[int, bool, Evaluator]],
    env: Mapping[str, int],
    *,
    u64: Iterable[str] = (),
    variant: tuple[str, Iterable[int]] | None = None,
    geometry: Callable[[pyexpr.Status, Mapping[str, int]], tuple[tuple, tuple, int]],
    limits: tuple[Sequence[int], int, int],
) -> tuple[int, tuple, tuple, int]:
    """(code, grid, block, shared_mem) of a plan for ``env``, step for step as the C++ plan.

    ``clauses``: (code, decides_when, evaluator) in plan order; ``u64``: u64 arguments that
    expressions use (converted to signed 64-bit, an overflow above 2**63 - 1); ``variant``:
    (argument, values that have a variant); ``geometry``: evaluates (grid, block, smem);
    ``limits``: (max block dims, max threads per block, max shared memory).
    """
    st = pyexpr.Status()
    full = dict(env)
    for name in u64:
        full[name] = pyexpr.from_u64(st, full[name])
    for clause_code, decides_when, evaluate in clauses:
        holds = bool(evaluate(st, full))
        if st.code:
            return code(E_EXPR, st.code, True), NONE3, NONE3, 0
        if holds == decides_when:
            return clause_code, NONE3, NONE3, 0
    if variant is not None and full[variant[0]] not in set(variant[1]):
        return code(NL_NO_VARIANT), NONE3, NONE3, 0
    grid, block, smem = geometry(st, full)
    if st.code:
        return code(E_EXPR, st.code, True), NONE3, NONE3, 0
    grid, block = tuple(int(g) for g in grid), tuple(int(b) for b in block)
    return geometry_code(grid, block, int(smem), *limits), grid, block, int(smem)


def codes_header() -> dict[str, object]:
    """What the generated kernelgen/plan_codes.h defines."""
    return {
        "not_launched": [(f"KG_NL_{k}", v, doc) for k, (v, doc) in NOT_LAUNCHED.items()],
        "errors": [(f"KG_E_{k}", v, doc) for k, (v, doc) in ERRORS.items()],
        "expr_errors": [(f"KG_EXPR_{k}", v, doc) for k, (v, doc) in EXPR_ERRORS.items()],
        "grid_limits": GRID_LIMITS,
    }
