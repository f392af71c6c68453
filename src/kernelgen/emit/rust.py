"""The Rust crate of a target: ``generated/<target>/rust/``, calling the target library's C ABI.

This module and ``templates/rust/`` are the only places that spell Rust. The crate has a
build script that links ``lib<library_name>.so`` (from ``KERNELGEN_LIB_DIR``), one module per
kernel module with one submodule per kernel and per fallback chain (``launch``, ``plan``,
``sizes``, ``is_present``), and generated integration tests whose expected plans come from the
same lowered specs as the Python contract tests (:func:`kernelgen.cases.expected_plan`).
"""

from __future__ import annotations

import re

from kernelgen import __version__, expr, names, plan, types
from kernelgen.cases import expected_plan, launch_checks_of, u64_in_expressions
from kernelgen.emit.base import render
from kernelgen.emit.c import abi_symbol
from kernelgen.errors import ExprError, SourceLoc, SpecError
from kernelgen.escape import comment_text
from kernelgen.lower import (
    CArg,
    LChain,
    LKernel,
    LModule,
    chain_kernels,
)
from kernelgen.model import Catalog, Kernel, Module, Target
from kernelgen.plan import (
    E_BLOCK,
    E_CLUSTER,
    E_CORESIDENT,
    E_EXPR,
    E_GRID,
    E_LAUNCH_BOUNDS,
    E_SHARED_MEM,
    NL_ABSENT,
    NL_EMPTY_GRID,
    NL_KILLED,
    NL_NO_INSTANCE,
    category,
    code,
    falls_through,
)
from kernelgen.types import ElemType, ScalarKind, ScalarType

# ------------------------------------------------------------------ spellings

# Scalars take their Rust spelling from the type registry (kernelgen.types); pointers are the
# crate's DevicePtr/DevicePtrMut in the safe API and *const/*mut c_void in the C declarations.


def rust_type(scalar: ScalarType | None, elem: ElemType | None, const: bool, ffi: bool) -> str:
    """The Rust type of an argument: a scalar, or a pointer to ``elem`` elements."""
    if elem is not None:
        if ffi:
            return "*const ::std::ffi::c_void" if const else "*mut ::std::ffi::c_void"
        return "impl Into<crate::DevicePtr>" if const else "impl Into<crate::DevicePtrMut>"
    assert scalar is not None
    return scalar.rust


def _arg_types(a: CArg) -> tuple[ScalarType | None, ElemType | None, bool]:
    return a.scalar, a.elem, a.reads_only


def _is_bool(a: CArg) -> bool:
    return a.scalar is not None and a.scalar.kind == ScalarKind.BOOL


def _lit(v: int, is_bool: bool) -> str:
    return ("true" if v else "false") if is_bool else str(v)


def _int_lit(a: CArg, v: int) -> str:
    """A Rust literal of integer argument ``a`` (bool as true/false)."""
    return _lit(v, _is_bool(a))


def _float_lit(a: CArg) -> str:
    """A Rust literal of 1.0 for float argument ``a`` (f16/bf16: their bits)."""
    assert a.scalar is not None
    return {"f16": "0x3c00", "bf16": "0x3f80"}.get(a.scalar.name, "1.0")


# Keywords (strict, reserved and edition 2021/2024 ones) that are not also C++ or Python
# keywords, which the loader already refuses; those four cannot be raw identifiers.
_RUST_KEYWORDS = frozenset(
    "abstract as async await become box break const continue crate do dyn else enum extern false final fn for gen "
    "if impl in let loop macro match mod move mut override priv pub ref return self static struct super trait true "
    "try type typeof union unsafe unsized use virtual where while yield".split()
)
_NOT_RAW = frozenset({"crate", "self", "super", "Self"})


def module_paths(module: str) -> tuple[str, str]:
    """The crate's files of one spec module: its source and its contract tests."""
    return f"rust/src/{module_ident(module).removeprefix('r#')}.rs", f"rust/tests/{module}.rs"


def rust_ident(name: str) -> str:
    if name in _NOT_RAW:
        return "kg_" + name
    if name in _RUST_KEYWORDS:
        return "r#" + name
    return name


