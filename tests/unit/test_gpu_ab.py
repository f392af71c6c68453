"""scripts/gpu_ab.sh's rounds without a GPU: a stand-in Python (the target, the build and the
benchmark) in a scratch tree shows the benchmark running on the tree, then with the patch, then
on the tree again, the patch reverted after a failure too, a hanging round stopped, and bad
arguments refused."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The stand-in: prints a target for scripts/gpu_target.py, "builds" (failing
# when FAIL_BUILD is set and the patch is applied), runs scripts/ab_table.py with the real Python,
# and for a benchmark writes JSON (hanging on the patched tree when HANG is set, in the tests when
# HANG_TESTS is) into the --out file: which version of kernels/k.cu it saw, its
# arguments, and one time (1 ms on the original, 2 ms patched).
FAKE_PY = """#!/usr/bin/env bash
case "$1" in */gpu_target.py) echo hopper; exit 0 ;; esac
if [ "$1" = "-m" ] && [ "$2" = "kernelgen.cli" ]; then
  [ -n "${FAIL_BUILD:-}" ] && grep -q patched kernels/k.cu && exit 1
  exit 0
fi
if [ "$1" = "-m" ] && [ "$2" = "pytest" ]; then
  [ -n "${HANG_TESTS:-}" ] && sleep 30
  echo "1 passed"; exit 0
fi
case "$1" in */ab_table.py) exec python3 "$@" ;; esac
out=""; prev=""
for a in "$@"; do [ "$prev" = "--out" ] && out=$a; prev=$a; done
src=$(cat kernels/k.cu)
[ -n "${HANG:-}" ] && [ "$src" != original ] && sleep 30
ms=1.0; [ "$src" = original ] || ms=2.0
printf '{"k": "%s", "args": "%s", "results": [{"n": 7, "ms": {"x": %s}}]}' "$src" "$*" "$ms" > "$out"
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    t = tmp_path / "tree"
    (t / "scripts").mkdir(parents=True)
    (t / "benchmarks").mkdir()
    (t / "kernels").mkdir()
    shutil.copy(ROOT / "scripts" / "gpu_ab.sh", t / "scripts" / "gpu_ab.sh")
    shutil.copy(ROOT / "scripts" / "ab_table.py", t / "scripts" / "ab_table.py")
    (t / "benchmarks" / "bench_x.py").write_text("")
    (t / "kernels" / "k.cu").write_text("original\n")
    fake = tmp_path / "python"
    fake.write_text(FAKE_PY)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "x.patch").write_text(
        "--- a/kernels/k.cu\n+++ b/kernels/k.cu\n@@ -1 +1 @@\n-original\n+patched\n")
    return t


def run(tree: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHON=str(tree.parent / "python"), OUT=str(tree.parent / "out"), **env)
    return subprocess.run(["bash", str(tree / "scripts" / "gpu_ab.sh"), *args], cwd=tree, env=full,
                          capture_output=True, text=True, timeout=60)


def unpacked(tree: Path) -> Path:
    out = tree.parent / "unpacked"
    with tarfile.open(tree.parent / "out" / "gpu-ab.tgz") as t:
        t.extractall(out, filter="data")
    return out


def seen(path: Path) -> dict:
    """What the stand-in benchmark saw: kernels/k.cu's text and its own arguments."""
    return json.loads(path.read_text())


