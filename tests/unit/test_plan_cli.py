"""``kernelgen plan``: a kernel's or a chain's plan from the specs, per target, without a GPU;
the same outcomes, grids and clusters as the plans the launchers make (kernelgen.cases), and
clear errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import cases
from kernelgen.cli import main
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog

ROOT = Path(__file__).resolve().parents[2]


def plan(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["--root", str(ROOT), "plan", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_kernel_per_target_with_its_grid_cluster_and_let_values(capsys) -> None:
    rc, out, _ = plan(capsys, "fp8_linear.fp8_gemm_tma", "rows=256", "n=4096", "k=4096")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "fp8_linear.fp8_gemm_tma  rows=256 n=4096 k=4096"
    assert "gb10 (48 SMs): not launched: absent on target gb10 (built for hopper)" in lines[1]
    cat = load_catalog(ROOT)
    m = cat.module("fp8_linear")
    k = next(k for k in m.kernels if k.name == "fp8_gemm_tma")
    code, grid, block, smem = cases.expected_plan(m, k, cat.target("hopper"), {"rows": 256, "n": 4096, "k": 4096})
    assert code == 0
    assert lines[2] == (f"  hopper (132 SMs): launched  grid {list(grid)}  block {list(block)}  shared_mem {smem}"
                        f"  cluster [1, 1, {grid[2]}]")
    assert lines[3] == f"    let: xtile = 128, tiles = {grid[0]}, split = {grid[2]}"  # 32 tiles of 256 x rows: too few


def test_a_chain_marks_the_member_that_runs(capsys) -> None:
    rc, out, _ = plan(capsys, "fp8_linear", "rows=256", "n=4096", "k=4100", "--target", "hopper")
    assert rc == 0
    rows = [line.split() for line in out.splitlines() if line.startswith("    ")]
    runs = [r[0] for r in rows if r[-2:] == ["<-", "runs"]]
    assert runs == ["fp8_linear.fp8_gemm_n128_row_scaled"], out  # k % 16 != 0: not the TMA GEMM
    tma = next(line for line in out.splitlines() if "fp8_linear.fp8_gemm_tma " in line)
    assert "not launched: (k % 16) == 0 is false" in tma
    assert "gb10" not in out


def test_a_chain_by_element_type_marks_the_member_that_runs_for_each(capsys) -> None:
    """The fixture's scale_any: f32 and bf16 members; n = 6 declines both VEC = 4 instances,
    so bf16 arrays run scaled_bf16_v1 and f32 arrays scale_f32; x=f32 keeps the f32 members."""
    root = str(ROOT / "tests" / "fixtures" / "project")
    assert main(["--root", root, "plan", "fixture_ops.scale_any", "n=6", "-t", "hopper"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("fixture_ops.scale_any (chain: the arrays' element types choose among its "
                                   "members)  n=6"), out
    runs = [line.split()[0] + " " + line.split("<- runs")[1].strip() for line in out.splitlines() if "<- runs" in line]
    assert runs == ["fixture_ops.scaled_bf16_v1 for x=bf16, out=bf16 arrays",
                    "fixture_ops.scale_f32 for x=f32, out=f32 arrays"], out
    assert main(["--root", root, "plan", "fixture_ops.scale_any", "n=6", "x=f32", "-t", "hopper"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines() if line.rstrip().endswith("<- runs")] == \
        ["fixture_ops.scale_f32"], out


def test_a_clause_that_decides_is_named(capsys) -> None:
    rc, out, _ = plan(capsys, "rms_norm_bf16", "rows=0", "hidden=4096", "-t", "hopper")
    assert rc == 0 and "not launched: empty work (rows == 0)" in out, out


@pytest.mark.parametrize("argv,fragment", [
    (("fp8_gemm_tma", "rows=2", "n=4"), "fp8_linear.fp8_gemm_tma needs a value for k"),
    (("fp8_gemm_tma", "rows=2", "n=4", "k=8", "kk=3"), "has no argument 'kk'"),
    (("fp8_gemm_tma", "rows=2", "n=4", "k=x"), "argument 'k': expected an integer (u32), got 'x'"),
    (("fp8_gemm_tma", "rows", "2"), "'rows' is not NAME=VALUE"),
    (("fp8_gem_tma", "rows=2"), "did you mean"),
    (("fp8_gemm_tma", "rows=1", "n=1", "k=1", "-t", "volta"), "unknown target 'volta'"),
])
def test_bad_input_is_one_clear_error(capsys, argv, fragment) -> None:
    rc, out, err = plan(capsys, *argv)
    assert rc == 2 and fragment in err and out == "", (out, err)


def test_a_sweep_is_a_table_per_target_with_a_row_per_argument_set(capsys) -> None:
    rc, out, _ = plan(capsys, "fp8_linear.fp8_gemm_tma", "rows=129,2048", "n=4096", "k=4096", "-t", "hopper")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "fp8_linear.fp8_gemm_tma on hopper (132 SMs)"
    assert lines[1] == "| rows | n | k | outcome | grid | block | shared_mem | cluster | xtile | tiles | split | sizes |"
    cat = load_catalog(ROOT)
    m = cat.module("fp8_linear")
    k = next(k for k in m.kernels if k.name == "fp8_gemm_tma")
    for line, rows in zip(lines[3:5], (129, 2048)):
        _, grid, block, smem = cases.expected_plan(m, k, cat.target("hopper"), {"rows": rows, "n": 4096, "k": 4096})
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[:7] == [str(rows), "4096", "4096", "launched", str(list(grid)), str(list(block)), str(smem)], line
        # the let values: the x tile (128 rows, 256 past 128 when there are enough), tiles, split
        assert cells[8:11] == [str(128 if rows == 129 else 256), str(grid[0]), str(grid[2])], line
        # the arrays' sizes, as the launchers compute them
        assert cells[11] == f"x={rows * 4096} q={4096 * 4096} scale=4096 out={rows * 4096}", line


def test_a_chain_sweep_names_the_member_that_runs(capsys) -> None:
    rc, out, _ = plan(capsys, "fp8_linear.fp8_linear", "rows=16,256", "n=4096", "k=4096,4100", "-t", "hopper")
    assert rc == 0
    runs = [[c.strip() for c in line.strip("|").split("|")][3] for line in out.splitlines()[3:7]]
    assert runs == ["fp8_gemv_rt.fp8_gemv_rt2_16", "fp8_linear.fp8_gemm_n128_row_scaled_m16",
                    "fp8_linear.fp8_gemm_tma", "fp8_linear.fp8_gemm_n128_row_scaled"], out


def test_a_chain_sweep_says_why_no_member_runs(capsys) -> None:
    rc, out, _ = plan(capsys, "fp8_linear.fp8_linear", "rows=0,16", "n=4096", "k=4096", "-t", "hopper")
    assert rc == 0
    runs = [c.strip() for c in out.splitlines()[3].strip("|").split("|")][3]
    assert runs == ("(none: not launched: empty work (rows == 0) (19 members); fp8_linear.fp8_gemm_tma: "
                    "not launched: rows >= TMA_MIN_ROWS is false)"), out


def test_a_sweep_too_large_is_refused(capsys) -> None:
    many = ",".join(str(i) for i in range(1, 201))
    rc, _, err = plan(capsys, "fp8_gemm_tma", f"rows={many}", f"n={many}", "k=64")
    assert rc == 2 and "more than 10000 argument sets" in err


# The FP8 chain's member by rows (the GEMVs' 8 / 16 / 32 / 64-row forms, then the tile GEMMs) and
# by weight rows (K split over 8 CTAs for few 64-row tiles, split over 2 while the grid fits one CTA
# an SM, whole K beyond, 128-row tiles for very many), on each target's table: the 32- and 64-row
# forms are hopper's (gb10's 99 KiB a block cannot hold their rings).
FP8_ROUTES = {
    "hopper": {
        (16, 512): "fp8_gemv_rt2_16_ks_8", (16, 4096): "fp8_gemv_rt2_16", (16, 6144): "fp8_gemv_rt1_16",
        (16, 151936): "fp8_gemv_rt1_16",
        (32, 512): "fp8_gemv_rt2_32_ks_8", (32, 4096): "fp8_gemv_rt2_32", (32, 6144): "fp8_gemv_rt1_32",
        (32, 151936): "fp8_gemv_rt1_32",
        (33, 512): "fp8_gemv_rt2_64_ks_8", (33, 4096): "fp8_gemv_rt2_64", (33, 6144): "fp8_gemv_rt1_64",
        (33, 151936): "fp8_gemv_rt1_64_128",
        (64, 512): "fp8_gemv_rt2_64_ks_8", (64, 1024): "fp8_gemv_rt2_64_ks_4", (64, 4096): "fp8_gemv_rt2_64",
        (64, 24576): "fp8_gemv_rt1_64", (64, 151936): "fp8_gemv_rt1_64_128",
        (65, 4096): "fp8_gemm_tma",
    },
    "gb10": {
        (16, 512): "fp8_gemv_rt2_16_ks_8", (16, 4096): "fp8_gemv_rt1_16", (16, 151936): "fp8_gemv_rt1_16",
        (17, 4096): "fp8_gemm_n128_row_scaled", (33, 512): "fp8_gemm_n128_row_scaled",
        (64, 151936): "fp8_gemm_n128_row_scaled", (65, 4096): "fp8_gemm_n128_row_scaled",
    },
}


@pytest.mark.parametrize("target", list(FP8_ROUTES))
def test_the_fp8_chain_routes_by_rows_and_weight_tiles(capsys, target) -> None:
    routes = FP8_ROUTES[target]
    for (rows, n), expect in routes.items():
        rc, out, _ = plan(capsys, "fp8_linear.fp8_linear", f"rows={rows}", f"n={n}", "k=4096", "-t", target)
        assert rc == 0, out
        runs = [line.split()[0] for line in out.splitlines() if line.rstrip().endswith("<- runs")]
        assert runs == [f"{'fp8_linear' if expect.startswith('fp8_gemm') else 'fp8_gemv_rt'}.{expect}"], (rows, n, out)


# ---------------------------------------------------------------- the values' spellings

@pytest.mark.parametrize("value", ["0x10", "0o20", "0b10000", "1_000", "016", "1e3", " 16.0", "+16"])
def test_a_number_the_specs_would_refuse_is_refused_saying_what_is_taken(capsys, value: str) -> None:
    rc, out, err = plan(capsys, "fp8_gemm_tma", "rows=2", "n=4", f"k={value}")
    assert rc == 2 and out == "", out
    assert "argument 'k': expected an integer (u32), got " in err, err
    assert "write integers in decimal, as the specs do" in err, err


@pytest.mark.parametrize("value", ["\u0665", "\uff15", "1\u0666"])
def test_digits_other_than_ascii_are_refused_saying_so(capsys, value: str) -> None:
    rc, out, err = plan(capsys, "fp8_gemm_tma", "rows=2", "n=4", f"k={value}")
    assert rc == 2 and out == "", out
    assert f"argument 'k': expected an integer (u32), got '{value}'; write the digits 0-9 (ASCII)" in err, err


@pytest.mark.parametrize("value", ["0", "-0", "16", "4096"])
def test_a_decimal_integer_is_taken(capsys, value: str) -> None:
    rc, out, err = plan(capsys, "fp8_gemm_tma", "rows=2", "n=4", f"k={value}", "-t", "hopper")
    assert rc == 0 and f"k={int(value)}" in out, (out, err)


def test_the_cli_takes_the_integers_the_specs_take() -> None:
    from kernelgen import plan_cli, yamlio
    from kernelgen.errors import SourceLoc

    for text in ["0", "-0", "7", "-7", "10", "4096", "-2147483648", "18446744073709551615", "007", "0x10", "1_000",
                 "+5", "1e3", "1.0", "-", "", "--1", "٣"]:
        try:
            value = yamlio._scalar(SourceLoc("s.yaml", 1), text, None).value
        except SpecError:  # a number the specs refuse to read
            value = None
        takes = isinstance(value, int) and not isinstance(value, bool)
        assert (plan_cli._integer(text) is not None) == takes, text
        if takes:
            assert plan_cli._integer(text) == value, text


BOOL_SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
kernels:
  flagged:
    symbol: plain
    summary: Flagged.
    args: {x: const f32*, out: f32*, n: u32}
    host_args: {flag: bool}
    grid: [n, 1, 1]
    block: [256, 1, 1]
    applies_if: [flag == 1]
    examples:
      - {n: 4, flag: true}
"""


