"""A first spec for existing kernels: ``kernelgen draft SOURCE`` reads the ``__global__``
functions of a CUDA source and writes the module spec that describes them, to be checked and
completed by hand (grid, block, sizes, examples, template arguments).

What it reads, without a compiler (the limits of ``kernel_source``): comments are removed and
preprocessor branches are not evaluated; each ``__global__`` declaration gives its name, its
namespaces, its ``template <...>`` head, its ``__launch_bounds__`` and its parameter list. Each
parameter's C++ type is mapped to the type registry (``const float* __restrict__`` ->
``const f32*``, ``int64_t`` / ``long long`` -> ``i64`` (through the source's ``using`` and
``typedef`` aliases), ``__nv_bfloat16*`` -> ``bf16*``, a
template type parameter ``const T*`` -> ``"const {T}*"`` with ``T`` an instantiation axis); a
type it does not know (a struct passed by value) becomes an entry under ``structs:`` with the
fields of its declaration in the source or a local header (enum members as their underlying
types, class-type members as nested structs with entries of their own), or without fields (a
stateless functor, which the build checks) and a comment saying to give them, and why.
Where the source launches a kernel itself (``k<<<grid, block, smem, stream>>>(args)``,
``cudaLaunchKernelEx``), the launch's geometry is written as spec expressions (``launch_sites``),
and its template arguments give the instances where there are no explicit instantiations (a
function given a function pointer template parameter, ``k<32, dq_a>``, fixed per kernel). A
kernel is drafted only where the module's sources define it (a declaration alone is not).
What cannot be known from the text is written as a working guess with a comment: the block
(``__launch_bounds__`` or 256 threads), a one-dimensional grid over the first integer argument,
and an example. The draft loads and generates as it is; ``kernelgen build`` then checks each
kernel's parameters against it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernelgen import expr
from kernelgen.class_members import ClassTable, template_head_before
from kernelgen.errors import KernelgenError
from kernelgen.kernel_source import (
    FN_POINTER,
    Macros,
    SourceScanError,
    _bounds_of,
    _cluster_of,
    _names,
    blank_literals,
    closing,
    expand_kernel_macros,
    expand_macros,
    function_pointer,
    global_decls,
    macros_of,
    namespaces_at,
    split_top,
    strip_comments,
)
from kernelgen.launch_sites import (
    Geometry,
    LaunchSite,
    arg_type,
    dispatched,
    geometry,
    helper_functions,
    launches,
    put_names,
)
from kernelgen.loader import PACKAGE_NAMES, PROJECT_FILE, load_project, load_targets, reserved_reason
from kernelgen.model import DEVICE_NAMES
from kernelgen.names import Naming
from kernelgen.types import CPP_TYPES, ELEMS, SCALARS, SPEC_ELEMS, TOOLKIT_STRUCTS

# Scalars the registry passes by value (vector and 8-bit float types are pointer elements only).
_SCALARS = {"f32", "f64", "f16", "bf16", "bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"}


def _toolkit_entry(cpp: str) -> str | None:
    """The ``structs:`` entry (after ``cpp:``) of a struct type the CUDA toolkit declares and the
    draft knows (``float2``, ``__half2``, ``CUtensorMap``): its fields, and its alignment where
    that is more than its fields give; None for other types."""
    t = TOOLKIT_STRUCTS.get(cpp)
    if t is not None:
        given, align = t.fields, t.align
    else:
        return None
    if given is None:
        return None
    natural = max(SCALARS[ty.split("[")[0]].bits // 8 for _, ty in given)
    fields = ", ".join(f"{n}: {_yaml_str(ty)}" for n, ty in given)
    return f"fields: {{{fields}}}" + (f", align: {align}" if align > natural else "")


# CUDA's handles declared as integers: texture and surface objects are unsigned long long.
_HANDLES = {"cudaTextureObject_t": "u64", "cudaSurfaceObject_t": "u64"}
_QUALIFIERS = re.compile(r"\b(?:__restrict__|__restrict|restrict|__grid_constant__|volatile|struct|class|"
                         r"typename)\b")
_TEMPLATE_HEAD = re.compile(r"\btemplate\s*<")
# The largest value of each integer type of the spec.
_INT_MAX = {"u8": 0xFF, "i8": 0x7F, "u16": 0xFFFF, "i16": 0x7FFF, "u32": 0xFFFF_FFFF, "i32": 0x7FFF_FFFF,
            "u64": 0xFFFF_FFFF_FFFF_FFFF, "i64": 0x7FFF_FFFF_FFFF_FFFF}
_INT_NAMES = ("n", "numel", "num_elements", "size", "count", "total", "length", "len", "rows", "num_rows", "m",
              "tokens", "num_tokens", "batch")


@dataclass
class Param:
    name: str
    cpp: str  # as written, qualifiers removed
    spec: str | None  # the spec's type, or None where a struct entry stands for it
    struct: str | None = None  # the C++ type of a by-value parameter the registry does not know
    note: str = ""


@dataclass
class TemplateParam:
    name: str
    kind: str  # "type", "int", "bool", "function" (a function pointer), or "value" (another non-type one: an enum)
    default: str | None = None
    cpp: str = ""  # a non-type parameter's C++ type


@dataclass
class Global:
    name: str
    qualified: str  # with namespaces: what the spec's symbol spells
    params: list[Param]
    template: list[TemplateParam] = field(default_factory=list)
    max_threads: str | None = None  # __launch_bounds__'s first argument (a literal, a name, Traits::kN)
    cluster: tuple[str, str, str] | None = None  # __cluster_dims__: literals or integer template parameters
    line: int = 0
    # an extern __shared__ array its body declares: its element type as written, and the registry's
    dynamic_smem: tuple[str, str | None] | None = None
    # the template arguments of the source's explicit instantiations (template __global__ void k<8>(...);)
    instances: list[list[str]] = field(default_factory=list)
    namespace: str = ""
    cooperative: bool = False  # its body syncs the whole grid (cooperative_groups)
    pdl: bool = False  # its body waits on / releases the stream's previous / next kernel (griddepcontrol)
    macro: str = ""  # the macro invocation that declares it, if any
    launched: bool = False  # its instances are those the source's launches give (no explicit instantiations)
    defined: bool = False  # the sources read define it (not only declare it)
    sites: list[LaunchSite] = field(default_factory=list)  # its launches (k<<<...>>>(...)) in the source
    # the class types of the source and its headers: a traits class's members its launch bounds name
    classes: ClassTable | None = None


def _angle(text: str, start: int) -> str:
    """The text inside the ``<`` at ``text[start - 1]`` (to the end when it is not closed)."""
    end = closing(text, start, "<>")
    return text[start:end if end is not None else len(text)]


_INTEGER_SCALARS = {"i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"}


def _template_head(head: str, aliases: dict[str, str] | None = None,
                   fn_types: frozenset[str] | set[str] = frozenset()) -> list[TemplateParam]:
    """The parameters of the last ``template <...>`` head in ``head``; ``fn_types``: the sources'
    aliases of function pointer types (``typedef void (*dq_t)(...)``), whose parameters, like one
    declared ``R (*fn)(args)``, take a function."""
    heads = list(_TEMPLATE_HEAD.finditer(head))
    if not heads:
        return []
    m = heads[-1]
    out = []
    for p in split_top(_angle(head, m.end())):
        default = None
        if "=" in p:
            p, default = (x.strip() for x in p.split("=", 1))
        fn = function_pointer(p)
        if fn is not None:  # scalar_t (*ACT_FN)(const scalar_t&)
            out.append(TemplateParam(fn, "function", default, " ".join(p.split())))
            continue
        words = p.replace("...", " ").split()
        if not words:
            continue
        name = words[-1] if len(words) > 1 else f"P{len(out)}"
        if words[0] in ("typename", "class"):
            out.append(TemplateParam(name, "type", default))
            continue
        cpp = " ".join(w for w in words[:-1] if w != "const") if len(words) > 1 else words[0]
        spec = CPP_TYPES.get(_resolve(cpp, aliases or {}))
        if cpp.split("::")[-1] in fn_types:
            out.append(TemplateParam(name, "function", default, cpp))
        elif spec == "bool":
            out.append(TemplateParam(name, "bool", default, cpp))
        elif spec in _INTEGER_SCALARS or cpp in ("auto", "int", "unsigned"):
            out.append(TemplateParam(name, "int", default, cpp))
        else:  # an enum's value, or a type the draft cannot spell as an integer axis
            out.append(TemplateParam(name, "value", default, cpp))
    return out


def _launch_bounds(head: str) -> str | None:
    """The first argument of ``__launch_bounds__``: digits, or a name (a template parameter, or a
    class's member: ``Kernel_traits::kNThreads``)."""
    m = re.search(r"\b__launch_bounds__\s*\(\s*([0-9]+|[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)\s*[,)]", head)
    return m.group(1) if m else None


_ENUM = re.compile(r"\benum\s+(?:(class|struct)\s+)?([A-Za-z_]\w*)\s*(?::\s*([A-Za-z_][\w:\s]*?))?\s*\{")


@dataclass
class _Enum:
    spec: str  # the registry type of its underlying type
    note: str
    enumerators: list[str]  # as the global scope spells them (ns::E::a for an enum class, ns::a for a plain enum)


def _enum_table(text: str) -> dict[str, _Enum]:
    """The enums of comment-free ``text``, by their qualified names (``ns::E``)."""
    spaces = namespaces_at(text)
    out = {}
    for m in _ENUM.finditer(text):
        ns = [n for at, n in spaces if at <= m.start()][-1]
        qual = f"{ns}::{m.group(2)}" if ns else m.group(2)
        end = closing(text, m.end(), "{}") or m.end()
        items = [e.strip() for e in split_top(text[m.end():end]) if e.strip()]
        names = [re.match(r"\w*", e).group(0) for e in items]  # type: ignore[union-attr]
        scope = qual if m.group(1) else ns
        enumerators = [f"{scope}::{n}" if scope else n for n in names if n]
        under = " ".join((m.group(3) or "").split())
        if under:
            spec = CPP_TYPES.get(under, "i32")
            note = "" if under in CPP_TYPES else f"check: enum {m.group(2)}'s underlying type {under}"
        elif m.group(1):
            spec, note = "i32", ""  # an enum class's underlying type is int
        elif any(re.match(r"\w+\s*=\s*-", e) for e in items):
            spec, note = "i32", (f"check: plain enum {m.group(2)} has a negative enumerator, so GCC and nvcc give it "
                                 "the underlying type int (fix it: enum E : int32_t)")
        else:
            spec, note = "u32", (f"check: plain enum {m.group(2)} has no negative enumerator, so GCC and nvcc give "
                                 "it the underlying type unsigned int (fix it: enum E : uint32_t)")
        out[qual] = _Enum(spec, note, enumerators)
    return out


_RECORD = re.compile(r"\b(?P<kind>struct|class|union)\s+(?:(?:__align__|alignas)\s*\((?P<align>[^()]*)\)\s*)?"
                     r"(?P<name>[A-Za-z_]\w*)\s*(?:final\s*)?(?=[:{;])(?!::)")


# ``typedef struct [Tag] { ... } Name;``: the record's head, up to its opening brace.
_TYPEDEF_RECORD = re.compile(r"\btypedef\s+(?P<kind>struct|class|union)\s+"
                             r"(?:(?:__align__|alignas)\s*\((?P<align>[^()]*)\)\s*)?(?:[A-Za-z_]\w*\s*)?(?P<base>:[^;{]*)?\{")
# Any alias's name (``using Ptr = T*;``, ``template <class T> using V = Vec<T>;``).
_ANY_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=")
# A name, qualified or not (``Act::Relu``, ``::pr::kBlock``), not a member after ``.`` or ``->``:
# group 1 a leading ``::``, group 2 its first name, group 3 the rest.
_NAME_CHAIN = re.compile(r"(?<![\w.:])(?<!->)(::\s*)?([A-Za-z_]\w*)((?:\s*::\s*[A-Za-z_]\w*)*)")
# A namespace-scope constant (its name): what a template argument may name.
_CONSTANT = re.compile(r"\bconstexpr\b[^;{}()=]*?\b([A-Za-z_]\w*)\s*(?:=|\{)")


def _typedef_records(text: str) -> list[tuple[re.Match[str], int, list[str]]]:
    """``typedef struct [Tag] { ... } Name, *PName;`` of comment-free ``text``: (the head's match,
    the offset of its closing brace, the names it declares as the record: not pointers)."""
    out = []
    for m in _TYPEDEF_RECORD.finditer(text):
        end = closing(text, m.end(), "{}")
        semi = text.find(";", end) if end is not None else -1
        if end is None or semi < 0:
            continue
        names = [re.fullmatch(r"[A-Za-z_]\w*", d.strip()) for d in text[end + 1:semi].split(",")]
        out.append((m, end, [n.group(0) for n in names if n is not None]))
    return out


def _type_table(text: str) -> set[str]:
    """The qualified names of the class types (templates among them) and type aliases comment-free
    ``text`` declares."""
    spaces = namespaces_at(text)
    out = set()
    for rx, group in ((_RECORD, "name"), (_ANY_USING, 1), (_TYPEDEF, 2)):
        for m in rx.finditer(text):
            ns = [n for at, n in spaces if at <= m.start()][-1]
            out.add(f"{ns}::{m.group(group)}" if ns else m.group(group))
    for m, _, names in _typedef_records(text):
        ns = [n for at, n in spaces if at <= m.start()][-1]
        out |= {f"{ns}::{n}" if ns else n for n in names}
    return out


def _constant_table(text: str) -> dict[str, int | None]:
    """The ``constexpr`` variables of comment-free ``text`` by qualified name: their integer
    value where it is a literal (``constexpr int kBlock = 128;``), else None."""
    spaces = namespaces_at(text)
    out: dict[str, int | None] = {}
    for m in _CONSTANT.finditer(text):
        ns = [n for at, n in spaces if at <= m.start()][-1]
        lit = re.match(r"\s*\(?\s*(-?[0-9]+)[uUlL]*\s*\)?\s*[;}]", text[m.end():])
        out.setdefault(f"{ns}::{m.group(1)}" if ns else m.group(1), int(lit.group(1)) if lit else None)
    return out


# A data member's first declarator (type, name, array size, initialiser) and a further one.
_FIRST_MEMBER = re.compile(r"(?P<type>[A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*?)\s+(?P<name>[A-Za-z_]\w*)\s*"
                           r"(?:\[\s*(?P<n>\d+)\s*\])?\s*(?:=.*|\{.*\})?", re.S)
_MORE_MEMBER = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*(?:\[\s*(?P<n>\d+)\s*\])?\s*(?:=.*|\{.*\})?", re.S)
# A member declared with an alignment of its own (alignas(16) float v[4];).
_MEMBER_ALIGN = re.compile(r"(?:alignas|__align__)\s*\([^()]*\)")


@dataclass
class _Record:
    """A class type the sources define: the text between its braces, its declared alignment."""

    body: str
    align: str = ""  # the argument of its alignas / __align__, as written
    why: str = ""  # why its members cannot be fields: a union, a base class
    params: tuple[str, ...] = ()  # a class template's parameters, by name
    typedef: bool = False  # declared by typedef struct { ... } Name; (no struct of that name to forward-declare)


def _records(text: str) -> dict[str, _Record]:
    """The class types comment-free ``text`` defines (with a body), by their qualified names."""
    spaces = namespaces_at(text)
    out = {}
    for m in _RECORD.finditer(text):
        brace = m.end() + len(text[m.end():]) - len(text[m.end():].lstrip())
        based = text.startswith(":", brace)
        if based:  # struct Q : P { ... }: its body follows the base list
            end_decl = text.find(";", brace)
            brace = text.find("{", brace)
            if brace < 0 or 0 <= end_decl < brace:
                continue
        if brace >= len(text) or text[brace] != "{":
            continue
        end = closing(text, brace + 1, "{}")
        if end is None:
            continue
        ns = [n for at, n in spaces if at <= m.start()][-1]
        why = ("a union (its members overlap)" if m.group("kind") == "union" else
               "it has a base class, whose members come first" if based else "")
        name = m.group("name")
        out[f"{ns}::{name}" if ns else name] = _Record(text[brace + 1:end], " ".join((m.group("align") or "").split()),
                                                       why, _class_template_params(text, m.start()))
    for m, end, names in _typedef_records(text):  # typedef struct [Tag] { ... } Name;
        ns = [n for at, n in spaces if at <= m.start()][-1]
        why = ("a union (its members overlap)" if m.group("kind") == "union" else
               "it has a base class, whose members come first" if m.group("base") else "")
        for name in names:
            out.setdefault(f"{ns}::{name}" if ns else name,
                           _Record(text[m.end():end], " ".join((m.group("align") or "").split()), why, typedef=True))
    return out


def _class_template_params(text: str, start: int) -> tuple[str, ...]:
    """The parameter names of the ``template <...>`` head right before ``text[start:]`` (a class
    template's), or none."""
    head = template_head_before(text, start)
    return tuple(t.name for t in _template_head(head)) if head is not None else ()


def _split_members(body: str) -> list[str]:
    """The member declarations of a class body (access specifiers dropped; a nested body, a
    function's included, counts as one declaration, ending at its closing brace)."""
    body = re.sub(r"\b(?:public|private|protected)\s*:", " ", body)
    out, start, depth = [], 0, 0
    for i, ch in enumerate(body):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if ch == "}" and depth == 0 and body[start:i].count("(") > 0:
                out.append(" ".join(body[start:i + 1].split()))
                start = i + 1
        elif ch == ";" and depth == 0:
            out.append(" ".join(body[start:i].split()))
            start = i + 1
    return [d for d in out if d]


_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([A-Za-z_][\w:\s]*?)\s*;")
_TYPEDEF = re.compile(r"\btypedef\s+([A-Za-z_][\w:\s]*?)\s+([A-Za-z_]\w*)\s*;")


# An alias of a function pointer type (typedef void (*dq_t)(...); using dq_t = void (*)(...);): its name.
_FN_TYPE = re.compile(r"\btypedef\s+[^;{}()]*\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(|"
                      r"\busing\s+([A-Za-z_]\w*)\s*=\s*[^;{}()]*\(\s*\*\s*\)\s*\(")


def _aliases(text: str) -> dict[str, str]:
    """Type aliases a source declares (``using index_t = int64_t;``, ``typedef unsigned int uint;``):
    name -> the type it names, for aliases of plain types (not pointers or templates)."""
    out = {m.group(1): " ".join(m.group(2).split()) for m in _USING.finditer(text)}
    out.update({m.group(2): " ".join(m.group(1).split()) for m in _TYPEDEF.finditer(text)
                if not m.group(1).startswith(("struct", "enum", "union"))})
    return out


def _resolve(base: str, aliases: dict[str, str]) -> str:
    """``base`` through the source's type aliases, to a type the registry may know."""
    for _ in range(8):  # alias chains are short; a cycle stops here
        if base in CPP_TYPES or base.split("::")[-1] not in aliases:
            return base
        base = aliases[base.split("::")[-1]]
    return base


# The note of a struct entry whose pointer members the draft gave as u64.
POINTER_FIELDS = "pointer members as u64: pass the device addresses"


@dataclass
class _Member:
    """A drafted field: the member's name, and its scalar type or the C++ type of its nested struct."""

    name: str
    scalar: str = ""
    nested: str = ""  # the class type, as the global scope spells it (or the toolkit's name)
    count: str = ""  # the array length, as written


@dataclass
class _Layout:
    """The drafted ``fields:`` of a class type, the notes they need, or why there are none."""

    members: list[_Member] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    align: int = 0  # its declared alignment (alignas(16)), 0 where none is given as a number
    why: str = ""  # what keeps the draft from giving its fields (its members then are not drafted)


@dataclass
class _Scope:
    """What the draft knows of the types of a source and the local headers it includes: enums,
    class types and aliases by their qualified names, for C++'s lookup from a kernel's namespace."""

    enums: dict[str, _Enum] = field(default_factory=dict)
    types: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)
    records: dict[str, _Record] = field(default_factory=dict)
    constants: dict[str, int | None] = field(default_factory=dict)  # constexpr variables: value where a literal
    namespaces: set[str] = field(default_factory=set)
    enumerators: set[str] = field(default_factory=set)  # those of plain enums, reached as their namespace's
    files: dict[str, str] = field(default_factory=dict)  # class type -> the file (from the root) that declares it
    fn_types: set[str] = field(default_factory=set)  # aliases of function pointer types, by their last names

    @staticmethod
    def of(texts: list[str]) -> _Scope:
        scope = _Scope()
        for t in texts:
            for k, v in _enum_table(t).items():
                scope.enums.setdefault(k, v)
                if not any(e.startswith(f"{k}::") for e in v.enumerators):
                    scope.enumerators |= set(v.enumerators)
            scope.types |= _type_table(t)
            for k, a in _aliases(t).items():
                scope.aliases.setdefault(k, a)
            scope.fn_types |= {m.group(1) or m.group(2) for m in _FN_TYPE.finditer(t)}
            for k, r in _records(t).items():
                scope.records.setdefault(k, r)
            for k, c in _constant_table(t).items():
                scope.constants.setdefault(k, c)
            for _, ns in namespaces_at(t):
                parts = ns.split("::") if ns else []
                scope.namespaces |= {"::".join(parts[:i]) for i in range(1, len(parts) + 1)}
        return scope

    def qualify(self, text: str, namespace: str, local: frozenset[str] | set[str] = frozenset()) -> str:
        """``text`` (a template argument, a type) written in ``namespace`` with each name it uses
        spelled as the global scope reaches it (``Act::Relu`` in namespace ``pr`` ->
        ``pr::Act::Relu``, ``Vec<Params>`` -> ``pr::Vec<pr::Params>``): the types, enums,
        enumerators of plain enums, ``constexpr`` constants and namespaces the source and its local
        headers declare, found as C++'s unqualified lookup does (the innermost enclosing namespace
        first). Other names (``float``, macros, the toolkit's types, ``local`` ones: template
        parameters) are kept."""
        def one(m: re.Match[str]) -> str:
            if m.group(1) or m.group(2) in local:
                return m.group(0)
            found = self.find(m.group(2), namespace)
            return m.group(0) if found is None else found + m.group(3)
        return _NAME_CHAIN.sub(one, text)

    def find(self, name: str, namespace: str) -> str | None:
        """The entity ``name`` (a single name) that unqualified lookup from ``namespace`` finds among
        those the sources declare at namespace scope, as the global scope spells it; None where it
        is none of them."""
        parts = namespace.split("::") if namespace else []
        for i in range(len(parts), -1, -1):
            cand = "::".join([*parts[:i], name])
            if cand in self.types or cand in self.enums or cand in self.enumerators or cand in self.constants \
                    or cand in self.namespaces:
                return cand
        return None

    def value(self, arg: str, namespace: str, defined: dict[str, int]) -> int | None:
        """The integer a template argument spells: a literal, a macro or ``constexpr`` constant of
        the sources (by the name lookup finds from ``namespace``); None where it is none of these."""
        arg = " ".join(arg.split())
        lit = re.fullmatch(r"\(?\s*(-?\d+)[uUlL]*\s*\)?", arg)
        if lit:
            return int(lit.group(1))
        if arg in defined and not arg.startswith("::") and self.find(arg.split("::")[0], namespace) is None:
            return defined[arg]  # a macro (or a constant not read with its namespace)
        q = self.qualify(arg, namespace).removeprefix("::").replace(" ", "")
        return self.constants.get(q)

    def layout(self, qualified: str) -> _Layout:
        """The fields of the class type ``qualified`` (as the global scope spells it) from its
        declaration, its data members in order (``int rows; float eps = 1e-5f; uint8_t tag[4];``):
        scalars and fixed-size arrays of them; an enum as its underlying type; a pointer as a
        ``u64`` (the address; :data:`POINTER_FIELDS` notes it); a member of a class type the
        sources define, or of a CUDA type the draft knows (``CUtensorMap``, ``float2``), as a
        nested struct (``_Member.nested``). Where a member is none of these (a union, a base class,
        a bit-field, a member with an alignment of its own, a type declared elsewhere), no fields
        and ``why``, naming it; none and no ``why`` for a type without a declaration here."""
        name, _, targs = qualified.partition("<")
        rec = self.records.get(name)
        if rec is None or bool(targs) != bool(rec.params):
            return _Layout()
        # a class template's instance: its parameters stand for the template-id's arguments
        bound = dict(zip(rec.params, split_top(targs[:targs.rfind(">")]))) if targs else {}
        out = _Layout(why=rec.why)
        if rec.align:
            if rec.align.isdigit() and int(rec.align) in (1, 2, 4, 8, 16, 32, 64, 128):
                out.align = int(rec.align)
            else:
                out.notes.append(f"check: it is declared alignas({rec.align}): give align (its bytes, up to 128)")
        namespace = name.rsplit("::", 1)[0] if "::" in name else ""
        pointers = False
        for decl in _split_members(rec.body) if not out.why else []:
            if decl.startswith(("static ", "static_assert", "using ", "typedef ", "friend ", "template", "enum ")):
                continue  # not a data member
            if _MEMBER_ALIGN.match(decl):
                out.why = (f"member '{decl}' has an alignment of its own: give it as a field whose type is a struct "
                           "with that align")
                break
            fn = FN_POINTER.search(decl)
            paren, init = decl.find("("), min((i for i in (decl.find("="), decl.find("{")) if i >= 0), default=-1)
            if fn is None and paren >= 0 and (init < 0 or paren < init):
                continue  # a member function, a constructor or an operator
            parts = split_top(decl)
            if fn is not None or (all("*" in x for x in parts) and "&" not in decl and "[" not in decl):
                names = [fn] if fn else [re.search(r"([A-Za-z_]\w*)\s*(?:=.*)?$", x.split("*")[-1].strip())
                                         for x in parts]
                if None in names:
                    out.why = f"member '{decl}' is not one the draft can read"
                    break
                out.members += [_Member(n.group(1), "u64") for n in names if n is not None]
                pointers = True
                continue
            first = _FIRST_MEMBER.fullmatch(parts[0])
            if first is None:
                kind = ("a bit-field" if re.search(r"(?<!:):(?!:)", decl) else "a reference" if "&" in decl else
                        "of a template type" if "<" in decl else "a class defined in place" if "{" in decl else
                        "not one the draft can read")
                out.why = f"member '{decl}' is {kind}"
                break
            written = " ".join(re.sub(r"\b(?:const|volatile|mutable)\b", " ", first.group("type")).split())
            if written in bound:  # T a; in a class template: the instance's argument (spelled globally)
                written, namespace_of = bound[written], ""
            else:
                namespace_of = namespace
            one = self._member_type(written, namespace_of, out.notes)
            if isinstance(one, str):
                out.why = f"member '{first.group('name')}': {one}"
                break
            for m in [first] + [_MORE_MEMBER.fullmatch(x) for x in parts[1:]]:
                if m is None:
                    out.why = f"member '{decl}' is not one the draft can read"
                    break
                out.members.append(_Member(m.group("name"), one.scalar, one.nested, m.group("n") or ""))
            if out.why:
                break
        if out.why:
            out.members = []
        elif pointers:
            out.notes.append(f"check: {POINTER_FIELDS}")
        return out

    def _member_type(self, written: str, namespace: str, notes: list[str]) -> _Member | str:
        """A data member's type (``written`` in ``namespace``) as a field's (``_Member`` without
        its name), or what keeps it from being one. An enum's note goes to ``notes``."""
        base = _resolve(written, self.aliases)
        spec = CPP_TYPES.get(base)
        if spec in _SCALARS:
            return _Member("", spec)
        if base in _HANDLES:
            return _Member("", _HANDLES[base])
        e = self.enum(base, namespace)
        if e is not None:
            if e.note and e.note not in notes:
                notes.append(e.note)
            return _Member("", e.spec)
        if _toolkit_entry(base) is not None:
            return _Member("", nested=base)
        q = self.lookup(base, namespace)
        if q is not None and q in self.records:
            return _Member("", nested=q)
        if spec is not None:
            return f"{written} ({spec}) is not a scalar a struct field can be"
        return (f"its type {written} is not declared by the source or the headers it includes with quotes"
                if q is None else f"its type {written} is not a class type the draft can lay out")

    def lookup(self, written: str, namespace: str) -> str | None:
        """``written`` (``T`` or ``ops::T``) as the global scope spells the type that unqualified
        lookup finds from ``namespace`` (the innermost enclosing namespace first), or None when
        neither the source nor its local headers declare it."""
        if written.startswith("::"):
            w = written[2:]
            return w if w in self.types or w in self.enums else None
        parts = namespace.split("::") if namespace else []
        for i in range(len(parts), -1, -1):
            cand = "::".join([*parts[:i], written])
            if cand in self.types or cand in self.enums:
                return cand
        return None

    def enum(self, written: str, namespace: str) -> _Enum | None:
        q = self.lookup(written, namespace)
        if q is not None and q in self.enums:
            return self.enums[q]
        if q is None:  # an enum the tables know only by its last name (declared in a class)
            hits = [e for k, e in self.enums.items() if k.split("::")[-1] == written.split("::")[-1]]
            return hits[0] if len(hits) == 1 else None
        return None


