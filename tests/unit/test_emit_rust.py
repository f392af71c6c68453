"""The Rust emitter: spellings, escaping of names Rust reserves, the writer leaving cargo's output
alone. (tests/compile/test_rust_crate.py compiles the crates.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.emit.rust import CRATE_ROOT_NAMES, rust_ident, rust_string, rust_type
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from kernelgen.types import ELEMS, SCALAR_TYPES
from kernelgen.writer import check_files, write_files
from tests.unit.test_loader import write_project

# Names Rust reserves that C++ and Python do not: module, kernel, chain and argument names.
KEYWORDS = """\
module: mod
summary: Names that are Rust keywords.
sources: [kernels/demo.cu]
kill_switch: MOD_OFF
kernels:
  move:
    summary: Kernel named move.
    args:
      ref: {type: const f32*, size: loop}
      crate: {type: f32*, size: loop}
      super: i64*
      loop: u32
      fn: i64
      unsafe: f32
    grid: [loop, 1, 1]
    block: [32, 1, 1]
    skip_if: [loop == 0]
    requires: [fn >= 0]
    examples:
      - {loop: 4, fn: 1}
  impl:
    summary: Kernel named impl.
    args:
      dyn: u64
    grid: [1, 1, 1]
    block: [32, 1, 1]
    examples:
      - {dyn: 1}
fallbacks:
  where: [move, impl]
"""


def test_scalars_spelled_from_the_type_registry_and_pointers() -> None:
    assert [rust_type(s, None, False, ffi=False) for s in SCALAR_TYPES] == [s.rust for s in SCALAR_TYPES]
    assert [s.rust for s in SCALAR_TYPES] == ["u32", "i32", "u64", "i64", "f32", "bool", "u16", "u16", "f64",
                                                "u8", "i8", "u16", "i16"]
    assert rust_type(None, ELEMS["bf16"], True, ffi=False) == "impl Into<crate::DevicePtr>"
    assert rust_type(None, ELEMS["fp4_e2m1"], False, ffi=False) == "impl Into<crate::DevicePtrMut>"
    assert rust_type(None, ELEMS["u8"], True, ffi=True) == "*const ::std::ffi::c_void"
    assert rust_type(None, ELEMS["u8"], False, ffi=True) == "*mut ::std::ffi::c_void"


def test_identifiers_and_strings() -> None:
    assert [rust_ident(n) for n in ("rows", "ref", "loop", "crate", "super", "Self")] == [
        "rows", "r#ref", "r#loop", "kg_crate", "kg_super", "kg_Self"]
    assert rust_string('a "b" \\ c') == '"a \\"b\\" \\\\ c"'
    assert rust_string("x \u00e9\n") == '"x \\u{e9}\\u{a}"'


def test_rust_keywords_are_escaped(tmp_path: Path) -> None:
    files = render_catalog(load_catalog(write_project(tmp_path, KEYWORDS, "mod.yaml")))
    lib = files["generated/hopper/rust/src/lib.rs"]
    assert "pub mod r#mod;" in lib
    mod = files["generated/hopper/rust/src/mod.rs"]
    assert "pub mod r#move {" in mod and "pub mod r#where {" in mod
    assert "pub unsafe fn launch(r#ref: impl Into<crate::DevicePtr>, kg_crate: impl Into<crate::DevicePtrMut>," in mod
    assert 'crate::kg_rt::check_null("move", "crate", kg_sizes.map(|s| s[1]))?;' in mod


def test_writer_leaves_cargo_output_beside_the_crate_alone(tmp_path: Path) -> None:
    files = {"generated/t/rust/Cargo.toml": "x\n", "generated/t/rust/src/lib.rs": "y\n"}
    write_files(tmp_path, files, ["t"])
    (tmp_path / "generated/t/rust/target/debug").mkdir(parents=True)
    (tmp_path / "generated/t/rust/target/debug/out").write_text("built")
    (tmp_path / "generated/t/rust/Cargo.lock").write_text("lock")
    (tmp_path / "generated/t/rust/stray.rs").write_text("orphan")
    assert check_files(tmp_path, files, ["t"]).orphaned == ["generated/t/rust/stray.rs"]
    assert write_files(tmp_path, files, ["t"]).removed == ["generated/t/rust/stray.rs"]
    assert (tmp_path / "generated/t/rust/target/debug/out").is_file()
    assert (tmp_path / "generated/t/rust/Cargo.lock").is_file()


# Upper-case spec names (GEMM-style arguments, a struct field, a kernel), the keyword rename
# kg_Self (an argument `Self`, a struct `self_`), a bool argument before the first u32 one, and an
# instantiated kernel (a dispatcher over element types).
UPPER = """\
module: gemmy
summary: Upper-case names, a bool argument and an instantiated kernel.
sources: [kernels/demo.cu]
structs:
  epilogue:
    cpp: Epilogue
    fields: {Alpha: f32, Beta: f32}
  self_:
    cpp: SelfBox
    fields: {x: u32}