_PLAIN = re.compile(r'[ !#-\[\]-~]*')  # printable ASCII but '"' and '\\': the literal is the text itself


def rust_string(s: str) -> str:
    """A Rust string literal holding ``s`` exactly."""
    if _PLAIN.fullmatch(s):
        return f'"{s}"'
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append(f"\\u{{{ord(ch):x}}}")
    out.append('"')
    return "".join(out)


def doc_text(s: str) -> str:
    """Text for one line of a /// comment: whitespace runs made one space, printable ASCII."""
    return comment_text(" ".join(s.split()))


def crate_name(target: Target) -> str:
    return names.current().crate(target.name)


# ------------------------------------------------------------------ views


def struct_ident(name: str) -> str:
    """A struct type's Rust name: the spec's name in CamelCase (rope_dims: RopeDims; self_: kg_Self)."""
    return rust_ident("".join(p[:1].upper() + p[1:] for p in name.split("_") if p) or name)


# The names templates/rust/lib.rs.j2 defines or imports in the crate root's type namespace, where
# each module is a `pub mod` (tests/unit/test_emit_rust.py reads them off the rendered file).
CRATE_ROOT_NAMES = frozenset(
    "dtype code fmt std c_void c_char Cell CStr AtomicPtr Ordering Stream DevicePtr DevicePtrMut Kernel Plan "
    "NotLaunched Error DeviceValues kg_ffi kg_rt".split()
)


def module_ident(module: str) -> str:
    """A module's Rust name: its spec name, but ``kg_<name>`` for one the crate root already
    defines (``code``, ``dtype``, the imported ``fmt``, ``c_void``, ``c_char``), and as
    :func:`rust_ident` writes keywords."""
    return "kg_" + module if module in CRATE_ROOT_NAMES else rust_ident(module)


def check_names(catalog: Catalog) -> None:
    """The Rust names of a module's kernels, chains and structs, checked when the specs load: in
    one module, two structs with one CamelCase name (``a_b1`` and ``a_b_1``: ``AB1``) or a struct's
    CamelCase name equal to a kernel's or a chain's (Rust modules and types share one namespace)
    are spec errors at the later spec line, naming the Rust name. (A module named like an item of
    the crate root is renamed instead: :func:`module_ident`.)"""
    for m in catalog.modules:
        entries = [(struct_ident(st.name), st.loc, f"struct '{st.name}'", f"structs.{st.name}")
                   for st in m.structs if not st.stateless]
        entries += [(rust_ident(k.name), k.loc, f"kernel '{k.name}'", f"kernels.{k.name}") for k in m.kernels
                    if k.instance_of is None]
        entries += [(rust_ident(d.name), d.loc, f"instantiated kernel '{d.name}'", f"kernels.{d.name}")
                     for d in m.dispatches]
        entries += [(rust_ident(k.name), k.loc, f"instantiation '{k.name}'", f"kernels.{k.instance_of}")
                    for k in m.kernels if k.instance_of is not None]
        entries += [(rust_ident(c.name), c.loc, f"fallback chain '{c.name}'", f"fallbacks.{c.name}")
                    for c in m.fallbacks]
        taken: dict[str, tuple[str, SourceLoc]] = {}
        for name, loc, what, field in sorted(entries, key=lambda e: (e[1].line, e[1].column)):
            if name in taken:
                other, where = taken[name]
                raise SpecError(loc, field, f"{what} and {other} (line {where.line}) are both `{name}` in the Rust "
                                f"module {m.name} (structs take CamelCase names; Rust modules and types share "
                                "one namespace)", "rename one of them")
            taken[name] = (what, loc)


def _params(args: tuple[CArg, ...], ffi: bool) -> list[tuple[str, str]]:
    out = []
    for a in args:
        if a.struct is not None:
            out.append((rust_ident(a.name), f"super::{struct_ident(a.struct.name)}"))
            continue
        scalar, elem, const = _arg_types(a)
        out.append((rust_ident(a.name), rust_type(scalar, elem, const, ffi)))
    return out