def _is_toolkit(cpp: str) -> bool:
    return cpp in TOOLKIT_STRUCTS


def _param(text: str, index: int, template: list[TemplateParam],
           enums: dict[str, tuple[str, str]] | None = None, aliases: dict[str, str] | None = None,
           scope: _Scope | None = None, namespace: str = "") -> Param:
    text = re.sub(r"=.*$", "", text, flags=re.S)  # a default argument
    # T x[] and T x[N] are T* x; a [] without a name is T*
    text = re.sub(r"([A-Za-z_]\w*)\s*\[[^\[\]]*\]\s*$", r"* \1", text.strip())
    text = re.sub(r"\[[^\[\]]*\]\s*$", "*", text)
    text = " ".join(_QUALIFIERS.sub(" ", text).split())
    m = re.match(r"^(.*?)([A-Za-z_]\w*)$", text)
    name = f"arg{index}"
    if m and m.group(1).strip() and not m.group(1).rstrip().endswith("::") and m.group(1).strip() != "const":
        base_text, name = m.group(1).strip(), m.group(2)
    else:
        base_text = text
    stars = base_text.count("*")
    # const before the first *: the pointee is const; const after a *: the pointer is (ignored),
    # except between the two * of a pointer array (the array's elements are const).
    parts = base_text.split("*")
    inner_const = "const" in parts[0].split()
    mid_const = stars >= 2 and "const" in parts[1].split()
    base = " ".join(w for w in parts[0].split() if w != "const").strip()
    base = re.sub(r"\s*::\s*", "::", base)
    types = {t.name: t for t in template}
    if base in types and types[base].kind == "type":
        if stars == 1:
            return Param(name, text, f"{'const ' if inner_const else ''}{{{base}}}*")
        if stars == 0:  # '{T}' where T also types a pointer (float element types only), else a struct
            return Param(name, text, f"{{{base}}}")
        return Param(name, text, f"{'const ' if inner_const else ''}void*", note=f"'{base}' with {stars} levels of "
                     "pointer: passed as untyped memory")
    scope = scope or _Scope()
    base = _resolve(base, {**scope.aliases, **(aliases or {})})
    if base in _HANDLES and stars == 0:
        return Param(name, text, _HANDLES[base], note=f"{base}: a handle, passed as its integer")
    e = scope.enum(base, namespace)
    enum = (e.spec, e.note) if e is not None else (enums or {}).get(base.split("::")[-1])
    if enum is not None and stars == 0:
        return Param(name, text, enum[0], note=enum[1] or f"enum {base}")
    elem = CPP_TYPES.get(base)
    if stars == 0 and elem not in _SCALARS:  # a struct by value: the toolkit's, or one to describe
        if _is_toolkit(base) or elem is not None:
            return Param(name, text, None, struct=base, note=f"'{base}' by value" if _is_toolkit(base) else
                         f"'{base}' by value: declare its fields")
        if "<" in base:  # a class template's instance (TP<T>): its name and arguments as the global scope spells them
            local = frozenset(t.name for t in template)
            tname, _, targs = base.partition("<")
            found = scope.lookup(tname, namespace)
            if found is not None:
                return Param(name, text, None, struct=f"{found}<{scope.qualify(targs, namespace, local)}",
                             note=f"'{base}' by value")
        qualified = scope.lookup(base, namespace)
        if qualified is None and (namespace or "::" in base):
            return Param(name, text, None, struct=base.removeprefix("::"),
                         note=f"'{base}' by value; check its C++ name: neither the source nor the headers it includes "
                              "with quotes declare it, so it is written as the source spells it")
        return Param(name, text, None, struct=qualified or base, note=f"'{base}' by value")
    if elem is None:
        if stars == 1:
            return Param(name, text, f"{'const ' if inner_const else ''}void*",
                         note=f"'{base}*': untyped memory, sized in bytes; the kernel keeps its type")
        return Param(name, text, f"{'const ' if inner_const else ''}void*",
                     note=f"check: '{base}' with {stars} levels of pointer has no spec type")
    if stars == 0:
        return Param(name, text, elem)
    if stars == 1:
        return Param(name, text, f"{'const ' if inner_const else ''}{elem}*")
    if stars == 2:
        if inner_const:
            return Param(name, text, f"const {elem}* const*")
        return Param(name, text, f"{elem}* const*" if mid_const else f"{elem}**")
    return Param(name, text, f"{'const ' if inner_const else ''}void*", note=f"{stars} levels of pointer: "
                 "passed as untyped memory")


