"""The C++ launchers: the only place that spells C++ (types, expressions, launches).

Files per module: ``src/<module>.cu`` (plans, the launch of each kernel, the kernel sources
included, the C ABI's definitions) and ``include/<namespace>/<module>.h`` (the C++ API).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

from kernelgen import expr, names, types
from kernelgen.emit import c
from kernelgen.emit.base import ModuleView, render, stamp
from kernelgen.escape import c_string, comment_text
from kernelgen.lower import CArg, LChain, LKernel, LModule
from kernelgen.model import Catalog, Struct, StructField
from kernelgen.plan import NL_NO_INSTANCE, NL_NO_VARIANT, code
from kernelgen.types import ElemType, ScalarKind, ScalarType

# The folder beside a package's API headers (include/<header_dir>/) that holds its struct headers and the
# project's headers they include, at their paths under include/ (kernelgen.emit.cmake installs them).
STRUCT_HEADER_DIR = "kg_headers"


def struct_header_include(header: str) -> str:
    """The API header's include of struct header ``header`` (its path under include/): the package's
    copy beside the API header where it is installed (a quoted include is looked up beside the
    including file first, so each package's API header gets its own copy whatever a program's
    include path holds), else the project's file, in the project's own build."""
    own = f"{STRUCT_HEADER_DIR}/{header}"
    return "\n".join([f'#if __has_include("{own}")  // installed: the package\'s copy, beside this header',
                      f'#include "{own}"', "#else  // the project's build", f'#include "{header}"', "#endif"])


_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)[ \t]*([^\n]*?)[ \t]*$", re.M)
_IFNDEF = re.compile(r"(?:ifndef[ \t]+(\w+)|if[ \t]*![ \t]*defined[ \t]*(?:\([ \t]*(\w+)[ \t]*\)|[ \t]+(\w+)))")


def pragma_once_only(text: str) -> bool:
    """Whether a header's text is protected from a second inclusion by ``#pragma once`` only: it
    has one, and no include guard (``#ifndef NAME`` or ``#if !defined(NAME)`` followed by ``#define
    NAME`` as its first directives other than ``#pragma once``)."""
    text = _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else " ", text)
    directives = [(m.group(1), " ".join(m.group(2).split())) for m in _DIRECTIVE.finditer(text)]
    once = ("pragma", "once")
    if once not in directives:
        return False
    rest = [d for d in directives if d != once]
    if len(rest) < 2 or rest[1][0] != "define":
        return True
    guard = _IFNDEF.fullmatch(" ".join(rest[0]))
    name = next((g for g in guard.groups() if g), None) if guard else None
    return name is None or rest[1][1].split(" ")[0] != name


def struct_header_warnings(catalog: Catalog, root: Path) -> list[str]:
    """A warning for each struct header, and each of the project's headers it includes that the
    package copies beside the API headers (include/<header_dir>/kg_headers/...), which is protected by
    ``#pragma once`` only. The API header includes the copy; a program that includes the project's
    own file too gets the file at two paths, which ``#pragma once`` tells apart, so its definitions
    twice ("redefinition of 'struct ...'"); an include guard (a macro) holds for both."""
    copies = f"{catalog.naming.header_dir}/{STRUCT_HEADER_DIR}"
    out: list[str] = []
    seen: set[str] = set()
    for m in catalog.modules:
        for st in m.structs:
            if not st.header:
                continue
            for src, dest in st.files or ((st.header, st.header),):
                if src in seen:
                    continue
                seen.add(src)
                try:
                    text = (root / src).read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                if not pragma_once_only(text):
                    continue
                via = "its header" if src == st.header else f"a header its header {st.header} includes"
                guard = re.sub(r"\W", "_", src).upper()
                out.append(f"{st.loc}: struct '{st.name}' (module '{m.name}'): {src}, {via}, is protected by "
                           f"#pragma once only; the package installs a copy of it (include/{copies}/{dest}) that "
                           "the C++ API header includes, and #pragma once tells files apart by their path, so a "
                           f"program that includes both the project's {src} and the API header gets its definitions "
                           f"twice (redefinition of 'struct ...'); give {src} an include guard: #ifndef {guard} / "
                           f"#define {guard} at its top and #endif at its end (#pragma once may stay)")
    return out


def pointer_type(elem: ElemType, const: bool) -> str:
    return f"{'const ' if const else ''}{elem.cpp}*"


def struct_cpp(cpp: str) -> str:
    """A struct's C++ type, qualified from the global namespace."""
    return "::" + cpp.removeprefix("::")


def struct_alias(name: str) -> str:
    """The launcher file's alias of a struct type's C++ type, which its layout checks name."""
    return f"kg_struct_{name}"