def _structs(lm: LModule) -> list[dict[str, object]]:
    """The module's struct types as #[repr(C)] Rust structs (a nested struct's field holds its Rust
    struct; its alignment carries over, as in C)."""
    out = []
    for st in lm.structs:
        fields = []
        for f in st.fields:
            one = struct_ident(f.struct.name) if f.struct is not None else f.scalar.rust
            fields.append((rust_ident(f.name), f"[{one}; {f.count}]" if f.count else one))
        # Rust derives Default for arrays of at most 32 elements; a longer one gets it written out
        # (every field's element type is Copy + Default).
        long_arrays = any(f.count and f.count > 32 for f in st.fields)
        out.append({"ident": struct_ident(st.name), "cpp": doc_text(st.cpp), "size": st.size, "fields": fields,
                    "name": st.name, "repr": f"C, align({st.over_aligned})" if st.over_aligned else "C",
                    "derives": f"Clone, Copy, Debug, {'' if long_arrays else 'Default, '}PartialEq",
                    "defaults": [(rust_ident(f.name), f"[Default::default(); {f.count}]" if f.count
                                  else "Default::default()") for f in st.fields] if long_arrays else []})
    return out


def _sig(pairs: list[tuple[str, str]]) -> str:
    return "".join(f"{n}: {t}, " for n, t in pairs)


def _arg_docs(args: tuple[CArg, ...], sizes: dict[str, str]) -> list[str]:
    out = []
    for a in args:
        line = f"`{a.name}`: `{a.spelling}`"
        if a.name in sizes:
            line += f", {sizes[a.name]} elements"
        if a.host:
            line += " (host argument)"
        out.append(line)
    return out


def _size_texts(k: Kernel) -> dict[str, str]:
    return {a.name: f"`{expr.to_text(a.size)}`" for a in k.all_args if a.is_pointer and a.size is not None}


class _Launcher:
    """What the module template needs of a kernel or a chain."""

    def __init__(self, m: LModule, name: str, args: tuple[CArg, ...], int_args: tuple[CArg, ...], nsizes: int,
                 summary: str, arg_docs: list[str], keys: tuple[str, ...] = (), derived: tuple[CArg, ...] = ()) -> None:
        self.name = name
        # Host integers read from struct arguments' fields: bound before the sizes that need them.
        self.derived = [f"let {rust_ident(a.name)}: {t} = {rust_ident(a.arg.source or '')}."
                        + ".".join(rust_ident(f.name) for f in a.arg.source_fields) + ";"
                        for a, (_, t) in zip(derived, _params(derived, ffi=False))]
        self.ident = rust_ident(name)
        self.name_lit = rust_string(name)
        self.summary = doc_text(summary)
        self.arg_docs = arg_docs
        self.c = {part or "launch": names.c_function(m.name, name, part) for part in ("", "plan", "sizes", "info")}
        self.nsizes = nsizes
        self.launch_params = _sig(_params(args, ffi=False))
        self.ffi_params = _sig([(f"a_{i}", t) for i, (_, t) in enumerate(_params(args, ffi=True))])
        # A chain whose members differ in element types takes one mask per dtype key (a bit
        # 1 << code per element type it may be read as; ANY_DTYPE: every member is a candidate).
        key_pairs = [(rust_ident(k), "u32") for k in keys]
        self.int_params = ", ".join(f"{n}: {t}" for n, t in _params(int_args, ffi=False) + key_pairs)
        self.launch_params += _sig(key_pairs)
        self.ffi_params += _sig([(f"k_{i}", "u32") for i in range(len(keys))])
        self.ffi_int_params = _sig([(f"a_{i}", t) for i, (_, t) in enumerate(_params(int_args, ffi=True))]
                                   + [(f"k_{i}", "u32") for i in range(len(keys))])
        self.int_names = "".join(f"{n}, " for n in [rust_ident(a.name) for a in int_args] + [n for n, _ in key_pairs])
        self.int_call = ", ".join([rust_ident(a.name) for a in int_args] + [n for n, _ in key_pairs])
        self.keys = [n for n, _ in key_pairs]
        self.conversions = [
            f"let {rust_ident(a.name)}: crate::{'DevicePtr' if _arg_types(a)[2] else 'DevicePtrMut'} = "
            f"{rust_ident(a.name)}.into();"
            for a in args if a.is_pointer
        ]
        # Null pointers are refused (unless the kernel touches none of the elements), except where
        # the spec declares the argument nullable. A device scalar is the C launcher's to check: it
        # refuses a null one as it does one outside device memory (E_DEVICE_SCALAR, after the plan),
        # and the crate gives that code.
        checked = [a for a in args if a.is_pointer and not a.nullable and not a.device]
        self.pointers = [(rust_ident(a.name), rust_string(a.name), a.size_slot) for a in checked]
        self.null_test = " || ".join(f"{rust_ident(a.name)}.is_null()" for a in checked)
        # The null checks read sizes() only where a checked pointer has a size.
        self.null_sizes = any(a.size_slot >= 0 for a in checked)
        self.call_args = "".join(
            f"{rust_ident(a.name)}.as_ptr(), " if a.is_pointer else f"{rust_ident(a.name)}, " for a in args
        ) + "".join(f"{n}, " for n, _ in key_pairs)
        self.sized = [a.name for a in args if a.is_pointer and a.size_slot >= 0]