@pytest.mark.parametrize("value,outcome", [("true", "launched"), ("false", "not launched: flag == 1 is false"),
                                           ("1", "launched"), ("0", "not launched: flag == 1 is false")])
def test_a_bool_argument_takes_true_false_0_and_1(tmp_path: Path, capsys, value: str, outcome: str) -> None:
    from tests.unit.test_launch_modes import project

    rc = main(["--root", str(project(tmp_path, BOOL_SPEC)), "plan", "demo.flagged", "n=4", f"flag={value}",
               "-t", "hopper"])
    out = capsys.readouterr().out
    assert rc == 0 and f"hopper (132 SMs): {outcome}" in out, out


@pytest.mark.parametrize("value", ["True", "FALSE", "yes", "2", "0x1"])
def test_a_bool_argument_refuses_other_spellings(tmp_path: Path, capsys, value: str) -> None:
    from tests.unit.test_launch_modes import project

    rc = main(["--root", str(project(tmp_path, BOOL_SPEC)), "plan", "demo.flagged", "n=4", f"flag={value}"])
    err = capsys.readouterr().err
    assert rc == 2, err
    wanted = "expected a bool (True, False, 0 or 1), got 2" if value == "2" else \
        f"expected a bool (true, false, 0 or 1), got '{value}'"
    assert f"demo.flagged: argument 'flag': {wanted}" in err, err


