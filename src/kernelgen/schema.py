"""The spec format, declared once: every field of a module spec and of a target entry.

Each :class:`Struct` lists its :class:`Field` objects (name, required or optional, kind,
default, one paragraph of description). From these come

- the loader's key checks (:meth:`Struct.required` and :meth:`Struct.optional`), so an
  unknown key and its did-you-mean are judged against this table;
- JSON Schemas (draft 2020-12) for editors, of module specs, specs/targets.yaml and
  specs/project.yaml: :func:`json_schema` (``kernelgen schema [--targets | --project]``);
- the field reference of docs/spec-format.md: :func:`field_reference` and
  :func:`update_doc` (``kernelgen schema --docs``).

The JSON Schema describes the shape of a spec as any YAML parser reads it; the loader
remains the authority and checks more (names declared, expressions well typed, examples
that launch, device limits, the test-case search). Two leniencies follow from kernelgen
rejoining expressions that a flow collection split at their commas
(``[div_ceil(n, 256), 1, 1]`` and ``{size: max(n, 4)}``): lists of expressions take more
items than they hold expressions (geometry three or more, a tensor map's extents one or more),
and the mappings where an expression may stand in flow style (a kernel, the long form of an
argument, ``constants`` and ``let``) tolerate extra keys whose value is null.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kernelgen import types
from kernelgen.wording import article, plural_noun

# The spec format versions this kernelgen reads; a spec without `version` is version 1.
SUPPORTED_VERSIONS = (1,)
DEFAULT_VERSION = 1

# Value patterns, matched in full (the loader uses them with re.fullmatch).
IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# A struct argument's field, `from`'s value: p.rows, p.window.left.
FIELD_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
# An enumerator as an instantiate axis value (a non-type template argument): Act::Relu, ns::Act::Relu.
ENUMERATOR_RE = re.compile(r"(?:::)?[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+")
MODULE_RE = re.compile(r"[a-z][a-z0-9_]{0,47}")
# A kernel symbol: a C++ template-id, checked by kernelgen.symbols' tokenizer; the JSON Schema
# checks its characters only (with `{AXIS}` placeholders before an instance's values are put in).
SYMBOL_PATTERN_RE = re.compile(r"(?:::)?[A-Za-z_][A-Za-z0-9_:<>(),*&{} \t\-]{0,399}")
ENV_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
SOURCE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]{0,255}")
ARCH_RE = re.compile(r"sm_[0-9]{2,3}[af]?")
CC_RE = re.compile(r"([0-9]{1,2})\.([0-9])")
MAX_TEXT = 2000
MAX_LIST = 64
# CUDA's block limits, the same on every architecture (compute capability 2.0 on).
CUDA_MAX_BLOCK_THREADS = 1024
CUDA_MAX_BLOCK_DIMS = (1024, 1024, 64)
# The largest thread-block cluster the launchers use: the portable size. Larger clusters need the
# kernel attribute cudaFuncAttributeNonPortableClusterSizeAllowed, which launchers never set, so
# the runtime caps a device's limit at this size too.
PORTABLE_CLUSTER_SIZE = 8
MAX_EXAMPLES = 32
MAX_CHAIN = 16

# Type names come from the type registry.
SCALAR_TYPES = tuple(t.name for t in types.SCALAR_TYPES)
ELEM_TYPES = tuple(t.name for t in types.ELEM_TYPES if not t.internal)
# Names spelt like a registry type (u33, f8, bf32, f32x3): a struct may not have one (nor a registry
# type's name), so a misspelt scalar type is not taken for a struct's name.
TYPE_LIKE_RE = re.compile(r"(?:[iuf]|bf)[0-9]+(?:x[0-9]+)?")
# A scalar type or a struct's name, as a type is written (a whole word).
_WORD_END = r"(?![A-Za-z0-9_])"
_REGISTRY = "|".join(sorted({*SCALAR_TYPES, *(t.name for t in types.ELEM_TYPES)}, key=lambda n: (-len(n), n)))
_SCALAR_OR_STRUCT = (rf"(?:(?:{'|'.join(SCALAR_TYPES)}){_WORD_END}"
                     rf"|(?!(?:{_REGISTRY}|{TYPE_LIKE_RE.pattern}){_WORD_END})[A-Za-z_][A-Za-z0-9_]*)")


def _full(p: re.Pattern[str]) -> str:
    return f"^(?:{p.pattern})$"


@dataclass(frozen=True)
class Kind:
    """What a value is: a name for the docs and a JSON Schema fragment for editors."""

    name: str
    json: Mapping[str, object]


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    required: bool
    description: str
    default: str | None = None  # as the docs show it; None: no default (required, or absent means none)


@dataclass(frozen=True)
class Struct:
    """A mapping with a fixed set of keys."""

    name: str  # $defs name and docs heading
    title: str
    description: str
    fields: tuple[Field, ...]
    extra_null_keys: bool = False  # JSON Schema only: see the module docstring
    inherit_key: str | None = None  # with this key present, entries come from another entry

    def required(self) -> set[str]:
        return {f.name for f in self.fields if f.required}

    def optional(self) -> set[str]:
        return {f.name for f in self.fields if not f.required}

    def __getitem__(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def ref(self) -> Kind:
        return Kind(self.title, {"$ref": f"#/$defs/{self.name}"})


# ------------------------------------------------------------------ kinds

STRING = Kind("string", {"type": "string"})
TEXT = Kind("text", {"type": "string", "maxLength": MAX_TEXT})
SUMMARY = Kind("text", {"type": "string", "maxLength": MAX_TEXT, "pattern": r"\S",
                        "patternErrorMessage": "the summary is empty"})
IDENTIFIER = Kind("identifier", {"type": "string", "pattern": _full(IDENTIFIER_RE)})
# One value of an instantiate axis: an element type, an integer, a boolean or an enumerator.
_AXIS_VALUE = {"anyOf": [{"type": "string", "enum": list(ELEM_TYPES)}, {"type": "integer"}, {"type": "boolean"},
                         {"type": "string", "pattern": _full(ENUMERATOR_RE)}]}
MODULE_NAME = Kind("module name", {"type": "string", "pattern": _full(MODULE_RE)})
SYMBOL = Kind("C++ function name or template-id", {"type": "string", "pattern": _full(SYMBOL_PATTERN_RE)})
ENV_NAME = Kind("environment variable name", {"type": "string", "pattern": _full(ENV_RE)})
SOURCE = Kind("source path", {"type": "string", "pattern": r"^(?!.*(^|/)\.\.(/|$))(?!.*//)(?:"
                              + SOURCE_RE.pattern + r")\.(cu|cuh|h|hpp)$"})
INTEGER = Kind("integer", {"type": "integer"})
BOOLEAN = Kind("boolean", {"type": "boolean"})
EXPRESSION = Kind("expression", {"type": ["string", "integer"]})
PREDICATE = Kind("predicate", {"type": "string"})
_TYPE_PATTERN = (
    r"^\s*(?:(?:const\s+)?(?:" + "|".join(ELEM_TYPES) + r"|\{[A-Za-z_][A-Za-z0-9_]*\})\s*\*(?:\s*(?:const\s*)?\*)?|"
    + _SCALAR_OR_STRUCT + r"|\{[A-Za-z_][A-Za-z0-9_]*\})\s*$"  # a pointer; a scalar or a struct; a float '{T}'
)
TYPE = Kind("type", {"type": "string", "pattern": _TYPE_PATTERN, "patternErrorMessage": (
    "not a type: a scalar (" + ", ".join(SCALAR_TYPES) + "), a struct of `structs`, an element type followed by "
    "`*` (`const bf16*`, `void*`) or a pointer array (`const f32* const*`)")})
HOST_TYPE = Kind("integer or bool type", {"type": "string",
                                          "enum": [t.name for t in types.SCALAR_TYPES if t.is_integer]})
STRUCT_NAME = Kind("struct name", {"type": "string", "pattern": rf"^(?!(?:{_REGISTRY}|{TYPE_LIKE_RE.pattern})$)"
                                                                rf"{IDENTIFIER_RE.pattern}$"})
IDENTIFIER_PATH = Kind("C++ variable name", {"type": "string", "pattern": r"^(?:::)?[A-Za-z_][A-Za-z0-9_]*"
                                             r"(?:::[A-Za-z_][A-Za-z0-9_]*)*$"})


def list_of(item: Kind, min_items: int = 0, max_items: int | None = MAX_LIST, exact: int | None = None,
            unique: bool = False) -> Kind:
    js: dict[str, object] = {"type": "array", "items": dict(item.json)}
    if min_items:
        js["minItems"] = min_items
    if max_items is not None:
        js["maxItems"] = max_items
    if unique:
        js["uniqueItems"] = True
    name = f"list of {exact} {plural_noun(item.name)}" if exact else f"list of {plural_noun(item.name)}"
    return Kind(name, js)


def mapping_of(key: Kind, value: Kind, min_items: int = 0) -> Kind:
    js: dict[str, object] = {
        "type": "object", "propertyNames": dict(key.json), "additionalProperties": dict(value.json),
    }
    if min_items:
        js["minProperties"] = min_items
    return Kind(f"mapping of {key.name} to {value.name}", js)


def expressions_of(key: Kind) -> Kind:
    """A mapping of names to expressions that may be written in flow style, where a YAML parser
    splits an expression at its commas (``{t: max(a, b)}`` reads as ``t: max(a`` and a key ``b)``
    without a value) and kernelgen rejoins it: a key of another spelling is tolerated there when it
    has no value, as is a name's (``max(a, b, c)`` gives a key ``b``)."""
    null_or_expr = by_type({"type": "null"}, EXPRESSION.json)
    return Kind(f"mapping of {key.name} to {EXPRESSION.name}", {
        "type": "object",
        "patternProperties": {str(key.json["pattern"]): null_or_expr},
        "additionalProperties": {"type": "null", "errorMessage": f"not {article(key.name)}; only a key without a "
                                 "value is tolerated here, where a flow mapping split an expression at a comma"},
    })


