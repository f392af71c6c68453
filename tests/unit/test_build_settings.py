"""`build:` settings (include folders, macros, nvcc options) of a project, a target and a module:
how they are read, refused, merged and written into the target's CMake list. The build itself
is tests/compile/test_build_settings.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kernelgen.build import check_include_dirs
from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from kernelgen.model import Build

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "build_settings"


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    return root


def _cmake_settings(text: str, module: str) -> dict[str, list[str]]:
    """The quoted items of each target_* call the CMake list makes for ``module``'s object."""
    out: dict[str, list[str]] = {}
    for call, items in re.findall(r"^(target_\w+)\(\$\{kg_lib\}_obj_" + module + r" PRIVATE((?: \"[^\"]*\")+)\)$", text,
                                  re.M):
        out[call] = re.findall(r'"([^"]*)"', items)
    return out


def test_the_fixture_merges_project_target_and_module_settings() -> None:
    catalog = load_catalog(FIXTURE)
    files = render_catalog(catalog)
    hopper = files["generated/hopper/CMakeLists.txt"]
    half = _cmake_settings(hopper, "half_ops")
    # the module's folder first, then the project's (after the project root, which kernelgen adds)
    assert half["target_include_directories"] == ["${KERNELGEN_ROOT}/vendor/extra", "${KERNELGEN_ROOT}/vendor/include"]
    # the module's LEVEL replaces the project's; the target's TARGET_LEVEL is there
    assert half["target_compile_definitions"] == [
        "__CUDA_NO_HALF_OPERATORS__", "__CUDA_NO_HALF_CONVERSIONS__", "__CUDA_NO_BFLOAT16_CONVERSIONS__",
        "__CUDA_NO_HALF2_OPERATORS__", "TARGET_LEVEL=90", "LEVEL=2", "HALF_OPS_ONLY",
    ]
    assert half["target_compile_options"] == [
        "SHELL:--extended-lambda", "SHELL:-maxrregcount=40", "SHELL:-Xptxas -O3"]
    plain = _cmake_settings(hopper, "plain")
    assert plain["target_include_directories"] == ["${KERNELGEN_ROOT}/vendor/include"]
    assert "LEVEL=1" in plain["target_compile_definitions"] and "HALF_OPS_ONLY" not in plain[
        "target_compile_definitions"]
    assert plain["target_compile_options"] == ["SHELL:--extended-lambda"]
    # each target its own value
    assert "TARGET_LEVEL=121" in _cmake_settings(files["generated/gb10/CMakeLists.txt"], "plain")[
        "target_compile_definitions"]


def test_no_settings_no_cmake_lines() -> None:
    cmake = render_catalog(load_catalog(REPO))["generated/hopper/CMakeLists.txt"]
    assert "Build settings" not in cmake and "SHELL:" not in cmake


def test_merge_order() -> None:
    from kernelgen.errors import SourceLoc

    loc = SourceLoc("x", 1)
    project = Build(loc, (("a", loc), ("b", loc)), (("X", "1", loc), ("Y", None, loc)), ("-O3",))
    target = Build(loc, (("b", loc),), (("X", "2", loc),), ("-G",))
    module = Build(loc, (("c", loc),), (("Z", "z", loc), ("X", "3", loc)), ("-lineinfo",))
    m = Build.merged(project, target, module)
    assert [d for d, _ in m.include_dirs] == ["c", "b", "a"]
    assert [(n, v) for n, v, _ in m.defines] == [("Y", None), ("Z", "z"), ("X", "3")]
    assert m.nvcc_flags == ("-O3", "-G", "-lineinfo")
    assert not Build() and m