class _KernelView(_Launcher):
    def __init__(self, m: LModule, lk: LKernel, k: Kernel) -> None:
        super().__init__(m, lk.name, lk.args, lk.int_args, len(lk.sizes), lk.summary,
                         _arg_docs(lk.args, _size_texts(k)), derived=lk.derived)
        self.present = lk.present
        self.spec = lk.spec
        self.sized = [name for _, name, _ in sorted(lk.sizes)]
        self.clauses = (
            [f"skip_if `{doc_text(t)}`: not launched (empty work)" for t in lk.skip_texts]
            + [f"requires `{doc_text(t)}`: else `Error::Argument`" for t in lk.requires_texts]
            + [f"applies_if `{doc_text(t)}`: else not launched" for t in lk.applies_texts]
            + [doc_text(n) for n in lk.launch_notes]
        )


class _ChainView(_Launcher):
    def __init__(self, m: LModule, c: LChain, size_texts: dict[str, str]) -> None:
        summary = c.summary
        super().__init__(m, c.name, c.args, c.int_args, c.nsizes, summary,
                         _arg_docs(c.args, size_texts) + [f"`{k.param}`: `u32`, the element types accepted for "
                                                          f"{k.name} (`ANY_DTYPE`, or `dtype_bit(code)` ORed)"
                                                          for k in c.keys],
                         tuple(k.param for k in c.keys), c.derived)
        self.spec = c.spec
        self.members = [f"crate::{module_ident(mod)}::{rust_ident(k)}" for mod, k in c.members]
        self.member_names = [f"{mod}.{k}" for mod, k in c.members]
        # The kernel plans and errors report where no member is about them: a dispatcher (a chain
        # over element types) itself, else the first member.
        self.info = self.c["info"] if c.keys else names.c_function(*c.members[0], "info")
        by_slot = {a.size_slot: a.name for a in c.args if a.is_pointer and a.size_slot >= 0}
        self.sized = [by_slot[i] for i in range(c.nsizes)]


# ------------------------------------------------------------------ expected values for the tests


def _zeros() -> str:
    return "[0, 0, 0]"


def _dims(d: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(x) for x in d) + "]"


def _is_geometry(c: int) -> bool:
    cat = category(c)
    return c == 0 or (c > 0 and cat == NL_EMPTY_GRID) or (
        c < 0 and cat in (E_GRID, E_BLOCK, E_SHARED_MEM, E_LAUNCH_BOUNDS, E_CLUSTER, E_CORESIDENT))


