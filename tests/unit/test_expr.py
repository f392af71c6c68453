"""The expression language: whitelist parsing, typing, and 64-bit floor semantics."""

from __future__ import annotations

import pytest

from kernelgen import expr, pyexpr
from kernelgen.errors import ExprError

NAMES = {"n": 1, "m": 1, "rows": 1, "K": 1}


def ev(text: str, **env: int) -> int | bool:
    try:
        tree = expr.parse(text, NAMES, expr.Ty.INT)
    except expr.ParseError:
        tree = expr.parse(text, NAMES, expr.Ty.BOOL)
    return expr.evaluate(tree, env)


@pytest.mark.parametrize(
    "text,env,want",
    [
        ("n + m * 2", {"n": 3, "m": 4}, 11),
        ("div_ceil(n, 128)", {"n": 129}, 2),
        ("div_ceil(n, 128)", {"n": 0}, 0),
        ("min(n, m, 5)", {"n": 9, "m": 7}, 5),
        ("max(n, m)", {"n": -3, "m": -7}, -3),
        ("n // m", {"n": -7, "m": 2}, -4),  # floor, as in Python
        ("n % m", {"n": -7, "m": 2}, 1),
        ("n << 4", {"n": 3}, 48),
        ("n >> 1", {"n": -3}, -2),
        ("n & 7 | m", {"n": 13, "m": 16}, 21),
        ("-n + 1", {"n": 4}, -3),
        ("n % 8 == 0 and m > 0", {"n": 16, "m": 1}, True),
        ("not n == 0 or m == 1", {"n": 0, "m": 2}, False),
        ("256 if n >= 4 else 128", {"n": 4}, 256),
        ("256 if n >= 4 else 128", {"n": 3}, 128),
        ("1 if n > 0 else 2 if m > 0 else 3", {"n": 0, "m": 1}, 2),  # right-associative
        ("(1 if n > 0 else 2) * 10 + 1", {"n": 1}, 11),
        ("n > 0 if m == 0 else n < 0", {"n": 1, "m": 0}, True),  # boolean operands
    ],
)
def test_evaluates_with_floor_semantics(text: str, env: dict[str, int], want: int | bool) -> None:
    assert ev(text, **{**dict.fromkeys(NAMES, 0), **env}) == want


@pytest.mark.parametrize(
    "text,message",
    [
        ("n / 2", "not allowed"),
        ("n ** 2", "not allowed"),
        ("n.real", "expressions have no attributes or methods; 'n.real' reads an attribute of 'n'"),
        ("n.bit_length()", "expressions have no attributes or methods; 'n.bit_length[(][)]' calls a method of 'n'"),
        ("div_ceil(p . m, 128)", "expressions have no attributes or methods; 'p.m' reads an attribute of 'p'"),
        ("(n + 1).bit_length()", "expressions have no attributes or methods; '[(]n [+] 1[)].bit_length[(][)]' calls"),
        ("1.e5", "'1.e5' is not a decimal integer"),
        ("0x10", "'0x10' is not a decimal integer"), ("0o17 + n", "'0o17' is not a decimal integer"),
        ("1_000", "'1_000' is not a decimal integer"), ("010", "'010' is not a decimal integer"),
        ("1e3", "'1e3' is not a decimal integer"), ("min(*n)", "not unpacked with '[*]'"),
        ("n == 0", "but an integer expression is needed"),
        ("__import__('os')", "not allowed"),
        ("abs(n)", "unknown function 'abs'"),
        ("q + 1", "undefined name 'q'"),
        ("n < m < 3", "chained"),
        ("lambda: 1", "not allowed"),
        ("n if m else 1", "condition of 'if' must be boolean"),
        ("n if m > 0 else m > 1", "of one type"),
        ("1.5 * n", "not allowed"),
        ("n; m", "not allowed"),
        ("n\\\nm", "not allowed"),
        ("n # comment", "not allowed"),
        ("n\u2028+ 1", "not allowed"),
        ("n\x00", "not allowed"),
        ("{{ n }}", "not allowed"),
        ("9223372036854775808", "does not fit in 64 bits"),
        ("-(-9223372036854775808)", "is 9223372036854775808, which does not fit in 64 bits"),
        ("n + --9223372036854775808", "does not fit in 64 bits"),
        ("div_ceil(n)", "takes 2 arguments"),
        ("min(n=1, m=2)", "keyword"),
        ("n and m", "must be boolean"),
        ("not n", "must be boolean"),
        ("", "empty"),
        ("(n + " * 40 + "n" + ")" * 40, "nested"),
    ],
)
def test_rejects_outside_the_whitelist(text: str, message: str) -> None:
    with pytest.raises(expr.ParseError, match=message):
        expr.parse(text, NAMES, expr.Ty.INT)


