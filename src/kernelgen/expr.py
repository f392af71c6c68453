"""The expression language of grid, block, shared memory, sizes and predicates.

Spec text is parsed once into a small tree of the node classes below; generated C++ and
Python are emitted from the tree, never from the text. The grammar is a whitelist:

* integer literals (decimal, at most 2**63 - 1), declared names;
* ``+ - * // % << >> & |`` and unary ``-``;
* comparisons ``== != < <= > >=`` (not chained), ``and``, ``or``, ``not``;
* ``div_ceil(a, b)``, ``min(a, b, ...)``, ``max(a, b, ...)``;
* ``a if c else b`` (``c`` boolean; ``a`` and ``b`` of one type; only the chosen one is
  evaluated).

Semantics, the same in C++ and Python: 64-bit signed integers; ``//`` and ``%`` floor
(Python's rules); ``div_ceil`` is the ceiling quotient. Overflow, division by zero and a
shift count outside 0..62 are errors, never wrapped values.
"""

from __future__ import annotations

import ast
import enum
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kernelgen import pyexpr
from kernelgen.wording import article

MAX_EXPR_LEN = 512
MAX_DEPTH = 32
# The most levels an expression may have once its `let` names are written out (the generated
# code writes them out: Python's parser takes at most 200 nested parentheses).
MAX_WRITTEN_DEPTH = 128
# The most nodes (names, literals, operators, calls) an expression may have once its `let` names
# are written out: a name used twice is written twice, so let over let can double the text at
# each level.
MAX_WRITTEN_NODES = 4096


class Ty(enum.Enum):
    INT = "integer"
    BOOL = "boolean"


class Node:
    """Base of expression nodes. Subclasses are frozen dataclasses."""

    ty: Ty

    def children(self) -> tuple[Node, ...]:
        return ()

    def depth(self) -> int:
        """Levels of the tree (a name or literal is 1), as the generated code nests them."""
        hit = self.__dict__.get("_kg_depth")
        if hit is None:
            hit = 1 + max((c.depth() for c in self.children()), default=0)
            object.__setattr__(self, "_kg_depth", hit)
        return hit

    def size(self) -> int:
        """Nodes of the tree as the generated code writes it out (a subtree shared by several
        parents counts once per parent); computed once per node, so a shared tree is not walked
        again."""
        hit = self.__dict__.get("_kg_size")
        if hit is None:
            hit = 1 + sum(c.size() for c in self.children())
            object.__setattr__(self, "_kg_size", hit)
        return hit

    def names(self) -> frozenset[str]:
        """Every name the expression reads (computed once per node: nodes are immutable)."""
        hit = self.__dict__.get("_kg_names")
        if hit is not None:
            return hit
        out: set[str] = set()
        stack: list[Node] = [self]
        while stack:
            n = stack.pop()
            if isinstance(n, Name):
                out.add(n.name)
            stack.extend(n.children())
        frozen = frozenset(out)
        object.__setattr__(self, "_kg_names", frozen)
        return frozen


@dataclass(frozen=True)
class Lit(Node):
    value: int
    ty: Ty = Ty.INT


@dataclass(frozen=True)
class Name(Node):
    name: str
    ty: Ty = Ty.INT


@dataclass(frozen=True)
class Neg(Node):
    operand: Node
    ty: Ty = Ty.INT

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Bin(Node):
    op: str  # one of ARITH
    left: Node
    right: Node
    ty: Ty = Ty.INT

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Cmp(Node):
    op: str  # one of COMPARE
    left: Node
    right: Node
    ty: Ty = Ty.BOOL

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Logic(Node):
    op: str  # "and" | "or"
    operands: tuple[Node, ...]
    ty: Ty = Ty.BOOL

    def children(self) -> tuple[Node, ...]:
        return self.operands


@dataclass(frozen=True)
class Not(Node):
    operand: Node
    ty: Ty = Ty.BOOL

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Call(Node):
    func: str  # one of FUNCTIONS
    args: tuple[Node, ...]
    ty: Ty = Ty.INT

    def children(self) -> tuple[Node, ...]:
        return self.args


