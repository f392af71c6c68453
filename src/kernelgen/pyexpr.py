"""Checked 64-bit integer helpers: the Python side of the expression semantics.

The generated C++ uses the ``kg::x_*`` helpers of ``kernelgen/runtime.h``, which follow the
same rules; tests compare the two. Each helper raises :class:`ExprError` where the C++ one
reports an error.
"""

from __future__ import annotations

from kernelgen.errors import ExprError

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def _fit(v: int, what: str) -> int:
    if v < INT64_MIN or v > INT64_MAX:
        raise ExprError(f"integer overflow in {what}")
    return v


def neg(a: int) -> int:
    return _fit(-a, "negation")


def add(a: int, b: int) -> int:
    return _fit(a + b, "addition")


def sub(a: int, b: int) -> int:
    return _fit(a - b, "subtraction")


def mul(a: int, b: int) -> int:
    return _fit(a * b, "multiplication")


def floordiv(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("division by zero")
    return _fit(a // b, "division")


def mod(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("modulo by zero")
    return a % b


def div_ceil(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("division by zero in div_ceil")
    return _fit(-((-a) // b), "div_ceil")


def shl(a: int, n: int) -> int:
    if not 0 <= n <= 62:
        raise ExprError(f"shift count {n} outside 0..62")
    return _fit(a << n, "left shift")


def shr(a: int, n: int) -> int:
    if not 0 <= n <= 62:
        raise ExprError(f"shift count {n} outside 0..62")
    return a >> n


def bit_and(a: int, b: int) -> int:
    return a & b


def bit_or(a: int, b: int) -> int:
    return a | b


def min_(*args: int) -> int:
    return min(args)


def max_(*args: int) -> int:
    return max(args)


def error_detail(exc: ExprError) -> int:
    """The KG_EXPR_* detail code the C++ side reports for the same failure."""
    text = str(exc)
    if "zero" in text:
        return 2
    if "shift" in text:
        return 3
    return 1