kernels:
  GemmK:
    summary: A GEMM.
    args:
      a: {type: const f32*, size: M * K}
      c: {type: f32*, size: M * N}
      transpose: bool
      M: u32
      N: u32
      K: u32
      Self: i32
      ep: epilogue
      s: self_
    grid: [M, N, 1]
    block: [32, 1, 1]
    skip_if: [M == 0]
    examples:
      - {M: 4, N: 4, K: 4, transpose: 0, Self: 0}
  Axpy:
    summary: Axpy of one float type.
    symbol: axpy<{T}>
    instantiate: {T: [f32, bf16]}
    args:
      x: {type: "const {T}*", size: N}
      y: {type: "{T}*", size: N}
      N: u32
    grid: [N, 1, 1]
    block: [32, 1, 1]
    examples:
      - {N: 8}
"""


def _render(tmp_path: Path, spec: str, name: str = "gemmy") -> dict[str, str]:
    root = tmp_path / str(len(list(tmp_path.iterdir())))
    root.mkdir()
    return render_catalog(load_catalog(write_project(root, spec, f"{name}.yaml")))


def _abi(files: dict[str, str], module: str = "gemmy") -> str:
    """The digest symbol the launchers' translation unit defines."""
    (sym,) = re.findall(r'__attribute__\(\(visibility\("default"\)\)\) void (\w+)\(void\) \{\}',
                        files[f"generated/hopper/src/{module}.cu"])
    return sym


def test_abi_symbol_follows_the_c_abi_and_the_crate_references_it(tmp_path: Path) -> None:
    files = _render(tmp_path, UPPER)
    sym = _abi(files)
    assert re.fullmatch(r"kg_gemmy__abi__[0-9a-f]{8}", sym)
    mod = files["generated/hopper/rust/src/gemmy.rs"]
    assert f"        pub fn {sym}();\n" in mod  # declared in the module's FFI block
    # ... and held by every kernel's and chain's handle, whose first lookup calls it
    assert mod.count(f", super::kg_ffi::{sym});") == mod.count("pub mod ") == 4  # GemmK, Axpy_*, Axpy
    assert f'    "{sym}",\n' in files["generated/hopper/rust/build.rs"]
    lib = files["generated/hopper/rust/src/lib.rs"]
    assert "(self.abi)();" in lib

    def changed(old: str, new: str) -> str:
        assert old in UPPER, old
        return _abi(_render(tmp_path, UPPER.replace(old, new, 1)))

    # Edits that leave the C ABI alone keep the symbol ...
    assert changed("summary: A GEMM.", "summary: A matrix product.") == sym
    assert changed("skip_if: [M == 0]", "skip_if: [M == 0, N == 0]") == sym
    assert changed("grid: [M, N, 1]", "grid: [N, M, 1]") == sym
    assert changed("      - {N: 8}", "      - {N: 16}") == sym
    # ... changes of a signature, a size count or a struct layout change it.
    assert changed("      K: u32\n", "      K: u64\n") != sym
    assert changed("      Self: i32\n", "      Self: i32\n      extra: f32\n") != sym
    assert changed("c: {type: f32*, size: M * N}", "c: f32*") != sym  # one size fewer
    assert changed("fields: {Alpha: f32, Beta: f32}", "fields: {Alpha: f32, Beta: f64}") != sym
    assert changed("instantiate: {T: [f32, bf16]}", "instantiate: {T: [f32]}") != sym


