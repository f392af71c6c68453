"""Paths a build hands to CMake and nvcc (the project root, the build and install folders, the
toolkit's, include folders): a character CMake or nvcc misreads stops the build, naming the path,
the character and why, before anything is configured; every other character builds ('#' with a
warning: with it in a path, every build compiles the CUDA sources again)."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest

from kernelgen import build, schema, toolkit
from kernelgen.build import BuildOptions
from kernelgen.errors import BuildError, SpecError
from kernelgen.loader import load_catalog
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "build_settings"

# Folder names with a character CMake or nvcc cannot take, and the reason's words.
REFUSED = [
    ("semi;x", "';'", "list separator"),
    ('quo"te', "'\"'", "quoting"),
    ("back\\slash", "'\\\\'", "escape"),
    ("dol$HOMEx", "'$'", "expand"),
    ("tick`x`", "'`'", "command"),
    ("it's", '"\'"', "include folders"),
    ("br[x", "'['", "square brackets"),
    ("br]x", "']'", "square brackets"),
    ("new\nline", "U+000A", "control character"),
]
# Folder names that build: none of these is refused.
TAKEN = ["with space", "a&b", "hash#x", "par(x)", "st*r", "br{x}", "at@eq=x", "-lead", "josé", "日本", "x" * 200,
         "tilde~x", "pct%x", "ex!x", "lt<x>|"]


@pytest.mark.parametrize(("name", "shown", "why"), REFUSED)
def test_a_refused_character_is_named_with_its_reason(tmp_path: Path, name: str, shown: str, why: str) -> None:
    problem = build.path_problem(tmp_path / name / "proj")
    assert problem is not None and problem.startswith(f"has the character {shown}, which CMake and nvcc cannot take")
    assert why in problem


@pytest.mark.parametrize("name", TAKEN)
def test_other_characters_are_taken(tmp_path: Path, name: str) -> None:
    assert build.path_problem(tmp_path / name / "proj") is None


def test_a_hash_builds_with_a_warning_that_every_build_compiles_again(tmp_path: Path) -> None:
    path = tmp_path / "hash#x" / "proj"
    assert build.path_problem(path) is None
    slow = build.path_slowdown(path) or ""
    assert slow.startswith("has the character '#', with which every build compiles the CUDA sources again")
    assert "dependency files" in slow and "comment" in slow
    assert all(build.path_slowdown(tmp_path / name / "proj") is None for name in TAKEN if "#" not in name)
    real = tmp_path / "hash#y"
    real.mkdir()
    (tmp_path / "plain").symlink_to(real)
    assert "(it leads to " in (build.path_slowdown(tmp_path / "plain") or "")


def _no_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """build_targets up to its warnings: stand-in tools (a toolkit under tmp_path), no target built."""
    tk = toolkit.Toolkit(tmp_path / "cuda" / "bin" / "nvcc", tmp_path / "cuda", "13.0", "CUDA_HOME")
    tools = build.Tools(tk, "/usr/bin/cmake", "/usr/bin/ninja", "/pybind11", None)
    monkeypatch.setattr(build.Tools, "find", staticmethod(lambda opts, echo=print: tools))
    monkeypatch.setattr(build, "check_arches", lambda targets, tk: None)
    monkeypatch.setattr(build, "_target_lock", lambda path, echo: contextlib.nullcontext())
    monkeypatch.setattr(build, "_build_one", lambda *a: None)


def test_a_build_warns_about_a_hash_in_the_folders_its_dependency_files_name(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "a#b" / "proj"
    _no_build(tmp_path, monkeypatch)
    lines: list[str] = []
    build.build_targets(_opts(root), [SimpleNamespace(name="hopper", arch="sm_90a")], echo=lines.append)  # type: ignore[list-item]
    warned = [line for line in lines if line.startswith("kernelgen: warning:")]
    # the project folder (the build folder inside it is not warned about again)
    assert len(warned) == 1, lines
    assert warned[0].startswith(f"kernelgen: warning: the project folder {root} has the character '#'")
    assert "The build works; for builds that compile only what changed: move (or copy) the project" in warned[0]
    # a build folder elsewhere, on its own; the install folder is not (no dependency file names it)
    opts = _opts(tmp_path / "fine")
    opts.build_dir = tmp_path / "b#x"
    opts.install_prefix = tmp_path / "i#x"
    lines.clear()
    build.build_targets(opts, [SimpleNamespace(name="hopper", arch="sm_90a")], echo=lines.append)  # type: ignore[list-item]
    warned = [line for line in lines if line.startswith("kernelgen: warning:")]
    assert len(warned) == 1 and warned[0].startswith(f"kernelgen: warning: the build folder {tmp_path / 'b#x'} has"), lines
    assert warned[0].endswith("choose another with --build-dir DIR")
    lines.clear()
    build.build_targets(_opts(tmp_path / "fine"), [SimpleNamespace(name="hopper", arch="sm_90a")],  # type: ignore[list-item]
                        echo=lines.append)
    assert not any("warning" in line for line in lines), lines


def test_a_build_warns_about_a_hash_in_an_include_folder_outside_the_project(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The specs' include folders are named by nvcc's dependency files too: one with a '#' outside
    the project is warned about (inside a warned project, not again); check_include_dirs lists them."""
    root = _project(tmp_path, "fine")
    headers = tmp_path / "third#party" / "include"
    headers.mkdir(parents=True)
    path = root / "specs" / "plain.yaml"
    path.write_text(path.read_text() + f"build: {{include_dirs: [\"{headers}\", specs]}}\n")
    catalog = load_catalog(root)
    found = build.check_include_dirs(catalog, root, list(catalog.targets))
    assert headers in found and root / "specs" in found and all(d.is_absolute() for d in found)
    _no_build(tmp_path, monkeypatch)
    lines: list[str] = []
    opts = _opts(root)
    opts.include_dirs = found
    build.build_targets(opts, [SimpleNamespace(name="hopper", arch="sm_90a")], echo=lines.append)  # type: ignore[list-item]
    warned = [line for line in lines if line.startswith("kernelgen: warning:")]
    assert len(warned) == 1, lines
    assert warned[0].startswith(f"kernelgen: warning: the include folder {headers} has the character '#'")
    assert warned[0].endswith("move (or copy) the headers to a folder whose path has no '#'")
    # inside a project warned about already: once, for the project
    hashed = _project(tmp_path, "a#b")
    opts = _opts(hashed)
    opts.include_dirs = [hashed / "specs"]
    lines.clear()
    build.build_targets(opts, [SimpleNamespace(name="hopper", arch="sm_90a")], echo=lines.append)  # type: ignore[list-item]
    warned = [line for line in lines if line.startswith("kernelgen: warning:")]
    assert len(warned) == 1 and warned[0].startswith(f"kernelgen: warning: the project folder {hashed} "), lines


