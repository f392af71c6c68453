"""Reading what the spec must agree with from the kernel sources' text, without a compiler.

Today that is the compile-time cluster shape, ``__cluster_dims__(x, y, z)``, the launch
bounds, ``__launch_bounds__(MAX_THREADS[, MIN_BLOCKS[, MAX_CLUSTER]])``, and the parameter list
of a ``__global__`` function, so that a spec's ``cluster``, block and ``args`` are checked when
specs are loaded (``kernelgen list``, ``generate`` and ``build``), before anything is compiled.
CUDA offers no compile-time query of the attributes, and reading them at run time
(``cudaFuncGetAttribute``) would turn a spec mistake into a launch error on a GPU.

What is read, and its limits:

- only the files the spec lists under ``sources``, not the headers they include;
- comments are removed; preprocessor conditionals are not evaluated, so every
  declaration in the text counts;
- macros whose body spells ``__global__`` or a kernel attribute (``#define KERNEL_API extern "C"
  __global__``, ``#define MAKE(T, N) __global__ void f_##N(T* p)``), of the text or of the files
  read with it, are expanded where they are used (:func:`expand_kernel_macros`, as ``kernelgen
  draft`` reads them); the parameters of a declaration a function-like macro makes are not read.
  Macros in a parameter list are expanded before it is read (:func:`expand_macros`);
- a declaration is the text between the previous ``;``, ``{`` or ``}`` and the function's
  name followed by ``(`` (or by template arguments and ``(``); it counts when it contains
  the word ``__global__``;
- a symbol names the declarations whose namespaces (``namespace a { namespace b {``,
  ``namespace a::b {``, and a qualified declarator ``void a::b::k(...)``) spell its qualified
  name, an inline namespace's name optional, as C++ looks the symbol up from the global
  namespace. Where no declaration is so spelled but one of the same last name is declared in
  another namespace, and the sources use what could make the symbol reach it (a using-directive,
  a using-declaration of the name, a namespace alias, a macro spelling ``namespace``), the text
  cannot decide which function the symbol names: :class:`LookupUndecided`;
- the attribute must be written out on a declaration (not hidden in a macro); each
  argument must be a decimal integer literal (suffixes allowed), a name defined in the
  sources as ``#define NAME <integer>`` or ``constexpr <type> NAME = <integer>;``, or an
  integer template parameter of the kernel that the spec's template-id symbol gives a value
  (``template <int C> __global__ void __cluster_dims__(C, 1, 1) k(...)`` with ``symbol:
  k<8>``, or ``k<{CLUSTER}>`` in an instantiated kernel); missing trailing arguments are 1,
  as in CUDA. ``__launch_bounds__`` arguments that cannot
  be read so are unknown rather than errors (the launcher checks the compiled limit);
- a parameter list is read where its text is plain: each parameter a type of words, ``const``
  and ``*`` (and ``[]``) with an optional name; a list holding a preprocessor line, ``...``, or
  a lone word that is not a known type (a macro may stand for several parameters) is not
  counted (nor one still invoking a macro the sources do not define), and a parameter whose type
  has template arguments, parentheses, references,
  ``volatile`` or unknown words after a ``*`` keeps its text but no type.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

from kernelgen.types import CPP_TYPES, SCALARS, TOOLKIT_STRUCTS

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


class LookupUndecided(SourceScanError):
    """The text cannot tell which ``__global__`` function a symbol names (see the module's doc)."""


@dataclass(frozen=True)
class Param:
    """One parameter of a declaration, as its text spells it."""

    text: str  # as written (spaces normalised)
    base: str | None  # the type without const and pointers ("unsigned int", "ns::T"); None: not read
    const: bool = False  # the base type is const (a pointer's pointee)
    pointers: tuple[bool, ...] = ()  # per '*', left to right: whether that pointer itself is const
    name: str | None = None

    @property
    def spec_type(self) -> str | None:
        """The type as a spec spells it (``const f32*``, ``u64``, ``f32* const*``) where the type
        registry knows its base type; None otherwise (a template parameter, an enum, a struct or a
        vector by value, and ``char``, whose signedness is the host compiler's)."""
        reg = CPP_TYPES.get(self.base) if self.base is not None and self.base != "char" else None
        if reg is None or len(self.pointers) > 2:
            return None
        const = "const " if self.const else ""
        if not self.pointers:
            return reg if reg in SCALARS else None
        if len(self.pointers) == 1:
            return f"{const}{reg}*"
        return f"{const}{reg}*{' const' if self.pointers[0] else ''}*"

    @property
    def tensor_map(self) -> bool:
        """A TMA descriptor by value (``const __grid_constant__ CUtensorMap m``)."""
        return self.base in ("CUtensorMap", "CUtensorMap_st") and not self.pointers


@dataclass(frozen=True)
class Declaration:
    path: str
    line: int
    cluster: tuple[int, int, int] | None  # None: no __cluster_dims__ attribute
    launch_bounds: tuple[int, int] | None = None  # (max threads, min blocks); None: no __launch_bounds__
    qualified: str = ""  # its name with the namespaces it is declared in (``a::b::k``)
    params: tuple[Param, ...] | None = None  # None: the list is not plain text (see the module's doc)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@functools.lru_cache(maxsize=64)
def strip_comments(text: str) -> str:
    """``text`` without C/C++ comments; line breaks are kept so line numbers stay right. (Cached: a
    module's sources are read for each of its kernels' symbols.)"""
    return _COMMENT.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else
                        "\n" * m.group(0).count("\n") + " ", text)