def _expect(mod: Module, k: Kernel, target: Target, env: dict[str, int]) -> tuple[int, str]:
    """(code, the Rust `Expect` fields) of the plan for ``env``."""
    if target.name not in k.targets:
        c, grid, block, smem, variant = code(NL_ABSENT), (0, 0, 0), (0, 0, 0), 0, -1
    else:
        c, grid, block, smem = expected_plan(mod, k, target, env)
        variant = -1
        if k.variants and _is_geometry(c):
            variant = [v for v, _ in k.variants.symbols].index(env[k.variants.on])
    if c < 0 and category(c) == E_EXPR:  # where the expression failed decides what was filled in
        return c, f"code: {c}, geometry: None, variant: None, cluster: None"
    cluster = "None"  # checked where the plan launches
    if c == 0:
        want = plan.expect_cluster(launch_checks_of(k).cluster, env | dict(mod.constants), u64_in_expressions(k))
        cluster = f"Some(Some({_dims(want)}))" if want else "Some(None)"
    return c, (f"code: {c}, geometry: Some(({_dims(grid)}, {_dims(block)}, {smem})), "
               f"variant: Some({variant}), cluster: {cluster}")


def _reason(k: Kernel, target: Target, c: int, kill_switch: str | None) -> str | None:
    """The text kg_rt_describe gives for the codes the tests expect, or None."""
    text = plan.reason(k, c, target.name, kill_switch)
    return f"{k.name}: {text}" if text else None


_CALL_FORMS: dict[tuple[int, int, str], tuple[tuple[CArg, ...], tuple[CArg, ...],
                                              tuple[str, tuple[tuple[str, bool], ...], list[str]]]] = {}


def _call_form(args: tuple[CArg, ...], derived: tuple[CArg, ...] = (),
               module: str = "") -> tuple[str, tuple[tuple[str, bool], ...], list[str]]:
    """The call's text as a format string with a ``{}`` per integer argument, those arguments'
    (name, is bool), and each argument's text when passed as a null pointer ("" where it
    cannot be). A struct argument that ``derived`` host integers are read from is built with
    those fields set (``module``: the crate path of the module's structs). Made once per argument
    list: the tests hold thousands of calls."""
    key = (id(args), id(derived), module)  # (the form depends on the derived ones too)
    hit = _CALL_FORMS.get(key)
    if hit is not None and hit[0] is args and hit[1] is derived:
        return hit[2]
    texts, ints, nulls = [], [], []
    for i, a in enumerate(args):
        fields = [d for d in derived if d.arg.source == a.name]
        if a.struct is not None and fields:
            sets = "".join(f" kg_s.{'.'.join(rust_ident(f.name) for f in d.arg.source_fields)} = {{}};"
                           for d in fields)
            texts.append(f"{{{{ let mut kg_s = {module}::{struct_ident(a.struct.name)}::default();{sets} kg_s }}}}")
            ints.extend((d.name, _is_bool(d)) for d in fields)
            nulls.append("")
            continue
        null = ""
        if a.is_pointer:
            writable = not _arg_types(a)[2]
            text = f"ptr_mut({i})" if writable else f"ptr({i})"
            null = "DevicePtrMut::null()" if writable else "DevicePtr::null()"
        elif a.is_int:
            text = "{}"
            ints.append((a.name, _is_bool(a)))
        elif a.struct is not None:
            text = "Default::default()"
        else:
            text = _float_lit(a)
        texts.append(text)
        nulls.append(null)
    form = (", ".join(texts), tuple(ints), nulls)
    _CALL_FORMS[key] = (args, derived, form)
    return form


def _int_values(ints: tuple[tuple[str, bool], ...], env: dict[str, int]) -> list[object]:
    """The integer arguments' values for a format string (bools as true/false)."""
    return [("true" if env[n] else "false") if b else env[n] for n, b in ints]


def _call_args(args: tuple[CArg, ...], env: dict[str, int], null: str | None = None,
               derived: tuple[CArg, ...] = (), module: str = "") -> str:
    """The Rust call arguments for ``env``; ``null``: the pointer passed as a null pointer;
    ``derived`` and ``module`` as :func:`_call_form` takes them."""
    text, ints, nulls = _call_form(args, derived, module)
    if null is not None:
        parts = text.split(", ")  # no fixed text holds a comma
        parts = [nulls[i] if a.name == null and nulls[i] else parts[i] for i, a in enumerate(args)]
        text = ", ".join(parts)
    return text.format(*_int_values(ints, env))


