"""Spec loading: YAML nodes -> the typed model, with every check that needs no compiler.

Errors carry the spec file, line and field path, and say how to fix the problem.
"""

from __future__ import annotations

import difflib
import errno
import functools
import itertools
import json
import keyword
import math
import os
import posixpath
import re
import stat
import sys
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from kernelgen import expr, kernel_source, pyexpr, schema, symbols
from kernelgen.cases import check_catalog
from kernelgen.errors import SourceLoc, SpecError, did_you_mean, raise_collected, relpath
from kernelgen.gcpause import collection_paused
from kernelgen.macro_names import MACRO_NAMES
from kernelgen.model import (
    DEVICE_NAMES,
    Arg,
    Axis,
    Build,
    Catalog,
    Clause,
    Fallback,
    Kernel,
    KernelRef,
    Launch,
    Module,
    Struct,
    StructField,
    Target,
    TensorMap,
    Variants,
    chain_arguments,
    cluster_size_default,
)
from kernelgen.names import DEFAULT as NAMING_DEFAULT
from kernelgen.names import Naming
from kernelgen.types import CPP_TYPES, ELEMS, SCALARS, SPEC_ELEMS, ScalarType, name_hint
from kernelgen.wording import article, count
from kernelgen.yamlio import MAX_SPEC_BYTES, YMap, YNode, YScalar, YSeq, load

T = TypeVar("T")

# Names that cannot be used for modules, kernels, arguments or constants: they would
# break the generated C++, C or Python, or collide with what the generator defines.
CPP_KEYWORDS = frozenset(
    """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast else
    enum explicit export extern false float for friend goto if inline int long mutable
    namespace new noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires return short signed sizeof static static_assert
    static_cast struct switch template this thread_local throw true try typedef typeid
    typename union unsigned using virtual void volatile wchar_t while xor xor_eq
    restrict _Bool _Complex _Generic _Noreturn _Static_assert _Thread_local
    main NULL errno assert offsetof""".split()
)
PY_RESERVED = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | {"None", "self", "cls"}
CUDA_RESERVED = frozenset(
    "threadIdx blockIdx blockDim gridDim warpSize dim3 cudaStream_t kg kernelgen std "
    "div_ceil min max plan stream".split()
)
RESERVED = CPP_KEYWORDS | PY_RESERVED | CUDA_RESERVED

# The real architectures of the supported nvcc releases (12.x, 13.x; `nvcc --list-gpu-arch`),
# each also with the a and f suffixes.
NVCC_ARCHES = frozenset(
    "sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_101 "
    "sm_103 sm_110 sm_120 sm_121".split()
)



@functools.lru_cache(maxsize=1)
def known_arches() -> frozenset[str]:
    """Every architecture a target's ``arch`` may name: each of :data:`NVCC_ARCHES`, its
    architecture-specific form (``a``) from compute capability 9.0 on, and its family-specific form
    (``f``) from 10.0 on."""
    out = set(NVCC_ARCHES)
    for base in NVCC_ARCHES:
        if int(base[3:]) >= 90:
            out.add(base + "a")
        if int(base[3:]) >= 100:
            out.add(base + "f")
    return frozenset(out)


# Value patterns and limits are part of the spec format, declared in kernelgen.schema.
_IDENT = schema.IDENTIFIER_RE
_MODULE = schema.MODULE_RE
_ENV = schema.ENV_RE
_SOURCE = schema.SOURCE_RE
_ARCH = schema.ARCH_RE
_CC = schema.CC_RE
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
MAX_INSTANCES = 64
_TYPE = re.compile(r"(const\s+)?([A-Za-z0-9_]+)\s*(\*)?(?:\s*(const\s*)?(\*))?")
_FIELD_TYPE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[\s*([0-9]+)\s*\])?")
MAX_STRUCT_BYTES = 4096
MAX_FIELDS = 64
MAX_TEXT = schema.MAX_TEXT
MAX_LIST = schema.MAX_LIST


class _Ctx:
    """Where we are: the file and the dotted field path, for error messages."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fields: list[str] = []
        self.structs: dict[str, Struct] = {}  # the module's struct types, by spec name
        self.type_axes: dict[str, str] = {}  # the kernel instance's element-type axes (T -> bf16), for sizeof
        self.sources: list[tuple[str, str]] = []  # the module's sources: (path from the root, text)
        self.constant_locs: dict[str, SourceLoc] = {}  # the module's constants: where each is declared
        self.root: Path | None = None  # the project root, where the sources' includes are looked up
        self.include_dirs: list[str] = []  # the module's, the targets' and the project's include folders
        self.declared: _Declared | None = None  # what the sources declare (read once, when a symbol is checked)
        self.symbols_checked: set[str] = set()
        self.args_over: dict[str, str] = {}  # kernel -> the kernel it extends, where it gives args of its own
        # The kernel being read: argument names of the kernel it extends that its own args or host_args
        # (which replace the inherited ones whole) leave out -> (that kernel, the key).
        self.dropped: dict[str, tuple[str, str]] = {}

    def constant(self, name: str) -> str:
        """``a module constant (line 3)``: what a name clashing with constant ``name`` clashes with."""
        loc = self.constant_locs.get(name)
        return f"a module constant (line {loc.line})" if loc is not None and loc.line else "a module constant"

    @property
    def field(self) -> str:
        return ".".join(self.fields).replace(".[", "[")

    @contextmanager
    def at(self, name: str) -> Iterator[None]:
        self.fields.append(name)
        try:
            yield
        finally:
            self.fields.pop()

    def error(self, loc: SourceLoc, message: str, hint: str = "") -> SpecError:
        return SpecError(loc, self.field, message, hint)


# What a missing required key is for, where its name alone does not say.
_REQUIRED_HINTS = {
    "examples": "a list of argument values for which the kernel launches, such as "
    "[{rows: 4, cols: 128}]: plans, contract tests and tools start from them",
    "summary": "one line saying what it computes; docstrings, headers and `kernelgen list` show it",
}


# Keys written where they do not belong, by the entry they were written in: where they go.
_MISPLACED = {
    ("kernel", "kill_switch"): "a kill switch is the module's: kill_switch at the top of the spec turns off every "
                               "launcher of the module",
    ("kernel", "structs"): "structs are the module's: declare them at the top of the spec",
    ("kernel", "constants"): "constants are the module's: declare them at the top of the spec",
    ("kernel", "fallbacks"): "fallback chains are the module's: declare them at the top of the spec",
    ("module", "grid"): "grid, block and shared_mem are each kernel's, under kernels.<name>",
    ("module", "block"): "grid, block and shared_mem are each kernel's, under kernels.<name>",
    ("module", "args"): "args are each kernel's, under kernels.<name>",
}


def _fields(ctx: _Ctx, node: YNode, struct: schema.Struct) -> dict[str, YNode]:
    """The mapping's entries by key; keys the schema does not declare for ``struct`` and
    missing required keys are errors."""
    if not isinstance(node, YMap):
        raise ctx.error(node.loc, f"expected a mapping, got {_kind(node)}")
    out: dict[str, YNode] = {}
    required = struct.required()
    allowed = required | struct.optional()
    for key, value in node.items:
        name = key.value
        if not isinstance(name, str) or name not in allowed:
            with ctx.at(str(name)):
                raise ctx.error(key.loc, "unknown key",
                                _MISPLACED.get((struct.name, str(name))) or did_you_mean(str(name), allowed))
        out[name] = value
    missing = sorted(required - set(out))
    if missing:
        keys = ", ".join(f"'{m}'" for m in missing)
        noun = "key" if len(missing) == 1 else "keys"
        hints = [_REQUIRED_HINTS[m] for m in missing if m in _REQUIRED_HINTS]
        raise ctx.error(node.loc, f"missing required {noun} {keys}", "; ".join(hints))
    return out


def _kind(node: YNode) -> str:
    if isinstance(node, YMap):
        return "a mapping" if node.items else "an empty mapping"
    if isinstance(node, YSeq):
        return "a list" if node.items else "an empty list"
    v = node.value
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {str(v).lower()}"
    if isinstance(v, int):
        return f"integer {v}"
    if isinstance(v, float):
        return f"number {v}"
    return f"string {v!r}" if len(v) < 60 else "a string"


def _filled(ctx: _Ctx, node: YNode, kind: type[YMap] | type[YSeq], what: str, hint: str = "",
            optional: bool = True) -> YMap | YSeq:
    """``node`` as a mapping or list (``kind``) of at least one entry; ``what`` describes the
    entries it should hold ("a mapping of names to integer expressions"). An empty one is an
    error of its own, saying it is empty (an ``optional`` key with nothing under it is left out)."""
    if not isinstance(node, kind):
        raise ctx.error(node.loc, f"expected {what}, got {_kind(node)}", hint)
    if not node.items:
        key = ctx.fields[-1] if ctx.fields else ""
        leave = f"leave '{key}' out for none" if optional and key and not key.startswith("[") else ""
        least = "" if "at least one" in what else " with at least one entry"
        raise ctx.error(node.loc, f"the {'mapping' if kind is YMap else 'list'} is empty; expected {what}{least}",
                        "; ".join(h for h in (hint, leave) if h))
    return node


def _str(ctx: _Ctx, node: YNode, what: str = "a string") -> str:
    if not isinstance(node, YScalar) or not isinstance(node.value, str):
        raise ctx.error(node.loc, f"expected {what}, got {_kind(node)}")
    return node.value


def _int(ctx: _Ctx, node: YNode, lo: int | None = None, hi: int | None = None) -> int:
    if not isinstance(node, YScalar) or isinstance(node.value, bool) or not isinstance(node.value, int):
        raise ctx.error(node.loc, f"expected an integer, got {_kind(node)}")
    v = node.value
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        if hi is None:
            raise ctx.error(node.loc, f"{v} is less than {lo}")
        raise ctx.error(node.loc, f"{v} is out of range [{lo}, {hi}]")
    return v


def _bool(ctx: _Ctx, node: YNode) -> bool:
    if not isinstance(node, YScalar) or not isinstance(node.value, bool):
        raise ctx.error(node.loc, f"expected true or false, got {_kind(node)}")
    return node.value


def _list(ctx: _Ctx, node: YNode, item: Callable[[YNode], T], max_len: int = MAX_LIST) -> list[T]:
    if not isinstance(node, YSeq):
        raise ctx.error(node.loc, f"expected a list, got {_kind(node)}")
    if len(node.items) > max_len:
        raise ctx.error(node.loc, f"{len(node.items)} entries; the limit is {max_len}")
    out = []
    for i, n in enumerate(node.items):
        with ctx.at(f"[{i}]"):
            out.append(item(n))
    return out


def _text(ctx: _Ctx, node: YNode, one_line: bool, summary: bool = False) -> str:
    """Free text (summaries, docs): rendered only inertly, but kept printable; a ``summary`` (a
    required key) may not be empty."""
    s = _str(ctx, node, "text")
    if summary and not s.strip():
        raise ctx.error(node.loc, "the summary is empty", _REQUIRED_HINTS["summary"])
    if len(s) > MAX_TEXT:
        raise ctx.error(node.loc, f"text is {len(s)} characters; the limit is {MAX_TEXT}")
    for ch in s:
        if ch == "\n" and not one_line:
            continue
        if not ch.isprintable():
            raise ctx.error(
                node.loc, f"text contains the control or separator character U+{ord(ch):04X}",
                "summaries are one line of printable text",
            )
    return s.strip()


def reserved_reason(name: str) -> str | None:
    """Why a spec name cannot be emitted into generated code, or None when it can.

    Generated code keeps its own identifiers in the ``kg_``/``KG_``/``_kg_`` namespace (and
    the ``kg`` and ``kernelgen`` C++ namespaces), so any other name is safe beside them; what
    is left are the words each output language gives a meaning of its own."""
    if name in RESERVED:
        return "a reserved word of C++, C or Python, or a name the generated bindings use"
    if name in MACRO_NAMES:
        return "a macro of the C, CUDA or Python headers that generated code includes"
    if name.startswith("_"):
        return "names starting with '_' are reserved (C++ reserves them at file scope)"
    if "__" in name:
        return "names containing '__' are reserved in C++ and separate the parts of C ABI symbols"
    if name[:3].lower() == "kg_":
        return "the kg_ prefix is reserved for generated code"
    if name.endswith("_t"):
        return "names ending in '_t' are reserved for C and CUDA type names (int64_t, size_t, cudaStream_t)"
    return None


# Environment variables that ordinary shells, CUDA, Python and kernelgen itself set or read.
_COMMON_ENV = frozenset("""
    PATH HOME USER LOGNAME SHELL PWD OLDPWD TERM LANG LANGUAGE HOSTNAME HOST TMPDIR TMP TEMP MAIL EDITOR
    VISUAL PAGER DISPLAY TZ SHLVL COLUMNS LINES UID EUID GROUPS PS1 PS2 IFS MANPATH INFOPATH CC CXX CFLAGS
    CXXFLAGS CPPFLAGS LDFLAGS MAKEFLAGS HOSTTYPE OSTYPE MACHTYPE COLORTERM SUDO_USER SUDO_UID SUDO_GID
    SUDO_COMMAND CI HISTFILE HISTSIZE LS_COLORS CMAKE_PREFIX_PATH CPATH LIBRARY_PATH PKG_CONFIG_PATH
""".split())
_COMMON_ENV_PREFIXES = ("LC_", "XDG_", "CUDA", "NV_", "NVIDIA_", "PYTHON", "LD_", "SSH_", "DBUS_", "CONDA",
                        "VIRTUAL_ENV", "PIP_", "OMP_", "GIT_", "TORCH", "NCCL_", "HTTP", "HTTPS_", "NO_PROXY",
                        "TERM_", "WAYLAND_", "SESSION_", "SLURM_", "KUBERNETES_", "GITHUB_", "RUNNER_")


def _common_env(name: str) -> str | None:
    """Why ``name`` is unfit as a kill switch (an environment variable ordinary environments
    set), or None."""
    if name.startswith("KERNELGEN"):
        return "one of kernelgen's own variables (KERNELGEN_*, such as KERNELGEN_NO_PDL and KERNELGEN_TARGET)"
    if name in _COMMON_ENV:
        return "a variable ordinary environments set"
    prefix = next((p for p in _COMMON_ENV_PREFIXES if name.startswith(p)), None)
    if prefix:
        return f"in the {prefix}* family of variables ordinary environments set"
    return None


def rename_hint(what: str, name: str) -> str:
    """How to rename a spec's name refused for clashing with a name of kernelgen's own (a registry
    type, a reserved word, a name generated code uses: lists that grow between kernelgen versions,
    so an older spec may use one), keeping what the name gave the C++ side where a key can: a
    struct's C++ type (``cpp``), a kernel's ``__global__`` function (``symbol``), a field's C++
    member (``cpp``)."""
    if what == "struct name":
        return (f"rename the struct (its key under structs, and the arguments and fields that name it) and keep "
                f"its C++ type with cpp: {name}, unless it gives cpp already")
    if what == "kernel name":
        return (f"rename the kernel (its launcher) and keep the __global__ function it launches with symbol: {name}, "
                "unless it gives symbol already")
    if what == "field name":
        return f"rename the field and keep its C++ member with {{type: <its type>, cpp: {name}}}"
    return "choose another name"


def _ident(ctx: _Ctx, loc: SourceLoc, name: object, what: str, pattern: re.Pattern[str] = _IDENT) -> str:
    if not isinstance(name, str) or not pattern.fullmatch(name):
        bound = re.search(r"\{0,(\d+)\}$", pattern.pattern)
        if isinstance(name, str) and bound and re.fullmatch(pattern.pattern[:bound.start()] + "*", name):
            limit = int(bound.group(1)) + 1
            hint = ("give the kernel an 'instance_name': a shorter pattern with every axis in it; or give the kernel "
                    "a shorter name" if what == "instance name" else f"use a shorter {what}")
            raise ctx.error(loc, f"{what} '{name}' is {len(name)} characters long; the limit is {limit}", hint)
        raise ctx.error(
            loc, f"{name!r} is not a valid {what}", f"use letters, digits and '_' matching {pattern.pattern}"
        )
    why = reserved_reason(name)
    if why:
        raise ctx.error(loc, f"'{name}' is reserved and cannot be used as {article(what)}: {why}",
                        rename_hint(what, name))
    return name


def read_regular(path: Path, root: Path, limit: int, what: str = "spec") -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes: a
    directory, a dangling symlink or a symlink loop, a FIFO or a device is refused before
    anything is read (a FIFO would block, a device never end)."""
    try:  # the path as listed, not where a symlink points
        rel = path.relative_to(root).as_posix()
    except ValueError:
        rel = relpath(path, root)
    try:
        st = path.stat()
    except OSError as exc:
        reason = "a symlink loop" if exc.errno == errno.ELOOP else (
            "a dangling symlink" if path.is_symlink() else (exc.strerror or "unreadable"))
        raise SpecError(SourceLoc(rel), "", f"cannot read the {what} file: {reason}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else (
            "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise SpecError(SourceLoc(rel), "", f"the {what} file is {kind}; only regular files are read")
    if st.st_size > limit:
        raise SpecError(SourceLoc(rel), "", f"file is {st.st_size} bytes; {what} files are limited to {limit}")
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise SpecError(SourceLoc(rel), "", f"cannot read the {what} file: {exc.strerror}") from None
    if len(data) > limit:
        raise SpecError(SourceLoc(rel), "", f"file is over {limit} bytes; {what} files are limited to {limit}")
    return data


# ------------------------------------------------------------------ build settings

# nvcc options a `build:` entry may not give: kernelgen sets them (architecture, language standard,
# output, compilation mode), or they change what a build produces or how its objects link.
_REFUSED_FLAGS = (
    ("-arch", "the target's arch sets it (specs/targets.yaml)"),
    ("--gpu-architecture", "the target's arch sets it (specs/targets.yaml)"),
    ("-gencode", "the target's arch sets it (specs/targets.yaml)"),
    ("--generate-code", "the target's arch sets it (specs/targets.yaml)"),
    ("-code", "the target's arch sets it (specs/targets.yaml)"),
    ("--gpu-code", "the target's arch sets it (specs/targets.yaml)"),
    ("-std", "kernelgen compiles C++17"),
    ("--std", "kernelgen compiles C++17"),
    ("-o", "CMake names the outputs"),
    ("--output-file", "CMake names the outputs"),
    ("-odir", "CMake names the outputs"),
    ("-keep-dir", "CMake names the outputs: the kept intermediate files stay in the build folder"),
    ("--keep-dir", "CMake names the outputs: the kept intermediate files stay in the build folder"),
    ("--output-directory", "CMake names the outputs"),
    ("-c", "CMake sets the compilation mode"),
    ("--compile", "CMake sets the compilation mode"),
    ("-x", "the launcher files are CUDA"),
    ("--x", "the launcher files are CUDA"),
    ("-rdc", "each module is one whole-program translation unit"),
    ("--relocatable-device-code", "each module is one whole-program translation unit"),
    ("-dc", "each module is one whole-program translation unit"),
    ("--device-c", "each module is one whole-program translation unit"),
    ("-dw", "each module is one whole-program translation unit"),
    ("--device-w", "each module is one whole-program translation unit"),
    ("-dlink", "each module is one whole-program translation unit"),
    ("--device-link", "each module is one whole-program translation unit"),
    ("-ccbin", "the build's host compiler is CMake's (CMAKE_CUDA_HOST_COMPILER)"),
    ("--compiler-bindir", "the build's host compiler is CMake's (CMAKE_CUDA_HOST_COMPILER)"),
    ("-shared", "CMake links the target library"),
    ("--shared", "CMake links the target library"),
    ("-lib", "CMake links the target library"),
    ("--lib", "CMake links the target library"),
    ("-link", "CMake links the target library"),
    ("--link", "CMake links the target library"),
    ("-E", "a build compiles"),
    ("--preprocess", "a build compiles"),
    ("-dryrun", "a build compiles"),
    ("--dryrun", "a build compiles"),
    ("-clean", "a build compiles"),
    ("--clean-targets", "a build compiles"),
    ("-V", "a build compiles"),
    ("--version", "a build compiles"),
    ("-h", "a build compiles"),
    ("--help", "a build compiles"),
    ("-arch-ls", "a build compiles"),
    ("--list-gpu-arch", "a build compiles"),
    ("-code-ls", "a build compiles"),
    ("--list-gpu-code", "a build compiles"),
    ("-M", "CMake tracks the dependencies"),
    ("--generate-dependencies", "CMake tracks the dependencies"),
    ("-MM", "CMake tracks the dependencies"),
    ("--generate-nonsystem-dependencies", "CMake tracks the dependencies"),
    ("-MD", "CMake tracks the dependencies"),
    ("--generate-dependencies-with-compile", "CMake tracks the dependencies"),
    ("-MMD", "CMake tracks the dependencies"),
    ("--generate-nonsystem-dependencies-with-compile", "CMake tracks the dependencies"),
    ("-MF", "CMake tracks the dependencies"),
    ("--dependency-output", "CMake tracks the dependencies"),
    ("-MT", "CMake tracks the dependencies"),
    ("--dependency-target-name", "CMake tracks the dependencies"),
    ("-MP", "CMake tracks the dependencies"),
    ("--generate-dependency-targets", "CMake tracks the dependencies"),
    ("-ptx", "a build makes objects"),
    ("--ptx", "a build makes objects"),
    ("-optix-ir", "a build makes objects"),
    ("--optix-ir", "a build makes objects"),
    ("-ltoir", "a build makes objects"),
    ("--ltoir", "a build makes objects"),
    ("-fdevice-syntax-only", "a build makes objects"),
    ("--fdevice-syntax-only", "a build makes objects"),
    ("-cubin", "a build makes objects"),
    ("--cubin", "a build makes objects"),
    ("-fatbin", "a build makes objects"),
    ("--fatbin", "a build makes objects"),
    ("-cuda", "a build makes objects"),
    ("--cuda", "a build makes objects"),
    ("-run", "a build makes objects"),
    ("--run", "a build makes objects"),
    ("-I", "list the folder under include_dirs"),
    ("--include-path", "list the folder under include_dirs"),
    ("-isystem", "list the folder under include_dirs"),
    ("--system-include", "list the folder under include_dirs"),
    ("-D", "give the macro under defines"),
    ("--define-macro", "give the macro under defines"),
    ("-U", "leave the macro out of defines"),
    ("--undefine-macro", "leave the macro out of defines"),
    ("-l", "a module's object does not link"),
    ("--library", "a module's object does not link"),
    ("-L", "a module's object does not link"),
    ("--library-path", "a module's object does not link"),
    ("-e", "every kernel of a module is compiled"),
    ("--entries", "every kernel of a module is compiled"),
    ("-m32", "kernelgen builds 64-bit code"),
    ("-optf", "its options would bypass these checks: list them here"),
    ("--options-file", "its options would bypass these checks: list them here"),
    ("-forward-unknown-to-host-compiler", "host compiler options go through -Xcompiler, where they are checked"),
    ("--forward-unknown-to-host-compiler", "host compiler options go through -Xcompiler, where they are checked"),
    ("-forward-unknown-opts", "host compiler options go through -Xcompiler, where they are checked"),
    ("--forward-unknown-opts", "host compiler options go through -Xcompiler, where they are checked"),
)
# Options that take their value glued to them (-Iinclude, -DNAME=1), as well as after '=' or a space.
_GLUED_FLAGS = ("-I", "-D", "-U", "-L", "-l")
# The host compiler's options that -Xcompiler (--compiler-options) may not forward, for the same
# reasons as nvcc's own: (spelling, glued to its value, why).
_REFUSED_HOST_FLAGS = (
    ("-std", False, "kernelgen compiles C++17"),
    ("--std", False, "kernelgen compiles C++17"),
    ("-fvisibility", False, "each module is compiled with hidden visibility, which keeps two modules' symbols apart"),
    ("-o", True, "CMake names the outputs"),
    ("--output", True, "CMake names the outputs"),
    ("-dumpdir", True, "CMake names the outputs: dump files stay in the build folder"),
    ("-dumpbase", True, "CMake names the outputs: dump files stay in the build folder"),
    ("@", True, "an options file would bypass these checks: list its options here"),
    ("-specs", True, "a specs file would change the compiler's commands"),
    ("-wrapper", False, "the compiler's subprocesses are its own"),
    ("-B", True, "the compiler's programs are its own"),
    ("-fplugin", True, "the compiler's plugins would run in the build"),
    ("-c", False, "CMake sets the compilation mode"),
    ("-x", True, "the launcher files are CUDA"),
    ("-E", False, "a build compiles"),
    ("-S", False, "a build makes objects"),
    ("-shared", False, "CMake links the target library"),
    ("-m32", False, "kernelgen builds 64-bit code"),
    ("-M", False, "CMake tracks the dependencies"),
    ("-MM", False, "CMake tracks the dependencies"),
    ("-MD", False, "CMake tracks the dependencies"),
    ("-MMD", False, "CMake tracks the dependencies"),
    ("-MF", True, "CMake tracks the dependencies"),
    ("-MT", True, "CMake tracks the dependencies"),
    ("-MQ", True, "CMake tracks the dependencies"),
    ("-MP", False, "CMake tracks the dependencies"),
    ("-I", True, "list the folder under include_dirs"),
    ("-isystem", True, "list the folder under include_dirs"),
    ("-iquote", True, "list the folder under include_dirs"),
    ("-D", True, "give the macro under defines"),
    ("-U", True, "leave the macro out of defines"),
    ("-l", True, "a module's object does not link"),
    ("-L", True, "a module's object does not link"),
)
_HOST_FORWARDING = ("-Xcompiler", "--compiler-options")
# Options that forward a comma-separated list to the other tools of the build (ptxas, nvlink,
# the host linker and archiver, fatbinary, cudafe), and what none of them may be given.
_TOOL_FORWARDING = ("-Xptxas", "--ptxas-options", "-Xnvlink", "--nvlink-options", "-Xlinker", "--linker-options",
                    "-Xarchive", "--archive-options", "-Xfatbin", "--fatbin-options", "-Xcudafe")
_REFUSED_TOOL_FLAGS = (
    ("-o", "CMake names the outputs"),
    ("--output-file", "CMake names the outputs"),
    ("--output", "CMake names the outputs"),
    ("@", "an options file would bypass these checks: list its options here"),
)
# Options whose value is a separate argument unless written with '='.
_FLAGS_WITH_VALUE = frozenset(
    "-Xptxas --ptxas-options -Xcompiler --compiler-options -Xnvlink --nvlink-options -Xlinker --linker-options "
    "-Xarchive --archive-options -maxrregcount --maxrregcount -t --threads --default-stream -default-stream "
    "-split-compile --split-compile -Xfatbin --fatbin-options -Xcudafe -m --machine".split()
)


def _refused_flag(flag: str) -> str | None:
    """Why a `build.nvcc_flags` item is refused (None: accepted). Each option is recognised in
    every spelling nvcc takes: short or long, with its value after '=' or a space (or glued, for
    those that take it so), and the host options -Xcompiler forwards (a comma-separated list)."""
    word, _, value = flag.partition(" ")
    name, eq, glued_value = word.partition("=")
    for refused, why in _REFUSED_FLAGS:
        if name == refused:
            return why
    # -I, -D, -U, -L and -l also glued to their value (-Iinclude, -DNAME=1); -lineinfo is not -l.
    if word != "-lineinfo" and any(word.startswith(g) for g in _GLUED_FLAGS):
        return next(why for refused, why in _REFUSED_FLAGS if word.startswith(refused) and refused in _GLUED_FLAGS)
    if name in ("-m", "--machine") and (glued_value if eq else value) not in ("", "64"):
        return "kernelgen builds 64-bit code"
    if name in _HOST_FORWARDING:
        for host in (glued_value if eq else value).split(","):
            why = _refused_host_flag(host)
            if why:
                return f"{why} (the host compiler's {host.split('=', 1)[0]}, forwarded by {name})"
    if name in _TOOL_FORWARDING:
        for option in (glued_value if eq else value).split(","):
            head = option.split("=", 1)[0].strip()
            why = next((why for refused, why in _REFUSED_TOOL_FLAGS
                        if head == refused or (refused == "@" and head.startswith("@"))), None)
            if why:
                return f"{why} ({head}, forwarded by {name})"
    if name in _FLAGS_WITH_VALUE and "=" not in word and not value:
        return f"{name} takes a value: write it in the same item ({name}=VALUE or '{name} VALUE')"
    if value and name not in _FLAGS_WITH_VALUE:
        return f"one option an item: {name} takes no separate value here (give each option its own item, or " \
               f"write {name}=VALUE)"
    return None


def _refused_host_flag(option: str) -> str | None:
    """Why a host compiler option that -Xcompiler forwards is refused (None: accepted)."""
    name = option.split("=", 1)[0]
    for refused, glued, why in _REFUSED_HOST_FLAGS:
        if name == refused or (refused == "-fvisibility" and name.startswith(refused)):
            return why
        if glued and option.startswith(refused) and not (refused == "-l" and option.startswith("-lineinfo")):
            return why
    return None


def _build(ctx: _Ctx, node: YNode) -> Build:
    """A `build:` entry (project, target or module)."""
    f = _fields(ctx, node, schema.BUILD)
    dirs: list[tuple[str, SourceLoc]] = []
    if "include_dirs" in f:
        with ctx.at("include_dirs"):
            for i, n in enumerate(_seq(ctx, f["include_dirs"])):
                with ctx.at(f"[{i}]"):
                    d = _str(ctx, n, "a folder")
                    if len(d) > 255:
                        raise ctx.error(n.loc, f"folder is {len(d)} characters long; the limit is 255")
                    if d.startswith("~"):
                        raise ctx.error(n.loc, f"folder {d!r} starts with '~', which CMake and nvcc do not expand",
                                        "write the folder out (an absolute path, or one relative to the project)")
                    refused = schema.path_refusal(d)
                    if refused is not None:
                        c, why = refused
                        shown = repr(c) if c.isprintable() else f"U+{ord(c):04X}"
                        raise ctx.error(n.loc, f"folder {d!r} has the character {shown}, which CMake and nvcc "
                                        f"cannot take in a path: {why}")
                    if d.strip() != d:
                        raise ctx.error(n.loc, f"folder {d!r} starts or ends with a space",
                                        "write the folder without the surrounding spaces")
                    norm = posixpath.normpath(d)
                    if norm in (".", "") or norm == "/":
                        raise ctx.error(n.loc, f"folder {d!r} is the project root or the file system's root",
                                        "the project root is always searched")
                    if any(norm == x for x, _ in dirs):
                        raise ctx.error(n.loc, f"folder {d!r} is listed twice")
                    dirs.append((norm, n.loc))
    defines: list[tuple[str, str | None, SourceLoc]] = []
    if "defines" in f:
        with ctx.at("defines"):
            dn = _filled(ctx, f["defines"], YMap, "a mapping of macro names to values",
                         "e.g. defines: {NDEBUG: true}")
            for key, value in dn.items:
                name = key.value if isinstance(key.value, str) else str(key.value)
                with ctx.at(name):
                    if not _IDENT.fullmatch(name):
                        raise ctx.error(key.loc, f"{name!r} is not a macro name",
                                        f"use letters, digits and '_' matching {_IDENT.pattern}")
                    if name.lower().startswith(("kg_", "_kg", "kernelgen")):
                        raise ctx.error(key.loc, f"macro {name} is in kernelgen's reserved names (kg_, KG_, _kg, "
                                        "KERNELGEN)", "choose another name")
                    if name in MACRO_NAMES:
                        raise ctx.error(key.loc, f"macro {name} is defined by the C, CUDA or Python headers that "
                                        "generated code includes", "choose another name")
                    v = value.value if isinstance(value, YScalar) else None
                    if isinstance(v, bool):
                        if not v:
                            raise ctx.error(value.loc, "false does not define a macro", f"leave {name} out")
                        text = None
                    elif isinstance(v, int):
                        text = str(v)
                    elif isinstance(v, str):
                        if not schema.DEFINE_VALUE_RE.fullmatch(v):
                            bad = next(c for c in v if not schema.DEFINE_VALUE_RE.fullmatch(c))
                            raise ctx.error(value.loc, f"value {v!r} has the character {bad!r}, which macro values "
                                            "here do not take", "one token of letters, digits, '_', '.', '+', '-'")
                        text = v
                    else:
                        raise ctx.error(value.loc, f"expected an integer, a token or true, got {_kind(value)}",
                                        "quote a number that is not an integer: '1.5f'" if isinstance(v, float)
                                        else "")
                    defines.append((name, text, key.loc))
    flags: list[str] = []
    if "nvcc_flags" in f:
        with ctx.at("nvcc_flags"):
            for i, n in enumerate(_seq(ctx, f["nvcc_flags"])):
                with ctx.at(f"[{i}]"):
                    flag = _str(ctx, n, "an nvcc option")
                    if not schema.NVCC_FLAG_RE.fullmatch(flag):
                        raise ctx.error(n.loc, f"{flag!r} is not an nvcc option as build settings take them",
                                        "one option an item, starting with '-', with its value after '=' or one "
                                        "space; no quotes, '$', ';' or '\\'")
                    why = _refused_flag(flag)
                    if why:
                        raise ctx.error(n.loc, f"option {flag!r} is refused: {why}")
                    flags.append(flag)
    return Build(node.loc, tuple(dirs), tuple(defines), tuple(flags))


def _optional_build(ctx: _Ctx, f: Mapping[str, YNode]) -> Build:
    """The `build:` entry among a mapping's fields (a project's, a target's or a module's), or none."""
    if "build" not in f:
        return Build()
    with ctx.at("build"):
        return _build(ctx, f["build"])


def _seq(ctx: _Ctx, node: YNode, what: str = "item") -> list[YNode]:
    """A list of at least one ``what`` (the list limit checked by _list)."""
    return _list(ctx, _filled(ctx, node, YSeq, f"a list of at least one {what}"), lambda n: n)


_RUNTIME_HEADERS = Path(__file__).resolve().parent / "runtime" / "include" / "kernelgen"
_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=1)
def runtime_identifiers() -> frozenset[str]:
    """The identifiers of kernelgen's runtime headers (comments and literals left out), which every
    launcher file includes: a macro of that name would rewrite them."""
    words: set[str] = set()
    for h in sorted(_RUNTIME_HEADERS.glob("*.h")):
        words.update(_WORD.findall(_COMMENT_OR_STRING.sub(" ", h.read_text())))
    return frozenset(words)