def _cluster_text(head: str, defined: dict[str, int], template: list[TemplateParam]) -> tuple[str, str, str] | None:
    """``__cluster_dims__``'s dimensions as the spec's ``cluster`` writes them: integers, or the
    kernel's integer template parameters (instantiation axes); None when there is none, or when
    an argument is neither."""
    try:
        dims = _cluster_of(head, defined)
        return None if dims is None else (str(dims[0]), str(dims[1]), str(dims[2]))
    except SourceScanError:
        pass
    m = re.search(r"\b__cluster_dims__\s*\(([^()]*)\)", head)
    ints = {t.name for t in template if t.kind == "int"}
    args = [a.strip() for a in m.group(1).split(",")] if m else []
    if not args or len(args) > 3 or not all(a.isdigit() or a in ints for a in args):
        return None
    args += ["1"] * (3 - len(args))
    return args[0], args[1], args[2]


@dataclass
class _Prepared:
    """A source's text as the draft scans it: comments removed, literals and preprocessor lines
    blanked, the macros that spell ``__global__`` (or a kernel attribute) expanded
    (:func:`kernel_source.expand_kernel_macros`)."""

    text: str
    defined: dict[str, int]
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # expanded invocations: start, end, as written
    notes: list[str] = field(default_factory=list)
    macros: Macros = field(default_factory=lambda: ({}, {}))


def _kernel_macros(raw: str) -> Macros:
    """The macros of ``raw`` that spell ``__global__`` or a kernel attribute: object-like (name ->
    body) and function-like (name -> (parameters, body))."""
    return macros_of(blank_literals(strip_comments(raw)), kernel_only=True)


def _keep_pdl(stripped: str, text: str) -> str:
    """``text`` (``stripped`` with its literals blanked) with the griddepcontrol instructions of
    inline PTX strings written back in place, so that a kernel's body shows what it issues."""
    for m in _PDL_ASM.finditer(stripped):
        text = text[:m.start(1)] + m.group(1) + text[m.end(1):]
    return text


def _prepare(raw: str, inherited: Macros | None = None) -> _Prepared:
    stripped = strip_comments(raw)
    text = _keep_pdl(stripped, blank_literals(stripped))
    expanded = expand_kernel_macros(text, inherited)
    return _Prepared(expanded.text, _names([text]), expanded.spans, expanded.notes, expanded.macros)


_GRID_SYNC = re.compile(r"\b(?:this_grid|grid_group)\b")
# Programmatic dependent launch from the kernel's side: the runtime's calls or the PTX they issue.
_PDL_ASM = re.compile(r'"[^"\n]*?\b(griddepcontrol\.(?:wait|launch_dependents))\b[^"\n]*"')
_PDL = re.compile(r"\b(?:cudaGridDependencySynchronize|cudaTriggerProgrammaticLaunchCompletion)\s*\(|"
                  r"\bgriddepcontrol\.(?:wait|launch_dependents)\b")


def _body(text: str, end: int) -> str | None:
    """The body of the function whose parameter list ends at ``end``, or None (a declaration)."""
    brace = text.find("{", end)
    if brace < 0 or ";" in text[end:brace]:
        return None
    k = closing(text, brace + 1, "{}") or len(text)
    return text[brace:k]


def read_globals(text: str, also: tuple[str, ...] = (), headers: tuple[str, ...] = ()) -> list[Global]:
    """The ``__global__`` functions of a source's text (and of ``also``, more sources of the same
    module), in order, each name once (the first declaration with a parameter list; a definition
    repeats it). ``headers`` are the texts of the local headers they include, for the types
    they declare."""
    return _read(text, also, headers)[0]


def _read(text: str, also: tuple[str, ...] = (), headers: tuple[str, ...] = ()) -> tuple[list[Global], list[str]]:
    inherited: Macros = ({}, {})
    for h in headers:  # #define ENGINE_KERNEL __global__ in an included header
        objects, functions = _kernel_macros(h)
        inherited = ({**objects, **inherited[0]}, {**functions, **inherited[1]})
    prepared = [_prepare(t, inherited) for t in (text, *also)]
    # every macro of the headers and the sources, for parameter lists (#define PTR(T) T* __restrict__)
    every: Macros = ({}, {})
    for t in (*headers, text, *also):
        every = macros_of(blank_literals(strip_comments(t)), inherited=every)
    scope = _Scope.of([p.text for p in prepared] + [blank_literals(strip_comments(h)) for h in headers])
    defined: dict[str, int] = {}
    for p in prepared:
        for k, v in p.defined.items():
            defined.setdefault(k, v)
    out: dict[tuple[str, tuple[str | None, ...]], Global] = {}
    explicit: dict[str, list[list[str]]] = {}
    notes = [n for p in prepared for n in p.notes]
    for prep in prepared:
        text = prep.text
        for d in global_decls(text):
            head, qualified = d.head, d.qualified
            if re.search(r"\btemplate\s*(?!\s*<)", head):
                # an explicit instantiation (template __global__ void k<256>(...);) of a template above:
                # its arguments are values to build the template for
                if d.template_args is not None:  # (spelled from the global scope, as the symbol needs)
                    explicit.setdefault(qualified, []).append([scope.qualify(" ".join(a.split()), d.namespace)
                                                               for a in split_top(d.template_args)])
                continue
            template = _template_head(head, scope.aliases, scope.fn_types)
            written = expand_macros(d.params, every)[0]
            params = [] if written.strip() in ("", "void") else [
                _param(p, i, template, None, None, scope, d.namespace) for i, p in enumerate(split_top(written))]
            for i, (piece, p) in enumerate(zip(split_top(written), params)):
                call = _UNKNOWN_CALL.search(piece)
                if call is not None and call.group(1) not in _ATTRIBUTE_WORDS:
                    why = f"'{piece}' uses {call.group(1)}(...), " + (
                        "a macro whose parameters its arguments do not match" if call.group(1) in every[1] else
                        "a macro neither the source nor the headers it includes with quotes define")
                    notes.append(f"check: {d.qualified}: parameter {p.name}: {why}: give its type by hand")
                    params[i] = Param(p.name, piece, "void*", note=f"check: {why}: give its type")
            key = (qualified, tuple(p.spec or p.struct for p in params))  # overloads differ in their types
            cluster = _cluster_text(head, defined, template)
            try:
                bounds = _bounds_of(head, defined)
            except SourceScanError:
                bounds = None
            threads = str(bounds[0]) if bounds else _launch_bounds(head)
            body = _body(text, d.end)
            written = _extern_shared(text, d.end)
            smem = (written, CPP_TYPES.get(_resolve(written, scope.aliases))) if written is not None else None
            coop = body is not None and bool(_GRID_SYNC.search(body)) and bool(re.search(r"\.\s*sync\s*\(", body))
            pdl = body is not None and bool(_PDL.search(body))
            macro = next((inv for a, b, inv in prep.spans if a <= d.offset < b), "")
            if key not in out:
                out[key] = Global(d.name, qualified, params, template, max_threads=threads, cluster=cluster,
                                  line=text.count("\n", 0, d.offset) + 1, dynamic_smem=smem, namespace=d.namespace,
                                  cooperative=coop, pdl=pdl, macro=macro, defined=body is not None)
            else:  # a definition after a declaration
                out[key].defined |= body is not None
                if smem is not None:
                    out[key].dynamic_smem = smem
                out[key].cooperative |= coop
                out[key].pdl |= pdl
                if out[key].max_threads is None:
                    out[key].max_threads = threads
    # the class types of the sources and their headers, whose integer members launches name
    every_text = "\n".join([*(blank_literals(strip_comments(h)) for h in headers), *(p.text for p in prepared)])
    classes = ClassTable(every_text, defined)
    sites = launches(prepared[0].text, every, classes, helper_functions(every_text))
    for g in out.values():
        g.instances = [a for a in explicit.get(g.qualified, []) if len(a) <= len(g.template)]
        g.sites = sites.get(g.name, [])
        g.classes = classes
        for site in g.sites:  # template arguments a launch leaves to deduction or to the defaults
            if g.template and len(site.template_args or ()) < len(g.template):
                site.template_args = _completed(g, site)
        # (a scalar_t deduced inside a PyTorch dispatch macro: each type the macro dispatches)
        g.sites = [d for s in g.sites for d in dispatched(s)]
        if g.template and not g.instances:  # the template arguments its launches give, where plain
            g.instances = list(dict.fromkeys(
                tuple(" ".join(a.split()) for a in s.template_args) for s in g.sites
                if s.template_args and len(s.template_args) <= len(g.template) and all(
                    _plain_arg(t, a, scope, g.namespace, defined) for t, a in zip(g.template, s.template_args))))
            g.launched = bool(g.instances)
    return list(out.values()), notes


def _completed(g: Global, site: LaunchSite) -> list[str] | None:
    """A launch's template arguments with those it does not write filled in: a type parameter by
    what the launch passes where the kernel's parameter is of that type (``k<<<..>>>(y, x, a)``
    with ``float* y`` for ``T* y``: ``float``), else the parameter's default; None (as written)
    where one is neither."""
    args = list(site.template_args or [])
    for t in g.template[len(args):]:
        value = None
        if t.kind == "type":
            for p, text in zip(g.params, site.call_args):
                if p.spec is not None and p.spec.replace("const ", "") in (f"{{{t.name}}}", f"{{{t.name}}}*"):
                    value = arg_type(site.param_types, text)
                    if value is not None:
                        break
        value = value or t.default
        if value is None:
            return site.template_args
        args.append(value)
    return args


