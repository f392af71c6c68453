"""A target's build tree left unusable (by another toolkit, an unreadable configure stamp, a build
file lost or cut short) is repaired by the next build, not by the one after; an install that does
not finish leaves a marker the package shell reports."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelgen import build, project
from kernelgen.build import BuildOptions
from kernelgen.errors import BuildError

NINJA_EOF = ["ninja: error: build.ninja:89: unexpected EOF", "", "^ near here"]


class FakeCMake:
    """Every command of a target's build, faked: a configure writes the cache and build.ninja CMake
    would; a build fails with ``build_fails`` (a list of outputs, one taken per build) while it has
    some; an install writes the target's package and checks the install marker is there."""

    def __init__(self, tmp_path: Path) -> None:
        self.commands: list[list[str]] = []
        self.build_fails: list[list[str]] = []
        self.install_fails = False
        self.marker_seen: list[bool] = []
        self.folder = tmp_path / "bindings" / "kernelgen_ops" / "hopper"

    def __call__(self, cmd: list[str], cwd: Path, echo: object, verbose: bool) -> tuple[int, list[str], list[str]]:
        self.commands.append(cmd)
        if "-S" in cmd:
            bdir = Path(cmd[cmd.index("-B") + 1])
            nvcc = next(a for a in cmd if a.startswith("-DCMAKE_CUDA_COMPILER=")).split("=", 1)[1]
            (bdir / "CMakeFiles").mkdir(exist_ok=True)
            (bdir / "CMakeCache.txt").write_text(
                f"CMAKE_CACHEFILE_DIR:INTERNAL={bdir}\nCMAKE_HOME_DIRECTORY:INTERNAL={cmd[cmd.index('-S') + 1]}\n"
                f"CMAKE_CUDA_COMPILER:STRING={nvcc}\nCMAKE_GENERATOR:INTERNAL=Ninja\n")
            (bdir / "build.ninja").write_text("# the whole file\n")
        elif "--build" in cmd and self.build_fails:
            return 1, self.build_fails.pop(0), []
        elif "--install" in cmd:
            self.marker_seen.append((self.folder / build.INSTALL_MARKER).is_file())
            if self.install_fails:
                return 1, ["CMake Error: file INSTALL cannot copy file"], []
            (self.folder / "__init__.py").write_text("MODULES = ()\n")
        return 0, [], []

    def configures(self) -> int:
        return sum(1 for c in self.commands if "-S" in c)

    def builds(self) -> int:
        return sum(1 for c in self.commands if "--build" in c)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCMake:
    f = FakeCMake(tmp_path)
    monkeypatch.setattr(build, "_run", f)
    return f


def _build(tmp_path: Path, nvcc: str = "/usr/local/cuda/bin/nvcc") -> list[str]:
    """One build of target hopper with the toolkit whose nvcc is ``nvcc``; returns the messages shown."""
    root = nvcc.rsplit("/bin/", 1)[0]
    tk = SimpleNamespace(nvcc=nvcc, root=root, version="13.0", source="CUDA_HOME")
    tools = build.Tools(tk, "cmake", "ninja", "/pybind11", None)  # type: ignore[arg-type]
    opts = BuildOptions(tmp_path, tmp_path / "build", tmp_path / "bindings", torch_reader=False)
    shown: list[str] = []
    build._build_one(opts, SimpleNamespace(name="hopper", arch="sm_90a"), tools, shown.append)  # type: ignore[arg-type]
    return shown


def test_another_toolkit_configures_the_tree_afresh_before_cmake_would_drop_its_settings(
        tmp_path: Path, fake: FakeCMake) -> None:
    bdir = tmp_path / "build" / "hopper"
    _build(tmp_path)
    (bdir / "CMakeFiles" / "stale").write_text("x")
    # the same toolkit by another path is another compiler to CMake, which would delete its cache and
    # configure without kernelgen's other settings
    shown = _build(tmp_path, "/usr/local/cuda-13.0/bin/nvcc")
    assert ("kernelgen: build/hopper was configured with the CUDA compiler /usr/local/cuda/bin/nvcc, and this "
            "build uses /usr/local/cuda-13.0/bin/nvcc; configuring it afresh") in shown
    assert not (bdir / "CMakeFiles" / "stale").exists()
    assert fake.configures() == 2
    assert "CMAKE_CUDA_COMPILER:STRING=/usr/local/cuda-13.0/bin/nvcc" in (bdir / "CMakeCache.txt").read_text()
    # and then the tree is reused
    shown = _build(tmp_path, "/usr/local/cuda-13.0/bin/nvcc")
    assert fake.configures() == 2 and not any("afresh" in s for s in shown)


def test_a_compiler_the_stamp_does_not_record_is_still_compared_with_the_cache(
        tmp_path: Path, fake: FakeCMake) -> None:
    bdir = tmp_path / "build" / "hopper"
    _build(tmp_path)
    (bdir / build.STAMP).unlink()
    shown = _build(tmp_path, "/opt/cuda/bin/nvcc")
    assert any("configured with the CUDA compiler /usr/local/cuda/bin/nvcc" in s for s in shown)