def catalog_identifiers(modules: Sequence[Module]) -> dict[str, str]:
    """Every name of ``modules`` that the generated code spells, with what it is."""
    out: dict[str, str] = {}
    for m in modules:
        out.setdefault(m.name, f"module '{m.name}'")
        for c, _ in m.constants:
            out.setdefault(c, f"a constant of module '{m.name}'")
        for st in m.structs:
            out.setdefault(st.name, f"a struct of module '{m.name}'")
            for w in _WORD.findall(st.cpp):
                out.setdefault(w, f"a name in the C++ type of struct '{st.name}' ({st.cpp}, module '{m.name}')")
            for fl in st.fields:
                out.setdefault(fl.name, f"a field of struct '{st.name}' (module '{m.name}')")
        for fb in (*m.fallbacks, *m.dispatches):
            out.setdefault(fb.name, f"a launcher of module '{m.name}'")
        for k in m.kernels:
            out.setdefault(k.name, f"a kernel of module '{m.name}'")
            for w in _WORD.findall(k.symbol):
                out.setdefault(w, f"a name in the symbol of kernel '{k.name}' ({k.symbol})")
            for a in k.all_args:
                out.setdefault(a.name, f"an argument of kernel '{k.name}' (module '{m.name}')")
            for name, _ in k.lets:
                out.setdefault(name, f"a let name of kernel '{k.name}' (module '{m.name}')")
            for tm in k.tensor_maps:
                out.setdefault(tm.name, f"a tensor map of kernel '{k.name}' (module '{m.name}')")
    return out


def _check_defines(catalog: Catalog) -> None:
    """A macro of a `build.defines` entry must not rename what the generated code spells."""
    layers: list[tuple[Build, Module | None]] = [(catalog.build, None)] + [(t.build, None) for t in catalog.targets]
    layers += [(m.build, m) for m in catalog.modules]
    if not any(b.defines for b, _ in layers):
        return
    runtime = runtime_identifiers()
    everywhere = catalog_identifiers(catalog.modules) if any(b.defines for b, m in layers if m is None) else {}
    n = catalog.naming  # every translation unit spells the project's names (namespace, C prefix, ...)
    project: dict[str, str] = {}
    for what, value in (("package", n.package), ("namespace", n.namespace), ("C prefix", n.c_prefix),
                        ("library name", n.library)):
        for w in _WORD.findall(value):
            project.setdefault(w, f"a word of the project's {what} ({value})")
    for build, module in layers:
        if not build.defines:
            continue
        # A module's macros reach its own translation unit: its names and those of the modules whose
        # kernels its chains call (their headers are included); the project's and a target's, every module.
        names = everywhere if module is None else catalog_identifiers([module] + [
            o for o in catalog.modules
            if o is not module and any(r.module == o.name for fb in module.fallbacks for r in fb.members)])
        for name, _, loc in build.defines:
            what = names.get(name) or project.get(name)
            if what is None and name in RESERVED:
                what = "a reserved word of C++, Python or CUDA"
            if what is None and name in runtime:
                what = "a name kernelgen's runtime headers use"
            if what is not None:
                raise SpecError(loc, f"build.defines.{name}",
                                f"macro {name} would rewrite {what} wherever the generated code spells it",
                                "choose another macro name")


# ------------------------------------------------------------------ targets


def load_targets(path: Path, root: Path) -> tuple[Target, ...]:
    rel = relpath(path, root)
    if not path.exists() and not path.is_symlink():
        raise SpecError(SourceLoc(rel), "", "target registry not found", "create specs/targets.yaml")
    node = load(rel, read_regular(path, root, MAX_SPEC_BYTES, "target registry"))
    ctx = _Ctx(rel)
    if not isinstance(node, YMap):
        raise ctx.error(node.loc, "expected a mapping of target names to their settings")
    _version(ctx, node)
    targets = []
    for key, value in node.items:
        if key.value == schema.VERSION.name:
            continue
        name = _ident(ctx, key.loc, key.value, "target name", _MODULE)
        if name in PACKAGE_NAMES:
            raise ctx.error(key.loc, f"target '{name}' would be hidden by the package's own attribute {name}",
                            "choose another name")
        with ctx.at(name):
            f = _fields(ctx, value, schema.TARGET)
            with ctx.at("arch"):
                arch = _str(ctx, f["arch"])
                if not _ARCH.fullmatch(arch):
                    raise ctx.error(f["arch"].loc, f"'{arch}' is not an nvcc architecture", "e.g. sm_90a")
                if arch not in known_arches():
                    raise ctx.error(f["arch"].loc, f"'{arch}' is not an architecture nvcc knows",
                                    did_you_mean(arch, known_arches()))
            with ctx.at("compute_capability"):
                cc_text = _str(ctx, f["compute_capability"], "a quoted string like \"9.0\"")
                m = _CC.fullmatch(cc_text)
                if not m:
                    raise ctx.error(f["compute_capability"].loc, f"'{cc_text}' is not MAJOR.MINOR")
                cc = (int(m.group(1)), int(m.group(2)))
                if f"sm_{cc[0]}{cc[1]}" != arch.rstrip("af"):
                    raise ctx.error(f["compute_capability"].loc,
                                    f"compute capability {cc_text} contradicts arch {arch} (compute capability "
                                    f"{arch.rstrip('af')[3:-1]}.{arch.rstrip('af')[-1]})",
                                    "the arch's digits are the compute capability: sm_90a is 9.0, sm_121a is 12.1")
            with ctx.at("max_threads_per_block"):
                mtpb = (
                    _int(ctx, f["max_threads_per_block"], 1) if "max_threads_per_block" in f
                    else int(schema.TARGET["max_threads_per_block"].default or 0)
                )
                if mtpb > schema.CUDA_MAX_BLOCK_THREADS:
                    raise ctx.error(f["max_threads_per_block"].loc, f"{mtpb} threads per block is more than CUDA "
                                    f"allows on any GPU ({schema.CUDA_MAX_BLOCK_THREADS})",
                                    f"write {schema.CUDA_MAX_BLOCK_THREADS}, or the device's smaller limit")
            with ctx.at("max_block_dims"):
                dims = (
                    _list(ctx, f["max_block_dims"], lambda n: _int(ctx, n, 1))
                    if "max_block_dims" in f else json.loads(schema.TARGET["max_block_dims"].default or "[]")
                )
                if len(dims) != 3:
                    raise ctx.error(f["max_block_dims"].loc, f"expected 3 entries [x, y, z], got {len(dims)}")
                for axis, (d, cuda) in enumerate(zip(dims, schema.CUDA_MAX_BLOCK_DIMS)):
                    if d > cuda:
                        with ctx.at(f"[{axis}]"):
                            raise ctx.error(f["max_block_dims"].loc, f"block dimension {'xyz'[axis]} of {d} is more "
                                            f"than CUDA allows on any GPU ({cuda}; the limits are "
                                            f"{list(schema.CUDA_MAX_BLOCK_DIMS)})")
            with ctx.at("max_shared_mem_per_block_optin"):
                smem = _int(ctx, f["max_shared_mem_per_block_optin"], 0, 1 << 30)
            table: dict[str, int] = {"max_cluster_size": cluster_size_default(cc)}
            device_keys = (("sm_count", 1, 4096), ("max_threads_per_sm", 32, 1 << 16), ("max_blocks_per_sm", 1, 1024),
                           ("max_shared_mem_per_sm", 1, 1 << 30), ("reserved_shared_mem_per_block", 0, 1 << 20),
                           ("max_cluster_size", 1, None))
            for key_name, lo, hi in device_keys:
                if key_name in f:
                    with ctx.at(key_name):
                        table[key_name] = _int(ctx, f[key_name], lo, hi)
            defaulted = frozenset(k for k, _, _ in device_keys if k not in f)
            target = Target(name, key.loc, arch, cc, mtpb, (dims[0], dims[1], dims[2]), smem, **table,
                            build=_optional_build(ctx, f), defaulted=defaulted)
            _check_target_table(ctx, target, f)
            targets.append(target)
    if not targets:
        raise ctx.error(node.loc, "no targets defined")
    return tuple(sorted(targets, key=lambda t: t.name))


def _check_target_table(ctx: _Ctx, t: Target, f: Mapping[str, YNode]) -> None:
    """A target's limits must describe a GPU that can run a block: otherwise every plan on the
    target fails (no block fits an SM), and the error would name a module's example."""
    def at(key: str) -> SourceLoc:
        return f[key].loc if key in f else t.loc

    if t.max_threads_per_sm % 32:
        with ctx.at("max_threads_per_sm"):
            raise ctx.error(at("max_threads_per_sm"), f"{t.max_threads_per_sm} threads per SM is not a whole number "
                            "of 32-thread warps", "give the device's value, cudaDevAttrMaxThreadsPerMultiProcessor")
    if t.max_threads_per_block > t.max_threads_per_sm:
        key = "max_threads_per_sm" if "max_threads_per_sm" in f else "max_threads_per_block"
        with ctx.at(key):
            raise ctx.error(at(key), f"max_threads_per_block ({t.max_threads_per_block}) is more than "
                            f"max_threads_per_sm ({t.max_threads_per_sm}): no block of that size could run on an SM",
                            "give the device's values")
    if "max_shared_mem_per_sm" in f and t.smem_per_sm < t.max_shared_mem_per_block_optin \
            + t.reserved_shared_mem_per_block:
        with ctx.at("max_shared_mem_per_sm"):
            raise ctx.error(at("max_shared_mem_per_sm"), f"max_shared_mem_per_sm ({t.smem_per_sm}) is less than "
                            f"max_shared_mem_per_block_optin ({t.max_shared_mem_per_block_optin}) plus "
                            f"reserved_shared_mem_per_block ({t.reserved_shared_mem_per_block}): a block using the "
                            "opt-in limit could not run on an SM",
                            "give the device's values: cudaDevAttrMaxSharedMemoryPerMultiprocessor is the sum")
    if t.max_cluster_size > schema.PORTABLE_CLUSTER_SIZE:
        with ctx.at("max_cluster_size"):
            raise ctx.error(at("max_cluster_size"), f"max_cluster_size {t.max_cluster_size} is more than "
                            f"{schema.PORTABLE_CLUSTER_SIZE}, the portable cluster size the launchers use (they do "
                            "not opt in to non-portable cluster sizes, so no launch could use a larger cluster)",
                            f"write {schema.PORTABLE_CLUSTER_SIZE} or less")
    if t.max_cluster_size > 1 and t.compute_capability < (9, 0):
        with ctx.at("max_cluster_size"):
            raise ctx.error(at("max_cluster_size"), f"max_cluster_size {t.max_cluster_size} on compute capability "
                            f"{t.compute_capability[0]}.{t.compute_capability[1]}: thread-block clusters need "
                            "compute capability 9.0", "write 1, or leave max_cluster_size out: below 9.0 it is 1")


# ------------------------------------------------------------------ project

PROJECT_FILE = "project.yaml"


def load_project(path: Path, root: Path) -> Naming:
    """The project's names from ``specs/project.yaml``; kernelgen's own when the file is absent."""
    return load_project_file(path, root)[0]


# Packages a project's package would shadow (cuda: NVIDIA's cuda.* packages, such as the
# cuda.pathfinder that finds a toolkit installed from PyPI), besides the standard library's and
# the packages kernelgen itself needs.
SHADOWED_PACKAGES = ("kernelgen", "torch", "numpy", "pytest", "cuda", "cupy", "triton", "jax", "setuptools", "pip",
                     "yaml", "jinja2", "markupsafe", "pybind11", "scikit_build_core", "packaging", "cmake", "ninja")
# The C++ namespaces of the runtime's headers (kernelgen, where kernelgen_ops' own modules live,
# declares only Outcome, Plan and Sizes, which no module name can be).
RUNTIME_NAMESPACES = ("kg", "kg_abi")


def project_name_problem(key: str, value: str) -> tuple[str, str] | None:
    """What is wrong with ``value`` as the project's ``key`` (package, namespace, c_prefix or
    library in specs/project.yaml; ``kernelgen init --package`` checks its package with it too),
    as (message, hint); None when it can be used."""
    pattern = _MODULE if key == "package" else _IDENT
    if not pattern.fullmatch(value):
        return f"{value!r} is not a valid {key}", f"use letters, digits and '_' matching {pattern.pattern}"
    if key == "namespace" and value in RUNTIME_NAMESPACES:
        return (f"namespace '{value}' is kernelgen's runtime's own C++ namespace (its {value}:: names would meet the "
                "modules'"), "choose another name"
    if value in RESERVED - {"kg", "kernelgen"} or value.startswith("__"):
        return f"'{value}' is reserved and cannot be used as a {key}", "choose another name"
    if key == "package" and (value in SHADOWED_PACKAGES or value in sys.stdlib_module_names):
        what = ("a module of Python's standard library" if value in sys.stdlib_module_names else
                "the package of that name, which kernelgen or the GPU frameworks use")
        return f"package '{value}' would shadow {what}", "choose another name"
    return None


def load_project_file(path: Path, root: Path) -> tuple[Naming, Build]:
    """``specs/project.yaml``: the project's names (kernelgen's own when the file is absent) and
    its build settings."""
    if not path.exists() and not path.is_symlink():
        return NAMING_DEFAULT, Build()
    rel = relpath(path, root)
    node = load(rel, read_regular(path, root, MAX_SPEC_BYTES, "project file"))
    ctx = _Ctx(rel)
    if isinstance(node, YMap) and "module" in node.keys():
        raise ctx.error(node.loc, f"{rel} is the project file (package and naming), not a module spec",
                        "a module cannot be named 'project': rename the module")
    _version(ctx, node)
    f = _fields(ctx, node, schema.PROJECT)
    values: dict[str, str] = {}
    for key in ("package", "namespace", "c_prefix", "library"):
        if key not in f:
            continue
        with ctx.at(key):
            value = _str(ctx, f[key])
            problem = project_name_problem(key, value)
            if problem:
                raise ctx.error(f[key].loc, *problem)
            values[key] = value
    naming = Naming.for_package(values["package"], values.get("namespace"), values.get("c_prefix"),
                                values.get("library"))
    return naming, _optional_build(ctx, f)


# ------------------------------------------------------------------ modules


def specs_read(spec_dir: str = "specs") -> str:
    """What :func:`spec_files` reads, and how to keep a file out of it: for the messages about a
    spec's file name or place."""
    return (f"every .yaml file under {spec_dir}/, its subfolders included, is read as a module spec; to keep one "
            f"out, move it to a folder whose name starts with '.' ({spec_dir}/.archive/) or out of {spec_dir}/, or "
            "rename it to end in neither .yaml nor .yml (.yaml.old)")


