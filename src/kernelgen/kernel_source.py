"""Reading what the spec must agree with from the kernel sources' text, without a compiler.

Today that is the compile-time cluster shape, ``__cluster_dims__(x, y, z)``, of a
``__global__`` function, so that a spec's ``cluster`` is checked when specs are loaded
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
  argument must be a decimal integer literal (suffixes allowed) or a name defined in the
  sources as ``#define NAME <integer>`` or ``constexpr <type> NAME = <integer>;``;
  missing trailing arguments are 1, as in CUDA.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?([0-9]+)[uUlL]*\)?[ \t]*$", re.M)
_CONSTEXPR = re.compile(r"\bconstexpr\s+[A-Za-z_][\w:\s]*?\b([A-Za-z_]\w*)\s*(?:=\s*|\{\s*)([0-9]+)[uUlL]*\s*\}?\s*;")
_INT = re.compile(r"([0-9]+)[uUlL]*")
_ATTR = re.compile(r"\b__cluster_dims__\s*\(")


class SourceScanError(ValueError):
    """The sources cannot answer the question; the message says why."""


@dataclass(frozen=True)
class Declaration:
    path: str
    line: int
    cluster: tuple[int, int, int] | None  # None: no __cluster_dims__ attribute


def strip_comments(text: str) -> str:
    """``text`` without C/C++ comments; line breaks are kept so line numbers stay right."""
    return _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n") + " ", text)


def _names(texts: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in texts:
        for rx in (_DEFINE, _CONSTEXPR):
            for m in rx.finditer(t):
                out.setdefault(m.group(1), int(m.group(2)))
    return out


def _balanced(text: str, start: int) -> str:
    """The text inside the parentheses opening at ``text[start - 1]``."""
    depth = 1
    i = start
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    if depth:
        raise SourceScanError("unbalanced parentheses after __cluster_dims__")
    return text[start:i - 1]


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


def _cluster_of(head: str, names: dict[str, int]) -> tuple[int, int, int] | None:
    m = _ATTR.search(head)
    if m is None:
        return None
    args = _split_args(_balanced(head, m.end()))
    if not 1 <= len(args) <= 3:
        raise SourceScanError(f"__cluster_dims__ takes 1 to 3 arguments, got {len(args)}")
    dims = []
    for a in args:
        lit = _INT.fullmatch(a)
        if lit:
            dims.append(int(lit.group(1)))
        elif a in names:
            dims.append(names[a])
        else:
            raise SourceScanError(
                f"cannot evaluate the __cluster_dims__ argument '{a}': kernelgen reads integer literals and names "
                "defined in the sources by #define NAME <integer> or constexpr <type> NAME = <integer>;"
            )
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


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
            out.append(Declaration(path, text.count("\n", 0, start + g.start()) + 1, _cluster_of(head, names)))
    return out
