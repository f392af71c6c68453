"""Struct fields whose type is another struct of the module (nested by value), arrays of them, and
over-aligned members (CUtensorMap): the loader's layout (offsets, sizes and alignment as C++ lays
them out), what it refuses (a struct containing itself, a stateless functor as a field, an unknown
field type), and what every emitter makes of them (the C++ checks, the C ABI struct, the binding's
tables, the .pyi stub, the contract tests' values, the Rust struct)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.unit.test_structs_setup_spec import TARGETS

# params is declared before the structs it holds: a field may name a struct declared anywhere.
SPEC = """\
module: fa
summary: Nested parameter structs.
sources: [kernels/fa.cu]
structs:
  params:
    cpp: fa::Params
    fields:
      q: u64
      stride: i64
      window: window
      alpha: f32
      extra: "window[2]"
      mode: {type: u8, cpp: layout}
  window: {cpp: fa::Window, fields: {left: i32, right: i32}}
  tensor_map: {cpp: CUtensorMap, fields: {opaque: "u64[16]"}, align: 128}
  tma_params:
    cpp: fa::TmaParams
    fields: {m: i32, k: i32, map_q: tensor_map, scale: f32}
  two_maps: {cpp: fa::TwoMaps, fields: {n: u16, maps: "tensor_map[2]"}}
  padded: {cpp: fa::Padded, fields: {w: window, tail: u8}, align: 16}
  outer: {cpp: fa::Outer, fields: {flag: u8, inner: padded}}
kernels:
  attend:
    symbol: fa::attend
    summary: Reads the params.
    args: {p: params, t: tma_params, out: {type: f32*, size: 1}}
    grid: [1, 1, 1]
    block: [1, 1, 1]
    examples: [{}]