def spec_files(spec_dir: Path, root: Path) -> list[Path]:
    """The module specs: every ``*.yaml`` under the spec directory and its subfolders (folders
    whose names start with '.' left out), but the registry and the project file at its top. Any
    other ending is left out, but for ``.yml`` and ``.YAML`` (errors: a spec misnamed)."""
    out: list[Path] = []
    shown = relpath(spec_dir, root)
    for folder, dirs, files in os.walk(spec_dir):
        here = Path(folder)
        for d in dirs:
            if Path(d).suffix.lower() in (".yaml", ".yml") and not d.startswith("."):
                raise SpecError(SourceLoc(relpath(here / d, root)), "", "the spec file is a directory",
                                f"a spec is a file; rename the folder ({specs_read(shown)})")
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = here / name
            suffix = path.suffix
            if suffix.lower() in (".yaml", ".yml") and suffix != ".yaml":
                beside = (here / f"{path.stem}.yaml").exists()
                raise SpecError(SourceLoc(relpath(path, root)), "", f"spec files must end in .yaml, not {suffix}"
                                + (f", and {path.stem}.yaml is beside it" if beside else ""),
                                (f"remove or rename one of the two ({specs_read(shown)})" if beside else
                                 f"rename it to {path.stem}.yaml ({specs_read(shown)})"))
            if suffix != ".yaml":
                continue
            if name in ("targets.yaml", PROJECT_FILE):
                if here == spec_dir:
                    continue
                raise SpecError(SourceLoc(relpath(path, root)), "",
                                f"{name} belongs directly in {shown}/, not in a subfolder",
                                f"move it up, or rename it if it is a module spec ({specs_read(shown)})")
            out.append(path)
    return sorted(out)


@collection_paused
def load_catalog(root: Path, spec_dir: Path | None = None) -> Catalog:
    """Load ``specs/targets.yaml`` and every module spec under the spec directory."""
    root = root.resolve()
    spec_dir = (spec_dir or root / "specs").resolve()
    targets = load_targets(spec_dir / "targets.yaml", root)
    naming, build = load_project_file(spec_dir / PROJECT_FILE, root)
    paths = spec_files(spec_dir, root)
    # Every spec file is loaded, and their errors reported together (SpecErrors).
    errors: list[SpecError] = []
    modules = []
    for path in paths:
        try:
            modules.append(load_module(path, root, targets, build, naming.package, spec_dir))
        except SpecError as exc:
            errors.append(exc)
    seen: dict[str, Module] = {}
    switches: dict[str, Module] = {}
    for m in modules:
        if m.name in seen:
            errors.append(SpecError(m.loc, "module", f"module '{m.name}' is also defined in {seen[m.name].path}",
                                    f"module names are unique across {relpath(spec_dir, root)}/ and its subfolders: "
                                    f"{specs_read(relpath(spec_dir, root))}"))
            continue
        seen[m.name] = m
        if m.kill_switch is None:
            continue
        other = switches.setdefault(m.kill_switch, m)
        if other is not m and not (m.kill_switch_shared and other.kill_switch_shared):
            errors.append(SpecError(m.kill_switch_loc or m.loc, "kill_switch",
                                    f"kill switch {m.kill_switch} is also the kill switch of module '{other.name}' "
                                    f"({other.path})",
                                    "give each module its own, or declare kill_switch_shared: true in both"))
    raise_collected(errors)
    catalog = Catalog(targets, tuple(sorted(modules, key=lambda m: m.name)), naming, build)
    _check_defines(catalog)
    catalog = _expand_dispatchers_in_chains(catalog)
    check_fallbacks(catalog)
    from kernelgen.emit import check_paths  # the emitters' file names (emit imports this module's users)
    from kernelgen.emit.rust import check_names as check_rust_names

    check_paths(catalog)
    check_rust_names(catalog)  # the Rust crate's item names (a module `code`, structs a_b1 and a_b_1)
    # The checks generation makes on top of the loader's (the test-case search, whole
    # clusters), so that every command accepts and rejects the same specs.
    check_catalog(catalog)
    return catalog


def _version(ctx: _Ctx, node: YNode) -> int:
    """The file's ``version`` (checked before anything else: other versions may have other keys)."""
    if not isinstance(node, YMap):
        return schema.DEFAULT_VERSION
    supported = ", ".join(str(v) for v in schema.SUPPORTED_VERSIONS)
    for key, value in node.items:
        if key.value != schema.VERSION.name:
            continue
        with ctx.at(schema.VERSION.name):
            if not isinstance(value, YScalar) or isinstance(value.value, bool) or not isinstance(value.value, int):
                raise ctx.error(
                    value.loc, f"expected an integer format version, got {_kind(value)}",
                    f"supported versions: {supported}; write version: {schema.DEFAULT_VERSION} or leave it out",
                )
            if value.value > max(schema.SUPPORTED_VERSIONS):
                raise ctx.error(
                    value.loc, f"spec format version {value.value} is not supported by this kernelgen: the file is "
                               "written for a newer kernelgen",
                    f"supported versions: {supported}; upgrade kernelgen to one that reads version {value.value}, or "
                    f"write the file in version {max(schema.SUPPORTED_VERSIONS)}'s format: see docs/spec-format.md, "
                    "Versions",
                )
            if value.value not in schema.SUPPORTED_VERSIONS:
                raise ctx.error(
                    value.loc, f"spec format version {value.value} is not supported by this kernelgen",
                    f"supported versions: {supported}; write version: {schema.DEFAULT_VERSION} or leave it out",
                )
            return value.value
    return schema.DEFAULT_VERSION


# The kernels one fallback chain tries, once each instantiated kernel it names stands for its instances.
MAX_CHAIN_LAUNCHES = 64


def _expand_dispatchers_in_chains(catalog: Catalog) -> Catalog:
    """A chain member naming an instantiated kernel stands for its instances, in order."""
    modules = []
    for m in catalog.modules:
        chains = []
        for fb in m.fallbacks:
            members: list[KernelRef] = []
            for ref in fb.members:
                owner = catalog.module(ref.module)
                d = owner.dispatch(ref.kernel) if owner is not None else None
                members.extend(replace(r, loc=ref.loc) for r in d.members) if d else members.append(ref)
            if len(members) > MAX_CHAIN_LAUNCHES:
                raise SpecError(fb.loc, f"fallbacks.{fb.name}",
                                f"the chain tries {len(members)} kernels once its instantiated kernels stand for their "
                                f"instances; the limit is {MAX_CHAIN_LAUNCHES}",
                                "name fewer instantiated kernels in it, or give them fewer instantiations")
            names = [r.qualname for r in members]
            for i, r in enumerate(members):
                if r.qualname in names[:i]:
                    raise SpecError(r.loc, f"fallbacks.{fb.name}", f"kernel {r.qualname} appears twice in the chain",
                                    "an instantiated kernel stands for all of its instances")
            chains.append(replace(fb, members=tuple(members)))
        modules.append(replace(m, fallbacks=tuple(chains)))
    return replace(catalog, modules=tuple(modules))


def kill_switch_problem(name: str) -> str | None:
    """Why ``name`` cannot be a module's kill switch (not an environment variable name, or one
    that ordinary environments set), or None when it can."""
    if not _ENV.fullmatch(name):
        return "not a valid environment variable name"
    return _common_env(name)


def kill_switch_example(package: str, module: str) -> str:
    """A kill switch named after the project's package and the module (``MYPKG_NO_ATTN``; where
    the package's name starts like variables ordinary environments set, as ``cuda_ops`` does,
    ``NO_CUDA_OPS_ATTN`` or ``DISABLE_CUDA_OPS_ATTN``), which :func:`kill_switch_problem`
    accepts; ``<PACKAGE>_NO_<MODULE>`` for a project without a package of its own, whose name
    would be kernelgen's."""
    upper = re.sub(r"[^A-Z0-9_]", "_", module.upper())
    if not package or package == NAMING_DEFAULT.package:
        return f"<PACKAGE>_NO_{upper}"
    pkg = re.sub(r"[^A-Z0-9_]", "_", package.upper())
    for text in (f"{pkg}_NO_{upper}", f"NO_{pkg}_{upper}", f"DISABLE_{pkg}_{upper}"):
        if kill_switch_problem(text) is None:
            return text
    return f"<PACKAGE>_NO_{upper}"


def load_module(path: Path, root: Path, targets: tuple[Target, ...], project_build: Build | None = None,
                package: str = "", spec_dir: Path | None = None) -> Module:
    """One module spec; ``project_build`` is the project's build settings (specs/project.yaml),
    whose include folders, with the targets' and the module's, find the files a struct's
    ``header`` includes; ``package`` the project's package, for the examples of names;
    ``spec_dir`` the folder of the specs (``root/specs`` by default), for messages."""
    rel = relpath(path, root)
    node = load(rel, read_regular(path, root, MAX_SPEC_BYTES))
    ctx = _Ctx(rel)
    _version(ctx, node)
    f = _fields(ctx, node, schema.MODULE)
    with ctx.at("module"):
        name = _ident(ctx, f["module"].loc, _str(ctx, f["module"]), "module name", _MODULE)
        if path.stem != name:
            raise ctx.error(f["module"].loc, f"module '{name}' must be defined in {name}.yaml, not {path.name}",
                            f"rename the file or the module; {specs_read(relpath(spec_dir or root / 'specs', root))}")
        if name in PACKAGE_NAMES:
            raise ctx.error(f["module"].loc, f"module '{name}' would be hidden by the package's own attribute {name}",
                            "choose another name")
        clash = next((t for t in targets if t.name == name), None)
        if clash is not None:
            raise ctx.error(f["module"].loc, f"module '{name}' has the name of a target (line {clash.loc.line} "
                                             f"of specs/targets.yaml): <package>.{name} is the target's package",
                            "choose another name")
    with ctx.at("summary"):
        summary = _text(ctx, f["summary"], one_line=True, summary=True)
    doc = ""
    if "doc" in f:
        with ctx.at("doc"):
            doc = _text(ctx, f["doc"], one_line=False)
    with ctx.at("sources"):
        sources = tuple(_list(ctx, f["sources"], lambda n: _source(ctx, n, root)))
        if not sources:
            raise ctx.error(f["sources"].loc, "at least one source file is needed")
        if len(set(sources)) != len(sources):
            dup = next(s for i, s in enumerate(sources) if s in sources[:i])
            raise ctx.error(f["sources"].loc, f"source {dup} is listed twice (after normalising the paths)")
    ctx.sources = [(s, (root / s).read_text(encoding="utf-8", errors="replace")) for s in sources]
    ctx.root = root
    kill = None
    if "kill_switch" in f:
        with ctx.at("kill_switch"):
            kill = _str(ctx, f["kill_switch"], "an environment variable name")
            example = kill_switch_example(package, name)
            if not _ENV.fullmatch(kill):
                raise ctx.error(
                    f["kill_switch"].loc, f"{kill!r} is not a valid environment variable name",
                    f"use upper-case letters, digits and '_', e.g. {example}",
                )
            why = _common_env(kill)
            if why:
                raise ctx.error(f["kill_switch"].loc, f"kill switch {kill} is {why}, so the module would never "
                                "launch where it is set", f"name it after the project and the module, e.g. {example}")
    shared = False
    if "kill_switch_shared" in f:
        with ctx.at("kill_switch_shared"):
            shared = _bool(ctx, f["kill_switch_shared"])
            if shared and kill is None:
                raise ctx.error(f["kill_switch_shared"].loc, "kill_switch_shared without a kill_switch")
    constants: dict[str, int] = {}
    if "constants" in f:
        with ctx.at("constants"):
            constants = _constants(ctx, f["constants"])
    build = _optional_build(ctx, f)
    layers = (build, *(t.build for t in targets), project_build or Build())
    dirs = list(dict.fromkeys(d for layer in layers for d, _ in layer.include_dirs))
    ctx.include_dirs = dirs
    structs: tuple[Struct, ...] = ()
    if "structs" in f:
        with ctx.at("structs"):
            structs = _structs(ctx, f["structs"], root, name, dirs)
        ctx.structs = {st.name: st for st in structs}
    with ctx.at("kernels"):
        kn = _filled(ctx, f["kernels"], YMap, "a mapping of kernel names to kernels",
                     "e.g. kernels: {scale: {summary: ..., args: ..., grid: ..., block: ..., examples: ...}}",
                     optional=False)
        kernels: list[Kernel] = []
        dispatches: list[Fallback] = []
        target_names = [t.name for t in targets]
        effective: dict[str, YMap] = {}  # each kernel's entries after 'extends'
        owner: dict[str, tuple[str, SourceLoc]] = {}  # launcher name -> what defines it, where
        # The first error of each kernel (an instantiated one: of all its instances), reported
        # together before the module's own checks, which need every kernel.
        errors: dict[str, SpecError] = {}
        for key, value in kn.items:
            try:
                kname = _ident(ctx, key.loc, key.value, "kernel name")
                with ctx.at(kname):
                    ctx.dropped = _dropped_arguments(ctx, value, effective, kname)
                    value = _extend(ctx, value, effective, kname)
                    effective[kname] = value
                    if "instantiate" not in value.keys():
                        _claim(ctx, owner, kname, f"kernel '{kname}'", key.loc)
                        kernels.append(_kernel(ctx, kname, key.loc, value, constants, target_names, targets))
                        continue
                    instances, dispatch = _instances(ctx, name, kname, key.loc, value, constants, target_names,
                                                     targets)
                    _claim(ctx, owner, kname, f"kernel '{kname}'", key.loc)
                    for k in instances:
                        _claim(ctx, owner, k.name, f"instantiation '{k.name}' of '{kname}'", dispatch.loc)
                    kernels.extend(instances)
                    dispatches.append(dispatch)
            except SpecError as exc:
                errors.setdefault(str(key.value), exc)
        ctx.dropped = {}
        checked = []
        for k in kernels:
            spec_name = k.instance_of or k.name
            if spec_name in errors:
                continue
            try:
                k, bounded_by = _check_sources(ctx, k)
                _check_launch_bounds(ctx, k, constants, bounded_by)
                checked.append(k)
            except SpecError as exc:
                errors.setdefault(spec_name, exc)
        order = {str(key.value): i for i, (key, _) in enumerate(kn.items)}
        raise_collected([errors[n] for n in sorted(errors, key=lambda n: order.get(n, len(order)))])
        kernels = checked
    names = {k.name for k in kernels} | {d.name for d in dispatches}
    for c in constants:
        if c in names:
            where = next((k.loc for k in (*kernels, *dispatches) if k.name == c), None)
            raise SpecError(ctx.constant_locs.get(c, f["constants"].loc), f"constants.{c}",
                            f"constant '{c}' has the name of kernel '{c}'" + (f" (line {where.line})" if where else ""),
                            f"rename one of them: the constant (and the expressions that use it), or the kernel, "
                            f"keeping the __global__ function it launches with symbol: {c} unless it gives symbol "
                            "already")
    fallbacks: list[Fallback] = []
    if "fallbacks" in f:
        with ctx.at("fallbacks"):
            fallbacks = _fallbacks(ctx, f["fallbacks"], name, names)
    _check_public_names(ctx, f, kernels, dispatches, fallbacks, constants, structs)
    return Module(
        name, rel, f["module"].loc, summary, sources, kill, tuple(sorted(constants.items())),
        tuple(kernels), tuple(fallbacks), tuple(dispatches), doc,
        kill_switch_shared=shared, kill_switch_loc=f["kill_switch"].loc if kill else None, structs=structs,
        build=build,
    )


# What the kernelgen_ops package defines (functions and the modules it imports):
# kernelgen_ops.<name> must reach a target package or a module of the chosen target.
PACKAGE_NAMES = frozenset(
    "annotations available_targets built_targets importlib os refresh set_strict strict target".split()
)

# Attributes every generated Python module has besides its launchers.
MODULE_ATTRIBUTES = ("TARGET", "KILL_SWITCH", "PLAN_DIGEST")


def _check_public_names(ctx: _Ctx, f: Mapping[str, YNode], kernels: list[Kernel], dispatches: list[Fallback],
                        fallbacks: list[Fallback], constants: Mapping[str, int], structs: tuple[Struct, ...] = ()
                        ) -> None:
    """The names a module defines in its Python module (launchers, their ``plan_<name>``
    aliases, TARGET, KILL_SWITCH, PLAN_DIGEST, the struct types of its stub) and its C++ namespace
    (launchers, ``plan_<name>`` and ``sizes_<name>`` functions, constants) are distinct."""
    taken: dict[str, tuple[str, SourceLoc]] = {a: (f"the module attribute {a}", f["module"].loc)
                                               for a in MODULE_ATTRIBUTES}
    launchers = [(k.name, k.loc, "kernel") for k in kernels]
    launchers += [(d.name, d.loc, "instantiated kernel") for d in dispatches]
    launchers += [(c.name, c.loc, "fallback chain") for c in fallbacks]
    # (the name, where, what it is, how to rename the spec's name where it clashes with kernelgen's)
    hints = {"kernel": "kernel name"}
    entries = [(n, loc, f"{what} '{n}'", rename_hint(hints.get(what, ""), n)) for n, loc, what in launchers]
    entries += [(f"plan_{n}", loc, f"the plan function of {what} '{n}'", rename_hint(hints.get(what, ""), n))
                for n, loc, what in launchers]
    entries += [(f"sizes_{n}", loc, f"the C++ sizes function of {what} '{n}'", rename_hint(hints.get(what, ""), n))
                for n, loc, what in launchers]
    cloc = f["constants"].loc if "constants" in f else f["module"].loc
    entries += [(c, cloc, f"constant '{c}'", "choose another name") for c in constants]
    entries += [(st.name, st.loc, f"struct '{st.name}'", rename_hint("struct name", st.name)) for st in structs]
    for n, loc, what, rename in entries:
        if n in taken:
            other, where = taken[n]
            own = n in MODULE_ATTRIBUTES and other == f"the module attribute {n}"
            raise ctx.error(loc, f"{what} is named '{n}' in the generated module, which is also {other} "
                                 f"(line {where.line})", rename if own else "rename one of them")
        taken[n] = (what, loc)


# A launcher of the Python bindings takes at most this many arguments (kMaxArgs of the runtime):
# a kernel's, and a chain's or dispatcher's (the union of its members' arguments).
MAX_LAUNCHER_ARGS = 64
# Bytes of struct arguments one launcher of the Python bindings takes, each struct at its
# alignment (kMaxStructBytes of the runtime).
MAX_LAUNCHER_STRUCT_BYTES = 8192
# Bytes of a kernel's parameters (its args, then its tensor maps) CUDA accepts: 32764 since
# CUDA 12.1 on every architecture CUDA 13 compiles for (Volta and newer; older toolkits: 4096).
MAX_PARAM_BYTES = 32764
# A CUtensorMap parameter: 128 bytes, aligned to 64.
TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN = 128, 64


def _check_arg_limits(ctx: _Ctx, f: Mapping[str, YNode], args: Sequence[Arg], host_args: Sequence[Arg]) -> None:
    """The bindings' argument count and struct bytes."""
    if len(args) + len(host_args) > MAX_LAUNCHER_ARGS:
        where = f["host_args"] if host_args else f["args"]
        raise ctx.error(where.loc, f"{len(args) + len(host_args)} arguments; a launcher takes at most "
                                   f"{MAX_LAUNCHER_ARGS}", "pass related values in one device array")
    n = launcher_struct_bytes([*args, *host_args])
    if n > MAX_LAUNCHER_STRUCT_BYTES:
        with ctx.at("args"):
            raise ctx.error(f["args"].loc, f"struct arguments of {n} bytes; a launcher takes at most "
                                           f"{MAX_LAUNCHER_STRUCT_BYTES}",
                            "pass large structs through a device pointer to them")