def test_line_breaks_and_tabs_are_spaces() -> None:
    """A long expression over several lines (a YAML block scalar keeps the breaks of its
    more-indented lines) means what it means on one line."""
    one = expr.parse("max(n + m * 2, div_ceil(K, 256) + 1)", NAMES, expr.Ty.INT)
    split = expr.parse("max(n + m * 2,\n      div_ceil(K, 256)\t+ 1)\r\n", NAMES, expr.Ty.INT)
    assert expr.to_text(split) == expr.to_text(one)
    assert expr.evaluate(split, {"n": 1, "m": 2, "rows": 0, "K": 4096}) == 17
    with pytest.raises(expr.ParseError, match="not allowed"):
        expr.parse("n\\\n+ m", NAMES, expr.Ty.INT)  # a line continuation is still not


def test_predicate_must_be_boolean_and_geometry_integer() -> None:
    with pytest.raises(expr.ParseError, match="boolean expression is needed"):
        expr.parse("n + 1", NAMES, expr.Ty.BOOL)
    with pytest.raises(expr.ParseError, match="integer expression is needed"):
        expr.parse("n == 1", NAMES, expr.Ty.INT)


@pytest.mark.parametrize(
    "text,env,message",
    [
        ("n // m", {"n": 1, "m": 0}, "division by zero"),
        ("n % m", {"n": 1, "m": 0}, "division by zero"),
        ("div_ceil(n, m)", {"n": 1, "m": 0}, "division by zero"),
        ("n * m", {"n": 2**62, "m": 4}, "overflow"),
        ("n + m", {"n": 2**63 - 1, "m": 1}, "overflow"),
        ("n << m", {"n": 1, "m": 63}, "shift count"),
        ("n << m", {"n": 2**40, "m": 30}, "overflow"),
        ("n >> m", {"n": 1, "m": -1}, "shift count"),
    ],
)
def test_errors_instead_of_wrapping(text: str, env: dict[str, int], message: str) -> None:
    tree = expr.parse(text, NAMES, expr.Ty.INT)
    with pytest.raises(ExprError, match=message):
        expr.evaluate(tree, {**dict.fromkeys(NAMES, 0), **env})


def test_emitters_come_from_the_tree_not_the_text() -> None:
    tree = expr.parse("div_ceil( n ,128 )*  m", NAMES, expr.Ty.INT)
    assert expr.to_text(tree) == "div_ceil(n, 128) * m"
    cpp = expr.to_cpp(tree, lambda n: f"int64_t{{{n}}}")
    assert cpp == "kg::x_mul(kg::x_div_ceil(int64_t{n}, int64_t{128}, kg_err), int64_t{m}, kg_err)"
    py = expr.to_python(tree, lambda n: n)
    assert py == "_x.mul(_st, _x.div_ceil(_st, n, 128), m)"
    st = pyexpr.Status()
    assert eval(py, {"_x": pyexpr, "_st": st, "n": 300, "m": 3}) == 9
    assert st.code == 0


def test_errors_do_not_depend_on_evaluation_order() -> None:
    # C++ leaves the order of function arguments unspecified: the highest error code wins.
    tree = expr.parse("max(a, -b) * (5 << c)", {"a": 0, "b": 0, "c": 0}, expr.Ty.INT)
    with pytest.raises(ExprError) as info:
        expr.evaluate(tree, {"a": 1, "b": -(2**63), "c": 99})
    assert info.value.code == pyexpr.SHIFT


def test_a_conditional_evaluates_only_the_chosen_operand() -> None:
    """As C++'s ?: does: the operand not chosen cannot fail the evaluation."""
    tree = expr.parse("n // m if m != 0 else n", NAMES, expr.Ty.INT)
    assert expr.evaluate(tree, {"n": 7, "m": 0}) == 7
    assert expr.evaluate(tree, {"n": 7, "m": 2}) == 3
    assert expr.to_text(tree) == "(n // m) if (m != 0) else n"
    assert expr.to_cpp(tree, lambda x: x) == "((m != int64_t{0}) ? kg::x_floordiv(n, m, kg_err) : n)"
    st = pyexpr.Status()
    assert eval(expr.to_python(tree, lambda x: x), {"_x": pyexpr, "_st": st, "n": 7, "m": 0}) == 7
    assert st.code == 0


def test_names_lists_free_names() -> None:
    assert expr.parse("min(n, rows) + K", NAMES, expr.Ty.INT).names() == {"n", "rows", "K"}
