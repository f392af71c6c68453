"""Reading what the spec must agree with from the kernel sources' text, without a compiler.

Today that is the compile-time cluster shape, ``__cluster_dims__(x, y, z)``, and the launch
bounds, ``__launch_bounds__(MAX_THREADS[, MIN_BLOCKS[, MAX_CLUSTER]])``, of a ``__global__``
function, so that a spec's ``cluster`` and block are checked when specs are loaded
(``kernelgen list``, ``generate`` and ``build``), before anything is compiled. CUDA offers
no compile-time query of the attribute, and reading it at run time
(``cudaFuncGetAttribute``) would turn a spec mistake into a launch error on a GPU.

What is read, and its limits:

- only the files the spec lists under ``sources``, not the headers they include;
- comments are removed; preprocessor conditionals are not evaluated, so every
  declaration in the text counts;
- a declaration is the text between the previous ``;``, ``{`` or ``}`` and the function's
  name followed by ``(`` (or by template arguments and ``(``); it counts when it contains
  the word ``__global__``; namespaces are not told apart;
- the attribute must be written out on a declaration (not hidden in a macro); each
  argument must be a decimal integer literal (suffixes allowed), a name defined in the
  sources as ``#define NAME <integer>`` or ``constexpr <type> NAME = <integer>;``, or an
  integer template parameter of the kernel that the spec's template-id symbol gives a value
  (``template <int C> __global__ void __cluster_dims__(C, 1, 1) k(...)`` with ``symbol:
  k<8>``, or ``k<{CLUSTER}>`` in an instantiated kernel); missing trailing arguments are 1,
  as in CUDA. ``__launch_bounds__`` arguments that cannot
  be read so are unknown rather than errors (the launcher checks the compiled limit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Comments, and the string and character literals that may contain what looks like one (kept).
_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)
_LITERAL = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?([0-9]+)[uUlL]*\)?[ \t]*$", re.M)
_CONSTEXPR = re.compile(r"\bconstexpr\s+[A-Za-z_][\w:\s]*?\b([A-Za-z_]\w*)\s*(?:=\s*|\{\s*)([0-9]+)[uUlL]*\s*\}?\s*;")
_INT = re.compile(r"([0-9]+)[uUlL]*")
_ATTR = re.compile(r"\b__cluster_dims__\s*\(")
_TEMPLATE = re.compile(r"\btemplate\s*<")
_PARAM_KIND = re.compile(r"^(?:typename|class|template)\b")
_BOUNDS = re.compile(r"\b__launch_bounds__\s*\(")


class SourceScanError(ValueError):
    """The sources cannot answer the question; the message says why."""


@dataclass(frozen=True)
class Declaration:
    path: str
    line: int
    cluster: tuple[int, int, int] | None  # None: no __cluster_dims__ attribute
    launch_bounds: tuple[int, int] | None = None  # (max threads, min blocks); None: no __launch_bounds__


def strip_comments(text: str) -> str:
    """``text`` without C/C++ comments; line breaks are kept so line numbers stay right."""
    return _COMMENT.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else
                        "\n" * m.group(0).count("\n") + " ", text)


def blank_literals(text: str) -> str:
    """``text`` (comment-free) with the contents of its string and character literals replaced by
    spaces, so that ``"__global__ void f(int)"`` in a string declares nothing; offsets are kept."""
    return _LITERAL.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], text)


def _names(texts: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in texts:
        for rx in (_DEFINE, _CONSTEXPR):
            for m in rx.finditer(t):
                out.setdefault(m.group(1), int(m.group(2)))
    return out


def closing(text: str, start: int, pair: str = "()") -> int | None:
    """Where the bracket that ``pair[0]`` at ``text[start - 1]`` opens is closed (the index of
    its ``pair[1]``), counting nested ones; None when it is not."""
    depth = 1
    step = {pair[0]: 1, pair[1]: -1}
    for i in range(start, len(text)):
        depth += step.get(text[i], 0)
        if depth == 0:
            return i
    return None


def _balanced(text: str, start: int) -> str:
    """The text inside the parentheses opening at ``text[start - 1]``."""
    end = closing(text, start)
    if end is None:
        raise SourceScanError("unbalanced parentheses after an attribute")
    return text[start:end]


def _balanced_angle(text: str, start: int) -> str:
    """The text inside the angle brackets opening at ``text[start - 1]``."""
    end = closing(text, start, "<>")
    if end is None:
        raise SourceScanError("unbalanced angle brackets in a template parameter list")
    return text[start:end]


def _template_values(head: str, symbol: str, names: dict[str, int]) -> dict[str, int]:
    """The declaration's integer template parameters that the symbol's template arguments give
    a value, by position: ``template <typename T, int C>`` with ``k<float, 8>`` gives C = 8.
    Type parameters, and arguments that are not integers or defined names, give none."""
    if "<" not in symbol or ">" not in symbol:
        return {}
    m = _TEMPLATE.search(head)
    if m is None:
        return {}
    params = _split_args(_balanced_angle(head, m.end()))
    args = _split_args(symbol[symbol.index("<") + 1:symbol.rindex(">")])
    out: dict[str, int] = {}
    for i, param in enumerate(params):
        decl, _, default = (part.strip() for part in param.partition("="))
        words = re.findall(r"[A-Za-z_]\w*", decl)
        if _PARAM_KIND.match(decl) or len(words) < 2 or "*" in decl or "&" in decl:
            continue  # a type (or template) parameter, or not an integer one
        arg = args[i] if i < len(args) else default  # a parameter left out takes its default
        lit = _INT.fullmatch(arg)
        value = int(lit.group(1)) if lit else names.get(arg)
        if value is not None:
            out[words[-1]] = value
    return out


def _split_args(text: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        depth += {"(": 1, "<": 1, ")": -1, ">": -1}.get(ch, 0)
        cur.append(ch)
    out.append("".join(cur).strip())
    return out if out != [""] else []


def _attr_args(head: str, names: dict[str, int], rx: re.Pattern[str], attr: str) -> list[int] | None:
    m = rx.search(head)
    if m is None:
        return None
    args = _split_args(_balanced(head, m.end()))
    if not 1 <= len(args) <= 3:
        raise SourceScanError(f"{attr} takes 1 to 3 arguments, got {len(args)}")
    out = []
    for a in args:
        lit = _INT.fullmatch(a)
        if lit:
            out.append(int(lit.group(1)))
        elif a in names:
            out.append(names[a])
        else:
            raise SourceScanError(
                f"cannot evaluate the {attr} argument '{a}': kernelgen reads integer literals, names "
                "defined in the sources by #define NAME <integer> or constexpr <type> NAME = <integer>;, "
                "and template parameters given by the spec's template-id symbol"
            )
    return out


def _cluster_of(head: str, names: dict[str, int]) -> tuple[int, int, int] | None:
    dims = _attr_args(head, names, _ATTR, "__cluster_dims__")
    if dims is None:
        return None
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


def _bounds_of(head: str, names: dict[str, int]) -> tuple[int, int] | None:
    """(max threads, min blocks) of ``__launch_bounds__``. Read leniently: an argument that is
    not a literal or a defined name (an expression, a template parameter) is unknown here, and
    the launcher still checks the block against the compiled kernel's limit
    (cudaFuncAttributes::maxThreadsPerBlock); an unknown minimum counts as 0."""
    m = _BOUNDS.search(head)
    if m is None:
        return None
    args = _split_args(_balanced(head, m.end()))
    values = []
    for a in args[:2]:
        lit = _INT.fullmatch(a)
        values.append(int(lit.group(1)) if lit else names.get(a))
    if not values or values[0] is None or values[0] < 1:
        return None
    return values[0], (values[1] or 0) if len(values) > 1 else 0


def global_declarations(sources: list[tuple[str, str]], symbol: str) -> list[Declaration]:
    """Every ``__global__`` declaration of ``symbol`` (its last name, without namespaces or
    template arguments) in ``sources``, a list of (path, text)."""
    base = symbol.split("<", 1)[0].split("::")[-1].strip()
    texts = [(p, strip_comments(t)) for p, t in sources]
    names = _names([t for _, t in texts])
    call = re.compile(r"\b" + re.escape(base) + r"\s*(?:<[^;{}()]*>\s*)?\(")
    out = []
    for path, text in texts:
        for m in call.finditer(text):
            start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
            head = text[start:m.start()]
            g = re.search(r"\b__global__\b", head)
            if g is None:
                continue
            known = {**names, **_template_values(head, symbol, names)}
            out.append(Declaration(path, text.count("\n", 0, start + g.start()) + 1, _cluster_of(head, known),
                                   _bounds_of(head, known)))
    return out


_GLOBAL = re.compile(r"\b__global__\b")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<([^;{}()]*)>\s*)?\(")
_ATTRIBUTES = {"__launch_bounds__", "__cluster_dims__", "__maxnreg__", "__attribute__", "__declspec", "alignas",
               "__align__", "decltype"}


_NAMESPACE_OR_BRACE = re.compile(
    r"\bnamespace\s+((?:inline\s+)?[A-Za-z_]\w*(?:\s*::\s*(?:inline\s+)?[A-Za-z_]\w*)*)?\s*\{|[{}]")


def namespaces_at(text: str) -> list[tuple[int, str]]:
    """(offset, the namespaces open there, ``a::b``) at each brace of comment-free ``text``, for
    looking up the namespace of a position: the last entry before it. ``namespace a::b {`` and
    ``namespace a::inline b {`` open ``a::b``; an inline namespace's name is part of it."""
    stack: list[str | None] = []
    out: list[tuple[int, str]] = [(0, "")]
    for m in _NAMESPACE_OR_BRACE.finditer(text):
        if m.group(0) == "}":
            if stack:
                stack.pop()
        elif m.group(0) == "{":
            stack.append(None)
        else:  # an anonymous namespace adds nothing to the spelling
            name = m.group(1)
            stack.append(None if name is None else "::".join(
                part.strip().removeprefix("inline").strip() for part in name.split("::")))
        out.append((m.end(), "::".join(n for n in stack if n is not None)))
    return out


@dataclass(frozen=True)
class GlobalDecl:
    """One ``__global__`` declaration of comment-free text."""

    name: str  # as declared, without namespaces
    namespace: str  # the namespaces it is declared in (``a::b``; "" at global scope)
    head: str  # the declaration's text before the name (template head, attributes, return type)
    params: str  # the text between its parameter list's parentheses
    offset: int  # where ``__global__`` is
    end: int  # just past its parameter list's closing parenthesis
    template_args: str | None = None  # between the <> after the name (an explicit instantiation's)

    @property
    def qualified(self) -> str:
        return f"{self.namespace}::{self.name}" if self.namespace else self.name


def global_decls(text: str) -> list[GlobalDecl]:
    """The ``__global__`` declarations (and definitions) of comment-free ``text``, in order: the
    first name after ``__global__`` followed by a parameter list, skipping attributes."""
    spaces = namespaces_at(text)
    out = []
    for g in _GLOBAL.finditer(text):
        start = max(text.rfind(c, 0, g.start()) for c in ";{}") + 1
        end = min((i for i in (text.find(c, g.end()) for c in ";{") if i >= 0), default=len(text))
        pos = g.end()
        while (m := _CALLED.search(text, pos, end)) is not None:
            try:
                inner = _balanced(text, m.end())
            except SourceScanError:
                break
            if m.group(1) in _ATTRIBUTES:
                pos = m.end() + len(inner) + 1
                continue
            ns = [n for at, n in spaces if at <= g.start()][-1]
            out.append(GlobalDecl(m.group(1), ns, text[start:m.start()], inner, g.start(), m.end() + len(inner) + 1,
                                  m.group(2)))
            break
    return out


def global_names(sources: list[tuple[str, str]]) -> list[str]:
    """The names of the ``__global__`` functions declared in ``sources`` (path, text), qualified by
    the namespaces they are declared in (``ns::kernel``), in order of appearance, each once: for
    messages suggesting the name a spec meant."""
    names = [d.qualified for _, raw in sources for d in global_decls(strip_comments(raw))]
    return list(dict.fromkeys(names))
