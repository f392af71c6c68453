"""The installed package's CMake files: the version file find_package(<package> <version>) reads
(the project's version from pyproject.toml for `kernelgen build`, the wheel's version for a wheel),
and the config's messages for a target that is not built, which differ for an installed wheel (how
the wheel is built with it) and a `kernelgen build` (the build to run). Each case configures a small
CMake program (no compiler: LANGUAGES NONE) against a package whose targets are stand-ins."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen import project, scaffold, toolkit
from kernelgen.loader import load_catalog

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "project"  # targets gb10 and hopper

PYPROJECT = '[build-system]\nrequires = ["kernelgen"]\n\n[project]\nname = "cfgops"\nversion = "@V@"\n'

CONSUMER = """\
cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES NONE)
find_package(cfgops @ASK@ CONFIG REQUIRED COMPONENTS @COMPONENTS@)
message(STATUS "found cfgops ${cfgops_VERSION}")
"""


def _root(tmp_path: Path, version: str | None) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    (root / "specs" / "project.yaml").write_text("package: cfgops\n")
    if version is not None:
        (root / "pyproject.toml").write_text(PYPROJECT.replace("@V@", version))
    return root


def _install(prefix: Path, files: dict[str, str], built: tuple[str, ...] = ("hopper",)) -> Path:
    """The package as an install holds it: the shell's files and, for each built target, a
    package_target.cmake that defines its imported library."""
    pkg = prefix / "cfgops"
    project.write_shell(pkg, files)
    for t in built:
        (pkg / t).mkdir(parents=True, exist_ok=True)
        (pkg / t / "package_target.cmake").write_text(f"add_library(cfgops::{t} INTERFACE IMPORTED)\n")
    return prefix


def _configure(tmp_path: Path, prefix: Path, ask: str = "", components: str = "hopper") -> tuple[int, str]:
    src = tmp_path / "consumer"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CONSUMER.replace("@ASK@", ask).replace("@COMPONENTS@", components))
    res = subprocess.run([toolkit.find_cmake(), "-S", str(src), "-B", str(src / "build"),
                          f"-DCMAKE_PREFIX_PATH={prefix}"], capture_output=True, text=True, timeout=120)
    return res.returncode, " ".join((res.stdout + res.stderr).split())


@pytest.mark.parametrize(("text", "want"), [
    ('[project]\nname = "x"\nversion = "0.1.0"\n', "0.1.0"),
    ('[project]\nname = "x"\nversion = "2.3.0rc1"\n', "2.3.0"),
    ("[project]  # the package\nversion = '0.3'\n\n[tool.x]\nversion = '9'\n", "0.3"),
    ('[project]\nname = "x"\nversion = "1!4.5.post2"\n', "4.5"),
    ('[project]\nname = "x"\nversion = "1.2.3.4.5"\n', "1.2.3.4"),
    ('[project]\nname = "x"\ndynamic = ["version"]\n', None),
    ('[tool.other]\nversion = "9.9"\n\n[project]\nname = "x"\n', None),  # another table's version
    ('[project\nversion = "1.0"\n', None),  # not TOML
])
@pytest.mark.parametrize("tomllib", [True, False])  # without it (Python 3.10), the [project] table's line
def test_the_project_version_is_pyproject_tomls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str,
                                                want: str | None, tomllib: bool) -> None:
    if not tomllib:
        monkeypatch.setitem(sys.modules, "tomllib", None)  # import tomllib raises ImportError
    (tmp_path / "pyproject.toml").write_text(text)
    assert project.project_version(tmp_path) == want
    assert project.project_version(tmp_path / "nowhere") is None


def test_a_build_installs_the_version_file_where_the_project_has_a_version(tmp_path: Path) -> None:
    root = _root(tmp_path, "0.1.0")
    catalog = load_catalog(root)
    files = project.shell_files(catalog, root)
    assert 'set(PACKAGE_VERSION "0.1.0")' in files["cfgops-config-version.cmake"]
    folder = tmp_path / "bindings" / "cfgops"
    project.write_shell(folder, files)
    assert (folder / "cfgops-config-version.cmake").is_file()
    # without a version (none, or a dynamic one): no version file, and the one written before goes
    (root / "pyproject.toml").write_text('[project]\nname = "cfgops"\ndynamic = ["version"]\n')
    files = project.shell_files(catalog, root)
    assert "cfgops-config-version.cmake" not in files
    project.write_shell(folder, files)
    assert not (folder / "cfgops-config-version.cmake").exists()
    # a wheel's package: the wheel's CMake writes it (below)
    assert "cfgops-config-version.cmake" not in project.shell_files(catalog, None)


@pytest.mark.parametrize(("ask", "found"), [
    ("", True),
    ("0.1", True),
    ("0.1.0 EXACT", True),
    ("0.0.9", True),      # same major, older: compatible
    ("0.2", False),       # newer than the package
    ("1.0", False),       # another major version
    ("0.1...1.0", True),  # a range holding it
    ("0.2...<1.0", False),
])
def test_find_package_checks_the_projects_version(tmp_path: Path, ask: str, found: bool) -> None:
    root = _root(tmp_path, "0.1.0")
    prefix = _install(tmp_path / "bindings", project.shell_files(load_catalog(root), root))
    rc, out = _configure(tmp_path, prefix, ask)
    assert (rc == 0) == found, out
    if found:
        assert "found cfgops 0.1.0" in out, out
    else:
        assert "version: 0.1.0" in out, out  # CMake names the version it found


def test_without_a_version_file_find_package_without_a_version_still_works(tmp_path: Path) -> None:
    root = _root(tmp_path, None)
    prefix = _install(tmp_path / "bindings", project.shell_files(load_catalog(root), root))
    assert _configure(tmp_path, prefix)[0] == 0


def test_a_wheel_installs_the_version_file_of_the_wheels_version(tmp_path: Path) -> None:
    root = _root(tmp_path, None)  # a dynamic version: scikit-build-core still knows the wheel's
    staging = tmp_path / "kernelgen" / "install"
    (staging / "cfgops" / "hopper").mkdir(parents=True)
    (staging / "cfgops" / "hopper" / "package_target.cmake").write_text(
        "add_library(cfgops::hopper INTERFACE IMPORTED)\n")
    script = scaffold.cmake_script(load_catalog(root), staging)
    (tmp_path / "cm").mkdir()
    (tmp_path / "cm" / "project.cmake").write_text(script)
    (tmp_path / "cm" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(x LANGUAGES NONE)\ninclude(project.cmake)\n")
    cmake = toolkit.find_cmake()
    for version, prefix in (("2.4.1", tmp_path / "p"), (None, tmp_path / "q")):
        build = tmp_path / f"b{prefix.name}"
        define = [f"-DSKBUILD_PROJECT_VERSION={version}"] if version else []
        subprocess.run([cmake, "-S", str(tmp_path / "cm"), "-B", str(build), *define], check=True,
                       capture_output=True, timeout=120)
        subprocess.run([cmake, "--install", str(build), "--prefix", str(prefix)], check=True, capture_output=True,
                       timeout=120)
    assert 'set(PACKAGE_VERSION "2.4.1")' in (tmp_path / "p" / "cfgops" / "cfgops-config-version.cmake").read_text()
    assert not (tmp_path / "q" / "cfgops" / "cfgops-config-version.cmake").exists()
    rc, out = _configure(tmp_path, tmp_path / "p", "2.1")
    assert rc == 0 and "found cfgops 2.4.1" in out, out
    rc, out = _configure(tmp_path, tmp_path / "p", "3")
    assert rc != 0 and "version: 2.4.1" in out, out


@pytest.mark.parametrize(("wheel", "built", "components", "message"), [
    (True, ("hopper",), "gb10",
     "cfgops: target gb10 is not built in @PKG@: this installed wheel of cfgops was built without it (it holds "
     "hopper); build the wheel with it, in cfgops's project folder: pip wheel --no-build-isolation . "
     '-Ccmake.define.KERNELGEN_TARGETS="hopper;gb10", then install that wheel'),
    (True, (), "",
     "cfgops: no target is built in @PKG@ (an installed wheel of cfgops); build the wheel with one, in cfgops's "
     "project folder: pip wheel --no-build-isolation . -Ccmake.define.KERNELGEN_TARGETS=TARGET (its targets: gb10 "
     "hopper), then install that wheel"),
    (False, ("hopper",), "gb10",
     "cfgops: target gb10 is not built in @PKG@; run: kernelgen build --target gb10"),
    (False, (), "", "cfgops: no target is built in @PKG@; run: kernelgen build"),
])
def test_a_target_that_is_not_built_says_how_to_build_it(tmp_path: Path, wheel: bool, built: tuple[str, ...],
                                                         components: str, message: str) -> None:
    root = _root(tmp_path, None)
    prefix = _install(tmp_path / "site", project.shell_files(load_catalog(root), None if wheel else root), built)
    rc, out = _configure(tmp_path, prefix, "", components)
    assert rc != 0
    assert message.replace("@PKG@", str(prefix / "cfgops")) in out, out
    if wheel:
        assert "kernelgen build" not in out, out