def _field_where(st: Struct, fld: StructField) -> str:
    """The start of a layout check's message about field ``fld`` of ``st``: its spec line."""
    return f"kernelgen: {fld.loc}: struct '{st.name}' (C++ {st.cpp}): field '{fld.name}'"


def _layout_checks(st: Struct, alias: str, where: str, c_struct: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The declarations and the (condition, message) static_asserts that check struct ``st``'s
    fields against its C++ type ``alias``: each field's member exists (all first, so that a missing
    one is reported by its field before the compiler's own errors on the checks naming it), then
    per field in order its offset, size and type (a scalar's kind, as kernel parameters are compared:
    kg::same_param; a nested struct's type), then the type's
    alignment, size, and that its bytes are its value. Numbers are compared through kg_layout,
    whose instantiation shows nvcc's value beside the spec's (kernelgen build adds it to the message)."""
    has = f"kg_has_{st.name}"
    decls = [f"template <int kg_field, class kg_t, class = void> struct {has} : std::false_type {{}};  "
             "// whether kg_t has field kg_field's member"]
    checks = []
    for i, fld in enumerate(st.fields):
        decls.append(f"template <class kg_t> struct {has}<{i}, kg_t, std::void_t<decltype(kg_t::{fld.member})>> "
                     ": std::true_type {};")
        named = f"public member '{fld.member}'" + (" (the field's cpp)" if fld.cpp else "")
        checks.append((f"{has}<{i}, {alias}>::value",
                       f"{_field_where(st, fld)}: the C++ type has no {named}; name the field after the C++ member "
                       "it is (or give cpp: the member's name); a member that is itself a struct is one field, "
                       "whose type is a struct declared under structs"))
    for fld in st.fields:
        fwhere = _field_where(st, fld)
        checks.append((f"kg_layout<{fld.offset}, offsetof({alias}, {fld.member})>::same",
                       f"{fwhere} is not at offset {fld.offset}, as the spec lays it out; declare the fields in the "
                       "C++ order with the members' types (a member aligned beyond its size, such as a CUtensorMap, "
                       "is a field of a struct type with that align)"))
        checks.append((f"kg_layout<{fld.size}, sizeof({alias}::{fld.member})>::same",
                       f"{fwhere} is not {fld.size} bytes ({fld.spelling})"))
        if fld.scalar is not None:  # of that size, the spec's kind of value (f32 is not u32)
            member = f"std::remove_cv_t<std::remove_all_extents_t<decltype({alias}::{fld.member})>>"
            same = f"kg::same_param<{member}, {fld.scalar.cpp}>::value"
            if fld.scalar.bits == 64 and fld.scalar.kind in (ScalarKind.SIGNED, ScalarKind.UNSIGNED):
                same = f"({same} || std::is_pointer_v<{member}>)"  # a device address: u64 holds a pointer member
            checks.append((same,
                           f"{fwhere} is declared {fld.spelling} ({fld.scalar.cpp} in C++), but the C++ member is of "
                           "another type; give the field the member's type (integers of one size and signedness may be "
                           "spelled either way, an enum for its underlying type)"))
        if fld.struct is not None:
            member = f"std::remove_cv_t<std::remove_all_extents_t<decltype({alias}::{fld.member})>>"
            checks.append((f"std::is_same_v<{member}, {struct_alias(fld.struct.name)}>",
                           f"{fwhere} is a {fld.spelling}, but the C++ member's type is not {fld.struct.cpp} (struct "
                           f"'{fld.struct.name}'); give the field the struct type whose cpp is the member's type"))
    checks += [
        (f"kg_layout<{st.align}, alignof({alias})>::same",
         f"{where}: the C++ type's alignment is not {st.align}, as the spec's fields and align give it; give the "
         "struct the C++ type's alignment (align)"),
        (f"kg_layout<{st.size}, sizeof({alias})>::same",
         f"{where}: the C++ type is not {st.size} bytes, as the spec lays it out; where the checks of the fields' "
         f"offsets pass, it has members after field '{st.fields[-1].name}': declare them as fields"),
        # Its bytes are its value (a launch copies the parameter's bytes): CUDA's own __half2 and
        # __nv_bfloat162 declare copy operations, so they are not trivially copyable, but they are
        # standard-layout and trivially destructible.
        (f"std::is_standard_layout_v<{alias}> && std::is_trivially_destructible_v<{alias}> && "
         f"std::is_default_constructible_v<{alias}>",
         f"{where}: a struct passed by value must be standard-layout, trivially destructible and "
         "default-constructible (its bytes are its value)"),
        (f"sizeof({alias}) == sizeof({c_struct})", f"{where}: the C ABI's struct differs in size"),
    ]
    return decls, checks


def cpp_type(a: CArg) -> str:
    """The C++ API's type: typed pointers (untyped where a chain's element type is a key; a
    pointer declared read_only is taken as const, as the kernel only reads it), the kernel's own
    C++ type for structs."""
    if a.is_pointer:
        assert a.elem is not None
        if a.untyped:
            return c.c_type(a)
        if a.indirect:
            inner = "const " if a.arg.inner_const else ""
            return f"{inner}{a.elem.cpp}*{' const' if a.reads_only else ''}*"
        return pointer_type(a.elem, a.reads_only)
    if a.struct is not None:
        return struct_cpp(a.struct.cpp)
    assert a.scalar is not None
    return a.scalar.cpp


# The C++ integer types of the type registry: the kernel may spell them otherwise.
_INTEGER_CPP = frozenset(f"{s}int{b}_t" for s in ("", "u") for b in (8, 16, 32, 64))


def _cast_arg(a: CArg) -> bool:
    """An argument the kernel may spell as another type, passed through kg::arg as its own: an
    integer, a pointer to integers (device scalars included), or untyped memory (void*, which the
    kernel may take as a pointer to any object type)."""
    if a.is_pointer:
        return a.arg.elem is not None and (a.arg.elem.cpp in _INTEGER_CPP or (
            a.arg.elem.any_dtype and not a.arg.indirect))
    return a.scalar is not None and a.scalar.cpp in _INTEGER_CPP


def kernel_type(a: CArg) -> str:
    """The type of the __global__ function's parameter."""
    if a.is_pointer:
        return a.arg.cpp_pointer
    if a.struct is not None:
        return struct_cpp(a.struct.cpp)
    assert a.scalar is not None
    return a.scalar.cpp


def to_kernel(a: CArg) -> str:
    """The API's value as the kernel's parameter (a const_cast for read_only pointers)."""
    if a.is_pointer and a.arg.read_only:
        return f"const_cast<{kernel_type(a)}>({a.name})"
    if a.arg.implicit:
        return f"{kernel_type(a)}{{}}"
    return a.name


def cpp_param(a: CArg) -> str:
    return f"{cpp_type(a)} {a.name}"


def from_c(a: CArg) -> str:
    """Expression converting the C ABI parameter to the C++ API type."""
    if a.struct is not None:
        return f"kg::struct_from_c<{cpp_type(a)}>({a.name})"
    if a.is_pointer:
        return f"static_cast<{cpp_type(a)}>({a.name})"
    assert a.scalar is not None
    if a.scalar.as_bits:
        return f"kg::from_bits<{a.scalar.cpp}>({a.name})"
    return a.name


def name_map(u64: set[str], constants: set[str]) -> Callable[[str], str]:
    """How a plan's C++ reads a name in an expression: constants as they are, u64 arguments
    through their checked int64 copy, everything else widened to int64."""
    def m(n: str) -> str:
        if n in constants:
            return n
        if n == "kernel.blocks_per_sm":
            return "kg_blocks_per_sm"
        if n.startswith("device."):
            return f"kg_dev.{n.removeprefix('device.')}"
        if n in u64:
            return f"kg_i64_{n}"
        return f"int64_t{{{n}}}"
    return m


class CppKernel(c.CKernel):
    @functools.cached_property
    def _names(self) -> Callable[[str], str]:
        return name_map(set(self.ir.u64_int_args), {name for name, _ in self.m.constants})

    def _cpp(self, n: expr.Node) -> str:
        return expr.to_cpp(n, self._names)

    @property
    def name_literal(self) -> str:
        return c_string(self.ir.name)

    @property
    def variant_on_literal(self) -> str:
        return c_string(self.ir.variant_on) if self.ir.variant_on else "nullptr"

    @property
    def variant_on_cpp(self) -> str | None:
        if not self.ir.variant_on:
            return None
        return self._names(self.ir.variant_on)

    @property
    def cpp_params(self) -> str:
        return "".join(f"{cpp_param(a)}, " for a in self.ir.args)

    @property
    def derived_lines(self) -> list[str]:
        """The host integers read from struct arguments' fields (``from``), as the launcher's
        local variables."""
        return [f"const {a.scalar.cpp} {a.name} = {a.arg.source}."
                + ".".join(f.member for f in a.arg.source_fields) + ";" for a in self.ir.derived]

    @property
    def sizes_params(self) -> str:
        """The parameters of the C++ API's sizes_<kernel>: the plan's."""
        return self.plan_params

    @property
    def sizes_args(self) -> str:
        """The C sizes function's arguments from sizes_<kernel>'s parameters, each followed by ", "."""
        return "".join(f"{a.name}, " for a in self.ir.int_args)

    @property
    def _tensor_map_args(self) -> list[CArg]:
        """What encoding the tensor maps reads: the launcher's arguments but its structs (whose
        types the sources, included after, complete), then the host integers read from them."""
        return [a for a in self.ir.args if a.struct is None] + list(self.ir.derived)

    @property
    def tensor_map_params(self) -> str:
        """The parameters of the launcher's tensor-map encoding, each followed by ", "."""
        return "".join(f"{cpp_param(a)}, " for a in self._tensor_map_args)

    @property
    def tensor_map_arg_names(self) -> str:
        """The launcher's values for them, each followed by ", "."""
        return "".join(f"{a.name}, " for a in self._tensor_map_args)

    @property
    def int_arg_names(self) -> str:
        return ", ".join(a.name for a in self.ir.int_args)

    @property
    def casts_args(self) -> bool:
        """Whether an argument is an integer or a pointer to integers, which the kernel may spell
        otherwise (long long* for i64*) or take as an enum: the launch passes it through kg::arg
        as parameter i of kg_f, the kernel's type."""
        return any(_cast_arg(a) for a in self.ir.kernel_args)

    def kernel_arg_names(self) -> str:
        """The kernel's parameters: its arguments, then its tensor maps (``kg_tm[i]``)."""
        out = [f"kg::arg<kg_f, {i}>({to_kernel(a)})" if _cast_arg(a) else to_kernel(a)
               for i, a in enumerate(self.ir.kernel_args)]
        return ", ".join(out + [f"kg_tm[{i}]" for i in range(len(self.ir.tensor_maps))])

    @property
    def tensor_map_lines(self) -> list[tuple[str, str, str, str, int, int, int]]:
        """Per tensor map: (name, array, extents, box, element bytes, rank, swizzle), the extents and
        box as C++ initialiser lists (outermost first)."""
        return [(t.name, t.array, ", ".join(self._cpp(d) for d in t.dims), ", ".join(self._cpp(b) for b in t.box),
                 t.elem_bytes, len(t.dims), t.swizzle) for t in self.ir.tensor_maps]

    @property
    def c_to_cpp_args(self) -> str:
        return "".join(f"{from_c(a)}, " for a in self.ir.args)

    @property
    def signature_cpp(self) -> str:
        """The __global__ function's type that the spec declares."""
        return "void (*)(" + ", ".join([kernel_type(a) for a in self.ir.kernel_args]
                                       + ["CUtensorMap"] * len(self.ir.tensor_maps)) + ")"

    @property
    def grid_cpp(self) -> tuple[str, ...]:
        return tuple(self._cpp(n) for n in self.ir.grid)

    @property
    def block_cpp(self) -> tuple[str, ...]:
        return tuple(self._cpp(n) for n in self.ir.block)

    @property
    def smem_cpp(self) -> str:
        return self._cpp(self.ir.shared_mem)

    @property
    def occupancy_exprs(self) -> tuple[str, ...]:
        """Block x, y, z and shared memory, for kernel.blocks_per_sm."""
        return (*self.block_cpp, self.smem_cpp)

    @property
    def launch_cluster_cpp(self) -> tuple[str, ...]:
        assert self.ir.launch_cluster is not None
        return tuple(self._cpp(n) for n in self.ir.launch_cluster)

    @property
    def launch_check_call(self) -> str:
        """kg::check_launch for this kernel (its arguments as the plan has them)."""
        ir = self.ir
        cluster = "kg_p.cluster" if (ir.cluster is not None or ir.launch_cluster is not None) else "nullptr"
        sm_count = "kg_dev.sm_count" if ir.cooperative else "0"
        blocks = "kg_blocks_per_sm" if ir.cooperative else "0"
        return (f"kg::check_launch(kg_p, {ir.max_threads}, {cluster}, {ir.max_cluster_size}, "
                f"{'true' if ir.cooperative else 'false'}, {sm_count}, {blocks})")

    def fn_ptr(self, sym: str) -> str:
        """The kernel ``sym`` names, as a function pointer: the global-scope constant that
        kernel_vars defines for it."""
        return "::" + self._var_of[sym]

    @property
    def _var_of(self) -> dict[str, str]:
        return {sym: f"kg_kernel_{self.ir.name}_{i}" for i, (sym, _) in enumerate(self.symbol_slots)}

    def fn_type(self, sym: str) -> str:
        """The type of the function pointer fn_ptr(sym) (its constant's, without const)."""
        return f"std::remove_const_t<decltype({self.fn_ptr(sym)})>"

    @property
    def kernel_vars(self) -> list[tuple[str, str, str]]:
        """Per symbol: the name of the global-scope constant holding the kernel as a function pointer
        (the overload taking the spec's parameters where the symbol is overloaded: kg::pick in
        runtime.h), the expression, and the comment naming the spec's kernel that follows it (read back
        by the build's diagnosis of a symbol that does not compile). The symbol is looked up at global
        scope, as the spec spells it: from the launchers' namespace (<package>::<module>), a template
        argument act::Relu would find <package>::act first."""
        where = comment_text(f"kernelgen: {self.ir.spec}: kernel '{self.ir.name}': parameters "
                             f"({self.ir.signature_text})")
        return [(var, f"kg::pick<kg_signature_{self.ir.name}>(&{sym}, 0)", where) for sym, var in self._var_of.items()]

    def launch_lines(self, sym: str) -> list[str]:
        """The statements launching ``sym`` with the plan ``kg_p``: <<<>>> for a plain launch (the
        launcher then reads cudaGetLastError), or cudaLaunchKernelEx with the launch attributes,
        returning its outcome."""
        ir = self.ir
        args = self.kernel_arg_names()
        alias = [f"using kg_f = {self.fn_type(sym)};  // its parameter types, for kg::arg"] \
            if self.casts_args else []
        if not ir.launch_ex:
            return alias + [f"{self.fn_ptr(sym)}<<<kg::dims(kg_p.grid), kg::dims(kg_p.block), "
                            f"static_cast<std::size_t>(kg_p.shared_mem), stream>>>({args});"]
        nattrs = int(ir.cooperative) + int(ir.programmatic_dependent) + int(ir.launch_cluster is not None)
        out = alias + [f"cudaLaunchAttribute kg_attrs[{nattrs}];"]
        i = 0
        if ir.cooperative:
            out += [f"kg_attrs[{i}].id = cudaLaunchAttributeCooperative;", f"kg_attrs[{i}].val.cooperative = 1;"]
            i += 1
        if ir.programmatic_dependent:
            out += [f"kg_attrs[{i}].id = cudaLaunchAttributeProgrammaticStreamSerialization;",
                    f"kg_attrs[{i}].val.programmaticStreamSerializationAllowed = kg::pdl_disabled() ? 0 : 1;"]
            i += 1
        if ir.launch_cluster is not None:  # evaluated (and checked) by the plan
            out += [f"kg_attrs[{i}].id = cudaLaunchAttributeClusterDimension;",
                    f"kg_attrs[{i}].val.clusterDim.x = static_cast<unsigned>(kg_p.cluster[0]);",
                    f"kg_attrs[{i}].val.clusterDim.y = static_cast<unsigned>(kg_p.cluster[1]);",
                    f"kg_attrs[{i}].val.clusterDim.z = static_cast<unsigned>(kg_p.cluster[2]);"]
            i += 1
        out += [
            "cudaLaunchConfig_t kg_cfg = {};",
            "kg_cfg.gridDim = kg::dims(kg_p.grid);",
            "kg_cfg.blockDim = kg::dims(kg_p.block);",
            "kg_cfg.dynamicSmemBytes = static_cast<std::size_t>(kg_p.shared_mem);",
            "kg_cfg.stream = stream;",
            "kg_cfg.attrs = kg_attrs;",
            f"kg_cfg.numAttrs = {i};",
            f"return {{kg::launch_error_ex(cudaLaunchKernelEx(&kg_cfg, {self.fn_ptr(sym)}"
            f"{', ' if args else ''}{args})), "
            f"&kg_info_{ir.name}}};",
        ]
        return out

    @property
    def size_lines(self) -> list[tuple[int, str, str]]:
        return [(slot, name, self._cpp(n)) for slot, name, n in self.ir.sizes]

    @property
    def symbol_slots(self) -> list[tuple[str, str]]:
        if self.ir.variants:
            return [("::" + v.symbol, v.slot) for v in self.ir.variants]
        return [("::" + self.ir.symbol, self.ir.slot)]

    @property
    def mismatch_messages(self) -> list[str]:
        """Per symbol: the message when the kernel takes another number of parameters (the
        signature text lists the args, then the tensor maps, one parameter each)."""
        count = len(self.ir.kernel_args) + len(self.ir.tensor_maps)
        return [
            c_string(
                f"kernelgen: {self.ir.spec}: kernel '{self.ir.name}': the __global__ definition of {sym.lstrip(':')} "
                f"does not take the spec's {count} parameter{'s' if count != 1 else ''} ({self.ir.signature_text}); "
                "make the spec's args list the kernel's parameters, in order, with the same types"
                + (", then one const __grid_constant__ CUtensorMap per tensor map" if self.ir.tensor_maps else "")
            )
            for sym, _ in self.symbol_slots
        ]

    def param_checks(self, sym: str) -> list[tuple[int, str]]:
        """Per parameter of ``sym``: its index and the message when its type is not the spec's."""
        out = []
        for i, a in enumerate(self.ir.kernel_args):
            out.append((i, c_string(
                f"kernelgen: {a.arg.loc}: kernel '{self.ir.name}': argument '{a.name}' (parameter {i + 1}: "
                f"{a.spelling}, {kernel_type(a)} in C++) is not the type of parameter {i + 1} of the __global__ "
                f"definition of {sym.lstrip(':')}; give the argument the kernel's type (integers of one size and "
                "signedness may be spelled either way, long long for i64, an enum for its underlying type; a pointer "
                "keeps its const)"
            )))
        for j, t in enumerate(self.ir.tensor_maps):
            i = len(self.ir.kernel_args) + j
            out.append((i, c_string(
                f"kernelgen: {t.loc}: kernel '{self.ir.name}': tensor map '{t.name}' (parameter {i + 1}) is not a "
                f"CUtensorMap parameter of the __global__ definition of {sym.lstrip(':')}; declare it "
                "const __grid_constant__ CUtensorMap, after the args, in the order of tensor_maps"
            )))
        return out

    @property
    def clause_lists(self) -> list[tuple[str, list[str]]]:
        return [
            (f"kSkip_{self.ir.name}", [c_string(t) for t in self.ir.skip_texts]),
            (f"kApplies_{self.ir.name}", [c_string(t) for t in self.ir.applies_texts]),
            (f"kRequires_{self.ir.name}", [c_string(t) for t in self.ir.requires_texts]),
        ]

    @property
    def info_lists(self) -> str:
        return ", ".join(name if texts else "nullptr" for name, texts in self.clause_lists)

    @property
    def steps_counts(self) -> str:
        return f"{len(self.ir.skip_texts)}, {len(self.ir.applies_texts)}, {len(self.ir.requires_texts)}"

    @property
    def device_scalars(self) -> list[tuple[str, int]]:
        """(name, position) of the device scalars, checked before the launch."""
        return [(a.name, i) for i, a in enumerate(self.ir.args) if a.device]

    @property
    def zero_lines(self) -> list[tuple[str, int, str]]:
        """(pointer, size slot, bytes from the element count kg_sizes[slot]) per zeroed pointer."""
        out = []
        for a, slot in self.ir.zeros:
            e = a.elem
            per, unit = e.per_storage, e.storage_bits // 8
            n = f"kg_sizes[{slot}]"
            count = n if per == 1 else f"(({n} + {per}) - 1) / {per}"
            out.append((a.name, slot, f"static_cast<size_t>({count}) * {unit}u"))
        return out

    @property
    def symbol_copies(self) -> list[dict[str, str]]:
        """Host arguments copied into __constant__ variables: the variable, the value, its size,
        and the build-time check's message."""
        out = []
        for a in self.ir.symbol_copies:
            var = "::" + a.to_symbol.removeprefix("::")
            size = a.struct.size if a.struct is not None else a.scalar.bits // 8
            msg = c_string(
                f"kernelgen: {a.arg.loc}: kernel '{self.ir.name}': host argument '{a.name}': to_symbol "
                f"'{a.to_symbol}' must name a __constant__ variable of the sources of the size of {a.spelling} "
                f"({size} bytes)"
            )
            out.append({"var": var, "name": a.name, "size": str(size), "message": msg})
        return out

    @property
    def steps(self) -> list[dict[str, object]]:
        return [
            {"family": s.family.name, "cpp": self._cpp(s.expr), "code_cpp": s.code_cpp,
             "decides_when": s.decides_when, "comment": comment_text(s.text)}
            for s in self.ir.steps
        ]


class CppChain(c.CChain):
    @property
    def name_literal(self) -> str:
        return c_string(self.ir.name)

    @property
    def cpp_params(self) -> str:
        return "".join(f"{cpp_param(a)}, " for a in self.ir.args)

    @property
    def sizes_params(self) -> str:
        """The parameters of the C++ API's sizes_<chain>: the plan's, without the kernel index."""
        return (self.plan_params + self.key_params).removesuffix(", ")

    @property
    def sizes_args(self) -> str:
        """The C sizes function's arguments from sizes_<chain>'s parameters, each followed by ", "."""
        return self.int_arg_names_comma + self.key_names

    @property
    def int_arg_names_comma(self) -> str:
        return "".join(f"{a.name}, " for a in self.ir.int_args)

    @property
    def c_to_cpp_args(self) -> str:
        return "".join(f"{from_c(a)}, " for a in self.ir.args)

    @property
    def key_names(self) -> str:
        return "".join(f"{k.param}, " for k in self.ir.keys)

    @property
    def key_names_literal(self) -> str:
        return c_string(", ".join(k.name for k in self.ir.keys))

    def member_arg(self, i: int, name: str, given: ScalarType | None = None) -> str:
        """Argument ``name`` as member ``i`` takes it: a double the chain takes for members of
        different float types, narrowed to this member's (``given``: the caller's type, when it is
        not the chain's double)."""
        own = self.ir.member_scalars[i].get(name) if self.ir.member_scalars else None
        if own is None or (given is not None and given.name == own.name):
            return name
        return narrow_call(name, own)

    @property
    def member_calls(self) -> list[str]:
        return [
            f"{names.cpp_launcher(mod, kernel)}(" + "".join(f"{self.member_arg(i, n)}, " for n in args) + "stream)"
            for i, ((mod, kernel), args) in enumerate(zip(self.ir.members, self.ir.member_args))
        ]

    @property
    def member_plans(self) -> list[str]:
        return [
            f"{names.cpp_plan(mod, kernel)}(" + ", ".join(args) + ")"
            for (mod, kernel), args in zip(self.ir.members, self.ir.member_int_args)
        ]

    @property
    def member_sizes_calls(self) -> list[tuple[str, list[tuple[int, int]]]]:
        union_slot = {a.name: a.size_slot for a in self.ir.args}
        out = []
        for (mod, kernel), args, slots in zip(self.ir.members, self.ir.member_int_args, self.ir.member_sizes):
            call = f"{names.c_function(mod, kernel, 'sizes')}(" + "".join(f"{n}, " for n in args) + "kg_member)"
            out.append((call, [(union_slot[name], s) for s, name in slots]))
        return out

    def member_match(self, i: int) -> str:
        """Condition: member ``i`` takes element types the key masks accept."""
        conds = [f"({k.param} & (1u << {k.member_elems[i]})) != 0" for k in self.ir.keys if k.member_elems[i]]
        return " && ".join(conds) or "true"

    @property
    def member_matches(self) -> list[str]:
        return [self.member_match(i) for i in range(len(self.ir.members))]

    @property
    def generic_calls(self) -> list[tuple[str, str]]:
        """(condition, call) per member, for the launcher taking untyped pointers and key masks."""
        varying = {self.ir.args[i].name for k in self.ir.keys for i in k.args}
        out = []
        for i, ((mod, kernel), arg_names) in enumerate(zip(self.ir.members, self.ir.member_args)):
            ptr_types = {a.name: cpp_type(a) for a in self.ir.member_ptr_args[i]}
            args = "".join(f"static_cast<{ptr_types[n]}>({n}), " if n in varying else f"{self.member_arg(i, n)}, "
                           for n in arg_names)
            out.append((self.member_match(i), f"{names.cpp_launcher(mod, kernel)}({args}stream)"))
        return out

    @property
    def overloads(self) -> list[tuple[str, list[str]]]:
        """C++ overloads by pointer type: (parameter list, member calls) per distinct tuple of
        the keys' element types, each trying the members that take those types, in order."""
        keys = self.ir.keys
        tuples: list[tuple[int, ...]] = []
        for i in range(len(self.ir.members)):
            t = tuple(k.member_elems[i] for k in keys)
            if all(t) and t not in tuples:
                tuples.append(t)
        out = []
        for t in tuples:
            elem_of_arg = {self.ir.args[a].name: types.ELEM_TYPES[e - 1] for k, e in zip(keys, t) for a in k.args}
            members = [i for i in range(len(self.ir.members)) if all(k.member_elems[i] in (0, e)
                                                                       for k, e in zip(keys, t))]
            # A float scalar the members of this overload take in one type is taken in that type.
            scalars = [self.ir.member_scalars[i] for i in members] if self.ir.member_scalars else []
            own = {n: sc for n, sc in (scalars[0].items() if scalars else ())
                   if all(other[n].name == sc.name for other in scalars)}
            params = ""
            for a in self.ir.args:
                if a.name in elem_of_arg:
                    params += f"{pointer_type(elem_of_arg[a.name], a.reads_only)} {a.name}, "
                elif a.name in own:
                    params += f"{own[a.name].cpp} {a.name}, "
                else:
                    params += f"{cpp_param(a)}, "
            calls = [f"{names.cpp_launcher(*self.ir.members[i])}("
                     + "".join(f"{self.member_arg(i, n, own.get(n))}, " for n in self.ir.member_args[i]) + "stream)"
                     for i in members]
            out.append((params, calls))
        return out


def narrow_call(value: str, to: ScalarType) -> str:
    """A chain's double ``value`` as a member's float scalar type: rounded once, to nearest even
    (CUDA's __double2half / __double2bfloat16 need no half conversions enabled)."""
    if to.name == "f64":
        return value
    if to.name == "f32":
        return f"static_cast<float>({value})"
    return {"f16": f"__double2half({value})", "bf16": f"__double2bfloat16({value})"}[to.name]


class CppModule(ModuleView):
    @property
    def summary_comment(self) -> str:
        return comment_text(self.lm.summary)

    @property
    def name_literal(self) -> str:
        return c_string(self.lm.name)

    @property
    def cpp_namespace(self) -> str:
        return names.cpp_namespace(self.lm.name)

    @property
    def struct_checks(self) -> list[dict[str, object]]:
        """Per struct type (each after the structs it nests): an alias of its C++ type, the
        declarations its checks use, and the static_asserts of its layout (for a stateless functor:
        that it is empty and can be value-initialised). The build reports the first that fails."""
        return [self._struct_check(st) for st in self.lm.structs + self.lm.stateless_structs]

    def _struct_check(self, st: Struct) -> dict[str, object]:
        alias = struct_alias(st.name)
        where = f"kernelgen: {st.loc}: struct '{st.name}' (C++ {st.cpp})"
        if st.stateless:
            decls: list[str] = []
            checks = [
                (f"std::is_empty_v<{alias}>", f"{where}: the spec gives no fields, so the launchers pass a "
                 "value-initialised one, but the C++ type has data members; declare them under fields"),
                (f"std::is_trivially_copyable_v<{alias}>", f"{where}: a struct passed by value must be trivially "
                 "copyable"),
                (f"std::is_default_constructible_v<{alias}>", f"{where}: the launchers pass a "
                 "value-initialised one, so the C++ type must be default-constructible"),
            ]
        else:
            decls, checks = _layout_checks(st, alias, where, names.c_struct(self.lm.name, st.name))
        return {"alias": alias, "cpp": struct_cpp(st.cpp), "decls": decls,
                "where": comment_text(f"{where}: the C++ type must be declared by the sources"),
                "checks": [(cond, c_string(msg)) for cond, msg in checks]}

    @property
    def struct_decls(self) -> list[str]:
        """What the C++ API header needs to name each struct type the launchers take: its header,
        or a forward declaration. (A struct only nested in others is named by its header's.) The
        CUDA toolkit's types, typedefs among them (``CUtensorMap``, ``half2``), come from the
        toolkit's header that declares them. A forward declaration's comment gives the struct's
        spec line: where the sources declare that name otherwise (a typedef), the compiler's
        error points at that line and ``kernelgen build`` names the spec's struct."""
        taken = {a.struct.name for launcher in (*self.lm.kernels, *self.lm.chains) for a in launcher.args
                 if a.struct is not None}
        out: list[str] = []
        declared: set[str] = set()
        for st in self.lm.structs:
            if st.name not in taken:
                continue
            toolkit = types.TOOLKIT_STRUCTS.get(st.cpp.removeprefix("::"))
            comment = ""
            if st.header:
                line = struct_header_include(st.header)
            elif toolkit:
                line = f"#include <{toolkit.header}>"
            else:
                *ns, base = st.cpp.removeprefix("::").split("::")
                line = f"struct {base};"
                for n in reversed(ns):
                    line = f"namespace {n} {{ {line} }}"
                comment = "  // " + comment_text(f"{st.loc}: struct '{st.name}' (C++ {st.cpp}): forward-declared "
                                                 "(a typedef needs header)")
            if line not in declared:
                declared.add(line)
                out.append(line + comment)
        return out

    @property
    def type_headers(self) -> list[str]:
        elems = {a.elem.cpp for k in self.lm.kernels for a in k.args if a.elem is not None}
        elems |= {a.scalar.cpp for k in self.lm.kernels for a in k.args if a.scalar is not None}
        elems |= {a.scalar.cpp for ch in self.lm.chains for a in ch.args if a.scalar is not None}
        elems |= {a.elem.cpp for ch in self.lm.chains for a in ch.args if a.elem is not None}
        for ch in self.lm.chains:
            for member in ch.member_ptr_args:
                elems |= {a.elem.cpp for a in member if a.elem is not None}
            for scalars in ch.member_scalars:  # narrowed from the chain's double: __double2half needs its header
                elems |= {sc.cpp for sc in scalars.values()}
        return types.headers(elems)


def render_module(lm: LModule) -> dict[str, str]:
    t = lm.target
    ctx = {
        "m": CppModule(lm, CppKernel, CppChain),
        "stamp": stamp(lm.spec),
        "kill_switch_literal": c_string(lm.kill_switch) if lm.kill_switch else "nullptr",
        "target_literal": c_string(t.name),
        "limits": ", ".join(str(x) for x in (*t.max_block_dims, t.max_threads_per_block,
                                            t.max_shared_mem_per_block_optin)),
        "no_variant_code": code(NL_NO_VARIANT),
        "no_instance_code": code(NL_NO_INSTANCE),
        "abi_symbol": c.abi_symbol(lm),
        "abi_guard": c.abi_guard(lm),
        "c_header": f"<{names.module_header(lm.name, '_c')}>",
        "elem_defines": c.elem_defines(lm),
        "elem_guard": c.ELEM_GUARD,
        "runtime_declarations": c.runtime_declarations(),
    }
    return {
        f"src/{lm.name}.cu": render("launchers.cu.j2", ctx),
        f"include/{names.module_header(lm.name)}": render("api.h.j2", ctx),
    }


__all__ = ["CppChain", "CppKernel", "LChain", "LKernel", "cpp_type", "render_module"]