def blank_literals(text: str) -> str:
    """``text`` (comment-free) with the contents of its string and character literals replaced by
    spaces, so that ``"__global__ void f(int)"`` in a string declares nothing; offsets are kept."""
    return _LITERAL.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], text)


def source_integers(sources: list[tuple[str, str]]) -> dict[str, int]:
    """The integers ``sources`` (path, text) define by ``#define NAME <integer>`` or ``constexpr
    <type> NAME = <integer>;``: what the attributes' arguments may name."""
    return _names([strip_comments(t) for _, t in sources])


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


# A function pointer's declarator (``R (*name)(args)``): its name.
FN_POINTER = re.compile(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(")


def function_pointer(decl: str) -> str | None:
    """The name a function pointer declaration declares (``scalar_t (*ACT_FN)(const scalar_t&)``:
    ``ACT_FN``; a template parameter, a member), or None where ``decl`` declares none."""
    m = FN_POINTER.search(decl)
    return m.group(1) if m else None


def split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets, each piece stripped (a blank last one left
    out): (), [] and {}, and <> where ``<`` follows a name (``Vec<float, 4>``, ``static_cast<int>``,
    not ``a < b`` with spaces around it, nor ``<<``); a ``>`` closes only such a ``<`` (``(n > 4, m)``
    is one piece), and a closing bracket the ``<`` left open inside it."""
    out, cur = [], []
    stack: list[str] = []  # the brackets open here: one of "([{<"
    last = ""  # the last character before this one that is not a space
    for i, ch in enumerate(text):
        if ch in "([{":
            stack.append(ch)
        elif ch == "<" and (last.isalnum() or last in "_:") and text[i + 1:i + 2] not in "<=" \
                and not (text[i - 1:i].isspace() and text[i + 1:i + 2].isspace()):
            stack.append("<")
        elif ch in ")]}":
            while stack and stack[-1] == "<":  # (a < b, c): the < was a comparison
                stack.pop()
            if stack:
                stack.pop()
        elif ch == ">" and stack and stack[-1] == "<" and last != "-":
            stack.pop()
        if ch == "," and not stack:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        if not ch.isspace():
            last = ch
    if "".join(cur).strip():
        out.append("".join(cur).strip())
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


def _symbol_name(symbol: str) -> str:
    """A symbol's qualified name, without template arguments, spaces or a leading ``::``."""
    return "".join(symbol.split("<", 1)[0].split()).removeprefix("::")


def symbol_base(symbol: str) -> str:
    """A symbol's last name (``k`` of ``ns::k<float, 4>``): what a declaration of it is named."""
    return _symbol_name(symbol).split("::")[-1]


# What can make a name reach a declaration of another namespace, which the text does not follow.
_USING_DIRECTIVE = re.compile(r"\busing\s+namespace\b")
_NAMESPACE_ALIAS = re.compile(r"\bnamespace\s+[A-Za-z_]\w*\s*=")
_MACRO_NAMESPACE = re.compile(r"^[ \t]*#[ \t]*define\b[^\n]*\bnamespace\b", re.M)


def _qualifier(head: str) -> tuple[tuple[str, ...], bool]:
    """The namespaces a declarator names before the function's name (``void a::b::k(`` gives
    ``(a, b)``), and whether it starts at the global namespace (``void ::a::k(``)."""
    rest, parts = head.rstrip(), []
    while rest.endswith("::"):
        rest = rest[:-2].rstrip()
        m = re.search(r"[A-Za-z_]\w*$", rest)
        if m is None or m.group(0) in _TYPE_WORDS:  # '::' after the return type: from the global namespace
            return tuple(parts), True
        parts.insert(0, m.group(0))
        rest = rest[:m.start()].rstrip()
    return tuple(parts), False


def _namespaces_of(scopes: tuple[tuple[int, tuple[tuple[str, bool], ...]], ...], head: str, offset: int
                   ) -> tuple[tuple[str, bool], ...]:
    """The namespaces (name, inline) of a declaration at ``offset`` whose text before its name is
    ``head``: those open there (``_scopes``), then those its declarator names."""
    named, absolute = _qualifier(head)
    enclosing = () if absolute else [sc for at, sc in scopes if at <= offset][-1]
    return (*enclosing, *((n, False) for n in named))


def _scan(sources: list[tuple[str, str]], symbol: str, matching: bool) -> list[Declaration]:
    """The ``__global__`` declarations of ``symbol``'s last name in ``sources`` (path, text):
    those its qualified name spells (``matching``), or every one with their qualified names
    only (attributes and parameters are read where they are the symbol's)."""
    base = _symbol_name(symbol).split("::")[-1]
    want = _symbol_name(symbol)
    stripped = [(p, strip_comments(t)) for p, t in sources]
    names = _names([t for _, t in stripped]) if matching else {}
    key = _macros_key(kernel_macros(sources))
    expanded = {p: _expanded(t, key) for p, t in stripped}
    texts = [(p, expanded[p][0]) for p, _ in stripped]
    every: Macros | None = None  # every macro of the sources, for parameter lists (read where needed)
    call = re.compile(r"\b" + re.escape(base) + r"\s*(?:<[^;{}()]*>\s*)?\(")
    out = []
    for path, text in texts:
        scopes = None
        for m in call.finditer(text):
            start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
            head = text[start:m.start()]
            g = re.search(r"\b__global__\b", head)
            if g is None:
                continue
            scopes = scopes if scopes is not None else _scopes(text)
            spaces = _namespaces_of(scopes, head, m.start())
            spellings = _spellings((*spaces, (base, False)))
            qualified = "".join(f"{n}::" for n, _ in spaces)
            line = text.count("\n", 0, start + g.start()) + 1
            if not matching:
                out.append(Declaration(path, line, None, qualified=qualified + base))
                continue
            if want not in spellings:
                continue
            known = {**names, **_template_values(head, symbol, names)}
            end = closing(text, m.end())
            every = every if every is not None else _all_macros(stripped)
            # (a declaration a function-like macro makes is read for its name; its parameters, pasted
            # and substituted, are left to the build)
            made = any(a <= m.start() < b for a, b in expanded[path][1])
            params = params_of(expand_macros(text[m.end():end], every)[0]) if end is not None and not made else None
            out.append(Declaration(path, line, _cluster_of(head, known), _bounds_of(head, known),
                                   qualified + base, params))
    return out


def _spellings(parts: tuple[tuple[str, bool], ...]) -> frozenset[str]:
    """The qualified names that reach a declaration in namespaces ``parts`` (name, inline), its own
    name last: an inline namespace's name may be left out."""
    out = [""]
    for name, inline in parts:
        out = [f"{o}::{name}" if o else name for o in out] + (out if inline else [])
    return frozenset(out)


def global_declarations(sources: list[tuple[str, str]], symbol: str) -> list[Declaration]:
    """Every ``__global__`` declaration in ``sources`` (a list of (path, text)) that ``symbol``
    names: one whose namespaces spell the symbol's qualified name (template arguments aside),
    looked up from the global namespace. Raises :class:`LookupUndecided` where no declaration is
    so spelled but one of the same last name in another namespace may be what the symbol reaches
    (see the module's doc), and :class:`SourceScanError` where an attribute cannot be read."""
    found = _scan(sources, symbol, matching=True)
    if found:
        return found
    others = same_name_declarations(sources, symbol)
    if not others:
        return []
    base = _symbol_name(symbol).split("::")[-1]
    using_name = re.compile(r"\busing\s+(?:::\s*)?(?:[A-Za-z_]\w*\s*::\s*)+" + re.escape(base) + r"\s*;")
    texts = [strip_comments(t) for _, t in sources]
    reasons = [what for rx, what in ((_USING_DIRECTIVE, "a using-directive"), (using_name, "a using-declaration"),
                                     (_NAMESPACE_ALIAS, "a namespace alias"),
                                     (_MACRO_NAMESPACE, "a macro that spells 'namespace'"))
               if any(rx.search(t) for t in texts)]
    if reasons:
        raise LookupUndecided(
            f"the sources declare no __global__ function spelled '{_symbol_name(symbol)}' but "
            f"{declared_text(others)}, and {' and '.join(reasons)} in them may make the symbol name it "
            "(kernelgen reads namespaces from 'namespace' blocks and qualified declarators only)"
        )
    return []


def declared_text(decls: list[Declaration]) -> str:
    """``a::k (x.cu:3), b::k (x.cu:9, y.cu:2)``: declarations grouped by qualified name."""
    where: dict[str, list[str]] = {}
    for d in decls:
        where.setdefault(d.qualified, []).append(d.where)
    return ", ".join(f"{q} ({', '.join(w)})" for q, w in where.items())


def same_name_declarations(sources: list[tuple[str, str]], symbol: str) -> list[Declaration]:
    """Every ``__global__`` declaration of ``symbol``'s last name, whatever its namespaces (only
    ``path``, ``line`` and ``qualified`` are read): for messages saying what the sources declare."""
    return _scan(sources, symbol, matching=False)


def source_definition(sources: list[tuple[str, str]], name: str) -> tuple[str, int, str] | None:
    """Where ``sources`` (path, text) define ``name`` as a macro (``#define NAME ...``) or a
    ``constexpr`` variable: (path, line, that line's text), or None."""
    rx = re.compile(r"^[ \t]*#[ \t]*define[ \t]+" + re.escape(name) + r"\b[^\n]*"
                    r"|\bconstexpr\b[^;{}()]*?\b" + re.escape(name) + r"\s*[={][^;\n]*", re.M)
    for path, raw in sources:
        text = strip_comments(raw)
        m = rx.search(text)
        if m is not None:
            return path, text.count("\n", 0, m.start()) + 1, " ".join(m.group(0).split())
    return None


# Words of the built-in type names; a parameter's last word among them is not its name.
_TYPE_WORDS = frozenset("void bool char short int long signed unsigned float double wchar_t char8_t char16_t "
                        "char32_t".split())
# Words a parameter's type may hold that do not change which type it is.
_NO_TYPE = frozenset("__restrict__ __restrict restrict __grid_constant__ struct class typename enum register".split())
_PARAM_TOKEN = re.compile(r"\*|(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|\S")


def _param(text: str) -> Param:
    """One parameter's text read as ``[const] words [const] * [const] ... [name] [[]]``."""
    text = " ".join(text.split())
    body = re.sub(r"\s*::\s*", "::", text.split("=", 1)[0]).strip()  # a default argument left out
    arrays = 0
    while (m := re.search(r"\[[^\[\]]*\]$", body)) is not None:  # T x[] is T* x
        body, arrays = body[:m.start()].rstrip(), arrays + 1
    tokens = [t for t in _PARAM_TOKEN.findall(body) if t not in _NO_TYPE]
    if arrays > 1 or re.search(r"[()<>&\[\]#]|\.\.\.|\bvolatile\b", body) or not tokens or any(
            t != "*" and not re.fullmatch(r"(?:::)?[A-Za-z_][\w:]*", t) for t in tokens):
        return Param(text, None)
    name = None
    last = tokens[-1]
    if last not in ("*", "const") and last not in _TYPE_WORDS and (
            "*" in tokens[:-1] or any(t != "const" for t in tokens[:-1])):
        name = tokens.pop()
    star = tokens.index("*") if "*" in tokens else len(tokens)
    words = [t for t in tokens[:star] if t != "const"]
    after = tokens[star:]
    if not words or any(t not in ("*", "const") for t in after) or (
            len(words) > 1 and not all(w in _TYPE_WORDS for w in words)):
        return Param(text, None, name=name)
    pointers = []
    for i, t in enumerate(after):
        if t == "*":
            pointers.append(i + 1 < len(after) and after[i + 1] == "const")
    pointers += [False] * arrays
    return Param(text, " ".join(words), "const" in tokens[:star], tuple(pointers), name)


def _known_type(base: str) -> bool:
    return base in CPP_TYPES or base in TOOLKIT_STRUCTS or all(w in _TYPE_WORDS for w in base.split())


def params_of(text: str) -> tuple[Param, ...] | None:
    """The parameters of a parameter list's text (between its parentheses), or None where the text
    may hold more or fewer parameters than it shows: a preprocessor line, ``...``, or a lone word
    that is not a known type (a macro may stand for several parameters)."""
    text = " ".join(text.split())
    if text in ("", "void"):
        return ()
    if re.search(r"#|\.\.\.|__VA_ARGS__", text) or any(m.group(1) not in _ATTRIBUTES
                                                          for m in _INVOKED.finditer(text)):
        return None  # (an invocation left: a macro the text does not define may stand for several parameters)
    params = tuple(_param(p) for p in _split_args(text))
    if any(p.base is not None and p.name is None and not p.pointers and not p.const and not _known_type(p.base)
           for p in params):
        return None
    return params


# A word followed by parentheses in a parameter list, other than a function pointer's (*name).
_INVOKED = re.compile(r"\b([A-Za-z_]\w*)\s*\((?!\s*\*)")
_GLOBAL = re.compile(r"\b__global__\b")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<([^;{}()]*)>\s*)?\(")
_ATTRIBUTES = {"__launch_bounds__", "__cluster_dims__", "__maxnreg__", "__attribute__", "__declspec", "alignas",
               "__align__", "decltype"}


_NAMESPACE_OR_BRACE = re.compile(
    r"(\binline\s+)?\bnamespace\s+((?:inline\s+)?[A-Za-z_]\w*(?:\s*::\s*(?:inline\s+)?[A-Za-z_]\w*)*)?\s*\{|[{}]")


# A preprocessor line, with its continuations.
_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n\\]|\\.|\\\n)*", re.M)