def _laid_out(items: Iterable[tuple[int, int]]) -> int:
    """Bytes of (size, alignment) items placed one after the other, each at its alignment."""
    n = 0
    for size, align in items:
        n = -(-n // align) * align + size
    return n


def launcher_struct_bytes(args: Sequence[Arg]) -> int:
    """Bytes the struct arguments of a launcher taking ``args`` fill in the runtime's buffer, in
    order, each at its alignment (a stateless struct is no argument of the launcher)."""
    return _laid_out((a.struct.size, a.struct.align) for a in args if a.struct is not None and not a.implicit)


def param_bytes(args: Sequence[Arg], tensor_maps: int) -> int:
    """Bytes of a kernel's parameters as CUDA lays them out: its kernel arguments in order (a
    pointer 8 bytes, a scalar its size, a struct its size, each at its alignment), then
    ``tensor_maps`` CUtensorMap parameters."""
    def param(a: Arg) -> tuple[int, int]:
        if a.struct is not None:
            return a.struct.size, a.struct.align
        size = max(1, a.scalar.bits // 8) if a.scalar is not None else 8
        return size, size

    return _laid_out([*(param(a) for a in args if not a.host),
                      *[(TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN)] * tensor_maps])


def _claim(ctx: _Ctx, owner: dict[str, tuple[str, SourceLoc]], name: str, what: str, loc: SourceLoc) -> None:
    """Registers a launcher name; a name already taken is an error naming both places."""
    if name in owner:
        other, where = owner[name]
        raise ctx.error(loc, f"{what} is named '{name}', which is also the name of {other} (line {where.line})",
                        "rename one of them, or give 'instance_name' a pattern that avoids it")
    owner[name] = (what, loc)


def _dropped_arguments(ctx: _Ctx, node: YNode, effective: Mapping[str, YMap], name: str) -> dict[str, tuple[str, str]]:
    """For a kernel that extends another and gives ``args`` or ``host_args`` of its own (which
    replace the inherited ones whole): the inherited argument names it leaves out, each with
    the kernel it extends and the key; records the kernel in ``ctx.args_over`` where it gives
    ``args``. Empty for any other kernel."""
    if not isinstance(node, YMap):
        return {}
    own = dict(zip(node.keys(), node.items))
    base_node = own.get("extends", (None, None))[1]
    if not isinstance(base_node, YScalar) or not isinstance(base_node.value, str) or base_node.value not in effective:
        return {}
    base = base_node.value
    if "args" in own:
        ctx.args_over[name] = base
    inherited = dict(zip(effective[base].keys(), effective[base].items))
    out: dict[str, tuple[str, str]] = {}
    for key in ("args", "host_args"):
        if key not in own or key not in inherited:
            continue
        mine, theirs = own[key][1], inherited[key][1]
        kept = set(mine.keys()) if isinstance(mine, YMap) else set()
        if isinstance(theirs, YMap):
            out.update({str(n): (base, key) for n in theirs.keys() if n not in kept})
    return out


def _extend(ctx: _Ctx, node: YNode, effective: Mapping[str, YMap], name: str = "") -> YMap:
    """A kernel's entries with ``extends: BASE`` applied: BASE's entries (after its own
    ``extends``), each replaced whole by the kernel's entry of the same key; an entry whose
    value is null removes an inherited optional key."""
    if not isinstance(node, YMap):
        raise ctx.error(node.loc, f"expected a mapping, got {_kind(node)}")
    own = dict(zip(node.keys(), node.items))
    if "extends" not in own:
        keys = schema.KERNEL.required() | schema.KERNEL.optional()
        for k, (_, value) in own.items():
            if isinstance(value, YScalar) and value.value is None and k in keys:
                with ctx.at(k):
                    raise ctx.error(value.loc, "null removes an inherited key; this kernel has no 'extends'")
        return node
    _, base_node = own.pop("extends")
    with ctx.at("extends"):
        base = _str(ctx, base_node, "the name of a kernel defined above")
        if base == name:
            raise ctx.error(base_node.loc, f"kernel '{name}' extends itself",
                            "'extends' names another kernel, defined earlier in the file")
        if base not in effective:
            raise ctx.error(base_node.loc, f"no kernel '{base}' is defined above this one",
                            did_you_mean(base, list(effective)) or "'extends' names a kernel earlier in the file")
    items = {k: item for k, item in zip(effective[base].keys(), effective[base].items)}
    keys = schema.KERNEL.required() | schema.KERNEL.optional()
    for k, item in own.items():
        if isinstance(item[1], YScalar) and item[1].value is None:
            if k not in keys:  # a misspelt key would remove nothing and leave the inherited one
                with ctx.at(k):
                    raise ctx.error(item[0].loc, "unknown key",
                                    _MISPLACED.get((schema.KERNEL.name, k)) or did_you_mean(k, keys))
            if k in schema.KERNEL.required():
                with ctx.at(k):
                    raise ctx.error(item[1].loc, f"'{k}' is required and cannot be removed")
            items.pop(k, None)
        else:
            items[k] = item
    return YMap(node.loc, tuple(items.values()))


def _instantiate(ctx: _Ctx, node: YNode, constants: Mapping[str, int]) -> tuple[list[Axis], list[tuple]]:
    """The axes of ``instantiate`` and its combinations of their values, in order: a mapping of
    axis names to lists of values gives every combination (the first axis outermost); a list of
    mappings, each giving every axis one value, gives those combinations only."""
    if isinstance(node, YSeq):
        return _instantiate_list(ctx, node, constants)
    node = _filled(ctx, node, YMap, "a mapping of axis names to lists of values, or a list of combinations",
                   "e.g. {T: [f32, bf16], TILE: [64, 128]}, or [{T: f32, TILE: 64}, {T: bf16, TILE: 128}] for "
                   "those combinations only")
    axes = []
    for key, value in node.items:
        name = _axis_name(ctx, key, constants)
        with ctx.at(name):
            value = _filled(ctx, value, YSeq, "a list of element types, integers, true/false or enumerators",
                            "e.g. T: [f32, bf16] or TILE: [64, 128]", optional=False)
            vals: list[str | int] = []
            for i, item in enumerate(value.items):
                with ctx.at(f"[{i}]"):
                    v = _axis_value(ctx, item)
                    _same_axis_kind(ctx, item, v, vals)
                    if any(_axis_text(v, "cpp") == _axis_text(w, "cpp") for w in vals):
                        raise ctx.error(item.loc, f"{_axis_text(v, 'spec')} is listed twice")
                    vals.append(v)
            axes.append(Axis(name, tuple(vals), _axis_kind(vals[0]) == "type", key.loc))
    return axes, list(itertools.product(*(a.values for a in axes)))


def _axis_name(ctx: _Ctx, key: YScalar, constants: Mapping[str, int]) -> str:
    name = _ident(ctx, key.loc, key.value, "axis name")
    if name in constants:
        with ctx.at(name):
            raise ctx.error(key.loc, f"axis '{name}' has the name of a constant (line "
                            f"{ctx.constant_locs[name].line})", "rename one of them")
    return name


def _same_axis_kind(ctx: _Ctx, item: YNode, v: str | int, vals: Sequence[str | int]) -> None:
    if vals and _axis_kind(v) != _axis_kind(vals[0]):
        raise ctx.error(item.loc, f"an axis holds one kind of value: this one holds "
                        f"{_AXIS_KINDS[_axis_kind(vals[0])]}, not {_axis_text(v, 'spec')}")


def _instantiate_list(ctx: _Ctx, node: YSeq, constants: Mapping[str, int]) -> tuple[list[Axis], list[tuple]]:
    """``instantiate: [{T: f32, TILE: 64}, {T: bf16, TILE: 128}]``: those combinations, in order;
    each axis's values are those the combinations give it, in first-seen order."""
    if not node.items:
        raise ctx.error(node.loc, "expected at least one combination",
                        "e.g. [{T: f32, TILE: 64}, {T: bf16, TILE: 128}]")
    names: list[str] = []
    locs: dict[str, SourceLoc] = {}
    values: dict[str, list[str | int]] = {}
    combos: list[tuple] = []
    seen: dict[tuple, int] = {}
    for i, item in enumerate(node.items):
        with ctx.at(f"[{i}]"):
            item = _filled(ctx, item, YMap, "a mapping of axis names to one value each",
                           "e.g. {T: f32, TILE: 64}", optional=False)
            given = {}
            for key, value in item.items:
                name = _axis_name(ctx, key, constants)
                if i == 0:
                    names.append(name)
                    locs[name] = key.loc
                    values[name] = []
                elif name not in values:
                    raise ctx.error(key.loc, f"axis '{name}' is not in the first combination ({', '.join(names)})",
                                    "every combination gives the same axes")
                with ctx.at(name):
                    if isinstance(value, YSeq):
                        raise ctx.error(value.loc, "a combination gives each axis one value, not a list",
                                        "list each combination as its own entry, or write instantiate as a "
                                        "mapping of axes to lists for every combination of them")
                    v = _axis_value(ctx, value)
                    _same_axis_kind(ctx, value, v, values[name])
                given[name] = v
            missing = [n for n in names if n not in given]
            if missing:
                raise ctx.error(item.loc, f"the combination gives no value to axis '{missing[0]}'",
                                f"every combination gives the same axes ({', '.join(names)})")
            combo = tuple(given[n] for n in names)
            key = tuple(_axis_text(v, "cpp") for v in combo)
            if key in seen:
                raise ctx.error(item.loc, f"this combination is combination {seen[key]} again", "list it once")
            seen[key] = i
            combos.append(combo)
            for n in names:
                if all(_axis_text(given[n], "cpp") != _axis_text(w, "cpp") for w in values[n]):
                    values[n].append(given[n])
    axes = [Axis(n, tuple(values[n]), _axis_kind(values[n][0]) == "type", locs[n]) for n in names]
    return axes, combos


_AXIS_KINDS = {"type": "element types", "int": "integers", "bool": "booleans", "enumerator": "enumerators"}


def _axis_value(ctx: _Ctx, item: YNode) -> str | int:
    """One value of an ``instantiate`` axis: an element type, a 32-bit integer, a boolean, or an
    enumerator's qualified C++ name (``Act::Relu``)."""
    v = item.value if isinstance(item, YScalar) else None
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        if not -(1 << 31) <= v < (1 << 31):
            raise ctx.error(item.loc, f"{v} is out of range for an integer axis (32-bit)")
        return v
    if not isinstance(v, str):
        raise ctx.error(item.loc, f"expected an element type, an integer, true/false or an enumerator, got "
                        f"{_kind(item)}", "e.g. T: [f32, bf16], TILE: [64, 128], HAS_BIAS: [true, false], "
                        "ACT: [Act::Relu, Act::Gelu]")
    if "::" in v:
        bad = next((w for w in v.removeprefix("::").split("::") if w in CPP_KEYWORDS), None)
        if not schema.ENUMERATOR_RE.fullmatch(v) or bad is not None:
            raise ctx.error(item.loc, f"{v!r} is not an enumerator's qualified name" + (
                f" ('{bad}' is a C++ keyword)" if bad else ""), "e.g. Act::Relu or ns::Act::Relu, as the sources "
                "spell it from the global namespace")
        return v
    if v not in SPEC_ELEMS or SPEC_ELEMS[v].any_dtype:
        if v in SPEC_ELEMS:
            raise ctx.error(item.loc, "'void' cannot be a type axis value (void* takes arrays of any dtype)")
        hint = name_hint(v, list(SPEC_ELEMS))
        if re.fullmatch(r"[A-Za-z_]\w*", v) and "did you mean" not in hint:
            hint = f"an enumerator is written with its enum's name (Act::{v} for enum class Act); {hint}"
        raise ctx.error(item.loc, f"unknown element type '{v}'", hint)
    return v


def _axis_kind(v: str | int) -> str:
    """What an ``instantiate`` value is: "bool", "int", "enumerator" (a qualified C++ name) or
    "type" (an element type)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    return "enumerator" if "::" in v else "type"


def _axis_text(v: str | int, form: str) -> str:
    """An ``instantiate`` value as ``form`` spells it: "cpp" in a symbol (``true``, ``64``,
    ``Act::Relu``, ``__nv_bfloat16``), "spec" in argument types and messages (``bf16``), "name" in
    instance names (``true``, ``64``, ``m1`` for -1: a name has no '-', ``Relu``: an enumerator's
    own name, ``bf16``)."""
    kind = _axis_kind(v)
    if kind == "bool":
        return "true" if v else "false"
    if kind == "int":
        return f"m{-int(v)}" if form == "name" and int(v) < 0 else str(v)
    assert isinstance(v, str)
    if kind == "enumerator":
        return v.rsplit("::", 1)[-1] if form == "name" else v
    return ELEMS[v].cpp if form == "cpp" else v


def _integer_axes(axes: Mapping[str, str | int]) -> dict[str, int]:
    """The axes that are constants of an instance in its expressions: integers, and booleans as 0
    and 1 (as bool arguments are)."""
    return {n: int(v) for n, v in axes.items() if _axis_kind(v) in ("int", "bool")}


def _instances(
    ctx: _Ctx, module: str, name: str, loc: SourceLoc, node: YMap, constants: dict[str, int],
    target_names: list[str], targets: tuple[Target, ...],
) -> tuple[list[Kernel], Fallback]:
    """The instances of an instantiated kernel, in the matrix's order (the first axis
    outermost), and its dispatching launcher."""
    f = dict(zip(node.keys(), (v for _, v in node.items)))
    with ctx.at("instantiate"):
        axes, combos = _instantiate(ctx, f["instantiate"], constants)
    for a in axes:
        if not a.is_type and not _axis_used(node, a.name):
            with ctx.at("instantiate"), ctx.at(a.name):
                raise ctx.error(a.loc, f"axis '{a.name}' is used nowhere (not in the symbol, the variants or an "
                                "expression): its instantiations would be the same launcher",
                                f"write it where the instances differ, e.g. symbol: my_kernel<{{{a.name}}}> or an "
                                f"expression over {a.name}; or remove the axis")
    if len(combos) > MAX_INSTANCES:
        with ctx.at("instantiate"):
            raise ctx.error(f["instantiate"].loc, f"{len(combos)} instantiations; the limit is {MAX_INSTANCES}")
    pattern = None
    if "instance_name" in f:
        with ctx.at("instance_name"):
            pattern = _str(ctx, f["instance_name"], "a name pattern such as gemv_{T}_t{TILE}")
    instances = []
    seen: dict[str, tuple] = {}
    for combo in combos:
        values = {a.name: v for a, v in zip(axes, combo)}
        if pattern is None:
            iname = "_".join([name, *(_axis_text(v, "name") for v in combo)])
        else:
            with ctx.at("instance_name"):
                iname = _subst(ctx, f["instance_name"].loc, pattern, values, cpp=False)
        with ctx.at("instance_name" if pattern else "instantiate"):
            where = f["instance_name" if pattern else "instantiate"].loc
            _ident(ctx, where, iname, "instance name")
            if iname in seen:
                shown = [", ".join(_axis_text(v, "spec") for v in c) for c in (seen[iname], combo)]
                raise ctx.error(where, f"instantiations ({shown[0]}) and ({shown[1]}) are both named '{iname}'",
                                "put every axis in the pattern" if pattern is None else "put every axis in the "
                                "pattern (an enumerator is named by its own name, without its enum's)")
        seen[iname] = combo
        shown = ", ".join(f"{k}={_axis_text(v, 'spec')}" for k, v in values.items())
        with ctx.at(f"<{shown}>"):
            k = _kernel(ctx, iname, loc, node, constants, target_names, targets, values)
        instances.append(replace(k, instance_of=name, axis_values=tuple(values.items())))
    type_axes = []
    for a in axes:
        if not a.is_type:
            continue
        governed = []
        for hn in (f.get("args"), f.get("host_args")):
            if isinstance(hn, YMap):
                for key, value in hn.items:
                    t = value
                    if isinstance(value, YMap):
                        t = dict(zip(value.keys(), (v for _, v in value.items))).get("type", value)
                    if isinstance(t, YScalar) and isinstance(t.value, str) and f"{{{a.name}}}" in t.value \
                            and t.value.rstrip().endswith("*"):  # the arrays that pick the instance
                        governed.append(str(key.value))
        if not governed:
            with ctx.at("instantiate"):
                raise ctx.error(a.loc, f"type axis '{a.name}' is used by no pointer argument type",
                                f"write an argument's type as 'const {{{a.name}}}*' (the arrays passed pick the "
                                "instance; a scalar may be '{T}' too), or make it an integer axis")
        type_axes.append((a.name, tuple(governed)))
    refs = tuple(KernelRef(module, k.name, loc) for k in instances)
    return instances, Fallback(name, loc, refs, dispatch=True, axes=tuple(axes), type_axes=tuple(type_axes))


# Kernel keys whose text never makes instances differ: free text, names, the examples.
_AXIS_INERT_KEYS = frozenset({"summary", "doc", "instantiate", "instance_name", "examples", "targets", "extends"})


def _axis_used(node: YMap, name: str) -> bool:
    """Whether a kernel's entries use the non-type axis ``name``: as a ``{name}`` placeholder (a
    symbol, the variants) or as a name in an expression."""
    token = re.compile(rf"\{{{name}\}}|(?<![\w.]){name}(?!\w)")

    def used(n: YNode) -> bool:
        if isinstance(n, YScalar):
            return isinstance(n.value, str) and token.search(n.value) is not None
        if isinstance(n, YSeq):
            return any(used(i) for i in n.items)
        return any(used(k) or used(v) for k, v in n.items)

    return any(used(v) for k, v in node.items if str(k.value) not in _AXIS_INERT_KEYS)


def _subst(ctx: _Ctx, loc: SourceLoc, text: str, axes: Mapping[str, str | int], cpp: bool) -> str:
    """``text`` with each ``{AXIS}`` replaced by the instance's value: an integer in decimal, a
    boolean as ``true``/``false``, an enumerator by its qualified name (``cpp``) or its own name,
    an element type by its C++ spelling (``cpp``) or its spec name (see ``_axis_text``)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in axes:
            if not axes:
                raise ctx.error(loc, f"placeholder {{{name}}} outside an instantiated kernel",
                                f"declare the axis under 'instantiate', e.g. instantiate: {{{name}: [f32, bf16]}}")
            raise ctx.error(loc, f"unknown placeholder {{{name}}}", did_you_mean(name, list(axes)))
        return _axis_text(axes[name], "cpp" if cpp else "name")

    return _PLACEHOLDER.sub(one, text)


def _source_path_problem(s: str) -> str | None:
    """What keeps ``s`` from being a source path (None: nothing): sources are relative paths of
    letters, digits, '_', '-', '.' and '/', as the launchers' #include lines and CMake's lists
    take them."""
    if s.startswith("/") or re.match(r"[A-Za-z]:[\\/]", s):
        return "it is an absolute path; sources are relative to the project root"
    if s.startswith("./"):
        return "write it without the leading './'"
    if ".." in s.split("/"):
        return "'..' leaves the folder it follows; sources live in the project, named from its root"
    if "//" in s or s.endswith("/"):
        return "it has an empty folder or file name ('//' or a trailing '/')"
    bad = next((c for c in s if not re.fullmatch(r"[A-Za-z0-9_.\-/]", c)), None)
    if bad is not None:
        shown = "a space" if bad == " " else repr(bad) if bad.isprintable() else f"U+{ord(bad):04X}"
        return (f"it has {shown}; source paths take letters, digits, '_', '-', '.' and '/' only (the launchers "
                "include them and CMake lists them)")
    if len(s) > 256:
        return f"it is {len(s)} characters long; the limit is 256"
    if not _SOURCE.fullmatch(s):
        return "a path starts with a letter, a digit or '_'"
    return None


def _source(ctx: _Ctx, node: YNode, root: Path) -> str:
    s = _str(ctx, node, "a source path")
    problem = _source_path_problem(s)
    if problem is not None:
        raise ctx.error(node.loc, f"{s!r} is not a valid source path: {problem}",
                        "a relative path like kernels/dflash/x.cu")
    if not s.endswith((".cu", ".cuh", ".h", ".hpp")):
        raise ctx.error(node.loc, f"{s!r} is not a CUDA source", "sources end in .cu, .cuh, .h or .hpp")
    s = posixpath.normpath(s)  # kernels/./x.cu and kernels/x.cu are one source
    path = root / s
    try:
        resolved = path.resolve(strict=True)
        st = resolved.stat()
    except (OSError, RuntimeError):
        raise ctx.error(node.loc, f"source file {s} does not exist (or is a dangling symlink or a loop)",
                        f"paths are relative to {root}") from None
    if not resolved.is_relative_to(root.resolve()):
        raise ctx.error(node.loc, f"source {s} resolves to {resolved}, outside the project",
                        "sources live in the project folder")
    if not stat.S_ISREG(st.st_mode):
        raise ctx.error(node.loc, f"source {s} is not a regular file")
    return s


# A quoted #include (comments removed first; string literals kept, so "a//b.h" stays whole).
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)
_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)
MAX_HEADER_FILES = 2000  # files one struct header brings into the package's include/


class HeaderError(ValueError):
    """A struct header's include that the package cannot install (see :func:`header_files`)."""


def header_files(root: Path, header: str, include_dirs: Sequence[str] = ()) -> tuple[tuple[str, str], ...]:
    """What the package's ``include/`` needs so that C++ callers can include struct header
    ``header`` (a path from the project root): the header and, transitively, the project's files
    its quoted ``#include "..."`` lines reach, each as (path from the project root, path under
    ``include/``), so that the compiler finds each one there as it did in the build.

    An include is looked up as the compiler does: beside the including file, then in the project
    root, then in ``include_dirs`` (relative to the root, or absolute). A file found in a folder of
    the project keeps its path from that folder; one found in a folder outside the project (a
    library's) is not installed, and C++ callers need that folder on their include path;
    one found nowhere is the toolkit's or the system's. Conditionals are not evaluated: every
    quoted include counts. Raises HeaderError for an include that reaches a file outside the
    project (``../``, a symlink) or outside the include folder it was found in."""
    top = root.resolve()
    dirs: list[tuple[Path, bool]] = []  # (folder, inside the project)
    for d in include_dirs:
        folder = (root / d).resolve() if not d.startswith("/") else Path(d)
        dirs.append((folder, folder.is_relative_to(top)))

    def inside(rel: str) -> bool:
        return rel != ".." and not rel.startswith("../") and (root / rel).resolve().is_relative_to(top)

    out: dict[str, str] = {header: header}  # path under include/ -> path from the root
    todo = [(header, header)]
    while todo:
        src, dest = todo.pop()
        try:
            text = (root / src).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise HeaderError(f"{src} cannot be read: {exc.strerror}") from None
        text = _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else " ", text)
        for m in _INCLUDE.finditer(text):
            name = m.group(1).strip()
            if not name or name.startswith("/"):
                continue  # an absolute path reads the same for every caller
            found: tuple[str, str] | None = None
            beside = (posixpath.normpath(posixpath.join(posixpath.dirname(src), name)),
                      posixpath.normpath(posixpath.join(posixpath.dirname(dest), name)))
            for rel, inc in (beside, (posixpath.normpath(name),) * 2):
                if (root / rel).is_file():
                    found = (rel, inc)
                    break
            else:
                for folder, ours in dirs:
                    path = folder / name
                    if path.is_file():
                        if ours:
                            found = (Path(os.path.normpath(path)).relative_to(top).as_posix(),
                                     posixpath.normpath(name))
                        break
            if found is None:
                continue  # the toolkit's, the system's or a library's: not the package's to install
            rel, inc = found
            line = text.count("\n", 0, m.start()) + 1
            if not inside(rel):
                raise HeaderError(f'{src} line {line} includes "{name}", which is '
                                  f"{os.path.normpath(root / rel)}, outside the project; the package's include/ "
                                  "holds only the project's files")
            if inc == ".." or inc.startswith("../"):
                raise HeaderError(f'{src} line {line} includes "{name}", which lies above the include folder '
                                  f"that {src} is installed in (as include/{dest})")
            if inc in out:
                if out[inc] != rel:
                    raise HeaderError(f"{out[inc]} and {rel} would both be installed as include/{inc}")
                continue
            out[inc] = rel
            if len(out) > MAX_HEADER_FILES:
                raise HeaderError(f"{header} includes more than {MAX_HEADER_FILES} files")
            todo.append((rel, inc))
    return tuple(sorted((rel, inc) for inc, rel in out.items()))


def _constants(ctx: _Ctx, node: YNode) -> dict[str, int]:
    if not isinstance(node, YMap):
        raise ctx.error(node.loc, f"expected a mapping of names to integers, got {_kind(node)}")
    out: dict[str, int] = {}
    for key, value in node.items:
        name = _ident(ctx, key.loc, key.value, "constant name")
        ctx.constant_locs.setdefault(name, key.loc)
        with ctx.at(name):
            if isinstance(value, YScalar) and isinstance(value.value, int) and not isinstance(value.value, bool):
                v = value.value
            else:
                try:
                    tree = _expr(ctx, value, dict.fromkeys(out, 0), expr.Ty.INT)
                except SpecError as exc:
                    later = {k.value for k, _ in node.items} - set(out) - {name}
                    used = set(re.findall(r"undefined name '(\w+)'", exc.message)) & later
                    if not used:
                        raise
                    raise ctx.error(value.loc, exc.message, f"a constant may use only the constants above it; move "
                                    f"{', '.join(sorted(used))} above this one") from None
                try:
                    v = int(expr.evaluate(tree, out))
                except Exception as exc:  # ExprError: division by zero, overflow
                    raise ctx.error(value.loc, f"cannot evaluate constant: {exc}") from None
            # constants are int64_t in C++ and Python ints in the tests: one range keeps them equal
            if not -(1 << 63) <= v < (1 << 63):
                raise ctx.error(value.loc, f"constant {name} = {v} does not fit int64 "
                                           f"[{-(1 << 63)}, {(1 << 63) - 1}]")
            out[name] = v
    return out


def _lets(ctx: _Ctx, node: YNode, names: Mapping[str, object], widest: Mapping[str, object],
          written: dict[str, expr.Node] | None = None, taken: Mapping[str, tuple[str, SourceLoc]] | None = None
          ) -> dict[str, expr.Node]:
    """A kernel's ``let``: each name's tree, the names before it written out in it. Parsed over
    the widest names (those of the grid and the clauses); each use checks its own place.
    ``written`` receives each name's tree as the spec writes it (earlier names kept); ``taken``
    holds the kernel's arguments (what each is, where), whose names a let name may not take."""
    out: dict[str, expr.Node] = {}
    with ctx.at("let"):
        node = _filled(ctx, node, YMap, "a mapping of names to integer expressions",
                       "e.g. let: {tiles: div_ceil(m, 128) * div_ceil(n, 128)}")
        for key, value in node.items:
            name = _ident(ctx, key.loc, key.value, "let name")
            with ctx.at(name):
                other = _taken_by(ctx, name, taken or {}, names, owner=True)
                if other is not None:
                    raise ctx.error(key.loc, f"let name '{name}' is already {other}", "choose another name")
                if name in out:
                    raise ctx.error(key.loc, f"'{name}' is defined twice")
                tree = _expr(ctx, value, {**widest, **out}, expr.Ty.INT)
                if written is not None:
                    written[name] = tree
                out[name] = _written_out(ctx, value, expr.substitute(tree, out), f"'{name}'")
    return out


def _written_out(ctx: _Ctx, node: YNode, tree: expr.Node, what: str) -> expr.Node:
    """``tree``, an expression with the ``let`` names it uses written out as the generated code
    writes them; one nested more than expr.MAX_WRITTEN_DEPTH levels or of more than
    expr.MAX_WRITTEN_NODES nodes is an error at ``node`` (both counted without writing it out)."""
    if tree.size() > expr.MAX_WRITTEN_NODES:
        raise ctx.error(node.loc, f"{what} with the let names it uses written out has {tree.size()} nodes "
                                  f"(names, literals, operators and calls), more than {expr.MAX_WRITTEN_NODES}",
                        "the generated code writes a let name out at each use: use a let name fewer times "
                        "in the lets after it, or compute the value in the kernel")
    if tree.depth() > expr.MAX_WRITTEN_DEPTH:
        raise ctx.error(node.loc, f"{what} with the let names it uses written out is nested {tree.depth()} levels "
                                  f"deep, more than {expr.MAX_WRITTEN_DEPTH}",
                        "the generated code writes let names out: use fewer levels of let over let")
    return tree


def _let_locs(f: Mapping[str, YNode]) -> dict[str, tuple[str, SourceLoc]]:
    """The kernel's let names, each as ``_taken_by`` reads them: ("let name", where)."""
    node = f.get("let")
    return {str(k.value): ("let name", k.loc) for k, _ in node.items} if isinstance(node, YMap) else {}


def _taken_by(ctx: _Ctx, name: str, taken: Mapping[str, tuple[str, SourceLoc]],
              names: Mapping[str, object], owner: bool = False) -> str | None:
    """What ``name`` already is in a kernel's scope ("an argument (line 9)", "a constant
    (line 3)", "an 'instantiate' axis"; with ``owner``, "an argument's name (line 9)"), or None:
    ``taken`` holds the kernel's arguments, ``names`` its expressions' other names."""
    what, line = None, 0
    if name in ctx.constant_locs:
        what, line = "constant", ctx.constant_locs[name].line
    elif name in taken:
        what, line = taken[name][0], taken[name][1].line
    elif name in names:
        what = "'instantiate' axis" if isinstance(names[name], int) else "name of the kernel's expressions"
    if what is None:
        return None
    return article(what) + ("'s name" if owner else "") + (f" (line {line})" if line else "")


def _shown_with_lets(trees: Sequence[expr.Node], written: Mapping[str, expr.Node]) -> str:
    """``trees`` as the spec writes them, then each ``let`` name they use (directly or through
    another name) with its expression: "[1, 1, split] with split = max(1, ...)"."""
    used: set[str] = set()
    stack = [n for t in trees for n in t.names() if n in written]
    while stack:
        n = stack.pop()
        if n not in used:
            used.add(n)
            stack.extend(m for m in written[n].names() if m in written)
    text = "[" + ", ".join(expr.to_text(t) for t in trees) + "]"
    if used:
        text += " with " + ", ".join(f"{n} = {expr.to_text(t)}" for n, t in written.items() if n in used)
    return text


