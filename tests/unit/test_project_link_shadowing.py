"""`kernelgen build` says the package is importable from the build only where `import` would find
the build: another copy found first (an installed wheel, an editable install, a folder on
PYTHONPATH or listed in another .pth file) is named, whether or not kernelgen's .pth file exists;
`kernelgen unlink` says which copy `import` still finds."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

from kernelgen import project

PKG = "shadowops_xyz"
BASE = list(sys.path)  # the standard library's folders and the test environment's (without the package)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A site-packages folder (kernelgen's .pth files go there) on a path of its own, and a project's
    build of the package."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(project, "pth_path", lambda package: site / f"_kernelgen_{package}.pth")
    monkeypatch.setattr(sys, "path", [*BASE, str(site)])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    prefix = tmp_path / "proj" / "bindings"
    _package(prefix)
    return {"site": site, "prefix": prefix, "pth": site / f"_kernelgen_{PKG}.pth"}


def _package(folder: Path) -> Path:
    (folder / PKG).mkdir(parents=True)
    (folder / PKG / "__init__.py").write_text("")
    return folder / PKG


def _start(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, *extra: Path) -> None:
    """sys.path as a Python started now has it: site-packages, then the folders the .pth files list."""
    listed = [env["prefix"]] if env["pth"].is_file() else []
    monkeypatch.setattr(sys, "path", [*BASE, str(env["site"]), *map(str, extra), *map(str, listed)])


def test_a_wheel_installed_after_the_first_build_is_named(env: dict[str, Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, pth, site = env["prefix"], env["pth"], env["site"]
    assert project.link(PKG, prefix) == (
        f"{PKG} is importable in this environment (from {prefix / PKG}, listed in {pth})")
    wheel = _package(site)  # pip install --no-deps <the project's wheel>
    _start(env, monkeypatch)
    want = (f"{PKG} is built in {prefix / PKG}, but this environment imports {PKG} from {wheel} ({pth} lists this "
            "build, but that copy comes first); to use this build, pip uninstall that copy and run kernelgen build "
            "again")
    assert project.link(PKG, prefix) == want
    assert pth.read_text() == f"{prefix}\n"
    # without kernelgen's .pth file: the same copy named
    pth.unlink()
    _start(env, monkeypatch)
    assert project.link(PKG, prefix) == want.replace(f" ({pth} lists this build, but that copy comes first)", "")
    assert not pth.exists()


def test_another_projects_pth_is_not_taken_over_where_a_wheel_comes_first(
        env: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, pth, site = env["prefix"], env["pth"], env["site"]
    other = tmp_path / "B" / "bindings"
    _package(other)
    pth.write_text(f"{other}\n")
    wheel = _package(site)
    monkeypatch.setattr(sys, "path", [*BASE, str(site), str(other)])
    assert project.link(PKG, prefix).startswith(
        f"{PKG} is built in {prefix / PKG}, but this environment imports {PKG} from {wheel}; ")
    assert pth.read_text() == f"{other}\n"


def test_a_folder_listed_by_an_earlier_pth_file_is_named(env: dict[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, pth, site = env["prefix"], env["pth"], env["site"]
    src = site.parent / "checkout" / "src"
    found = _package(src)
    editable = site / f"__editable__.{PKG}-0.1.0.pth"  # sorted before kernelgen's: read first
    editable.write_text(f"{src}\n")
    pth.write_text(f"{prefix}\n")
    _start(env, monkeypatch, src)
    assert project.link(PKG, prefix) == (
        f"{PKG} is built in {prefix / PKG}, but this environment imports {PKG} from {found} (listed in {editable}) "
        f"({pth} lists this build, but that copy comes first); to use this build, pip uninstall that copy (an "
        f"editable install), or remove {src} from {editable} and run kernelgen build again")


def test_a_pth_file_read_after_kernelgens_does_not_hide_the_build(env: dict[str, Path],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, pth, site = env["prefix"], env["pth"], env["site"]
    later = site.parent / "later"
    _package(later)
    (site / "zz_other.pth").write_text(f"{later}\n")  # sorted after kernelgen's: its folder comes after
    monkeypatch.setattr(sys, "path", [*BASE, str(site), str(later)])
    assert project.link(PKG, prefix) == (
        f"{PKG} is importable in this environment (from {prefix / PKG}, listed in {pth})")
    assert pth.read_text() == f"{prefix}\n"


def test_a_folder_on_pythonpath_is_named(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, site = env["prefix"], env["site"]
    elsewhere = site.parent / "elsewhere"
    found = _package(elsewhere)
    monkeypatch.setenv("PYTHONPATH", str(elsewhere))
    monkeypatch.setattr(sys, "path", [str(elsewhere), *BASE, str(site)])
    assert project.link(PKG, prefix) == (
        f"{PKG} is built in {prefix / PKG}, but this environment imports {PKG} from {found} (on PYTHONPATH); to use "
        f"this build, remove {elsewhere} from PYTHONPATH and run kernelgen build again")
    assert not env["pth"].exists()


class _EditableFinder:
    """An editable install's import hook, ahead of the path (as scikit-build-core's is)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != PKG:
            return None
        return importlib.util.spec_from_file_location(PKG, self.folder / "__init__.py",
                                                      submodule_search_locations=[str(self.folder)])


def test_an_editable_install_of_the_package_is_named(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, pth = env["prefix"], env["pth"]
    found = _package(env["site"].parent / "editable")
    monkeypatch.setattr(sys, "meta_path", [_EditableFinder(found), *sys.meta_path])
    pth.write_text(f"{prefix}\n")
    _start(env, monkeypatch)
    assert project.link(PKG, prefix) == (
        f"{PKG} is built in {prefix / PKG}, but this environment imports {PKG} from {found} (an editable install: "
        f"the import hook _EditableFinder finds it) ({pth} lists this build, but that copy comes first); to use this "
        "build, pip uninstall that copy and run kernelgen build again")


def test_unlink_says_which_copy_import_still_finds(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, pth, site = env["prefix"], env["pth"], env["site"]
    project.link(PKG, prefix)
    _start(env, monkeypatch)
    assert project.unlink(PKG, prefix) == f"removed {pth}"
    wheel = _package(site)
    project.link(PKG, prefix)  # names the wheel, writes nothing
    pth.write_text(f"{prefix}\n")
    _start(env, monkeypatch)
    assert project.unlink(PKG, prefix) == f"removed {pth}; `import {PKG}` still finds {wheel}"
    assert project.unlink(PKG, prefix) == f"no {pth}: nothing to remove; `import {PKG}` still finds {wheel}"


def test_pth_lines_with_spaces_are_one_folder(env: dict[str, Path], tmp_path: Path) -> None:
    prefix = tmp_path / "sp ace" / "bindings"
    _package(prefix)
    pth = env["pth"]
    assert project.link(PKG, prefix).endswith(f"listed in {pth})")
    # listed already: nothing rewritten, nothing said about an earlier build
    assert project.link(PKG, prefix) == f"{PKG} is importable in this environment (from {prefix / PKG}, listed in {pth})"
    assert project.unlink(PKG, prefix) == f"removed {pth}"