def test_upper_case_names_allow_only_the_naming_lints(tmp_path: Path) -> None:
    files = _render(tmp_path, UPPER)
    mod = files["generated/hopper/rust/src/gemmy.rs"]
    assert "#![allow(non_snake_case, non_camel_case_types)]" in mod
    assert "pub struct kg_Self {" in mod and "pub Alpha: f32," in mod and "pub mod GemmK {" in mod
    tests = files["generated/hopper/rust/tests/gemmy.rs"]
    assert "#![allow(unused_imports, dead_code, non_snake_case, clippy::all)]" in tests
    assert "fn GemmK_plan_matches_spec()" in tests


def test_out_of_range_doctests_give_every_other_argument_a_literal_of_its_type(tmp_path: Path) -> None:
    lib = _render(tmp_path, UPPER)["generated/hopper/rust/src/lib.rs"]
    assert "//! let _ = kernelgen_hopper::gemmy::GemmK::plan(false, -1, 0, 0, 0);" in lib
    assert "//! let _ = kernelgen_hopper::gemmy::GemmK::plan(false, 4294967296, 0, 0, 0);" in lib
    assert "//! let _ = kernelgen_hopper::gemmy::GemmK::plan(false, 0, 0, 0, 0);" in lib  # the valid call


def test_dispatcher_plan_without_an_instance_reports_the_dispatcher(tmp_path: Path) -> None:
    files = _render(tmp_path, UPPER)
    mod = files["generated/hopper/rust/src/gemmy.rs"]
    axpy = mod[mod.index("pub mod Axpy {"):]
    assert "Handle::new(super::kg_ffi::kg_gemmy__Axpy__info, " in axpy
    assert ".unwrap_or_else(kg_fallback);" in axpy and "kg_members[0]" not in axpy
    assert "        pub fn kg_gemmy__Axpy__info() -> *const crate::kg_ffi::KernelInfo;\n" in mod
    tests = files["generated/hopper/rust/tests/gemmy.rs"]
    assert "fn Axpy_no_instance_reports_the_chain()" in tests
    assert 'assert_eq!(plan.reason(), "Axpy: not launched: no instantiation for this dtype (T)");' in tests
    assert "kg::gemmy::Axpy::plan(8, 0);" in tests


def test_chain_without_dtype_keys_falls_back_on_its_first_member(tmp_path: Path) -> None:
    mod = _render(tmp_path, KEYWORDS, "mod")["generated/hopper/rust/src/mod.rs"]
    chain = mod[mod.index("pub mod r#where {"):]
    assert "Handle::new(super::kg_ffi::kg_mod__move__info, super::kg_ffi::kg_mod__abi__" in chain
    assert mod.count("pub fn kg_mod__move__info()") == 1  # declared once


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("  self_:\n", "  a_b1: {cpp: AB1, fields: {x: u32}}\n  a_b_1: {cpp: AB2, fields: {x: u32}}\n  self_:\n", 9,
     "struct 'a_b_1' and struct 'a_b1' (line 8) are both `AB1` in the Rust module gemmy"),
    ("  self_:\n", "  gemm_k: {cpp: G, fields: {x: u32}}\n  self_:\n", 13,
     "kernel 'GemmK' and struct 'gemm_k' (line 8) are both `GemmK`"),
    ("  self_:\n", "  axpy: {cpp: A, fields: {x: u32}}\n  self_:\n", 30,
     "instantiated kernel 'Axpy' and struct 'axpy' (line 8) are both `Axpy`"),
    ("  self_:\n", "  Self_: {cpp: S, fields: {x: u32}}\n  self_:\n", 9,
     "struct 'self_' and struct 'Self_' (line 8) are both `kg_Self`"),
])
def test_names_colliding_in_the_rust_crate_are_refused(tmp_path: Path, old: str, new: str, line: int,
                                                       message: str) -> None:
    with pytest.raises(SpecError) as e:
        load_catalog(write_project(tmp_path, UPPER.replace(old, new, 1), "gemmy.yaml"))
    assert e.value.loc.line == line, str(e.value)
    assert message in str(e.value), str(e.value)


