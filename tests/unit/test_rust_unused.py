"""Every item of a generated Rust crate is used or allowed, whatever the specs' argument shapes:
pointers none of which is sized, no pointers, no scalars, device scalars and nullable pointers
only, variants, dispatchers and chains. (tests/compile/test_rust_crate.py type-checks these
crates with ``RUSTFLAGS=-D warnings``.)"""

from __future__ import annotations

import re
from pathlib import Path

from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from tests.unit.test_loader import write_project

# One module of every argument shape a launcher can have, beside sized pointers.
SHAPES = """\
module: shapes
summary: Kernels of every argument shape.
sources: [kernels/demo.cu]
kill_switch: SHAPES_OFF
structs:
  box2:
    cpp: Box2
    fields: {a: u32, b: f32}
kernels:
  unsized:
    summary: Pointers, none sized (a name Rust reserves).
    args:
      x: const f32*
      y: f32*
      n: u32
    grid: [n, 1, 1]
    block: [32, 1, 1]
    examples:
      - {n: 4}
  unsized_even:
    summary: Pointers, none sized, for even counts.
    args:
      x: const f32*
      y: f32*
      n: u32
    grid: [n, 1, 1]
    block: [32, 1, 1]
    applies_if: [n % 2 == 0]
    examples:
      - {n: 4}
  sized_one:
    summary: One sized pointer among unsized ones, no scalar.
    args:
      x: const f32*
      y: {type: f32*, size: 64}
    grid: [1, 1, 1]
    block: [64, 1, 1]
    examples:
      - {}
  scalars:
    summary: Scalars only.
    args:
      n: u32
      alpha: f32
    grid: [n, 1, 1]
    block: [32, 1, 1]
    examples:
      - {n: 4}
  device_only:
    summary: A device scalar only.
    args:
      kv_len: {type: i32, device: true}
    grid: [1, 1, 1]
    block: [32, 1, 1]
    examples:
      - {}
  var:
    summary: Variants, a struct and an unsized pointer.
    args:
      x: f32*
      b: box2
      d: u32
    variants:
      arg: d
      symbols: {64: var64, 128: var128}
    grid: [1, 1, 1]
    block: [d, 1, 1]
    examples:
      - {d: 64}
  gone:
    summary: Absent on hopper.
    targets: [gb10]
    args:
      x: f32*
      n: u32
    grid: [n, 1, 1]
    block: [32, 1, 1]
    examples:
      - {n: 4}
  disp:
    summary: A dispatcher of unsized pointers.
    symbol: disp<{T}>
    instantiate: {T: [f32, bf16]}
    args:
      x: "const {T}*"
      n: u32
    grid: [n, 1, 1]
    block: [32, 1, 1]
    examples:
      - {n: 8}
fallbacks:
  chain: [unsized_even, unsized]
  dchain: [disp_bf16, disp_f32]
"""

# A module whose launchers check no pointer for null: the crate's null check goes unused.
UNCHECKED = """\
module: unchecked
summary: No pointer the launchers check for null.
sources: [kernels/demo.cu]
kernels:
  scalars:
    summary: Scalars only.
    args:
      n: u32
    grid: [n, 1, 1]
    block: [32, 1, 1]
    examples:
      - {n: 4}
  optional:
    summary: A nullable pointer and a device scalar.
    args:
      x: {type: const f32*, size: n, nullable: true}
      kv_len: {type: i32, device: true}
      n: u32
    grid: [n, 1, 1]
    block: [32, 1, 1]
    examples:
      - {n: 4}
fallbacks:
  chain: [optional, scalars]
"""


def _crate(tmp_path: Path, spec: str, name: str) -> dict[str, str]:
    files = render_catalog(load_catalog(write_project(tmp_path, spec, f"{name}.yaml")))
    return {p.removeprefix("generated/hopper/rust/"): t for p, t in files.items()
            if p.startswith("generated/hopper/rust/")}


def _launchers(module_rs: str) -> dict[str, str]:
    """Each kernel's and chain's `launch` body, by its module name."""
    out = {}
    for name, body in re.findall(r"^pub mod (?:r#)?(\w+) \{\n(.*?)^\}\n", module_rs, re.S | re.M):
        (launch,) = re.findall(r"pub unsafe fn launch\(.*?\n    \}\n", body, re.S)
        out[name] = launch
    return out


def test_null_checks_read_sizes_only_where_a_checked_pointer_is_sized(tmp_path: Path) -> None:
    launchers = _launchers(_crate(tmp_path, SHAPES, "shapes")["src/shapes.rs"])
    assert {"unsized", "sized_one", "scalars", "device_only", "var", "gone", "disp", "disp_f32", "chain",
            "dchain"} <= set(launchers)
    for name, body in launchers.items():
        declared = body.count("let kg_sizes = self::sizes(")
        assert declared == (1 if "kg_sizes.map(" in body else 0), (name, body)
    assert "kg_sizes.map(|s| s[0])" in launchers["sized_one"]
    assert 'check_null("sized_one", "x", None)' in launchers["sized_one"]
    for name in ("unsized", "var", "gone", "disp", "disp_f32", "chain", "dchain"):
        assert "is_null()" in launchers[name] and "kg_sizes" not in launchers[name], name
    for name in ("scalars", "device_only"):
        assert "is_null()" not in launchers[name], name


def test_crate_helpers_a_crate_may_leave_unused_are_allowed(tmp_path: Path) -> None:
    """The crate root's `pub(crate)` helpers warn where unused: the null check is the one a crate
    without checked pointers leaves unused."""
    crate = _crate(tmp_path, UNCHECKED, "unchecked")
    assert "check_null" not in crate["src/unchecked.rs"]
    lib = crate["src/lib.rs"]
    (helper,) = re.findall(r"((?:    #\[.*\]\n)*)    pub fn check_null\(", lib)
    assert "#[allow(dead_code)]" in helper