def test_a_b_a_rounds(tree: Path) -> None:
    res = run(tree, str(tree.parent / "x.patch"), "bench_x", "--quick", GPU_AB_TESTS="tests/gpu/test_y.py")
    assert res.returncode == 0, res.stdout + res.stderr
    out = unpacked(tree)
    assert sorted(p.name for p in out.glob("build-*.log")) == ["build-a1.log", "build-a2.log", "build-b.log"]
    assert seen(out / "bench_x-a1.json")["k"] == "original"
    assert seen(out / "bench_x-a1.json")["args"].startswith("benchmarks/bench_x.py --out")
    assert seen(out / "bench_x-b.json")["k"] == "patched"
    assert seen(out / "bench_x-a2.json")["k"] == "original"
    assert seen(out / "bench_x-b.json")["args"].endswith("--quick")
    assert "1 passed" in res.stdout
    assert (out / "tests-b.log").read_text().strip() == "1 passed"  # the B tests' log kept
    assert res.stdout.rstrip().endswith("b: 1 passed (exit 0)")  # and their outcome repeated last
    # the times side by side: 1000 us on A, 2000 on B, B / A 2.000
    row = next(ln for ln in res.stdout.splitlines() if ln.startswith("results[n=7].ms.x"))
    assert row.split() == ["results[n=7].ms.x", "1000.0", "2000.0", "1000.0", "2.000"]
    assert (tree / "kernels" / "k.cu").read_text() == "original\n"


def test_patch_reverted_after_a_failed_round(tree: Path) -> None:
    res = run(tree, str(tree.parent / "x.patch"), "bench_x", FAIL_BUILD="1")
    assert res.returncode == 1
    out = unpacked(tree)
    assert not (out / "bench_x-b.json").exists() and (out / "bench_x-a2.json").exists()
    assert (tree / "kernels" / "k.cu").read_text() == "original\n"


def test_bad_arguments(tree: Path) -> None:
    assert run(tree).returncode == 2
    assert "no benchmark" in run(tree, str(tree.parent / "x.patch"), "bench_none").stdout
    (tree / "kernels" / "k.cu").write_text("other\n")
    res = run(tree, str(tree.parent / "x.patch"), "bench_x")
    assert res.returncode == 2 and "does not apply" in res.stdout
    assert (tree / "kernels" / "k.cu").read_text() == "other\n"


def test_several_patches_each_alone(tree: Path) -> None:
    second = tree.parent / "y.patch"
    second.write_text("--- a/kernels/k.cu\n+++ b/kernels/k.cu\n@@ -1 +1 @@\n-original\n+other\n")
    res = run(tree, f"{tree.parent / 'x.patch'},{second}", "bench_x", GPU_AB_TESTS="tests/gpu/test_y.py")
    assert res.returncode == 0, res.stdout + res.stderr
    out = unpacked(tree)
    assert sorted(p.name for p in out.glob("bench_x-*.json")) == [
        "bench_x-a1.json", "bench_x-a2.json", "bench_x-b-x.json", "bench_x-b-y.json"]
    assert seen(out / "bench_x-b-x.json")["k"] == "patched"
    assert seen(out / "bench_x-b-y.json")["k"] == "other"  # x reverted before y
    assert "b-x / A" in res.stdout and "b-y / A" in res.stdout
    assert res.stdout.count("1 passed") == 4  # each B's tests, then their outcomes at the end
    assert "b-x: 1 passed (exit 0)\nb-y: 1 passed (exit 0)" in res.stdout
    assert (tree / "kernels" / "k.cu").read_text() == "original\n"
    res = run(tree, f"{tree.parent / 'x.patch'},{tree.parent / 'none.patch'}", "bench_x")
    assert res.returncode == 2 and "no patch file" in res.stdout


@pytest.mark.parametrize("hang", ["HANG", "HANG_TESTS"])
def test_hanging_round_stopped(tree: Path, hang: str) -> None:
    # the patched benchmark (or the tests on the patched tree) never ends: stopped after
    # AB_TIMEOUT, the call fails, the last A round still runs and the patch is reverted
    res = run(tree, str(tree.parent / "x.patch"), "bench_x", GPU_AB_TESTS="tests/gpu/test_y.py",
              AB_TIMEOUT="2", **{hang: "1"})
    assert res.returncode == 1, res.stdout + res.stderr
    assert "stopped after 2 s (a hang?)" in res.stdout
    out = unpacked(tree)
    assert seen(out / "bench_x-a2.json")["k"] == "original"
    assert (out / "bench_x-b.json").exists() == (hang == "HANG_TESTS")
    assert ("b: stopped after 2 s" in res.stdout) == (hang == "HANG_TESTS")
    assert (tree / "kernels" / "k.cu").read_text() == "original\n"
