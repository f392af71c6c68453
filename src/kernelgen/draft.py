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
type it does not know (a struct passed by value) becomes an entry under ``structs:`` without
fields (a stateless functor, which the build checks) and a comment saying to give its fields.
What cannot be known from the text is written as a working guess with a comment: the block
(``__launch_bounds__`` or 256 threads), a one-dimensional grid over the first integer argument,
and an example. The draft loads and generates as it is; ``kernelgen build`` then checks each
kernel's parameters against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelgen.errors import KernelgenError
from kernelgen.kernel_source import (
    SourceScanError,
    _bounds_of,
    _cluster_of,
    _names,
    closing,
    global_decls,
    strip_comments,
)
from kernelgen.loader import reserved_reason
from kernelgen.types import ELEMS, SCALARS, TOOLKIT_STRUCTS

# C++ spellings of the registry's types (after qualifiers are removed and spaces normalised).
_CPP_TYPES = {
    "float": "f32", "double": "f64", "__half": "f16", "half": "f16", "__nv_bfloat16": "bf16",
    "nv_bfloat16": "bf16", "bool": "bool",
    "int8_t": "i8", "signed char": "i8", "uint8_t": "u8", "unsigned char": "u8",
    "int16_t": "i16", "short": "i16", "short int": "i16", "signed short": "i16",
    "uint16_t": "u16", "unsigned short": "u16", "unsigned short int": "u16",
    "int32_t": "i32", "int": "i32", "signed": "i32", "signed int": "i32",
    "uint32_t": "u32", "unsigned": "u32", "unsigned int": "u32",
    "int64_t": "i64", "long long": "i64", "long long int": "i64", "long": "i64", "long int": "i64",
    "ptrdiff_t": "i64", "std::ptrdiff_t": "i64", "signed long long": "i64",
    "uint64_t": "u64", "unsigned long long": "u64", "unsigned long long int": "u64", "unsigned long": "u64",
    "size_t": "u64", "std::size_t": "u64",
    "float2": "f32x2", "float4": "f32x4", "__half2": "f16x2", "half2": "f16x2", "__nv_bfloat162": "bf16x2",
    "nv_bfloat162": "bf16x2", "int4": "i32x4", "double2": "f64x2", "int2": "i32x2", "uint2": "u32x2",
    "uint4": "u32x4", "uchar4": "u8x4", "char4": "i8x4",
    "__nv_fp8_e4m3": "fp8_e4m3", "__nv_fp8_e5m2": "fp8_e5m2", "__nv_fp8_e8m0": "fp8_e8m0",
    "__nv_fp4x2_e2m1": "fp4_e2m1", "void": "void",
    "char": "i8",  # x86-64's char is signed; aarch64's is not (the build checks either way)
}
for _k, _v in list(_CPP_TYPES.items()):
    if _k.endswith("_t") and not _k.startswith("std::"):
        _CPP_TYPES["std::" + _k] = _v
# Scalars the registry passes by value (vector and 8-bit float types are pointer elements only).
_SCALARS = {"f32", "f64", "f16", "bf16", "bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"}