def by_type(first: Mapping[str, object], other: Mapping[str, object]) -> dict[str, object]:
    """A value of two forms told apart by its JSON type: ``first`` (whose ``type`` names one type)
    for a value of that type, ``other`` for any other value. Unlike ``anyOf``, a validator (an
    editor) then reports the errors of the form the value has (an unknown key of a mapping form,
    at that key) rather than that no form matched."""
    return {"if": {"type": first["type"]}, "then": dict(first), "else": dict(other)}


def one_or_list(item: Kind) -> Kind:
    return Kind(f"{item.name} or {list_of(item).name}",
                by_type(item.json, {"type": "array", "items": dict(item.json), "maxItems": MAX_LIST}))


# Geometry: three expressions. Three or more in the JSON Schema (see the module docstring).
DIMS = Kind("list of 3 expressions", {"type": "array", "items": dict(EXPRESSION.json), "minItems": 3})

VERSION = Field(
    "version", Kind("integer", {"type": "integer", "enum": list(SUPPORTED_VERSIONS)}), False,
    "The version of the spec format the file is written in. Version 1 is the only one and the "
    "default; a file that gives another value is rejected, naming the versions this kernelgen "
    "reads, rather than being read by the wrong rules.",
    str(DEFAULT_VERSION),
)

# The characters a path cannot have where a build hands it to CMake or nvcc (the project root, the
# build and install folders, the toolkit's, an include folder), each with the reason. Every other
# character is taken: spaces, '&', '#', '(', '*', '{', '@', '=', '~', a leading '-', letters of any
# script ('#' with a warning: PATH_SLOW). Control characters (a newline, U+0000 to U+001F and U+007F)
# are refused as well.
PATH_REFUSED = {
    ";": "CMake splits paths at ';' (its list separator)",
    '"': "CMake's quoting of paths (in its compiler checks) breaks on it",
    "\\": "CMake reads it as an escape",
    "$": "CMake and the shell that nvcc runs its steps in expand it",
    "`": "the shell that nvcc runs its steps in takes it for a command",
    "'": "nvcc loses the path from its include folders",
    "[": "CMake does not split its lists inside square brackets",
    "]": "CMake does not split its lists inside square brackets",
}
_PATH_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Characters a build takes but that make every build compile its CUDA sources again, each with the
# reason: a build works, but is never up to date.
PATH_SLOW = {
    "#": "nvcc writes it unescaped into the dependency files that Ninja reads, and Ninja takes it for the "
         "start of a comment, so it never finds the CUDA sources up to date",
}


def path_refusal(path: str) -> tuple[str, str] | None:
    """The first character of ``path`` that CMake or nvcc cannot take in a path (:data:`PATH_REFUSED`,
    a control character) and why, or None when the path can be built with."""
    for c in path:
        if c in PATH_REFUSED:
            return c, PATH_REFUSED[c]
        if _PATH_CONTROL.fullmatch(c):
            return c, "CMake's files and nvcc's command lines cannot hold a control character"
    return None


def path_slowdown(path: str) -> tuple[str, str] | None:
    """The first character of ``path`` that makes every build compile its CUDA sources again
    (:data:`PATH_SLOW`) and why, or None."""
    for c in path:
        if c in PATH_SLOW:
            return c, PATH_SLOW[c]
    return None