@functools.lru_cache(maxsize=64)
def _scopes(text: str) -> tuple[tuple[int, tuple[tuple[str, bool], ...]], ...]:
    """(offset, the namespaces open there, each (name, inline)) at each brace of comment-free
    ``text`` outside preprocessor lines (a macro's body opens nothing where it is defined); an
    anonymous namespace adds none (its members are reached as the enclosing one's)."""
    stack: list[tuple[tuple[str, bool], ...]] = []
    out: list[tuple[int, tuple[tuple[str, bool], ...]]] = [(0, ())]
    directives = [(d.start(), d.end()) for d in _DIRECTIVE.finditer(text)]
    starts = [start for start, _ in directives]
    for m in _NAMESPACE_OR_BRACE.finditer(text):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i >= 0 and m.start() < directives[i][1]:
            continue
        if m.group(0) == "}":
            if stack:
                stack.pop()
        elif m.group(0) == "{":
            stack.append(())
        else:
            parts = [part.strip() for part in (m.group(2) or "").split("::") if part.strip()]
            names = [(p.removeprefix("inline").strip(), p.startswith("inline ")) for p in parts]
            if names and m.group(1):
                names[0] = (names[0][0], True)  # inline namespace a {
            stack.append(tuple(names))
        out.append((m.end(), tuple(n for level in stack for n in level)))
    return tuple(out)


