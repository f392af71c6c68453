"""`kernelgen init --keep-existing` in a repository: the example kernel (its source, spec and test)
is one unit, written whole or not at all, so that the next steps init prints hold; and the README
init writes (no placeholder link; what a wheel build without build isolation needs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen.cli import main
from kernelgen.loader import load_catalog
from kernelgen.scaffold import example_files

EXAMPLE_FILES = example_files("engineops")

OWN = {
    "kernels/scale.cu": "// the project's own scale kernel\n__global__ void scale_rows(float* x, int rows) {}\n",
    "specs/scale.yaml": "# the project's own spec, not yet written\n",
    "tests/test_engineops_scale.py": "def test_mine():\n    pass\n",
}


def _next_line(out: str) -> str:
    return next(ln for ln in out.splitlines() if ln.startswith("next: "))


@pytest.mark.parametrize("own", EXAMPLE_FILES)
def test_one_file_of_the_example_keeps_the_whole_example_out(tmp_path: Path, own: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "repo"
    (folder / own).parent.mkdir(parents=True)
    (folder / own).write_text(OWN[own])
    assert main(["init", str(folder), "--package", "engineops", "--target", "hopper", "--keep-existing"]) == 0
    out = capsys.readouterr().out
    assert (folder / own).read_text() == OWN[own]
    for other in EXAMPLE_FILES:
        if other != own:
            assert not (folder / other).exists(), other
    assert f"did not write the example kernel ({', '.join(EXAMPLE_FILES)}): the project has its own {own}" in out, out
    # the project's other files are written, and its README does not promise the example's module
    assert (folder / "specs" / "project.yaml").is_file() and (folder / "pyproject.toml").is_file()
    readme = (folder / "README.md").read_text()
    assert "scale.scale_f32" not in readme and "from engineops import <module>" in readme
    if own == "specs/scale.yaml":
        assert _next_line(out) == f"next: cd {folder} && kernelgen build && pytest"
        return
    # no module spec yet: the next step is a spec of the project's own kernels, then the build
    source = own if own.endswith(".cu") else "kernels/<file>.cu"
    assert _next_line(out).startswith(f"next: cd {folder} && kernelgen draft {source} --write"), out
    assert _next_line(out).endswith("then kernelgen build && pytest")
    # what there is loads and generates (the example's spec no longer names a kernel the sources lack)
    assert load_catalog(folder).modules == ()
    assert main(["--root", str(folder), "generate"]) == 0


def test_without_a_file_of_the_example_it_is_written_whole(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "repo"
    (folder / "kernels").mkdir(parents=True)
    (folder / "kernels" / "attention.cu").write_text("__global__ void attn(float* o) {}\n")
    assert main(["init", str(folder), "--package", "engineops", "--target", "hopper", "--keep-existing"]) == 0
    out = capsys.readouterr().out
    assert all((folder / p).is_file() for p in EXAMPLE_FILES)
    assert "did not write the example" not in out
    assert _next_line(out) == f"next: cd {folder} && kernelgen build && pytest"
    assert [m.name for m in load_catalog(folder).modules] == ["scale"]
    # a second run: the example is the project's now, kept whole, and nothing is said about it
    assert main(["init", str(folder), "--package", "engineops", "--keep-existing"]) == 0
    out = capsys.readouterr().out
    assert "created 0 files" in out and "did not write the example" not in out
    assert _next_line(out) == f"next: cd {folder} && kernelgen build && pytest"


def test_the_readme_has_no_placeholder_link_and_names_the_wheel_build_backend(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]
                                                                               ) -> None:
    folder = tmp_path / "fresh"
    assert main(["init", str(folder), "--package", "freshops", "--target", "hopper"]) == 0
    capsys.readouterr()
    readme = (folder / "README.md").read_text()
    for url in re.findall(r"https?://[^\s)>\]]*", readme):
        assert re.match(r"https?://[^/]+/\S+", url), f"placeholder link {url}"
    assert "https://github.com/)" not in readme
    assert "from freshops import scale" in readme
    # the wheel bullet: without build isolation, the [build-system] requirements must be installed
    wheel = readme[readme.index("A wheel for other machines"):]
    wheel = wheel[:wheel.index("\n- ")]
    assert "--no-build-isolation" in wheel and "pip install scikit-build-core" in " ".join(wheel.split()), wheel
    build_system = (folder / "pyproject.toml").read_text().split("[project]")[0]
    assert "scikit-build-core" in build_system  # what the README names is what pyproject.toml requires