def _toolkit_entry(cpp: str) -> str | None:
    """The ``structs:`` entry (after ``cpp:``) of a struct type the CUDA toolkit declares and the
    draft knows (``float2``, ``__half2``, ``CUtensorMap``): its fields, and its alignment where
    that is more than its fields give; None for other types."""
    t = TOOLKIT_STRUCTS.get(cpp)
    if t is None or t.fields is None:
        return None
    natural = max(SCALARS[ty.split("[")[0]].bits // 8 for _, ty in t.fields)
    fields = ", ".join(f"{n}: {_yaml_str(ty)}" for n, ty in t.fields)
    return f"fields: {{{fields}}}" + (f", align: {t.align}" if t.align > natural else "")


# CUDA's handles declared as integers: texture and surface objects are unsigned long long.
_HANDLES = {"cudaTextureObject_t": "u64", "cudaSurfaceObject_t": "u64"}
_QUALIFIERS = re.compile(r"\b(?:__restrict__|__restrict|restrict|__grid_constant__|volatile|struct|class|"
                         r"typename)\b")
_TEMPLATE_HEAD = re.compile(r"\btemplate\s*<")
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
    kind: str  # "type", "int" or "bool"
    default: str | None = None


@dataclass
class Global:
    name: str
    qualified: str  # with namespaces: what the spec's symbol spells
    params: list[Param]
    template: list[TemplateParam] = field(default_factory=list)
    max_threads: str | None = None  # __launch_bounds__'s first argument (a literal or a template parameter)
    cluster: tuple[str, str, str] | None = None  # __cluster_dims__: literals or integer template parameters
    line: int = 0
    # an extern __shared__ array its body declares: its element type as written, and the registry's
    dynamic_smem: tuple[str, str | None] | None = None
    # the template arguments of the source's explicit instantiations (template __global__ void k<8>(...);)
    instances: list[list[str]] = field(default_factory=list)


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside (), <>, [] and {}."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return [p.strip() for p in out]


def _angle(text: str, start: int) -> str:
    """The text inside the ``<`` at ``text[start - 1]`` (to the end when it is not closed)."""
    end = closing(text, start, "<>")
    return text[start:end if end is not None else len(text)]


def _template_head(head: str) -> list[TemplateParam]:
    heads = list(_TEMPLATE_HEAD.finditer(head))
    if not heads:
        return []
    m = heads[-1]
    out = []
    for p in _split_top(_angle(head, m.end())):
        default = None
        if "=" in p:
            p, default = (x.strip() for x in p.split("=", 1))
        words = p.replace("...", " ").split()
        if not words:
            continue
        name = words[-1] if len(words) > 1 else f"P{len(out)}"
        if words[0] in ("typename", "class"):
            out.append(TemplateParam(name, "type", default))
        elif words[0] == "bool":
            out.append(TemplateParam(name, "bool", default))
        else:
            out.append(TemplateParam(name, "int", default))
    return out


def _launch_bounds(head: str) -> str | None:
    """The first argument of ``__launch_bounds__``: digits, or a name (a template parameter)."""
    m = re.search(r"\b__launch_bounds__\s*\(\s*([0-9]+|[A-Za-z_]\w*)\s*[,)]", head)
    return m.group(1) if m else None


_ENUM = re.compile(r"\benum\s+(?:(class|struct)\s+)?([A-Za-z_]\w*)\s*(?::\s*([A-Za-z_][\w:\s]*?))?\s*\{")


def _enums(text: str) -> dict[str, tuple[str, str]]:
    """The enums a source declares: name -> (the registry type of its underlying type, a note)."""
    out = {}
    for m in _ENUM.finditer(text):
        under = " ".join((m.group(3) or "").split())
        if under:
            out[m.group(2)] = (_CPP_TYPES.get(under, "i32"), "" if under in _CPP_TYPES else
                               f"check: enum {m.group(2)}'s underlying type {under}")
        elif m.group(1):
            out[m.group(2)] = ("i32", "")  # an enum class's underlying type is int
        else:
            out[m.group(2)] = ("i32", f"check: plain enum {m.group(2)}: its underlying type is the compiler's "
                                      "choice (give it one: enum E : int32_t)")
    return out


_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([A-Za-z_][\w:\s]*?)\s*;")
_TYPEDEF = re.compile(r"\btypedef\s+([A-Za-z_][\w:\s]*?)\s+([A-Za-z_]\w*)\s*;")


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
        if base in _CPP_TYPES or base.split("::")[-1] not in aliases:
            return base
        base = aliases[base.split("::")[-1]]
    return base


def _param(text: str, index: int, template: list[TemplateParam],
           enums: dict[str, tuple[str, str]] | None = None, aliases: dict[str, str] | None = None) -> Param:
    text = re.sub(r"=.*$", "", text, flags=re.S)  # a default argument
    text = re.sub(r"\[\s*\]", "*", text)  # T x[] is T* x
    text = " ".join(_QUALIFIERS.sub(" ", text).split())
    m = re.match(r"^(.*?)([A-Za-z_]\w*)$", text)
    name = f"arg{index}"
    if m and m.group(1).strip() and not m.group(1).rstrip().endswith("::"):
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
    types = {t.name: t for t in template}
    if base in types and types[base].kind == "type":
        if stars == 1:
            return Param(name, text, f"{'const ' if inner_const else ''}{{{base}}}*")
        if stars == 0:  # '{T}' where T also types a pointer (float element types only), else a struct
            return Param(name, text, f"{{{base}}}")
        return Param(name, text, f"{'const ' if inner_const else ''}void*", note=f"'{base}' with {stars} levels of "
                     "pointer: passed as untyped memory")
    base = _resolve(base, aliases or {})
    if base in _HANDLES and stars == 0:
        return Param(name, text, _HANDLES[base], note=f"{base}: a handle, passed as its integer")
    enum = (enums or {}).get(base.split("::")[-1])
    if enum is not None and stars == 0:
        return Param(name, text, enum[0], note=enum[1] or f"enum {base}")
    elem = _CPP_TYPES.get(base)
    if stars == 0 and elem not in _SCALARS:  # a struct by value: the toolkit's, or one to describe
        known = _toolkit_entry(base) is not None
        return Param(name, text, None, struct=base, note=f"'{base}' by value" if known or elem is None else
                     f"'{base}' by value: declare its fields")
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


def read_globals(text: str) -> list[Global]:
    """The ``__global__`` functions of a source's text, in order, each name once (the first
    declaration with a parameter list; a definition repeats it)."""
    text = strip_comments(text)
    enums = _enums(text)
    aliases = _aliases(text)
    defined = _names([text])
    out: dict[tuple[str, tuple[str | None, ...]], Global] = {}
    explicit: dict[str, list[list[str]]] = {}
    for d in global_decls(text):
        head, qualified = d.head, d.qualified
        if re.search(r"\btemplate\s*(?!\s*<)", head):
            # an explicit instantiation (template __global__ void k<256>(...);) of a template above:
            # its arguments are values to build the template for
            if d.template_args is not None:
                explicit.setdefault(qualified, []).append([" ".join(a.split()) for a in _split_top(d.template_args)])
            continue
        template = _template_head(head)
        params = [] if d.params.strip() in ("", "void") else [
            _param(p, i, template, enums, aliases) for i, p in enumerate(_split_top(d.params))]
        key = (qualified, tuple(p.spec or p.struct for p in params))  # overloads differ in their types
        cluster = _cluster_text(head, defined, template)
        try:
            bounds = _bounds_of(head, defined)
        except SourceScanError:
            bounds = None
        threads = str(bounds[0]) if bounds else _launch_bounds(head)
        written = _extern_shared(text, d.end)
        smem = (written, _CPP_TYPES.get(_resolve(written, aliases))) if written is not None else None
        if key not in out:
            out[key] = Global(d.name, qualified, params, template, max_threads=threads, cluster=cluster,
                              line=text.count("\n", 0, d.offset) + 1, dynamic_smem=smem)
        elif smem is not None:  # a definition after a declaration
            out[key].dynamic_smem = smem
    for g in out.values():
        g.instances = [a for a in explicit.get(g.qualified, []) if len(a) <= len(g.template)]
    return list(out.values())


def _instance_values(g: Global, i: int) -> list[str]:
    """The values the source's explicit instantiations give template parameter ``i``, in order,
    each once: integer literals, or for a type parameter the registry's element types."""
    vals = []
    for args in g.instances:
        if i >= len(args):
            continue
        a = args[i]
        v = (_CPP_TYPES.get(a) if g.template[i].kind == "type" else
             a if re.fullmatch(r"-?\d+", a.rstrip("uUlL")) else None)
        if v is not None and v not in vals:
            vals.append(v.rstrip("uUlL") if g.template[i].kind != "type" else v)
    return vals


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


def _spec_name(name: str, taken: set[str]) -> str:
    """A name the spec may use for ``name`` (a kernel, an argument), unused in ``taken``."""
    base = re.sub(r"__+", "_", name).strip("_") or "k"
    if base[:3].lower() == "kg_":
        base = base[3:] or "k"
    if base.endswith("_t"):
        base += "_"
    if not re.match(r"[A-Za-z]", base):
        base = "k" + base
    cand = base
    if reserved_reason(cand) or cand in taken:
        cand = f"{base}_arg" if reserved_reason(f"{base}_arg") is None else f"{base}x"
    i = 2
    while cand in taken or reserved_reason(cand):
        cand = f"{base}{i}"
        i += 1
    taken.add(cand)
    return cand


# Words YAML 1.1 or 1.2 reads as booleans or null: quoted in the draft.
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


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


def draft(source_rel: str, text: str, module: str, only: list[str] | None = None) -> str:
    """The YAML text of a module spec for the ``__global__`` functions of ``text`` (the source at
    ``source_rel``, relative to the project root), or those named in ``only``."""
    globs = read_globals(text)
    if only:
        missing = [n for n in only if n not in {g.name for g in globs} | {g.qualified for g in globs}]
        if missing:
            raise KernelgenError(f"{source_rel} declares no __global__ function {', '.join(missing)} (it declares: "
                                 f"{', '.join(g.qualified for g in globs) or 'none'})")
        globs = [g for g in globs if g.name in only or g.qualified in only]
    if not globs:
        raise KernelgenError(f"{source_rel} declares no __global__ function (comments removed; a kernel declared "
                             "through a macro is not seen)")
    lines = [
        f"# Drafted by `kernelgen draft` from {source_rel}: check each entry marked 'check' against how the",
        "# kernels are launched (grid, block, shared memory, the element counts of pointers, examples),",
        "# then `kernelgen build` checks every kernel's parameters against its args.",
        f"module: {module}",
        f"summary: Kernels of {source_rel}.  # check: one line saying what the module computes",
        f"sources: [{source_rel}]",
    ]
    structs: dict[str, str] = {}
    kernel_names: set[str] = set()
    body: list[str] = []
    for g in globs:
        taken: set[str] = set()
        args = []
        pointer_axes = {t.name for t in g.template if t.kind == "type" and any(
            p.spec and p.spec.endswith("*") and f"{{{t.name}}}" in p.spec for p in g.params)}
        for p in g.params:
            by_value = re.fullmatch(r"\{(\w+)\}", p.spec or "")
            if by_value and by_value.group(1) not in pointer_axes:
                base = by_value.group(1)  # a template type passed by value only: a functor or a struct
                p = Param(p.name, p.cpp, None, struct=base, note=f"template type '{base}' by value: give the type")
            name = _spec_name(p.name, taken)
            if p.struct is not None:
                key = structs.get(p.struct) or _spec_name(re.sub(r"\W+", "_", p.struct.split("<")[0]).lower(),
                                                          set(structs.values()) | kernel_names)
                structs[p.struct] = key
                args.append((name, key, p.note or f"'{p.struct}' by value"))
            else:
                args.append((name, p.spec, p.note))
        type_axes = [t for t in g.template if t.name in pointer_axes]
        # The symbol's template arguments: axes as placeholders, a bool its default (or true), another
        # type its default (or its own name, for the user to replace).
        targs = [f"{{{t.name}}}" if t in type_axes or t.kind == "int" else t.default or (
            "true" if t.kind == "bool" else t.name) for t in g.template]
        symbol = g.qualified + (f"<{', '.join(targs)}>" if g.template else "")
        base = re.sub(r"_kernel$|Kernel$", "", g.name) or g.name
        if sum(1 for h in globs if h.qualified == g.qualified) > 1:  # overloads: named by their first pointer
            elems = [p.spec.split()[-1].rstrip("*") for p in g.params if p.spec and "*" in p.spec]
            base += f"_{elems[0]}" if elems and re.fullmatch(r"\w+", elems[0]) else ""
        kname = _spec_name(base, kernel_names)
        body.append(f"  {kname}:")
        body.append(f"    symbol: {_yaml_str(symbol)}" + (
            "  # check the template arguments" if any(t.kind != "int" and t not in type_axes for t in g.template)
            else ""))
        body.append(f"    summary: What {g.name} computes.  # check")
        in_cluster = set(g.cluster or ())
        def axis(i: int, t: TemplateParam) -> str:
            given = _instance_values(g, i)
            if given:  # the source's explicit instantiations
                return f"      {t.name}: [{', '.join(given)}]  # the source's explicit instantiations"
            if t in type_axes:
                return f"      {t.name}: [f32]  # check: the element types to build it for"
            guess = t.default or _int_guess(t.name, in_cluster)
            return f"      {t.name}: [{guess}]  # check: the values to build it for"
        inst = [axis(i, t) for i, t in enumerate(g.template) if t in type_axes or t.kind == "int"]
        if inst:
            body.append("    instantiate:")
            body += inst
        body.append("    args:" if args else "    args: {}")
        ints = [n for n, t, _ in args if t in ("u32", "i32", "u64", "i64", "u16", "i16", "u8", "i8")]
        bools = [n for n, t, _ in args if t == "bool"]
        for n, t, note in args:
            comment = f"  # {note}" if note else ""
            body.append(f"      {_yaml_str(n)}: {_yaml_str(t)}{comment}")
        driver = next((n for n in ints if n.lower() in _INT_NAMES), ints[0] if ints else None)
        int_params = {t.name for t in g.template if t.kind == "int"}
        threads = g.max_threads if g.max_threads and (g.max_threads.isdigit() or g.max_threads in int_params) \
            else "256"
        cx = g.cluster[0] if g.cluster else "1"
        grid = (f"div_ceil({driver}, {threads} * {cx}) * {cx}" if cx != "1" else f"div_ceil({driver}, {threads})") \
            if driver else cx
        cy, cz = (g.cluster[1], g.cluster[2]) if g.cluster else (1, 1)
        body.append(f"    grid: [{_yaml_str(grid)}, {cy}, {cz}]  # check")
        body.append(f"    block: [{threads}, 1, 1]" + ("" if threads != "256" or g.max_threads else "  # check"))
        if g.cluster:
            body.append(f"    cluster: [{', '.join(g.cluster)}]")
        if g.dynamic_smem is not None:
            written, elem = g.dynamic_smem
            t = ELEMS.get(elem or "") or SCALARS.get(elem or "")
            per = t.bits // 8 if t is not None else 0
            body.append(f"    shared_mem: {_yaml_str(f'{threads} * {per}') if per else 0}  # check: the bytes of its "
                        f"extern __shared__ {written} array")
        if driver:
            body.append(f"    skip_if: [{driver} == 0]")
        example = ", ".join([f"{_yaml_str(n)}: {1024 if n == driver else 1}" for n in ints]
                            + [f"{_yaml_str(n)}: true" for n in bools])
        body.append(f"    examples: [{{{example}}}]  # check: argument values for which it launches")
    if structs:
        entries = {cpp: _toolkit_entry(cpp) for cpp in structs}
        if None in entries.values():
            lines.append("structs:  # check: give each its fields, in order (none: a stateless functor, checked "
                         "empty)")
        else:
            lines.append("structs:  # CUDA's vector types, passed by value")
        for cpp, key in structs.items():
            lines.append(f"  {key}: {{cpp: {_yaml_str(cpp)}, {entries[cpp] or 'fields: {}'}}}")
    lines.append("kernels:")
    return "\n".join(lines + body) + "\n"