def _inline_lets(ctx: _Ctx, node: YNode, tree: expr.Node, lets: Mapping[str, expr.Node],
                 within: Mapping[str, object]) -> expr.Node:
    """``tree`` with the ``let`` names it uses written out; a name whose expression needs what
    this place does not offer (the device, in a size or launch.cluster) is an error here."""
    used = [n for n in tree.names() if n in lets]
    if not used:
        return tree
    fields = {v for v in within.values() if isinstance(v, str)}  # the names struct fields are read as
    for name in used:
        missing = sorted(n for n in lets[name].names() if n not in within and n not in fields)
        if missing:
            raise ctx.error(node.loc, f"'{name}' uses '{missing[0]}', which is not available here",
                            "device names are usable in grid, shared_mem (device.* only) and the clauses")
    return _written_out(ctx, node, expr.substitute(tree, {n: lets[n] for n in used}), "the expression")


def _expr(ctx: _Ctx, node: YNode, names: Mapping[str, object], ty: expr.Ty) -> expr.Node:
    if isinstance(node, YScalar) and isinstance(node.value, int) and not isinstance(node.value, bool):
        if ty is not expr.Ty.INT:
            raise ctx.error(node.loc, f"expected a boolean expression, got {_kind(node)}")
        if not -(1 << 63) <= node.value < (1 << 63):
            raise ctx.error(node.loc, f"integer {node.value} does not fit in 64 bits")
        return expr.Lit(node.value)
    text = _str(ctx, node, "an expression")
    if "sizeof" in text:
        text = _sizeof(ctx, node.loc, text)
    try:
        return expr.parse(text, names, ty)
    except expr.ParseError as exc:
        hint = exc.hint
        if text.count("(") != text.count(")"):
            hint = "inside [ ] quote expressions that contain commas: 'div_ceil(q_len, 128)'"
        undefined = re.fullmatch(r"undefined name '(\w+)'", exc.message)
        hint = (undefined and _dropped_hint(ctx, undefined.group(1))) or hint
        raise ctx.error(node.loc, exc.message, (undefined and _source_name_hint(ctx, undefined.group(1))) or hint
                        ) from None


def _dropped_hint(ctx: _Ctx, name: str) -> str | None:
    """For a name that the kernel being read lacks because its own ``args`` (or ``host_args``)
    replaced those of the kernel it extends: says so. None otherwise."""
    if name not in ctx.dropped:
        return None
    base, key = ctx.dropped[name]
    return (f"'{name}' is in the {key} of '{base}', which this kernel extends, but this kernel's own {key} "
            "replace those whole (extends does not merge mappings): list every argument, or give this kernel "
            "the entries that use it")


def _source_name_hint(ctx: _Ctx, name: str) -> str | None:
    """For a name an expression uses that the spec does not declare but the module's sources
    define (``#define NAME`` or ``constexpr``): that spec expressions do not see them, and the
    ``constants:`` entry that would declare it. None where the sources do not define it."""
    found = kernel_source.source_definition(ctx.sources, name)
    if found is None:
        return None
    path, line, text = found
    value = kernel_source.source_integers(ctx.sources).get(name)
    return (f"the sources define {name} ({path}:{line}: {text}), but spec expressions see only the spec's names "
            "(they are evaluated by the plans and the generated tests, without the sources): declare it under "
            f"'constants' ({name}: {value if value is not None else '<its value>'})")


_SIZEOF = re.compile(r"\bsizeof\s*\(\s*([A-Za-z_]\w*)?\s*\)")


