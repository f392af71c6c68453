"""The C ABI: the only place that spells C types and the C ABI's signatures.

Files: ``include/<namespace>/<module>_c.h`` per module and ``include/kernelgen/plan_codes.h``
(outcome codes and grid limits from kernelgen.plan). The C ABI's definitions live in the
C++ translation unit (kernelgen.emit.cpp), which asks this module for their parameters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from kernelgen import names, plan, types
from kernelgen.emit.base import ModuleView, View, render, stamp
from kernelgen.escape import comment_text
from kernelgen.lower import CArg, LKey, LModule
from kernelgen.model import Target


def c_type(a: CArg) -> str:
    """``const void*`` / ``void*`` for pointers, the fixed-width type for scalars, the module's
    C struct for structs."""
    if a.is_pointer:
        return "const void*" if a.reads_only else "void*"
    if a.struct is not None:
        return names.c_struct(a.struct.module, a.struct.name)
    assert a.scalar is not None
    return a.scalar.c_type


def c_param(a: CArg) -> str:
    return f"{c_type(a)} {a.name}"


def params(args: Iterable[CArg]) -> str:
    """Parameter list with a trailing ", " (so templates can append more), or ""."""
    return "".join(f"{c_param(a)}, " for a in args)


def plan_params(int_args: Iterable[CArg]) -> str:
    return ", ".join(c_param(a) for a in int_args)


def key_params(keys: Iterable[LKey]) -> str:
    return "".join(f"uint32_t {k.param}, " for k in keys)


def function_names(module: str, launcher: str) -> dict[str, str]:
    """A launcher's C ABI entry points (and its C++ names, which the C ABI calls)."""
    return {
        "launch": names.c_function(module, launcher),
        "plan": names.c_function(module, launcher, "plan"),
        "sizes": names.c_function(module, launcher, "sizes"),
        "info": names.c_function(module, launcher, "info"),
        "cpp": names.cpp_launcher(module, launcher),
        "cpp_plan": names.cpp_plan(module, launcher),
    }


class _CLauncher(View):
    """What a kernel's and a chain's C ABI share."""

    @property
    def summary_comment(self) -> str:
        notes = getattr(self.ir, "launch_notes", ())
        return comment_text(" ".join((self.ir.summary, *notes)))

    @property
    def names(self) -> dict[str, str]:
        return function_names(self.m.name, self.ir.name)

    @property
    def c_params(self) -> str:
        return params(self.ir.args)

    @property
    def plan_params_comma(self) -> str:
        """The plan's parameters followed by ", ", or ""."""
        p = plan_params(self.ir.int_args)
        return f"{p}, " if p else ""

    @property
    def sized_names(self) -> list[str]:
        """The array arguments whose element counts the sizes function writes, in its order."""
        sized = sorted((a.size_slot, a.name) for a in self.ir.args if a.is_pointer and a.size_slot >= 0)
        return [name for _, name in sized]

    @property
    def n_sizes(self) -> int:
        return len(self.sized_names)

    @property
    def n_sizes_name(self) -> str:
        """The C constant holding how many values the sizes function writes."""
        return f"{names.c_function(self.m.name, self.ir.name)}__n_sizes"

    @property
    def sizes_comment(self) -> str:
        """What the sizes function writes, for the headers' comments."""
        if not self.sized_names:
            return "no array argument has a size: writes nothing"
        return (f"writes the element counts of the array arguments {comment_text(', '.join(self.sized_names))} "
                f"({self.n_sizes} value{'s' if self.n_sizes != 1 else ''}, in this order)")


class CKernel(_CLauncher):
    @property
    def c(self) -> dict[str, str]:
        return self.names

    @property
    def plan_params(self) -> str:
        return plan_params(self.ir.int_args)

    @property
    def plan_params_unnamed_if_empty(self) -> str:
        return self.plan_params_comma


class CChain(_CLauncher):
    @property
    def plan_params(self) -> str:
        return self.plan_params_comma

    @property
    def key_params(self) -> str:
        return key_params(self.ir.keys)

    @property
    def key_names_text(self) -> str:
        return comment_text(", ".join(k.name for k in self.ir.keys))

    @property
    def key_params_text(self) -> str:
        return ", ".join(k.param for k in self.ir.keys)


def elem_defines(lm: LModule) -> list[tuple[str, int]]:
    """KG_ELEM_* codes, for modules whose launchers take dtype masks."""
    if not any(c.keys for c in lm.chains):
        return []
    return [(f"KG_ELEM_{e.name.upper()}", e.code) for e in types.ELEM_TYPES]


# The guard of the KG_ELEM_* definitions, which every module's C and C++ headers that take dtype
# masks carry (the codes are the type registry's, the same in every module and package).
ELEM_GUARD = "KERNELGEN_ELEM_CODES_DEFINED"


def c_structs(lm: LModule) -> list[dict[str, object]]:
    """The module's struct types as C structs (each after the structs it nests): name, fields (C
    declarations), size, alignment."""
    out = []
    for st in lm.structs:
        fields = [f"{names.c_struct(lm.name, f.struct.name) if f.struct else f.scalar.c_type} {f.name}"
                  + (f"[{f.count}]" if f.count else "") for f in st.fields]
        out.append({"name": st.name, "c": names.c_struct(lm.name, st.name), "fields": fields, "size": st.size,
                    "cpp": comment_text(st.cpp),
                    "attr": f" __attribute__((aligned({st.over_aligned})))" if st.over_aligned else ""})
    return out


