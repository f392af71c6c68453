"""Every spec file is checked in one run: the first error of each file (and of each module's
generation checks) is reported together, so a catalog with several broken specs is fixed in one
pass rather than one rerun per file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import cli
from kernelgen.errors import SpecError, SpecErrors
from kernelgen.loader import load_catalog
from tests.unit.test_loader import GOOD, write_project
from tests.unit.test_validation import CLUSTER_KERNEL, CLUSTER_SPEC


def module_spec(name: str, spec: str = GOOD) -> str:
    """GOOD (or ``spec``) as module ``name``, with a kill switch of its own."""
    return spec.replace("module: demo", f"module: {name}").replace("DEMO_OFF", f"{name.upper()}_OFF")


def catalog_error(root: Path) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_catalog(root)
    return info.value


def add(root: Path, name: str, spec: str) -> None:
    (root / "specs" / f"{name}.yaml").write_text(spec)


def test_each_broken_file_reported_once_in_file_order(tmp_path: Path) -> None:
    root = write_project(tmp_path, GOOD)
    add(root, "b_grid", module_spec("b_grid").replace("div_ceil(n, THREADS)", "div_ceil(nn, THREADS)"))
    # two errors in one file: only its first is reported
    add(root, "c_type", module_spec("c_type").replace("out: f32*", "out: f33*").replace("n: u32", "n: u33"))
    add(root, "d_syntax", module_spec("d_syntax").replace("n == 0", "n == 0 &&"))
    err = catalog_error(root)
    assert isinstance(err, SpecErrors)
    assert [(e.loc.path, e.field) for e in err.errors] == [
        ("specs/b_grid.yaml", "kernels.scale.grid[0]"),
        ("specs/c_type.yaml", "kernels.scale.args.out"),
        ("specs/d_syntax.yaml", "kernels.scale.skip_if[0]"),
    ]
    assert "undefined name 'nn'" in err.errors[0].message
    assert "unknown element type 'f33'" in err.errors[1].message
    lines = str(err).splitlines()
    assert lines[:3] == [str(e) for e in err.errors]
    assert lines[3] == "3 errors in 3 spec files"
    # the first error's own fields, for code that reads one error
    assert (err.loc, err.field, err.message) == (err.errors[0].loc, err.errors[0].field, err.errors[0].message)


def test_one_error_is_reported_as_before(tmp_path: Path) -> None:
    root = write_project(tmp_path, GOOD)
    add(root, "b_grid", module_spec("b_grid").replace("div_ceil(n, THREADS)", "div_ceil(nn, THREADS)"))
    err = catalog_error(root)
    assert type(err) is SpecError
    assert str(err).startswith("specs/b_grid.yaml:14: kernels.scale.grid[0]: undefined name 'nn'"), err


def test_catalog_checks_join_the_files_errors(tmp_path: Path) -> None:
    """A module name defined twice and a kill switch taken twice are reported with the files'
    own errors."""
    root = write_project(tmp_path, GOOD)
    add(root, "a_broken", module_spec("a_broken").replace("out: f32*", "out: f33*"))
    sub = root / "specs" / "more"
    sub.mkdir()
    (sub / "demo.yaml").write_text(GOOD)  # module 'demo' again, in a subfolder
    add(root, "e_switch", module_spec("e_switch").replace("E_SWITCH_OFF", "DEMO_OFF"))
    err = catalog_error(root)
    assert isinstance(err, SpecErrors)
    shown = [(e.loc.path, e.field, e.message.split(" (")[0]) for e in err.errors]
    assert shown[0][:2] == ("specs/a_broken.yaml", "kernels.scale.args.out")
    assert ("specs/more/demo.yaml", "module", "module 'demo' is also defined in specs/demo.yaml") in shown
    assert any(p == "specs/e_switch.yaml" and f == "kill_switch" and "DEMO_OFF" in m for p, f, m in shown), shown
    assert len(shown) == 3


def test_generation_checks_report_each_module(tmp_path: Path) -> None:
    """The test-case search and the whole-cluster check run for every module: two modules whose
    grids are not whole clusters give two errors (after every file has loaded)."""
    root = write_project(tmp_path, GOOD)
    (root / "kernels" / "cluster.cu").write_text(CLUSTER_KERNEL)
    broken = CLUSTER_SPEC.replace("div_ceil(n, THREADS * CX) * CX", "div_ceil(n, THREADS)").replace(
        "kernels/demo.cu", "kernels/cluster.cu")
    add(root, "x_one", module_spec("x_one", broken))
    add(root, "y_two", module_spec("y_two", broken))
    err = catalog_error(root)
    assert isinstance(err, SpecErrors)
    assert [e.loc.path for e in err.errors] == ["specs/x_one.yaml", "specs/y_two.yaml"]
    assert all("is not a whole number of clusters [4, 1, 1]" in e.message for e in err.errors)


def test_long_lists_are_cut(tmp_path: Path) -> None:
    root = write_project(tmp_path, GOOD)
    for i in range(SpecErrors.SHOWN + 3):
        add(root, f"m{i:03d}", module_spec(f"m{i:03d}").replace("out: f32*", "out: f33*"))
    err = catalog_error(root)
    assert isinstance(err, SpecErrors) and len(err.errors) == SpecErrors.SHOWN + 3
    lines = str(err).splitlines()
    assert len(lines) == SpecErrors.SHOWN + 1
    assert lines[-1] == f"{SpecErrors.SHOWN + 3} errors in {SpecErrors.SHOWN + 3} spec files (the first 50 shown)"


def test_command_line_prints_each_error_then_the_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path, GOOD)
    add(root, "b_grid", module_spec("b_grid").replace("div_ceil(n, THREADS)", "div_ceil(nn, THREADS)"))
    add(root, "c_type", module_spec("c_type").replace("out: f32*", "out: f33*"))
    for command in (["list"], ["generate", "--check"], ["plan", "b_grid"]):
        assert cli.main(["--root", str(root), *command]) == 2, command
        err = capsys.readouterr().err.splitlines()
        assert err[0].startswith("kernelgen: error: specs/b_grid.yaml:14: kernels.scale.grid[0]: undefined name"), err
        assert err[1].startswith("kernelgen: error: specs/c_type.yaml:"), err
        assert err[2:] == ["kernelgen: 2 errors in 2 spec files"], err


def test_each_kernel_of_a_file_reports_its_first_error(tmp_path: Path) -> None:
    """Kernels of one module are read one by one: the first error of each (its entries, then its
    checks against the sources) is reported, in the spec's order; a good kernel between them is
    not."""
    kernel = GOOD[GOOD.index("  scale:\n"):]
    spec = (GOOD.replace("div_ceil(n, THREADS)", "div_ceil(nn, THREADS)")  # 'scale': an undefined name
            + kernel.replace("  scale:\n", "  fine:\n    symbol: scale\n", 1)
            + kernel.replace("  scale:\n", "  missing:\n    symbol: no_such_kernel\n", 1)  # not in the sources
            + kernel.replace("  scale:\n", "  typed:\n    symbol: scale\n", 1).replace("out: f32*", "out: f33*"))
    root = write_project(tmp_path, spec)
    (root / "kernels" / "demo.cu").write_text(
        "__global__ void scale(const float* x, float* out, unsigned n, float alpha) {}\n")
    err = catalog_error(root)
    assert isinstance(err, SpecErrors)
    assert [e.field for e in err.errors] == ["kernels.scale.grid[0]", "kernels.missing.symbol",
                                             "kernels.typed.args.out"], err
    assert "no_such_kernel" in err.errors[1].message, err.errors[1]
    assert str(err).splitlines()[-1] == "3 errors in 1 spec file"