# A function as a template argument: its name, qualified or not, with ``&`` or template arguments.
_FUNCTION_ARG = re.compile(r"&?\s*(?:::)?[A-Za-z_][\w:]*\s*(?:<.*>)?", re.S)


def _plain_arg(t: TemplateParam, arg: str, scope: _Scope, namespace: str, defined: dict[str, int]) -> bool:
    """Whether template argument ``arg`` of a launch is a value the draft can take for ``t``: an
    element type, an integer (a literal or a constant), true / false, an enumerator of an enum
    parameter's type (not a name of the launching function's, such as its own template parameter)."""
    if t.kind == "type":  # an element type, or a class type of the sources (Traits<128, 128>: fixed, not an axis)
        head = re.match(r"\s*(?:::)?([A-Za-z_][\w:]*)\s*(<.*>)?\s*$", arg, re.S)
        return CPP_TYPES.get(_resolve(scope.qualify(arg, namespace), scope.aliases)) in SPEC_ELEMS or (
            head is not None and scope.find(head.group(1).split("::")[0], namespace) is not None
            and re.sub(r"\s+", "", scope.qualify(head.group(1), namespace)).removeprefix("::") in scope.types)
    if t.kind == "int":
        return scope.value(arg, namespace, defined) is not None
    if t.kind == "bool":
        return arg.strip() in ("true", "false")
    if t.kind == "function":  # a function's name (dq_a, &ns::f, silu<float>): a fixed argument
        return bool(_FUNCTION_ARG.fullmatch(arg.strip())) and arg.strip() not in ("true", "false")
    if t.kind == "value":  # an enumerator of the parameter's enum (Mode::kAdd), by the global scope's spelling
        e = scope.enum(t.cpp, namespace)
        return e is not None and re.sub(r"\s+", "", scope.qualify(arg, namespace)).removeprefix("::") in e.enumerators
    return False


# An #include of PyTorch's C++ headers (torch/extension.h, ATen/..., c10/...).
_TORCH_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](?:torch|ATen|c10)/', re.M)
# A parameter's text still invoking something (a macro left unexpanded), but not a function pointer.
_UNKNOWN_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\((?!\s*\*)")
_ATTRIBUTE_WORDS = {"__align__", "alignas", "__attribute__", "decltype", "__declspec"}


_EXTERN_SHARED = re.compile(r"\bextern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([A-Za-z_][\w:\s]*?)\s*"
                            r"(?:__align__\s*\(\s*\d+\s*\)\s*)?[A-Za-z_]\w*\s*\[\s*\]")


def _extern_shared(text: str, end: int) -> str | None:
    """The element type of the ``extern __shared__`` array (dynamic shared memory) declared in the
    body of the kernel whose parameter list ends at ``end``, or None (a declaration, or a body
    without one)."""
    brace = text.find("{", end)
    if brace < 0 or ";" in text[end:brace]:
        return None
    k = closing(text, brace + 1, "{}") or len(text)
    m = _EXTERN_SHARED.search(text, brace, k)
    return " ".join(m.group(1).split()) if m else None


_COUNT_NAME = re.compile(r"(?i)^(?:n|m|k|num\w*|\w*count|\w*size|\w*len\w*|\w*idx|\w*index\w*|rows|cols|"
                         r"stride\w*|offset\w*|total|numel|\w*_n)$")
_INDEX_TYPE = re.compile(r"(?i)ind(?:ex)?|idx|int|size|offset|count")
_SCALAR_TYPE = re.compile(r"(?i)scalar|acc|compute|real|float")


def _clean(name: str) -> str:
    """``name`` with what the spec refuses in every name removed: runs of '_', a leading '_' or
    kg_, a leading digit."""
    base = re.sub(r"__+", "_", re.sub(r"\W+", "_", name)).strip("_") or "k"
    if base[:3].lower() == "kg_":
        base = base[3:] or "k"
    if not re.match(r"[A-Za-z]", base):
        base = "k" + base
    return base[:60]


def _usable(name: str) -> bool:
    return bool(_IDENT.fullmatch(name)) and reserved_reason(name) is None


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _spec_name(name: str, taken: set[str]) -> str:
    """A name the spec may use for ``name`` (a kernel, an argument), unused in ``taken``."""
    base = _clean(name)
    if base.endswith("_t"):
        base += "_"
    cand = base
    if reserved_reason(cand) or cand in taken:
        cand = f"{base}_arg" if reserved_reason(f"{base}_arg") is None else f"{base}x"
    i = 2
    while cand in taken or reserved_reason(cand):
        cand = f"{base}{i}"
        i += 1
    taken.add(cand)
    return cand


def _axis_name(name: str, taken: set[str]) -> tuple[str, str]:
    """An instantiation axis's name for template parameter ``name`` (``scalar_t`` -> ``scalar``),
    unused in ``taken``, and a note when it is not ``name``."""
    base = _clean(name)
    while base.endswith("_t") and len(base) > 2:
        base = base[:-2]
    cand, i = base, 2
    while cand in taken or not _usable(cand):
        cand = f"{base}_axis" if i == 2 and _usable(f"{base}_axis") and f"{base}_axis" not in taken else f"{base}{i}"
        i += 1
    taken.add(cand)
    if cand == name:
        return cand, ""
    why = (reserved_reason(name) or "").split(" (")[0] or ("an argument's name" if name in taken else "")
    return cand, f"template parameter {name}" + (f", renamed: {why}" if why else "")


# Words YAML 1.1 or 1.2 reads as booleans or null: quoted in the draft.
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _yaml_expr(text: str) -> str:
    """An expression as a YAML scalar: an integer literal plain, else as ``_yaml_str`` writes it."""
    return text if text.isdigit() else _yaml_str(text)


def _yaml_str(text: str) -> str:
    """``text`` as a YAML scalar: plain where that reads back the same, else double-quoted."""
    if re.fullmatch(r"[A-Za-z_][\w ./*]*", text) and not text.endswith(" ") and text.lower() not in _YAML_WORDS:
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _int_guess(name: str, in_cluster: set[str]) -> int:
    """A value for an integer template parameter without a default: a cluster size 2, a thread
    count 256, anything else (a vector width, a tile) 4."""
    if name in in_cluster:
        return 2
    return 256 if re.search(r"block|thread|warp|cta", name, re.I) else 4


# ---------------------------------------------------------------------------------------------
# Module names


def module_problem(name: str, targets: tuple[str, ...] = (), others: tuple[str, ...] = (),
                   naming: Naming | None = None) -> str | None:
    """Why ``name`` cannot be a module's name (the loader's and the generator's checks), beside
    the project's ``targets`` and the modules ``others``, in a project of names ``naming``
    (kernelgen's own when None); None when it can."""
    from kernelgen import names
    from kernelgen.emit import RUNTIME_HEADERS, TARGET_PATHS, module_paths
    from kernelgen.schema import MODULE_RE

    if not MODULE_RE.fullmatch(name):
        return f"a module name is {MODULE_RE.pattern} (lower case, starting with a letter)"
    why = reserved_reason(name)
    if why:
        return f"'{name}' is reserved: {why}"
    if name in PACKAGE_NAMES:
        return f"the package's own attribute {name} would hide module '{name}'"
    if name in targets:
        return f"'{name}' is a target's name (specs/targets.yaml)"
    # the generated files' paths as the generator names them (kernelgen.emit.check_paths)
    own = set(TARGET_PATHS) | {f"include/{h}" for h in RUNTIME_HEADERS}
    with names.using(naming or names.DEFAULT):
        for t in targets or ("target",):
            files = set(module_paths(name, t))
            clash = sorted(files & own)
            if clash:
                return (f"module '{name}' would generate {clash[0]}, which the target's own files or the runtime "
                        "headers have")
            for o in others:
                clash = sorted(files & set(module_paths(o, t)))
                if o != name and clash:
                    return f"module '{name}' would generate {clash[0]}, which module '{o}' also generates"
    for t in targets:  # contract test files of one name on two targets
        for o in others:
            for u in targets:
                if u != t and o != name and f"{name}_{t}" == f"{o}_{u}":
                    return (f"module '{name}' on target {t} would have the contract test file of module '{o}' on "
                            f"target {u}")
    return None


def module_name(stem: str, targets: tuple[str, ...] = (), others: tuple[str, ...] = (),
                taken: tuple[str, ...] = (), naming: Naming | None = None) -> tuple[str, str]:
    """A module name for a source named ``stem`` that :func:`module_problem` accepts beside the
    modules ``others`` (in a project of names ``naming``), not in ``taken`` (the modules drafted
    with it), and a note saying why it is not the file's name (or "")."""
    base = re.sub(r"\W+", "_", stem).strip("_").lower()
    base = re.sub(r"__+", "_", base)[:40]
    if not re.match(r"[a-z]", base):
        base = f"m_{base}"
    cand, i = base, 2
    first = module_problem(base, targets, others, naming)
    while module_problem(cand, targets, others, naming) or cand in taken:
        cand = f"{base}_ops" if i == 2 else f"{base}_ops{i}"
        i += 1
    note = "" if cand == base else f"not '{base}': {first or 'another module has that name'}"
    return cand, note


# ---------------------------------------------------------------------------------------------
# Kernels


@dataclass
class _Entry:
    """One kernel entry of a drafted ``__global__`` function: the template arguments it fixes (C++
    spellings, by template parameter) and the values of its instantiation axes."""

    fixed: dict[str, str]
    axes: list[list[str]]  # per axis (in template order), its values
    combos: list[tuple[str, ...]] | None = None  # the combinations, where not every one of the axes' values
    # where the source's launches split the instances by the launching function's conditions: the
    # condition (C++) this entry's are launched under ("" for those launched unconditionally)
    guard: str | None = None

    def combinations(self) -> list[list[str]]:
        """The entry's instances' axis values, in order."""
        if self.combos is not None:
            return [list(c) for c in self.combos]
        out: list[list[str]] = [[]]
        for vals in self.axes:
            out = [c + [v] for c in out for v in vals]
        return out


@dataclass
class _Plan:
    g: Global
    family: str = ""
    axes: list[TemplateParam] = field(default_factory=list)
    axis_names: dict[str, str] = field(default_factory=dict)  # template parameter -> axis name
    axis_notes: dict[str, str] = field(default_factory=dict)
    int_types: dict[str, str] = field(default_factory=dict)  # integer-like type parameters -> default C++ type
    functors: set[str] = field(default_factory=set)  # type parameters passed by value that are no axis
    entries: list[_Entry] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # each entry's kernel name
    patterns: list[str | None] = field(default_factory=list)  # each entry's instance_name
    args: list[tuple[str, Param]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    guessed: bool = True  # the axis values are guesses (no explicit instantiations)
    constants: dict[str, int] = field(default_factory=dict)  # the sources' integer constants
    smem_max: int = 48 * 1024  # the most dynamic shared memory a launch may take (every target's opt-in)
    # the values of the device names a launch may use (device.sm_count ...), the least of the targets'
    device: dict[str, int] = field(default_factory=lambda: dict(_DEVICE_DEFAULT))
    unlaunched: Geometry | None = None  # a launch of the source's whose geometry launches for no values tried
    chained: bool = True  # where split (_split): its entries make a fallbacks chain (_chainable)
    # an instantiation's template arguments as written: the arguments it fixes and its axis values
    values_of: dict[tuple[str, ...], tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = \
        field(default_factory=dict)


def _products(rows: list[tuple[str, ...]]) -> list[list[list[str]]]:
    """``rows`` (distinct tuples of axis values) as a list of cartesian products (per axis, its
    values) that together are exactly ``rows``."""
    if not rows:
        return []
    width = len(rows[0])
    cols = [list(dict.fromkeys(r[i] for r in rows)) for i in range(width)]
    size = 1
    for c in cols:
        size *= len(c)
    if size == len(rows) or width == 0:
        return [cols]
    rest: dict[str, list[tuple[str, ...]]] = {}
    for r in rows:
        rest.setdefault(r[0], []).append(r[1:])
    together: dict[tuple[tuple[str, ...], ...], list[str]] = {}
    for v, rs in rest.items():
        together.setdefault(tuple(rs), []).append(v)
    return [[vs, *sub] for rs, vs in together.items() for sub in _products(list(rs))]


def _plan(g: Global, scope: _Scope, defined: dict[str, int]) -> _Plan:
    pl = _Plan(g, constants=defined)
    pointer = {t.name for t in g.template if t.kind == "type" and any(
        p.spec and p.spec.endswith("*") and f"{{{t.name}}}" in p.spec for p in g.params)}
    local = frozenset(t.name for t in g.template)
    # template parameters in the arguments of a class template passed by value (TP<T> t): one C++
    # type per kernel, so they are fixed per kernel (extends) rather than instantiation axes
    in_struct = {t.name for t in g.template for p in g.params if p.struct and "<" in p.struct
                 and re.search(rf"(?<![\w:]){re.escape(t.name)}\b", p.struct.partition("<")[2])}
    for t in g.template:
        if t.kind != "type":
            continue
        if t.name in in_struct:
            default = scope.qualify(t.default, g.namespace, local) if t.default else "float"
            pl.int_types[t.name] = default
            if not g.instances:
                pl.notes.append(f"check: template type {t.name} types a class template passed by value: drafted as "
                                f"{default}; another type is another kernel (extends)")
            continue
        by_value = [p for p in g.params if p.spec == f"{{{t.name}}}"]
        if any(_COUNT_NAME.match(p.name) for p in by_value) or (
                (by_value or t.name in pointer) and _INDEX_TYPE.search(t.name)):
            default = t.default if t.default and CPP_TYPES.get(_resolve(t.default, scope.aliases)) in \
                _INTEGER_SCALARS else "int64_t"
            pl.int_types[t.name] = default
            if not g.instances:
                pl.notes.append(f"check: template type {t.name} types an index or a count: drafted as {default} (an "
                                "instantiation axis types a scalar only for float types); another index type is "
                                "another kernel (extends)")
        elif t.name not in pointer and by_value and _SCALAR_TYPE.search(t.name) and not t.default:
            pl.int_types[t.name] = "float"  # (accscalar_t alpha: a scalar type, fixed)
            pl.notes.append(f"check: template type {t.name} passed by value is drafted as float (an instantiation "
                            "axis types a scalar only where it also types an array)")
        elif t.name not in pointer:
            pl.functors.add(t.name)
    pl.axes = [t for t in g.template if (t.kind == "type" and t.name in pointer and t.name not in pl.int_types)
               or (t.kind == "int" and t.name not in in_struct)]
    fixed_params = [t for t in g.template if t not in pl.axes]
    in_cluster = set(g.cluster or ())

    def int_default(t: TemplateParam) -> str:
        """An integer parameter's value: its default's where the text gives it, else a guess."""
        value = scope.value(t.default, g.namespace, defined) if t.default else None
        if value is None and t.default:
            pl.notes.append(f"check: template parameter {t.name}'s default {t.default} is not an integer the draft "
                            "reads: drafted as a guess")
        return str(value if value is not None else _int_guess(t.name, in_cluster))

    def fixed_default(t: TemplateParam) -> str:
        """A template argument for ``t`` (a default, spelled from the global scope, or a guess)."""
        if t.kind == "bool":
            return t.default or "true"
        if t.name in pl.int_types:
            return pl.int_types[t.name]
        if t.kind == "int":
            return int_default(t)
        if t.kind == "value":
            e = scope.enum(t.cpp, g.namespace)
            if t.default:
                return scope.qualify(t.default, g.namespace, local)
            return e.enumerators[0] if e is not None and e.enumerators else t.name
        return scope.qualify(t.default, g.namespace, local) if t.default else t.name

    explicit: list[tuple[dict[str, str], tuple[str, ...]]] = []
    for args in g.instances:
        full = list(args) + [scope.qualify(t.default, g.namespace, local) if t.default else None
                             for t in g.template[len(args):]]
        if any(a is None for a in full):
            pl.notes.append(f"check: explicit instantiation <{', '.join(args)}> leaves out a template argument")
            continue
        fixed, values, ok = {}, [], True
        for t, a in zip(g.template, full):
            assert a is not None
            if t in pl.axes:
                if t.kind == "type":
                    v = CPP_TYPES.get(_resolve(a, scope.aliases))
                    ok &= v in SPEC_ELEMS and v != "void"
                else:
                    value = scope.value(a, g.namespace, defined)
                    v = str(value) if value is not None else None
                    ok &= v is not None
                values.append(v or "")
            else:
                if t.name in pl.int_types and t.name not in in_struct:
                    ok &= CPP_TYPES.get(_resolve(a, scope.aliases)) in _SCALARS
                fixed[t.name] = a
        if ok:
            explicit.append((fixed, tuple(values)))
            pl.values_of[tuple(" ".join(a.split()) for a in args)] = (tuple(fixed.items()), tuple(values))
        else:
            pl.notes.append(f"check: explicit instantiation {g.name}<{', '.join(args)}> is not drafted (an argument "
                            "the spec cannot spell as an axis value): add its kernel by hand")
    if explicit:
        pl.guessed = False
        # (with explicit instantiations: where the source launches every one of them)
        launched = {_instance_of(pl, s) for s in g.sites}
        guards = _guards(pl) if g.launched or all((tuple(f.items()), v) in launched for f, v in explicit) else {}
        groups: dict[tuple[tuple[tuple[str, str], ...], str | None], list[tuple[str, ...]]] = {}
        for fixed, values in explicit:
            rows = groups.setdefault((tuple(fixed.items()), guards.get((tuple(fixed.items()), values))), [])
            if values not in rows:
                rows.append(values)
        for (fixed_items, guard), rows in groups.items():
            products = _products(rows)
            if len(products) == 1:
                pl.entries.append(_Entry(dict(fixed_items), products[0], guard=guard))
                continue
            # not every combination of the values: one kernel listing the combinations
            axes = [list(dict.fromkeys(r[j] for r in rows)) for j in range(len(pl.axes))]
            pl.entries.append(_Entry(dict(fixed_items), axes, rows, guard=guard))
        # the ones launched unconditionally last: they take what the others' conditions leave
        pl.entries.sort(key=lambda e: e.guard == "")
    else:
        values = []
        for t in pl.axes:
            if t.kind == "type":
                values.append(["f32"])
            else:
                values.append([int_default(t)])
        pl.entries.append(_Entry({t.name: fixed_default(t) for t in fixed_params}, values))
    return pl


def _instance_of(pl: _Plan, site: LaunchSite) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]] | None:
    """The instance (fixed arguments, axis values) a launch's template arguments make, or None."""
    return pl.values_of.get(tuple(" ".join(a.split()) for a in site.template_args or ()))


def _guards(pl: _Plan) -> dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], str]:
    """Where the launching functions choose among the instances they launch with conditions that
    differ between them (if / else, switch): each instance's (fixed arguments, axis values) ->
    the condition it is launched under, C++ ("" where one of its launches has none); empty where
    the conditions do not split the instances."""
    where: dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], list[str]] = {}
    for site in pl.g.sites:
        key = _instance_of(pl, site)
        if key is not None:
            where.setdefault(key, []).append(" ".join(site.guard.split()) if site.guard else "")
    out = {k: "" if "" in v else " || ".join(dict.fromkeys(f"({c})" if len(set(v)) > 1 else c for c in v))
           for k, v in where.items()}
    return out if len(set(out.values())) > 1 else {}