@dataclass(frozen=True)
class Cond(Node):
    """``then if test else other``: only the chosen operand is evaluated (C++ ``?:``)."""
    test: Node
    then: Node
    other: Node
    ty: Ty = Ty.INT

    def children(self) -> tuple[Node, ...]:
        return (self.test, self.then, self.other)


# operator -> (C++ helper, Python helper, precedence-free text)
ARITH = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "//": "floordiv",
    "%": "mod",
    "<<": "shl",
    ">>": "shr",
    "&": "bit_and",
    "|": "bit_or",
}
_AST_ARITH = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
}
COMPARE = {"==", "!=", "<", "<=", ">", ">="}
_AST_COMPARE = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}
FUNCTIONS = {"div_ceil": (2, 2), "min": (2, 8), "max": (2, 8)}
_FUNC_HELPER = {"div_ceil": "div_ceil", "min": "min_", "max": "max_"}

_SPACES = {ord("\n"): " ", ord("\r"): " ", ord("\t"): " "}
_ALLOWED_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ +-*/%<>=!&|(),.")
# Dotted names (``device.sm_count``, ``kernel.blocks_per_sm``): values from the device.
_DOTTED_OWNERS = ("device", "kernel")
_DOTTED = re.compile(r"\b(?:device|kernel)\.(?=[A-Za-z_])")
# A '.' between a name (or a closing bracket) and a name: an attribute access (``p.m``,
# ``n.bit_length()``), which the parser refuses with its own message rather than as a character.
# A number as Python reads one: digits, then any letters, digits, '_' or '.' glued to them.
_NUMBER = re.compile(r"(?<![\w.])[0-9][\w.]*")
_ATTRIBUTE = re.compile(r"(?<=[A-Za-z0-9_)\]])\s*\.(?=\s*[A-Za-z_])")
# The message of an attribute access or method call; the loader names the argument's kind.
NO_ATTRIBUTES = "expressions have no attributes or methods"