def namespaces_at(text: str) -> list[tuple[int, str]]:
    """(offset, the namespaces open there, ``a::b``) at each brace of comment-free ``text``, for
    looking up the namespace of a position: the last entry before it. ``namespace a::b {`` and
    ``namespace a::inline b {`` open ``a::b``; an inline namespace's name is part of it."""
    return [(at, "::".join(n for n, _ in names)) for at, names in _scopes(text)]


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
    spellings: frozenset[str] = frozenset()  # the qualified names that reach it (an inline namespace's optional)

    @property
    def qualified(self) -> str:
        return f"{self.namespace}::{self.name}" if self.namespace else self.name


def global_decls(text: str, macros: Macros | None = None) -> list[GlobalDecl]:
    """The ``__global__`` declarations (and definitions) of comment-free ``text``, in order: the
    first name after ``__global__`` followed by a parameter list, skipping attributes. The macros
    that declare kernels, the text's own and ``macros`` (those of the files it includes:
    :func:`kernel_macros`), are expanded first (:func:`expand_kernel_macros`), so offsets are of
    that text; preprocessor lines declare nothing."""
    text = _expanded_text(text, _macros_key(macros or ({}, {})))
    scopes = _scopes(text)
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
            head = text[start:m.start()]
            spaces = _namespaces_of(scopes, head, g.start())
            out.append(GlobalDecl(m.group(1), "::".join(n for n, _ in spaces), head, inner, g.start(),
                                  m.end() + len(inner) + 1, m.group(2), _spellings((*spaces, (m.group(1), False)))))
            break
    return out