# Build settings: what a project, a target or a module adds to the compilation of the modules'
# translation units. Paths and values are written into CMake, so their characters are limited: an
# include folder takes what a path may have (PATH_REFUSED), but no leading '~' (CMake and nvcc do not
# expand it: write the folder out).
INCLUDE_DIR_RE = re.compile(r"(?!~)[^" + re.escape("".join(PATH_REFUSED)) + r"\x00-\x1f\x7f]{1,255}")
DEFINE_VALUE_RE = re.compile(r"[A-Za-z0-9_.+-]{0,200}")
NVCC_FLAG_RE = re.compile(r"-[A-Za-z0-9_.,=+:/@-]{1,199}(?: [A-Za-z0-9_.,=+:/@-]{1,200})?")
BUILD = Struct(
    "build", "build settings",
    "What a project (`specs/project.yaml`), a target (an entry of `specs/targets.yaml`) or a module spec "
    "adds to the compilation of the modules' translation units: the module's own under the module, every "
    "module's under the project and the target. Host-side code (the Python extensions, the runtime) is not "
    "affected.",
    (
        Field("include_dirs", list_of(Kind("directory", {"type": "string", "pattern": _full(INCLUDE_DIR_RE)}), 1,
                                      unique=True),
              False,
              "Folders searched for `#include` (nvcc's `-I`), relative to the project root or absolute: a "
              "third-party library's headers (`third_party/cutlass/include`). They are searched after the "
              "project root: the module's first, then the target's, then the project's. `kernelgen build` "
              "checks that each exists. A folder's path takes any character (spaces, `#`, `&`, letters of any "
              "script; with a `#`, though, every build compiles the CUDA sources that include its headers "
              "again, and `kernelgen build` says so: nvcc's dependency files leave it unescaped) but those "
              "CMake or nvcc misread in a "
              "path: `;`, `\"`, `\\`, `$`, `` ` ``, `'`, `[`, `]` and control characters; "
              "and no leading `~` (not expanded: write the folder out).",
              "none"),
        Field("defines", mapping_of(IDENTIFIER, Kind("integer, string or true", {
            "type": ["integer", "string", "boolean"], "pattern": _full(DEFINE_VALUE_RE)}), 1), False,
              "Preprocessor macros (nvcc's `-D`): `NAME: 3` or `NAME: value` defines NAME to that token, "
              "`NAME: true` defines it (to 1). A module's value replaces the target's, which replaces the "
              "project's. A name the generated code uses (a module, kernel, argument, constant, struct or "
              "chain name, a name of kernelgen's runtime headers, a name starting with `kg_`, `_kg` or "
              "`kernelgen` in any case: `KG_X`, `_KGX`, `KERNELGEN_X`) is refused.",
              "none"),
        Field("nvcc_flags", list_of(Kind("nvcc flag", {"type": "string", "pattern": _full(NVCC_FLAG_RE)}), 1),
              False,
              "Further nvcc options, one option an item with its value (`--use_fast_math`, `-maxrregcount=128`, "
              "`-Xptxas=-v` or `-Xptxas -v`), after kernelgen's own: the project's, the target's, then the "
              "module's. Options that kernelgen or CMake set or that change what a build produces are refused, "
              "in every spelling (their long forms, with the value after `=` or a space): the architecture "
              "(`-arch`, `-gencode`, `-code`), `-std`, outputs and modes (`-o`, `-odir`, `-c`, `-x`, `-E`, "
              "`-M`, `-MM`, `-MD`, `-MMD`, `-MF`, `-MT`, `-MP`, `-ptx`, `-optix-ir`, `-ltoir`, `-cubin`, "
              "`-fatbin`, `-cuda`, `-run`, `-fdevice-syntax-only`, `-e`), runs that compile nothing "
              "(`-dryrun`, `-clean`, `-V`, `-h`, `-arch-ls`, `-code-ls`), separate compilation (`-rdc`, `-dc`, "
              "`-dw`, `-dlink`), `-ccbin`, linking (`-shared`, `-lib`, `-link`, `-l`, `-L`), 32-bit code "
              "(`-m32`, `--machine=32`), options that would pass others past these checks (`-optf`, "
              "`-forward-unknown-to-host-compiler`, `-forward-unknown-opts`), `-I`, `-isystem`, `-D`, `-U` "
              "(use `include_dirs` and `defines`), and the host compiler's forms of these forwarded by "
              "`-Xcompiler` (`-Xcompiler=-std=c++11`, `-Xcompiler -DX`, `-Xcompiler=-o/path`), with its "
              "`-fvisibility`, `--output`, options files (`@file`), `-specs`, `-wrapper`, `-B`, `-fplugin`, "
              "`-dumpdir` and `-dumpbase`; `-keep-dir`; and output and options files forwarded to the other "
              "tools (`-Xptxas=-o,x`, `--ptxas-options=--output-file=x`, `-Xnvlink=@file`).",
              "none"),
    ),
)

ARGUMENT = Struct(
    "argument", "argument", "The long form of a kernel argument, for pointers that need more than a type.",
    (
        Field("type", TYPE, True,
              "The argument's type, as in the short form: a scalar (`u32`, `i32`, `u64`, `i64`, `u8`, `i8`, "
              "`u16`, `i16`, `bool`, `f16`, `bf16`, `f32`, `f64`), an element type followed by `*` (`const` "
              "when the kernel only reads it; "
              "`void*` for untyped memory), or a pointer array (`f32**`, `const f32* const*`, `f32* const*`)."),
        Field("size", EXPRESSION, False,
              "Pointers only: the number of elements the kernel touches (vectors for vector types, bytes for "
              "`void*`, pointers for pointer arrays), an integer expression over the integer arguments, host "
              "arguments, constants and `let` names (not one that reads the device). The Python binding checks "
              "arrays passed for this argument against it: a contiguous array by its element count, a strided "
              "view by the memory it spans.",
              "unchecked"),
        Field("contiguous", BOOLEAN, False,
              "Pointers only: whether arrays passed from Python must be contiguous. Without it, strided views "
              "(non-negative strides) are accepted and checked by the memory they span.", "true"),
        Field("nullable", BOOLEAN, False,
              "Pointers only: a null pointer may be passed (Python `None` or `0`, C/C++ `nullptr`, Rust "
              "`DevicePtr::null()`); its size is then not checked. Elsewhere a null pointer is an argument error.",
              "false"),
        Field("device", BOOLEAN, False,
              "A device scalar (kernel arguments with a scalar type only): the kernel takes a pointer to one "
              "element of the type (`const int32_t*` for `i32`) and reads the value from device memory when it "
              "runs, so a captured CUDA graph replays with whatever the value is then (kv_len of a decode step). "
              "Callers pass a one-element device array of the type (Python: checked; C/C++: the pointer, checked "
              "non-null and in device memory). Expressions cannot read it: the grid and clauses use host bounds.",
              "false"),
        Field("bound", IDENTIFIER, False,
              "Device scalars only: the integer argument (usually a host argument) that bounds the value, which "
              "the grid is sized by; shown in the launcher's documentation. Not checked: the host never reads the "
              "value.", "none"),
        Field("read_only", BOOLEAN, False,
              "Non-const pointers only: the kernel takes `T*` but only reads it, so read-only arrays are accepted "
              "and the C ABI, C++ and Rust APIs take a const pointer, as for `const T*`.", "false"),
        Field("zero", BOOLEAN, False,
              "Writable contiguous pointers with a `size` only (not with `contiguous: false`): the launcher "
              "sets the `size` elements (in bytes of the element type) to zero with `cudaMemsetAsync` on the "
              "launch stream before each launch, so a kernel's flag, counter or workspace starts from zero; "
              "capturable in CUDA graphs.",
              "false"),
        Field("from", Kind("struct argument field path", {"type": "string", "pattern": _full(FIELD_PATH_RE)}), False,
              "Host integer arguments only: the field of a struct argument the value is read from (`p.rows`, "
              "`p.window.left` for a nested struct's). The launchers (C++, C, Python, Rust) do not take the "
              "argument: they read it from the struct passed, so the grid, sizes and clauses follow the struct's "
              "own values; plans take it as an integer like any other. Its `type` is the field's.",
              "none"),
        Field("to_symbol", IDENTIFIER_PATH, False,
              "Host arguments only: the name of a `__constant__` variable of the module's sources that the "
              "launcher sets to the argument's value (`cudaMemcpyToSymbolAsync` on the launch stream) before "
              "each launch. The build checks that the variable exists and has the type's size. Such a host "
              "argument may have any scalar type (an integer, `bool` or a float) or be a struct. Refused while "
              "the stream is being captured into a CUDA graph.",
              "none"),
    ),
    extra_null_keys=True,
)