def abi_symbol(lm: LModule) -> str:
    """The symbol naming the module's C ABI: ``<c_prefix>_<module>__abi__<digest>``, the digest (8
    hex digits) covering what a caller relies on: each entry point's name and parameter types, the
    element counts ``__sizes`` writes, a chain's member count, the struct layouts and the element
    type codes of dtype masks. Summaries, clauses and expressions do not change it. The launchers'
    translation unit defines it; generated callers (the Rust crate, and every C or C++ translation
    unit including the module's headers) reference it, so linking them against a library built from
    other specs fails naming it. ('__' separates it from every launcher's symbols, whose names
    cannot hold '__'.)"""
    lines = [f"struct {st['c']}{st['attr']} {{{'; '.join(st['fields'])}}} {st['size']}" for st in c_structs(lm)]
    for k in lm.kernels:
        lines.append(f"kernel {names.c_function(lm.name, k.name)}({params(k.args)}) "
                     f"plan({plan_params(k.int_args)}) sizes {len(k.sizes)}")
    for ch in lm.chains:
        lines.append(f"chain {names.c_function(lm.name, ch.name)}({params(ch.args)}{key_params(ch.keys)}) "
                     f"plan({plan_params(ch.int_args)}) sizes {ch.nsizes} members {len(ch.members)}"
                     + (" info" if ch.keys else ""))
    lines += [f"{name} {value}" for name, value in elem_defines(lm)]
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:8]
    return f"{names.current().c_prefix}_{lm.name}__abi__{digest}"


def abi_guard(lm: LModule) -> str:
    """The macro guarding the declaration of the module's ABI digest symbol, which its C and C++
    headers both declare (declared once where a translation unit includes both: -Wredundant-decls).
    Spelled without the symbol's "__", which C++ reserves in macro names too."""
    return "KERNELGEN_" + abi_symbol(lm).replace("__", "_").upper() + "_DECLARED"


# The runtime's C functions (kernelgen/abi.h, runtime.cpp) as (return type, name after kg_rt_,
# parameters). Every target library exports each one twice: as kg_rt_<name>, the same in every
# library (a program's call reaches the first library on its link line), and as
# <c_prefix>_rt_<name>, the package's own, which the module headers declare
# (tests/unit/test_runtime_entry_points.py keeps the three in step).
RUNTIME_FUNCTIONS = (
    ("void", "describe", "const kg_kernel_info* kernel, int32_t code, char* buf, size_t size"),
    ("void", "refresh", "void"),
    ("const char*", "target", "void"),
    ("int32_t", "target_cc", "void"),
    ("const kg_device_values*", "device_values", "void"),
    ("const kg_device_values*", "target_table", "void"),
    ("void", "use_target_table", "int32_t on"),
    ("void", "limit_sms", "int32_t n"),
    ("int32_t", "device_count", "void"),
    ("int32_t", "current_device", "void"),
    ("int32_t", "device_cc", "int32_t device"),
    ("int32_t", "is_sticky_error", "int32_t cuda_error"),
)


def runtime_function(name: str) -> str:
    """The package's own name of runtime function ``kg_rt_<name>``."""
    return f"{names.current().c_prefix}_rt_{name}"


def runtime_declarations() -> list[str]:
    """The declarations of the package's own runtime functions (<c_prefix>_rt_*), once per
    translation unit (each module's C and C++ headers carry them); none where the C prefix is kg,
    whose names are kernelgen/abi.h's."""
    prefix = names.current().c_prefix
    if prefix == "kg":
        return []
    guard = f"KERNELGEN_{prefix.upper()}_RT_DECLARED"
    return [f"#ifndef {guard}", f"#define {guard}",
            *(f"{ret} {runtime_function(name)}({params});" for ret, name, params in RUNTIME_FUNCTIONS), "#endif"]


def include_guard(module: str) -> str:
    """The include guard of a module's C header, from its path under include/ (the project's header
    folder, then the module): two projects' headers of one module name are included together."""
    folder = names.current().header_dir.replace("/", "__")
    return f"KERNELGEN_{folder}__{module}_C_H".upper()


def render_module(lm: LModule) -> dict[str, str]:
    ctx = {
        "m": ModuleView(lm, CKernel, CChain),
        "guard": include_guard(lm.name),
        "stamp": stamp(lm.spec),
        "elem_defines": elem_defines(lm),
        "elem_guard": ELEM_GUARD,
        "structs": c_structs(lm),
        "abi_symbol": abi_symbol(lm),
        "abi_guard": abi_guard(lm),
        "runtime_declarations": runtime_declarations(),
    }
    return {f"include/{names.module_header(lm.name, '_c')}": render("api_c.h.j2", ctx)}


def render_target(target: Target) -> dict[str, str]:
    ctx = plan.codes_header() | {"stamp": stamp("the plan semantics (kernelgen/plan.py)")}
    table = [(f"KG_TABLE_{k.upper()}", v) for k, v in plan.target_table(target).items()]
    table_ctx = {"stamp": stamp("specs/targets.yaml"), "t": target, "table": table}
    return {
        "include/kernelgen/plan_codes.h": render("plan_codes.h.j2", ctx),
        "include/kernelgen/target_table.h": render("target_table.h.j2", table_ctx),
    }