"""


def project(tmp_path: Path, spec: str = SPEC) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "fa.cu").write_text("// fa\n")
    (tmp_path / "specs" / "targets.yaml").write_text(TARGETS)
    (tmp_path / "specs" / "fa.yaml").write_text(spec)
    return tmp_path


def _error(tmp_path: Path, spec: str) -> SpecError:
    with pytest.raises(SpecError) as e:
        load_catalog(project(tmp_path, spec))
    return e.value


def _line(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_layout_is_the_cpp_layout(tmp_path: Path) -> None:
    (m,) = load_catalog(project(tmp_path)).modules
    st = {s.name: s for s in m.structs}
    # each struct after the structs it holds, otherwise in spec order
    assert [s.name for s in m.structs] == ["window", "params", "tensor_map", "tma_params", "two_maps", "padded", "outer"]

    def layout(name: str) -> tuple[int, int, list[tuple[str, int, int, int]]]:
        s = st[name]
        return s.size, s.align, [(f.name, f.offset, f.size, f.align) for f in s.fields]

    assert layout("window") == (8, 4, [("left", 0, 4, 4), ("right", 4, 4, 4)])
    # a nested struct aligns to its own alignment (4), not its size; an array of them is 2 x 8 bytes
    assert layout("params") == (48, 8, [("q", 0, 8, 8), ("stride", 8, 8, 8), ("window", 16, 8, 4),
                                        ("alpha", 24, 4, 4), ("extra", 28, 16, 4), ("mode", 44, 1, 1)])
    # CUtensorMap's align (128) places the member and raises the containing struct's alignment
    assert layout("tma_params") == (384, 128, [("m", 0, 4, 4), ("k", 4, 4, 4), ("map_q", 128, 128, 128),
                                               ("scale", 256, 4, 4)])
    assert layout("two_maps") == (384, 128, [("n", 0, 2, 2), ("maps", 128, 256, 128)])
    # a nested struct's own align (16) beyond its fields' (4) counts too
    assert layout("padded") == (16, 16, [("w", 0, 8, 4), ("tail", 8, 1, 1)])
    assert layout("outer") == (32, 16, [("flag", 0, 1, 1), ("inner", 16, 16, 16)])
    f = st["params"].fields[4]
    assert f.struct is st["window"] and f.scalar is None and f.spelling == "window[2]" and f.count == 2
    assert st["params"].fields[5].member == "layout" and st["params"].over_aligned == 0
    assert st["padded"].over_aligned == 16 and st["outer"].over_aligned == 0


@pytest.mark.parametrize("old,new,where,fragment", [
    # a struct containing itself, directly or through others, at the field that closes the loop
    ("  window: {cpp: fa::Window, fields: {left: i32, right: i32}}\n",
     "  window: {cpp: fa::Window, fields: {left: i32, right: i32, again: window}}\n", "  window: {",
     "struct 'window' contains itself: field 'again' is struct 'window'"),
    ("  window: {cpp: fa::Window, fields: {left: i32, right: i32}}\n",
     "  window: {cpp: fa::Window, fields: {left: i32, back: params}}\n", "  window: {",
     "struct 'params' contains itself: field 'window' is struct 'window', whose field 'back' is struct 'params'"),
    ("  outer: {cpp: fa::Outer, fields: {flag: u8, inner: padded}}\n",
     "  outer: {cpp: fa::Outer, fields: {flag: u8, inner: padded}}\n  a: {fields: {b: \"b[2]\"}}\n"
     "  b: {fields: {c: c}}\n  c: {fields: {a: a}}\n", "  c: {",
     "struct 'a' contains itself: field 'b' is struct 'b', whose field 'c' is struct 'c', whose field 'a' is "
     "struct 'a'"),
    # a stateless functor has no layout to nest
    ("  outer: {cpp: fa::Outer, fields: {flag: u8, inner: padded}}\n",
     "  outer: {cpp: fa::Outer, fields: {flag: u8, inner: op}}\n  op: {cpp: fa::Op}\n", "  outer: {",
     "struct 'op' has no fields (a stateless functor), so it cannot be a field"),
    # an unknown field type: the hint offers the module's structs
    ("      window: window\n", "      window: windw\n", "      window: windw",
     "'windw' is not a field type (did you mean 'window'?)"),
    ("      window: window\n", "      window: float\n", "      window: float",
     "did you mean 'f32'? (kernelgen's name for C++ float)"),
    ("      window: window\n", "      window: \"window[0]\"\n", "      window: \"window[0]\"",
     "array length 0 is outside 1..1024"),
    # align below a nested struct's alignment
    ("  two_maps: {cpp: fa::TwoMaps, fields: {n: u16, maps: \"tensor_map[2]\"}}\n",
     "  two_maps: {cpp: fa::TwoMaps, fields: {n: u16, maps: \"tensor_map[2]\"}, align: 64}\n", "  two_maps: {",
     "alignment 64 is less than the fields' (128)"),
    ("  two_maps: {cpp: fa::TwoMaps, fields: {n: u16, maps: \"tensor_map[2]\"}}\n",
     "  two_maps: {cpp: fa::TwoMaps, fields: {n: u16, maps: \"tensor_map[40]\"}}\n", "  two_maps: {",
     "the struct is 5248 bytes; the limit is 4096"),
])
def test_refused_with_file_line(tmp_path: Path, old: str, new: str, where: str, fragment: str) -> None:
    assert old in SPEC, old
    spec = SPEC.replace(old, new, 1)
    err = _error(tmp_path, spec)
    assert err.loc.path == "specs/fa.yaml"
    assert err.loc.line == _line(spec, where), (str(err), _line(spec, where))
    assert fragment in str(err), str(err)


def test_emitters(tmp_path: Path) -> None:
    files = render_catalog(load_catalog(project(tmp_path)))
    base = "generated/hopper/"
    # C ABI: nested C structs, declared before the structs that hold them; alignment carried over
    c_h = files[base + "include/kernelgen/fa_c.h"]
    assert ("typedef struct kg_fa__params__t {\n  uint64_t q;\n  int64_t stride;\n  kg_fa__window__t window;\n"
            "  float alpha;\n  kg_fa__window__t extra[2];\n  uint8_t mode;\n} kg_fa__params__t;") in c_h
    assert "typedef struct __attribute__((aligned(128))) kg_fa__tensor_map__t {" in c_h
    assert "  kg_fa__tensor_map__t map_q;\n" in c_h and "  kg_fa__tensor_map__t maps[2];\n" in c_h
    assert c_h.index("} kg_fa__window__t;") < c_h.index("kg_fa__window__t window;")

    # C++: each member's presence first, then offsets and sizes (and a nested member's type), naming the field
    cu = files[base + "src/fa.cu"]
    assert "template <class kg_t> struct kg_has_params<5, kg_t, std::void_t<decltype(kg_t::layout)>> : " \
           "std::true_type {};" in cu
    line = _line(SPEC, "      mode:")
    missing = (f"static_assert(kg_has_params<5, kg_struct_params>::value, \"kernelgen: specs/fa.yaml:{line}: struct "
               "'params' (C++ fa::Params): field 'mode': the C++ type has no public member 'layout' (the field's "
               "cpp); name the field after the C++ member it is")
    assert missing in cu
    window = _line(SPEC, "      window: window")
    assert (f"static_assert(kg_layout<16, offsetof(kg_struct_params, window)>::same, \"kernelgen: specs/fa.yaml:"
            f"{window}: struct 'params' (C++ fa::Params): field 'window' is not at offset 16, as the spec lays it "
            "out;") in cu
    assert ("static_assert(std::is_same_v<std::remove_cv_t<std::remove_all_extents_t<decltype(kg_struct_params::"
            "extra)>>, kg_struct_window>, ") in cu
    assert "static_assert(kg_layout<384, sizeof(kg_struct_tma_params)>::same, " in cu
    assert "static_assert(kg_layout<128, offsetof(kg_struct_tma_params, map_q)>::same, " in cu
    assert "struct kg_layout {\n  static_assert(kg_spec == kg_cpp, " in cu
    # presence before any layout check; a nested struct's checks before those of the struct that holds it
    assert cu.index("kg_has_params<0, kg_struct_params>::value") < cu.index("offsetof(kg_struct_params, q)")
    assert cu.index("using kg_struct_window =") < cu.index("using kg_struct_params =")
    # the C++ API declares the structs the launchers take, not those only nested in them
    api = files[base + "include/kernelgen/fa.h"]
    assert "namespace fa { struct Params; }" in api and "namespace fa { struct TmaParams; }" in api
    assert "Window" not in api and "Outer" not in api and "#include <cuda.h>" not in api

    # Python: a nested field's row names its struct's index in the table
    binding = files[base + "python/fa.cpp"]
    assert '{"window", 0, 0, 16, 0},' in binding and '{"extra", 0, 2, 28, 0},' in binding
    assert '{"map_q", 0, 0, 128, 2},' in binding and '{"scale", 5, 0, 256, -1},' in binding
    assert '{ "window", 8, 4, kg_fields_window, 2 },' in binding
    pyi = files[base + "python/fa.pyi"]
    assert "class params(_kg_TypedDict):" in pyi
    assert "    window: _kg_arg_window\n" in pyi and "    extra: _kg_Sequence[_kg_arg_window]\n" in pyi
    contract = files[base + "tests/test_fa_hopper_contract.py"]
    other = next(ln for ln in contract.splitlines() if ln.startswith("OTHER_ARGS_attend = "))
    value = ast.literal_eval(other.split(" = ", 1)[1].replace("fake_pointer(2)", "0"))
    assert value["p"]["window"] == {"left": 0, "right": 0} and value["p"]["extra"] == [{"left": 0, "right": 0}] * 2
    assert value["t"]["map_q"] == {"opaque": [0] * 16}

    # Rust: a nested field holds the nested struct's Rust struct
    rust = files[base + "rust/src/fa.rs"]
    assert "pub struct Params {\n    pub q: u64,\n    pub stride: i64,\n    pub window: Window,\n    pub alpha: f32,\n" \
           "    pub extra: [Window; 2],\n    pub mode: u8,\n}" in rust
    assert "#[repr(C, align(128))]\n#[derive(Clone, Copy, Debug, Default, PartialEq)]\npub struct TensorMap {" in rust
    assert "    pub maps: [TensorMap; 2],\n" in rust