def _entry_type(spec: str, pl: _Plan, entry: _Entry) -> str:
    """A parameter's spec type in ``entry``: its axes' placeholders renamed, the integer-like type
    parameters replaced by the integer type the entry gives them."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name in pl.axis_names:
            return f"{{{pl.axis_names[name]}}}"
        if name in pl.int_types:
            cpp = entry.fixed.get(name, pl.int_types[name])
            return CPP_TYPES.get(cpp, "f32" if pl.int_types[name] == "float" else "i64")
        return m.group(0)
    return re.sub(r"\{(\w+)\}", sub, spec)


def _entry_struct(p: Param, pl: _Plan, entry: _Entry) -> str | None:
    """The C++ type of a by-value parameter of a struct entry in ``entry``: the template
    parameters its template arguments name replaced by the arguments the entry fixes
    (``pr::TP<T>`` -> ``pr::TP<float>``); None for a parameter of another type."""
    fixed = {t.name: entry.fixed[t.name] for t in pl.g.template if t.name in entry.fixed}
    if p.struct is None or "<" not in p.struct:  # (a functor's template parameter: the type the entry gives it)
        return fixed.get(p.struct, p.struct) if p.struct is not None else None
    name, _, targs = p.struct.partition("<")
    return name + "<" + re.sub(r"(?<![\w:])[A-Za-z_]\w*\b", lambda m: fixed.get(m.group(0), m.group(0)), targs)


def _kernel_names(pl: _Plan, base: str, full: str, public: set[str]) -> None:
    """Each entry's kernel name (and instance name pattern), unused in ``public`` and unreserved,
    with their instances and plan functions; added to ``public``."""
    axes = [pl.axis_names[t.name] for t in pl.axes]
    vary = [k for k in (pl.entries[0].fixed if pl.entries else {})
            if len({e.fixed.get(k) for e in pl.entries}) > 1]

    def word(text: str) -> str:
        w = re.sub(r"(?:\W|_)+", "_", re.sub(r"\b\w+\s*::\s*", "", text)).strip("_").lower()
        return w[:-2] if w.endswith("_t") else w

    def instance(pattern: str, combo: list[str]) -> str:
        for a, v in zip(axes, combo):
            pattern = pattern.replace(f"{{{a}}}", v)
        return pattern

    def names_for(fam: str) -> tuple[list[str], list[str | None], list[str]]:
        kernels, patterns, every = [], [], []
        several = len(pl.entries) > 1
        suffixes = ["".join(f"_{word(e.fixed[k])}" for k in vary) for e in pl.entries]
        # the instances' names where the entries' patterns give them, which no kernel may take
        instances = {instance(fam + x + "".join(f"_{{{a}}}" for a in axes), c) for x, e in zip(suffixes, pl.entries)
                     for c in e.combinations()} if several and axes else set()
        # numbered kernels k_v1, k_v2 where a number would be an instance's name (k_{mode}: k_1)
        tag = "v" if any(f"{fam}{x}_{j + 1}" in instances for j, x in enumerate(suffixes)) else ""
        for i, (e, fixed_suffix) in enumerate(zip(pl.entries, suffixes)):
            single = [vals[0] for vals in e.axes if len(vals) == 1]
            pattern = (fam + fixed_suffix + "".join(f"_{{{a}}}" for a in axes)) if several and axes else None
            # its fixed arguments' values (act_relu), else with its axes' single values where that is
            # not its one instance's name, else a number (k_1; k_v1 where an instance is k_1)
            name = fam
            if several:
                with_values = fam + fixed_suffix + "".join(f"_{v}" for v in single)
                own = bool(axes) and len(single) == len(axes)  # with_values: its one instance
                numbered = f"{fam}{fixed_suffix}_{tag}{i + 1}"
                name = next((c for c in (fam + fixed_suffix, None if own else with_values)
                             if c and c != fam and c not in kernels and c not in instances), numbered)
            kernels.append(name)
            patterns.append(pattern)
            every.append(name)
            for c in e.combinations() if axes else []:
                every.append("_".join([name, *c]) if pattern is None else instance(pattern, c))
        if _split(pl):  # the chain of the entries takes the family's name
            every.append(fam)
        return kernels, patterns, every

    candidates = [_clean(base), _clean(full)] + [f"{_clean(base)}_{i}" for i in range(2, 50)]
    for fam in dict.fromkeys(candidates):
        kernels, patterns, every = names_for(fam)
        plans = [f"plan_{n}" for n in every]
        if all(_usable(n) for n in every + plans) and not (set(every + plans) & public) \
                and len(set(every)) == len(every):
            break
    pl.family, pl.names, pl.patterns = fam, kernels, patterns
    public.update(every)
    public.update(f"plan_{n}" for n in every)


def _struct_name(cpp: str, taken: dict[str, str]) -> tuple[str, str]:
    """A ``structs:`` name for C++ type ``cpp``, unused in ``taken`` (kernels, instances, plan
    functions, arguments, axes, the module: what each is), and a note when it is not the plain one."""
    base = _clean(re.sub(r"\b\w+\s*::\s*", "", cpp)).lower()  # (a class template's instance: with its arguments)
    while base.endswith("_t") and len(base) > 2:
        base = base[:-2]

    def free(n: str) -> bool:
        return _usable(n) and n not in taken and n not in SCALARS and n not in ELEMS

    why = ""
    if not free(base):
        why = (reserved_reason(base) and "a reserved name") or (
            "a registry type" if base in SCALARS or base in ELEMS else taken.get(base, ""))
    cand, i = base, 2
    while not free(cand):
        cand = f"{base}_type" if i == 2 else f"{base}_type{i}"
        i += 1
    taken[cand] = f"struct {cand}"
    return cand, (f"not '{base}': {why}" if cand != base else "")


def _local_headers(root: Path | None, source_rel: str, text: str, limit: int = 64) -> list[tuple[str, str]]:
    """The headers ``text`` (at ``source_rel``) includes with quotes, and those they include, that
    exist in the project: (path relative to ``root``, text)."""
    if root is None:
        return []
    root = root.resolve()
    out: dict[str, str] = {}
    todo = [(source_rel, text)]
    while todo and len(out) < limit:
        rel, t = todo.pop(0)
        for m in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', strip_comments(t), re.M):
            for base in ((root / rel).parent, root):
                path = (base / m.group(1)).resolve()
                try:
                    hrel = path.relative_to(root).as_posix()
                except ValueError:
                    continue
                if path.is_file():
                    if hrel not in out and hrel != source_rel:
                        out[hrel] = path.read_text(encoding="utf-8", errors="replace")
                        todo.append((hrel, out[hrel]))
                    break
    return list(out.items())


def draft(source_rel: str, text: str, module: str, only: list[str] | None = None, *, root: Path | None = None,
          also: tuple[tuple[str, str], ...] = (), module_note: str = "",
          targets: tuple[str, ...] = (), naming: Naming | None = None) -> str:
    """The YAML text of a module spec for the ``__global__`` functions of ``text`` (the source at
    ``source_rel``, relative to the project root ``root``), or those named in ``only``. ``also``
    are more sources of the module, (path, text), whose kernels are drafted with the source's
    (a header declaring the kernels that the source defines). The headers the sources include
    with quotes are read (from ``root``) for the types they declare. The module's name is checked
    beside the project's ``targets`` and names ``naming``."""
    why = module_problem(module, targets, naming=naming)
    if why:
        raise KernelgenError(f"module name '{module}' cannot be used: {why}",
                             "name the module with --module (e.g. --module "
                             + module_name(module, targets, naming=naming)[0] + ")")
    if root is None:  # the current folder, if the source is there as given
        cand = Path.cwd() / source_rel
        try:
            root = Path.cwd() if cand.is_file() and cand.read_text(encoding="utf-8", errors="replace") == text \
                else None
        except OSError:
            root = None
    headers = _local_headers(root, source_rel, text)
    for rel, t in also:
        headers += [h for h in _local_headers(root, rel, t) if h[0] not in {r for r, _ in headers}]
    also_rels = {r for r, _ in also}
    header_texts = tuple(t for r, t in headers if r not in also_rels)
    globs, notes = _read(text, tuple(t for _, t in also), header_texts)
    files = [(source_rel, text), *also, *((r, t) for r, t in headers if r not in also_rels)]
    scope = _Scope.of([_prepare(t).text for _, t in files])
    for rel, t in files:
        for q in _records(_prepare(t).text):
            scope.files.setdefault(q, rel)
    defined = _names([strip_comments(t) for t in (text, *(t for _, t in also))])
    if only:
        missing = [n for n in only if n not in {g.name for g in globs} | {g.qualified for g in globs}]
        if missing:
            raise KernelgenError(f"{source_rel} declares no __global__ function {', '.join(missing)} (it declares: "
                                 f"{', '.join(g.qualified for g in globs) or 'none'})")
        globs = [g for g in globs if g.name in only or g.qualified in only]
    undefined = ", ".join(dict.fromkeys(g.qualified for g in globs if not g.defined))
    globs = [g for g in globs if g.defined]  # (one only declared here is drafted where it is defined)
    if undefined and not globs:
        raise KernelgenError(f"{source_rel} declares __global__ {undefined} but does not define "
                             f"{'it' if ',' not in undefined else 'them'}: a spec's sources must define its kernels; "
                             "draft the source that defines them (kernelgen draft that.cu; or both at once, "
                             "kernelgen draft header source --write: the header is read with the source that "
                             "includes it)")
    if undefined:
        notes.append(f"check: {undefined}: declared here but defined in none of the module's sources, so not "
                     "drafted: draft it from the source that defines it")
    if not globs:
        raise KernelgenError(f"{source_rel} declares no __global__ function (comments removed"
                             + ("; " + "; ".join(notes) if notes else "") + ")")
    sources = ", ".join(_yaml_str(r) if "," not in r else f'"{r}"' for r in [source_rel])
    lines = [
        f"# Drafted by `kernelgen draft` from {', '.join([source_rel, *(r for r, _ in also)])}: check each entry "
        "marked 'check' against how the",
        "# kernels are launched (grid, block, shared memory, the element counts of pointers, examples),",
        "# then `kernelgen build` checks every kernel's parameters against its args.",
        f"module: {module}" + (f"  # {module_note}" if module_note else ""),
        f"summary: Kernels of {source_rel}.  # check: one line saying what the module computes",
        f"sources: [{sources}]",
    ]
    lines += [f"# {n}" for n in notes]
    torch = sorted({rel for rel, t in [(source_rel, text), *also] if _TORCH_INCLUDE.search(strip_comments(t))})
    if torch:  # the source's PyTorch code would be compiled into the library, which does not link libtorch
        lines += [f"# check: {', '.join(torch)} include{'s' if len(torch) == 1 else ''} PyTorch's headers: the build "
                  "compiles the whole source into the project's library, which does not link libtorch (importing it "
                  "then fails: undefined symbol ...c10...); keep the code that uses torch out of that build with "
                  "#ifndef KERNELGEN_TARGET_NAME ... #endif (docs/adopting.md), and give torch's include folders "
                  "(torch.utils.cpp_extension.include_paths()) to build: include_dirs where the kernels need them"]
    # Names: axes and arguments per kernel, then kernels (with instances and plan functions), then structs.
    public: set[str] = {"TARGET", "KILL_SWITCH"}
    plans = [_plan(g, scope, defined) for g in globs]
    smem_max, device = _target_limits(root)
    for pl in plans:
        pl.smem_max, pl.device = smem_max, device
    what: dict[str, str] = {module: "the module's name"}
    for pl in plans:
        raw_args = {_clean(p.name) for p in pl.g.params}
        taken_axes: set[str] = set(raw_args)
        dispatches = [site.dispatch for site in pl.g.sites if site.dispatch is not None]
        for t in pl.axes:
            pl.axis_names[t.name], pl.axis_notes[t.name] = _axis_name(t.name, taken_axes)
            if t.name == "scalar_t" and dispatches:
                macros = " and ".join(sorted({m for m, _ in dispatches}))
                sixteen = {"__half", "__nv_bfloat16"} & {ty for _, tys in dispatches for ty in tys}
                pl.axis_notes[t.name] = "; ".join(filter(None, [
                    f"the types the source's {macros} gives scalar_t" + (
                        ", c10's Half and BFloat16 as CUDA's __half and __nv_bfloat16: check the kernel builds "
                        "with those" if sixteen else ""), pl.axis_notes[t.name]]))
        taken = set(pl.axis_names.values())
        for p in pl.g.params:
            if p.spec and re.fullmatch(r"\{(\w+)\}", p.spec) and p.spec[1:-1] in pl.functors:
                base = p.spec[1:-1]  # a template type passed by value only: a functor or a struct
                p = Param(p.name, p.cpp, None, struct=base, note=f"template type '{base}' by value: give the type")
            pl.args.append((_spec_name(p.name, taken), p))
        for n in taken:
            what.setdefault(n, f"an axis of kernel {pl.g.name}" if n in pl.axis_names.values() else
                            f"an argument of {pl.g.name}")
    for pl in plans:
        g = pl.g
        base = re.sub(r"_kernel$|Kernel$", "", g.name) or g.name
        full = g.name
        if sum(1 for h in globs if h.qualified == g.qualified) > 1:  # overloads: named by their first pointer
            elems = [p.spec.split()[-1].rstrip("*") for p in g.params if p.spec and "*" in p.spec]
            suffix = f"_{elems[0]}" if elems and re.fullmatch(r"\w+", elems[0]) else ""
            base, full = base + suffix, full + suffix
        _kernel_names(pl, base, full, public)
    structs: dict[str, tuple[str, str]] = {}  # C++ type -> (struct name, note)
    struct_taken = {n: "a launcher or plan function's name" for n in public} | {
        n: f"kernel {n}'s name" for pl in plans for n in pl.names} | what
    for pl in plans:
        for entry in pl.entries:
            for _, p in pl.args:
                cpp = _entry_struct(p, pl, entry)
                if cpp is not None and cpp not in structs:
                    structs[cpp] = _struct_name(cpp, struct_taken)
    layouts: dict[str, _Layout | str] = {}
    if structs:
        lines += _struct_lines(structs, struct_taken, scope, layouts)
    body: list[str] = []
    for pl in plans:
        body += _kernel_lines(pl, structs, layouts)
    lines.append("kernels:")
    chains = [f"  {pl.family}: [{', '.join(pl.names)}]" for pl in plans if _split(pl) and pl.chained]
    if chains:
        body += ["fallbacks:  # the launching code's choice among a kernel's instances, by the conditions it launches "
                 "them under"] + chains
    return "\n".join(lines + body) + "\n"