LET_SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
kernels:
  coop:
    summary: Cooperative.
    launch: {cooperative: true}
    args: {x: const f32*, out: f32*, n: u32}
    let:
      row_blocks: div_ceil(n, 4)
      resident: device.sm_count * kernel.blocks_per_sm
      nblocks: "div_ceil(min(row_blocks, device.sm_count * kernel.blocks_per_sm), 2) * 2"
      splits: div_ceil(row_blocks, nblocks)
    grid: [nblocks, 1, 1]
    block: [256, 1, 1]
    skip_if: [n == 0]
    examples:
      - {n: 1024}
"""


def test_let_values_read_the_blocks_per_sm_the_plan_used(tmp_path: Path, capsys) -> None:
    from kernelgen import plan as plans
    from tests.unit.test_launch_modes import project

    root = project(tmp_path, LET_SPEC)
    hopper = load_catalog(root).target("hopper")
    resident = hopper.sm_count * plans.table_blocks_per_sm(plans.target_table(hopper), [256, 1, 1], 0)
    assert resident > 0
    rc = main(["--root", str(root), "plan", "demo.coop", "n=16384", "-t", "hopper"])
    out = capsys.readouterr().out
    nblocks = -(-min(4096, resident) // 2) * 2
    assert rc == 0 and f"launched  grid [{nblocks}, 1, 1]" in out, out
    assert f"let: row_blocks = 4096, resident = {resident}, nblocks = {nblocks}, " \
           f"splits = {-(-4096 // nblocks)}" in out, out
    rc = main(["--root", str(root), "plan", "demo.coop", "n=16384,64", "-t", "hopper"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 16384 ")]
    assert rc == 0 and rows == [f"| 16384 | launched | [{nblocks}, 1, 1] | [256, 1, 1] | 0 |  | 4096 | {resident} "
                                f"| {nblocks} | {-(-4096 // nblocks)} |"], rows


def test_a_chain_none_of_whose_members_launches_names_the_outcome_it_returns(capsys) -> None:
    rc, out, _ = plan(capsys, "fp8_linear.fp8_linear", "rows=0", "n=4096", "k=4096")
    assert rc == 0
    assert "(no member launches: the chain returns fp8_linear.fp8_gemm_n128_row_scaled's outcome)" in out, out


def test_struct_fields_by_their_paths(capsys, tmp_path: Path) -> None:
    """A host argument read from a struct's field is given by its name or by the field's path
    (s.rows), for a field an expression reads directly too; a path the kernel reads no field of is
    named with those it reads."""
    from tests.compile.test_struct_from_build import SOURCE, SPEC
    from tests.conftest import small_project

    root = small_project(tmp_path / "p", {"specs/rp.yaml": SPEC, "kernels/rp.cu": SOURCE})

    def run(*argv: str) -> tuple[int, str, str]:
        rc = main(["--root", str(root), "plan", *argv])
        out = capsys.readouterr()
        return rc, out.out, out.err

    for kernel, named in (("rp.row_scale_fields", "s_rows=3 s_cols=100 s_span_count=1"),
                          ("rp.row_scale", "rows=3 cols=100 count=1")):
        by_path = run(kernel, "s.rows=3", "s.cols=100", "s.span.count=1", "-t", "hopper")
        by_name = run(kernel, *named.split(), "-t", "hopper")
        assert by_path[0] == 0 and by_path[1].splitlines()[1:] == by_name[1].splitlines()[1:], (by_path, by_name)
        assert "launched  grid [3, 1, 1]" in by_path[1]
    rc, _, err = run("rp.row_scale_fields", "s.rowz=3")
    assert rc == 2 and "rp.row_scale_fields reads no field 's.rowz' (its fields: s.cols, s.rows, s.span.count)" \
        in err, err


SIZE_SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
kernels:
  sized:
    symbol: plain
    summary: Sized.
    args: {x: {type: const f32*, size: "n * n * n * m"}, out: {type: f32*, size: "n - 8"}, n: u32}
    host_args: {m: u64}
    grid: [div_ceil(n, 256), 1, 1]
    block: [256, 1, 1]
    examples:
      - {n: 16, m: 1}
"""


def test_sizes_are_plans_sizes(tmp_path: Path, capsys) -> None:
    """As plan()["sizes"]: a negative count has no entry, and a count that overflows leaves the plan
    launched, saying the error a call raises (it was the plan's outcome here, launched in plan())."""
    from tests.unit.test_launch_modes import project

    root = str(project(tmp_path, SIZE_SPEC))
    assert main(["--root", root, "plan", "demo.sized", "n=4", "m=1", "-t", "hopper"]) == 0
    out = capsys.readouterr().out
    assert "hopper (132 SMs): launched  grid [1, 1, 1]" in out and "    sizes: x = 64\n" in out, out
    assert main(["--root", root, "plan", "demo.sized", "n=524288", "m=277", "-t", "hopper"]) == 0
    out = capsys.readouterr().out
    assert "hopper (132 SMs): launched  grid [2048, 1, 1]" in out, out
    assert ("    sizes: x = (invalid arguments: integer overflow while computing the launch, in size of x "
            "'((n * n) * n) * m': a call raises ArgumentError)") in out, out