def _sizeof(ctx: _Ctx, loc: SourceLoc, text: str) -> str:
    """``text`` with each ``sizeof(T)`` replaced by the bytes of one element of ``T``: an
    element-type axis of the kernel instance (``T`` of ``instantiate``) or a registry element type
    (``bf16``). The expression parser then reads the literal (as it reads an integer axis)."""
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or ""
        elem = ELEMS[ctx.type_axes[name]] if name in ctx.type_axes else SPEC_ELEMS.get(name)
        if elem is None or elem.any_dtype:
            ours = CPP_TYPES.get(name)  # (a C++ spelling: sizeof(float) is sizeof(f32))
            hint = (f"did you mean sizeof({ours})? (kernelgen's name for C++ {name})" if ours in SPEC_ELEMS else
                    f"the kernel's element-type axes: {', '.join(ctx.type_axes)}" if ctx.type_axes else
                    "an element type (sizeof(bf16)) or an element-type axis of instantiate (sizeof(T))")
            raise ctx.error(loc, f"sizeof({name}): '{name}' is not an element type or an element-type axis", hint)
        if elem.bits % 8:
            raise ctx.error(loc, f"sizeof({name}): {elem.name} is {elem.bits} bits, not a whole number of bytes",
                            "count its bytes with div_ceil(values * 4, 8)")
        return str(elem.bits // 8)

    return _SIZEOF.sub(one, text)


def _constant_symbol(ctx: _Ctx, node: YNode) -> str:
    """``to_symbol``: a ``__constant__`` variable's name, optionally namespace-qualified."""
    text = _str(ctx, node, "the name of a __constant__ variable")
    parts = text.removeprefix("::").split("::")
    if not all(_IDENT.fullmatch(p) and p not in CPP_KEYWORDS for p in parts):
        raise ctx.error(node.loc, f"{text!r} is not the name of a __constant__ variable", "e.g. g_scale or ns::g_scale")
    return "::".join(parts)


@dataclass(frozen=True)
class _FieldDecl:
    """A struct field as the spec writes it, before the structs it names are laid out."""

    name: str
    loc: SourceLoc
    member: str  # the C++ member's own name, or ""
    base: str  # a scalar type or a struct of the module
    count: int  # 0: one; n: an array of n
    type_loc: SourceLoc


@dataclass(frozen=True)
class _StructDecl:
    """A ``structs:`` entry as the spec writes it, before its layout."""

    name: str
    loc: SourceLoc
    cpp: str
    header: str | None
    files: tuple[tuple[str, str], ...]
    fields: tuple[_FieldDecl, ...]
    fields_loc: SourceLoc
    align: YNode | None


def _structs(ctx: _Ctx, node: YNode, root: Path, module: str, include_dirs: Sequence[str] = ()
             ) -> tuple[Struct, ...]:
    """``structs:``: struct types passed by value, with their C layout as a C++ compiler gives it:
    each field at a multiple of its alignment (a scalar's size; a nested struct's alignment), the
    struct's alignment the largest of its fields' and its own ``align``, its size a multiple of
    it. A field may be another struct of the module, declared anywhere under ``structs``, or an
    array of one; a struct that contains itself (directly or through others) is refused. In spec
    order, each struct after the structs it nests."""
    node = _filled(ctx, node, YMap, "a mapping of struct names to their C++ type and fields",
                   "e.g. structs: {rope_dims: {cpp: rope_corr_dims, fields: {v0: f32, v1: f32}}}")
    declared = [str(k.value) for k, _ in node.items]  # field types may name a struct declared below them
    decls = [_struct_decl(ctx, key, value, root, declared, include_dirs) for key, value in node.items]
    built: dict[str, Struct] = {}
    for decl in _struct_order(ctx, decls):
        with ctx.at(decl.name):
            built[decl.name] = _struct_layout(ctx, decl, built, module)
    return tuple(built.values())


def _struct_decl(ctx: _Ctx, key: YScalar, value: YNode, root: Path, declared: Sequence[str],
                 include_dirs: Sequence[str]) -> _StructDecl:
    """One ``structs:`` entry's keys, checked; its field types are scalars or names in ``declared``."""
    name = _ident(ctx, key.loc, key.value, "struct name")
    with ctx.at(name):
        if name in SCALARS or name in ELEMS or schema.TYPE_LIKE_RE.fullmatch(name):
            what = "the name of a registry type" if name in SCALARS or name in ELEMS else "a scalar type's spelling"
            raise ctx.error(key.loc, f"struct '{name}' has {what}", rename_hint("struct name", name))
        f = _fields(ctx, value, schema.STRUCT)
        cpp = name
        if "cpp" in f:
            with ctx.at("cpp"):
                text = _str(ctx, f["cpp"], "a C++ type name")
                try:
                    cpp = symbols.parse(text, CPP_KEYWORDS).text
                except symbols.SymbolError as exc:
                    raise ctx.error(f["cpp"].loc, f"{text!r} is not a C++ type name: {exc}",
                                    "e.g. rope_corr_dims, ns::params or params<float>") from None
        header = None
        files: tuple[tuple[str, str], ...] = ()
        if "header" in f:
            with ctx.at("header"):
                header = _source(ctx, f["header"], root)
                try:
                    files = header_files(root, header, include_dirs)
                except HeaderError as exc:
                    raise ctx.error(f["header"].loc, f"header {header} cannot be installed for C++ callers: {exc}",
                                    "keep the headers a struct's header includes inside the project (copy or "
                                    "move them in), or give a header that includes only those") from None
        elif "<" in cpp:
            with ctx.at("cpp"):
                raise ctx.error(f["cpp"].loc, f"'{cpp}' is a template; the C++ API cannot forward-declare it",
                                "give 'header': the source that declares the type")
        with ctx.at("fields"):
            fn = f["fields"] if "fields" in f else YMap(value.loc, ())
            if not isinstance(fn, YMap):
                raise ctx.error(fn.loc, "expected a mapping of field names to field types",
                                "e.g. {v0: f32, v1: f32, dims: 'u32[4]', window: window}, or {} for a stateless "
                                "functor")
            if len(fn.items) > MAX_FIELDS:
                raise ctx.error(fn.loc, f"{len(fn.items)} fields; the limit is {MAX_FIELDS}")
            fields: list[_FieldDecl] = []
            for fkey, fval in fn.items:
                fname = _ident(ctx, fkey.loc, fkey.value, "field name")
                with ctx.at(fname):
                    if any(x.name == fname for x in fields):
                        raise ctx.error(fkey.loc, f"field '{fname}' is declared twice")
                    fields.append(_field_decl(ctx, fname, fkey.loc, fval, declared))
        if "align" in f and not fields:
            with ctx.at("align"):
                raise ctx.error(f["align"].loc, "a struct without fields (a stateless functor) takes no align",
                                "the launcher passes a value-initialised one; leave align out")
        return _StructDecl(name, key.loc, cpp, header, files, tuple(fields), fn.loc, f.get("align"))


def _field_decl(ctx: _Ctx, name: str, loc: SourceLoc, node: YNode, declared: Sequence[str]) -> _FieldDecl:
    """A field's type (``f32``, ``u32[4]``, a struct of the module, ``window[2]``) and C++ member."""
    member = ""
    if isinstance(node, YMap):  # {type: u64, cpp: in}: the C++ member's own name
        entry = _fields(ctx, node, schema.FIELD)
        if "cpp" in entry:
            with ctx.at("cpp"):
                member = _str(ctx, entry["cpp"], "the C++ member's name")
                if not _IDENT.fullmatch(member) or member in CPP_KEYWORDS:
                    raise ctx.error(entry["cpp"].loc, f"{member!r} is not a C++ member name",
                                    "an identifier that is not a C++ keyword")
        node = entry["type"]
    text = _str(ctx, node, "a field type such as f32, u32[4] or a struct of the module")
    m = _FIELD_TYPE.fullmatch(text.strip())
    if not m or (m.group(1) not in SCALARS and m.group(1) not in declared):
        base = m.group(1) if m else text
        raise ctx.error(node.loc, f"{text!r} is not a field type",
                        name_hint(base, [*SCALARS, *declared]) or
                        "fields are scalars (u32, i64, f32, ...), structs declared under structs, or fixed "
                        "arrays of either (f32[4], window[2])")
    count = int(m.group(2)) if m.group(2) is not None else 0
    if m.group(2) is not None and not 1 <= count <= 1024:
        raise ctx.error(node.loc, f"array length {count} is outside 1..1024")
    return _FieldDecl(name, loc, member, m.group(1), count, node.loc)


def _struct_order(ctx: _Ctx, decls: Sequence[_StructDecl]) -> list[_StructDecl]:
    """``decls`` in spec order, each after the structs its fields hold; a struct that holds
    itself, directly or through others, is an error at the field that closes the loop."""
    by_name = {d.name: d for d in decls}
    out: dict[str, _StructDecl] = {}

    def visit(d: _StructDecl, path: list[tuple[_StructDecl, _FieldDecl]]) -> None:
        for fd in d.fields:
            if fd.base not in by_name or fd.base in out:
                continue
            loop = [*path, (d, fd)]
            start = next((i for i, (s, _) in enumerate(loop) if s.name == fd.base), None)
            if start is not None:
                chain = ", whose ".join(f"field '{f.name}' is struct '{f.base}'" for _, f in loop[start:])
                with ctx.at(d.name), ctx.at("fields"), ctx.at(fd.name):
                    raise ctx.error(fd.type_loc, f"struct '{fd.base}' contains itself: {chain}",
                                    "a struct cannot hold itself by value; hold its address instead (a u64 field)")
            visit(by_name[fd.base], loop)
        out.setdefault(d.name, d)

    for d in decls:
        visit(d, [])
    return list(out.values())


def _struct_layout(ctx: _Ctx, decl: _StructDecl, built: Mapping[str, Struct], module: str) -> Struct:
    """``decl`` laid out as C++ lays it out, the structs its fields hold being in ``built``."""
    fields: list[StructField] = []
    offset = 0
    align = 1
    with ctx.at("fields"):
        for fd in decl.fields:
            nested = built.get(fd.base)
            if nested is not None and nested.stateless:
                with ctx.at(fd.name):
                    raise ctx.error(fd.type_loc, f"struct '{nested.name}' has no fields (a stateless functor), so "
                                    "it cannot be a field", f"give struct '{nested.name}' its fields")
            fld = StructField(fd.name, None if nested else SCALARS[fd.base], fd.count, 0, fd.loc, fd.member, nested)
            offset = (offset + fld.align - 1) // fld.align * fld.align
            fields.append(replace(fld, offset=offset))
            offset += fld.size
            align = max(align, fld.align)
    if decl.align is not None:
        with ctx.at("align"):
            given = _int(ctx, decl.align)
            if given not in (1, 2, 4, 8, 16, 32, 64, 128):
                raise ctx.error(decl.align.loc, f"alignment {given} is not a power of two up to 128")
            if given < align:
                raise ctx.error(decl.align.loc, f"alignment {given} is less than the fields' ({align})",
                                "leave align out, or give at least the largest field's alignment")
            align = given
    total = max((offset + align - 1) // align * align, 1)  # an empty C++ struct is one byte
    if total > MAX_STRUCT_BYTES:
        with ctx.at("fields"):
            raise ctx.error(decl.fields_loc, f"the struct is {total} bytes; the limit is {MAX_STRUCT_BYTES}")
    return Struct(decl.name, decl.cpp, decl.header, tuple(fields), total, align, decl.loc, module, decl.files)


@dataclass(frozen=True)
class _Parsed:
    """A parsed argument type: ``base`` is a scalar or the element type pointed to."""

    base: str
    const: bool  # the outer pointer's target is const (for pointer arrays: the array itself)
    star: bool
    indirect: bool = False  # a pointer array (elem**)
    inner_const: bool = False  # pointer arrays: the pointees are const


# Scalars an element-type axis may give ("{T}" with T: [f16, bf16, f32, f64]): a chain or dispatcher
# over instances taking different ones takes a double and converts it for each member.
FLOAT_SCALARS = ("f16", "bf16", "f32", "f64")


def _type(ctx: _Ctx, node: YNode, loc: SourceLoc, axes: Mapping[str, str | int]) -> _Parsed:
    """Parse ``const bf16*``, ``void*``, ``const f32* const*`` (or ``const {T}*`` in an
    instantiated kernel)."""
    text = _str(ctx, node, "a type such as u32 or const bf16*")
    if "{" in text:
        m = _PLACEHOLDER.search(text)
        kind = _axis_kind(axes[m.group(1)]) if m and m.group(1) in axes else "type"
        if kind != "type":
            raise ctx.error(loc, f"{{{m.group(1)}}} is an axis of {_AXIS_KINDS[kind]}; types take element-type axes")
        value = axes.get(m.group(1)) if m else None
        text = _subst(ctx, loc, text, axes, cpp=False)
        if not text.rstrip().endswith("*"):
            if text.strip() not in FLOAT_SCALARS or "const" in text:
                raise ctx.error(loc, f"a scalar of an element-type axis must be a float type (f16, bf16, f32, f64); "
                                f"this instance's {m.group(1) if m else 'axis'} is {value}",
                                "give the axis float types only, or write the scalar's type (i32, f32, ...)")
        if text.count("*") > 1:
            raise ctx.error(loc, "a type axis cannot type a pointer array (its arrays carry no element dtype)",
                            "name the element type, e.g. 'const f32* const*'")
    m = _TYPE.fullmatch(text.strip())
    if not m or (m.group(4) and not m.group(3)):
        raise ctx.error(loc, f"{text!r} is not a type",
                        "e.g. u32, f32, bool, const bf16*, void*, const f32* const* (an array of pointers)")
    const, base, star = bool(m.group(1)), m.group(2), bool(m.group(3))
    indirect, outer_const = bool(m.group(5)), bool(m.group(4))
    if star:
        if base not in SPEC_ELEMS:
            raise ctx.error(loc, f"unknown element type '{base}'", name_hint(base, list(SPEC_ELEMS)))
        if indirect and SPEC_ELEMS[base].any_dtype:
            raise ctx.error(loc, "pointer arrays of void* are not supported", "name the element type, e.g. f32**")
        if indirect:
            return _Parsed(base, outer_const, True, True, const)
        return _Parsed(base, const, True)
    if const:
        if base in ctx.structs:
            raise ctx.error(loc, "'const' applies only to pointers", "a struct is passed by value: write its name")
        raise ctx.error(loc, "'const' applies only to pointers")
    if base not in SCALARS and base not in ctx.structs:
        hint = ("pointers end in '*'" if base in SPEC_ELEMS
                else name_hint(base, [*SCALARS, *ctx.structs]) or "declare a struct type under 'structs'")
        raise ctx.error(loc, f"unknown scalar type '{base}'", hint)
    return _Parsed(base, False, False)


def _args(
    ctx: _Ctx, node: YNode, host: bool, taken: dict[str, tuple[str, SourceLoc]], axes: Mapping[str, str | int],
    kernel_args: Sequence[Arg] = (),
) -> list[tuple[Arg, YNode | None]]:
    """Arguments without their size expressions (those need every name declared first); ``taken``
    holds the arguments declared before (what each is, where) and receives these. Host arguments
    read from a struct argument's field (``from``) are resolved against ``kernel_args``."""
    if not isinstance(node, YMap):
        raise ctx.error(node.loc, f"expected a mapping of argument names to types, got {_kind(node)}")
    out = []
    for key, value in node.items:
        name = _ident(ctx, key.loc, key.value, "argument name")
        if name.startswith("_"):
            raise ctx.error(key.loc, f"argument '{name}' starts with '_'", "that prefix is reserved")
        what = "host argument" if host else "argument"
        if name in axes:
            raise ctx.error(key.loc, f"{what} '{name}' has the name of an 'instantiate' axis")
        if name in ctx.constant_locs:
            raise ctx.error(key.loc, f"{what} '{name}' is also {ctx.constant(name)}",
                            "rename one of them: expressions could not tell them apart")
        if name in taken:
            other, where = taken[name]
            if other == what:
                raise ctx.error(key.loc, f"{what} '{name}' is declared twice (also at line {where.line})")
            raise ctx.error(key.loc, f"{what} '{name}' is also {article(other)} (line {where.line})",
                            "rename one of them")
        taken[name] = (what, key.loc)
        with ctx.at(name):
            size_node = None
            flags: dict[str, tuple[bool, SourceLoc]] = {}
            to_symbol = None
            source: YNode | None = None
            device = False
            bound: tuple[str, SourceLoc] | None = None
            f = {}
            if isinstance(value, YMap):
                f = _fields(ctx, value, schema.ARGUMENT)
                type_node = f["type"]
                size_node = f.get("size")
                for flag in ("contiguous", "nullable", "read_only", "zero"):
                    if flag in f:
                        with ctx.at(flag):
                            flags[flag] = (_bool(ctx, f[flag]), f[flag].loc)
                if "device" in f:
                    with ctx.at("device"):
                        device = _bool(ctx, f["device"])
                if "bound" in f:
                    with ctx.at("bound"):
                        text = _str(ctx, f["bound"], "an argument name")
                        if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", text):
                            raise ctx.error(f["bound"].loc, f"the bound '{text}' is a struct field; a bound names an "
                                            "integer argument or host argument",
                                            f"read the field into a host argument and name it: host_args: "
                                            f"{{{text.rsplit('.', 1)[1]}: {{type: u32, from: {text}}}}}, bound: "
                                            f"{text.rsplit('.', 1)[1]}")
                        bound = (_ident(ctx, f["bound"].loc, text, "argument name"), f["bound"].loc)
                if "to_symbol" in f:
                    with ctx.at("to_symbol"):
                        to_symbol = _constant_symbol(ctx, f["to_symbol"])
                source = f.get("from")
            else:
                type_node = value
            t = _type(ctx, type_node, type_node.loc, axes)
            struct = ctx.structs.get(t.base) if not t.star else None
            contiguous = flags.get("contiguous", (True, None))[0]
            nullable = flags.get("nullable", (False, None))[0]
            read_only = flags.get("read_only", (False, None))[0]
            zero = flags.get("zero", (False, None))[0]
            if t.star and host:
                raise ctx.error(type_node.loc, "host arguments must be scalars", "pointers belong under args")
            if bound is not None and not device:
                with ctx.at("bound"):
                    raise ctx.error(bound[1], "'bound' applies only to device scalars (device: true)")
            if device:
                with ctx.at("device"):
                    if host or t.star or struct is not None or t.base not in SPEC_ELEMS:
                        raise ctx.error(f["device"].loc,
                                        "'device' applies to a scalar type of a kernel argument (not a pointer, "
                                        "struct or host argument)",
                                        "e.g. kv_len: {type: i32, device: true}: the kernel takes const int32_t*")
                    if size_node is not None or flags or to_symbol is not None:
                        raise ctx.error(f["device"].loc, "a device scalar is one element: 'size', 'contiguous', "
                                        "'nullable', 'read_only', 'zero' and 'to_symbol' do not apply")
                out.append((Arg(name, key.loc, elem=SPEC_ELEMS[t.base], const=True, size=expr.Lit(1), device=True,
                                bound=bound[0] if bound else None), None))
                continue
            if zero:
                with ctx.at("zero"):
                    if not t.star or t.const or read_only:
                        raise ctx.error(f["zero"].loc, "'zero' applies only to writable pointers (T*, not const T*)",
                                        "the launcher sets the array to zero before the launch")
                    if size_node is None:
                        raise ctx.error(f["zero"].loc, "'zero' needs 'size': the elements to set to zero")
                    if not contiguous:
                        raise ctx.error(f["zero"].loc, "'zero' applies only to contiguous arrays: the launcher sets "
                                        "'size' consecutive elements to zero, which for a strided view would "
                                        "include the memory between its rows",
                                        "zero the view in the kernel, or remove contiguous: false")
            if not t.star and (size_node is not None or flags):
                bad = "size" if size_node is not None else next(iter(flags))
                loc = size_node.loc if size_node is not None else flags[bad][1]
                raise ctx.error(loc, f"'size', 'contiguous', 'nullable' and 'read_only' apply only to pointers "
                                f"('{bad}' is given for a scalar)")
            if source is not None:
                with ctx.at("from"):
                    if not host or t.star or struct is not None or not SCALARS[t.base].is_integer:
                        raise ctx.error(source.loc, "'from' applies to integer host arguments (host_args)",
                                        "e.g. host_args: {rows: {type: i64, from: p.rows}}")
                    if to_symbol is not None:
                        raise ctx.error(source.loc, "'from' and 'to_symbol' do not go together: a value read "
                                        "from a struct argument is the kernel's already")
                    text = _str(ctx, source, "a struct argument's field, e.g. p.rows")
                    if not schema.FIELD_PATH_RE.fullmatch(text):
                        raise ctx.error(source.loc, f"'{text}' is not a struct argument's field",
                                        "write the argument and the field, e.g. p.rows (p.window.left for a "
                                        "nested struct's field)")
                    head, fields = _resolve_source(ctx, source.loc, name, SCALARS[t.base], text, kernel_args)
                out.append((Arg(name, key.loc, scalar=SCALARS[t.base], host=True, source=head,
                                source_fields=fields), None))
                continue
            if to_symbol is not None and not host:
                with ctx.at("to_symbol"):
                    raise ctx.error(f["to_symbol"].loc, "'to_symbol' applies only to host arguments",
                                    "declare the value under host_args: {type: f32, to_symbol: NAME}")
            if not t.star and host and to_symbol is None and (struct is not None or not SCALARS[t.base].is_integer):
                raise ctx.error(type_node.loc, "host arguments must be integers (or bool), unless copied with "
                                "'to_symbol'", "e.g. scale: {type: f32, to_symbol: g_scale}")
            if read_only and t.const:
                with ctx.at("read_only"):
                    raise ctx.error(flags["read_only"][1], "'read_only' is for non-const pointers",
                                    f"'{t.base}' is already const; remove read_only")
            if t.star and not t.indirect and SPEC_ELEMS[t.base].lanes > 1 and not contiguous:
                with ctx.at("contiguous"):
                    raise ctx.error(flags["contiguous"][1],
                                    f"a {t.base} argument must be contiguous (its lanes are read as one vector)")
            if t.star:
                elem = SPEC_ELEMS[t.base]
                arg = Arg(name, key.loc, elem=elem, const=t.const, contiguous=contiguous, host=host,
                          nullable=nullable, read_only=read_only, indirect=t.indirect, inner_const=t.inner_const,
                          zero=zero)
            elif struct is not None:
                arg = Arg(name, key.loc, struct=struct, host=host, to_symbol=to_symbol)
            else:
                arg = Arg(name, key.loc, scalar=SCALARS[t.base], host=host, to_symbol=to_symbol)
            out.append((arg, size_node))
    return out


def _field_path(owner: Arg, path: Sequence[str], scalar_only: str, integer_only: str
                ) -> tuple[tuple[StructField, ...], tuple[str, str] | None]:
    """Struct argument ``owner``'s fields down ``path`` (``["span", "count"]`` for ``p.span.count``)
    and, where they do not lead to an integer scalar, why (the message and a hint), in the words of
    what reads it (``scalar_only``: after an array, ``integer_only``: after a float or a struct)."""
    st: Struct | None = owner.struct
    fields: list[StructField] = []
    where = owner.name
    for part in path:
        if st is None:
            return tuple(fields), (f"field '{where}' is a scalar, not a struct: it has no field '{part}'", "")
        f = next((x for x in st.fields if x.name == part), None)
        if f is None:
            return tuple(fields), (f"'{where}' (struct '{st.name}') has no field '{part}'",
                                   did_you_mean(part, [x.name for x in st.fields]))
        where = f"{where}.{part}"
        if f.count:
            return tuple(fields), (f"field '{where}' is an array ({f.count} elements); {scalar_only}", "")
        fields.append(f)
        st = f.struct
    if st is not None:
        return tuple(fields), (f"field '{where}' is a struct; {integer_only}",
                               f"name one of its fields, e.g. {where}.{st.fields[0].name}" if st.fields else "")
    last = fields[-1].scalar if fields else None
    if last is not None and not last.is_integer:
        return tuple(fields), (f"field '{where}' is {last.name}; {integer_only}", "")
    return tuple(fields), None


def _field_read_error(arg: Arg, text: str, call: bool) -> tuple[str, str]:
    """Why an expression cannot read ``text`` (``p.eps``, ``p.span``, ``p.size()``) of struct
    argument ``arg``: the message and a hint."""
    if arg.host:
        return (f"'{arg.name}' is a host argument; expressions read the fields of the kernel's struct arguments",
                "")
    if call:
        return (f"'{text}' calls a method; expressions read a struct argument's integer fields ({arg.name}.field)", "")
    _, problem = _field_path(arg, re.findall(r"\w+", text)[1:], "expressions read scalar fields",
                             "expressions use integers only")
    if problem is not None:
        return problem
    return (f"field '{text}' would be read through a host argument named "
            f"'{text.replace('.', '_')}', a name the kernel already uses",
            f"declare it under another name: host_args: {{NAME: {{type: T, from: {text}}}}}")


def _field_names(args: Sequence[Arg], host: Sequence[Arg], taken: Container[str]
                 ) -> dict[str, tuple[str, Arg | None]]:
    """The integer fields of the struct arguments ``args`` that expressions may read (``p.rows``,
    ``p.span.count``), each with the name of the host argument standing for it: one of ``host``
    declared with ``from`` it (and None), else ``p_rows`` (``p_span_count``; ``p_rows_field``
    where the kernel uses that name) and the host argument to add where an expression reads it.
    A field whose name both are taken is left out (an expression reading it is told to declare one)."""
    declared = {a.source_text: a.name for a in host if a.derived}
    out: dict[str, tuple[str, Arg | None]] = {}

    def walk(owner: Arg, st: Struct, chain: tuple[StructField, ...]) -> None:
        for fld in st.fields:
            if fld.count:
                continue
            if fld.struct is not None:
                walk(owner, fld.struct, (*chain, fld))
                continue
            if fld.scalar is None or not fld.scalar.is_integer:
                continue
            parts = [owner.name, *(c.name for c in chain), fld.name]
            path = ".".join(parts)
            if path in declared:
                out[path] = (declared[path], None)
                continue
            alias = next((n for n in ("_".join(parts), "_".join(parts) + "_field")
                          if n not in taken and reserved_reason(n) is None), None)
            if alias is not None:
                out[path] = (alias, Arg(alias, owner.loc, scalar=fld.scalar, host=True, source=owner.name,
                                        source_fields=(*chain, fld)))

    for a in args:
        if a.struct is not None and not a.implicit:
            walk(a, a.struct, ())
    return out


def _resolve_source(ctx: _Ctx, loc: SourceLoc, name: str, scalar: ScalarType, text: str,
                    args: Sequence[Arg]) -> tuple[str, tuple[StructField, ...]]:
    """Host argument ``name`` (of type ``scalar``) with ``from: p.f.g`` (``text``): its struct
    argument and the fields down to the value, checked (a struct argument of the kernel, fields
    down to an integer scalar of the argument's type)."""
    head, *path = text.split(".")
    owner = next((b for b in args if b.name == head), None)
    if owner is None or owner.struct is None:
        structs = [b.name for b in args if b.struct is not None and not b.implicit]
        what = "not an argument of the kernel" if owner is None else "not a struct argument"
        raise ctx.error(loc, f"'{head}' is {what}",
                        f"'from' reads a field of a struct argument ({', '.join(structs)})"
                        if structs else "'from' reads a field of a struct argument; the kernel has none")
    fields, problem = _field_path(owner, path, "'from' reads a scalar field",
                                  "'from' reads an integer field (expressions use integers only)")
    if problem is not None:
        raise ctx.error(loc, *problem)
    last = fields[-1].scalar
    assert last is not None
    if last.name != scalar.name:
        raise ctx.error(loc, f"field '{text}' is {last.name}, but host argument '{name}' is {scalar.name}",
                        f"give '{name}' the field's type: {{type: {last.name}, from: {text}}}")
    return head, fields


def _kernel(
    ctx: _Ctx, name: str, loc: SourceLoc, node: YNode, constants: dict[str, int],
    target_names: list[str], targets: tuple[Target, ...], axes: Mapping[str, str | int] | None = None,
) -> Kernel:
    """One kernel; for an instance of an instantiated kernel, ``axes`` holds its values:
    placeholders in the symbol, variants and argument types are replaced, and integer axes
    are constants of the instance in every expression."""
    axes = axes or {}
    int_axes = _integer_axes(axes)
    ctx.type_axes = {n: v for n, v in axes.items() if isinstance(v, str) and _axis_kind(v) == "type"}
    try:
        return _kernel_entries(ctx, name, loc, node, constants, target_names, targets, axes, int_axes)
    finally:
        ctx.type_axes = {}


def _kernel_entries(
    ctx: _Ctx, name: str, loc: SourceLoc, node: YNode, constants: dict[str, int],
    target_names: list[str], targets: tuple[Target, ...], axes: Mapping[str, str | int], int_axes: dict[str, int],
) -> Kernel:
    f = _fields(ctx, node, schema.KERNEL)
    if "instance_name" in f and "instantiate" not in f:
        with ctx.at("instance_name"):
            raise ctx.error(f["instance_name"].loc, "'instance_name' names the instances of 'instantiate'")
    if "instantiate" in f and "symbol" not in f and "variants" not in f:
        raise ctx.error(f["instantiate"].loc, "an instantiated kernel needs 'symbol' (or 'variants')",
                        "e.g. symbol: my_kernel<{T}>")
    with ctx.at("summary"):
        summary = _text(ctx, f["summary"], one_line=True, summary=True)
    doc = ""
    if "doc" in f:
        with ctx.at("doc"):
            doc = _text(ctx, f["doc"], one_line=False)
    symbol = name
    if "symbol" in f:
        with ctx.at("symbol"):
            symbol = _symbol(ctx, f["symbol"], axes)
            _check_declared(ctx, symbol, f["symbol"].loc)
    elif "variants" not in f:
        with ctx.at("symbol"):
            _check_declared(ctx, symbol, loc, default=True)
    kernel_targets = tuple(target_names)
    if "targets" in f:
        with ctx.at("targets"):
            listed: dict[str, SourceLoc] = {}

            def one(n: YNode) -> str:
                t = _str(ctx, n, "a target name")
                if t not in target_names:
                    raise ctx.error(n.loc, f"unknown target '{t}'", did_you_mean(t, target_names))
                if t in listed:
                    also = "earlier on this line" if listed[t].line == n.loc.line else f"also at line {listed[t].line}"
                    raise ctx.error(n.loc, f"target '{t}' is listed twice ({also})", "list each target once")
                listed[t] = n.loc
                return t
            kernel_targets = tuple(sorted(_list(ctx, f["targets"], one)))
            if not kernel_targets:
                raise ctx.error(f["targets"].loc, "at least one target is needed (or leave 'targets' out)")
    taken: dict[str, tuple[str, SourceLoc]] = {}  # names of the kernel's scope: what each is, where
    with ctx.at("args"):
        raw_args = _args(ctx, f["args"], False, taken, axes)
    raw_host: list[tuple[Arg, YNode | None]] = []
    if "host_args" in f:
        with ctx.at("host_args"):
            raw_host = _args(ctx, f["host_args"], True, taken, axes, [a for a, _ in raw_args])
    int_names: dict[str, object] = {a.name: a for a, _ in raw_args + raw_host if a.is_int}
    float_names = {a.name for a, _ in raw_args + raw_host if a.scalar is not None and not a.scalar.is_integer}
    ptr_names = {a.name for a, _ in raw_args if a.is_pointer}
    dev_names = {a.name for a, _ in raw_args if a.device}
    for a, _ in raw_args:
        if a.bound is not None and a.bound not in int_names:
            with ctx.at("args"), ctx.at(a.name), ctx.at("bound"):
                raise ctx.error(a.loc, f"the bound of device scalar '{a.name}' must be an integer argument or host "
                                f"argument of the kernel, not '{a.bound}'",
                                did_you_mean(a.bound, list(int_names)) or "e.g. host_args: {max_kv_len: u32}")
    names: dict[str, object] = {**int_names, **constants, **int_axes}
    # A struct argument's integer field read in an expression (p.rows, p.span.count) is a host
    # argument that the launchers read from it: the one declared with 'from', else one named
    # after the field (p_rows), added where an expression reads it.
    field_names = _field_names([a for a, _ in raw_args], [a for a, _ in raw_host],
                               {**names, **taken, **_let_locs(f)})
    names.update({path: alias for path, (alias, _) in field_names.items()})
    read: set[str] = set()  # the names the kernel's expressions read
    # Grid and clauses may also name the device (device.*, kernel.blocks_per_sm); shared_mem the
    # device alone (the occupancy, kernel.blocks_per_sm, depends on the shared memory).
    device_names: dict[str, object] = {**names, **{n: None for n in DEVICE_NAMES}}
    smem_names: dict[str, object] = {**names, **{n: None for n in DEVICE_NAMES if n.startswith("device.")}}

    struct_names = {a.name for a, _ in raw_args + raw_host if a.struct is not None}

    def explained(e: SpecError) -> SpecError:
        """An expression's error saying what the name it cannot use is (a device scalar, a float,
        a pointer, a struct, an axis), at the error's place."""
        def error(message: str, hint: str = "") -> SpecError:
            return SpecError(e.loc, e.field, message, hint)

        bad = re.search(r"undefined name '(\w+)'", e.message)
        if bad and bad.group(1) in dev_names:
            return error(f"'{bad.group(1)}' is read on the device; a plan cannot know its value",
                         "use an upper bound from the host (a host argument) in expressions")
        if bad and bad.group(1) in float_names | ptr_names | struct_names:
            kind = "a float" if bad.group(1) in float_names else "a pointer" if bad.group(1) in ptr_names else \
                "a struct argument"
            return error(f"'{bad.group(1)}' is {kind}; expressions use integer arguments only")
        if bad and bad.group(1) in axes:
            kind = _axis_kind(axes[bad.group(1)])
            return error(f"'{bad.group(1)}' is an axis of {_AXIS_KINDS[kind]}; expressions use integer and boolean "
                         "axes only", f"sizeof({bad.group(1)}) gives the bytes of its element type"
                         if kind == "type" else "")
        dotted = re.search(r"undefined name '(kernel\.\w+)'", e.message)
        if dotted and dotted.group(1) in DEVICE_NAMES:  # shared_mem: the device.* names only
            return error(f"'{dotted.group(1)}' is not available here: the occupancy depends on the shared memory",
                         "shared_mem may use the device.* names")
        access = re.search(r"; '(.*)' (?:reads an attribute|calls a method) of '(\w+)'$", e.message) \
            if e.message.startswith(expr.NO_ATTRIBUTES) else None
        owner = access.group(2) if access else None
        if owner in struct_names:
            arg = next(a for a, _ in raw_args + raw_host if a.name == owner)
            return error(*_field_read_error(arg, access.group(1), "calls a method" in e.message))  # type: ignore[union-attr]
        if owner in ptr_names:
            return error(e.message, f"'{owner}' is a pointer: pass its sizes as integer arguments "
                         "(e.g. n: u32) and give it a size (size: n)")
        return e

    written_lets: dict[str, expr.Node] = {}
    try:
        lets = _lets(ctx, f["let"], names, device_names, written_lets, taken) if "let" in f else {}
    except SpecError as e:
        raise explained(e) from None

    def ex(n: YNode, ty: expr.Ty, within: Mapping[str, object] = names) -> expr.Node:
        try:
            tree = _expr(ctx, n, {**within, **lets} if lets else within, ty)
            if lets:
                tree = _inline_lets(ctx, n, tree, lets, within)
            read.update(tree.names())
            return expr.substitute(tree, int_axes)
        except SpecError as e:
            raise explained(e) from None

    def as_written(n: YNode, ty: expr.Ty, within: Mapping[str, object]) -> expr.Node:
        """``n`` with its let names kept (for texts: a clause's reason, the docs' cluster)."""
        return expr.substitute(_expr(ctx, n, {**within, **lets}, ty), int_axes)

    def finish(pairs: list[tuple[Arg, YNode | None]]) -> tuple[Arg, ...]:
        out = []
        for a, size_node in pairs:
            if size_node is not None:
                with ctx.at("host_args" if a.host else "args"), ctx.at(a.name), ctx.at("size"):
                    a = replace(a, size=ex(size_node, expr.Ty.INT))
            out.append(a)
        return tuple(out)

    args, host_args = finish(raw_args), finish(raw_host)
    _check_arg_limits(ctx, f, args, host_args)

    def dims(key: str, within: Mapping[str, object] = names, n: YNode | None = None
             ) -> tuple[expr.Node, expr.Node, expr.Node]:
        with ctx.at(key):
            n = f[key] if n is None else n
            if isinstance(n, YSeq):
                items = _list(ctx, n, lambda i: ex(i, expr.Ty.INT, within), 3)
            else:
                raise ctx.error(n.loc, f"expected a list of 3 expressions [x, y, z], got {_kind(n)}")
            if len(items) != 3:
                texts = [i.value for i in n.items if isinstance(i, YScalar)]
                hint = ""
                if any(isinstance(t, str) and t.count("(") != t.count(")") for t in texts):
                    hint = "quote expressions that contain commas: 'div_ceil(q_len, 128)'"
                raise ctx.error(n.loc, f"expected 3 entries [x, y, z], got {len(items)}", hint)
            return items[0], items[1], items[2]

    grid = dims("grid", device_names)
    block = dims("block")
    on_targets = [t for t in targets if t.name in kernel_targets]
    cluster = _cluster(ctx, f["cluster"], {**constants, **int_axes}) if "cluster" in f else None
    if cluster is not None:
        with ctx.at("cluster"):
            _check_sm90_targets(ctx, f["cluster"].loc, "a compile-time cluster (__cluster_dims__)", on_targets,
                                targets)
            _check_cluster_size(ctx, f["cluster"].loc, cluster, on_targets)
    launch = None
    if "launch" in f:
        with ctx.at("launch"):
            lf = _fields(ctx, f["launch"], schema.LAUNCH)
            modes: dict[str, bool] = {}
            for key_name in ("cooperative", "programmatic_dependent"):
                if key_name in lf:
                    with ctx.at(key_name):
                        modes[key_name] = _bool(ctx, lf[key_name])
            launch_cluster = dims("cluster", names, lf["cluster"]) if "cluster" in lf else None
            cluster_text = None
            if launch_cluster is not None:
                with ctx.at("cluster"):
                    _check_sm90_targets(ctx, lf["cluster"].loc, "a launch-time cluster (launch.cluster)",
                                        on_targets, targets)
                    _check_constant_cluster(ctx, lf["cluster"], launch_cluster, constants, on_targets)
                with ctx.at("cluster"):  # the text of the docs keeps the let names, then defines them
                    shown = [as_written(i, expr.Ty.INT, names) for i in lf["cluster"].items] if lets else launch_cluster
                    cluster_text = _shown_with_lets(shown, written_lets)
            launch = Launch(f["launch"].loc, cluster=launch_cluster, cluster_text=cluster_text, **modes)
            if launch_cluster is not None and cluster is not None:
                raise ctx.error(lf["cluster"].loc, "the kernel has a compile-time 'cluster' (__cluster_dims__); "
                                "a launch-time cluster cannot be added to it",
                                "keep one: 'cluster' for __cluster_dims__, or 'launch.cluster' without the attribute")
            if launch.cooperative and (launch_cluster is not None or cluster is not None):
                raise ctx.error(f["launch"].loc, "a cooperative launch cannot use a cluster",
                                "cooperative kernels synchronise the whole grid; drop the cluster or 'cooperative'")
            if launch.attributes == 0:
                launch = None
    shared_mem: expr.Node = expr.Lit(0)
    if "shared_mem" in f:
        with ctx.at("shared_mem"):
            shared_mem = ex(f["shared_mem"], expr.Ty.INT, smem_names)

    tensor_maps = _tensor_maps(ctx, f["tensor_maps"], args, ex, {**constants, **int_axes},
                               {**taken, **_let_locs(f)}) if "tensor_maps" in f else ()
    params = param_bytes(args, len(tensor_maps))
    if params > MAX_PARAM_BYTES:
        maps = f" and {count(len(tensor_maps), 'tensor map')}" if tensor_maps else ""
        with ctx.at("args"):
            raise ctx.error(f["args"].loc, f"kernel '{name}' takes {params} bytes of parameters (its "
                                           f"args{maps}); CUDA takes at most {MAX_PARAM_BYTES}",
                            "pass large structs through a device pointer to them")
    if tensor_maps:
        with ctx.at("tensor_maps"):
            _check_sm90_targets(ctx, f["tensor_maps"].loc, "a tensor map (the tensor memory accelerator, TMA)",
                                on_targets, targets)

    # the fields' added host arguments as the spec writes them, for the clauses' texts
    field_paths = {alias: expr.Name(path) for path, (alias, arg) in field_names.items() if arg is not None}

    def clauses(key: str) -> tuple[Clause, ...]:
        if key not in f:
            return ()
        with ctx.at(key):
            n = f[key]
            items = n.items if isinstance(n, YSeq) else (n,)
            out = []
            for i, item in enumerate(items):
                with ctx.at(f"[{i}]") if isinstance(n, YSeq) else _nullctx():
                    tree = ex(item, expr.Ty.BOOL, device_names)
                    # the text (a "not launched" reason) keeps the spec's let names and fields
                    shown = as_written(item, expr.Ty.BOOL, device_names) if lets else tree
                    shown = expr.substitute(shown, field_paths)
                    out.append(Clause(tree, expr.to_text(shown), item.loc))
            return tuple(out)

    skip_if, applies_if, requires = clauses("skip_if"), clauses("applies_if"), clauses("requires")
    variants = None
    if "variants" in f:
        with ctx.at("variants"):
            variants = _variants(ctx, f["variants"], int_names, axes)
        if "symbol" in f:
            raise SpecError(f["symbol"].loc, f"kernels.{name}.symbol", "give either 'symbol' or 'variants', not both")
    host_args += tuple(arg for alias, arg in field_names.values() if arg is not None and alias in read)
    all_int = {a.name for a in args + host_args if a.is_int}
    with ctx.at("examples"):
        bool_names = {a.name for a in args + host_args if a.scalar is not None and a.scalar.name == "bool"}
        examples = _examples(ctx, f["examples"], all_int, float_names, bool_names,
                             {path: alias for path, (alias, _) in field_names.items()})
    kernel = Kernel(
        name, loc, symbol, summary, kernel_targets, args, host_args, grid, block, shared_mem,
        skip_if, applies_if, requires, examples, variants,
        cluster, f["cluster"].loc if "cluster" in f else None, doc=doc, launch=launch, tensor_maps=tensor_maps,
        lets=tuple((n, expr.substitute(t, int_axes)) for n, t in lets.items()),
    )
    if kernel.variants and kernel.needs_occupancy:
        where = f["launch"].loc if "launch" in f else f["variants"].loc
        raise ctx.error(where, "kernel.blocks_per_sm (and a cooperative launch) need one __global__ function, "
                        "but the kernel has variants",
                        "use 'instantiate' (one launcher per instance) or one 'symbol'")
    _check_examples_and_limits(ctx, kernel, f, constants, [t for t in targets if t.name in kernel_targets])
    return kernel


# Element sizes a tensor map copies (as unsigned integers of that size).
_TMA_ELEM_BYTES = (1, 2, 4, 8)


def _tensor_maps(ctx: _Ctx, node: YNode, args: tuple[Arg, ...], ex: Callable[[YNode, expr.Ty], expr.Node],
                 constants: Mapping[str, int], taken: Mapping[str, tuple[str, SourceLoc]] | None = None
                 ) -> tuple[TensorMap, ...]:
    """The kernel's ``tensor_maps``: each of a plain array argument, with as many box entries as
    extents; a box entry that is constant is checked here (1..256, the innermost row a multiple of
    16 bytes and within the swizzle span), the others when the launcher encodes the map."""
    from kernelgen.errors import ExprError

    with ctx.at("tensor_maps"):
        node = _filled(ctx, node, YMap, "a mapping of map names to tensor maps",
                       "e.g. tensor_maps: {x_map: {array: x, dims: [m, k], box: [128, 64], swizzle: 128}}")
        by_name = {a.name: a for a in args}
        out: list[TensorMap] = []
        for key, value in node.items:
            name = _ident(ctx, key.loc, key.value, "tensor map name")
            other = _taken_by(ctx, name, taken or {}, constants)
            if other is not None:
                raise ctx.error(key.loc, f"tensor map '{name}' has the name of {other}",
                                "name maps after their array: x_map")
            with ctx.at(name):
                mf = _fields(ctx, value, schema.TENSOR_MAP)
                with ctx.at("array"):
                    array = _str(ctx, mf["array"], "an argument name")
                    a = by_name.get(array)
                    if a is None:
                        raise ctx.error(mf["array"].loc, f"'{array}' is not an argument of the kernel",
                                        did_you_mean(array, [b.name for b in args if b.is_pointer]))
                    if not a.is_pointer or a.indirect or a.device:
                        raise ctx.error(mf["array"].loc, f"'{array}' is {a.spelling}: a tensor map describes an "
                                        "array (a pointer to elements)")
                    assert a.elem is not None
                    elem_bytes = a.elem.bits // 8
                    if a.elem.lanes != 1 or a.elem.bits % 8 or elem_bytes not in _TMA_ELEM_BYTES:
                        raise ctx.error(mf["array"].loc, f"'{array}' has elements of type {a.elem.name}; a tensor "
                                        "map copies plain elements of 1, 2, 4 or 8 bytes",
                                        "describe the array through a pointer of the lane type (u8*, f32*)")
                    if not a.contiguous:
                        raise ctx.error(mf["array"].loc, f"'{array}' is declared contiguous: false; a tensor map "
                                        "describes a contiguous row-major array",
                                        "pass the view's rows as a contiguous array, or read it without a map")

                def exprs(key: str) -> tuple[expr.Node, ...]:
                    with ctx.at(key):
                        n = mf[key]
                        rank = schema.TMA_MAX_RANK
                        n = _filled(ctx, n, YSeq, f"a list of 1 to {rank} expressions, outermost first", "e.g. [n, k]",
                                    optional=False)
                        if len(n.items) > rank:
                            raise ctx.error(n.loc, f"expected a list of 1 to {rank} expressions, outermost first, got "
                                            f"{len(n.items)}", "a tensor map has at most 5 dimensions")
                        return tuple(ex(i, expr.Ty.INT) for i in n.items)

                dims, box = exprs("dims"), exprs("box")
                if len(box) != len(dims):
                    with ctx.at("box"):
                        raise ctx.error(mf["box"].loc, f"the box has {len(box)} entries but 'dims' has {len(dims)}",
                                        "one box entry per extent, outermost first")
                swizzle = 0
                if "swizzle" in mf:
                    with ctx.at("swizzle"):
                        swizzle = _int(ctx, mf["swizzle"])
                        if swizzle not in schema.TMA_SWIZZLES:
                            raise ctx.error(mf["swizzle"].loc, f"swizzle {swizzle}: expected 0, 32, 64 or 128 bytes")
                for i, b in enumerate(box):
                    if b.names() - set(constants):
                        continue
                    bn = mf["box"]
                    where = bn.items[i].loc if isinstance(bn, YSeq) else bn.loc
                    with ctx.at("box"), ctx.at(f"[{i}]"):
                        try:
                            v = int(expr.evaluate(b, constants))
                        except ExprError as exc:
                            raise ctx.error(where, f"cannot evaluate box entry {i}: {exc}") from None
                        if not 1 <= v <= 256:
                            raise ctx.error(where, f"box entry {i} is {v}; each is 1 to 256 elements")
                        if i == len(box) - 1:
                            row = v * elem_bytes
                            if row % 16:
                                raise ctx.error(where, f"the box's innermost entry is {row} bytes; it must be "
                                                "a multiple of 16 bytes")
                            if swizzle and row > swizzle:
                                raise ctx.error(where, f"the box's innermost entry is {row} bytes, more than the "
                                                f"{swizzle}-byte swizzle span", "narrow the box or widen the swizzle")
                _tensor_map_strides(ctx, mf["dims"], dims, elem_bytes, constants)
                out.append(TensorMap(name, key.loc, array, elem_bytes, dims, box, swizzle))
        return tuple(out)


def _tensor_map_strides(ctx: _Ctx, node: YNode, dims: tuple[expr.Node, ...], elem_bytes: int,
                        constants: Mapping[str, int]) -> None:
    """The constant extents of a map's ``dims``: each at least 1, and the row stride (the innermost
    extent times the element size) a multiple of 16 bytes, which the driver requires of every
    stride; a stride that never is would make every launch "not launched" (UNALIGNED). The outer
    strides are multiples of the row stride, so the row decides; extents that are expressions are
    checked when the map is encoded."""
    from kernelgen.errors import ExprError

    with ctx.at("dims"):
        for i, d in enumerate(dims):
            if d.names() - set(constants):
                continue
            try:
                v = int(expr.evaluate(d, constants))
            except ExprError as exc:
                raise ctx.error(node.loc, f"cannot evaluate dims entry {i}: {exc}") from None
            if v < 1:
                raise ctx.error(node.loc, f"dims entry {i} is {v}; each extent is at least 1")
            if i == len(dims) - 1 and len(dims) > 1 and v * elem_bytes % 16:
                per = 16 // math.gcd(16, elem_bytes)
                raise ctx.error(node.loc, f"the map's rows are {v * elem_bytes} bytes ({v} elements of {elem_bytes} "
                                "bytes); TMA needs a row stride that is a multiple of 16 bytes, so every launch "
                                "would be not launched (UNALIGNED)",
                                f"pad the array's rows to a multiple of {per} elements")


@contextmanager
def _nullctx() -> Iterator[None]:
    yield


def _cluster(ctx: _Ctx, node: YNode, constants: dict[str, int]) -> tuple[int, int, int]:
    """``cluster: [x, y, z]``: constant expressions, each at least 1."""
    with ctx.at("cluster"):
        if not isinstance(node, YSeq) or len(node.items) != 3:
            got = f"{len(node.items)} entries" if isinstance(node, YSeq) else _kind(node)
            raise ctx.error(node.loc, f"expected a list of 3 constant expressions [x, y, z], got {got}",
                            "e.g. cluster: [8, 1, 1], as in the kernel's __cluster_dims__(8, 1, 1)")
        out = []
        for i, item in enumerate(node.items):
            with ctx.at(f"[{i}]"):
                try:
                    tree = _expr(ctx, item, constants, expr.Ty.INT)
                except SpecError as e:
                    bad = re.search(r"undefined name '(\w+)'", e.message)
                    if bad:
                        raise ctx.error(
                            item.loc, f"'{bad.group(1)}' is not a constant",
                            _source_name_hint(ctx, bad.group(1)) or "the cluster shape is fixed at compile time: "
                            "use literals, names under 'constants' and integer instantiation axes",
                        ) from None
                    raise
                try:
                    v = int(expr.evaluate(tree, constants))
                except Exception as exc:  # ExprError: division by zero, overflow
                    raise ctx.error(item.loc, f"cannot evaluate the cluster dimension: {exc}") from None
                if v < 1:
                    raise ctx.error(item.loc, f"cluster dimension {v} is less than 1",
                                    "each dimension is at least 1; for a kernel without a cluster, leave 'cluster' out")
                out.append(v)
        return out[0], out[1], out[2]


def _check_sm90_targets(ctx: _Ctx, loc: SourceLoc, what: str, on_targets: Sequence[Target],
                        targets: Sequence[Target]) -> None:
    """``what`` (a cluster, a tensor map) needs compute capability 9.0: none of the kernel's
    targets (``on_targets``, among the project's ``targets``) may be below it, since its build
    would fail (__cluster_dims__) or every launch would."""
    below = next((t for t in on_targets if t.compute_capability < (9, 0)), None)
    if below is None:
        return
    able = [t.name for t in targets if t.compute_capability >= (9, 0)]
    hint = (f"list under 'targets' only targets of compute capability 9.0 and above: {', '.join(able)}"
            if able else "the project has no target of compute capability 9.0 or above: add one to "
            "specs/targets.yaml and list it under 'targets'")
    cc = below.compute_capability
    raise ctx.error(loc, f"{what} needs compute capability 9.0, but the kernel is built for target '{below.name}' "
                    f"({below.arch}, compute capability {cc[0]}.{cc[1]})", hint)


def _check_cluster_size(ctx: _Ctx, loc: SourceLoc, dims: Sequence[int], targets: Sequence[Target],
                        partial: bool = False) -> None:
    """A cluster of ``dims`` (``partial``: a launch-time cluster's constant dimensions, the others
    at least 1) has at most each target's ``max_cluster_size`` blocks."""
    blocks = math.prod(dims)
    for t in targets:
        if blocks > t.max_cluster_size:
            why = ", the portable cluster size the launchers use" if t.max_cluster_size == \
                schema.PORTABLE_CLUSTER_SIZE else ""
            what = (f"the cluster's constant dimensions {list(dims)} make {blocks} blocks" if partial
                    else f"cluster {list(dims)} has {blocks} blocks")
            raise ctx.error(loc, f"{what}, more than target '{t.name}' allows (max_cluster_size "
                            f"{t.max_cluster_size}{why}): every launch would fail with CLUSTER",
                            "make the cluster smaller, or list only the targets that allow it under 'targets'")


def _check_constant_cluster(ctx: _Ctx, node: YNode, dims: Sequence[expr.Node], constants: Mapping[str, int],
                            targets: Sequence[Target]) -> None:
    """``launch.cluster``'s dimensions that are constants (literals, constants, integer axes): each
    at least 1, and together at most each target's ``max_cluster_size`` blocks, else every launch
    would fail with CLUSTER."""
    from kernelgen.errors import ExprError

    known = []
    for i, d in enumerate(dims):
        if not d.names() <= set(constants):
            continue
        loc = node.items[i].loc if isinstance(node, YSeq) else node.loc
        with ctx.at(f"[{i}]"):
            try:
                v = int(expr.evaluate(d, constants))
            except ExprError as exc:
                raise ctx.error(loc, f"cannot evaluate the cluster dimension: {exc}") from None
            if v < 1:
                raise ctx.error(loc, f"cluster dimension {v} is less than 1; every launch would fail with CLUSTER",
                                "each dimension is at least 1; for a kernel without a cluster, leave 'cluster' out")
        known.append(v)
    if known:
        _check_cluster_size(ctx, node.loc, known, targets, partial=len(known) < 3)


# Headers of the C and C++ standard libraries and of the CUDA toolkit that declare no __global__
# function a spec could name (cub and thrust, which do, are not among them): an #include <...> of
# one of them, found in none of the project's include folders, cannot supply a kernel symbol.
_C_HEADERS = frozenset("assert ctype errno float inttypes limits math stdbool stddef stdint stdio stdlib string "
                       "time".split())
_TOOLKIT_HEADER = re.compile(
    r"(?:cuda|cuda_runtime|cuda_runtime_api|cuda_fp16|cuda_bf16|cuda_fp8|cuda_fp6|cuda_fp4|cuda_pipeline|"
    r"cuda_awbarrier|cuda_awbarrier_primitives|cuda_texture_types|cuda_surface_types|cudaTypedefs|mma|"
    r"cooperative_groups|device_launch_parameters|device_functions|vector_types|vector_functions|"
    r"builtin_types|driver_types|sm_\d+_intrinsics|crt/[\w/]+|cooperative_groups/[\w/]+)\.h(?:pp)?"
    r"|cuda/(?:std/)?[a-z_]+|cooperative_groups|[a-z_]+")  # the last: the C++ library's <cstdint>, <type_traits>
_ANY_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]*)"|<([^>\n]*)>|([^\n]*))', re.M)
_MACRO_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)((?:[^\n\\]|\\.|\\\n)*)", re.M)
MAX_SCANNED_FILES = 200  # files read for the symbol check: the sources and the project files they include


