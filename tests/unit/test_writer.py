"""The writer: atomic, write-if-changed, orphan removal, --check, determinism, concurrency."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernelgen.writer import check_files, write_files
from tests.conftest import run_cli


def test_writes_only_changed_files_and_removes_orphans(tmp_path: Path) -> None:
    files = {"generated/t/a.txt": "A\n", "generated/t/sub/b.txt": "B\n"}
    r1 = write_files(tmp_path, files, ["t"])
    assert sorted(r1.written) == sorted(files)
    mtime = (tmp_path / "generated/t/a.txt").stat().st_mtime_ns
    (tmp_path / "generated/t/old.txt").write_text("orphan")
    r2 = write_files(tmp_path, {**files, "generated/t/a.txt": "A\n"}, ["t"])
    assert r2.written == [] and sorted(r2.unchanged) == sorted(files)
    assert r2.removed == ["generated/t/old.txt"]
    assert (tmp_path / "generated/t/a.txt").stat().st_mtime_ns == mtime
    r3 = write_files(tmp_path, {"generated/t/a.txt": "A2\n"}, ["t"])
    assert r3.written == ["generated/t/a.txt"] and r3.removed == ["generated/t/sub/b.txt"]
    assert not (tmp_path / "generated/t/sub").exists()
    assert not list((tmp_path / "generated/t").glob(".kernelgen-*"))


def test_other_targets_and_files_are_left_alone(tmp_path: Path) -> None:
    (tmp_path / "generated/other").mkdir(parents=True)
    (tmp_path / "generated/other/keep.txt").write_text("x")
    write_files(tmp_path, {"generated/t/a.txt": "A"}, ["t"])
    assert (tmp_path / "generated/other/keep.txt").read_text() == "x"


def test_check_reports_stale_missing_orphaned(tmp_path: Path) -> None:
    write_files(tmp_path, {"generated/t/a": "1", "generated/t/b": "2"}, ["t"])
    (tmp_path / "generated/t/c").write_text("3")
    rep = check_files(tmp_path, {"generated/t/a": "changed", "generated/t/b": "2", "generated/t/d": "4"}, ["t"])
    assert (rep.stale, rep.missing, rep.orphaned, rep.ok) == (["generated/t/a"], ["generated/t/d"], ["generated/t/c"], False)


def test_refuses_paths_outside_generated(tmp_path: Path) -> None:
    import pytest

    from kernelgen.errors import GenerationError

    with pytest.raises(GenerationError):
        write_files(tmp_path, {"generated/../escape.txt": "x"}, ["t"])
    with pytest.raises(GenerationError):
        write_files(tmp_path, {"src/x.txt": "x"}, ["t"])


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "generated").rglob("*")) if p.is_file()}


def test_output_is_byte_identical_across_hash_seeds_and_spec_order(project: Path, tmp_path: Path) -> None:
    import shutil

    trees = []
    for seed in ("0", "1", "12345"):
        res = run_cli("generate", cwd=project, env={"PYTHONHASHSEED": seed})
        assert res.returncode == 0, res.stderr
        trees.append(_tree(project))
        shutil.rmtree(project / "generated")
    # A second module listed before the first alphabetically must not change the first's files.
    extra = (project / "specs" / "fixture_ops.yaml").read_text().replace("module: fixture_ops", "module: a_copy")
    extra = extra.replace("FIXTURE_OPS_TEST_OFF", "A_COPY_TEST_OFF")
    (project / "specs" / "a_copy.yaml").write_text(extra)
    assert run_cli("generate", cwd=project).returncode == 0
    with_extra = _tree(project)
    assert trees[0] == trees[1] == trees[2]
    for path, data in trees[0].items():
        if "fixture_ops" in path:
            assert with_extra[path] == data, path


def test_interrupted_generation_leaves_previous_files_intact(project: Path) -> None:
    assert run_cli("generate", cwd=project).returncode == 0
    before = _tree(project)
    spec = project / "specs" / "fixture_ops.yaml"
    spec.write_text(spec.read_text().replace("Small kernels", "Changed kernels"))
    # Kill the generator while it writes: every file must be either the old or the new text.
    code = (
        "import os, signal, kernelgen.writer as w\n"
        "orig = w._atomic_write\n"
        "n = [0]\n"
        "def slow(path, data):\n"
        "    n[0] += 1\n"
        "    if n[0] == 3: os.kill(os.getpid(), signal.SIGKILL)\n"
        "    orig(path, data)\n"
        "w._atomic_write = slow\n"
        "from kernelgen.cli import main\n"
        "main(['generate'])\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True)
    assert res.returncode == -9
    after = _tree(project)
    assert set(after) == set(before)
    assert run_cli("generate", cwd=project).returncode == 0
    final = _tree(project)
    for path in before:
        assert after[path] in (before[path], final[path]), path
    assert not list((project / "generated").rglob(".kernelgen-*"))


def test_concurrent_generations_all_succeed(project: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-m", "kernelgen.cli", "generate"], cwd=project,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), results
    assert run_cli("generate", "--check", cwd=project).returncode == 0


def test_tool_caches_are_neither_orphaned_nor_removed(tmp_path: Path) -> None:
    # pytest collects generated/<target>/tests: Python's bytecode and the tools' caches land beside them
    files = {"generated/t/tests/test_m.py": "x = 1\n", "generated/t/a.txt": "A\n"}
    write_files(tmp_path, files, ["t"])
    caches = ["generated/t/tests/__pycache__/test_m.cpython-311-pytest-9.2.0.pyc", "generated/t/stray.pyc",
              "generated/t/.pytest_cache/v/cache/nodeids", "generated/t/tests/.mypy_cache/3.11/m.json",
              "generated/t/.ruff_cache/0.5/123"]
    for rel in caches:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("cache")
    assert check_files(tmp_path, files, ["t"]).ok
    assert write_files(tmp_path, files, ["t"]).removed == []
    # a module's test gone: its file goes, its bytecode stays where Python keeps it
    assert write_files(tmp_path, {"generated/t/a.txt": "A\n"}, ["t"]).removed == ["generated/t/tests/test_m.py"]
    assert all((tmp_path / rel).is_file() for rel in caches)
    # a file named like a cache folder, or a generated file inside none, is still the writer's
    (tmp_path / "generated/t/__pycache__.txt").write_text("orphan")
    assert check_files(tmp_path, {"generated/t/a.txt": "A\n"}, ["t"]).orphaned == ["generated/t/__pycache__.txt"]