# Each: where the entry goes, its text, and what the error says (after file:line).
BAD = [
    ("module", "build: {include_dirs: [\"a\\\"b\"]}", "has the character '\"'"),
    ("module", "build: {include_dirs: [\"inc;lude\"]}", "has the character ';'"),
    ("module", "build: {include_dirs: [\"${HOME}/x\"]}", "has the character '$'"),
    ("module", "build: {include_dirs: [\"~/cutlass\"]}", "starts with '~', which CMake and nvcc do not expand"),
    ("module", "build: {include_dirs: [\" lead\"]}", "starts or ends with a space"),
    ("module", "build: {include_dirs: [.]}", "is the project root"),
    ("module", "build: {include_dirs: [" + "a" * 256 + "]}", "folder is 256 characters long; the limit is 255"),
    ("module", "build: {include_dirs: [a, ./a/]}", "is listed twice"),
    ("module", "build: {include_dirs: []}", "expected a list of at least one item"),
    ("module", "build: {include_dirs: a}", "expected a list of at least one item"),
    ("module", "build: {defines: {NDEBUG: false}}", "false does not define a macro"),
    ("module", "build: {defines: {V: 1.5}}", "quote a number that is not an integer"),
    ("module", "build: {defines: {V: \"a b\"}}", "has the character ' '"),
    ("module", "build: {defines: {V: \"\\\"s\\\"\"}}", "has the character '\"'"),
    ("module", "build: {defines: {V: [1]}}", "expected an integer, a token or true"),
    ("module", "build: {defines: {2V: 1}}", "is not a macro name"),
    ("module", "build: {defines: {KG_X: 1}}", "kernelgen's reserved names"),
    ("module", "build: {defines: {KERNELGEN_TARGET_NAME: 1}}", "kernelgen's reserved names"),
    ("module", "build: {defines: {EOF: 1}}", "defined by the C, CUDA or Python headers"),
    ("module", "build: {defines: {x: 1}}", "would rewrite an argument of kernel 'scale'"),
    ("module", "build: {defines: {scale_kernel: 1}}", "would rewrite a name in the symbol of kernel 'scale'"),
    ("module", "build: {defines: {plain: 1}}", "would rewrite module 'plain'"),
    ("module", "build: {defines: {Outcome: 1}}", "a name kernelgen's runtime headers use"),
    ("module", "build: {defines: {int: 1}}", "a reserved word"),
    ("project", "build: {defines: {affine: 1}}", "would rewrite a struct of module 'half_ops'"),
    ("project", "build: {defines: {scale: 1}}", "would rewrite a field"),
    ("project", "build: {defines: {bsettings: 1}}", "would rewrite a word of the project's package (bsettings)"),
    ("module", "build: {defines: {bsettings: 1}}", "would rewrite a word of the project's package"),
    ("module", "build: {nvcc_flags: [-arch=sm_80]}", "the target's arch sets it"),
    ("module", "build: {nvcc_flags: [\"-gencode arch=compute_80,code=sm_80\"]}", "the target's arch sets it"),
    ("module", "build: {nvcc_flags: [-std=c++20]}", "kernelgen compiles C++17"),
    ("module", "build: {nvcc_flags: [-rdc=true]}", "whole-program translation unit"),
    ("module", "build: {nvcc_flags: [-Ivendor]}", "list the folder under include_dirs"),
    ("module", "build: {nvcc_flags: [-DX=1]}", "give the macro under defines"),
    ("module", "build: {nvcc_flags: [-lcublas]}", "does not link"),
    ("module", "build: {nvcc_flags: [-ccbin=g++-13]}", "host compiler"),
    ("module", "build: {nvcc_flags: [-Xcompiler=-fvisibility=default]}", "hidden visibility"),
    ("module", "build: {nvcc_flags: [-Xptxas]}", "takes a value"),
    ("module", "build: {nvcc_flags: [\"-G -O0\"]}", "one option an item"),
    ("module", "build: {nvcc_flags: [use_fast_math]}", "is not an nvcc option"),
    ("module", "build: {nvcc_flags: [\"-Xcompiler '-Wall'\"]}", "is not an nvcc option"),
    ("module", "build: {nvcc_flags: [\"-Xptxas=$(whoami)\"]}", "is not an nvcc option"),
    ("module", "build: {nvcc_flags: [-O3], includes: [a]}", "unknown key"),
    ("target", "  build: {nvcc_flags: [-code=sm_90a]}", "the target's arch sets it"),
    ("target", "  build: {defines: {n: 1}}", "macro n would rewrite a"),
]