def test_a_path_is_judged_where_it_leads(tmp_path: Path) -> None:
    real = tmp_path / "semi;x"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert "(it leads to " in (build.path_problem(tmp_path / "link") or "")


def _opts(root: Path) -> BuildOptions:
    return BuildOptions(root, root / "build", root / "bindings", torch_reader=False)


@pytest.mark.parametrize(("which", "option"), [("root", "the project folder"), ("build_dir", "--build-dir"),
                                               ("install_prefix", "--install-dir")])
def test_a_build_stops_before_finding_tools_or_configuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           which: str, option: str) -> None:
    found: list[object] = []
    monkeypatch.setattr(build.Tools, "find", staticmethod(lambda opts, echo=print: found.append(opts)))
    monkeypatch.setattr(build, "_build_one", lambda *a: pytest.fail("configured"))
    good = tmp_path / "proj"
    opts = _opts(good)
    bad = tmp_path / "semi;x" / "sub"
    setattr(opts, which, bad)
    with pytest.raises(BuildError) as info:
        build.build_targets(opts, [SimpleNamespace(name="hopper", arch="sm_90a")], echo=lambda _: None)  # type: ignore[list-item]
    assert str(bad) in str(info.value) and "';'" in str(info.value) and option in str(info.value)
    assert found == [] and not (tmp_path / "semi;x").exists() and not good.exists()


def test_a_toolkit_at_such_a_path_stops_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cu$HOME" / "cuda"
    tk = toolkit.Toolkit(root / "bin" / "nvcc", root, "13.5", "CUDA_HOME")
    monkeypatch.setattr(toolkit, "find_toolkit", lambda install=False, echo=print: tk)
    monkeypatch.setattr(toolkit, "find_cmake", lambda: "/usr/bin/cmake")
    monkeypatch.setattr(toolkit, "find_ninja", lambda: "/usr/bin/ninja")
    monkeypatch.setattr(toolkit, "find_pybind11", lambda: "/pybind11")
    with pytest.raises(BuildError, match=r"the CUDA toolkit \(from CUDA_HOME\) .*cu\$HOME/cuda has the character '\$'"):
        build.Tools.find(_opts(tmp_path / "proj"))


def _project(tmp_path: Path, folder: str) -> Path:
    root = tmp_path / folder / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    return root


