"""The integer members of the sources' class types and class template instances, as launching code
names them: ``Traits::kThreads``, ``Fwd_traits<128, 64, 4, false, half>::kSmemSize``, or through an
alias (``using Traits = Fwd_traits<...>;``).

A member is read from its declaration in the class body, ``static constexpr int kN = <expr>;``
(``static const``, ``constexpr static``, any integer or ``bool`` type) or an enumerator of an
``enum { kN = <expr> }``, and evaluated with the instance's template arguments (the parameters'
defaults for those left out, earlier parameters put into later defaults), the class's other
members and its base classes' (``struct F : public Base``, ``Base`` a class or a template
parameter naming one), ``sizeof`` of the types the registry or a few libraries name (``half``,
``cutlass::half_t``: their bytes), its member type aliases (``using Element = T;``) and the
sources' integer constants. Integer arithmetic follows C++ (division truncates toward zero);
``?:``, comparisons and ``&&`` / ``||`` / ``!`` are read. What is not so written (a member computed by
a function, ``cute::size(...)``, a ``decltype``) has no value, and the launch's expression keeps
its name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from kernelgen.kernel_source import closing, function_pointer, split_top
from kernelgen.types import CPP_TYPES, ELEMS, SCALARS

# element types of libraries that kernels' traits often take, by their bytes (the registry's own
# C++ spellings, half or size_t, come from kernelgen.types)
_LIBRARY_SIZES = {"cutlass::half_t": 2, "cutlass::bfloat16_t": 2, "cutlass::float_e4m3_t": 1,
                  "cutlass::float_e5m2_t": 1, "cutlass::tfloat32_t": 4, "at::Half": 2, "at::BFloat16": 2,
                  "c10::Half": 2, "c10::BFloat16": 2}
_CLASS_HEAD = re.compile(r"\b(?:struct|class)\s+(?:(?:__align__|alignas)\s*\([^()]*\)\s*)?([A-Za-z_]\w*)\s*"
                         r"(?:final\s*)?(:[^;{]*)?\{")
_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*(?:typename\s+)?([^;]+);")
_ENUM = re.compile(r"\benum\s*(?:class\s+|struct\s+)?(?:[A-Za-z_]\w*\s*)?(?::\s*[\w\s:]+)?\{")
_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*|(true|false)\b|"
                    r"(sizeof\s*\(\s*[^()]*\))|([A-Za-z_][\w:]*(?:\s*<[^;(){}]*?>\s*::\s*[A-Za-z_]\w*)?)|"
                    r"(<<|>>|&&|\|\||==|!=|<=|>=|[-+*/%()<>!?:&|^~]))")
_MAX_DEPTH = 12


@dataclass(frozen=True)
class _Class:
    params: tuple[tuple[str, bool, str | None], ...]  # (name, is a type, default as written)
    bases: tuple[str, ...]  # base classes as written (access specifiers dropped)
    body: str


class ClassTable:
    """The class types of comment-free ``text`` (templates or not, by their last name), and the
    integer constants of the sources (``constants``), to evaluate their members with."""

    def __init__(self, text: str, constants: dict[str, int] | None = None) -> None:
        self.classes: dict[str, _Class] = {}
        self.constants = constants or {}
        for m in _CLASS_HEAD.finditer(text):
            end = closing(text, m.end(), "{}")
            if end is None:
                continue
            bases = tuple(re.sub(r"^\s*(?:virtual\s+)?(?:public|protected|private)?\s*(?:virtual\s+)?", "", b)
                          for b in split_top(m.group(2)[1:])) if m.group(2) else ()
            self.classes.setdefault(m.group(1), _Class(_template_params(text, m.start()), bases,
                                                       text[m.end():end]))
        # namespace-scope aliases of class types: using Traits = Fwd_traits<128, 64>;
        self.aliases = {m.group(1): " ".join(m.group(2).split()) for m in _USING.finditer(text)
                        if _class_name(m.group(2)) in self.classes}

    def put(self, expr: str, aliases: dict[str, str] | None = None) -> str:
        """``expr`` with each ``Class<args>::member`` and ``Alias::member`` whose value the table
        gives replaced by that value (``aliases``: the launching code's own, before the table's)."""
        every = {**self.aliases, **(aliases or {})}

        def value(m: re.Match[str]) -> str:
            cls, member = m.group(1), m.group(2)
            cls = every.get(" ".join(cls.split()), cls)
            found = self.member(" ".join(cls.split()), member)
            return str(found) if found is not None else m.group(0)
        return _QUALIFIED.sub(value, expr)

    def evaluate(self, expr: str) -> int | None:
        """The value of integer constant expression ``expr`` (``16 / sizeof(half)``,
        ``Traits<4>::kN * 2``, the sources' constants), or None where it is not one the table computes."""
        return self._evaluate(expr, _Class((), (), ""), {}, 0)

    def member(self, cls: str, member: str, depth: int = 0) -> int | None:
        """The value of integer ``member`` of class ``cls`` (``Name`` or ``Name<args>``), or None."""
        if depth > _MAX_DEPTH:
            return None
        found = self._instance(cls)
        if found is None:
            return None
        c, binding = found
        decl = _declared(c.body, member)
        if decl is not None:
            return self._evaluate(decl, c, binding, depth + 1)
        for base in c.bases:
            value = self.member(_bound(base, binding), member, depth + 1)
            if value is not None:
                return value
        return None

    def _instance(self, cls: str) -> tuple[_Class, dict[str, str]] | None:
        """``cls``'s class and the values of its template parameters (defaults put in)."""
        name = _class_name(cls)
        c = self.classes.get(name) if name is not None else None
        if c is None:
            return None
        lt = cls.find("<")
        args = split_top(cls[lt + 1:cls.rindex(">")]) if lt >= 0 and cls.endswith(">") else []
        if len(args) > len(c.params):
            return None
        binding: dict[str, str] = {}
        for i, (pname, _, default) in enumerate(c.params):
            if i < len(args):
                binding[pname] = " ".join(args[i].split())
            elif default is not None:
                binding[pname] = _bound(default, binding)
            else:
                return None
        return c, binding

    def _type(self, word: str, c: _Class, binding: dict[str, str], depth: int) -> str:
        """The type ``word`` names in class ``c``: a template parameter's value, a member alias's."""
        if word in binding:
            return binding[word]
        m = re.search(rf"\busing\s+{re.escape(word)}\s*=\s*(?:typename\s+)?([^;]+);", c.body)
        if m is None or depth > _MAX_DEPTH:
            return word
        target = _bound(" ".join(m.group(1).split()), binding)
        head, sep, last = target.rpartition("::")  # typename Base::Element: the base's alias
        inner = self._instance(head) if sep else None
        return self._type(last, inner[0], inner[1], depth + 1) if inner is not None else target

    def _evaluate(self, text: str, c: _Class, binding: dict[str, str], depth: int) -> int | None:
        found = scan(_TOKEN, text)
        if found is None:
            return None
        tokens: list[str | int] = []
        for m in found:
            num, boolean, size, word, op = m.groups()
            if num is not None:
                tokens.append(int(num, 0))
            elif boolean is not None:
                tokens.append(int(boolean == "true"))
            elif size is not None:
                inner = " ".join(size[size.index("(") + 1:size.rindex(")")].split())
                bytes_ = type_size(self._type(inner, c, binding, depth))
                if bytes_ is None:
                    return None
                tokens.append(bytes_)
            elif word is not None:
                value = self._name(" ".join(word.split()), c, binding, depth)
                if value is None:
                    return None
                tokens.append(value)
            else:
                tokens.append(op)
        return _Calc(tokens).value()

    def _name(self, word: str, c: _Class, binding: dict[str, str], depth: int) -> int | None:
        if "::" in word and not word.startswith("::"):
            cls, _, member = word.rpartition("::")
            if "<" not in cls and cls in binding:  # Base::kN, Kernel_traits::kN: a parameter's class
                cls = binding[cls]
            else:
                cls = _bound(self.aliases.get(cls, cls), binding)
            value = self.member(self._type(cls, c, binding, depth) if "<" not in cls else cls, member, depth + 1)
            return value if value is not None else self.constants.get(member)
        if word in binding:  # a value parameter: its argument, itself an expression of constants
            arg = binding[word]
            return self._evaluate(arg, _Class((), (), ""), {}, depth + 1) if arg != word else None
        decl = _declared(c.body, word)
        if decl is not None:
            return self._evaluate(decl, c, binding, depth + 1)
        for base in c.bases:  # an inherited member, by its own name (as a dependent base's is not)
            value = self.member(_bound(base, binding), word, depth + 1)
            if value is not None:
                return value
        return self.constants.get(word.removeprefix("::"))


def local_aliases(text: str) -> dict[str, str]:
    """The type aliases ``text`` (a function body) declares: ``using Traits = Fwd_traits<128>;``
    and ``typedef Fwd_traits<128> Traits;``, name -> the type as written."""
    out = {m.group(1): " ".join(m.group(2).split()) for m in _USING.finditer(text)}
    for m in re.finditer(r"\btypedef\s+(?:typename\s+)?([^;]+?)\s+([A-Za-z_]\w*)\s*;", text):
        out.setdefault(m.group(2), " ".join(m.group(1).split()))
    return out


# Class<args>::member or Name::member (the class as written, then the member's name)
_QUALIFIED = re.compile(r"(?<![\w:])((?:[A-Za-z_]\w*\s*::\s*)*[A-Za-z_]\w*(?:\s*<[^;(){}]*?>)?)\s*::\s*([A-Za-z_]\w*)"
                        r"(?!\s*[(<\w])")


def _class_name(text: str) -> str | None:
    m = re.match(r"\s*(?:typename\s+)?(?:[A-Za-z_]\w*\s*::\s*)*([A-Za-z_]\w*)\s*(?:<.*>)?\s*$", text, re.S)
    return m.group(1) if m else None


def _bound(text: str, binding: dict[str, str]) -> str:
    """``text`` with the template parameters of ``binding`` replaced by their values."""
    return re.sub(r"(?<![\w:.])[A-Za-z_]\w*\b", lambda w: binding.get(w.group(0), w.group(0)), text)


def template_head_before(text: str, start: int) -> str | None:
    """The ``template <...>`` head right before ``text[start:]`` (a class template's), or None."""
    before = text[:start].rstrip()
    if not before.endswith(">"):
        return None
    for m in reversed(list(re.finditer(r"\btemplate\s*<", before))):
        if closing(before, m.end(), "<>") == len(before) - 1:
            return before[m.start():]
    return None


def _template_params(text: str, start: int) -> tuple[tuple[str, bool, str | None], ...]:
    """The parameters of the ``template <...>`` head right before ``text[start:]``: (name, whether
    it is a type, its default as written), or none."""
    head = template_head_before(text, start)
    if head is None:
        return ()
    out = []
    for p in split_top(head[head.index("<") + 1:-1]):
        decl, eq, default = p.partition("=")
        words = re.findall(r"[A-Za-z_]\w*", decl)
        if not words:
            return ()
        is_type = words[0] in ("typename", "class") or words[0] == "template"
        out.append((function_pointer(decl) or words[-1], is_type, " ".join(default.split()) if eq else None))
    return tuple(out)


def _declared(body: str, member: str) -> str | None:
    """The initializer of integer member ``member`` in class body ``body`` (nested classes and
    function bodies left out), or None."""
    flat = _top_level(body)
    m = re.search(rf"\b(?:static\s+constexpr|constexpr\s+static|static\s+const)\s+(?:const\s+)?[\w:\s]*?"
                  rf"\b{re.escape(member)}\s*(?:=\s*([^;{{}}]+)|\{{([^;{{}}]*)\}})\s*;", flat)
    if m is not None:
        return m.group(1) if m.group(1) is not None else m.group(2)
    for e in _ENUM.finditer(flat):
        end = closing(flat, e.end(), "{}")
        if end is None:
            continue
        previous = "-1"
        for item in split_top(flat[e.end():end]):
            name, eq, value = item.partition("=")
            value = value if eq else f"({previous}) + 1"
            if name.strip() == member:
                return value
            previous = value
    return None


def _top_level(body: str) -> str:
    """``body`` with the contents of nested braces blanked (nested classes, function bodies), but
    those of enums and of a static member's braced initializer (``static constexpr int k{4};``)."""
    out: list[str] = []
    keep: list[bool] = []  # per open brace: whether its contents stay (an enum's, an initializer's)
    for i, ch in enumerate(body):
        if ch == "{":
            before = body[max(0, i - 200):i]
            keep.append(bool(re.search(r"\benum\b[^;{}]*$", before) or re.search(
                r"\b(?:static|constexpr)\b[^;{}()=]*\b[A-Za-z_]\w*\s*$", before)))
        elif ch == "}" and keep:
            keep.pop()
        elif keep and not keep[-1]:
            ch = " "
        out.append(ch)
    return "".join(out)


def scan(rx: re.Pattern[str], text: str) -> list[re.Match[str]] | None:
    """The consecutive matches of token pattern ``rx`` (which skips leading spaces) that make up
    ``text``, or None where something else is left."""
    out, pos = [], 0
    while pos < len(text):
        m = rx.match(text, pos)
        if m is None:
            return None if text[pos:].strip() else out
        out.append(m)
        pos = m.end()
    return out


def type_size(cpp: str) -> int | None:
    """The bytes of C++ type ``cpp`` where the registry or the table of library types knows it."""
    spec = CPP_TYPES.get(cpp)
    t = (ELEMS.get(spec) or SCALARS.get(spec)) if spec else None
    return t.bits // 8 if t is not None else _LIBRARY_SIZES.get(cpp)


class _Calc:
    """C++ integer arithmetic over ``tokens`` (ints and operators), by precedence climbing."""

    _BINARY: ClassVar[dict[str, int]] = {"*": 10, "/": 10, "%": 10, "+": 9, "-": 9, "<<": 8, ">>": 8, "<": 7,
                                         "<=": 7, ">": 7, ">=": 7, "==": 6, "!=": 6, "&": 5, "^": 4, "|": 3,
                                         "&&": 2, "||": 1}

    def __init__(self, tokens: list[str | int]) -> None:
        self.tokens, self.i = tokens, 0

    def value(self) -> int | None:
        try:
            v = self._ternary()
        except (ArithmeticError, IndexError, TypeError, ValueError):
            return None
        return v if self.i == len(self.tokens) else None

    def _peek(self) -> str | int | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _ternary(self) -> int:
        cond = self._binary(1)
        if self._peek() != "?":
            return cond
        self.i += 1
        a = self._ternary()
        if self._peek() != ":":
            raise ValueError("?: without :")
        self.i += 1
        b = self._ternary()
        return a if cond else b

    def _binary(self, least: int) -> int:
        left = self._unary()
        while True:
            op = self._peek()
            prec = self._BINARY.get(op) if isinstance(op, str) else None
            if prec is None or prec < least:
                return left
            self.i += 1
            right = self._binary(prec + 1)
            left = _apply(str(op), left, right)

    def _unary(self) -> int:
        t = self._peek()
        self.i += 1
        if isinstance(t, int):
            return t
        if t == "(":
            v = self._ternary()
            if self._peek() != ")":
                raise ValueError("unbalanced")
            self.i += 1
            return v
        if t in ("-", "+", "!", "~"):
            v = self._unary()
            return {"-": -v, "+": v, "!": int(not v), "~": ~v}[str(t)]
        raise ValueError(f"unexpected {t!r}")


_OPS = {"*": lambda a, b: a * b, "+": lambda a, b: a + b, "-": lambda a, b: a - b,
        "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b, "<": lambda a, b: int(a < b),
        "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b), ">=": lambda a, b: int(a >= b),
        "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b), "&": lambda a, b: a & b,
        "^": lambda a, b: a ^ b, "|": lambda a, b: a | b, "&&": lambda a, b: int(bool(a) and bool(b)),
        "||": lambda a, b: int(bool(a) or bool(b))}


def _apply(op: str, a: int, b: int) -> int:
    """``a op b`` as C++ computes it on 64-bit integers (a value or shift beyond them: ValueError)."""
    if op in ("<<", ">>") and not 0 <= b < 64:
        raise ValueError("shift out of range")
    if op in ("/", "%"):
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # truncation toward zero
        out = q if op == "/" else a - q * b
    else:
        out = _OPS[op](a, b)
    if not -(1 << 63) <= out < (1 << 64):
        raise ValueError("beyond 64 bits")
    return out