# A scalar type or a struct of the module (the loader checks the name), or a fixed array of one.
FIELD_TYPE = Kind("field type", {
    "type": "string", "pattern": r"^\s*" + _SCALAR_OR_STRUCT + r"\s*(?:\[\s*[0-9]+\s*\])?\s*$",
})

STRUCT = Struct(
    "struct", "struct", "One entry under `structs`: a C++ struct passed to kernels by value, named by its key "
                        "(the name arguments use as their type).",
    (
        Field("cpp", Kind("C++ type name", {"type": "string", "pattern": _full(SYMBOL_PATTERN_RE)}), False,
              "The kernel's C++ type, optionally namespace-qualified or a template-id (`ns::params<float>`). "
              "The module's launcher file checks, after including the sources, that it has each field's "
              "member, that its size, alignment and every field's offset, size and type match `fields` (a "
              "scalar field's type as kernel parameters are compared: integers of one size and signedness in "
              "any spelling, an enum for its underlying type, a u64 or i64 one a pointer too; a nested "
              "struct's member being of that struct's C++ type); a mismatch fails the build naming the "
              "spec's file:line and the field.",
              "the key"),
        Field("fields", mapping_of(IDENTIFIER, Kind("field type, or field",
                                                    by_type(FIELD_TYPE.json, {"$ref": "#/$defs/field"}))), False,
              "The struct's fields in declaration order: each name maps to a scalar type (`u32`, `f32`, ...), "
              "another struct of `structs` (nested by value: `window: fa_window`), or a fixed array of either of 1 "
              "to 1024 elements (`f32[4]`, `fa_window[2]`), or to `{type: ..., cpp: ...}` where the C++ member's "
              "name is not one a spec may use (`in_ptr: {type: u64, cpp: in}`). The C layout follows as C++ lays "
              "it out: each field at a multiple of its alignment (a scalar's size, a nested struct's alignment), the "
              "size a multiple of the struct's alignment; a struct may not contain itself, and is at most 4096 "
              "bytes and 64 fields. The C ABI declares it as a C struct and Python passes a mapping or an object "
              "with these attributes (a dataclass), a nested struct's value being one too. Without fields (`{}` or "
              "left out) the type is a stateless functor (`SiluOp`): the build checks that the C++ type is empty, "
              "and launchers pass a value-initialised one (`SiluOp{}`), so callers in every language leave the "
              "argument out.",
              "none: a stateless functor"),
        Field("header", SOURCE, False,
              "A source (relative to the project root) that declares the C++ type, included by the module's "
              "C++ API header so that C++ callers can name it. Without it the C++ API includes the CUDA "
              "toolkit's header for the toolkit's own types (`CUtensorMap`, `__half2`, `float2`, ...) and "
              "forward-declares `struct <cpp>;` for others, which suits a struct defined by that name (not a "
              "typedef or a template).",
              "none"),
        Field("align", Kind("integer", {"type": "integer", "enum": [1, 2, 4, 8, 16, 32, 64, 128]}), False,
              "The C++ type's alignment in bytes where it is more than its fields give: CUDA's `float2` and "
              "`int2` are 8, `float4`, `int4` and a struct declared `__align__(16)` 16, `CUtensorMap` (a TMA "
              "descriptor, `fields: {opaque: u64[16]}`) 128 in CUDA 13. The C layout (size rounded up to it; "
              "as a field of another struct, its offset too), the C ABI struct, Python's packing and the Rust "
              "struct follow it.",
              "the fields' natural alignment"),
    ),
)

FIELD = Struct(
    "field", "field", "A struct field whose C++ member has a name of its own.",
    (
        Field("type", FIELD_TYPE, True, "A scalar type (`u32`, `f32`, ...), a struct of `structs`, or a fixed "
              "array of either of 1 to 1024 elements (`f32[4]`, `fa_window[2]`)."),
        Field("cpp", Kind("C++ identifier", {"type": "string", "pattern": _full(IDENTIFIER_RE)}), False,
              "The C++ type's data member this field is (`in`, `from`: names the spec reserves for the "
              "bindings' languages); the build checks its offset, size and type under that name.", "the field's name"),
    ),
)

VARIANTS = Struct(
    "variants", "variants", "A kernel symbol chosen by the value of one integer argument.",
    (
        Field("arg", IDENTIFIER, True,
              "The integer argument (or host argument) whose value selects the symbol."),
        Field("symbols", Kind("mapping of integer values to C++ function names", {
            "type": "object", "propertyNames": {"pattern": r"^-?[0-9]+$"},
            "additionalProperties": dict(SYMBOL.json), "minProperties": 1,
        }), True,
              "The `__global__` function for each value of `arg`, for instance `{64: attn_d64, 128: attn_d128}`. "
              "Other values make the launcher report \"not launched\" with the reason."),
    ),
)