def test_the_include_folder_check_refuses_the_project_root(tmp_path: Path) -> None:
    root = _project(tmp_path, "it's")
    catalog = load_catalog(root)
    with pytest.raises(BuildError, match=r"the project folder .*it's/proj has the character \"'\""):
        build.check_include_dirs(catalog, root, list(catalog.targets))


def test_an_include_folder_reached_through_a_link_is_checked(tmp_path: Path) -> None:
    root = _project(tmp_path, "fine")
    real = tmp_path / "semi;x" / "include"
    real.mkdir(parents=True)
    (root / "inc").symlink_to(real)
    path = root / "specs" / "plain.yaml"
    path.write_text(path.read_text() + "build: {include_dirs: [inc]}\n")
    catalog = load_catalog(root)
    with pytest.raises(SpecError, match="include folder inc has the character ';'"):
        build.check_include_dirs(catalog, root, list(catalog.targets))


# ---------------------------------------------------------------- include folders in specs


@pytest.mark.parametrize("folder", ["/home/josé/cutlass/include", "third party/inc#1", "a&b/(x)", "日本/include",
                                    "lib~1/include", "-inc"])
def test_include_folders_take_what_paths_take(tmp_path: Path, folder: str) -> None:
    root = _project(tmp_path, "fine")
    path = root / "specs" / "plain.yaml"
    path.write_text(path.read_text() + f"build: {{include_dirs: [\"{folder}\"]}}\n")
    module = next(m for m in load_catalog(root).modules if m.name == "plain")
    assert [d for d, _ in module.build.include_dirs] == [folder]
    assert schema.INCLUDE_DIR_RE.fullmatch(folder)


@pytest.mark.parametrize("folder", ["a;b", "a[b", "it's", "a`b`", "a\\b", "$X", "~/x"])
def test_include_folders_refuse_what_paths_refuse(folder: str) -> None:
    assert not schema.INCLUDE_DIR_RE.fullmatch(folder)
    # the JSON Schema (editors) says the same
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(folder, {"type": "string", "pattern": f"^(?:{schema.INCLUDE_DIR_RE.pattern})$"})


@pytest.mark.parametrize(("folder", "words"), [("a;b/include", "';', which CMake and nvcc cannot take in a path"),
                                               ("~/cutlass", "starts with '~'"),
                                               (" inc", "starts or ends with a space")])
def test_a_refused_include_folder_is_named_with_its_reason(tmp_path: Path, folder: str, words: str) -> None:
    root = _project(tmp_path, "fine")
    path = root / "specs" / "plain.yaml"
    path.write_text(path.read_text() + f"build: {{include_dirs: [\"{folder}\"]}}\n")
    with pytest.raises(SpecError, match="include_dirs") as info:
        load_catalog(root)
    assert words in str(info.value) and repr(folder) in str(info.value)


# ---------------------------------------------------------------- the commands


def test_build_refuses_such_a_build_folder_before_writing_anything(tmp_path: Path) -> None:
    root = _project(tmp_path, "fine")
    out = run_cli("build", "--no-link", "-t", "hopper", "--build-dir", str(tmp_path / "semi;x"), cwd=root)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "the build folder" in out.stderr and "';'" in out.stderr and "--build-dir" in out.stderr
    assert not (root / "generated").exists() and not (tmp_path / "semi;x").exists()


def test_cmake_refuses_such_a_build_folder_before_writing_anything(tmp_path: Path) -> None:
    root = _project(tmp_path, "fine")
    out = run_cli("cmake", "--build-dir", str(tmp_path / "br[x"), "--out", str(tmp_path / "kg.cmake"), cwd=root)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "the build folder" in out.stderr and "'['" in out.stderr
    assert not (root / "generated").exists() and not (tmp_path / "br[x").exists()


def test_init_warns_about_such_a_folder(tmp_path: Path) -> None:
    out = run_cli("init", str(tmp_path / "semi;x"), "--package", "semiops", "-t", "hopper", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "warning: the project folder" in out.stderr and "';'" in out.stderr and "kernelgen build will refuse it" in out.stderr
    slow = run_cli("init", str(tmp_path / "hash#ops"), "--package", "hashops", "-t", "hopper", cwd=tmp_path)
    assert slow.returncode == 0, slow.stdout + slow.stderr
    assert "warning: the project folder" in slow.stderr and "'#'" in slow.stderr
    assert "kernelgen build works there, but for builds that compile only what changed" in slow.stderr
    fine = run_cli("init", str(tmp_path / "fine ops"), "--package", "fineops", "-t", "hopper", cwd=tmp_path)
    assert fine.returncode == 0 and "warning" not in fine.stderr, fine.stderr
