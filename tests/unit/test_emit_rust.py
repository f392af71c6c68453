"""The Rust emitter: spellings, escaping of names Rust reserves, the writer leaving cargo's output
alone. (tests/compile/test_rust_crate.py compiles the crates.)"""

from __future__ import annotations

from pathlib import Path

from kernelgen.emit import render_catalog
from kernelgen.emit.rust import rust_ident, rust_string, rust_type
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
