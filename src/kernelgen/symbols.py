"""Kernel symbols: C++ template-ids such as ``act_kernel<ns::SiluOp<float>, __nv_bfloat16>``.

A ``symbol`` is read by a small tokenizer, not pasted: identifiers, ``::``, integer literals
(decimal, ``0x`` hexadecimal, ``0b`` binary, with ``u``/``l`` suffixes; optionally negative),
``true``/``false``, the punctuation ``< > ( ) , * &`` and whitespace. Angle brackets and
parentheses must balance (``>>`` closes two template argument lists, as in C++11), the symbol
starts with a possibly ``::``-qualified name that is not a keyword, and after its template
arguments nothing follows. Two names or numbers side by side are a type's words only
(``unsigned int``, ``const float``): ``k<1 2>`` is refused, as are an empty argument (``k<16,>``)
and anything else (quotes, semicolons, braces, operators other than ``*``/``&``, comments,
``1'000``), with the offending character, so spec text never reaches the generated C++
unchecked.

The canonical spelling joins the tokens without spaces except between two words
(``unsigned int``, ``const float``), so two spellings of one symbol compare equal; a leading
``::`` is dropped (the generated code names every symbol from the global namespace).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Keywords a template argument may contain (type words and literals); any other C++ keyword
# in a symbol is refused.
TYPE_WORDS = frozenset(
    "bool char short int long signed unsigned float double void const volatile true false "
    "char8_t char16_t char32_t wchar_t".split()
)

_TOKEN = re.compile(
    r"(?P<ws>[ \t]+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<num>(?:0[xX][0-9A-Fa-f]+|0[bB][01]+|[0-9]+)[uUlL]*)|(?P<scope>::)"
    r"|(?P<punct>[<>(),*&\-])"
)
MAX_SYMBOL = 400


class SymbolError(ValueError):
    """A symbol that is not a C++ template-id; ``message`` says what is wrong."""


@dataclass(frozen=True)
class Symbol:
    text: str  # canonical spelling
    name: str  # the function's qualified name, without template arguments (ns::my_kernel)

    @property
    def base(self) -> str:
        """The function's own name (my_kernel): what compilers and nm report."""
        return self.name.split("::")[-1]


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) per token; whitespace dropped. Raises SymbolError on any other character."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            ch = text[pos]
            raise SymbolError(f"character {ch!r} at offset {pos} is not allowed in a kernel symbol")
        kind = m.lastgroup or ""
        if kind != "ws":
            if kind in ("word", "num") and out and out[-1][0] in ("word", "num") and not (
                    kind == "word" and out[-1][0] == "word" and (m.group() in TYPE_WORDS or out[-1][1] in TYPE_WORDS)):
                raise SymbolError(f"{out[-1][1]!r} and {m.group()!r} side by side at offset {pos}: template "
                                  "arguments are separated by ','")
            out.append((kind, m.group()))
        pos = m.end()
    return out


def parse(text: str, keywords: frozenset[str] = frozenset()) -> Symbol:
    """Checks ``text`` and returns its canonical form; ``keywords`` are words refused as names
    (the C++ keywords, less the type words template arguments may use)."""
    if len(text) > MAX_SYMBOL:
        raise SymbolError(f"the symbol is {len(text)} characters; the limit is {MAX_SYMBOL}")
    toks = tokens(text)
    if not toks:
        raise SymbolError("the symbol is empty")
    i = 0
    if toks[0] == ("scope", "::"):
        i = 1
    name_parts: list[str] = []
    while True:
        if i >= len(toks) or toks[i][0] != "word":
            raise SymbolError("a kernel symbol starts with a function name (ns::my_kernel)")
        w = toks[i][1]
        if w in keywords or w in TYPE_WORDS:
            raise SymbolError(f"'{w}' is a C++ keyword, not a function name")
        name_parts.append(w)
        i += 1
        if i < len(toks) and toks[i] == ("scope", "::"):
            i += 1
            continue
        break
    if i < len(toks):
        if toks[i] != ("punct", "<"):
            raise SymbolError(f"unexpected {toks[i][1]!r} after the function name; template arguments go in < >")
        i = _template_args(toks, i, keywords)
        if i < len(toks):
            raise SymbolError(f"unexpected {toks[i][1]!r} after the template arguments")
    return Symbol(_join(toks[1:] if toks[0] == ("scope", "::") else toks), "::".join(name_parts))


def _template_args(toks: list[tuple[str, str]], i: int, keywords: frozenset[str]) -> int:
    """Checks the template argument list starting at ``toks[i]`` (``<``); returns the index
    after its closing ``>``. Brackets and parentheses balance; ``>>`` arrives as two ``>``."""
    stack: list[str] = []
    prev = ""
    while i < len(toks):
        kind, t = toks[i]
        if kind == "word" and t in keywords and t not in TYPE_WORDS:
            raise SymbolError(f"'{t}' is a C++ keyword that a template argument cannot use here")
        if t in "<(":
            stack.append(t)
        elif t in ">)":
            if prev == ",":
                raise SymbolError("an empty template argument")
            want = "<" if t == ">" else "("
            if not stack or stack[-1] != want:
                raise SymbolError(f"unbalanced {t!r} in the template arguments")
            stack.pop()
            if not stack:
                return i + 1
        elif t == ",":
            if prev in ("<", "(", ","):
                raise SymbolError("an empty template argument")
        elif t == "-":
            nxt = toks[i + 1][0] if i + 1 < len(toks) else ""
            if nxt != "num":
                raise SymbolError("'-' is allowed only before an integer literal")
        prev = t
        i += 1
    raise SymbolError("unbalanced '<': the template argument list is not closed")


def _join(toks: list[tuple[str, str]]) -> str:
    out = ""
    prev_kind = ""
    for kind, t in toks:
        if kind in ("word", "num") and prev_kind in ("word", "num"):
            out += " "
        out += t
        prev_kind = kind
    # ">>" is two closing brackets; keep them apart so any C++ dialect reads them as such.
    return out.replace(">>", "> >").replace(">>", "> >")


def base_name(text: str) -> str:
    """The function's own name of a symbol (or of a compiler's spelling of one)."""
    head = text.split("<", 1)[0]
    return head.split("::")[-1].strip()