@pytest.mark.parametrize("stamp", ["", "[\"-S\", ", "{}", "[1, 2]", "\x00\xff"])
def test_an_unreadable_configure_stamp_means_configuring_again(tmp_path: Path, fake: FakeCMake, stamp: str) -> None:
    bdir = tmp_path / "build" / "hopper"
    _build(tmp_path)
    (bdir / build.STAMP).write_bytes(stamp.encode("latin-1"))
    _build(tmp_path)
    assert fake.configures() == 2
    assert isinstance(json.loads((bdir / build.STAMP).read_text()), list)
    _build(tmp_path)
    assert fake.configures() == 2


def test_the_stamp_is_written_atomically_and_removed_while_a_configure_runs(
        tmp_path: Path, fake: FakeCMake, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[Path] = []
    monkeypatch.setattr(build.writer, "write_text", lambda path, text: (writes.append(path), path.write_text(text)))
    _build(tmp_path)
    stamp = tmp_path / "build" / "hopper" / build.STAMP
    assert writes == [stamp]

    def interrupted(cmd: list[str], *a: object) -> tuple[int, list[str], list[str]]:
        assert not stamp.exists()  # a configure that does not finish leaves no stamp
        raise KeyboardInterrupt

    (tmp_path / "build" / "hopper" / "build.ninja").unlink()
    monkeypatch.setattr(build, "_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _build(tmp_path)
    assert not stamp.exists()


def test_a_missing_build_ninja_means_configuring_again(tmp_path: Path, fake: FakeCMake) -> None:
    _build(tmp_path)
    (tmp_path / "build" / "hopper" / "build.ninja").unlink()
    _build(tmp_path)
    assert fake.configures() == 2 and fake.builds() == 2


@pytest.mark.parametrize("output", [NINJA_EOF, ["ninja: error: loading 'build.ninja': No such file or directory"],
                                    ["ninja: error: CMakeFiles/rules.ninja:12: expected '=', got eof"]])
def test_a_build_file_ninja_cannot_read_is_made_again_by_a_configure(
        tmp_path: Path, fake: FakeCMake, output: list[str]) -> None:
    _build(tmp_path)
    fake.build_fails = [output]
    shown = _build(tmp_path)
    assert fake.configures() == 2 and fake.builds() == 3
    assert any("cannot be read by ninja" in s and "configuring hopper again" in s for s in shown)
    assert shown[-1].startswith("kernelgen: hopper done in")


def test_a_build_file_still_unreadable_says_to_remove_the_tree(tmp_path: Path, fake: FakeCMake) -> None:
    _build(tmp_path)
    fake.build_fails = [NINJA_EOF, NINJA_EOF]
    with pytest.raises(BuildError, match=r"remove \S+/build/hopper and build again"):
        _build(tmp_path)
    assert fake.configures() == 2  # one new configure, not a loop


def test_other_build_failures_are_not_retried(tmp_path: Path, fake: FakeCMake) -> None:
    _build(tmp_path)
    fake.build_fails = [["FAILED: x.o", "x.cu(3): error: identifier \"y\" is undefined"]]
    with pytest.raises(BuildError) as info:
        _build(tmp_path)
    assert fake.configures() == 1 and fake.builds() == 2
    assert "build again" not in str(info.value)


def test_an_install_that_does_not_finish_leaves_its_marker(tmp_path: Path, fake: FakeCMake) -> None:
    _build(tmp_path)
    marker = fake.folder / build.INSTALL_MARKER
    assert fake.marker_seen == [True] and not marker.exists()
    fake.install_fails = True
    with pytest.raises(BuildError, match="install of target hopper failed"):
        _build(tmp_path)
    assert marker.is_file()
    fake.install_fails = False
    _build(tmp_path)
    assert not marker.exists()


def test_pruning_an_install_keeps_the_marker(tmp_path: Path) -> None:
    folder = tmp_path / "pkg" / "hopper"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "old.so").write_text("")
    (folder / build.INSTALL_MARKER).write_text("")
    manifest = tmp_path / "manifest.txt"
    manifest.write_text(f"{folder / '__init__.py'}\n")
    assert build.prune_install(folder, manifest) == ["old.so"]
    assert (folder / build.INSTALL_MARKER).is_file()


def test_the_package_shell_knows_the_install_marker() -> None:
    shell = (project.SHELL_DIR / "__init__.py").read_text()
    assert f'_INSTALLING = "{build.INSTALL_MARKER}"' in shell


def test_the_build_goes_on_past_a_failed_step_and_reports_each(tmp_path: Path, fake: FakeCMake) -> None:
    """ninja is told to keep going (-k 0), and the error explains every step that failed."""
    _build(tmp_path)
    fake.build_fails = [["[1/3] Building CUDA object a.o", "FAILED: a.o", "nvcc -c a.cu",
                         "a.cu(3): error: identifier \"y\" is undefined", "[2/3] Building CUDA object b.o",
                         "FAILED: b.o", "nvcc -c b.cu", "b.cu(5): error: expected a \";\"",
                         "ninja: build stopped: subcommand failed."]]
    with pytest.raises(BuildError) as info:
        _build(tmp_path)
    (cmd,) = [c for c in fake.commands if "--build" in c][-1:]
    assert cmd[-3:] == ["--", "-k", "0"], cmd
    text = str(info.value)
    assert "2 build steps failed:\nfailed step 1 of 2: a.o\n" in text and "\nfailed step 2 of 2: b.o\n" in text, text
    assert 'a.cu(3): error: identifier "y" is undefined' in text and 'b.cu(5): error: expected a ";"' in text, text