class ParseError(ValueError):
    """Raised by :func:`parse`; the loader turns it into a located SpecError."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def parse(text: str, names: Mapping[str, object], expect: Ty) -> Node:
    """Parse ``text`` into a checked tree whose free names are all in ``names``.

    ``expect`` is the type the context needs (an integer for geometry, a boolean for a
    predicate). Raises :class:`ParseError` with a message fit for the user.

    Trees are immutable and depend on ``names`` only through which names exist, so a text
    parsed before is answered from a cache when all its names are in ``names`` (large specs
    repeat the same clauses across many kernels).
    """
    # (a struct field's name, p.rows, stands for the name ``names`` gives it, which differs between
    # kernels: such texts are parsed each time)
    cached = isinstance(text, str) and not _ATTRIBUTE.search(_DOTTED.sub("", text))
    hit = _PARSED.get((text, expect)) if cached else None
    if hit is not None and all(n in names for n in hit.names()):
        return hit
    node = _parse(text, names, expect)
    if cached:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[(text, expect)] = node
    return node


_PARSED: dict[tuple[str, Ty], Node] = {}
_PARSED_MAX = 1 << 16


def _parse(text: str, names: Mapping[str, object], expect: Ty) -> Node:
    if not isinstance(text, str):
        raise ParseError(f"expected an expression, got {type(text).__name__}")
    if len(text) > MAX_EXPR_LEN:
        raise ParseError(f"expression is {len(text)} characters long; the limit is {MAX_EXPR_LEN}",
                         "name its parts under the kernel's 'let' and use the names")
    # Line breaks and tabs are spaces: a long expression may span lines (a YAML block scalar
    # keeps the breaks of its more-indented lines).
    text = text.translate(_SPACES)
    bad = sorted({c for c in _ATTRIBUTE.sub("", _DOTTED.sub("", text)) if c not in _ALLOWED_CHARS or c == "."})
    if bad:
        shown = ", ".join(repr(c) for c in bad[:5])
        raise ParseError(
            f"character(s) {shown} are not allowed in an expression",
            "expressions use names, decimal integers, ( ) , and the operators + - * // % << >> & | == != < <= > >=",
        )
    if not text.strip():
        raise ParseError("empty expression")
    for m in _NUMBER.finditer(text):  # (Python's other spellings: 0x10, 0o20, 0b1, 1_000, 1e3, 010)
        if not re.fullmatch(r"0|[1-9][0-9]*", m.group()):
            raise ParseError(f"{m.group()!r} is not a decimal integer",
                             "expressions write integers in decimal digits alone (16, not 0x10, 020, 1_000 or 1e3)")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ParseError(f"syntax error in expression {text!r}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError):
        raise ParseError(f"cannot parse expression {text!r}") from None
    node = _convert(tree.body, names, 0)
    if node.ty is not expect:
        raise ParseError(f"expression {text!r} is {node.ty.value}, but {article(expect.value)} expression is "
                         "needed here")
    return node


# How an operator expressions refuse is written, for messages.
_OP_SPELLING: dict[type, str] = {
    ast.Div: "/", ast.Pow: "**", ast.MatMult: "@", ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^",
    ast.LShift: "<<", ast.RShift: ">>", ast.Invert: "~", ast.UAdd: "+", ast.Is: "is", ast.IsNot: "is not",
    ast.In: "in", ast.NotIn: "not in",
}


def _convert(n: ast.AST, names: Mapping[str, object], depth: int) -> Node:
    if depth > MAX_DEPTH:
        # The depth of the tree, which the generated C++ and Python write out as nested calls: each
        # operator of a chain is a level of its own (a + b + c is (a + b) + c), and parentheses
        # alone are none.
        raise ParseError(f"expression is nested more than {MAX_DEPTH} levels deep (each arithmetic operator of a "
                         "chain counts as a level: a + b + c is (a + b) + c)",
                         "name its parts under the kernel's 'let' and use the names")
    d = depth + 1
    if isinstance(n, ast.Constant):
        if isinstance(n.value, bool) or not isinstance(n.value, int):
            raise ParseError(f"only integer literals are allowed, not {n.value!r}")
        if n.value > pyexpr.INT64_MAX:
            raise ParseError(f"integer literal {n.value} does not fit in 64 bits")
        return Lit(n.value)
    if isinstance(n, ast.Name):
        if n.id not in names:
            hint = ""
            if names:
                from kernelgen.errors import did_you_mean

                hint = did_you_mean(n.id, list(names))
            raise ParseError(f"undefined name '{n.id}'", hint)
        return Name(n.id)
    if isinstance(n, ast.Attribute):
        path = _dotted_path(n)
        if path is not None and isinstance(names.get(path), str):
            return Name(names[path])  # type: ignore[arg-type]  # a field the names give a name (p.rows)
        if not isinstance(n.value, ast.Name) or n.value.id not in _DOTTED_OWNERS:
            raise _attribute_error(n)
        dotted = f"{n.value.id}.{n.attr}"
        if dotted not in names:
            from kernelgen.errors import did_you_mean

            known = [x for x in names if isinstance(x, str) and "." in x]
            if not known:
                raise ParseError(f"'{dotted}' is not available here",
                                 "device names are usable in grid, shared_mem and the clauses "
                                 "(skip_if, requires, applies_if)")
            raise ParseError(f"undefined name '{dotted}'", did_you_mean(dotted, known))
        return Name(dotted)
    if isinstance(n, ast.UnaryOp):
        if (isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant)
                and type(n.operand.value) is int and n.operand.value == -pyexpr.INT64_MIN):
            return Lit(pyexpr.INT64_MIN)  # the one literal whose magnitude alone does not fit
        operand = _convert(n.operand, names, d)
        if isinstance(n.op, ast.USub):
            _need(operand, Ty.INT, "unary -")
            if isinstance(operand, Lit):
                if -operand.value > pyexpr.INT64_MAX:  # -(-9223372036854775808)
                    raise ParseError(f"-({operand.value}) is {-operand.value}, which does not fit in 64 bits")
                return Lit(-operand.value)
            return Neg(operand)
        if isinstance(n.op, ast.Not):
            _need(operand, Ty.BOOL, "not")
            return Not(operand)
        raise ParseError(f"operator '{_OP_SPELLING.get(type(n.op), type(n.op).__name__)}' is not allowed")
    if isinstance(n, ast.BinOp):
        op = _AST_ARITH.get(type(n.op))
        if op is None:
            raise ParseError(
                f"operator '{_OP_SPELLING.get(type(n.op), type(n.op).__name__)}' is not allowed",
                "use // for integer division" if isinstance(n.op, ast.Div) else "",
            )
        left, right = _convert(n.left, names, d), _convert(n.right, names, d)
        _need(left, Ty.INT, op)
        _need(right, Ty.INT, op)
        return Bin(op, left, right)
    if isinstance(n, ast.Compare):
        if len(n.ops) != 1:
            raise ParseError("chained comparisons are not allowed", "write 'a < b and b < c'")
        op = _AST_COMPARE.get(type(n.ops[0]))
        if op is None:
            raise ParseError(f"comparison '{_OP_SPELLING.get(type(n.ops[0]), type(n.ops[0]).__name__)}' is not allowed")
        left, right = _convert(n.left, names, d), _convert(n.comparators[0], names, d)
        _need(left, Ty.INT, op)
        _need(right, Ty.INT, op)
        return Cmp(op, left, right)
    if isinstance(n, ast.BoolOp):
        op = "and" if isinstance(n.op, ast.And) else "or"
        operands = tuple(_convert(v, names, d) for v in n.values)
        for o in operands:
            _need(o, Ty.BOOL, op)
        return Logic(op, operands)
    if isinstance(n, ast.IfExp):
        test, then, other = (_convert(x, names, d) for x in (n.test, n.body, n.orelse))
        _need(test, Ty.BOOL, "the condition of 'if'")
        if then.ty is not other.ty:
            raise ParseError(f"the operands of 'if' must be of one type, not {then.ty.value} and {other.ty.value}")
        return Cond(test, then, other, then.ty)
    if isinstance(n, ast.Call):
        if isinstance(n.func, ast.Attribute):
            raise _attribute_error(n)
        if not isinstance(n.func, ast.Name) or n.func.id not in FUNCTIONS:
            fname = n.func.id if isinstance(n.func, ast.Name) else "this call"
            raise ParseError(
                f"unknown function '{fname}'", "the functions are " + ", ".join(sorted(FUNCTIONS))
            )
        if n.keywords:
            raise ParseError(f"{n.func.id}() takes no keyword arguments")
        if any(isinstance(a, ast.Starred) for a in n.args):
            raise ParseError(f"{n.func.id}() takes its arguments written out, not unpacked with '*'")
        lo, hi = FUNCTIONS[n.func.id]
        if not lo <= len(n.args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise ParseError(f"{n.func.id}() takes {want} arguments, got {len(n.args)}")
        args = tuple(_convert(a, names, d) for a in n.args)
        for a in args:
            _need(a, Ty.INT, f"{n.func.id}()")
        return Call(n.func.id, args)
    raise ParseError(f"{type(n).__name__} is not allowed in an expression")


def _dotted_path(n: ast.expr) -> str | None:
    """``p.span.count`` for a chain of attributes of a name, else None."""
    parts: list[str] = []
    while isinstance(n, ast.Attribute):
        parts.append(n.attr)
        n = n.value
    return ".".join([n.id, *reversed(parts)]) if isinstance(n, ast.Name) else None


def _attribute_error(n: ast.expr) -> ParseError:
    """The error of an attribute access or method call ``n``: "expressions have no attributes or
    methods; 'p.m' reads an attribute of 'p'" (the loader matches it to say what 'p' is)."""
    root: ast.expr = n
    while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
        root = root.func if isinstance(root, ast.Call) else root.value
    text = ast.unparse(n)
    owner = f" of '{root.id}'" if isinstance(root, ast.Name) else ""
    what = "calls a method" if isinstance(n, ast.Call) else "reads an attribute"
    return ParseError(f"{NO_ATTRIBUTES}; '{text}' {what}{owner}",
                      "the only dotted names are device.<limit> and kernel.blocks_per_sm")


