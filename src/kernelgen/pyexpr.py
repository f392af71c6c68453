"""Checked 64-bit integer helpers: the Python side of the expression semantics.

They mirror the ``kg::x_*`` helpers of ``kernelgen/runtime.h`` exactly. A failing
operation (overflow, division by zero, shift count outside 0..62) records its error in a
:class:`Status` and yields 0, and evaluation goes on, as in C++; the status keeps the
highest error code seen, so the outcome does not depend on the order in which operands are
evaluated. :meth:`Status.check` raises :class:`ExprError` when anything failed.
"""

from __future__ import annotations

from kernelgen.errors import ExprError

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

OVERFLOW, DIV_ZERO, SHIFT = 1, 2, 3
_MESSAGES = {OVERFLOW: "integer overflow", DIV_ZERO: "division by zero", SHIFT: "shift count outside 0..62"}


class Status:
    __slots__ = ("code",)

    def __init__(self) -> None:
        self.code = 0

    def fail(self, code: int) -> int:
        self.code = max(self.code, code)
        return 0

    def check(self) -> None:
        if self.code:
            raise ExprError(_MESSAGES[self.code], self.code)


def _fit(st: Status, v: int) -> int:
    if v < INT64_MIN or v > INT64_MAX:
        return st.fail(OVERFLOW)
    return v


def from_u64(st: Status, a: int) -> int:
    return st.fail(OVERFLOW) if a > INT64_MAX else a


def neg(st: Status, a: int) -> int:
    return _fit(st, -a)


def add(st: Status, a: int, b: int) -> int:
    return _fit(st, a + b)


def sub(st: Status, a: int, b: int) -> int:
    return _fit(st, a - b)


def mul(st: Status, a: int, b: int) -> int:
    return _fit(st, a * b)


def floordiv(st: Status, a: int, b: int) -> int:
    if b == 0:
        return st.fail(DIV_ZERO)
    return _fit(st, a // b)


def mod(st: Status, a: int, b: int) -> int:
    if b == 0:
        return st.fail(DIV_ZERO)
    return a % b


def div_ceil(st: Status, a: int, b: int) -> int:
    if b == 0:
        return st.fail(DIV_ZERO)
    return _fit(st, -((-a) // b))


def shl(st: Status, a: int, n: int) -> int:
    if not 0 <= n <= 62:
        return st.fail(SHIFT)
    return _fit(st, a << n)


def shr(st: Status, a: int, n: int) -> int:
    if not 0 <= n <= 62:
        return st.fail(SHIFT)
    return a >> n


def bit_and(st: Status, a: int, b: int) -> int:
    return a & b


def bit_or(st: Status, a: int, b: int) -> int:
    return a | b


def min_(st: Status, *args: int) -> int:
    return min(args)


def max_(st: Status, *args: int) -> int:
    return max(args)