def _size_of(mod: Module, k: Kernel, name: str, env: dict[str, int]) -> int | None:
    """The element count the spec gives pointer ``name`` for ``env`` (None: no size, or an error)."""
    a = next(a for a in k.all_args if a.name == name)
    if a.size is None:
        return None
    try:
        return int(expr.evaluate(a.size, dict(env) | dict(mod.constants)))
    except ExprError:
        return None


class _KernelTests:
    def __init__(self, catalog: Catalog, m: LModule, lk: LKernel, target: Target, crate: str) -> None:
        mod = catalog.module(m.name)
        assert mod is not None
        k = mod.kernel(lk.name)
        assert k is not None
        self.name = lk.name
        self.path = f"kg::{module_ident(m.name)}::{rust_ident(lk.name)}"  # kg: the crate under test
        self.name_lit = rust_string(lk.name)
        self.present = lk.present
        self.target_lit = rust_string(target.name)
        self.structs = {"derived": lk.derived, "module": f"kg::{module_ident(m.name)}"}
        self.plans = []
        ints = tuple((a.name, _is_bool(a)) for a in lk.int_args)
        plan_form = ", ".join("{}" for _ in ints)
        base = lk.cases[0]
        for i, case in enumerate(lk.cases):
            env = dict(case)
            c, fields = _expect(mod, k, target, env)
            # The call shows every value; the label names the case by what it changes.
            if i == 0:
                label = "the first example"
            elif [n for n, _ in case] == [n for n, _ in base]:
                changed = ", ".join(f"{n}={v}" for (n, v), (_, b) in zip(case, base) if v != b)
                label = f"the first example with {changed}" if changed else "the first example"
            else:
                label = ", ".join(f"{n}={v}" for n, v in case)
            plan_args = plan_form.format(*_int_values(ints, env))
            self.plans.append((plan_args, fields, rust_string(label)))
        first = dict(lk.cases[0])
        self.first_plan_args = ", ".join(_int_lit(a, first[a.name]) for a in lk.int_args)
        self.first_launch_args = _call_args(lk.args, first, **self.structs)
        # Each clause deciding alone: not launched with its reason, or an argument error.
        self.flips = []
        if lk.present:
            for _kind, _index, case in lk.flips:
                env = dict(case)
                c, _ = _expect(mod, k, target, env)
                reason = _reason(k, target, c, m.kill_switch)
                self.flips.append((_call_args(lk.args, env, **self.structs), c,
                                   rust_string(reason) if reason else None))
        self.absent_reason = rust_string(_reason(k, target, code(NL_ABSENT), None) or "")
        self.kill_switch = rust_string(m.kill_switch) if m.kill_switch else None
        self.killed_reason = rust_string(_reason(k, target, code(NL_KILLED), m.kill_switch) or "")
        self.sizes_args = self.first_plan_args
        sizes = []
        for _, name, _ in sorted(lk.sizes):
            n = _size_of(mod, k, name, first)
            sizes.append(str(n) if n is not None else "None")
        self.sizes = None if "None" in sizes else "[" + ", ".join(sizes) + "]"
        # A null pointer: refused where the kernel touches elements of it, allowed where none.
        self.null_refused = None
        self.null_allowed = None
        pointers = [a for a in lk.args if a.is_pointer and not a.nullable and not a.device]
        if pointers and lk.present:
            p = pointers[0]
            n = _size_of(mod, k, p.name, first)
            if n is None or n > 0:
                self.null_refused = (_call_args(lk.args, first, null=p.name, **self.structs), rust_string(p.name))
            for kind, _index, case in lk.flips:
                env = dict(case)
                if kind == "skip" and _size_of(mod, k, p.name, env) == 0:
                    c, _ = _expect(mod, k, target, env)
                    reason = _reason(k, target, c, m.kill_switch)
                    if reason:
                        self.null_allowed = (_call_args(lk.args, env, null=p.name, **self.structs), c,
                                             rust_string(reason))
                    break