def _need(node: Node, ty: Ty, where: str) -> None:
    if node.ty is not ty:
        raise ParseError(f"operand of {where} must be {ty.value}, not {node.ty.value}")


# ---------------------------------------------------------------- evaluation

def evaluate(node: Node, env: Mapping[str, int], st: pyexpr.Status | None = None) -> int | bool:
    """Evaluate with the project's integer semantics.

    With ``st`` given, failures are recorded there (and evaluation goes on, as in C++);
    without it, an :class:`ExprError` is raised at the end when anything failed.
    """
    fn = compiled(node)
    if st is None:
        own = pyexpr.Status()
        value = fn(env, own)
        own.check()
        return value
    return fn(env, st)


Evaluator = Callable[[Mapping[str, int], pyexpr.Status], "int | bool"]


def compiled(node: Node) -> Evaluator:
    """``node``'s evaluator fn(env, status), with evaluate's semantics (errors go to status)."""
    fn = node.__dict__.get("_kg_fn")
    return fn if fn is not None else _compile(node)


def _compile(node: Node) -> Evaluator:
    """``node`` as nested closures over the checked helpers of pyexpr (``and``/``or``
    short-circuit), kept on the node: the test-case search and the generated tests' expected
    plans evaluate each expression many thousands of times."""
    fn: Evaluator
    if isinstance(node, Lit):
        value = node.value

        def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
            return value
    elif isinstance(node, Name):
        name = node.name

        def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
            return env[name]
    elif isinstance(node, Neg):
        operand, neg = _compile(node.operand), pyexpr.neg

        def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
            return neg(st, operand(env, st))
    elif isinstance(node, Bin):
        arith: Callable[..., int] = getattr(pyexpr, ARITH[node.op])
        left, right = _compile(node.left), _compile(node.right)

        def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
            return arith(st, left(env, st), right(env, st))
    elif isinstance(node, Cmp) and isinstance(node.left, Name) and isinstance(node.right, Lit):
        cmp, name, value = _CMP[node.op], node.left.name, node.right.value  # the common `n <= 4096`

        def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
            return cmp(env[name], value)
    elif isinstance(node, Cmp):
        cmp, left, right = _CMP[node.op], _compile(node.left), _compile(node.right)

        def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
            return cmp(left(env, st), right(env, st))
    elif isinstance(node, Logic):
        operands = tuple(_compile(o) for o in node.operands)
        if node.op == "and":
            def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
                return all(o(env, st) for o in operands)
        else:
            def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
                return any(o(env, st) for o in operands)
    elif isinstance(node, Not):
        operand = _compile(node.operand)

        def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
            return not operand(env, st)
    elif isinstance(node, Cond):
        test, then, other = _compile(node.test), _compile(node.then), _compile(node.other)

        def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
            return then(env, st) if test(env, st) else other(env, st)
    elif isinstance(node, Call):
        helper = getattr(pyexpr, _FUNC_HELPER[node.func])
        args = tuple(_compile(a) for a in node.args)

        def fn(env: Mapping[str, int], st: pyexpr.Status) -> int | bool:
            return helper(st, *(a(env, st) for a in args))
    else:
        raise TypeError(f"unknown node {node!r}")
    object.__setattr__(node, "_kg_fn", fn)  # frozen dataclass: a cache beside the fields
    return fn