@pytest.mark.parametrize(("where", "entry", "message"), BAD, ids=[f"{w}-{i}" for i, (w, _, _) in enumerate(BAD)])
def test_bad_settings_name_the_file_line_and_field(tmp_path: Path, where: str, entry: str, message: str) -> None:
    root = _copy(tmp_path)
    if where == "module":
        path = root / "specs" / "plain.yaml"
        path.write_text(path.read_text() + entry + "\n")
    elif where == "project":
        path = root / "specs" / "project.yaml"
        text = path.read_text()
        path.write_text(text[:text.index("build:")] + entry + "\n")
    else:
        path = root / "specs" / "targets.yaml"
        text = path.read_text()
        path.write_text(text.replace("  build:\n    defines: {TARGET_LEVEL: 90}\n", entry + "\n"))
    with pytest.raises(SpecError) as info:
        load_catalog(root)
    text = str(info.value)
    assert re.match(rf"specs/{path.stem}\.yaml:\d+: [\w.]*build", text), text
    assert message in text, text


@pytest.mark.parametrize("flag", [
    "--use_fast_math", "-maxrregcount=64", "-Xptxas=-v", "-Xptxas -v", "-G", "-O0", "-lineinfo",
    "--extra-device-vectorization", "-Xcompiler=-Wall", "--diag-suppress=177", "-t 4",
])
def test_ordinary_options_pass(tmp_path: Path, flag: str) -> None:
    root = _copy(tmp_path)
    path = root / "specs" / "plain.yaml"
    path.write_text(path.read_text() + f"build: {{nvcc_flags: [\"{flag}\"]}}\n")
    catalog = load_catalog(root)
    assert catalog.module("plain").build.nvcc_flags == (flag,)
    assert f'"SHELL:{flag}"' in render_catalog(catalog)["generated/hopper/CMakeLists.txt"]


def test_a_missing_include_folder_is_a_spec_error_at_build(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    catalog = load_catalog(root)
    check_include_dirs(catalog, root, catalog.targets)  # all present
    shutil.rmtree(root / "vendor" / "extra")
    (root / "vendor" / "include").rename(root / "vendor" / "include_file")
    (root / "vendor" / "include").write_text("")
    catalog = load_catalog(root)  # generation does not need the folders
    with pytest.raises(SpecError) as info:
        check_include_dirs(catalog, root, catalog.targets)
    assert str(info.value).startswith("specs/project.yaml:6: build.include_dirs: include folder vendor/include "
                                      "is not a folder"), str(info.value)
    (root / "vendor" / "include").unlink()
    (root / "vendor" / "include_file").rename(root / "vendor" / "include")
    with pytest.raises(SpecError) as info:
        check_include_dirs(catalog, root, catalog.targets)
    assert str(info.value).startswith("specs/half_ops.yaml:49: build.include_dirs: include folder vendor/extra "
                                      "does not exist"), str(info.value)


def test_absolute_folders_are_kept(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    path = root / "specs" / "plain.yaml"
    path.write_text(path.read_text() + f"build: {{include_dirs: [\"{tmp_path}/abs inc/\"]}}\n")
    cmake = render_catalog(load_catalog(root))["generated/hopper/CMakeLists.txt"]
    assert _cmake_settings(cmake, "plain")["target_include_directories"] == [
        f"{tmp_path}/abs inc", "${KERNELGEN_ROOT}/vendor/include"]


def test_list_shows_each_modules_settings(capsys: pytest.CaptureFixture[str]) -> None:
    from kernelgen.cli import main

    assert main(["--root", str(FIXTURE), "list"]) == 0
    out = capsys.readouterr().out
    assert ("  build on hopper: include vendor/extra, vendor/include; defines __CUDA_NO_HALF_OPERATORS__, "
            "__CUDA_NO_HALF_CONVERSIONS__, __CUDA_NO_BFLOAT16_CONVERSIONS__, __CUDA_NO_HALF2_OPERATORS__, "
            "TARGET_LEVEL=90, LEVEL=2, HALF_OPS_ONLY; nvcc --extended-lambda -maxrregcount=40 -Xptxas -O3") in out
    assert "  build on gb10: include vendor/include; defines" in out and "TARGET_LEVEL=121; nvcc --extended-lambda\n" in out
    assert main(["--root", str(REPO), "list"]) == 0
    assert "  build" not in capsys.readouterr().out