LAUNCH = Struct(
    "launch", "launch modes",
    "How the kernel is launched, when plain `<<<grid, block, shared_mem, stream>>>` is not enough: the launcher "
    "then calls cudaLaunchKernelEx with the matching launch attributes.",
    (
        Field("cooperative", BOOLEAN, False,
              "A cooperative launch (the kernel may call `cooperative_groups::this_grid().sync()`): every block "
              "must be resident at once, so the plan refuses a grid of more than "
              "`device.sm_count * kernel.blocks_per_sm` blocks (error `CORESIDENT`; a chain tries its next member). "
              "Not with a cluster, nor on a kernel with `variants` (its co-residency is that of one function).",
              "false"),
        Field("programmatic_dependent", BOOLEAN, False,
              "Programmatic dependent launch (the attribute programmaticStreamSerialization): the kernel may start "
              "while the previous kernel on the stream finishes, and must call `cudaGridDependencySynchronize()` "
              "(griddepcontrol.wait) before reading that kernel's output. On a GPU below compute capability 9.0, "
              "which has no programmatic dependent launch, the kernel starts after the previous one ends, as with "
              "a plain launch (guard the call there: `#if __CUDA_ARCH__ >= 900`).",
              "false"),
        Field("cluster", DIMS, False,
              "Launch-time thread-block cluster dimensions `[x, y, z]`: integer expressions over the integer "
              "arguments, host arguments, constants and `let` names (not one that reads the device). The grid "
              "must be a whole number of clusters and a cluster at most the target's `max_cluster_size` blocks "
              "(error `CLUSTER`). Not with a compile-time `cluster`, and not for a target below compute "
              "capability 9.0 (thread-block clusters need it).",
              "no cluster"),
    ),
)

# The shared-memory swizzle spans (bytes) a tensor map may take; 0: none.
TMA_SWIZZLES = (0, 32, 64, 128)
# The most dimensions a tensor map has (cuTensorMapEncodeTiled's limit).
TMA_MAX_RANK = 5

TENSOR_MAP = Struct(
    "tensor_map", "tensor map",
    "One entry under `tensor_maps`: a TMA descriptor (CUtensorMap) of an array argument, encoded by the launcher "
    "on the host for each launch and passed to the kernel by value after the `args`.",
    (
        Field("array", IDENTIFIER, True,
              "The pointer argument the map describes: a contiguous row-major array of a plain element type of 1, "
              "2, 4 or 8 bytes (the map copies its bits; zeros outside the array). Give the array a `size` that "
              "covers the map (the product of `dims`; checked on the examples when specs are loaded), so the "
              "launchers' size checks cover what the copies read; an array without a `size` is not checked."),
        Field("dims", Kind("list of expressions", {"type": "array", "items": dict(EXPRESSION.json),
                                                    "minItems": 1}), True,
              f"The array's extents, outermost first (`[n, k]` for a row-major n x k matrix): 1 to {TMA_MAX_RANK} "
              "integer expressions over the integer arguments, host arguments, constants and `let` names (not one that "
              "reads the device). Rows are contiguous: each stride is the "
              "product of the extents inside it, and must be a multiple of 16 bytes (a constant innermost extent "
              "that makes the rows another size is refused when specs are loaded)."),
        Field("box", Kind("list of expressions", {"type": "array", "items": dict(EXPRESSION.json),
                                                   "minItems": 1}), True,
              "The box one copy moves, outermost first, as many entries as `dims`: integer expressions, each "
              "1 to 256; the innermost times the element size a multiple of 16 bytes (and at most the swizzle "
              "span when swizzled)."),
        Field("swizzle", Kind("integer", {"type": "integer", "enum": list(TMA_SWIZZLES)}), False,
              "The shared-memory swizzle span in bytes: 0 (none), 32, 64 or 128 (CU_TENSOR_MAP_SWIZZLE_*).",
              "0"),
    ),
)

EXAMPLE = Kind("example", {
    "type": "object", "propertyNames": dict(IDENTIFIER.json),
    "additionalProperties": {"type": ["integer", "number", "boolean"]},
})