class _ChainTests:
    def __init__(self, catalog: Catalog, m: LModule, c: LChain, target: Target, crate: str) -> None:
        self.name = c.name
        self.path = f"kg::{module_ident(m.name)}::{rust_ident(c.name)}"
        members = chain_kernels(catalog, c)
        structs = {"derived": c.derived, "module": f"kg::{module_ident(m.name)}"}
        self.present = any(target.name in k.targets for _, k in members)
        self.plans = []
        self.launching = None
        self.not_launched = None
        for case in c.cases:
            env = dict(case)
            tried: list[tuple[int, str]] = []  # (code, plan fields) of the members tried, in order
            for mod, k in members:
                tried.append(_expect(mod, k, target, {a.name: env[a.name] for a in k.int_args}))
                if tried[-1][0] <= 0 and not falls_through(tried[-1][0]):
                    break
            index = plan.chain_pick([c for c, _ in tried])  # the member whose outcome the chain returns
            assert index is not None
            rc, fields = tried[index]
            mod, k = members[index]
            label = ", ".join(f"{n}={v}" for n, v in case)
            any_dtype = ["ANY_DTYPE"] * len(c.keys)
            args = ", ".join([_int_lit(a, env[a.name]) for a in c.int_args] + any_dtype)
            self.plans.append((args, rust_string(k.name), fields, rust_string(label)))
            if rc == 0 and self.launching is None:
                self.launching = (", ".join([_call_args(c.args, env, **structs), *any_dtype]), rust_string(k.name))
            reason = _reason(k, target, rc, mod.kill_switch) if rc > 0 else None
            if reason and self.not_launched is None:
                self.not_launched = (", ".join([_call_args(c.args, env, **structs), *any_dtype]), rust_string(reason))
        # A dispatcher's masks accepting no element type: the plan and the reason are about it.
        self.name_lit = rust_string(c.name)
        self.no_instance = None
        if c.keys and c.cases:
            env = dict(c.cases[0])
            nl = code(NL_NO_INSTANCE)
            none = ["0"] * len(c.keys)
            reason = f"{c.name}: {plan.describe(None, nl, keys=', '.join(k.name for k in c.keys))}"
            self.no_instance = (", ".join([_int_lit(a, env[a.name]) for a in c.int_args] + none),
                                ", ".join([_call_args(c.args, env, **structs), *none]), nl, rust_string(reason))


# ------------------------------------------------------------------ the crate


