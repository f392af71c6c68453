"""Projects of kernelgen's users: their own names (specs/project.yaml), kernelgen init, the package
shell's target selection and its errors, the contract tests' skip reasons, the .pth link, the
templates/ override, and the CUDA toolkit from PyPI when none is found."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest

from kernelgen import names, project, scaffold, testing, toolkit
from kernelgen.cli import main
from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError, ToolkitError
from kernelgen.loader import load_catalog, load_project

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "project"


def _copy_fixture(tmp_path: Path, package: str | None) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    if package:
        (root / "specs" / "project.yaml").write_text(f"# names\npackage: {package}\n")
    return root


# ---------------------------------------------------------------- names


def test_without_project_yaml_the_names_are_kernelgens_own(tmp_path: Path) -> None:
    naming = load_project(tmp_path / "specs" / "project.yaml", tmp_path)
    assert naming == names.DEFAULT
    assert (naming.package, naming.namespace, naming.c_prefix, naming.library) == (
        "kernelgen_ops", "kernelgen", "kg", "kernelgen")
    assert load_catalog(REPO).naming == names.DEFAULT


def test_one_setting_names_package_namespace_prefix_and_library(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path, "myops")
    catalog = load_catalog(root)
    assert catalog.naming == names.Naming("myops", "myops", "myops", "myops")
    files = render_catalog(catalog)
    h = files["generated/hopper/include/myops/fixture_ops.h"]
    assert "namespace myops::fixture_ops {" in h and "using namespace ::kernelgen;" in h
    c_h = files["generated/hopper/include/myops/fixture_ops_c.h"]
    assert "myops_fixture_ops__scale_f32(" in c_h and "kg_fixture_ops__" not in c_h
    cmake = files["generated/hopper/CMakeLists.txt"]
    assert "set(kg_lib myops_hopper)" in cmake and "OUTPUT_NAME myops_hopper_" in cmake and 'KERNELGEN_PACKAGE="myops"' in cmake
    assert "from myops import Outcome" in files["generated/hopper/python/fixture_ops.pyi"]
    test = files["generated/hopper/tests/test_myops_fixture_ops_hopper_contract.py"]
    assert 'package="myops"' in test and "\nimport myops  #" in test and "kernelgen_ops" not in test
    assert 'name = "myops_hopper"' in files["generated/hopper/rust/Cargo.toml"]
    # every generated file: no kernelgen_ops package and no kg_ C ABI function of the module
    for path, text in files.items():
        assert "kernelgen_ops" not in text, path
        assert "kg_fixture_ops__" not in text, path
    # rendering leaves kernelgen's own names current
    assert names.current() == names.DEFAULT


def test_each_name_can_be_set_on_its_own(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path, None)
    (root / "specs" / "project.yaml").write_text("package: myops\nnamespace: mo\nc_prefix: mo_c\nlibrary: molib\n")
    files = render_catalog(load_catalog(root))
    assert "namespace mo::fixture_ops {" in files["generated/hopper/include/mo/fixture_ops.h"]
    assert "mo_c_fixture_ops__scale_f32(" in files["generated/hopper/include/mo/fixture_ops_c.h"]
    assert "OUTPUT_NAME molib_hopper_" in files["generated/hopper/CMakeLists.txt"]


@pytest.mark.parametrize(("text", "message"), [
    ("package: My-Ops\n", "specs/project.yaml:1: package: 'My-Ops' is not a valid package"),
    ("package: torch\n", "specs/project.yaml:1: package: package 'torch' would shadow the package of that name"),
    ("package: yaml\n", "specs/project.yaml:1: package: package 'yaml' would shadow the package of that name"),
    ("package: json\n", "package 'json' would shadow a module of Python's standard library"),
    ("package: ok\nnamespace: kg\n", "specs/project.yaml:2: namespace: namespace 'kg' is kernelgen's runtime's own"),
    ("package: ok\nnamespace: class\n", "specs/project.yaml:2: namespace: 'class' is reserved"),
    ("package: ok\nprefix: x\n", "specs/project.yaml:2"),
    ("namespace: x\n", "package"),
])
def test_bad_project_yaml_names_file_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    root = _copy_fixture(tmp_path, None)
    (root / "specs" / "project.yaml").write_text(text)
    with pytest.raises(SpecError) as info:
        load_catalog(root)
    assert message in str(info.value), str(info.value)


# ---------------------------------------------------------------- templates/


def test_a_projects_templates_override_kernelgens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy_fixture(tmp_path, "myops")
    (root / "templates").mkdir()
    (root / "templates" / "launchers.cu.j2").write_text(
        '// Copyright 2026 Example Corp. ({{ project.package }})\n{% include "kernelgen/launchers.cu.j2" %}')
    assert main(["--root", str(root), "generate"]) == 0
    text = (root / "generated" / "hopper" / "src" / "fixture_ops.cu").read_text()
    assert text.startswith("// Copyright 2026 Example Corp. (myops)\n// generated by kernelgen from specs/fixture_ops.yaml")
    assert "myops_fixture_ops__scale_f32(" in text
    header = (root / "generated" / "hopper" / "include" / "myops" / "fixture_ops.h").read_text()
    assert not header.startswith("// Copyright")  # only the overridden template changed
    assert main(["--root", str(root), "generate", "--check"]) == 0
    capsys.readouterr()


# ---------------------------------------------------------------- kernelgen init


def test_init_scaffolds_a_project_that_lists_and_generates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "newproj"
    assert main(["init", str(folder), "--package", "newops", "--target", "ampere", "--target", "hopper"]) == 0
    out = capsys.readouterr().out
    assert "next: cd" in out and "kernelgen build && pytest" in out
    for rel in ("specs/project.yaml", "specs/targets.yaml", "specs/scale.yaml", "kernels/scale.cu",
                "tests/test_newops_scale.py", "pyproject.toml", "CMakeLists.txt", ".gitignore", "README.md"):
        assert (folder / rel).is_file(), rel
    targets = (folder / "specs" / "targets.yaml").read_text()
    assert "ampere:\n  arch: sm_80" in targets and "# what nvcc compiles for" in targets
    catalog = load_catalog(folder)
    assert catalog.naming.package == "newops" and [t.name for t in catalog.targets] == ["ampere", "hopper"]
    assert main(["--root", str(folder), "generate"]) == 0
    assert (folder / "generated" / "ampere" / "tests" / "test_newops_scale_ampere_contract.py").is_file()
    assert "KERNELGEN_TARGETS" in (folder / "CMakeLists.txt").read_text()
    assert "wheel.packages = []" in (folder / "pyproject.toml").read_text()
    # a second init refuses to overwrite
    assert main(["init", str(folder), "--package", "newops"]) == 2
    assert "already has specs/project.yaml" in capsys.readouterr().err


def test_init_into_an_existing_repository_keeps_its_files(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """--keep-existing adds kernelgen's files to a repository that has some of its own: those it has
    stay byte for byte (with what the project misses without kernelgen's version), .gitignore gains
    only the entries it lacks, and the project loads and generates."""
    folder = tmp_path / "engine"
    (folder / "kernels").mkdir(parents=True)
    own = {"README.md": "# engine\n", "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(engine)\n",
           "kernels/attention.cu": "__global__ void attn(float* o) {}\n"}
    for rel, text in own.items():
        (folder / rel).write_text(text)
    (folder / ".gitignore").write_text("/build/\n*.o")
    assert main(["init", str(folder), "--package", "engineops", "--target", "hopper"]) == 2
    err = capsys.readouterr().err
    assert "already has CMakeLists.txt, .gitignore, README.md; use --keep-existing" in err, err
    assert main(["init", str(folder), "--package", "engineops", "--target", "hopper", "--keep-existing"]) == 0
    out = capsys.readouterr().out
    for rel, text in own.items():
        assert (folder / rel).read_text() == text, rel
    assert "  .gitignore (entries appended)" in out
    assert "kept the project's own:\n  CMakeLists.txt: `kernelgen build` does not read it" in out, out
    assert "  README.md: kernelgen's notes" in out
    ignore = (folder / ".gitignore").read_text().splitlines()
    assert ignore[:3] == ["/build/", "*.o", "# kernelgen's build outputs"], ignore
    assert ignore.count("/build/") == 1 and "/bindings/" in ignore
    assert (folder / "specs" / "scale.yaml").is_file() and (folder / "pyproject.toml").is_file()
    assert load_catalog(folder).naming.package == "engineops"
    assert main(["--root", str(folder), "generate"]) == 0
    # a second run writes nothing and appends nothing
    before = (folder / ".gitignore").read_text()
    assert main(["init", str(folder), "--package", "engineops", "--keep-existing"]) == 0
    assert "created 0 files" in capsys.readouterr().out
    assert (folder / ".gitignore").read_text() == before
    assert main(["init", str(folder), "--package", "engineops", "--keep-existing", "--force"]) == 2
    assert "contradict" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--package", "Bad-Name"], "'Bad-Name' is not a valid package name"),
    (["--package", "kernelgen_ops"], "kernelgen's own package"),
    (["--package", "ok", "--target", "volta"], "unknown target 'volta' for kernelgen init"),
])
def test_init_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                message: str) -> None:
    assert main(["init", str(tmp_path / "p"), *args]) == 2
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------- the package shell


def test_repository_package_is_the_shell() -> None:
    for name in project.SHELL_FILES:
        assert (REPO / "bindings" / "kernelgen_ops" / name).read_text() == (project.SHELL_DIR / name).read_text(), (
            f"bindings/kernelgen_ops/{name} differs from src/kernelgen/runtime/python/{name}: edit the latter and copy it")


def _fake_install(tmp_path: Path, package: str, built: dict[str, tuple[int, int]], device: tuple[int, int] | None,
                  registry: dict[str, tuple[int, int]], wheel: bool = False) -> Path:
    """An installed package: the shell, _project.py, and fake target builds whose _runtime reports
    ``device`` (None: no GPU); ``wheel``: as a wheel installs it (no project root)."""
    prefix = tmp_path / "install"
    pkg = prefix / package
    files = {n: (project.SHELL_DIR / n).read_text() for n in project.SHELL_FILES}
    root = None if wheel else f"/src/{package}"
    files["_project.py"] = f"PACKAGE = {package!r}\nTARGETS = {registry!r}\nROOT = {root!r}\n"
    project.write_shell(pkg, files)
    for name, cc in built.items():
        (pkg / name).mkdir()
        (pkg / name / "__init__.py").write_text(f"COMPUTE_CAPABILITY = {cc!r}\n")
        (pkg / name / "_runtime.py").write_text(
            f"def device_count():\n    return {0 if device is None else 1}\n"
            "def current_device():\n    return 0\n"
            f"def device_capability(d):\n    return {device!r}\n")
        (pkg / name / "ops.py").write_text(f"WHO = {name!r}\n")
    return prefix


def _select(prefix: Path, package: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = f"import {package}\ntry:\n    print('selected', {package}.target(), {package}.ops.WHO)\n" \
           f"except {package}.TargetError as e:\n    print('error', e)\n"
    environ = {k: v for k, v in os.environ.items() if k != "KERNELGEN_TARGET"}
    environ["PYTHONPATH"] = str(prefix)
    environ.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=60)


REG = {"ampere": (8, 0), "hopper": (9, 0)}


@pytest.mark.parametrize(("built", "device", "env", "want"), [
    # the wheel to build holds the targets this one holds too
    ({"ampere": (8, 0)}, None, {"KERNELGEN_TARGET": "hopper"},
     "error tinyx: target 'hopper' is not built (built: ampere); run: pip wheel --no-build-isolation . "
     "-Ccmake.define.KERNELGEN_TARGETS=\"ampere;hopper\" in tinyx's project folder (this tinyx is an installed "
     "wheel), then install that wheel"),
    ({"ampere": (8, 0)}, (9, 0), {},
     "error tinyx: no build for this GPU: GPU 0 has compute capability 9.0; the built targets are ampere (8.0); "
     "its target hopper is for this GPU but not built here; run: pip wheel --no-build-isolation . "
     "-Ccmake.define.KERNELGEN_TARGETS=\"ampere;hopper\" in tinyx's project folder"),
    ({}, None, {},
     "error tinyx: no target is built (its targets: ampere, hopper); run: pip wheel --no-build-isolation . "
     "-Ccmake.define.KERNELGEN_TARGETS=TARGET in tinyx's project folder (this tinyx is an installed wheel)"),
])
def test_an_installed_wheel_says_which_wheel_to_build(tmp_path: Path, built: dict[str, tuple[int, int]],
                                                     device: tuple[int, int] | None, env: dict[str, str],
                                                     want: str) -> None:
    res = _select(_fake_install(tmp_path, "tinyx", built, device, REG, wheel=True), "tinyx", env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().startswith(want), res.stdout


@pytest.mark.parametrize(("built", "device", "env", "want"), [
    ({"ampere": (8, 0), "hopper": (9, 0)}, (8, 0), {}, "selected ampere ampere"),
    ({"ampere": (8, 0), "hopper": (9, 0)}, (9, 0), {}, "selected hopper hopper"),
    ({"ampere": (8, 0)}, None, {"KERNELGEN_TARGET": "ampere"}, "selected ampere ampere"),
    ({}, None, {}, "error tinyx: no target is built (its targets: ampere, hopper); run: cd /src/tinyx && "
                   "kernelgen build"),
    ({"ampere": (8, 0)}, None, {"KERNELGEN_TARGET": "hopper"},
     "error tinyx: target 'hopper' is not built (built: ampere); run: cd /src/tinyx && kernelgen build --target hopper"),
    ({"ampere": (8, 0)}, None, {"KERNELGEN_TARGET": "volta"},
     "error KERNELGEN_TARGET=volta: tinyx has no target 'volta' (its specs/targets.yaml has: ampere, hopper)"),
    ({"ampere": (8, 0)}, (9, 0), {},
     "error tinyx: no build for this GPU: GPU 0 has compute capability 9.0; the built targets are ampere (8.0); "
     "its target hopper is for this GPU but not built here; run: cd /src/tinyx && kernelgen build --target hopper"),
    ({"ampere": (8, 0)}, (12, 0), {},
     "error tinyx: no build for this GPU: GPU 0 has compute capability 12.0; the built targets are ampere (8.0); "
     "no target of specs/targets.yaml has compute capability 12.0: add one (arch sm_120), then run: "
     "cd /src/tinyx && kernelgen build --target NAME"),
    ({"ampere": (8, 0)}, None, {},
     "error tinyx: no CUDA GPU is visible (no GPU, or no NVIDIA driver), so no target can be chosen"),
])
def test_package_selects_targets_from_its_registry_and_says_what_to_run(
        tmp_path: Path, built: dict[str, tuple[int, int]], device: tuple[int, int] | None, env: dict[str, str],
        want: str) -> None:
    res = _select(_fake_install(tmp_path, "tinyx", built, device, REG), "tinyx", env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().startswith(want), res.stdout


# ---------------------------------------------------------------- contract tests' skip reasons


def test_skip_reason_tells_not_built_from_not_on_the_path(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "bindings" / "absentpkg_xyz").mkdir(parents=True)
    reason = testing.not_built_reason("absentpkg_xyz", "hopper", "ops", root)
    assert reason == f"absentpkg_xyz is not built for target hopper; run: kernelgen build --target hopper (in {root})"
    built = root / "bindings" / "absentpkg_xyz" / "hopper"
    built.mkdir()
    (built / "__init__.py").write_text("")
    reason = testing.not_built_reason("absentpkg_xyz", "hopper", "ops", root)
    assert reason == (f"hopper is built in {built}, but the package absentpkg_xyz is not on this Python's path "
                      f"({sys.executable}); run: kernelgen build --target hopper (in {root}), which makes it "
                      "importable in the active environment")


def test_generated_contract_tests_skip_with_the_reason(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path, "skipops_xyz")
    assert main(["--root", str(root), "generate"]) == 0
    env = {k: v for k, v in os.environ.items() if k != "KERNELGEN_REQUIRE_BUILT"}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "generated"],
                         cwd=root, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 5, res.stdout[-3000:]  # every file skipped: no test collected, no error
    assert "2 skipped" in res.stdout, res.stdout[-3000:]  # one file a target, collected by default options
    assert f"skipops_xyz is not built for target hopper; run: kernelgen build --target hopper (in {root})" \
        in res.stdout, res.stdout[-3000:]


# ---------------------------------------------------------------- importable after the build


def test_link_writes_and_unlink_removes_a_pth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(project, "pth_path", lambda package: site / f"_kernelgen_{package}.pth")
    prefix = tmp_path / "bindings"
    (prefix / "linkops_xyz").mkdir(parents=True)
    msg = project.link("linkops_xyz", prefix)
    assert msg == (f"linkops_xyz is importable in this environment (from {prefix / 'linkops_xyz'}, listed in "
                   f"{site / '_kernelgen_linkops_xyz.pth'})")
    assert (site / "_kernelgen_linkops_xyz.pth").read_text() == f"{prefix}\n"
    assert project.unlink("linkops_xyz") == f"removed {site / '_kernelgen_linkops_xyz.pth'}"
    assert not (site / "_kernelgen_linkops_xyz.pth").exists()


def test_link_writes_nothing_where_another_copy_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(project, "pth_path", lambda package: tmp_path / f"_kernelgen_{package}.pth")
    msg = project.link("kernelgen_ops", tmp_path / "other")
    assert msg == (f"kernelgen_ops is built in {tmp_path / 'other' / 'kernelgen_ops'}, but this environment imports "
                   f"kernelgen's own kernelgen_ops from {REPO / 'bindings' / 'kernelgen_ops'}; give the project a "
                   "package of its own: specs/project.yaml with `package: NAME` (kernelgen init writes one), then run "
                   "kernelgen build again")
    assert not list(tmp_path.glob("*.pth"))
    (tmp_path / "other" / "pytest").mkdir(parents=True)
    assert project.link("pytest", tmp_path / "other").endswith(
        "but this environment imports pytest from " + str(Path(pytest.__file__).parent) +
        "; to use this build, pip uninstall that copy and run kernelgen build again")
    assert not list(tmp_path.glob("*.pth"))


def test_link_leaves_an_importable_package_alone() -> None:
    msg = project.link("kernelgen_ops", REPO / "bindings")
    assert msg == f"kernelgen_ops is importable in this environment (from {REPO / 'bindings' / 'kernelgen_ops'})"


def _installed_target(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True)
    for name in ("package_target.cmake", *names):
        (folder / name).write_text("x")


def test_a_renamed_package_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(project, "pth_path", lambda package: site / f"_kernelgen_{package}.pth")
    root, build, prefix = tmp_path / "proj", tmp_path / "proj" / "build", tmp_path / "proj" / "bindings"
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "oldops"\n')
    (root / "tests" / "test_x.py").write_text("import oldops\n")
    (root / "CMakeLists.txt").write_text("project(oldops_extra)\n")  # another name: not listed
    project.write_shell(prefix / "oldops", {"__init__.py": "", "_project.py": "", "oldops-config.cmake": ""})
    _installed_target(prefix / "oldops" / "hopper", "libx.so")
    (site / "_kernelgen_oldops.pth").write_text(f"{prefix}\n")
    assert project.tidy_install(build, prefix, "oldops", ["hopper"], root) == []
    notes = project.tidy_install(build, prefix, "newops", ["hopper"], root)
    assert notes == [
        f"{site / '_kernelgen_oldops.pth'} is now {site / '_kernelgen_newops.pth'}",
        f"removed {prefix / 'oldops'} (the package's earlier name)",
        "the package is now newops (was oldops); still naming oldops: pyproject.toml, tests/test_x.py",
    ]
    assert not (prefix / "oldops").exists()
    assert (site / "_kernelgen_newops.pth").read_text() == f"{prefix}\n"
    # the record moves with the project
    moved = tmp_path / "moved"
    root.rename(moved)
    _installed_target(moved / "bindings" / "newops" / "hopper")
    assert project.tidy_install(moved / "build", moved / "bindings", "thirdops", ["hopper"], moved) == \
        [f"removed {moved / 'bindings' / 'newops'} (the package's earlier name)"]


def test_files_of_others_in_a_renamed_package_stay(tmp_path: Path) -> None:
    prefix = tmp_path / "bindings"
    _installed_target(prefix / "oldops" / "hopper")
    (prefix / "oldops" / "mine.txt").write_text("kept")
    project.tidy_install(tmp_path / "build", prefix, "oldops", ["hopper"], tmp_path)
    notes = project.tidy_install(tmp_path / "build", prefix, "newops", ["hopper"], tmp_path)
    assert notes == [f"removed kernelgen's files of the package oldops from {prefix / 'oldops'}; other files "
                     "remain there"]
    assert sorted(p.name for p in (prefix / "oldops").iterdir()) == ["mine.txt"]


def test_a_target_gone_from_targets_yaml_is_uninstalled(tmp_path: Path) -> None:
    prefix = tmp_path / "bindings"
    _installed_target(prefix / "ops" / "ampere")
    _installed_target(prefix / "ops" / "hopper")
    (prefix / "ops" / "notes").mkdir()  # not a target's install: kept
    notes = project.tidy_install(tmp_path / "build", prefix, "ops", ["hopper"], tmp_path)
    assert notes == [f"removed {prefix / 'ops' / 'ampere'} (target ampere is no longer in specs/targets.yaml)"]
    assert sorted(p.name for p in (prefix / "ops").iterdir()) == ["hopper", "notes"]


def test_unlink_removes_the_pth_of_an_earlier_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(project, "pth_path", lambda package: tmp_path / f"_kernelgen_{package}.pth")
    prefix = tmp_path / "bindings"
    (tmp_path / "_kernelgen_oldops.pth").write_text(f"{prefix}\n")
    (tmp_path / "_kernelgen_other.pth").write_text(f"{tmp_path / 'elsewhere'}\n")
    assert project.unlink("newops") == f"no {tmp_path / '_kernelgen_newops.pth'}: nothing to remove"
    assert project.unlink("newops", prefix) == f"removed {tmp_path / '_kernelgen_oldops.pth'}"
    assert sorted(p.name for p in tmp_path.glob("*.pth")) == ["_kernelgen_other.pth"]


def test_an_install_keeps_only_what_the_last_install_wrote(tmp_path: Path) -> None:
    from kernelgen.build import prune_install

    folder = tmp_path / "ops" / "hopper"
    for rel in ("lib_new.so", "lib_old.so", "m.so", "include/ops/m.h", "include/ops/gone.h",
                "include/gone/x.h", "__pycache__/__init__.cpython-311.pyc"):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("x")
    manifest = tmp_path / "install_manifest.txt"
    assert prune_install(folder, manifest) == []  # no manifest: nothing removed
    manifest.write_text("".join(f"{folder / r}\n" for r in ("lib_new.so", "m.so", "include/ops/m.h")))
    assert prune_install(folder, manifest) == ["include/gone/x.h", "include/ops/gone.h", "lib_old.so"]
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert left == ["__pycache__/__init__.cpython-311.pyc", "include/ops/m.h", "lib_new.so", "m.so"]
    assert not (folder / "include" / "gone").exists()
    manifest.write_text(f"{tmp_path / 'elsewhere' / 'x.so'}\n")  # lists nothing in the folder
    assert prune_install(folder, manifest) == []


def test_a_moved_build_tree_is_configured_afresh(tmp_path: Path) -> None:
    from kernelgen.build import _configured_elsewhere

    bdir = tmp_path / "build" / "hopper"
    bdir.mkdir(parents=True)
    assert _configured_elsewhere(bdir) is None
    (bdir / "CMakeCache.txt").write_text(f"X:STRING=1\nCMAKE_CACHEFILE_DIR:INTERNAL={bdir}\n")
    assert _configured_elsewhere(bdir) is None
    (bdir / "CMakeCache.txt").write_text("CMAKE_CACHEFILE_DIR:INTERNAL=/old/place/build/hopper\n")
    assert _configured_elsewhere(bdir) == "was configured in /old/place/build/hopper"


def test_a_build_tree_of_kernelgen_installed_elsewhere_is_configured_afresh(tmp_path: Path) -> None:
    # An isolated `pip wheel` installs kernelgen in a temporary environment: the tree it configures
    # names that environment's driver project, which CMake refuses to reuse from another (and the
    # other way round).
    from kernelgen.build import DRIVER_DIR, _configured_elsewhere

    bdir = tmp_path / "build" / "hopper"
    bdir.mkdir(parents=True)
    cache = f"CMAKE_CACHEFILE_DIR:INTERNAL={bdir}\nCMAKE_HOME_DIRECTORY:INTERNAL=@HOME@\n"
    (bdir / "CMakeCache.txt").write_text(cache.replace("@HOME@", str(DRIVER_DIR)))
    assert _configured_elsewhere(bdir) is None
    # the same folder through a link is the same driver
    (tmp_path / "link").symlink_to(DRIVER_DIR.parent)
    (bdir / "CMakeCache.txt").write_text(cache.replace("@HOME@", str(tmp_path / "link" / "cmake")))
    assert _configured_elsewhere(bdir) is None
    isolated = "/tmp/pip-build-env-54uxbvsy/overlay/lib/python3.11/site-packages/kernelgen/cmake"
    (bdir / "CMakeCache.txt").write_text(cache.replace("@HOME@", isolated))
    assert _configured_elsewhere(bdir) == (f"was configured from kernelgen's CMake driver at {isolated}, and "
                                           f"kernelgen's is now {DRIVER_DIR}")
    assert _configured_elsewhere(bdir, driver=Path(isolated)) is None


# ---------------------------------------------------------------- the CUDA toolkit


def test_cuda_wheels_are_the_cuda_extra() -> None:
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["cuda"]
    assert list(toolkit.CUDA_WHEELS) == extra


def test_without_a_toolkit_build_installs_it_from_pypi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELGEN_IGNORE_SYSTEM_CUDA", "1")
    monkeypatch.delenv("KERNELGEN_NO_CUDA_INSTALL", raising=False)
    monkeypatch.setattr(toolkit, "_wheel_roots", lambda: [])
    with pytest.raises(ToolkitError) as info:
        toolkit.find_toolkit()
    assert "no CUDA toolkit (nvcc) found (the machine's toolkits are hidden: KERNELGEN_IGNORE_SYSTEM_CUDA is set)" \
        in str(info.value)
    calls: list[list[str]] = []

    class FakePip:
        def __init__(self, cmd: list[str], **kw: object) -> None:
            calls.append(cmd)
            self.stdout = iter(["Collecting nvidia-cuda-nvcc\n", "ERROR: no network here\n"])

        def wait(self) -> int:
            return 1

    monkeypatch.setattr(toolkit.subprocess, "Popen", FakePip)
    lines: list[str] = []
    with pytest.raises(ToolkitError, match="installing the CUDA toolkit from PyPI failed"):
        toolkit.find_toolkit(install=True, echo=lines.append)
    assert calls == [[sys.executable, "-m", "pip", "install", "--progress-bar", "off", *toolkit.CUDA_WHEELS]]
    assert lines[0].startswith("kernelgen: no CUDA toolkit (nvcc) found (the machine's toolkits are hidden")
    assert "installing the CUDA toolkit from PyPI into this environment" in lines[0]
    assert "  Collecting nvidia-cuda-nvcc" in lines  # pip's progress is shown
    monkeypatch.setenv("KERNELGEN_NO_CUDA_INSTALL", "1")
    calls.clear()
    with pytest.raises(ToolkitError, match="no CUDA toolkit"):
        toolkit.find_toolkit(install=True, echo=lines.append)
    assert calls == []


def test_scaffold_targets_cover_the_repository_targets(tmp_path: Path) -> None:
    """A new project's targets carry the repository's whole device table for the targets both
    have (the plans of a new project on paper are those of the reference GPUs), and every known
    target's table loads."""
    assert main(["init", str(tmp_path / "all"), "--package", "allops", *[
        x for t in scaffold.KNOWN_TARGETS for x in ("--target", t)]]) == 0
    new = {t.name: t for t in load_catalog(tmp_path / "all").targets}
    assert sorted(new) == sorted(scaffold.KNOWN_TARGETS)
    assert new["ampere"].sm_count == 108 and new["ampere"].max_cluster_size == 1
    for t in load_catalog(REPO).targets:
        assert new[t.name] == replace(new[t.name], **{f.name: getattr(t, f.name) for f in fields(t)
                                                      if f.name not in ("loc", "build")}), t.name


def test_wheel_cmake_script_installs_exactly_the_staged_package(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path, "wheelops")
    catalog = load_catalog(root)
    staging = tmp_path / "stage with space"
    (staging / "wheelops" / "hopper").mkdir(parents=True)
    (staging / "wheelops" / "hopper" / "fixture_ops.so").write_bytes(b"\x7fELF")
    (staging / "wheelops" / "hopper" / "fixture_ops.pyi").write_text("def f() -> None: ...\n")
    (staging / "wheelops" / "removed_ops.pyi").write_text("")  # a module's stub from an earlier staging
    # what an earlier wheel build staged (a persistent build-dir): a target not asked for now, a stray file
    _installed_target(staging / "wheelops" / "gb10", "fixture_ops.so")
    (staging / "wheelops" / "notes.txt").write_text("")
    script = scaffold.cmake_script(catalog, staging, ["hopper"])
    assert f'install(DIRECTORY "{staging / "wheelops" / "hopper"}" DESTINATION wheelops' in script
    (tmp_path / "cm").mkdir()
    (tmp_path / "cm" / "project.cmake").write_text(script)
    (tmp_path / "cm" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(x LANGUAGES NONE)\ninclude(project.cmake)\n")
    cmake = toolkit.find_cmake()
    subprocess.run([cmake, "-S", str(tmp_path / "cm"), "-B", str(tmp_path / "b")], check=True, capture_output=True,
                   timeout=120)
    subprocess.run([cmake, "--install", str(tmp_path / "b"), "--prefix", str(tmp_path / "p")], check=True,
                   capture_output=True, timeout=120)
    got = sorted(str(p.relative_to(tmp_path / "p")) for p in (tmp_path / "p").rglob("*") if p.is_file())
    # the modules' stubs also at the top (typed `from wheelops import fixture_ops`), a removed module's gone
    assert got == ["wheelops/__init__.py", "wheelops/_api.py", "wheelops/_project.py", "wheelops/fixture_ops.pyi",
                   "wheelops/hopper/fixture_ops.pyi", "wheelops/hopper/fixture_ops.so", "wheelops/py.typed",
                   "wheelops/wheelops-config.cmake"]
    assert (tmp_path / "p" / "wheelops" / "fixture_ops.pyi").read_text() == "def f() -> None: ...\n"
    assert "TARGETS = {\"gb10\": (12, 1), \"hopper\": (9, 0)}\nROOT = None" in (tmp_path / "p/wheelops/_project.py").read_text()