KERNEL = Struct(
    "kernel", "kernel", "One entry under `kernels`: a launcher, named by its key.",
    (
        Field("symbol", SYMBOL, False,
              "The `__global__` function the launcher calls: a name, optionally namespace-qualified, or a C++ "
              "template-id with type, integer, `true`/`false` and function (`&fn`) arguments, nested templates "
              "and `{AXIS}` placeholders (`ns::my_kernel<256>`, `act_kernel<ns::SiluOp<float>, {T}>`). "
              "Give either `symbol` or `variants`, not both.",
              "the launcher name"),
        Field("summary", SUMMARY, True,
              "One line (at most 2000 characters of printable text) saying what the kernel computes and how it "
              "is laid out; it becomes the launcher's docstring and comments."),
        Field("doc", TEXT, False,
              "Longer free text about the kernel, after the summary in the launcher's docstring (Python "
              "and the .pyi stub)."),
        Field("targets", list_of(IDENTIFIER, 1, unique=True), False,
              "The targets of specs/targets.yaml the kernel is launched on. Elsewhere its launcher exists and "
              "reports \"not launched: absent\". The module's sources are compiled for every target where any "
              "of its kernels is present (or it declares `structs`): guard code a target cannot compile with "
              "`#if KERNELGEN_TARGET_CC >= 90` (the target's compute capability as major * 10 + minor; "
              "`KERNELGEN_TARGET_NAME` is its name as a string literal).",
              "every target"),
        Field("args", mapping_of(IDENTIFIER, Kind("type or argument",
                                                  by_type(TYPE.json, {"$ref": "#/$defs/argument"}))), True,
              "The `__global__` function's parameters, in order: each name maps to its type (`u32`, "
              "`const bf16*`, or a struct of `structs`, passed by value) or to the long form `{type: ..., size: "
              "EXPR, contiguous: true, zero: true}`. A build fails when the kernel's definition disagrees. "
              "`{}` for a kernel without parameters."),
        Field("host_args", mapping_of(IDENTIFIER, Kind(f"{HOST_TYPE.name} or argument",
                                                       by_type(HOST_TYPE.json, {"$ref": "#/$defs/argument"}))), False,
              "Arguments the launcher takes but does not pass to the kernel: integers or `bool`s (`u32`, `bool`, "
              "...) that decide the geometry, the clauses or the variant. The long form `{type: T, to_symbol: "
              "NAME}` copies a host argument of any scalar type (an integer, `bool` or a float) or a struct "
              "into a `__constant__` variable before each launch; `{type: T, from: s.field}` is an integer the "
              "launchers read from a struct argument's field instead of taking it (plans take it); an expression "
              "reading a field directly (`s.rows`) adds one, named `s_rows`, where none is declared.",
              "none"),
        Field("let", Kind(expressions_of(IDENTIFIER).name, {**expressions_of(IDENTIFIER).json, "minProperties": 1}),
              False,
              "Named integer expressions over the integer arguments, host arguments, constants, device names "
              "and the names before them (`tiles: div_ceil(m, 128) * div_ceil(n, 128)`), usable in the kernel's "
              "other expressions as if written out there; each use is checked where it stands (a name whose "
              "expression reads the device is not usable in `block`, a size or `launch.cluster`). A name may "
              "not be an argument's or a constant's.",
              "none"),
        Field("grid", DIMS, True,
              "The grid `[x, y, z]`: three integer expressions over the integer arguments, host arguments, "
              "constants and `let` names, and the device names (`device.sm_count`, `kernel.blocks_per_sm`, ...: "
              "see Device names in docs/spec-format.md). A dimension of 0 means \"not launched\"; one above "
              "CUDA's limits is an error."),
        Field("block", DIMS, True,
              "The block `[x, y, z]`: three integer expressions, checked against the target's limits over the "
              "examples when specs are loaded, and on every launch."),
        Field("cluster", DIMS, False,
              "The compile-time thread-block cluster `[x, y, z]`: three constant expressions (literals, "
              "constants and integer instantiation axes). It must equal the `__cluster_dims__(...)` attribute "
              "on the kernel's definition, which kernelgen reads from the sources; a kernel with that "
              "attribute must declare it. Every grid the "
              "examples and the generated test cases launch must be a whole number of clusters, and each launch "
              "checks it again (error `CLUSTER`). Not for a target below compute capability 9.0: list the "
              "kernel's `targets`.",
              "no cluster"),
        Field("launch", LAUNCH.ref(), False,
              "Launch modes: `{cooperative: true}`, `{programmatic_dependent: true}`, `{cluster: [x, y, z]}` "
              "(combinable, except a cooperative launch with a cluster or on a kernel with `variants`).",
              "a plain launch"),
        Field("tensor_maps", mapping_of(IDENTIFIER, TENSOR_MAP.ref(), 1), False,
              "TMA descriptors the launcher encodes (cuTensorMapEncodeTiled, through the runtime's driver entry "
              "point) for each launch: each name maps to its array, extents and box. The kernel takes them after "
              "the `args`, in this order, as `const __grid_constant__ CUtensorMap` parameters; the APIs do not "
              "(they take the arrays). An array whose address is not 16-byte aligned, or whose row stride is "
              "not a multiple of 16 bytes, is \"not launched\" (`UNALIGNED`, detail: the map's index), so a "
              "chain tries its next member; an encoding the driver refuses is the error `TENSOR_MAP`. Not for a "
              "target below compute capability 9.0 (the tensor memory accelerator needs it): list the kernel's "
              "`targets`.",
              "none"),
        Field("shared_mem", EXPRESSION, False,
              "Dynamic shared memory in bytes, an integer expression; it may use the device.* names (not "
              "kernel.blocks_per_sm, which depends on it). Above 48 KiB the launcher opts in once per "
              "device; above the target's opt-in limit it is an error (at load, over the examples where the kernel "
              "applies; at launch, in a chain, the next member is tried).",
              "0"),
        Field("skip_if", one_or_list(PREDICATE), False,
              "Predicates for empty work: when one holds the kernel is not launched, silently.", "none"),
        Field("requires", one_or_list(PREDICATE), False,
              "Predicates every call must satisfy: one that fails is an error (`ArgumentError` in Python).",
              "none"),
        Field("applies_if", one_or_list(PREDICATE), False,
              "Predicates for applicability: one that fails means \"not launched\" with that clause as the "
              "reason, so a fallback chain can try the next kernel.",
              "none"),
        Field("variants", VARIANTS.ref(), False,
              "Choose the `__global__` function by the value of an integer argument (a head dimension, say) "
              "instead of one `symbol`."),
        Field("extends", IDENTIFIER, False,
              "Start from another kernel defined above in the same file: its entries, each replaced whole by "
              "this kernel's entry of the same key; an entry whose value is null removes an inherited optional "
              "key. Required keys may then come from the kernel extended.",
              "none"),
        Field("instantiate", Kind("mapping of axis names to lists of element types, integers, booleans or "
                                  "enumerators, or list of mappings of axis names to one value each", {
            "anyOf": [
                {"type": "object", "propertyNames": dict(IDENTIFIER.json), "minProperties": 1,
                 "additionalProperties": {"type": "array", "minItems": 1, "uniqueItems": True,
                                          "items": _AXIS_VALUE}},
                {"type": "array", "minItems": 1, "uniqueItems": True, "items": {
                    "type": "object", "propertyNames": dict(IDENTIFIER.json), "minProperties": 1,
                    "additionalProperties": _AXIS_VALUE}},
            ],
        }), False,
              "A matrix of instances: each axis lists values of one kind: element types (substituted for `{AXIS}` "
              "in `symbol`, `variants` and argument types, as their C++ spelling), integers (constants of the "
              "instance in every expression, and substituted for `{AXIS}` in `symbol`), booleans (`true` / "
              "`false` in `symbol`, 1 / 0 in expressions) or qualified enumerators such as `Act::Relu` (in "
              "`symbol` only, for a non-type template parameter). A list of mappings, each giving every axis one "
              "value (`[{T: f32, TILE: 64}, {T: bf16, TILE: 128}]`), makes those combinations only, in that "
              "order. Each instance gets its own launcher; "
              "the kernel's name becomes a dispatching launcher that picks the instance from the arrays' element "
              "types, then the first instance whose plan launches.",
              "none"),
        Field("instance_name", STRING, False,
              "The launcher name of each instance, with `{AXIS}` placeholders (e.g. `gemv_{T}_t{TILE}`).",
              "the kernel name and the axis values joined by `_`"),
        Field("examples", list_of(EXAMPLE, 1, MAX_EXAMPLES), True,
              "Argument sets (mappings of argument names to numbers) the generated tests start from. The first "
              "must give every integer argument and "
              "launch on every target the kernel is built for; later ones inherit what they leave out. Float "
              "arguments may be given for readability; "
              "`bool` arguments take `true`/`false` (or 0/1). "
              "Every clause must be the only one deciding the outcome for some argument set that kernelgen "
              "derives from these; otherwise add an example where it alone decides."),
    ),
    extra_null_keys=True,
    inherit_key="extends",
)

