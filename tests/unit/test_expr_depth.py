"""The nesting limit of expressions is the depth of the parsed tree, which the generated C++ and
Python write out as nested calls: each arithmetic operator of a chain is a level, parentheses
alone are none, and the message says so."""

from __future__ import annotations

import pytest

from kernelgen import expr

NAMES = {"n": object()}


def _chain(terms: int) -> str:
    return "n" + " + 1" * (terms - 1)


def test_a_chain_of_more_operators_than_the_limit_is_refused_saying_each_counts() -> None:
    with pytest.raises(expr.ParseError) as err:
        expr.parse(_chain(expr.MAX_DEPTH + 2), NAMES, expr.Ty.INT)
    assert str(err.value).startswith(f"expression is nested more than {expr.MAX_DEPTH} levels deep (each "
                                     "arithmetic operator of a chain counts as a level: a + b + c is (a + b) + c)")
    assert "let" in err.value.hint


def test_the_longest_chain_allowed_evaluates_and_emits() -> None:
    node = expr.parse(_chain(expr.MAX_DEPTH + 1), NAMES, expr.Ty.INT)
    assert expr.evaluate(node, {"n": 1}) == expr.MAX_DEPTH + 1
    code = compile(expr.to_python(node, lambda s: s), "<expr>", "eval")
    assert eval(code, {"_x": expr.pyexpr, "_st": expr.pyexpr.Status(), "n": 1}) == expr.MAX_DEPTH + 1
    assert expr.to_cpp(node, lambda s: s).count("kg::x_add(") == expr.MAX_DEPTH


def test_parentheses_alone_are_no_level() -> None:
    """100 parentheses around a name, or around the longest chain allowed, nest nothing."""
    assert expr.to_text(expr.parse("(" * 100 + "n" + ")" * 100, NAMES, expr.Ty.INT)) == "n"
    chain = expr.parse("(" * 100 + _chain(expr.MAX_DEPTH + 1) + ")" * 100, NAMES, expr.Ty.INT)
    assert expr.evaluate(chain, {"n": 0}) == expr.MAX_DEPTH
    with pytest.raises(expr.ParseError, match="counts as a level"):
        expr.parse("(" * 50 + _chain(expr.MAX_DEPTH + 2) + ")" * 50, NAMES, expr.Ty.INT)


def test_and_or_chains_and_function_arguments_are_one_level() -> None:
    """`and`/`or` take any number of operands in one node, and min/max their arguments."""
    conds = " and ".join(["n > 0"] * 40)
    assert expr.evaluate(expr.parse(conds, NAMES, expr.Ty.BOOL), {"n": 1}) is True
    assert expr.evaluate(expr.parse("max(n, 1, 2, 3, 4, 5, 6, 7)", NAMES, expr.Ty.INT), {"n": 0}) == 7