def source_global_decls(sources: list[tuple[str, str]]) -> list[tuple[str, GlobalDecl]]:
    """(path, declaration) for the ``__global__`` declarations of ``sources`` (path, text: a
    module's sources and the project files they include), each file read with the macros that
    declare kernels of every file expanded (``KERNEL_API void f(...)`` in a source, with
    ``#define KERNEL_API extern "C" __global__`` in a header it includes)."""
    macros = kernel_macros(sources)
    return [(path, d) for path, raw in sources for d in global_decls(strip_comments(raw), macros)]


def global_names(sources: list[tuple[str, str]]) -> list[str]:
    """The names of the ``__global__`` functions declared in ``sources`` (path, text), qualified by
    the namespaces they are declared in (``ns::kernel``), in order of appearance, each once: for
    messages suggesting the name a spec meant."""
    names = [d.qualified for _, d in source_global_decls(sources)]
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------------------------------------
# Macros: those that declare kernels (``#define KERNEL_API extern "C" __global__``,
# ``#define MAKE(T, N) __global__ void f_##N(T* p)``) are expanded before declarations are read.

# Object-like macros (name -> body) and function-like ones (name -> (parameters, body)).
Macros = tuple[dict[str, str], dict[str, tuple[list[str], str]]]

_DEFINE_LINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(\(([^)]*)\))?\s*(.*)$", re.S)
_KERNEL_WORDS = re.compile(r"\b(?:__global__|__launch_bounds__|__cluster_dims__)\b")