MODULE = Struct(
    "module", "module spec", "The top level of a module spec, `specs/<module>.yaml`.",
    (
        VERSION,
        Field("module", MODULE_NAME, True,
              "The module's name: lower-case letters, digits and `_`, the same as the file's name. It names the "
              "Python module, the C++ namespace and the generated files."),
        Field("summary", SUMMARY, True, "One line saying what the module holds; it becomes the Python module's "
              "docstring."),
        Field("doc", TEXT, False,
              "Longer free text about the module, after the summary in the Python module's docstring."),
        Field("sources", list_of(SOURCE, 1, unique=True), True,
              "The CUDA files defining the kernels, relative to the project root (`.cu`, `.cuh`, `.h`, `.hpp`). "
              "They are `#include`d, in order, into the module's generated launcher file, as `<path>` from the "
              "project root (a source at a generated header's path, `<package>/<module>.h`, is refused)."),
        Field("kill_switch", ENV_NAME, False,
              "An environment variable whose presence, read on the module's first use (and again after "
              "`refresh()`), makes every launcher of the module report \"not launched: kill switch\". Names "
              "that ordinary environments set (PATH, HOME, LANG, LC_*, CUDA_*, PYTHON*, ...) and kernelgen's own "
              "(`KERNELGEN_*`) are refused.",
              "none"),
        Field("kill_switch_shared", BOOLEAN, False,
              "Declares that other modules use the same kill switch on purpose (each of them must declare "
              "it too); without it, two modules with one kill switch are an error.",
              "false"),
        Field("constants", expressions_of(IDENTIFIER), False,
              "Named integer constants usable in every expression of the module; a constant may be an "
              "expression over the constants before it. They become `constexpr int64_t` in the C++.",
              "none"),
        Field("structs", mapping_of(STRUCT_NAME, STRUCT.ref(), 1), False,
              "Struct types that kernels take by value: each name (usable as an argument type) maps to its C++ "
              "type and its fields. Checked against the C++ struct when the module is built.",
              "none"),
        Field("kernels", mapping_of(IDENTIFIER, KERNEL.ref(), 1), True,
              "The module's kernels, by launcher name."),
        Field("build", BUILD.ref(), False,
              "Include folders, macros and nvcc options for this module's translation unit (see Build settings "
              "in docs/spec-format.md).", "none"),
        Field("fallbacks", mapping_of(IDENTIFIER, list_of(STRING, 2, MAX_CHAIN, unique=True)), False,
              "Fallback chains: each name maps to a list of kernels (`kernel` or `module.kernel`) tried in order; "
              "the chain's launcher launches the first that applies. Members must agree on the types of the "
              "arguments they share.",
              "none"),
    ),
)

TARGET = Struct(
    "target", "target", "One entry of specs/targets.yaml: a GPU target, named by its key.",
    (
        Field("arch", Kind("nvcc architecture", {"type": "string", "pattern": _full(ARCH_RE)}), True,
              "The architecture nvcc compiles for, such as `sm_90a` (the architecture-specific `a` form from "
              "`sm_90`, the family `f` form from `sm_100`). `kernelgen build` checks it against the toolkit's "
              "`nvcc --list-gpu-arch` before configuring."),
        Field("compute_capability", Kind("quoted MAJOR.MINOR", {"type": "string", "pattern": _full(CC_RE)}), True,
              "The compute capability the built library runs on, quoted: `\"9.0\"`. A library loaded on another "
              "GPU reports a launch error."),
        Field("max_threads_per_block", Kind("integer", {"type": "integer", "minimum": 1,
                                                        "maximum": CUDA_MAX_BLOCK_THREADS}), False,
              f"The most threads a block may have on this target: at most {CUDA_MAX_BLOCK_THREADS} (CUDA's limit on "
              "every GPU) and at most `max_threads_per_sm`.", str(CUDA_MAX_BLOCK_THREADS)),
        Field("max_block_dims", Kind("list of 3 integers", {
            "type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 3, "maxItems": 3,
            "prefixItems": [{"type": "integer", "minimum": 1, "maximum": d} for d in CUDA_MAX_BLOCK_DIMS],
        }), False, "The largest block dimensions `[x, y, z]` on this target, within CUDA's "
                   f"`{list(CUDA_MAX_BLOCK_DIMS)}`.", str(list(CUDA_MAX_BLOCK_DIMS))),
        Field("max_shared_mem_per_block_optin", Kind("integer", {"type": "integer", "minimum": 0,
                                                                 "maximum": 1 << 30}), True,
              "The most dynamic shared memory, in bytes, a block may opt in to on this target."),
        Field("sm_count", Kind("integer", {"type": "integer", "minimum": 1, "maximum": 4096}), False,
              "The number of SMs of the target's reference device: `device.sm_count` in plans computed without a "
              "GPU (with one, the current device's count). Without it such plans use 1 SM, and `kernelgen plan` "
              "and `kernelgen list` say so.", "1"),
        Field("max_threads_per_sm", Kind("integer", {"type": "integer", "minimum": 32, "maximum": 1 << 16,
                                                     "multipleOf": 32}), False,
              "The most resident threads per SM, a whole number of 32-thread warps: `device.max_threads_per_sm` "
              "without a GPU, and a bound of `kernel.blocks_per_sm`.", "2048"),
        Field("max_blocks_per_sm", Kind("integer", {"type": "integer", "minimum": 1, "maximum": 1024}), False,
              "The most resident blocks per SM, a bound of `kernel.blocks_per_sm` without a GPU.", "32"),
        Field("max_shared_mem_per_sm", Kind("integer", {"type": "integer", "minimum": 1, "maximum": 1 << 30}), False,
              "Shared memory per SM in bytes, at least `max_shared_mem_per_block_optin` + "
              "`reserved_shared_mem_per_block` (what a block using the opt-in limit takes): "
              "`device.max_shared_mem_per_sm` without a GPU, and a bound of `kernel.blocks_per_sm`.",
              "max_shared_mem_per_block_optin + reserved_shared_mem_per_block"),
        Field("reserved_shared_mem_per_block", Kind("integer", {"type": "integer", "minimum": 0,
                                                                "maximum": 1 << 20}), False,
              "Shared memory the system reserves per resident block (1 KiB from compute capability 8.0 on), "
              "counted in the `kernel.blocks_per_sm` bound.", "1024"),
        Field("max_cluster_size", Kind("integer", {"type": "integer", "minimum": 1,
                                                   "maximum": PORTABLE_CLUSTER_SIZE}), False,
              f"The most blocks a thread-block cluster may have: at most {PORTABLE_CLUSTER_SIZE}, the portable "
              "cluster size the launchers use (they do not opt in to non-portable sizes); thread-block clusters "
              "need compute capability 9.0, so below it only 1.", "8 from compute capability 9.0 on, else 1"),
        Field("build", BUILD.ref(), False,
              "Include folders, macros and nvcc options for every module built for this target (see Build "
              "settings in docs/spec-format.md).", "none"),
    ),
)