_CMP: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def name_bound(node: Node) -> tuple[str, Callable[[int], bool]] | None:
    """For ``name <op> literal`` (the commonest clause): the name and a test of its value
    alone, which cannot fail; None for any other expression."""
    if isinstance(node, Cmp) and isinstance(node.left, Name) and isinstance(node.right, Lit):
        cmp, value = _CMP[node.op], node.right.value
        return node.left.name, lambda v: cmp(v, value)
    return None


# ---------------------------------------------------------------- emission

def to_text(node: Node) -> str:
    """Canonical, fully parenthesised spec-language text (for reasons and messages)."""
    if isinstance(node, Lit):
        return str(node.value)
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Neg):
        return f"-{_paren(node.operand)}"
    if isinstance(node, (Bin, Cmp)):
        return f"{_paren(node.left)} {node.op} {_paren(node.right)}"
    if isinstance(node, Logic):
        return f" {node.op} ".join(_paren(o) for o in node.operands)
    if isinstance(node, Not):
        return f"not {_paren(node.operand)}"
    if isinstance(node, Call):
        return f"{node.func}(" + ", ".join(to_text(a) for a in node.args) + ")"
    if isinstance(node, Cond):
        return f"{_paren(node.then)} if {_paren(node.test)} else {_paren(node.other)}"
    raise TypeError(f"unknown node {node!r}")


def _paren(node: Node) -> str:
    if isinstance(node, (Lit, Name, Call)):
        return to_text(node)
    return f"({to_text(node)})"