def _split(pl: _Plan) -> bool:
    """Whether the launching code's conditions split ``pl``'s instances into entries of their own."""
    return len(pl.entries) > 1 and any(e.guard is not None for e in pl.entries)


def _struct_lines(structs: dict[str, tuple[str, str]], taken: dict[str, str], scope: _Scope,
                  layouts: dict[str, _Layout | str]) -> list[str]:
    """The ``structs:`` lines of the arguments' struct types (C++ type -> (name, note)), and of the
    class types their fields hold (added to ``structs`` under names free in ``taken``); ``layouts``
    receives each type's drafted layout (C++ type -> its fields, or a toolkit type's entry)."""

    def layout(cpp: str, within: tuple[str, ...] = ()) -> _Layout | str:
        """``cpp``'s layout; one holding a type without drafted fields (which a field cannot be) has none."""
        if cpp not in layouts:
            lay: _Layout | str = _toolkit_entry(cpp) or scope.layout(cpp)
            for m in lay.members if isinstance(lay, _Layout) else ():
                inner = layout(m.nested, (*within, cpp)) if m.nested and m.nested not in within else None
                if m.nested and (inner is None or (isinstance(inner, _Layout) and not inner.members)):
                    why = "contains itself" if inner is None else "has no drafted fields" + (
                        f" ({inner.why})" if isinstance(inner, _Layout) and inner.why else "")
                    lay = _Layout(why=f"member '{m.name}': its type {m.nested} {why}")
                    break
            layouts[cpp] = lay
        return layouts[cpp]

    entries: dict[str, str] = {}  # C++ type -> the entry after its cpp
    notes: dict[str, list[str]] = {}
    todo = list(structs)
    while todo:
        cpp = todo.pop(0)
        lay = layout(cpp)
        notes[cpp] = [structs[cpp][1]] if structs[cpp][1] else []
        if isinstance(lay, str):
            entries[cpp] = lay
            continue
        for m in lay.members:
            if m.nested and m.nested not in structs:
                structs[m.nested] = _struct_name(m.nested, taken)
                todo.append(m.nested)
        fields = [(m.name, m.scalar or structs[m.nested][0], m.count) for m in lay.members]
        entries[cpp] = f"fields: {{{_field_entries(fields)}}}" + (f", align: {lay.align}" if lay.align and fields
                                                                  else "")
        notes[cpp] += ([f"check: fields not drafted: {lay.why}"] if lay.why else []) + lay.notes
    if any(e.startswith("fields: {}") for e in entries.values()):
        out = ["structs:  # check: give each its fields, in order (none: a stateless functor, checked empty)"]
    elif any(cpp not in TOOLKIT_STRUCTS for cpp in structs):
        out = ["structs:  # fields read from the types' declarations (the build checks their layout)"]
    else:
        out = ["structs:  # CUDA's vector types, passed by value"]
    for cpp, (key, _) in structs.items():
        # a class template's instance or a typedef'd struct cannot be forward-declared: the C++ API
        # header includes the file that declares it
        name = cpp.partition("<")[0]
        rec = scope.records.get(name)
        header = scope.files.get(name) if rec is not None and ("<" in cpp or rec.typedef) else None
        if header is not None and not header.endswith(_HEADER_SUFFIXES):
            notes[cpp].append(f"check: the C++ API header includes {header} for the type, and the build includes "
                              "it again: give it an include guard (#ifndef / #define; #pragma once cannot tell the "
                              "installed copy from the original), or move the type into a header given here")
        out.append(f"  {key}: {{cpp: {_yaml_str(cpp)}, {entries[cpp]}"
                   + (f", header: {_yaml_str(header)}" if header else "") + "}"
                   + (f"  # {'; '.join(notes[cpp])}" if notes[cpp] else ""))
    return out


def _field_entries(fields: list[tuple[str, str, str]]) -> str:
    """``fields:`` entries for (member, type, array length or ""): a member named like a word the
    spec reserves (``in``) is a field of another name with the member as its ``cpp``."""
    taken = {name for name, _, _ in fields}
    out = []
    for name, ty, count in fields:
        text = _yaml_str(f"{ty}[{count}]") if count else ty
        if _usable(name):
            out.append(f"{name}: {text}")
        else:
            out.append(f"{_spec_name(f'{name}_field', taken)}: {{type: {text}, cpp: {name}}}")
    return ", ".join(out)


def _int_fields(pl: _Plan, entry: _Entry, layouts: dict[str, _Layout | str]) -> list[tuple[str, _Member]]:
    """The integer scalar fields of the structs the kernel takes by value, as drafted (``layouts``):
    (its argument's name, the field)."""
    out = []
    for name, p in pl.args:
        cpp = _entry_struct(p, pl, entry)
        lay = layouts.get(cpp) if cpp is not None else None
        for m in lay.members if isinstance(lay, _Layout) and not lay.why else ():
            if m.scalar in _INT_MAX and not m.count:
                out.append((name, m))
    return out


def _struct_counts(fields: list[tuple[str, _Member]], taken: set[str]) -> list[tuple[str, str, str]]:
    """For a kernel without integer parameters: those of its structs' integer ``fields`` named like
    counts (n, rows, num_tokens...), as host arguments read from them (name, type, ``arg.field``);
    none where its structs have no such field."""
    out = []
    for name, m in fields:
        if m.name.lower() not in _INT_NAMES:
            continue
        spec = m.name if _usable(m.name) and m.name not in taken else _spec_name(f"{name}_{m.name}", taken)
        taken.add(spec)
        out.append((spec, m.scalar, f"{name}.{m.name}"))
    return out


