"""Specs of a project moved to a newer kernelgen: a file under specs/ (subfolders included) that
is not meant as a module says that every .yaml there is read and how to keep one out; a name that
has become one of kernelgen's own says how to rename it and keep its C++ name (and following that
loads); a spec of a newer format is reported as one."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog

TARGETS = (Path(__file__).resolve().parents[1] / "fixtures" / "project" / "specs" / "targets.yaml").read_text()

SCALE = """\
module: scale
summary: Scales.
sources: [kernels/scale.cu]
kernels:
  scale:
    summary: Scales.
    args:
      x: {type: const f32*, size: n}
      out: f32*
      n: u32
    grid: [div_ceil(n, 256), 1, 1]
    block: [256, 1, 1]
    examples:
      - {n: 1024}
"""

READ = ("every .yaml file under specs/, its subfolders included, is read as a module spec; to keep one out, move it "
        "to a folder whose name starts with '.' (specs/.archive/) or out of specs/, or rename it to end in neither "
        ".yaml nor .yml (.yaml.old)")


def _root(tmp_path: Path, spec: str = SCALE) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale.cu").write_text("__global__ void scale(const float*, float*, unsigned) {}\n")
    (tmp_path / "specs" / "targets.yaml").write_text(TARGETS)
    (tmp_path / "specs" / "scale.yaml").write_text(spec)
    return tmp_path


def _error(root: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_catalog(root)
    return str(info.value)


# ---------------------------------------------------------------- spec files in subfolders


@pytest.mark.parametrize(("path", "message"), [
    ("archive/scale_v0.yaml", "specs/archive/scale_v0.yaml:1: module: module 'scale' must be defined in scale.yaml, not "
                              f"scale_v0.yaml (rename the file or the module; {READ})"),
    ("archive/scale.yaml", "specs/scale.yaml:1: module: module 'scale' is also defined in specs/archive/scale.yaml "
                           f"(module names are unique across specs/ and its subfolders: {READ})"),
    ("archive/scale.yml", f"specs/archive/scale.yml: spec files must end in .yaml, not .yml (rename it to scale.yaml "
                          f"({READ}))"),
    ("archive/targets.yaml", "specs/archive/targets.yaml: targets.yaml belongs directly in specs/, not in a subfolder "
                             f"(move it up, or rename it if it is a module spec ({READ}))"),
])
def test_a_file_in_a_subfolder_says_every_yaml_is_read(tmp_path: Path, path: str, message: str) -> None:
    root = _root(tmp_path)
    (root / "specs" / path).parent.mkdir(parents=True, exist_ok=True)
    (root / "specs" / path).write_text(TARGETS if path.endswith("targets.yaml") else SCALE)
    assert _error(root) == message


def test_a_spec_folder_says_every_yaml_is_read(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / "specs" / "old.yaml").mkdir()
    assert _error(root) == f"specs/old.yaml: the spec file is a directory (a spec is a file; rename the folder ({READ}))"


@pytest.mark.parametrize("path", [".archive/scale_v0.yaml", ".archive/old.yaml/x.yaml", "archive/scale.yaml.old",
                                  ".archive/deeper/scale.yaml"])
def test_the_ways_the_message_gives_keep_a_file_out(tmp_path: Path, path: str) -> None:
    root = _root(tmp_path)
    (root / "specs" / path).parent.mkdir(parents=True, exist_ok=True)
    (root / "specs" / path).write_text(SCALE)
    assert [m.path for m in load_catalog(root).modules] == ["specs/scale.yaml"]


# ---------------------------------------------------------------- names that became kernelgen's


STRUCT = SCALE + """\
structs:
  u32x2: {fields: {x: u32, y: u32}}