def render_crate(catalog: Catalog, target: Target, lowered: list[LModule], lib_name: str,
                 stamp: callable) -> dict[str, str]:  # type: ignore[valid-type]
    """Every file of ``generated/<target>/rust/``: {path relative to generated/<target>: text}.
    (The catalog's Rust names were checked when it loaded: :func:`check_names`.)"""
    crate = crate_name(target)
    out: dict[str, str] = {}
    modules, abis = [], []
    doc_kernel = None
    example = None
    for lm in lowered:
        mod = catalog.module(lm.name)
        assert mod is not None
        kernels = []
        size_texts: dict[str, str] = {}
        for lk in lm.kernels:
            k = mod.kernel(lk.name)
            assert k is not None
            kernels.append(_KernelView(lm, lk, k))
            for n, t in _size_texts(k).items():
                size_texts.setdefault(n, t)
            path = f"{module_ident(lm.name)}::{rust_ident(lk.name)}"
            if doc_kernel is None and any(a.spelling == "u32" for a in lk.int_args):
                pos = next(i for i, a in enumerate(lk.int_args) if a.spelling == "u32")
                # Every other argument a valid literal of its type: the u32 one is the only error.
                vals = [_int_lit(a, 0) for a in lk.int_args]
                doc_kernel = {
                    "path": path,
                    "valid": ", ".join(vals),
                    "negative": ", ".join(vals[:pos] + ["-1"] + vals[pos + 1:]),
                    "too_big": ", ".join(vals[:pos] + ["4294967296"] + vals[pos + 1:]),
                }
            if example is None and lk.present and any(a.is_pointer for a in lk.args):
                first = dict(lk.cases[0])
                launch = []
                for a in lk.args:
                    if a.is_pointer:
                        const = _arg_types(a)[2]
                        launch.append("DevicePtr::new(dev_in)" if const else "DevicePtrMut::new(dev_out)")
                    elif a.is_int:
                        launch.append(_int_lit(a, first[a.name]))
                    elif a.struct is not None:
                        launch.append("Default::default()")
                    else:
                        launch.append(_float_lit(a))
                example = {
                    "path": path,
                    "plan_args": ", ".join(_int_lit(a, first[a.name]) for a in lk.int_args),
                    "launch_args": ", ".join([*launch, "DEFAULT_STREAM"]),
                }
        chains = []
        for c in lm.chains:
            for mod_name, kernel in c.members:
                owner = catalog.module(mod_name)
                assert owner is not None
                mk = owner.kernel(kernel)
                assert mk is not None
                for n, t in _size_texts(mk).items():
                    size_texts.setdefault(n, t)
            chains.append(_ChainView(lm, c, size_texts))
        ident = module_ident(lm.name)
        modules.append(ident)
        abis.append(abi_symbol(lm))
        declared = {k.c["info"] for k in kernels}
        ctx = {
            "abi": abis[-1],
            "extra_infos": sorted({ch.info for ch in chains} - declared),
            "stamp": stamp(lm.spec),
            "m": lm,
            "summary": doc_text(lm.summary),
            "kernels": kernels,
            "chains": chains,
            "kill_switch": lm.kill_switch,
            "t": target,
            "structs": _structs(lm),
        }
        out[f"rust/src/{ident.removeprefix('r#')}.rs"] = render("rust/module.rs.j2", ctx)
        tests = {
            "stamp": stamp(lm.spec),
            "m": lm,
            "crate": crate,
            "kernels": [_KernelTests(catalog, lm, lk, target, crate) for lk in lm.kernels],
            "chains": [_ChainTests(catalog, lm, c, target, crate) for c in lm.chains],
            "any_dtype": any(c.keys for c in lm.chains),
        }
        out[f"rust/tests/{lm.name}.rs"] = render("rust/contract.rs.j2", tests)
    cc = f"{target.compute_capability[0]}.{target.compute_capability[1]}"
    tctx = {
        "stamp": stamp("specs/targets.yaml and the module specs"),
        "t": target,
        "cc": cc,
        "crate": crate,
        "version": __version__,
        "lib_name": lib_name,
        "lib_literal": rust_string(lib_name),
        "target_literal": rust_string(target.name),
        "modules": modules,
        "abi": abis,
        "doc_kernel": doc_kernel,
        "example": example,
        "elem_codes": [(e.name.upper(), e.code) for e in types.ELEM_TYPES],
        "codes": _outcome_codes(),
    }
    crate_files = {
        "rust/Cargo.toml": render("rust/Cargo.toml.j2", tctx),
        "rust/build.rs": render("rust/build.rs.j2", tctx),
        "rust/src/lib.rs": render("rust/lib.rs.j2", tctx),
    }
    for path in sorted(set(crate_files) & set(out)):
        m = next(m for m in catalog.modules if path in module_paths(m.name))
        raise SpecError(m.loc, "module", f"module '{m.name}' generates {path}, which the Rust crate's own files "
                        "also need", "rename the module")
    return crate_files | out


def _outcome_codes() -> dict[str, list]:
    """The crate's ``code`` module: the categories of kernelgen/plan_codes.h without the ``KG_``
    prefix, and those an error falls through a chain on."""
    h = plan.codes_header()

    def strip(rows: list[tuple[str, int, str]]) -> list[tuple[str, int]]:
        return [(n.removeprefix("KG_"), v) for n, v, _ in rows]

    return {"not_launched": strip(h["not_launched"]), "errors": strip(h["errors"]),
            "falls_through": [n.removeprefix("KG_") for n in h["falls_through"]]}


__all__ = ["CRATE_ROOT_NAMES", "check_names", "crate_name", "module_ident", "render_crate", "rust_ident",
           "rust_string", "rust_type"]