@dataclass(frozen=True)
class _Declared:
    """What the module's sources and the project files they include declare, as far as their
    text tells: the ``__global__`` functions' qualified names, and why the text may not be all
    (an include that cannot be read, a macro that may declare a kernel), or ""."""

    names: tuple[str, ...]
    macros: frozenset[str]
    unsure: str


def _declared(ctx: _Ctx) -> _Declared:
    """The module's sources read with the project files their ``#include``s reach (looked up as
    the compiler does: quoted ones beside the including file, then in the project root, then in
    the include folders; ``<...>`` ones in the root and the folders)."""
    if ctx.declared is not None:
        return ctx.declared
    root = ctx.root or Path(".")
    top = root.resolve()
    folders = [root / d if not d.startswith("/") else Path(d) for d in ctx.include_dirs]
    texts: dict[str, str] = dict(ctx.sources)
    todo = list(texts)
    unsure: list[str] = []
    while todo and not unsure:
        path = todo.pop(0)
        text = kernel_source.strip_comments(texts[path])
        for m in _ANY_INCLUDE.finditer(text):
            quoted, angled, other = m.group(1), m.group(2), m.group(3)
            line = text.count("\n", 0, m.start()) + 1
            if other is not None:
                unsure.append(f"{path}:{line} includes a file named by a macro")
                break
            name = (quoted or angled or "").strip()
            where = ([root / posixpath.dirname(path)] if quoted is not None else []) + [root, *folders]
            found = next((d / name for d in where if (d / name).is_file()), None)
            if found is None:
                if angled is not None and (_TOOLKIT_HEADER.fullmatch(name) or name.removesuffix(".h") in _C_HEADERS):
                    continue  # the toolkit's or the standard library's
                unsure.append(f"{path}:{line} includes {m.group(0).split('include', 1)[1].strip()}, which is "
                              "not a file of the project")
                break
            resolved = found.resolve()
            if not resolved.is_relative_to(top):
                unsure.append(f"{path}:{line} includes {name} from outside the project ({resolved})")
                break
            rel = resolved.relative_to(top).as_posix()
            if rel in texts:
                continue
            if len(texts) >= MAX_SCANNED_FILES:
                unsure.append(f"the sources include more than {MAX_SCANNED_FILES} files")
                break
            try:
                texts[rel] = resolved.read_text(encoding="utf-8", errors="replace")
            except OSError:
                unsure.append(f"{path}:{line} includes {name}, which cannot be read")
                break
            todo.append(rel)
    sources = list(texts.items())
    macros: set[str] = set()
    stripped = [(path, kernel_source.strip_comments(raw)) for path, raw in sources]
    for path, text in stripped:
        for m in _MACRO_DEFINE.finditer(text):
            macros.add(m.group(1))
            if not unsure and re.search(r"\b__global__\b", m.group(2)):
                line = text.count("\n", 0, m.start()) + 1
                unsure.append(f"{path}:{line} defines macro {m.group(1)}, which may declare __global__ functions")
    decls = kernel_source.source_global_decls(sources)  # kernel-declaring macros expanded
    named = next((f"{p} declares a __global__ function named by macro {d.name}" for p, d in decls
                  if d.name in macros), "")
    counted = sum(len(re.findall(r"\b__global__\b", text)) for _, text in stripped)
    if not unsure and named:
        unsure.append(named)
    if not unsure and counted > len(decls):
        unsure.append("a __global__ declaration of the sources is not plain text")
    ctx.declared = _Declared(tuple(dict.fromkeys(d.qualified for _, d in decls)), frozenset(macros),
                             unsure[0] if unsure else "")
    return ctx.declared


_WARNED: set[str] = set()  # warnings printed in this process


def _warn(text: str) -> None:
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"kernelgen: warning: {text}", file=sys.stderr)


def _check_declared(ctx: _Ctx, symbol: str, loc: SourceLoc, default: bool = False) -> None:
    """``symbol`` (a kernel's ``symbol``, a variant's, or the launcher name where the kernel gives
    neither: ``default``) names a ``__global__`` function of the module's sources or of the
    project files they include: one of its last name must be declared there (its namespaces
    are the build's to check). Where that text may not be all the compiler sees (an include
    kernelgen cannot read, a macro that may declare kernels) a missing declaration is a warning,
    printed once; where the sources declare no __global__ function at all, nothing is said (the
    build reports the symbol)."""
    base = kernel_source.symbol_base(symbol)
    if base in ctx.symbols_checked:
        return
    ctx.symbols_checked.add(base)
    found = _declared(ctx)
    if not found.names or base in found.macros or any(n.split("::")[-1] == base for n in found.names):
        return
    paths = [p for p, _ in ctx.sources]
    where = f"{', '.join(paths)} or the project files {'they include' if len(paths) > 1 else 'it includes'}"
    if default:
        message = (f"the kernel gives no 'symbol', so it launches its own name, '{symbol}', which is not a "
                   f"__global__ function of {where}")
    else:
        message = f"'{symbol}' is not a __global__ function of {where}"
    names = list(found.names)
    close = difflib.get_close_matches(base, [n.split("::")[-1] for n in names], n=1, cutoff=0.6)
    if close or len(names) == 1:
        full = next(n for n in names if n.split("::")[-1] == close[0]) if close else names[0]
        hint = (f"did you mean '{full}'? it is a __global__ function of the sources" if not default else
                f"give it 'symbol: {full}', the sources' __global__ function")
    else:
        hint = f"the sources declare __global__ {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}"
        if default:
            hint += "; give the kernel 'symbol: <its __global__ function>'"
    if found.unsure:
        _warn(f"{loc}: {ctx.field}: {message}; {hint}. kernelgen cannot be sure: {found.unsure} (the build "
              "will tell)")
        return
    raise ctx.error(loc, message, hint)


def _check_sources(ctx: _Ctx, k: Kernel) -> tuple[Kernel, str | None]:
    """What the declarations of each symbol the kernel launches say in the module's sources (read
    from their text, the symbol looked up with its namespaces; see kernel_source for what is read):
    their ``__cluster_dims__`` equals the spec's ``cluster``, and their parameters are the spec's
    ``args`` and tensor maps where the text decides (:func:`_check_params`). Returns the kernel with
    its ``__launch_bounds__`` (the smallest over its symbols) and which declaration gives it
    ("'sym' at path:line"), or None where none is known."""
    bounds: list[tuple[tuple[int, int], str]] = []
    symbols = [s for _, s in k.variants.symbols] if k.variants else [k.symbol]
    want = k.cluster
    where = k.cluster_loc or k.loc
    field = "cluster" if k.cluster else "symbol"
    with ctx.at(k.name):
        for sym in symbols:
            with ctx.at(field):
                try:
                    decls = kernel_source.global_declarations(ctx.sources, sym)
                except kernel_source.LookupUndecided as exc:
                    if want is None:
                        continue  # nothing the sources must confirm; the launcher checks the compiled limits
                    raise ctx.error(where, f"cannot tell which declaration's __cluster_dims__ '{sym}' has: {exc}",
                                    "spell the symbol with the namespaces its declaration is written in") from None
                except kernel_source.SourceScanError as exc:
                    raise ctx.error(
                        where, f"cannot read __cluster_dims__ of '{sym}': {exc}",
                        "write __cluster_dims__(x, y, z) on the kernel's declaration with integer literals or names "
                        "defined by #define or constexpr in the sources",
                    ) from None
                _check_cluster_of(ctx, k, sym, decls, where)
            bounds += [(d.launch_bounds, f"'{sym}' at {d.where}") for d in decls if d.launch_bounds is not None]
            _check_params(ctx, k, sym, decls)
    if not bounds:
        return k, None
    least = min(bounds)
    return replace(k, launch_bounds=least[0]), least[1]


def _check_cluster_of(ctx: _Ctx, k: Kernel, sym: str, decls: list[kernel_source.Declaration],
                      where: SourceLoc) -> None:
    """``sym``'s declarations (``decls``) carry the spec's ``cluster`` as ``__cluster_dims__``."""
    want = k.cluster
    if not decls:
        if want is None:
            return
        others = kernel_source.same_name_declarations(ctx.sources, sym)
        also = f"; they declare __global__ {kernel_source.declared_text(others)}" if others else ""
        raise ctx.error(
            where, f"cannot find the __global__ definition of '{sym}' in the sources "
            f"({', '.join(p for p, _ in ctx.sources)}) to check its __cluster_dims__{also}",
            "spell the symbol with the namespaces its declaration is written in" if others else
            "list the file that defines the kernel under 'sources', or remove 'cluster'",
        )
    declared = [d for d in decls if d.cluster is not None]
    if want is None:
        if declared:
            d = declared[0]
            dims = ", ".join(map(str, d.cluster or ()))
            raise ctx.error(
                where, f"'{sym}' is declared with __cluster_dims__({dims}) at {d.where}, "
                "but the spec declares no cluster",
                f"add 'cluster: [{dims}]' to kernel '{k.name}'",
            )
        return
    if not declared:
        d = decls[0]
        raise ctx.error(
            where, f"kernel '{k.name}' declares cluster {list(want)}, but '{sym}' at {d.where} "
            "has no __cluster_dims__ attribute",
            f"add __cluster_dims__({', '.join(map(str, want))}) to the kernel's definition, or remove 'cluster'",
        )
    for d in declared:
        if d.cluster != want:
            raise ctx.error(
                where, f"kernel '{k.name}' declares cluster {list(want)}, but '{sym}' at {d.where} "
                f"has __cluster_dims__({', '.join(map(str, d.cluster or ()))})",
                "make the spec's cluster and the kernel's __cluster_dims__ agree",
            )


def _check_params(ctx: _Ctx, k: Kernel, sym: str, decls: list[kernel_source.Declaration]) -> None:
    """The spec's ``args`` and tensor maps against the parameter lists of ``sym``'s declarations,
    where their text decides: a number of parameters that none of them takes (every list read), or,
    where every declaration spells one list, a parameter whose type the registry knows and that is
    not the spec's argument's (integers of one size and signedness are one type; the spec's
    ``void*`` takes any pointer with its const). The build checks every parameter with the compiler."""
    lists = [d.params for d in decls]
    if not lists or any(ps is None for ps in lists):
        return
    spec = [f"{a.spelling} {a.name}" for a in k.args] + [f"const CUtensorMap {t.name}" for t in k.tensor_maps]
    d = decls[0]
    params = d.params or ()
    if all(len(ps or ()) != len(spec) for ps in lists):
        maps = [(i, p) for i, p in enumerate(params) if p.tensor_map]
        hint = "make the spec's args list the kernel's parameters, in order, with the same types"
        if len(maps) > len(k.tensor_maps):
            shown = ", ".join(f"{i + 1} ('{p.text}')" for i, p in maps)
            hint = (f"the kernel's parameter{'s' if len(maps) > 1 else ''} {shown} "
                    f"{'are TMA descriptors' if len(maps) > 1 else 'is a TMA descriptor'}: describe "
                    f"{'each' if len(maps) > 1 else 'it'} under tensor_maps ({maps[-1][1].name or 'name'}: "
                    "{array: <pointer argument>, dims: [...], box: [...]}), which the launcher encodes for each "
                    "launch and passes after the args, in that order")
        others = " (nor does any other of its declarations)" if len({len(ps or ()) for ps in lists}) > 1 else ""
        base = ctx.args_over.get(k.instance_of or k.name)
        if base is not None:
            hint += (f"; this kernel's args replace those of '{base}', which it extends, whole "
                     "(extends does not merge mappings): list every argument")
        with ctx.at("args"):
            raise ctx.error(
                k.loc, f"the __global__ declaration of '{sym}' at {d.where} takes "
                f"{len(params)} parameter{'' if len(params) == 1 else 's'} ({', '.join(p.text for p in params)})"
                f"{others}, but the spec "
                f"gives {len(spec)} ({', '.join(spec)})", hint)
    if len(params) != len(spec) or len({tuple((p.base, p.const, p.pointers) for p in ps or ()) for ps in lists}) > 1:
        return  # overloads: the build picks the one taking the spec's types
    for i, (a, p) in enumerate(zip(k.args, params)):
        theirs = p.spec_type
        if a.struct is not None or theirs is None:
            continue
        ours = f"const {a.elem.name}*" if a.device and a.elem is not None else a.spelling
        if ours == theirs or (a.elem is not None and a.elem.any_dtype and not a.indirect and not a.device
                              and len(p.pointers) == 1 and p.const == a.const):
            continue
        cpp = a.cpp_pointer if a.is_pointer else (a.scalar.cpp if a.scalar is not None else "")
        with ctx.at("args"), ctx.at(a.name):
            raise ctx.error(
                a.loc, f"argument '{a.name}' (parameter {i + 1}: {a.spelling}, {cpp} in C++) is not the type of "
                f"parameter {i + 1} of '{sym}' at {d.where}, '{p.text}' ({theirs} in the spec's terms)",
                f"give the argument the kernel's type, {theirs}; integers of one size and signedness may be spelled "
                "either way (long long for i64), and a pointer keeps its const")
    for j, t in enumerate(k.tensor_maps):
        p = params[len(k.args) + j]
        if p.spec_type is not None:
            with ctx.at("tensor_maps"), ctx.at(t.name):
                raise ctx.error(
                    t.loc, f"tensor map '{t.name}' (parameter {len(k.args) + j + 1}) is not a CUtensorMap parameter "
                    f"of '{sym}' at {d.where}: the kernel's is '{p.text}' ({p.spec_type} in the spec's terms)",
                    "declare it const __grid_constant__ CUtensorMap, after the args, in the order of tensor_maps")


def _check_launch_bounds(ctx: _Ctx, k: Kernel, constants: Mapping[str, int], bounded_by: str | None) -> None:
    """A block over the kernel's ``__launch_bounds__`` in an example where it launches is an error;
    ``bounded_by`` names the declaration the bound is read from."""
    from kernelgen.errors import ExprError

    if k.launch_bounds is None:
        return
    limit = k.launch_bounds[0]
    for i, ex in enumerate(k.examples):
        env = dict(ex) | dict(constants)
        try:
            if not _example_applies(k, env):
                continue
            block = [int(expr.evaluate(b, env)) for b in k.block]
        except ExprError:
            continue
        threads = block[0] * block[1] * block[2]
        if threads > limit:
            with ctx.at(k.name), ctx.at("block"):
                raise ctx.error(
                    k.loc, f"example {i} launches a block of {threads} threads, but {bounded_by} is declared with "
                    f"__launch_bounds__({limit}{', ' + str(k.launch_bounds[1]) if k.launch_bounds[1] else ''})",
                    "a kernel compiled for at most that many threads cannot launch a larger block: shrink the block "
                    "or raise the kernel's __launch_bounds__",
                )


def _on_host(c: Clause) -> bool:
    """Whether a clause is known without the device (it names no device.* or kernel.* value)."""
    return not any("." in n for n in c.expr.names())


def _example_applies(k: Kernel, env: Mapping[str, int], device: Mapping[str, int] | None = None) -> bool:
    """Whether the kernel's clauses let it launch for ``env``. Clauses naming the device are
    evaluated with ``device`` (a target's table, as the generated tests use) where it is given,
    and taken to hold otherwise; clauses naming ``kernel.*`` (occupancy, known only at launch)
    always hold."""
    def known(c: Clause) -> bool:
        return _on_host(c) or (device is not None and not any(n.startswith("kernel.") for n in c.expr.names()))

    full = {**env, **(device or {})}
    if any(known(c) and expr.evaluate(c.expr, full) for c in k.skip_if):
        return False
    if any(known(c) and not expr.evaluate(c.expr, full) for c in k.applies_if + k.requires):
        return False
    return not (k.variants and env[k.variants.on] not in dict(k.variants.symbols))