def to_cpp(node: Node, name_map: Callable[[str], str]) -> str:
    """C++ over int64_t using the checked helpers of kernelgen/runtime.h.

    Every arithmetic operation goes through ``kg::x_*(a, b, kg_err)`` which records the first
    error in ``kg_err`` (a ``kg::ExprStatus&`` named ``kg_err`` in the enclosing code).
    """
    if isinstance(node, Lit):
        if node.value == pyexpr.INT64_MIN:
            return "INT64_MIN"
        return f"int64_t{{{node.value}}}"
    if isinstance(node, Name):
        return name_map(node.name)
    if isinstance(node, Neg):
        return f"kg::x_neg({to_cpp(node.operand, name_map)}, kg_err)"
    if isinstance(node, Bin):
        return f"kg::x_{ARITH[node.op]}({to_cpp(node.left, name_map)}, {to_cpp(node.right, name_map)}, kg_err)"
    if isinstance(node, Cmp):
        return f"({to_cpp(node.left, name_map)} {node.op} {to_cpp(node.right, name_map)})"
    if isinstance(node, Logic):
        op = " && " if node.op == "and" else " || "
        return "(" + op.join(to_cpp(o, name_map) for o in node.operands) + ")"
    if isinstance(node, Not):
        return f"!{to_cpp(node.operand, name_map)}"
    if isinstance(node, Call):
        args = [to_cpp(a, name_map) for a in node.args]
        if node.func == "div_ceil":
            return f"kg::x_div_ceil({args[0]}, {args[1]}, kg_err)"
        acc = args[0]
        for a in args[1:]:
            acc = f"kg::x_{node.func}({acc}, {a})"
        return acc
    if isinstance(node, Cond):
        return (f"({to_cpp(node.test, name_map)} ? {to_cpp(node.then, name_map)}"
                f" : {to_cpp(node.other, name_map)})")
    raise TypeError(f"unknown node {node!r}")


def to_python(node: Node, name_map: Callable[[str], str], helpers: str = "_x", status: str = "_st") -> str:
    """Python source calling the helpers of :mod:`kernelgen.pyexpr` (imported as ``helpers``),
    recording failures in the Status named ``status``, as the C++ records them in ``kg_err``."""

    def py(n: Node) -> str:
        if isinstance(n, Lit):
            return str(n.value)
        if isinstance(n, Name):
            return name_map(n.name)
        if isinstance(n, Neg):
            return f"{helpers}.neg({status}, {py(n.operand)})"
        if isinstance(n, Bin):
            return f"{helpers}.{ARITH[n.op]}({status}, {py(n.left)}, {py(n.right)})"
        if isinstance(n, Cmp):
            return f"({py(n.left)} {n.op} {py(n.right)})"
        if isinstance(n, Logic):
            return "(" + f" {n.op} ".join(py(o) for o in n.operands) + ")"
        if isinstance(n, Not):
            return f"(not {py(n.operand)})"
        if isinstance(n, Call):
            return f"{helpers}.{_FUNC_HELPER[n.func]}({status}, " + ", ".join(py(a) for a in n.args) + ")"
        if isinstance(n, Cond):
            return f"({py(n.then)} if {py(n.test)} else {py(n.other)})"
        raise TypeError(f"unknown node {n!r}")

    return py(node)


def substitute(node: Node, values: Mapping[str, int | Node]) -> Node:
    """``node`` with each name in ``values`` replaced by its integer literal (an
    instantiation's integer axes, which are compile-time constants of that instance) or its
    tree (a kernel's ``let`` names)."""
    from dataclasses import fields, replace

    if not values:
        return node
    if isinstance(node, Name):
        if node.name not in values:
            return node
        v = values[node.name]
        return v if isinstance(v, Node) else Lit(v)
    changes: dict[str, object] = {}
    for f in fields(node):  # type: ignore[arg-type]
        v = getattr(node, f.name)
        if isinstance(v, Node):
            changes[f.name] = substitute(v, values)
        elif isinstance(v, tuple) and v and isinstance(v[0], Node):
            changes[f.name] = tuple(substitute(x, values) for x in v)
    return replace(node, **changes) if changes else node  # type: ignore[type-var]
