"""The build tree across changes of a project: adding a module compiles that module alone (CMake's
target names do not depend on the module set, only the library's file name does), `kernelgen sass`
reads the objects the current build made, and `--compiler-launcher` holds for the build that gives
it: a launcher that does not exist stops the build before CMake runs, and a build without the
option compiles without one. Each test builds a tiny project for one target."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.compile.test_build_errors import SOURCE, SPEC, _project
from tests.conftest import run_cli

pytestmark = pytest.mark.build


def _build(root: Path, *args: str):
    res = run_cli("build", "--no-torch-reader", "--no-link", *args, cwd=root)
    return res


def _compiled(stdout: str) -> list[str]:
    return [ln.strip() for ln in stdout.splitlines() if "] compiling " in ln]


def test_adding_a_module_recompiles_nothing_else_and_sass_reads_the_current_objects(cuobjdump, tmp_path: Path) -> None:
    root = _project(tmp_path / "project", {"one": "one_kernel", "two": "two_kernel"})
    res = _build(root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert run_cli("sass", "--json", "before.json", cwd=root).returncode == 0

    (root / "specs" / "three.yaml").write_text(SPEC.format(m="three", symbol="three_kernel"))
    (root / "kernels" / "three.cu").write_text(SOURCE.format(m="three", helper=""))
    one = root / "kernels" / "one.cu"
    one.write_text(one.read_text().replace("out[i] = 1.0f;", "out[i] = sinf(float(i)) * cosf(float(n - i));"))
    res = _build(root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    compiled = _compiled(res.stdout)
    assert sorted(ln.split("] compiling ")[1] for ln in compiled) == [
        "python/three.cpp (CXX)", "src/one.cu (CUDA)", "src/three.cu (CUDA)"], res.stdout
    assert "build steps: 3 compiled" in res.stdout, res.stdout
    # one library file, of the current module set (ninja removed the earlier set's)
    libs = sorted(p.name for p in (root / "build" / "hopper").rglob("libkernelgen_hopper_*.so"))
    assert len(libs) == 1, libs

    res = run_cli("sass", "--against", "before.json", cwd=root)
    assert res.returncode == 0, res.stderr
    by_kernel = {ln.split()[0]: ln for ln in res.stdout.splitlines() if ln.startswith("  ")}
    assert "instructions: +0," not in by_kernel["one.one_fill"], res.stdout  # the edited kernel's new object
    assert "instructions: +0," in by_kernel["two.two_fill"], res.stdout
    assert by_kernel["three.three_fill"].endswith("(new)"), res.stdout

    # removing a module again recompiles nothing
    (root / "specs" / "three.yaml").unlink()
    res = _build(root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert _compiled(res.stdout) == [], res.stdout


def test_the_compiler_launcher_is_checked_and_holds_for_its_build_alone(tmp_path: Path) -> None:
    root = _project(tmp_path / "project", {"one": "one_kernel"})
    log = tmp_path / "launched.txt"
    launcher = tmp_path / "bin" / "launch"
    launcher.parent.mkdir()
    launcher.write_text(f'#!/bin/sh\necho "$1" >> "{log}"\nexec "$@"\n')
    launcher.chmod(0o755)

    res = _build(root, "--compiler-launcher", str(launcher))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert log.read_text().count("\n") >= 2, "every compile runs through the launcher"

    res = _build(root, "--compiler-launcher", "nosuchcache")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "compiler launcher 'nosuchcache' is not on the PATH" in res.stderr, res.stderr
    assert "configuring" not in res.stdout, "the tree is left as it was"

    log.unlink()
    source = root / "kernels" / "one.cu"
    source.write_text(source.read_text().replace("1.0f", "2.0f"))
    res = _build(root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "configuring hopper" in res.stdout and "src/one.cu" in res.stdout, res.stdout
    assert not log.exists(), "a build without --compiler-launcher runs none"
    cache = (root / "build" / "hopper" / "CMakeCache.txt").read_text()
    assert "CMAKE_CUDA_COMPILER_LAUNCHER:UNINITIALIZED=\n" in cache or "CMAKE_CUDA_COMPILER_LAUNCHER:STRING=\n" in cache
    stamp = json.loads((root / "build" / "hopper" / ".kernelgen-configure.json").read_text())
    assert "-DCMAKE_CXX_COMPILER_LAUNCHER=" in stamp and os.fspath(launcher) not in " ".join(stamp)