def _defines(text: str) -> list[tuple[str, list[str] | None, str]]:
    """The ``#define`` lines of comment-free ``text``, in order: (name, parameters or None for an
    object-like macro, body with its continuations joined)."""
    out = []
    for m in _DIRECTIVE.finditer(text):
        d = _DEFINE_LINE.match(re.sub(r"\\\n", " ", m.group(0)).strip())
        if d is not None:
            params = None if d.group(2) is None else [a.strip() for a in d.group(3).split(",") if a.strip()]
            out.append((d.group(1), params, " ".join(d.group(4).split())))
    return out


def macros_of(text: str, kernel_only: bool = False, inherited: Macros | None = None) -> Macros:
    """The macros comment-free ``text`` defines, after ``inherited`` ones (a definition of the text
    replaces an inherited one; the first of the text's own definitions of a name counts, as in
    the branch a preprocessor would usually take); with ``kernel_only``, those whose body spells
    ``__global__`` or a kernel attribute."""
    objects: dict[str, str] = dict(inherited[0]) if inherited else {}
    functions: dict[str, tuple[list[str], str]] = dict(inherited[1]) if inherited else {}
    own: set[str] = set()
    for name, params, body in _defines(text):
        if name in own or (kernel_only and not _KERNEL_WORDS.search(body)):
            continue
        own.add(name)
        objects.pop(name, None)
        functions.pop(name, None)
        if params is None:
            objects[name] = body
        else:
            functions[name] = (params, body)
    return objects, functions