@pytest.mark.parametrize("module", ["code", "dtype", "fmt", "c_void", "c_char"])
def test_module_named_like_an_item_of_the_crate_root_is_renamed(tmp_path: Path, module: str) -> None:
    spec = UPPER.replace("module: gemmy", f"module: {module}", 1)
    files = render_catalog(load_catalog(write_project(tmp_path, spec, f"{module}.yaml")))
    lib = files["generated/hopper/rust/src/lib.rs"]
    assert f"pub mod kg_{module};" in lib and f"pub mod {module};" not in lib
    assert f"generated/hopper/rust/src/kg_{module}.rs" in files
    assert f"::{module}::GemmK::plan(" not in lib and f"::kg_{module}::GemmK::plan(" in lib
    tests = files[f"generated/hopper/rust/tests/{module}.rs"]
    assert f"kg::kg_{module}::GemmK::plan(" in tests and f"kg::{module}::" not in tests


def test_crate_root_names_cover_the_rendered_crate_root(tmp_path: Path) -> None:
    """Every name lib.rs defines or imports in its type namespace is one a module may not take."""
    lib = _render(tmp_path, UPPER)["generated/hopper/rust/src/lib.rs"]
    defined = set(re.findall(r"^(?:pub(?:\(crate\))? )?(?:mod|struct|enum|type|trait) (\w+)", lib, re.M))
    for group in re.findall(r"^use std::[\w:]*?(?:\{([^}]*)\}|(\w+));", lib, re.M):
        defined.update(n.strip() for n in (group[0] or group[1]).split(","))
    defined -= {"gemmy"}
    assert defined and defined <= CRATE_ROOT_NAMES, defined - CRATE_ROOT_NAMES


ABI_H = Path(__file__).resolve().parents[2] / "src/kernelgen/runtime/include/kernelgen/abi.h"


def test_kernel_info_mirrors_the_c_struct_and_device_scalar_errors_name_the_argument(tmp_path: Path) -> None:
    """The crate's KernelInfo has the fields of abi.h's kg_kernel_info, in order (the argument names
    included), and a DEVICE_SCALAR error is Error::Argument naming the argument at the code's
    detail, as Python's ArgumentError does."""
    lib = _render(tmp_path, UPPER)["generated/hopper/rust/src/lib.rs"]
    c_struct = re.search(r"typedef struct kg_kernel_info \{(.*?)\} kg_kernel_info;", ABI_H.read_text(), re.S)
    assert c_struct
    c_fields = re.findall(r"(\w+);", re.sub(r"/\*.*?\*/", "", c_struct.group(1), flags=re.S))
    rust_struct = re.search(r"pub struct KernelInfo \{(.*?)\n    \}", lib, re.S)
    assert rust_struct
    assert re.findall(r"pub (\w+):", rust_struct.group(1)) == c_fields
    assert c_fields[-2:] == ["args", "n_args"]
    error = lib[lib.index("    pub fn error(kernel: Kernel, code: i32) -> Error {"):]
    error = error[:error.index("\n    }\n")]
    assert ("} else if category == code::E_DEVICE_SCALAR {\n"
            "            Error::Argument { kernel: name, argument: argument(kernel, code::detail(code)), code, reason }"
            ) in error
    assert "if info.args.is_null() || position < 0 || position >= info.n_args {" in lib
