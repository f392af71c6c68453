"""The plan model (kernelgen.plan) against the generated plan and runtime: the launch checks
of a first example (cluster, co-residency) are refused at load as the built plan refuses them;
`kernelgen plan` checks arguments as the Python module does and gives its reasons word for word
(kg_rt_describe's texts, read from runtime.cpp); the package's falls_through is the model's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen import plan
from kernelgen.cases import expected_plan
from kernelgen.cli import main
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.unit.test_launch_modes import SOURCE, SPEC, project

REPO = Path(__file__).resolve().parents[2]
RUNTIME_CPP = REPO / "src" / "kernelgen" / "runtime" / "src" / "runtime.cpp"

CLUSTER_SPEC = SPEC.replace("launch: {cooperative: true}", "symbol: plain\n    launch: {cluster: [2, 1, 1]}").replace(
    "[device.sm_count * kernel.blocks_per_sm, 1, 1]", "[n, 1, 1]").replace("{n: 1024}", "{n: 4}")


def _refused(tmp_path: Path, spec: str) -> str:
    with pytest.raises(SpecError) as info:
        load_catalog(project(tmp_path, spec))
    return str(info.value)


def test_a_first_example_the_launch_checks_refuse_is_refused_at_load(tmp_path: Path) -> None:
    err = _refused(tmp_path, CLUSTER_SPEC.replace("{n: 4}", "{n: 3}"))  # grid 3 over clusters of 2
    assert err.startswith("specs/demo.yaml:14: kernels.coop.examples[0]: the first example must launch"), err
    assert "code CLUSTER, detail 0" in err, err


@pytest.mark.parametrize("cluster,field,fragment", [
    ("[16, 1, 1]", "launch.cluster", "cluster [16, 1, 1] has 16 blocks, more than target 'gb10' allows "
     "(max_cluster_size 8, the portable cluster size the launchers use): every launch would fail with CLUSTER"),
    ("[4, 4, 1]", "launch.cluster", "cluster [4, 4, 1] has 16 blocks"),
    ("[9, 1, 1]", "launch.cluster", "cluster [9, 1, 1] has 9 blocks"),
    ("[n, 16, 1]", "launch.cluster", "the cluster's constant dimensions [16, 1] make 16 blocks"),
    ("[0, 1, 1]", "launch.cluster[0]", "cluster dimension 0 is less than 1; every launch would fail with CLUSTER"),
    ("[-2, 1, 1]", "launch.cluster[0]", "cluster dimension -2 is less than 1"),
    ("[1, 1, 2 // 0]", "launch.cluster[2]", "cannot evaluate the cluster dimension: division by zero"),
])
def test_a_constant_launch_cluster_no_launch_could_use_is_refused_at_its_field(tmp_path: Path, cluster, field,
                                                                             fragment) -> None:
    err = _refused(tmp_path, CLUSTER_SPEC.replace("cluster: [2, 1, 1]", f"cluster: {cluster}"))
    assert err.startswith(f"specs/demo.yaml:8: kernels.coop.{field}: {fragment}"), err


@pytest.mark.parametrize("cluster", ["[16, 1, 1]", "[4, 4, 1]"])
def test_a_compile_time_cluster_over_the_limit_is_refused_at_its_field(tmp_path: Path, cluster: str) -> None:
    spec = CLUSTER_SPEC.replace("    launch: {cluster: [2, 1, 1]}\n", f"    cluster: {cluster}\n")
    dims = cluster.strip("[]").replace(" ", "")
    source = SOURCE.replace("__global__ void plain", f"__global__ void __cluster_dims__({dims}) plain")
    with pytest.raises(SpecError) as info:
        load_catalog(project(tmp_path, spec, source))
    assert str(info.value).startswith(f"specs/demo.yaml:8: kernels.coop.cluster: cluster {cluster} has 16 blocks, "
                                      "more than target 'gb10' allows (max_cluster_size 8"), str(info.value)


def test_a_cluster_axis_from_an_instantiation_over_the_limit_is_refused(tmp_path: Path) -> None:
    spec = CLUSTER_SPEC.replace("    launch: {cluster: [2, 1, 1]}\n",
                                "    instantiate: {C: [2, 16]}\n    launch: {cluster: [C, 1, 1]}\n").replace(
        "[n, 1, 1]", "[n * C, 1, 1]")
    err = _refused(tmp_path, spec)
    assert "<C=16>.launch.cluster: cluster [16, 1, 1] has 16 blocks" in err, err


def test_a_cooperative_first_example_over_the_co_residency_limit_is_refused(tmp_path: Path) -> None:
    err = _refused(tmp_path, SPEC.replace("[device.sm_count * kernel.blocks_per_sm, 1, 1]", "[n, 1, 1]"))
    assert "code CORESIDENT" in err, err


def cli(capsys, root: Path, *argv: str) -> tuple[int, str, str]:
    rc = main(["--root", str(root), "plan", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_cli_gives_the_runtime_reason_of_a_cluster_error(tmp_path: Path, capsys) -> None:
    root = project(tmp_path, CLUSTER_SPEC)
    rc, out, _ = cli(capsys, root, "demo.coop", "n=3", "-t", "hopper")
    assert rc == 0 and "hopper (132 SMs): error: grid x is not a whole number of clusters" in out, out
    rc, out, _ = cli(capsys, root, "demo.coop", "n=4", "-t", "hopper")
    assert "launched  grid [4, 1, 1]  block [256, 1, 1]  shared_mem 0  cluster [2, 1, 1]" in out, out


@pytest.mark.parametrize("argv,message", [
    (("n=-5",), "demo.coop: argument 'n': -5 is out of range for u32 [0, 2**32-1]"),
    (("n=4294967296",), "demo.coop: argument 'n': 4294967296 is out of range for u32 [0, 2**32-1]"),
    (("n=1.5",), "demo.coop: argument 'n': expected an integer (u32), got float"),
    (("n=true",), "demo.coop: argument 'n': expected an integer (u32), got 'true'"),
    (("n=4", "n=8"), "got multiple values for argument 'n' (n=4 and n=8)"),
    (("n=4", "x=1"), "plan of demo.coop() takes scalar arguments only; got pointer 'x'"),
    (("m=4",), "demo.coop has no argument 'm' (expected one of: n)"),
])
def test_the_cli_refuses_arguments_as_the_python_module_does(tmp_path: Path, capsys, argv, message) -> None:
    rc, out, err = cli(capsys, project(tmp_path, CLUSTER_SPEC), "demo.coop", *argv)
    assert rc == 2 and out == "" and message in err, err


def test_a_dispatcher_takes_an_element_type_and_marks_the_member_that_runs(tmp_path: Path, capsys) -> None:
    source = SOURCE + "template <typename T> __global__ void tk(const T* x, T* out, unsigned n) {}\n"
    spec = SPEC.replace("""  coop:
    summary: Cooperative.
    launch: {cooperative: true}
    args: {x: const f32*, out: f32*, n: u32}
    grid: [device.sm_count * kernel.blocks_per_sm, 1, 1]""", """  typed:
    symbol: tk<{T}>
    summary: Typed.
    instantiate: {T: [f32, bf16]}
    args: {x: 'const {T}*', out: '{T}*', n: u32}
    grid: [n, 1, 1]""")
    root = project(tmp_path, spec, source)
    rc, out, _ = cli(capsys, root, "demo.typed", "n=5", "T=bf16", "-t", "hopper")
    assert rc == 0, out
    runs = [line.split()[0] for line in out.splitlines() if line.rstrip().endswith("<- runs")]
    assert runs == ["demo.typed_bf16"], out
    assert "(skipped: takes T=f32)" in out, out
    # T left open: the member that runs for each element type
    rc, out, _ = cli(capsys, root, "demo.typed", "n=5", "-t", "hopper")
    runs = [line.split()[0] + " " + line.split("<- runs")[1].strip() for line in out.splitlines() if "<- runs" in line]
    assert runs == ["demo.typed_f32 for T=f32 arrays", "demo.typed_bf16 for T=bf16 arrays"], out
    rc, out, err = cli(capsys, root, "demo.typed", "n=5", "T=bf17")
    assert rc == 2 and "T must name an element type, such as 'f32'; got 'bf17'" in err, err
    rc, out, _ = cli(capsys, root, "demo.typed", "n=5,6", "T=f32", "-t", "hopper")
    assert "| n | T | runs |" in out and "| 5 | f32 | demo.typed_f32 |" in out, out


def test_a_block_that_makes_blocks_per_sm_0_is_reported_before_the_empty_grid(tmp_path: Path) -> None:
    """grid min(device.sm_count * kernel.blocks_per_sm, n) with a block too large: blocks_per_sm is
    0, so the grid is 0; the plan reports the block (falls through in a chain), not empty work."""
    spec = SPEC.replace("[device.sm_count * kernel.blocks_per_sm, 1, 1]",
                        "[min(device.sm_count * kernel.blocks_per_sm, div_ceil(n, b)), 1, 1]").replace(
        "[256, 1, 1]", "[b, 1, 1]").replace("n: u32}", "n: u32, b: u32}").replace("{n: 1024}", "{n: 1024, b: 256}")
    spec = spec.replace("launch: {cooperative: true}", "symbol: plain\n    launch: {cooperative: true}")
    source = SOURCE.replace("plain(const float* x, float* out, unsigned n)",
                            "plain(const float* x, float* out, unsigned n, unsigned b)")
    cat = load_catalog(project(tmp_path, spec, source))
    m = cat.modules[0]
    k = m.kernels[0]
    hopper = cat.target("hopper")
    c = expected_plan(m, k, hopper, {"n": 1024, "b": 2048})[0]
    assert c == plan.code(plan.E_BLOCK, 0, True) and plan.falls_through(c), c
    assert expected_plan(m, k, hopper, {"n": 0, "b": 256})[0] == plan.code(plan.NL_EMPTY, 0)
    assert expected_plan(m, k, hopper, {"n": 1024, "b": 256})[0] == plan.LAUNCHED


# ---------------------------------------------------------------- the runtime's texts


def _runtime_texts() -> dict[tuple[str, str], list[str]]:
    """kg_rt_describe's format strings per (not launched | error, category), from runtime.cpp."""
    body = RUNTIME_CPP.read_text()
    body = body[body.index("void kg_rt_describe("):body.index("void kg_rt_refresh(")]
    out: dict[tuple[str, str], list[str]] = {}
    for part in re.split(r"\n\s*case ", body)[1:]:
        name = part.split(":", 1)[0].strip()
        literals = re.findall(r'snprintf\(buf, size,\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', part)
        out[("nl" if name.startswith("KG_NL_") else "e", name)] = [
            "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', lit)) for lit in literals]
    return out


class _K:
    skip_if = requires = applies_if = ()
    variants = None


@pytest.mark.parametrize("name,error,detail,values", [
    ("EMPTY_GRID", False, 1, ["y"]),
    ("NO_INSTANCE", False, 0, ["T"]),
    ("UNALIGNED", False, 2, ["2"]),
    ("EXPR", True, plan.EXPR_ERRORS["OVERFLOW"][0], ["integer overflow"]),
    ("EXPR", True, plan.EXPR_ERRORS["DIV_ZERO"][0], ["division by zero"]),
    ("GRID", True, 0, ["x", str(plan.GRID_LIMITS[0])]),
    ("GRID", True, 2, ["z", str(plan.GRID_LIMITS[2])]),
    ("GRID", True, 1 | plan.DETAIL_NEGATIVE, ["y"]),
    ("BLOCK", True, 3, ["x*y*z"]),
    ("BLOCK", True, 0, ["x"]),
    ("BLOCK", True, 2 | plan.DETAIL_NEGATIVE, ["z"]),
    ("BLOCK", True, 1 | plan.DETAIL_ZERO, ["y"]),
    ("SHARED_MEM", True, 0, []),
    ("SHARED_MEM", True, plan.DETAIL_NEGATIVE, []),
    ("LAUNCH_BOUNDS", True, 0, []),
    ("CLUSTER", True, 3, []),
    ("CLUSTER", True, 1, ["y"]),
    ("CORESIDENT", True, 0, []),
    ("DEVICE_SCALAR", True, 1, ["2"]),
    ("TENSOR_MAP", True, 5, ["5"]),
])
def test_describe_says_what_kg_rt_describe_says(name: str, error: bool, detail: int, values: list[str]) -> None:
    category = (plan.ERRORS if error else plan.NOT_LAUNCHED)[name][0]
    text = plan.describe(_K(), plan.code(category, detail, error), keys="T")
    wanted = []
    for f in _runtime_texts()[("e" if error else "nl", f"KG_{'E' if error else 'NL'}_{name}")]:
        f = f.replace("%s: ", "", 1)  # the kernel's name
        tokens = re.findall(r"%(?:lld|d|s)", f)
        if len(tokens) != len(values):
            continue
        for token, value in zip(tokens, values):
            f = f.replace(token, value, 1)
        wanted.append(f)
    assert text in wanted, (text, wanted)


def test_the_packages_falls_through_is_the_models() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("kg_api", REPO / "src" / "kernelgen" / "runtime" / "python" /
                                                  "_api.py")
    assert spec is not None and spec.loader is not None
    api = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(api)
    for name, (category, _) in {**plan.ERRORS}.items():
        for detail in (0, 3):
            c = plan.code(category, detail, True)
            assert api.falls_through(c) == plan.falls_through(c), name
    assert not api.falls_through(plan.LAUNCHED) and not api.falls_through(plan.code(plan.NL_EMPTY_GRID))