def _all_macros(stripped: list[tuple[str, str]]) -> Macros:
    """Every macro of comment-free ``stripped`` (path, text), a later file's replacing an earlier one's."""
    out: Macros = ({}, {})
    for _, text in stripped:
        out = macros_of(text, inherited=out)
    return out


def kernel_macros(sources: list[tuple[str, str]]) -> Macros:
    """The macros of ``sources`` (path, text) that declare kernels, the first definition of a name
    counting: what a source including the others may use."""
    objects: dict[str, str] = {}
    functions: dict[str, tuple[list[str], str]] = {}
    for _, raw in sources:
        o, f = macros_of(strip_comments(raw), kernel_only=True)
        for k, v in o.items():
            if k not in functions:
                objects.setdefault(k, v)
        for k, fv in f.items():
            if k not in objects:
                functions.setdefault(k, fv)
    return objects, functions


def substitute(params: list[str], body: str, args: list[str]) -> str:
    """A function-like macro's ``body`` with its ``params`` replaced by ``args``: ``#p`` as a string,
    ``a ## b`` pasted, ``__VA_ARGS__`` as the arguments of a trailing ``...``."""
    table = dict(zip(params, args))
    if params and params[-1] == "...":
        table.pop("...", None)
        table["__VA_ARGS__"] = ", ".join(args[len(params) - 1:])
    out = re.sub(r"#\s*([A-Za-z_]\w*)", lambda m: f'"{table[m.group(1)]}"' if m.group(1) in table else m.group(0),
                 re.sub(r"##", "\0", body))  # '#param' is a string; '##' pastes (kept aside meanwhile)
    out = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: table.get(m.group(0), m.group(0)), out)
    return re.sub(r"\s*\0\s*", "", out)


def _arity(params: list[str], args: list[str]) -> bool:
    """Whether a macro of ``params`` takes ``args``."""
    if params and params[-1] == "...":
        return len(args) >= len(params) - 1
    return len(args) == len(params)


def _call_args(text: str) -> list[str]:
    """A macro invocation's arguments (the text between its parentheses), split at top-level commas."""
    return _split_args(text) if text.strip() else []


@dataclass
class Expanded:
    """Comment-free text with its preprocessor lines blanked and macros expanded."""

    text: str
    spans: list[tuple[int, int, str]]  # the function-like invocations expanded: start, end, as written
    notes: list[str]  # the invocations (and macros) that declare kernels but were not expanded
    macros: Macros  # the kernel-declaring macros in effect (inherited, then the text's own)