TARGETS_FILE = Struct(
    "targets_file", "target registry",
    "specs/targets.yaml: target names (module-name spelling) mapped to their settings, and optionally "
    "`version`, which is therefore not a target name.",
    (VERSION,),
)

_PACKAGE_NAME = Kind("Python package name", {"type": "string", "pattern": _full(MODULE_RE)})
_C_NAME = Kind("C identifier", {"type": "string", "pattern": _full(IDENTIFIER_RE)})
PROJECT = Struct(
    "project", "project",
    "specs/project.yaml (optional): the project's names. Without it a project has kernelgen's own: package "
    "`kernelgen_ops`, C++ namespace `kernelgen`, C prefix `kg`, libraries `kernelgen_<target>_*`. "
    "`kernelgen init --package NAME` writes it.",
    (
        VERSION,
        Field("package", _PACKAGE_NAME, True,
              "The Python package the built targets are installed into (`import NAME`; `NAME.<target>.<module>`). "
              "The other names derive from it. Not a module of Python's standard library, nor a package kernelgen "
              "or the GPU frameworks use (torch, numpy, yaml, ...)."),
        Field("namespace", _C_NAME, False, "The C++ namespace of the generated API (`NAME::<module>::<kernel>`); "
              "not `kg` or `kg_abi`, the runtime's.", "the package name"),
        Field("c_prefix", _C_NAME, False, "The prefix of the C ABI functions (`PREFIX_<module>__<kernel>`).",
              "the package name"),
        Field("library", _C_NAME, False,
              "The stem of the target libraries (`libSTEM_<target>_<hash>.so`) and Rust crates (`STEM_<target>`).",
              "the package name"),
        Field("build", BUILD.ref(), False,
              "Include folders, macros and nvcc options for every module of the project, on every target (see "
              "Build settings in docs/spec-format.md).", "none"),
    ),
)

STRUCTS = (MODULE, STRUCT, FIELD, KERNEL, ARGUMENT, VARIANTS, LAUNCH, TENSOR_MAP, TARGET, TARGETS_FILE, PROJECT,
           BUILD)


# ------------------------------------------------------------------ JSON Schema

def _struct_json(s: Struct) -> dict[str, object]:
    props: dict[str, object] = {}
    for f in s.fields:
        props[f.name] = {**f.kind.json, "description": f.description}
    extra: object = False
    if s.extra_null_keys:
        # Any other key must be null; one with a value is a misspelt key, reported at that key
        # (errorMessage: the YAML language server's text for the error).
        extra = {"type": "null", "errorMessage": f"unknown key of {article(s.title)} (keys: "
                 f"{', '.join(f.name for f in s.fields)}); only a key without a value is tolerated here, where "
                 "a flow mapping split an expression at a comma"}
    out: dict[str, object] = {
        "type": "object",
        "description": s.description,
        "properties": props,
        "required": sorted(s.required()),
        "additionalProperties": extra,
    }
    if s.inherit_key is not None:
        # Entries may come from the entry named by inherit_key, and null removes an inherited one.
        for f in s.fields:
            if f.name != s.inherit_key:
                props[f.name] = {**by_type({"type": "null"}, f.kind.json), "description": f.description}
        out["anyOf"] = [{"required": [s.inherit_key]}, {"required": out.pop("required")}]
    if not out.get("required", True):
        del out["required"]
    return out


def json_schema(which: str = "module") -> dict[str, object]:
    """The JSON Schema (draft 2020-12) of a module spec (``module``), of specs/targets.yaml
    (``targets``) or of specs/project.yaml (``project``)."""
    if which == "module":
        top = _struct_json(MODULE)
        defs = {s.name: _struct_json(s) for s in (STRUCT, FIELD, KERNEL, ARGUMENT, VARIANTS, LAUNCH, TENSOR_MAP, BUILD)}
        title = "kernelgen module spec"
    elif which == "targets":
        top = _struct_json(TARGETS_FILE)
        top["propertyNames"] = {"pattern": _full(MODULE_RE)}
        top["additionalProperties"] = {"$ref": "#/$defs/target"}
        top["minProperties"] = 1
        target = _struct_json(TARGET)
        # Thread-block clusters need compute capability 9.0 (the rest of the table's consistency is
        # the loader's).
        target["if"] = {"required": ["compute_capability"],
                        "properties": {"compute_capability": {"pattern": r"^[0-8]\."}}}
        target["then"] = {"properties": {"max_cluster_size": {
            "maximum": 1, "errorMessage": "thread-block clusters need compute capability 9.0"}}}
        defs = {"target": target, "build": _struct_json(BUILD)}
        title = "kernelgen target registry (specs/targets.yaml)"
    elif which == "project":
        top = _struct_json(PROJECT)
        defs = {"build": _struct_json(BUILD)}
        title = "kernelgen project (specs/project.yaml)"
    else:
        raise ValueError(which)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        **top,
        "$defs": defs,
    }


def json_schema_text(which: str = "module") -> str:
    return json.dumps(json_schema(which), indent=2, sort_keys=False) + "\n"


# ------------------------------------------------------------------ docs

DOC_BEGIN = "<!-- kernelgen:field-reference:begin (generated by `kernelgen schema --docs`; do not edit) -->"
DOC_END = "<!-- kernelgen:field-reference:end -->"


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def field_reference() -> str:
    """The field reference of docs/spec-format.md, in Markdown."""
    out: list[str] = []
    for s in (MODULE, STRUCT, FIELD, KERNEL, ARGUMENT, VARIANTS, LAUNCH, TENSOR_MAP, TARGETS_FILE, TARGET, PROJECT,
              BUILD):
        out.append(f"### {s.title[0].upper()}{s.title[1:]}")
        out.append("")
        out.append(s.description)
        out.append("")
        out.append("| key | required | kind | default | description |")
        out.append("| --- | --- | --- | --- | --- |")
        for f in s.fields:
            default = "" if f.required else (f.default or "none")
            out.append(
                f"| `{f.name}` | {'yes' if f.required else 'no'} | {_cell(f.kind.name)} | {_cell(default)} "
                f"| {_cell(f.description)} |"
            )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def update_doc(text: str) -> str:
    """``text`` (docs/spec-format.md) with the part between the markers regenerated."""
    try:
        head, rest = text.split(DOC_BEGIN, 1)
        _, tail = rest.split(DOC_END, 1)
    except ValueError:
        raise ValueError(f"the markers {DOC_BEGIN!r} and {DOC_END!r} are missing") from None
    return f"{head}{DOC_BEGIN}\n\n{field_reference()}\n{DOC_END}{tail}"


__all__ = [
    "KERNEL", "MODULE", "PROJECT", "STRUCTS", "SUPPORTED_VERSIONS", "TARGET", "Field", "Kind", "Struct",
    "field_reference", "json_schema", "json_schema_text", "update_doc",
]