def _kernel_lines(pl: _Plan, structs: dict[str, tuple[str, str]], layouts: dict[str, _Layout | str]) -> list[str]:
    g = pl.g
    body: list[str] = []
    # the launching code's conditions split the instances: an entry each, with its applies_if, and a
    # chain of them (draft() writes it)
    split = _split(pl)
    guarded: list[tuple[Geometry, dict[str, int], int] | None] = [None] * len(pl.entries)
    # the first entry's launch, and how to read another entry's (with the first's arguments)
    first: tuple[Geometry, dict[str, int], int] | None = None
    launch_of: Callable[..., tuple[Geometry, dict[str, int], int] | None] | None = None
    for i, (entry, kname, pattern) in enumerate(zip(pl.entries, pl.names, pl.patterns)):
        args = []
        for name, p in pl.args:
            cpp = _entry_struct(p, pl, entry)
            if cpp is not None:
                args.append((name, structs[cpp][0], p.note or f"'{cpp}' by value"))
            else:
                args.append((name, _entry_type(p.spec or "void*", pl, entry), p.note))
        targs = [f"{{{pl.axis_names[t.name]}}}" if t.name in pl.axis_names else entry.fixed.get(t.name, t.name)
                 for t in g.template]
        symbol = g.qualified + (f"<{', '.join(targs)}>" if g.template else "")
        unsure = pl.guessed and any(t.name not in pl.axis_names and (t.kind != "type" or t.name not in pl.int_types
                                                                     or not t.default) for t in g.template)
        head = f"  {kname}:"
        if g.macro:
            head += f"  # declared by the macro invocation {g.macro}"
        body.append(head)
        if i > 0:
            body.append(f"    extends: {pl.names[0]}  # another combination the source instantiates")
        body.append(f"    symbol: {_yaml_str(symbol)}" + ("  # check the template arguments" if unsure else ""))
        if i == 0:
            body.append(f"    summary: What {g.name} computes.  # check")
            for n in pl.notes:
                body.append(f"    # {n}")
        if pl.axes and entry.combos is not None:
            names = [pl.axis_names[t.name] for t in pl.axes]
            body.append("    instantiate:  # the source's " + ("launches" if g.launched else "explicit instantiations")
                        + ": these combinations only")
            for combo in entry.combos:
                body.append("      - {" + ", ".join(f"{n}: {v}" for n, v in zip(names, combo)) + "}")
            if pattern is not None:
                body.append(f"    instance_name: {_yaml_str(pattern)}")
        elif pl.axes:
            body.append("    instantiate:" + (
                "  # those the source launches under this condition: a kernel each for the others" + _CHAIN_NOTE
                if i == 0 and split else
                "  # the source instantiates only these combinations: one kernel each for the others"
                if i == 0 and len(pl.entries) > 1 else ""))
            for t, vals in zip(pl.axes, entry.axes):
                aname = pl.axis_names[t.name]
                why = pl.axis_notes.get(t.name, "")
                if not pl.guessed:
                    comment = ("the source's launches" + ("; check: the dispatcher takes the first instance that "
                                                          "launches (applies_if chooses)" if len(vals) > 1
                                                          and t.kind != "type" else "")
                               if g.launched else "the source's explicit instantiations")
                elif t.kind == "type":
                    comment = "check: the element types to build it for"
                else:
                    comment = "check: the values to build it for"
                body.append(f"      {aname}: [{', '.join(vals)}]  # {comment}" + (f"; {why}" if why else ""))
            if pattern is not None:
                body.append(f"    instance_name: {_yaml_str(pattern)}")
        if g.launched and pl.axes and not split:
            body += _launch_conditions(pl, entry)
        bools = [n for n, t, _ in args if t == "bool"]
        if i > 0:
            if [t for _, t, _ in args] != [t for _, t, _ in _first_args(pl, structs)]:  # integer types differ
                body.append("    args:")
                for n, t, note in args:
                    body.append(f"      {_yaml_str(n)}: {_yaml_str(t)}" + (f"  # {note}" if note else ""))
            if split:  # its own launch's geometry where it differs, its own condition, and values that meet it
                own = guarded[i] if guarded[0] is not None else None  # (a guess before: said, not written)
                if own is not None:  # (the others' host arguments too, in the examples below)
                    body += _own_geometry(guarded[0], own, bools)[:-1]
                body += _condition_lines(entry, own)
                if own is not None and guarded[0] is not None:
                    body.append(_examples_line({**{n: v for n, v in guarded[0][1].items() if n not in own[1]},
                                                **own[1]}, bools))
            elif first is not None and launch_of is not None:  # its own launch's geometry, where that differs
                body += _own_geometry(first, launch_of(entry), bools)
            elif (threads_own := _bound_threads(g, entry)) != _bound_threads(g, pl.entries[0]) and threads_own[1]:
                body.append(f"    block: [{threads_own[0]}, 1, 1]  # its __launch_bounds__({g.max_threads}) for this "
                            "instance")
            continue
        body.append("    args:" if args else "    args: {}")
        int_max = {n: _INT_MAX[t] for n, t, _ in args if t in _INT_MAX}
        ints = list(int_max)
        for n, t, note in args:
            comment = f"  # {note}" if note else ""
            body.append(f"      {_yaml_str(n)}: {_yaml_str(t)}{comment}")
        int_fields = _int_fields(pl, entry, layouts)
        counts: list[tuple[str, str, str]] = []
        if not ints:  # the counts in a struct passed by value: host integers read from its fields
            counts = _struct_counts(int_fields, {n for n, _, _ in args} | set(pl.axis_names.values()))
            for n, t, _where in counts:
                int_max[n] = _INT_MAX[t]
            ints = list(int_max)
        # the first integer named like a count drives the grid, else the first: one of 16 bits or
        # more where there is one (an 8-bit flag holds no size)
        pool = [n for n in ints if int_max[n] >= 0x7FFF] or ints
        driver = next((n for n in pool if n.lower() in _INT_NAMES), pool[0] if pool else None)
        # what a launch may read of the structs (p.rows): their integer fields under their own names
        members = {n: [m.name for m in lay.members] for n, p in pl.args
                   if (cpp := _entry_struct(p, pl, entry)) is not None
                   and isinstance(lay := layouts.get(cpp), _Layout) and not lay.why}
        # (a count read from a struct field drives a launch's grid by the field's path)
        launch_driver = next((w for n, _, w in counts if n == driver), driver)
        read = {f"{n}.{m.name}" for n, m in int_fields if _usable(m.name)}
        count_names = {n for n, _, _ in counts}
        launch_of = functools.partial(_launch, pl, args, int_max, launch_driver, read, members, count_names)
        launch = first = launch_of()
        if split:  # every entry's launch under its condition; the host arguments of them all
            guarded = [launch] + [launch_of(e) for e in pl.entries[1:]]
            if launch is not None:
                union = {n: t for got in guarded if got is not None for n, t in got[0].host_args}
                union.update(dict(launch[0].host_args))
                launch = (replace(launch[0], host_args=list(union.items())), launch[1], launch[2])
                guarded[0] = launch
            pl.chained = _chainable(pl, guarded)
            if not pl.chained:  # (each one's condition to write by hand, no chain)
                body[:] = [line.replace(_CHAIN_NOTE, "") for line in body]
                body.append(f"    # check: the source chooses among {', '.join(pl.names)} by conditions the draft "
                            "cannot write as applies_if, so no fallbacks chain is drafted (its later members would "
                            "never be reached): write each one's applies_if, then chain them")
        axis = pl.axis_names
        cluster = tuple(axis.get(c, c) for c in g.cluster) if g.cluster else None
        smem_line = None
        if launch is not None:  # the struct counts the launch's expressions use, with its host arguments
            geo, values, kinds = launch
            used = set(re.findall(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", " ".join([*geo.grid, *geo.block,
                                                                             geo.shared_mem or ""])))
            counts = [c for c in counts if c[0] in used]
            for n in [n for n in values if n in int_max and n not in used and n not in {a for a, _, _ in args}]:
                del values[n]
        if counts:
            body.append("    host_args:  # check: read from the struct's fields; the grid and sizes use them")
            for n, t, where in counts:
                body.append(f"      {_yaml_str(n)}: {{type: {t}, from: {where}}}")
        if launch is not None:
            if geo.host_args:
                if not counts:
                    body.append("    host_args:  # the launching function's integers the launch uses")
                for n, t in geo.host_args:
                    why = f"  # check: the launching function computes it: {' '.join(geo.computed[n].split())}" \
                        if n in geo.computed else ""
                    body.append(f"      {_yaml_str(n)}: {t}{why}")
            where = f"as the source's launch at line {geo.line} gives it" if kinds == 1 else \
                f"check: as the source's launch at line {geo.line} gives it; its launches give {kinds} geometries"
            body.append(f"    grid: [{', '.join(map(_yaml_expr, geo.grid))}]  # {where}")
            body.append(f"    block: [{', '.join(map(_yaml_expr, geo.block))}]")
            if cluster:
                body.append(f"    cluster: [{', '.join(cluster)}]")
            if geo.shared_mem is not None:
                smem_line = f"    shared_mem: {_yaml_expr(geo.shared_mem)}"
            elif geo.smem_text is not None:
                smem_line = (f"    shared_mem: 0  # check: the launch gives {' '.join(geo.smem_text.split())} bytes, "
                             "which the draft cannot write as an expression")
            # no work where the grid's first extent's integer is 0 (nrows == 0)
            driver = next((n for n in re.findall(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", geo.grid[0]) if n in values),
                          driver)
        else:
            threads, from_bound = _bound_threads(g, entry)
            threads = axis.get(threads, threads)
            cx = cluster[0] if cluster else "1"
            grid = (f"div_ceil({driver}, {threads} * {cx}) * {cx}" if cx != "1" else f"div_ceil({driver}, {threads})") \
                if driver else cx
            cy, cz = (cluster[1], cluster[2]) if cluster else (1, 1)
            if pl.unlaunched is not None:
                u = pl.unlaunched
                body.append(f"    # check: the source's launch at line {u.line} (grid [{', '.join(u.grid)}], block "
                            f"[{', '.join(u.block)}], shared memory {u.shared_mem or 0}) launches for none of the "
                            f"values tried (1 to 65536) within every target's limits (1024 threads a block, "
                            f"{pl.smem_max} bytes of shared memory{', a grid of whole clusters' if cluster else ''}): "
                            "a guess stands in for it")
            body.append(f"    grid: [{_yaml_str(grid)}, {cy}, {cz}]  # check")
            body.append(f"    block: [{threads}, 1, 1]" + (
                "  # check" if not from_bound else
                f"  # its __launch_bounds__({g.max_threads}) for this instance" if "::" in (g.max_threads or "")
                else ""))
            if cluster:
                body.append(f"    cluster: [{', '.join(cluster)}]")
            if g.dynamic_smem is not None:
                written, elem = g.dynamic_smem
                t = ELEMS.get(elem or "") or SCALARS.get(elem or "")
                per = t.bits // 8 if t is not None else 0
                smem_line = (f"    shared_mem: {_yaml_str(f'{threads} * {per}') if per else 0}  # check: the bytes of "
                             f"its extern __shared__ {written} array")
            values = {n: min(1024, int_max[n]) if n == driver else 1 for n in ints}
        modes, why = [], []
        if g.cooperative or any(site.cooperative for site in g.sites):
            what = "it syncs the whole grid" if g.cooperative else "the source launches it with " \
                "cudaLaunchCooperativeKernel"
            reason = what + (" (cooperative_groups)" if g.cooperative else "")
            if cluster:
                body.append(f"    # check: {what} (a cooperative launch), which a cluster launch cannot be")
            else:
                modes.append("cooperative: true")
                why.append(reason)
        if g.pdl:
            modes.append("programmatic_dependent: true")
            why.append("it waits on or releases the stream's neighbouring kernels (griddepcontrol)")
        if launch is not None:
            body += _launch_cluster_lines(launch[0], cluster, modes, why)
        if modes:
            body.append(f"    launch: {{{', '.join(modes)}}}  # {'; '.join(why)}")
        if smem_line:
            body.append(smem_line)
        if split:
            body += _condition_lines(entry, launch)
        if driver:
            body.append(f"    skip_if: [{driver} == 0]")
        body.append(_examples_line(values, bools))
    return body


# the first entry's instantiate comment, where a fallbacks chain of the entries is drafted
_CHAIN_NOTE = ", a chain of them in fallbacks"


def _chainable(pl: _Plan, guarded: list[tuple[Geometry, dict[str, int], int] | None]) -> bool:
    """Whether the entries of ``pl``, which the launching code's conditions split, make a fallbacks
    chain whose every member can be reached: each has its condition as applies_if (``guarded``: each
    entry's launch under its condition), except one launched unconditionally, last."""
    written = [e.guard == "" or (got is not None and guarded[0] is not None and got[0].condition is not None)
               for e, got in zip(pl.entries, guarded)]
    return all(written) and all(e.guard for e in pl.entries[:-1])


def _launch_cluster_lines(geo: Geometry, compiled: tuple[str, ...] | None, modes: list[str],
                          why: list[str]) -> list[str]:
    """The cluster a launch asks for (``cudaLaunchAttributeClusterDimension``) as the entry's
    ``launch: {cluster: ...}`` (added to ``modes``, its reason to ``why``), or the comment lines
    saying it where the spec cannot take it (an expression it cannot write, a compile-time
    ``cluster`` or a cooperative launch beside it)."""
    if geo.cluster_text is not None:
        return [f"    # check: the source launches it in clusters of ({geo.cluster_text}) (cudaLaunchAttributeCluster"
                "Dimension), which the draft cannot write: give launch: {cluster: [x, y, z]}"]
    if geo.cluster is None:
        return []
    dims = ", ".join(map(_yaml_expr, geo.cluster))
    if compiled or "cooperative: true" in modes:
        beside = "its __cluster_dims__" if compiled else "a cooperative launch"
        return [f"    # check: the source launches it in clusters of [{dims}] (cudaLaunchAttributeClusterDimension) "
                f"beside {beside}, which a spec cannot say"]
    modes.append(f"cluster: [{dims}]")
    why.append("the source launches it in clusters (cudaLaunchAttributeClusterDimension)")
    return []


def _bound_threads(g: Global, entry: _Entry) -> tuple[str, bool]:
    """The block size an entry of ``g`` drafts without a launch to read: its ``__launch_bounds__``,
    a literal, an integer template parameter, or a traits class's member evaluated with the
    entry's template arguments (``Kernel_traits::kNThreads``); else 256. And whether it is the bound."""
    bound = g.max_threads
    if bound and not bound.isdigit() and g.classes is not None:
        value = g.classes.put(put_names(bound, entry.fixed)).strip()
        bound = value if value.isdigit() else bound
    if bound and (bound.isdigit() or bound in {t.name for t in g.template if t.kind == "int"}):
        return bound, True
    return "256", False


def _own_geometry(first: tuple[Geometry, dict[str, int], int],
                  own: tuple[Geometry, dict[str, int], int] | None, bools: list[str]) -> list[str]:
    """The grid, block and shared memory lines of an entry that extends the first one (``first``'s
    launch) but is launched with other geometry (``own``), with values it launches for; none where
    its geometry is the first's, is not read, or uses host arguments the first does not declare."""
    if own is None:
        return []
    geo, base = own[0], first[0]
    if (geo.grid, geo.block, geo.shared_mem) == (base.grid, base.block, base.shared_mem) \
            or not set(geo.host_args) <= set(base.host_args) or geo.smem_text is not None:
        return []
    where = f"as the source's launch at line {geo.line} gives it"
    lines = [f"    grid: [{', '.join(map(_yaml_expr, geo.grid))}]  # {where}",
             f"    block: [{', '.join(map(_yaml_expr, geo.block))}]",
             f"    shared_mem: {_yaml_expr(geo.shared_mem) if geo.shared_mem is not None else 0}"]
    driver = next((n for n in re.findall(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", geo.grid[0]) if n in own[1]), None)
    if driver is not None:  # no work where the grid's first extent's integer is 0
        lines.append(f"    skip_if: [{driver} == 0]")
    return lines + [_examples_line(own[1], bools)]


def _condition_lines(entry: _Entry, launch: tuple[Geometry, dict[str, int], int] | None) -> list[str]:
    """An entry's ``applies_if`` where the source launches its instances under a condition that its
    launch's geometry writes as the spec's, else a line saying the condition to write."""
    if not entry.guard:
        return []
    if launch is not None and launch[0].condition is not None:
        return [f"    applies_if: [{_yaml_expr(launch[0].condition)}]  # as the source launches it"]
    return [f"    # check: the source launches it where {entry.guard}: write that as applies_if (its examples "
            "must meet it)"]


def _examples_line(values: dict[str, int], bools: list[str]) -> str:
    example = ", ".join([f"{_yaml_str(n)}: {v}" for n, v in values.items()] + [f"{_yaml_str(n)}: true" for n in bools])
    return f"    examples: [{{{example}}}]  # check: argument values for which it launches"


def _launch_conditions(pl: _Plan, entry: _Entry) -> list[str]:
    """Comment lines saying under which conditions the source launches each of ``entry``'s
    instances (``block_size 32 where ncols < 1024``), where it has more than one and the launching
    code chooses among them with if / else / switch; none otherwise."""
    combos = entry.combinations()
    if len(combos) < 2:
        return []
    names = [pl.axis_names[t.name] for t in pl.axes]
    fixed = tuple(entry.fixed.items())
    where: dict[tuple[str, ...], list[str]] = {}
    for site in pl.g.sites:
        key = _instance_of(pl, site)
        if key is not None and key[0] == fixed:
            where.setdefault(key[1], []).append(" ".join(site.guard.split()) if site.guard else "")
    if not any(g for gs in where.values() for g in gs):
        return []
    out = []
    for combo in combos:
        guards = where.get(tuple(combo), [])
        text = "always" if "" in guards else " || ".join(dict.fromkeys(f"({g})" if len(guards) > 1 else g
                                                                        for g in guards)) or "nowhere"
        out.append(f"{', '.join(f'{n} {v}' for n, v in zip(names, combo))} where {text}")
    return ["    # check: the source launches " + "; ".join(out) + " (applies_if or a chain can say so)"]


def _launch(pl: _Plan, args: list[tuple[str, str, str]], int_max: dict[str, int],
            driver: str | None, struct_fields: set[str], members: dict[str, list[str]],
            counts: set[str], entry: _Entry | None = None) -> tuple[Geometry, dict[str, int], int] | None:
    """The geometry of the kernel's first launch in the source that the spec can say (reading
    only the struct fields ``struct_fields``: the drafted integer fields; ``members``: the struct
    arguments' members in order; ``counts``: host arguments read from struct fields, names the
    launch's own host arguments may not take), integer values for its
    arguments (and the host arguments it adds) for which every instance launches (the count
    ``driver`` 1024 and the others 1, else every one 64, else 1024, else 65536), and how many different
    geometries its launches give; None where no launch gives one. With ``entry`` (default: the
    first), its instances and, where the launching code's conditions split the instances, its
    launches alone, under their condition (the geometry's ``condition``, which the values then
    meet; None where none tried does)."""
    entry = entry or (pl.entries[0] if pl.entries else None)
    sites = pl.g.sites
    if entry is not None and (entry.guard is not None or len(pl.entries) > 1):
        combos = {tuple(c) for c in entry.combinations()}
        own = [s for s in sites if (k := _instance_of(pl, s)) is not None and k[0] == tuple(entry.fixed.items())
               and k[1] in combos]
        if own or entry.guard is not None:  # (entries of other fixed values: their own launches, where found)
            sites = own
    if not sites:
        return None
    params = [(n, t) for n, t, _ in args]
    taken = {n for n, _, _ in args} | set(pl.axis_names.values()) | counts
    axes = {i: pl.axis_names[t.name] for i, t in enumerate(pl.g.template)
            if t.kind == "int" and t.name in pl.axis_names}
    order = [pl.axis_names[t.name] for t in pl.axes]
    instances = [dict(zip(order, combo)) for combo in (entry.combinations() if entry is not None else [[]])]
    types = {i: pl.axis_names[t.name] for i, t in enumerate(pl.g.template)
             if t.kind == "type" and t.name in pl.axis_names}
    def read(among: list[LaunchSite], literals: bool) -> list[Geometry]:
        return [g for g in (geometry(site, params, pl.constants, taken, axes, types, members, literals)
                            for site in among) if g is not None and all(_usable(n) for n, _ in g.host_args)]

    def kinds_of(found: list[Geometry]) -> int:
        return len({(g.grid, g.block, g.shared_mem) for g in found})

    # A number the launch gives an integer parameter (k<256><<<g, 256>>>) is that parameter in
    # the geometry only where that makes the kernel's launches' geometries one (k<128> / k<256>,
    # each with its own block, also where conditions split them into entries): k<1, 2><<<dim3(g,
    # 1, 2), 256>>> keeps its 1 and 2 wherever that already does.
    named = kinds_of(read(pl.g.sites, True)) < kinds_of(read(pl.g.sites, False))
    found = read(sites, named)
    if entry is None or not entry.guard:  # (a condition only where it tells the instances apart)
        found = [replace(g, condition=None) for g in found]
    kinds = len({(g.grid, g.block, g.shared_mem) for g in found})
    cluster = [int(c) for c in pl.g.cluster] if pl.g.cluster and all(c.isdigit() for c in pl.g.cluster) else None

    def sized(text: str, inst: dict[str, str]) -> str:
        """``text`` with sizeof(axis) as the bytes of the instance's element type."""
        return re.sub(r"\bsizeof\((\w+)\)", lambda m: str(ELEMS[inst[m.group(1)]].bits // 8)
                      if inst.get(m.group(1)) in ELEMS else m.group(0), text)

    for geo in found:
        exprs = [*geo.grid, *geo.block, *([geo.shared_mem] if geo.shared_mem else [])]
        # struct fields read (p.rows): names in the spec, which the examples give by their path
        fields = {m.group(0): m.group(0).replace(".", "_") for e in exprs
                  for m in re.finditer(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", e) if m.group(0) not in DEVICE_NAMES}
        if not set(fields) <= struct_fields:
            continue
        names = {**dict.fromkeys(int_max), **dict.fromkeys(n for n, _ in geo.host_args), **dict.fromkeys(fields)}
        try:  # (the device's values: the least of the targets', kernel.blocks_per_sm 1)
            per = [([expr.parse(sized(e, inst), {**names, **fields, **dict.fromkeys(axes.values()),
                                                 **dict.fromkeys(DEVICE_NAMES)}, expr.Ty.INT)
                     for e in exprs], {**{a: int(v) for a, v in inst.items() if a in axes.values()}, **pl.device})
                   for inst in instances]
        except expr.ParseError:
            continue
        guesses = [{n: (1024 if n == driver else 1) for n in names}, dict.fromkeys(names, 64),
                   dict.fromkeys(names, 1024), dict.fromkeys(names, 1 << 16)]
        whole = cluster or ([int(c) for c in geo.cluster] if geo.cluster and all(c.isdigit() for c in geo.cluster)
                            else None)
        cond = None
        if geo.condition is not None:  # values that meet the condition too: its numbers and those beside them
            try:
                cond = expr.parse(geo.condition, {**names, **fields, **dict.fromkeys(axes.values())}, expr.Ty.BOOL)
            except expr.ParseError:
                geo = replace(geo, condition=None)
            near = sorted({max(1, int(c) + d) for c in re.findall(r"\b\d+\b", geo.condition or "") for d in (-1, 0, 1)})
            guesses += [{n: (v if n == driver else 1) for n in names} for v in near]
            guesses += [dict.fromkeys(names, v) for v in near]
            # (the condition's own names at its numbers, 0 too, the others as the first guess: m == 0)
            said = set(re.findall(r"[A-Za-z_]\w*", geo.condition or "")) & set(names)
            guesses += [{**guesses[0], **dict.fromkeys(said, int(c))}
                        for c in re.findall(r"\b\d+\b", geo.condition or "")]
        limit = {**int_max, **{n: 1 for n, t in geo.host_args if t == "bool"}}  # (a flag: 0 or 1)
        guesses += [{**guess, **dict.fromkeys((n for n, t in geo.host_args if t == "bool"), 0)} for guess in guesses]
        for attempt in ((True, False) if cond is not None else (False,)):
            for guess in guesses:
                env = {n: min(v, limit.get(n, v)) for n, v in guess.items()}
                if all(_launches(trees, {**{fields.get(n, n): v for n, v in env.items()}, **ints}, whole,
                                 pl.smem_max, cond if attempt else None) for trees, ints in per):
                    return (geo if attempt or cond is None else replace(geo, condition=None)), env, kinds
        pl.unlaunched = pl.unlaunched or geo  # written, but beyond the targets' limits for every value tried
    return None


def _launches(trees: list[expr.Node], env: dict[str, int], cluster: list[int] | None = None,
              smem_max: int = 48 * 1024, condition: expr.Node | None = None) -> bool:
    """Whether grid, block (and shared memory, at most ``smem_max`` bytes) ``trees`` give a launch
    for ``env`` (a grid of whole clusters, where ``cluster`` gives them; where ``condition`` holds)."""
    try:
        vals = [int(expr.evaluate(t, env)) for t in trees]
        if condition is not None and not expr.evaluate(condition, env):
            return False
    except expr.ExprError:
        return False
    grid, block, smem = vals[:3], vals[3:6], (vals[6] if len(vals) > 6 else 0)
    whole = cluster is None or all(g % c == 0 for g, c in zip(grid, cluster))
    return min(grid) >= 1 and min(block) >= 1 and block[0] * block[1] * block[2] <= 1024 and \
        0 <= smem <= smem_max and whole


def _first_args(pl: _Plan, structs: dict[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    out = []
    for name, p in pl.args:
        cpp = _entry_struct(p, pl, pl.entries[0])
        if cpp is not None:
            out.append((name, structs[cpp][0], p.note))
        else:
            out.append((name, _entry_type(p.spec or "void*", pl, pl.entries[0]), p.note))
    return out


# ---------------------------------------------------------------------------------------------
# `kernelgen draft`: sources to spec files

_HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl")


def _target_limits(root: Path | None) -> tuple[int, dict[str, int]]:
    """From ``root``'s specs/targets.yaml: the dynamic shared memory every target lets a block opt
    in to (the least of theirs that say; 48 KB, what any launch may take, where none says), and the
    values of the spec's device names to try a drafted launch with (the least of the targets'; an
    H200's where there is no table; kernel.blocks_per_sm 1)."""
    targets = ()
    try:
        base = root or Path.cwd()
        targets = load_targets(base / "specs" / "targets.yaml", base)
    except (KernelgenError, OSError):
        pass
    said = [t.max_shared_mem_per_block_optin for t in targets if "max_shared_mem_per_block_optin" not in t.defaulted]
    smem = max(48 * 1024, min(said)) if said else 48 * 1024
    if not targets:
        return smem, dict(_DEVICE_DEFAULT)
    tables = [t.device_table() for t in targets]
    return smem, {**{n: min(tb[n] for tb in tables) for n in tables[0]}, "kernel.blocks_per_sm": 1}


# the device names' values where a project's targets do not give them (an H200's)
_DEVICE_DEFAULT = {"device.sm_count": 132, "device.max_shared_mem_optin": 232448,
                   "device.max_shared_mem_per_sm": 233472, "device.max_threads_per_sm": 2048,
                   "device.max_threads_per_block": 1024, "kernel.blocks_per_sm": 1}


def _project_names(root: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The target names of ``root``'s specs/targets.yaml and the module names of its specs."""
    targets: tuple[str, ...] = ()
    spec_dir = root / "specs"
    try:
        text = (spec_dir / "targets.yaml").read_text(encoding="utf-8")
        targets = tuple(re.findall(r"^([A-Za-z_]\w*)\s*:", text, re.M))
    except OSError:
        pass
    modules = tuple(p.stem for p in sorted(spec_dir.glob("*.yaml")) if p.stem not in ("project", "targets"))
    return targets, modules


def _global_names(text: str) -> tuple[set[str], set[str]]:
    """The qualified names of the ``__global__`` functions source ``text`` declares, and of those
    it defines."""
    prepared = _prepare(text).text
    decls = [d for d in global_decls(prepared) if not re.search(r"\btemplate\s*(?!\s*<)", d.head)]
    return {d.qualified for d in decls}, {d.qualified for d in decls if _body(prepared, d.end) is not None}


def _declares_for(header: str, source: str) -> bool:
    """Whether ``header`` only declares ``__global__`` functions (at least one), all of which
    ``source`` defines: its kernels are the source's, drafted in the source's module."""
    declared, defined = _global_names(header)
    return bool(declared) and not defined and declared <= _global_names(source)[1]


def draft_files(root: Path, sources: list[Path], module: str | None = None, kernels: list[str] | None = None,
                write: bool = False) -> list[tuple[Path, str]]:
    """The spec files ``kernelgen draft`` writes (or prints, one source without ``write``): (path,
    text). Sources with one file name make one module where a header declares the kernels a
    source including it defines (the source is the module's), else a module each with distinct
    names; every module name passes the loader's and the generator's checks. Refuses before
    anything is written."""
    from kernelgen.errors import relpath

    if len(sources) > 1 and (module or kernels or not write):
        raise KernelgenError("several sources need --write: each writes its own spec file, a module named after its "
                             "file (--module and --kernel take one source)")
    rels: list[tuple[Path, str, str]] = []
    for source in sources:
        src = source.resolve()
        try:
            rel = src.relative_to(root.resolve()).as_posix()
        except ValueError:
            raise KernelgenError(f"{source} is outside the project ({root}): sources are relative to its root; "
                                 "copy the file into the project first") from None
        if not src.is_file():
            raise KernelgenError(f"{relpath(src, root)} is not a file")
        if rel not in {r for _, r, _ in rels}:
            rels.append((src, rel, src.read_text(encoding="utf-8", errors="replace")))
    # a header folded into the source of its stem that includes it
    merged: dict[str, list[tuple[str, str]]] = {}
    folded: set[str] = set()
    for src, rel, text in rels:
        if src.suffix.lower() in _HEADER_SUFFIXES:
            continue
        includes = set(re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', strip_comments(text), re.M))
        for hsrc, hrel, htext in rels:
            if hsrc.suffix.lower() in _HEADER_SUFFIXES and hrel not in folded and any(
                    (src.parent / i).resolve() == hsrc or Path(i).name == hsrc.name for i in includes) and (
                    hsrc.stem == src.stem or _declares_for(htext, text)):
                merged.setdefault(rel, []).append((hrel, htext))
                folded.add(hrel)
    targets, existing = _project_names(root)
    naming = load_project(root / "specs" / PROJECT_FILE, root)
    out: list[tuple[Path, str]] = []
    chosen: list[str] = []
    for src, rel, text in rels:
        if rel in folded:
            continue
        if module:
            name, note = module, ""
            why = module_problem(module, targets, naming=naming)
            if why:
                raise KernelgenError(f"module name '{module}' cannot be used: {why}",
                                     f"e.g. --module {module_name(module, targets, naming=naming)[0]}")
        else:
            stem = src.stem
            if any(Path(r).stem == stem for r in (x for _, x, _ in rels if x != rel and x not in folded)) and \
                    stem.lower() in chosen:
                stem = f"{src.parent.name}_{stem}"  # a second source of one file name: named with its folder
            name, note = module_name(stem, targets, tuple(chosen) + existing, tuple(chosen), naming)
        chosen.append(name)
        also = tuple(merged.get(rel, ()))
        out.append((root / "specs" / f"{name}.yaml",
                    draft(rel, text, name, kernels or None, root=root, also=also, module_note=note, targets=targets,
                          naming=naming)))
    return out

