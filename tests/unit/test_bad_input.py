"""Bad input beyond names: kill switches, numbers, limits known before nvcc, files, writes and
strings. Each case ends in one message naming what is wrong (file:line for specs), exit 2, no
traceback and nothing written, or in correct output."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen import plan
from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.conftest import run_cli

SPEC = "specs/fixture_ops.yaml"


def _edit(project: Path, old: str, new: str, path: str = SPEC) -> None:
    f = project / path
    text = f.read_text()
    assert old in text, old
    f.write_text(text.replace(old, new, 1))


def _set_grid(project: Path, grid: str) -> None:
    """The fixture kernel's grid replaced by `grid` (spec text)."""
    _edit(project, "    grid: [div_ceil(n, THREADS), 1, 1]", f"    grid: {grid}")


def _refused(project: Path, pattern: str, where: str = SPEC) -> str:
    with pytest.raises(SpecError) as info:
        render_catalog(load_catalog(project))
    text = str(info.value)
    assert text.startswith(f"{where}:"), text
    assert re.search(pattern, text), text
    return text


def _cli_refuses(project: Path, pattern: str, *args: str) -> str:
    res = run_cli(*(args or ("generate",)), cwd=project, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert re.search(pattern, res.stderr), res.stderr
    return res.stderr


# ---------------------------------------------------------------- kill switches

@pytest.mark.parametrize("name", ["PATH", "HOME", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "PYTHONPATH",
                                  "KERNELGEN_TARGET", "XDG_RUNTIME_DIR"])
def test_kill_switch_that_environments_set_is_refused(project: Path, name: str) -> None:
    _edit(project, "kill_switch: FIXTURE_OPS_TEST_OFF", f"kill_switch: {name}")
    why = "one of kernelgen's own variables" if name.startswith("KERNELGEN") else "ordinary environments set"
    _refused(project, rf"{SPEC}:4: .*kill switch {name} is .*{why}")


def _second_module(project: Path, extra: str = "") -> None:
    text = (project / SPEC).read_text().replace("module: fixture_ops", "module: other_ops")
    (project / "specs" / "other_ops.yaml").write_text(text.replace("kill_switch: FIXTURE_OPS_TEST_OFF",
                                                                   "kill_switch: FIXTURE_OPS_TEST_OFF" + extra))


def test_one_kill_switch_in_two_modules_needs_declaring_in_both(project: Path) -> None:
    _second_module(project)
    _refused(project, "also the kill switch of module 'fixture_ops'", "specs/other_ops.yaml")
    _second_module(project, "\nkill_switch_shared: true")
    _refused(project, "kill_switch_shared: true in both", "specs/other_ops.yaml")
    _edit(project, "kill_switch: FIXTURE_OPS_TEST_OFF",
          "kill_switch: FIXTURE_OPS_TEST_OFF\nkill_switch_shared: true")
    cat = load_catalog(project)
    assert {m.kill_switch for m in cat.modules} == {"FIXTURE_OPS_TEST_OFF"}


# ---------------------------------------------------------------- numbers

@pytest.mark.parametrize("value", [str(1 << 63), str(-(1 << 63) - 1), "4611686018427387904 * 2"])
def test_constant_outside_int64_is_refused(project: Path, value: str) -> None:
    _edit(project, "  BIG_SMEM: 64 * 1024", f"  BIG_SMEM: 64 * 1024\n  HUGE: {value}")
    _refused(project, r"(does not fit int64|overflow|cannot evaluate)")


def test_literal_int64_min_is_accepted_and_emitted_exactly(project: Path) -> None:
    _edit(project, "    grid: [div_ceil(n, THREADS), 1, 1]",
          "    grid: ['div_ceil(n, THREADS) * max(-9223372036854775808, 1)', 1, 1]")
    files = render_catalog(load_catalog(project))
    cu = files["generated/hopper/src/fixture_ops.cu"]
    assert "INT64_MIN" in cu
    tests = files["generated/hopper/tests/test_fixture_ops_hopper_contract.py"]
    assert "-9223372036854775808" in tests


@pytest.mark.parametrize("key", [str(1 << 32), "-1", str(1 << 64)])
def test_variant_key_outside_the_argument_type_is_refused(project: Path, key: str) -> None:
    _edit(project, "symbols: {1: add_bias_kernel<1>, 8: add_bias_kernel<8>}",
          f"symbols: {{1: add_bias_kernel<1>, 8: add_bias_kernel<8>, {key}: add_bias_kernel<8>}}")
    _refused(project, rf"variant key {key} is not a value of 'vec' \(u32: 0\.\.4294967295\)")


def test_u64_variant_key_above_int64_is_refused(project: Path) -> None:
    _edit(project, "    host_args:\n      vec: u32", "    host_args:\n      vec: u64")
    _edit(project, "symbols: {1: add_bias_kernel<1>, 8: add_bias_kernel<8>}",
          f"symbols: {{1: add_bias_kernel<1>, 8: add_bias_kernel<8>, {1 << 63}: add_bias_kernel<8>}}")
    _refused(project, rf"variant key {1 << 63} is above 9223372036854775807 \(2\*\*63 - 1\): plans compare 'vec' "
                      "as a 64-bit signed integer")


@pytest.mark.parametrize("grid,why", [
    ("[div_ceil(n, n - 1000), 1, 1]", "division by zero"),
    ("[div_ceil(n, THREADS), 0, 1]", r"not launched: grid y is 0 \(code EMPTY_GRID, detail 1\)"),
    ("[n * 4294967296, 1, 1]", r"error: grid x exceeds the CUDA limit \(2147483647\) \(code GRID, detail 0\)"),
])
def test_first_example_must_launch_grid_included(project: Path, grid: str, why: str) -> None:
    _set_grid(project, grid)
    _refused(project, rf"the first example must launch, but on target '\w+' its plan says .*{why}")


@pytest.mark.parametrize("grid,why", [
    ("['THREADS if n else 1', 1, 1]", "the condition of 'if' must be boolean"),
    ("['THREADS if n > 0 else n > 1', 1, 1]", "the operands of 'if' must be of one type"),
    ("['n > 0 if n > 1 else n > 2', 1, 1]", "integer expression is needed"),
])
def test_a_bad_conditional_names_the_spec_line(project: Path, grid: str, why: str) -> None:
    _set_grid(project, grid)
    _refused(project, re.escape(why))


def test_a_conditional_grid_launches_each_way(project: Path) -> None:
    """The chosen operand alone is evaluated (as C++'s ?:), so the other may divide by zero."""
    _set_grid(project, "['div_ceil(n, THREADS) if n > 0 else 1 // n', 1, 1]")
    cat = load_catalog(project)
    render_catalog(cat)
    m = next(m for m in cat.modules if any(k.grid for k in m.kernels))
    k = next(k for k in m.kernels if "n" in k.grid[0].names())
    from kernelgen import expr

    env = dict(m.constants)
    assert expr.evaluate(k.grid[0], {**env, "n": 1000}) == -(-1000 // env["THREADS"])
    with pytest.raises(Exception, match="division by zero"):
        expr.evaluate(k.grid[0], {**env, "n": 0})


# ---------------------------------------------------------------- limits known before nvcc

def test_more_arguments_than_a_launcher_takes_are_refused(project: Path) -> None:
    extra = "".join(f"      h{i}: u32\n" for i in range(62))
    _edit(project, "    host_args:\n      vec: u32\n", "    host_args:\n      vec: u32\n" + extra)
    _refused(project, "68 arguments; a launcher takes at most 64")


@pytest.mark.parametrize("arch,cc,pattern", [
    ("sm_91a", "9.1", "not an architecture nvcc knows"),
    ("sm_80a", "8.0", "not an architecture nvcc knows"),
    ("sm_90a", "8.9", "compute capability 8.9 contradicts arch sm_90a"),
])
def test_targets_arch_known_and_matching_compute_capability(project: Path, arch: str, cc: str, pattern: str) -> None:
    _edit(project, 'arch: sm_90a\n  compute_capability: "9.0"', f'arch: {arch}\n  compute_capability: "{cc}"',
          "specs/targets.yaml")
    _refused(project, pattern, "specs/targets.yaml")


# ---------------------------------------------------------------- files

def _nothing_written(project: Path) -> None:
    assert not (project / "generated" / "gb10").exists() and not (project / "generated" / "hopper").exists()


def test_spec_that_is_a_directory_or_dangling_symlink_or_loop(project: Path) -> None:
    (project / "specs" / "dir.yaml").mkdir()
    _cli_refuses(project, r"specs/dir\.yaml: cannot|specs/dir\.yaml: the spec file is a directory")
    (project / "specs" / "dir.yaml").rmdir()
    (project / "specs" / "dangling.yaml").symlink_to(project / "nowhere.yaml")
    _cli_refuses(project, r"specs/dangling\.yaml: cannot read the spec file: a dangling symlink")
    (project / "specs" / "dangling.yaml").unlink()
    (project / "specs" / "loop.yaml").symlink_to(project / "specs" / "loop.yaml")
    _cli_refuses(project, r"specs/loop\.yaml: cannot read the spec file: a symlink loop")
    _nothing_written(project)


def test_fifo_and_device_are_refused_without_reading(project: Path) -> None:
    os.mkfifo(project / "specs" / "fifo.yaml")
    _cli_refuses(project, r"specs/fifo\.yaml: the spec file is a FIFO")  # would block if read
    (project / "specs" / "fifo.yaml").unlink()
    (project / "specs" / "zero.yaml").symlink_to("/dev/zero")
    _cli_refuses(project, r"specs/zero\.yaml: the spec file is a device")
    _nothing_written(project)


@pytest.mark.parametrize("name", ["other.YAML", "other.Yaml", "other.yml", "other.YML"])
def test_spec_extension_in_another_case_is_refused_by_name(project: Path, name: str) -> None:
    (project / "specs" / name).write_text((project / SPEC).read_text())
    _cli_refuses(project, rf"specs/{re.escape(name)}: spec files must end in \.yaml")


def test_source_listed_twice_through_dot_is_one_source(project: Path) -> None:
    _edit(project, "sources: [kernels/scale.cu]", "sources: [kernels/scale.cu, kernels/./scale.cu]")
    _refused(project, "source kernels/scale.cu is listed twice")


def test_source_outside_the_project_or_not_regular(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.cu"
    outside.write_text("")
    (project / "kernels" / "link.cu").symlink_to(outside)
    _edit(project, "sources: [kernels/scale.cu]", "sources: [kernels/scale.cu, kernels/link.cu]")
    _refused(project, "resolves to .* outside the project")
    (project / "kernels" / "link.cu").unlink()
    (project / "kernels" / "link.cu").mkdir()
    _refused(project, "source kernels/link.cu is not a regular file")


@pytest.mark.parametrize("blocker", ["generated", "generated/hopper", "generated/hopper/src"])
def test_output_path_blocked_by_a_file_writes_nothing(project: Path, blocker: str) -> None:
    (project / blocker).parent.mkdir(parents=True, exist_ok=True)
    (project / blocker).write_text("in the way")
    _cli_refuses(project, rf"{blocker} is in the way of generated/")
    assert not (project / "generated" / "gb10").exists()  # gb10 sorts first: not written either


def test_build_dir_that_is_a_file_is_refused_before_generating(project: Path) -> None:
    (project / "afile").write_text("")
    _cli_refuses(project, "--build-dir .*afile is not a folder", "build", "--build-dir", "afile")
    _nothing_written(project)


def test_orphaned_target_folder_is_reported_and_removed(project: Path) -> None:
    assert run_cli("generate", cwd=project).returncode == 0
    targets = project / "specs" / "targets.yaml"
    text = targets.read_text()
    start = text.index("gb10:\n")
    end = text.index("\nhopper:", start) + 1
    targets.write_text(text[:start] + text[end:])
    res = run_cli("generate", "--check", cwd=project)
    assert res.returncode == 1 and "orphaned: generated/gb10/" in res.stderr, res.stderr
    assert run_cli("generate", cwd=project).returncode == 0
    assert not (project / "generated" / "gb10").exists()
    assert run_cli("generate", "--check", cwd=project).returncode == 0


def test_killed_generation_leaves_no_temporary_file(project: Path) -> None:
    assert run_cli("generate", cwd=project).returncode == 0
    stray = project / "generated" / "hopper" / "src" / ".kernelgen-abc123"
    stray.write_text("half")
    assert run_cli("generate", "--check", cwd=project).returncode == 0  # ignored by the check
    assert run_cli("generate", cwd=project).returncode == 0
    assert not stray.exists()


def test_generation_killed_mid_write_then_rerun(project: Path) -> None:
    """A generation killed at once (SIGKILL) leaves at most temporaries, which the next removes."""
    proc = subprocess.Popen([sys.executable, "-m", "kernelgen.cli", "generate"], cwd=project)
    proc.kill()
    proc.wait()
    assert run_cli("generate", cwd=project).returncode == 0
    assert not list((project / "generated").rglob(".kernelgen-*"))
    assert run_cli("generate", "--check", cwd=project).returncode == 0


# ---------------------------------------------------------------- strings

@pytest.mark.parametrize("summary", ['ends in a quote"', 'three """ quotes', "a back\\\\slash at the end \\\\"])
def test_summary_lands_intact_in_the_stub_docstring(project: Path, summary: str) -> None:
    _edit(project, "summary: out = alpha * x over n floats.", f"summary: '{summary}'")
    pyi = render_catalog(load_catalog(project))["generated/hopper/python/fixture_ops.pyi"]
    tree = ast.parse(pyi)
    docs = [ast.get_docstring(n) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    expected = summary  # YAML's single quotes keep backslashes as they are
    assert any(d and expected in d for d in docs), docs


def test_plan_codes_are_described_in_refusals() -> None:
    from kernelgen.loader import _code_name

    assert _code_name(plan.code(plan.E_EXPR, 2, True)) == "code EXPR, detail 2"
    assert _code_name(plan.code(plan.NL_EMPTY_GRID, 1)) == "code EMPTY_GRID, detail 1"