def _symbol(ctx: _Ctx, node: YNode, axes: Mapping[str, str | int]) -> str:
    s = _subst(ctx, node.loc, _str(ctx, node, "a __global__ function name"), axes, cpp=True)
    try:
        return symbols.parse(s, CPP_KEYWORDS).text
    except symbols.SymbolError as exc:
        raise ctx.error(
            node.loc, f"{s!r} is not a C++ function name or template-id: {exc}",
            "an enum value is written by its qualified name (k<Act::Relu>), or by an instantiate axis of "
            "enumerators (ACT: [Act::Relu, Act::Gelu] with k<{ACT}>)" if "keyword" in str(exc) else
            "e.g. my_kernel, ns::my_kernel<256>, act_kernel<SiluOp, __nv_bfloat16> or k<true, &fn>",
        ) from None


def _variants(ctx: _Ctx, node: YNode, int_names: Mapping[str, object], axes: Mapping[str, str | int]) -> Variants:
    f = _fields(ctx, node, schema.VARIANTS)
    with ctx.at("arg"):
        on = _str(ctx, f["arg"], "an integer argument name")
        if on not in int_names:
            raise ctx.error(f["arg"].loc, f"'{on}' is not an integer argument", did_you_mean(on, list(int_names)))
    with ctx.at("symbols"):
        sn = _filled(ctx, f["symbols"], YMap, "a mapping of values to __global__ function names",
                     f"e.g. symbols: {{64: {on}_64_kernel, 128: {on}_128_kernel}}",
                     optional=False)
        pairs = []
        ty = getattr(int_names[on], "scalar", None)
        for key, value in sn.items:
            if not isinstance(key.value, int) or isinstance(key.value, bool):
                raise ctx.error(key.loc, f"variant keys are integer values of '{on}', got {_kind(key)}")
            lo, hi = getattr(ty, "lo", None), getattr(ty, "hi", None)
            if lo is not None and hi is not None and not lo <= key.value <= hi:
                raise ctx.error(key.loc, f"variant key {key.value} is not a value of '{on}' "
                                         f"({getattr(ty, 'name', ty)}: {lo}..{hi})")
            if key.value > pyexpr.INT64_MAX:  # plans compare in int64 (a u64 above converts with an overflow)
                raise ctx.error(key.loc, f"variant key {key.value} is above {pyexpr.INT64_MAX} (2**63 - 1): "
                                         f"plans compare '{on}' as a 64-bit signed integer, so no call reaches it")
            with ctx.at(str(key.value)):
                sym = _symbol(ctx, value, axes)
                _check_declared(ctx, sym, value.loc)
                pairs.append((key.value, sym))
    return Variants(on, tuple(sorted(pairs)), node.loc)


def _examples(
    ctx: _Ctx, node: YNode, int_names: set[str], float_names: set[str],
    bool_names: frozenset[str] | set[str] = frozenset(), fields: Mapping[str, str] | None = None,
) -> tuple[tuple[tuple[str, int], ...], ...]:
    """The kernel's examples; ``fields``: struct fields that expressions read (p.rows), an example
    may give by the field's path, and the host arguments standing for them."""
    def one(n: YNode) -> dict[str, int]:
        if not isinstance(n, YMap):
            raise ctx.error(n.loc, f"expected a mapping of integer arguments to values, got {_kind(n)}")
        out = {}
        for key, value in n.items:
            k = str(key.value)
            k = (fields or {}).get(k, k)
            if k in float_names:  # allowed for readability; plans do not depend on floats
                if not isinstance(value, YScalar) or not isinstance(value.value, (int, float)) or isinstance(
                    value.value, bool
                ):
                    raise ctx.error(value.loc, f"'{k}' is a float; expected a number, got {_kind(value)}")
                continue
            if k in bool_names:
                if isinstance(value, YScalar) and isinstance(value.value, bool):
                    out[k] = int(value.value)
                    continue
                if not (isinstance(value, YScalar) and type(value.value) is int):  # an integer: its range below
                    raise ctx.error(value.loc, f"'{k}' is a bool; expected true, false, 0 or 1, got {_kind(value)}")
            if k not in int_names:
                raise ctx.error(key.loc, f"'{k}' is not an integer argument",
                                _dropped_hint(ctx, k) or did_you_mean(k, int_names))
            with ctx.at(k):
                out[k] = _int(ctx, value, -(1 << 63), (1 << 64) - 1)
        return out

    items = _list(ctx, node, one, schema.MAX_EXAMPLES)
    if not items:
        raise ctx.error(node.loc, "at least one example is needed")
    shown = {alias: path for path, alias in (fields or {}).items()}
    missing = sorted(shown.get(n, n) for n in int_names - set(items[0]))
    if missing:
        raise ctx.error(node.loc, f"the first example must give every integer argument; missing '{missing[0]}'")
    full = []
    for e in items:  # later examples inherit what they leave out from the first
        merged = {**items[0], **e}
        full.append(tuple(sorted(merged.items())))
    return tuple(full)


def _check_examples_and_limits(
    ctx: _Ctx, k: Kernel, f: dict[str, YNode], constants: dict[str, int], targets: list[Target]
) -> None:
    """Check argument ranges and clauses on the examples, and device limits per target."""
    from kernelgen.errors import ExprError

    for i, ex in enumerate(k.examples):
        env = dict(ex)
        loc = f["examples"].items[i].loc if isinstance(f["examples"], YSeq) else f["examples"].loc
        with ctx.at(f"examples[{i}]"):
            for a in k.int_args:
                assert a.scalar is not None and a.scalar.lo is not None
                if not a.scalar.lo <= env[a.name] <= a.scalar.hi:  # type: ignore[operator]
                    raise ctx.error(loc, f"{a.name}={env[a.name]} does not fit {a.scalar.name}")
            env.update(constants)
            if i == 0:
                try:
                    for c in k.skip_if:
                        if _on_host(c) and expr.evaluate(c.expr, env):
                            raise ctx.error(loc, f"the first example must launch, but skip_if '{c.text}' holds")
                    for c in k.applies_if + k.requires:
                        if _on_host(c) and not expr.evaluate(c.expr, env):
                            raise ctx.error(loc, f"the first example must launch, but '{c.text}' fails")
                    if k.variants and env[k.variants.on] not in dict(k.variants.symbols):
                        raise ctx.error(loc, f"the first example's {k.variants.on} has no variant")
                except ExprError as exc:
                    raise ctx.error(loc, f"cannot evaluate the clauses: {exc}") from None
    # Device limits: block size and shared memory, wherever they are known at generation
    # time (constants), or over the examples where the kernel applies and variant values otherwise.
    envs = []  # (env, which: the example, or the variant value, the limits are checked for)
    for i, e in enumerate(k.examples):
        env = dict(e) | constants
        which = f"examples[{i}] ({', '.join(f'{n}={v}' for n, v in dict(e).items())})"
        try:
            if _example_applies(k, env):
                envs.append((env, which))
        except ExprError:
            envs.append((env, which))
    if k.variants:
        envs += [(dict(k.examples[0]) | constants | {k.variants.on: v}, f"examples[0] with {k.variants.on}={v}")
                 for v, _ in k.variants.symbols]
    _check_sizes(ctx, k, envs)
    _check_tensor_map_sizes(ctx, k, envs)
    from kernelgen import plan  # the targets' device values, for shared_mem's device names

    for t in targets:
        device = plan.device_env(plan.target_table(t))
        for env, which in envs:
            try:
                if not _example_applies(k, env, device):
                    continue  # a clause turns it away on this target's table
            except ExprError:
                pass
            try:
                block = [int(expr.evaluate(b, env)) for b in k.block]
                smem = int(expr.evaluate(k.shared_mem, env | device))
            except ExprError as exc:
                raise ctx.error(f["block"].loc, f"cannot evaluate block/shared_mem for {env}: {exc}") from None
            for axis, (b, lim) in enumerate(zip(block, t.max_block_dims)):
                if not 1 <= b <= lim:
                    with ctx.at(f"block[{axis}]"):
                        raise ctx.error(f["block"].loc, f"block dimension {b} is outside 1..{lim} on target "
                                                        f"'{t.name}' for {which}")
            if block[0] * block[1] * block[2] > t.max_threads_per_block:
                with ctx.at("block"):
                    raise ctx.error(
                        f["block"].loc,
                        f"{block[0] * block[1] * block[2]} threads per block exceeds "
                        f"{t.max_threads_per_block} on target '{t.name}' for {which}",
                    )
            if smem < 0:
                with ctx.at("shared_mem"):
                    raise ctx.error(f["shared_mem"].loc, f"shared_mem is {smem} bytes for {which}"
                                    f"{' on target ' + repr(t.name) if _names_device(k.shared_mem) else ''}: "
                                    "dynamic shared memory cannot be negative",
                                    "make the expression 0 or more wherever the kernel launches")
            if smem > t.max_shared_mem_per_block_optin:
                with ctx.at("shared_mem"):
                    raise ctx.error(
                        f.get("shared_mem", f["block"]).loc,
                        f"{smem} bytes of dynamic shared memory exceeds the {t.max_shared_mem_per_block_optin}-byte "
                        f"opt-in limit of target '{t.name}' ({t.arch}) for {which}",
                        "shrink the tiles, or list only the targets that fit under 'targets'",
                    )
    _check_first_example_launches(ctx, k, f, constants, targets)


def _names_device(tree: expr.Node) -> bool:
    return any("." in n for n in tree.names())


def _check_sizes(ctx: _Ctx, k: Kernel, envs: Sequence[tuple[dict[str, int], str]]) -> None:
    """Each pointer argument's ``size`` is 0 or more over the examples where the kernel applies:
    the bindings compare the arrays passed against it, so a negative size is a check that
    cannot pass. (Arithmetic errors are the plans' to report.)"""
    from kernelgen.errors import ExprError

    for a in k.all_args:
        if a.size is None or a.device:
            continue
        for env, which in envs:
            try:
                v = int(expr.evaluate(a.size, env))
            except (ExprError, KeyError):
                continue
            if v < 0:
                with ctx.at("host_args" if a.host else "args"), ctx.at(a.name), ctx.at("size"):
                    raise ctx.error(a.loc, f"the size of '{a.name}' is {v} for {which}: a size cannot be negative",
                                    f"make '{expr.to_text(a.size)}' 0 or more wherever the kernel launches")


def _check_tensor_map_sizes(ctx: _Ctx, k: Kernel, envs: Sequence[tuple[dict[str, int], str]]) -> None:
    """A tensor map covers no more elements than its array's ``size`` over the examples where the
    kernel applies: the launchers check the arrays passed against the size, while the copies read
    the whole extent of the map. (An array without a size is not checked.)"""
    from kernelgen.errors import ExprError

    by_name = {a.name: a for a in k.all_args}
    for t in k.tensor_maps:
        a = by_name[t.array]
        if a.size is None:
            continue
        for env, which in envs:
            try:
                dims = [int(expr.evaluate(d, env)) for d in t.dims]
                size = int(expr.evaluate(a.size, env))
            except (ExprError, KeyError):
                continue
            covered = math.prod(dims)
            if min(dims) >= 1 and covered > size:
                shown = " * ".join(f"({expr.to_text(d)})" if isinstance(d, expr.Bin) else expr.to_text(d)
                                   for d in t.dims)
                with ctx.at("tensor_maps"), ctx.at(t.name):
                    raise ctx.error(t.loc, f"tensor map '{t.name}' covers {covered} elements of '{a.name}' "
                                    f"({' * '.join(map(str, dims))}) for {which}, but the size of '{a.name}' is "
                                    f"{size} ('{expr.to_text(a.size)}'): its copies would read past the arrays the "
                                    "launchers accept",
                                    f"give '{a.name}' a size that covers the map (size: {shown})")


def array_sizes(k: Kernel, env: Mapping[str, int]) -> tuple[dict[str, int], tuple[str, int] | None]:
    """The element counts of the kernel's arrays that have a ``size`` (device scalars left out),
    as the launchers compute them for ``env`` (the integer arguments and the module's constants):
    in 64-bit arithmetic, a u64 argument above 2**63 - 1 an overflow. Returns (sizes, failure):
    the failure is (the array whose size failed first, its KG_EXPR_* code), or None."""
    out: dict[str, int] = {}
    for a in k.all_args:
        if a.size is None or not a.is_pointer or a.device:
            continue
        st = pyexpr.Status()
        full = dict(env)
        for n in a.size.names():
            v = full.get(n)
            if isinstance(v, int) and v > pyexpr.INT64_MAX:
                full[n] = pyexpr.from_u64(st, v)
        v = expr.evaluate(a.size, full, st)
        if st.code:
            return out, (a.name, st.code)
        out[a.name] = int(v)
    return out, None


def _expr_error_text(code: int) -> str:
    """A KG_EXPR_* code in words ("division by zero")."""
    from kernelgen import plan

    return next((text for v, text in plan.EXPR_ERRORS.values() if v == code), "invalid value")


def _check_first_example_values(ctx: _Ctx, k: Kernel, f: dict[str, YNode], env: Mapping[str, int],
                                 loc: SourceLoc, t: Target, block: Sequence[int], smem: int) -> None:
    """The first example, which launches on target ``t``, gives every array size and every ``let``
    a value: a size that fails makes every call with those arguments fail (ArgumentError), and a
    let that fails (even one no expression uses) shows as an error in the plans."""
    from kernelgen import plan, pyexpr

    by_name = {a.name: a for a in k.all_args}
    _, failed = array_sizes(k, env)
    if failed is not None:
        name, code = failed
        a = by_name[name]
        with ctx.at("examples[0]"):
            raise ctx.error(loc, f"the first example must launch, but the size of '{name}' "
                            f"('{expr.to_text(a.size)}') cannot be computed for it: "  # type: ignore[arg-type]
                            f"{_expr_error_text(code)}; the launchers refuse every call "
                            "with these arguments (computing the array sizes)",
                            "fix the example or the size expression")
    if not k.lets:
        return
    table = plan.target_table(t)
    full = dict(env) | plan.device_env(table)
    full["kernel.blocks_per_sm"] = plan.table_blocks_per_sm(table, [int(b) for b in block], int(smem))
    lets = f.get("let")
    locs = {str(key.value): value.loc for key, value in lets.items} if isinstance(lets, YMap) else {}
    for name, tree in k.lets:
        st = pyexpr.Status()
        expr.evaluate(tree, full, st)
        if st.code:
            with ctx.at("let"), ctx.at(name):
                raise ctx.error(locs.get(name, loc), f"'{name}' cannot be computed for examples[0] on target "
                                f"'{t.name}': {_expr_error_text(st.code)}",
                                "each let must have a value for the first example; fix the expression, the "
                                "example, or remove a let that nothing uses")


def _code_name(c: int) -> str:
    """``code NAME, detail D`` of a plan's outcome."""
    from kernelgen import plan

    table = plan.ERRORS if c < 0 else plan.NOT_LAUNCHED
    cat, det = plan.category(c), plan.detail(c)
    name = next((n for n, (v, _) in table.items() if v == cat), "?")
    return f"code {name}, detail {det}"


def _check_first_example_launches(
    ctx: _Ctx, k: Kernel, f: dict[str, YNode], constants: dict[str, int], targets: list[Target]
) -> None:
    """The first example launches on every target of the kernel, grid included, as the
    generated plan computes it (its own integer conversions, checked arithmetic and limits)."""
    from kernelgen import cases, plan

    clauses, variant, geometry = cases._evaluators(k)
    env = dict(k.examples[0]) | constants
    loc = f["examples"].items[0].loc if isinstance(f["examples"], YSeq) else f["examples"].loc
    for t in targets:
        c, grid, block, smem = plan.expect(clauses, env, u64=cases.u64_in_expressions(k), variant=variant,
                                           geometry=geometry, limits=cases.target_limits(t),
                                           device=plan.target_table(t),
                                           occupancy=cases._block_smem(k) if k.needs_occupancy else None)
        if c != plan.LAUNCHED:
            shown = f" (grid {list(grid)}, block {list(block)}, shared memory {smem})" if grid[0] is not None else ""
            said = plan.describe(k, c, t.name, shared_mem=smem if isinstance(smem, int) else None,
                                 max_shared_mem=t.max_shared_mem_per_block_optin,
                                 grid=grid if grid[0] is not None else None,
                                 block=block if block[0] is not None else None,
                                 expression=plan.failed_expression(k, c, env, plan.target_table(t)))
            with ctx.at("examples[0]"):
                if not said.startswith(("not launched", "error")):
                    said = f"{'error' if c < 0 else 'not launched'}: {said}"
                hint = ("fix the example or the expressions: the first example launches on every target the "
                        f"kernel is built for ({', '.join(x.name for x in targets)}); a kernel for some of them "
                        "lists those under targets, and an example for one target's limits goes after the first"
                        if len(targets) > 1 else "fix the example or the expressions")
                raise ctx.error(loc, f"the first example must launch, but on target '{t.name}' its plan says "
                                     f"{said} ({_code_name(c)}){shown}", hint)
        _check_first_example_values(ctx, k, f, env, loc, t, block, smem)  # type: ignore[arg-type]


def _fallbacks(ctx: _Ctx, node: YNode, module: str, kernels: set[str]) -> list[Fallback]:
    if not isinstance(node, YMap):
        raise ctx.error(node.loc, f"expected a mapping of chain names to kernel lists, got {_kind(node)}")
    out = []
    for key, value in node.items:
        name = _ident(ctx, key.loc, key.value, "fallback name")
        if name in kernels:
            raise ctx.error(key.loc, f"fallback '{name}' has the name of a kernel",
                            f"rename one of them: the chain, or the kernel, keeping the __global__ function it "
                            f"launches with symbol: {name} unless it gives symbol already")
        with ctx.at(name):
            def ref(n: YNode) -> KernelRef:
                s = _str(ctx, n, "a kernel name or module.kernel")
                parts = s.split(".")
                if len(parts) == 1:
                    return KernelRef(module, _ident(ctx, n.loc, parts[0], "kernel name"), n.loc)
                if len(parts) == 2:
                    return KernelRef(
                        _ident(ctx, n.loc, parts[0], "module name", _MODULE),
                        _ident(ctx, n.loc, parts[1], "kernel name"), n.loc,
                    )
                raise ctx.error(n.loc, f"{s!r} is not a kernel name or module.kernel")
            members = tuple(_list(ctx, value, ref, schema.MAX_CHAIN))
            if len(members) < 2:
                raise ctx.error(value.loc, "a fallback chain needs at least two kernels")
            for i, m in enumerate(members):
                j = next(j for j, x in enumerate(members) if x.qualname == m.qualname)
                if j != i:
                    also = f"item {j}" if members[j].loc.line == m.loc.line else f"line {members[j].loc.line}"
                    with ctx.at(f"[{i}]"):
                        raise ctx.error(m.loc, f"kernel '{m.kernel if m.module == module else m.qualname}' appears "
                                        f"twice in the chain (also {also})",
                                        "a chain tries each kernel once: remove one")
            out.append(Fallback(name, key.loc, members))
    return out


def check_fallbacks(catalog: Catalog) -> None:
    """Chains name kernels that exist, whose same-named arguments agree.

    Two members agree on an argument they share when it is a scalar in both, of the same
    scalar type (or float types both: the chain takes a double), or a pointer in both; pointers
    may differ in element type (the chain then picks members by the dtypes of the arrays passed)
    and in const-ness (the chain's argument is writable when any member writes it)."""
    for m in catalog.modules:
        for fb in m.fallbacks:
            seen: dict[str, tuple[Arg, str]] = {}
            for ref in fb.members:
                owner = catalog.module(ref.module)
                if owner is None:
                    raise SpecError(ref.loc, f"fallbacks.{fb.name}", f"unknown module '{ref.module}'",
                                    did_you_mean(ref.module, [x.name for x in catalog.modules]))
                k = owner.kernel(ref.kernel)
                if k is None:
                    chain = next((c for c in owner.fallbacks if c.name == ref.kernel), None)
                    if chain is not None:
                        what = (f"chain '{fb.name}' names itself" if chain is fb and ref.module == m.name else
                                f"'{ref.kernel}' is a fallback chain" + (
                                    f" of module '{ref.module}'" if ref.module != m.name else
                                    f" (line {chain.loc.line})"))
                        kernels = ", ".join(r.kernel if r.module == m.name else r.qualname for r in chain.members)
                        raise SpecError(ref.loc, f"fallbacks.{fb.name}", f"{what}: a chain's members are kernels",
                                        f"remove '{ref.kernel}'" if chain is fb else
                                        f"list the kernels of '{ref.kernel}' instead: {kernels}")
                    raise SpecError(
                        ref.loc, f"fallbacks.{fb.name}", f"module '{ref.module}' has no kernel '{ref.kernel}'",
                        did_you_mean(ref.kernel, [x.name for x in owner.kernels]),
                    )
                for a in k.all_args:
                    if a.implicit:  # a stateless functor: the member's launcher passes it, the chain does not
                        continue
                    if a.struct is not None and ref.module != m.name:
                        raise SpecError(
                            ref.loc, f"fallbacks.{fb.name}",
                            f"argument '{a.name}' of {ref.qualname} is a struct of module '{ref.module}'",
                            "a chain takes struct arguments only from kernels of its own module",
                        )
                    if a.name in seen:
                        b, where = seen[a.name]
                        if a.is_pointer != b.is_pointer or (not a.is_pointer and a.scalar != b.scalar and not (
                                a.scalar and b.scalar and a.scalar.name in FLOAT_SCALARS
                                and b.scalar.name in FLOAT_SCALARS)) or (
                                _layout(a.struct) != _layout(b.struct)) or (
                            a.is_pointer and (a.indirect or b.indirect or a.elem.any_dtype or b.elem.any_dtype)
                            and (a.indirect, a.elem, a.inner_const) != (b.indirect, b.elem, b.inner_const)
                        ):
                            raise SpecError(
                                ref.loc, f"fallbacks.{fb.name}",
                                f"argument '{a.name}' is {a.spelling} in {ref.qualname} but {b.spelling} in {where}",
                                "members of a chain must agree on the arguments they share: the same scalar "
                                "type (float types may differ: the chain takes a double), or pointers in both "
                                "(whose element types and const-ness may differ; "
                                "void* and pointer arrays must be the same in every member)",
                            )
                        if a.source_text != b.source_text:  # ("" where the launcher takes it)
                            def how(x: Arg, who: str) -> str:
                                return (f"read from {x.source_text} in {who}" if x.derived
                                        else f"taken by the launcher in {who}")
                            raise SpecError(
                                ref.loc, f"fallbacks.{fb.name}",
                                f"host argument '{a.name}' is {how(a, ref.qualname)} but {how(b, where)}",
                                "members of a chain that share a host argument read it from the same struct field "
                                "('from'), or all take it",
                            )
                    seen.setdefault(a.name, (a, ref.qualname))
        for fb in (*m.fallbacks, *m.dispatches):
            _check_union_limits(catalog, fb)


def _check_union_limits(catalog: Catalog, fb: Fallback) -> None:
    """A chain's or dispatcher's launcher, which takes the union of its members' arguments
    (model.chain_arguments), stays within the bindings' limits on arguments and struct bytes."""
    kernels = []
    for ref in fb.members:
        owner = catalog.module(ref.module)
        k = owner.kernel(ref.kernel) if owner is not None else None
        assert k is not None
        kernels.append(k)
    union = chain_arguments(kernels)
    what, where = (f"dispatcher '{fb.name}' of the instances", f"kernels.{fb.name}") if fb.dispatch else (
        f"chain '{fb.name}'", f"fallbacks.{fb.name}")
    if len(union) > MAX_LAUNCHER_ARGS:
        raise SpecError(fb.loc, where, f"the {what} takes the union of its members' arguments, {len(union)} "
                                       f"arguments; a launcher takes at most {MAX_LAUNCHER_ARGS}",
                        "give the members the same names for the same values, or split the chain")
    n = launcher_struct_bytes(list(union.values()))
    if n > MAX_LAUNCHER_STRUCT_BYTES:
        raise SpecError(fb.loc, where, f"the {what} takes the union of its members' arguments, struct arguments "
                                       f"of {n} bytes; a launcher takes at most {MAX_LAUNCHER_STRUCT_BYTES}",
                        "give the members the same names for the same structs, or pass large structs through a "
                        "device pointer")


def _layout(st: Struct | None) -> tuple[object, ...] | None:
    """What two struct types must share to be one chain argument: the C++ type and the layout."""
    if st is None:
        return None
    return (st.cpp, st.size, st.align,
            tuple((f.name, f.spelling, f.offset, _layout(f.struct)) for f in st.fields))