def expand_kernel_macros(text: str, inherited: Macros | None = None) -> Expanded:
    """Comment-free ``text`` with its preprocessor lines blanked (line breaks kept) and the macros
    that declare kernels, its own and ``inherited`` ones (those of the headers it includes),
    expanded where they are used. Offsets change where a function-like macro is expanded; a
    text without such macros keeps its offsets."""
    macros = macros_of(text, kernel_only=True, inherited=inherited)
    objects, functions = macros
    out = Expanded(_DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text), [], [], macros)
    for name, body in objects.items():  # #define ENGINE_KERNEL __global__
        out.text = re.sub(rf"\b{name}\b", lambda _m, b=body: b, out.text)
    for name, (params, body) in functions.items():  # #define MAKE_FILL(T, NAME) __global__ void fill_##NAME(...)
        pieces, pos, used, spans = [], 0, 0, []
        for m in re.finditer(rf"\b{name}\s*\(", out.text):
            if m.start() < pos:
                continue
            end = closing(out.text, m.end())
            if end is None:
                continue
            args = _call_args(out.text[m.end():end])
            invocation = " ".join(out.text[m.start():end + 1].split())
            if not _arity(params, args):
                out.notes.append(f"check: {invocation} (macro {name}) declares __global__ functions the draft does "
                                 "not expand: write their kernels by hand")
                continue
            pieces.append(out.text[pos:m.start()])
            start = sum(map(len, pieces))
            expansion = substitute(params, body, args) + "\n" * out.text.count("\n", m.start(), end + 1)
            pieces.append(expansion)
            spans.append((start, start + len(expansion), invocation))
            pos = end + 1
            used += 1
        if used:
            pieces.append(out.text[pos:])
            out.text = "".join(pieces)
            out.spans += spans  # (spans of earlier macros are of the text before; kept as notes only)
        elif inherited is None or name not in inherited[1]:
            out.notes.append(f"check: macro {name} declares __global__ functions and is not invoked here: write the "
                             "kernels it makes by hand")
    return out


_MacrosKey = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, tuple[str, ...], str], ...]]


def _macros_key(macros: Macros) -> _MacrosKey:
    return tuple(macros[0].items()), tuple((k, tuple(p), b) for k, (p, b) in macros[1].items())


@functools.lru_cache(maxsize=256)
def _expanded(text: str, key: _MacrosKey) -> tuple[str, tuple[tuple[int, int], ...]]:
    """:func:`expand_kernel_macros`'s text and the spans of its function-like expansions (cached: a
    module's sources are read for each symbol)."""
    out = expand_kernel_macros(text, ({k: b for k, b in key[0]}, {k: (list(p), b) for k, p, b in key[1]}))
    return out.text, tuple((a, b) for a, b, _ in out.spans)


def _expanded_text(text: str, key: _MacrosKey) -> str:
    return _expanded(text, key)[0]


_MACRO_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(\()?")


def expand_macros(text: str, macros: Macros, depth: int = 16) -> tuple[str, list[str]]:
    """``text`` (a parameter list, say) with the ``macros`` it uses expanded, repeatedly (a macro
    is not expanded within its own expansion, as in C); and the invocations of function-like
    macros that could not be (arguments that do not match its parameters)."""
    objects, functions = macros
    failed: list[str] = []

    def run(text: str, hidden: frozenset[str], level: int) -> str:
        out, pos = [], 0
        for m in _MACRO_CALL.finditer(text):
            if m.start() < pos:
                continue
            name = m.group(1)
            if name in hidden or level > depth:
                continue
            if name in objects:
                out += [text[pos:m.start()], " ", run(objects[name], hidden | {name}, level + 1), " "]
                pos = m.end(1)
            elif name in functions and m.group(2):
                end = closing(text, m.end())
                if end is None:
                    continue
                params, body = functions[name]
                args = [run(a, hidden, level + 1) for a in _call_args(text[m.end():end])]
                if not _arity(params, args):
                    failed.append(" ".join(text[m.start():end + 1].split()))
                    continue
                out += [text[pos:m.start()], " ", run(substitute(params, body, args), hidden | {name}, level + 1), " "]
                pos = end + 1
        return "".join(out) + text[pos:]

    return " ".join(run(text, frozenset(), 0).split()), failed