"""


def test_a_struct_named_as_a_registry_type_says_how_to_keep_its_cpp_type(tmp_path: Path) -> None:
    root = _root(tmp_path, STRUCT)
    assert _error(root) == (
        "specs/scale.yaml:16: structs.u32x2: struct 'u32x2' has the name of a registry type (rename the struct (its "
        "key under structs, and the arguments and fields that name it) and keep its C++ type with cpp: u32x2, unless "
        "it gives cpp already)")
    # what the message says to do loads, with the C++ type kept
    (root / "specs" / "scale.yaml").write_text(STRUCT.replace("u32x2: {fields", "pair: {cpp: u32x2, fields"))
    (module,) = load_catalog(root).modules
    assert [(s.name, s.cpp) for s in module.structs] == [("pair", "u32x2")]


def test_a_struct_spelt_like_a_scalar_type_says_how_to_keep_its_cpp_type(tmp_path: Path) -> None:
    root = _root(tmp_path, STRUCT.replace("u32x2", "u33"))
    assert "struct 'u33' has a scalar type's spelling (rename the struct " in _error(root)
    assert "keep its C++ type with cpp: u33, unless it gives cpp already)" in _error(root)


def test_a_reserved_struct_name_says_how_to_keep_its_cpp_type(tmp_path: Path) -> None:
    root = _root(tmp_path, STRUCT.replace("u32x2", "plan"))
    assert _error(root).endswith(
        "'plan' is reserved and cannot be used as a struct name: a reserved word of C++, C or Python, or a name the "
        "generated bindings use (rename the struct (its key under structs, and the arguments and fields that name it) "
        "and keep its C++ type with cpp: plan, unless it gives cpp already)")


def test_a_reserved_kernel_name_says_how_to_keep_its_global_function(tmp_path: Path) -> None:
    root = _root(tmp_path, SCALE.replace("  scale:\n", "  plan:\n"))
    assert _error(root).endswith(
        "(rename the kernel (its launcher) and keep the __global__ function it launches with symbol: plan, unless it "
        "gives symbol already)")
    (root / "kernels" / "scale.cu").write_text("__global__ void plan(const float*, float*, unsigned) {}\n")
    (root / "specs" / "scale.yaml").write_text(SCALE.replace("  scale:\n", "  scale_plan:\n    symbol: plan\n"))
    (module,) = load_catalog(root).modules
    assert [(k.name, k.symbol) for k in module.kernels] == [("scale_plan", "plan")]


def test_a_reserved_field_name_says_how_to_keep_its_member(tmp_path: Path) -> None:
    root = _root(tmp_path, STRUCT.replace("u32x2: {fields: {x: u32", "pair: {fields: {stream: u32"))
    assert _error(root).endswith("(rename the field and keep its C++ member with {type: <its type>, cpp: stream})")
    (root / "specs" / "scale.yaml").write_text(
        STRUCT.replace("u32x2: {fields: {x: u32", "pair: {fields: {s: {type: u32, cpp: stream}"))
    (module,) = load_catalog(root).modules
    assert [(f.name, f.cpp) for f in module.structs[0].fields] == [("s", "stream"), ("y", "")]


def test_a_kernel_named_like_a_module_attribute_says_how_to_keep_its_global_function(tmp_path: Path) -> None:
    root = _root(tmp_path, SCALE.replace("  scale:\n", "  PLAN_DIGEST:\n    symbol: scale\n"))
    assert _error(root).endswith(
        "kernel 'PLAN_DIGEST' is named 'PLAN_DIGEST' in the generated module, which is also the module attribute "
        "PLAN_DIGEST (line 1) (rename the kernel (its launcher) and keep the __global__ function it launches with "
        "symbol: PLAN_DIGEST, unless it gives symbol already)")


def test_a_constant_and_a_fallback_named_like_a_kernel_say_how_to_keep_its_global_function(tmp_path: Path) -> None:
    root = _root(tmp_path, SCALE + "constants: {scale: 4}\n")
    assert _error(root).endswith(
        "constant 'scale' has the name of kernel 'scale' (line 5) (rename one of them: the constant (and the "
        "expressions that use it), or the kernel, keeping the __global__ function it launches with symbol: scale "
        "unless it gives symbol already)")
    (root / "specs" / "scale.yaml").write_text(SCALE + "fallbacks:\n  scale: [scale]\n")
    assert _error(root).endswith(
        "fallback 'scale' has the name of a kernel (rename one of them: the chain, or the kernel, keeping the "
        "__global__ function it launches with symbol: scale unless it gives symbol already)")


# ---------------------------------------------------------------- format versions


@pytest.mark.parametrize("file", ["scale.yaml", "targets.yaml", "project.yaml"])
def test_a_newer_format_is_reported_as_one_before_unknown_keys(tmp_path: Path, file: str) -> None:
    root = _root(tmp_path)
    path = root / "specs" / file
    text = path.read_text() if path.exists() else "package: upops\n"
    path.write_text(text + "a_key_of_version_two: 1\nversion: 2\n")
    line = len(text.splitlines()) + 2
    assert _error(root) == (
        f"specs/{file}:{line}: version: spec format version 2 is not supported by this kernelgen: the file is written "
        "for a newer kernelgen (supported versions: 1; upgrade kernelgen to one that reads version 2, or write the "
        "file in version 1's format: see docs/spec-format.md, Versions)")
    path.write_text(text + "version: 0\n")
    assert "spec format version 0 is not supported by this kernelgen (supported versions: 1; write version: 1 " in (
        _error(root))
