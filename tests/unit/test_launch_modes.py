"""Launch modes and device-derived geometry: the `launch:` key, device names in expressions,
__launch_bounds__ read from the sources, the plan's launch checks, chains falling through on
device limits, and what every emitter generates for them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen import expr, plan
from kernelgen.cases import expected_plan
from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "launch_modes"
TARGETS = (REPO / "tests" / "fixtures" / "project" / "specs" / "targets.yaml").read_text()

SOURCE = """\
__global__ void __launch_bounds__(256, 2) coop(const float* x, float* out, unsigned n) {}
#define NT 128
__global__ void __launch_bounds__(NT) small(const float* x, float* out, unsigned n) {}
__global__ void plain(const float* x, float* out, unsigned n) {}
"""

SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
kernels:
  coop:
    summary: Cooperative.
    launch: {cooperative: true}
    args: {x: const f32*, out: f32*, n: u32}
    grid: [device.sm_count * kernel.blocks_per_sm, 1, 1]
    block: [256, 1, 1]
    skip_if: [n == 0]
    examples:
      - {n: 1024}
"""


def project(tmp_path: Path, spec: str, source: str = SOURCE) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "demo.cu").write_text(source)
    (tmp_path / "specs" / "targets.yaml").write_text(TARGETS)
    (tmp_path / "specs" / "demo.yaml").write_text(spec)
    return tmp_path


def kernel_of(tmp_path: Path, spec: str):
    cat = load_catalog(project(tmp_path, spec))
    return cat, cat.modules[0], cat.modules[0].kernels[0]


@pytest.fixture(scope="module")
def fixture_catalog():
    return load_catalog(FIXTURE)


def fixture_kernel(cat, name):
    (m,) = cat.modules
    k = m.kernel(name)
    assert k is not None
    return m, k


# ---------------------------------------------------------------- loading


def test_launch_modes_and_launch_bounds_are_loaded(tmp_path: Path) -> None:
    _, _, k = kernel_of(tmp_path, SPEC)
    assert k.launch is not None and k.launch.cooperative and not k.launch.programmatic_dependent
    assert k.launch_bounds == (256, 2)
    assert k.uses_device and k.needs_occupancy
    assert k.device_names == {"device.sm_count", "kernel.blocks_per_sm"}


def test_launch_bounds_from_a_define_and_none(tmp_path: Path) -> None:
    spec = SPEC.replace("  coop:\n", "  small:\n").replace("launch: {cooperative: true}", "symbol: small")
    spec = spec.replace("[device.sm_count * kernel.blocks_per_sm, 1, 1]", "[n, 1, 1]").replace("[256, 1, 1]",
                                                                                            "[64, 1, 1]")
    _, _, k = kernel_of(tmp_path, spec)
    assert k.launch_bounds == (128, 0) and k.launch is None and not k.uses_device


# (a cooperative grid: the first example's must be co-resident, as the plan checks)
@pytest.mark.parametrize("grid", ["device.sm_count * 2", "min(max(device.max_threads_per_sm // 256, n), device.sm_count)",
                                  "device.max_shared_mem_optin // 1024", "kernel.blocks_per_sm"])
def test_device_names_are_usable_in_grid(tmp_path: Path, grid: str) -> None:
    spec = SPEC.replace("[device.sm_count * kernel.blocks_per_sm, 1, 1]", f"['{grid}', 1, 1]")
    _, _, k = kernel_of(tmp_path, spec)
    assert k.device_names


def test_device_names_in_shared_mem_follow_each_target(tmp_path: Path) -> None:
    """shared_mem may name the device: here half an SM's shared memory when the grid has at most one
    block an SM (so that no SM takes two), else 48 KiB; the plan takes each target's values."""
    smem = "max(49152, device.max_shared_mem_per_sm // 2 * min(1, max(0, device.sm_count + 1 - n)))"
    spec = SPEC.replace("launch: {cooperative: true}", "symbol: plain").replace(
        "[device.sm_count * kernel.blocks_per_sm, 1, 1]", "[n, 1, 1]").replace(
        "    skip_if:", f"    shared_mem: '{smem}'\n    skip_if:")
    cat, m, k = kernel_of(tmp_path, spec)
    assert k.device_names == {"device.max_shared_mem_per_sm", "device.sm_count"} and k.uses_device
    assert not k.needs_occupancy
    hopper, gb10 = cat.target("hopper"), cat.target("gb10")
    assert expected_plan(m, k, hopper, {"n": 132})[3] == 233472 // 2  # one block an SM
    assert expected_plan(m, k, hopper, {"n": 133})[3] == 49152
    assert expected_plan(m, k, gb10, {"n": 48})[3] == 102400 // 2
    assert expected_plan(m, k, gb10, {"n": 49})[3] == 49152
    cpp = "\n".join(text for path, text in render_catalog(cat).items() if str(path).endswith(".cu"))
    assert "kg_dev.max_shared_mem_per_sm" in cpp  # the C++ plan reads the device too


# (case id, replacement (old, new), expected line, message fragment)
BAD = [
    ("device name in block", ("[256, 1, 1]", "[device.max_threads_per_block, 1, 1]"), 10, "not available here"),
    ("device name in size", ("x: const f32*", "x: {type: const f32*, size: device.sm_count}"), 8,
     "not available here"),
    ("occupancy in shared_mem", ("    skip_if:", "    shared_mem: kernel.blocks_per_sm\n    skip_if:"), 11,
     "not available here"),
    ("unknown device name", ("device.sm_count *", "device.sm_cnt *"), 9, "did you mean 'device.sm_count'"),
    ("other attribute", ("device.sm_count *", "foo.bar *"), 9, "expressions have no attributes or methods"),
    ("float literal dot", ("device.sm_count *", "1.5 *"), 9, "not allowed"),
    ("unknown launch key", ("{cooperative: true}", "{cooperativ: true}"), 7, "did you mean 'cooperative'"),
    ("launch flag not bool", ("{cooperative: true}", "{cooperative: 1}"), 7, "expected true or false"),
    ("cooperative with cluster", ("{cooperative: true}", "{cooperative: true, cluster: [2, 1, 1]}"), 7,
     "cannot use a cluster"),
    ("launch cluster of two", ("{cooperative: true}", "{cluster: [2, 1]}"), 7, "expected 3 entries"),
    ("launch cluster device name", ("{cooperative: true}", "{cluster: [device.sm_count, 1, 1]}"), 7,
     "not available here"),
    ("example over launch bounds", ("[256, 1, 1]", "[n, 1, 1]"), 5, "__launch_bounds__(256, 2)"),
    ("occupancy with variants", ("    summary: Cooperative.\n",
                                 "    summary: Cooperative.\n    variants: {arg: n, symbols: {1024: coop}}\n"), 8,
     "need one __global__ function"),
]


@pytest.mark.parametrize("old,new,line,fragment", [b[1] + b[2:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_launch_specs_name_file_and_line(tmp_path: Path, old: str, new: str, line: int, fragment: str) -> None:
    assert old in SPEC
    with pytest.raises(SpecError) as info:
        load_catalog(project(tmp_path, SPEC.replace(old, new, 1)))
    text = str(info.value)
    assert f"specs/demo.yaml:{line}:" in text, text
    assert fragment in text, text


def test_launch_cluster_with_compile_time_cluster_is_refused(tmp_path: Path) -> None:
    source = "__global__ void __cluster_dims__(2, 1, 1) plain(const float* x, float* out, unsigned n) {}\n"
    spec = SPEC.replace("  coop:\n", "  plain:\n").replace("{cooperative: true}", "{cluster: [2, 1, 1]}")
    spec = spec.replace("[device.sm_count * kernel.blocks_per_sm, 1, 1]", "[2, 1, 1]")
    spec = spec.replace("    block: [256, 1, 1]\n", "    block: [256, 1, 1]\n    cluster: [2, 1, 1]\n")
    with pytest.raises(SpecError, match="compile-time 'cluster'"):
        load_catalog(project(tmp_path, spec, source))


def test_shared_memory_is_checked_only_where_the_kernel_applies(tmp_path: Path) -> None:
    spec = SPEC.replace("launch: {cooperative: true}", "symbol: plain").replace(
        "[device.sm_count * kernel.blocks_per_sm, 1, 1]", "[n, 1, 1]")
    spec = spec.replace("    skip_if: [n == 0]\n", "    shared_mem: n * 4\n    skip_if: [n == 0]\n"
                        "    applies_if: [n <= 1000]\n")
    spec = spec.replace("      - {n: 1024}\n", "      - {n: 1000}\n      - {n: 1000000}\n")
    _, _, k = kernel_of(tmp_path, spec)  # 4 MB of shared memory where the kernel does not apply: fine
    assert k.shared_mem is not None
    (tmp_path / "again").mkdir()
    bad = spec.replace("    applies_if: [n <= 1000]\n", "")
    with pytest.raises(SpecError, match="4000000 bytes of dynamic shared memory"):
        load_catalog(project(tmp_path / "again", bad))


def test_target_table_fields_and_defaults(tmp_path: Path) -> None:
    cat = load_catalog(FIXTURE)
    hopper, gb10 = cat.target("hopper"), cat.target("gb10")
    assert (hopper.sm_count, hopper.max_threads_per_sm, hopper.max_blocks_per_sm, hopper.smem_per_sm) == (
        132, 2048, 32, 233472)
    assert (gb10.sm_count, gb10.max_threads_per_sm, gb10.max_blocks_per_sm, gb10.smem_per_sm) == (48, 1536, 32, 102400)
    bare = "\n".join(ln for ln in TARGETS.splitlines() if not ln.startswith(
        ("  sm_count", "  max_threads_per_sm", "  max_blocks_per_sm", "  max_shared_mem_per_sm",
         "  reserved_shared", "  max_cluster"))) + "\n"
    p = project(tmp_path, SPEC)
    (p / "specs" / "targets.yaml").write_text(bare)
    t = load_catalog(p).target("hopper")
    assert (t.sm_count, t.max_threads_per_sm, t.smem_per_sm, t.max_cluster_size) == (1, 2048, 232448 + 1024, 8)
    (p / "specs" / "targets.yaml").write_text(TARGETS.replace("sm_count: 132", "sm_count: 0"))
    with pytest.raises(SpecError, match=r"targets.yaml:\d+: hopper.sm_count"):
        load_catalog(p)
    # an explicit 0 is no per-SM shared memory (it was taken as opt-in + reserved, as when left out)
    (p / "specs" / "targets.yaml").write_text(re.sub(r"max_shared_mem_per_sm: \d+", "max_shared_mem_per_sm: 0",
                                                     TARGETS))
    with pytest.raises(SpecError, match=r"targets.yaml:\d+: \w+.max_shared_mem_per_sm: 0 is out of range \[1, "):
        load_catalog(p)


# ---------------------------------------------------------------- plans


def test_table_occupancy_bound() -> None:
    hopper = {"max_threads_per_block": 1024, "max_shared_mem_optin": 232448, "max_blocks_per_sm": 32,
              "max_threads_per_sm": 2048, "max_shared_mem_per_sm": 233472, "reserved_shared_mem_per_block": 1024}
    assert plan.table_blocks_per_sm(hopper, (256, 1, 1), 0) == 8
    assert plan.table_blocks_per_sm(hopper, (32, 1, 1), 0) == 32  # the block limit
    assert plan.table_blocks_per_sm(hopper, (100, 1, 1), 0) == 16  # 4 warps of 32
    assert plan.table_blocks_per_sm(hopper, (128, 1, 1), 100 * 1024) == 2  # shared memory
    assert plan.table_blocks_per_sm(hopper, (128, 1, 1), 232448) == 1
    assert plan.table_blocks_per_sm(hopper, (128, 1, 1), 232449) == 0
    assert plan.table_blocks_per_sm(hopper, (2048, 1, 1), 0) == 0
    assert plan.table_blocks_per_sm(hopper, (0, 1, 1), 0) == 0
    # a target that reserves no shared memory a block (sm_75): a block without any is bound by threads
    turing = {**hopper, "max_blocks_per_sm": 16, "max_threads_per_sm": 1024, "max_shared_mem_per_sm": 65536,
              "max_shared_mem_optin": 65536, "reserved_shared_mem_per_block": 0}
    assert plan.table_blocks_per_sm(turing, (64, 1, 1), 0) == 16
    assert plan.table_blocks_per_sm(turing, (64, 1, 1), 16384) == 4


def test_cooperative_grid_from_the_device_names(fixture_catalog) -> None:
    m, k = fixture_kernel(fixture_catalog, "coop_sum")
    hopper, gb10 = fixture_catalog.target("hopper"), fixture_catalog.target("gb10")
    assert expected_plan(m, k, hopper, {"n": 1000}) == (0, (132 * 8, 1, 1), (256, 1, 1), 0)
    assert expected_plan(m, k, gb10, {"n": 1000}) == (0, (48 * 6, 1, 1), (256, 1, 1), 0)


def test_cooperative_grid_over_co_residency_is_an_error(fixture_catalog) -> None:
    m, k = fixture_kernel(fixture_catalog, "coop_sum_blocks")
    hopper = fixture_catalog.target("hopper")
    assert expected_plan(m, k, hopper, {"n": 10, "blocks": 1056})[0] == 0
    c = expected_plan(m, k, hopper, {"n": 10, "blocks": 1057})[0]
    assert c == plan.code(plan.E_CORESIDENT, 0, True) and plan.falls_through(c)


def test_launch_time_cluster_checks(fixture_catalog) -> None:
    m, k = fixture_kernel(fixture_catalog, "cluster_rank")
    t = fixture_catalog.target("hopper")
    assert expected_plan(m, k, t, {"blocks": 64, "cluster_x": 4})[0] == 0
    assert expected_plan(m, k, t, {"blocks": 66, "cluster_x": 4})[0] == plan.code(plan.E_CLUSTER, 0, True)
    assert expected_plan(m, k, t, {"blocks": 64, "cluster_x": 16})[0] == plan.code(plan.E_CLUSTER, 3, True)
    assert expected_plan(m, k, t, {"blocks": 64, "cluster_x": 0})[0] == plan.code(plan.E_CLUSTER, 3, True)
    assert not plan.falls_through(plan.code(plan.E_CLUSTER, 0, True))


def test_block_over_launch_bounds_is_an_error(fixture_catalog) -> None:
    m, k = fixture_kernel(fixture_catalog, "bounded_scale")
    t = fixture_catalog.target("hopper")
    assert k.launch_bounds == (256, 2)
    assert expected_plan(m, k, t, {"n": 1000, "threads": 256})[0] == 0
    assert expected_plan(m, k, t, {"n": 1000, "threads": 257})[0] == plan.code(plan.E_LAUNCH_BOUNDS, 0, True)


def test_falls_through_only_on_device_limits() -> None:
    for name in ("GRID", "BLOCK", "SHARED_MEM", "LAUNCH_BOUNDS", "CORESIDENT"):
        assert plan.falls_through(plan.code(plan.ERRORS[name][0], 1, True)), name
    for name in ("REQUIRES", "EXPR", "DEVICE", "CUDA", "CLUSTER"):
        assert not plan.falls_through(plan.code(plan.ERRORS[name][0], 1, True)), name
    assert not plan.falls_through(0) and not plan.falls_through(plan.code(plan.NL_CLAUSE, 0))


def test_occupancy_in_a_clause_uses_block_and_shared_memory(tmp_path: Path) -> None:
    spec = SPEC.replace("launch: {cooperative: true}", "symbol: plain").replace(
        "[device.sm_count * kernel.blocks_per_sm, 1, 1]", "[n, 1, 1]")
    spec = spec.replace("    skip_if: [n == 0]\n", "    shared_mem: n * 64\n    skip_if: [n == 0]\n"
                        "    applies_if: [kernel.blocks_per_sm >= 2]\n    targets: [hopper]\n")
    spec = spec.replace("      - {n: 1024}\n", "      - {n: 1024}\n      - {n: 3000}\n")
    cat, m, k = kernel_of(tmp_path, spec)
    t = cat.target("hopper")
    assert expected_plan(m, k, t, {"n": 1024})[0] == 0  # 64 KiB: 3 blocks an SM
    assert expected_plan(m, k, t, {"n": 3000})[0] == plan.code(plan.NL_CLAUSE, 0)  # 187.5 KiB: 1


def test_expressions_parse_dotted_names_only_when_given() -> None:
    node = expr.parse("device.sm_count * 2", {"device.sm_count": None}, expr.Ty.INT)
    assert node.names() == {"device.sm_count"}
    assert expr.to_text(node) == "device.sm_count * 2"
    with pytest.raises(expr.ParseError, match="not available here"):
        expr.parse("device.sm_count", {"n": None}, expr.Ty.INT)
    with pytest.raises(expr.ParseError, match="expressions have no attributes or methods"):
        expr.parse("n.real", {"n": None}, expr.Ty.INT)


# ---------------------------------------------------------------- generated text


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return render_catalog(load_catalog(FIXTURE))


def test_launch_modes_use_cudaLaunchKernelEx_and_plain_kernels_keep_the_chevrons(rendered) -> None:
    cu = rendered["generated/hopper/src/launch_modes.cu"]
    assert "kg_attrs[0].id = cudaLaunchAttributeCooperative;" in cu
    assert "kg_attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;" in cu
    assert "kg_attrs[0].id = cudaLaunchAttributeClusterDimension;" in cu
    assert cu.count("cudaLaunchKernelEx(&kg_cfg, ::kg_kernel_coop_sum_0") == 1
    assert cu.count("cudaLaunchKernelEx(&kg_cfg, ::kg_kernel_coop_sum_blocks_0") == 1
    assert "::kg_kernel_atomic_sum_0<<<" in cu and "::kg_kernel_bounded_scale_0<<<" in cu
    assert "constexpr auto kg_kernel_atomic_sum_0 = kg::pick<kg_signature_atomic_sum>(&::atomic_sum_kernel, 0);" in cu
    assert "kg::check_launch(kg_p, 256, nullptr, 8, true, kg_dev.sm_count, kg_blocks_per_sm)" in cu
    assert "kg::check_launch(kg_p, 256, nullptr, 8, false, 0, 0)" in cu  # bounded_scale
    assert "const kg_device_values& kg_dev = *kg_rt_device_values();" in cu
    # Kernels that do not read the device never ask for it.
    plain = cu.split("kg_plan plan_plain_row_sum(")[1].split("\n}\n")[0]
    assert "kg_rt_device_values" not in plain and "check_launch" not in plain
    # Chains go on after a device-limit error.
    assert "if (kg_o.code <= 0 && !KG_FALLS_THROUGH(kg_o.code)) return kg_o;" in cu


def test_target_table_header_and_falls_through_macro(rendered) -> None:
    table = rendered["generated/hopper/include/kernelgen/target_table.h"]
    assert "#define KG_TABLE_SM_COUNT 132LL" in table
    assert "#define KG_TABLE_MAX_SHARED_MEM_PER_SM 233472LL" in table
    assert "#define KG_TABLE_SM_COUNT 48LL" in rendered["generated/gb10/include/kernelgen/target_table.h"]
    codes = rendered["generated/hopper/include/kernelgen/plan_codes.h"]
    assert "#define KG_E_CORESIDENT 10" in codes
    assert "KG_CATEGORY(code) == KG_E_CORESIDENT" in codes and "KG_CATEGORY(code) == KG_E_CLUSTER" not in codes


def test_contract_tests_evaluate_device_names_with_the_target_table(rendered) -> None:
    py = rendered["generated/hopper/tests/test_launch_modes_hopper_contract.py"]
    assert "DEVICE = {'sm_count': 132," in py
    assert "runtime.use_target_table(True)" in py
    assert "_x.mul(_st, _a['device.sm_count'], _a['kernel.blocks_per_sm'])" in py
    assert "launch=_plan.LaunchChecks(max_threads=256, cluster=None, cooperative=True)" in py
    assert "occupancy=lambda _st, _a: ((C_THREADS, 1, 1), 0)" in py
    assert "cluster=lambda _st, _a: (_a['cluster_x'], 1, 1)" in py
    compile(py, "contract.py", "exec")


def test_rust_crate_knows_the_new_codes_and_device_values(rendered) -> None:
    lib = rendered["generated/hopper/rust/src/lib.rs"]
    assert "pub const E_CORESIDENT: i32 = 10;" in lib
    assert "pub const fn falls_through(code: i32) -> bool" in lib
    assert "pub fn device_values() -> DeviceValues" in lib
    assert "pub fn kg_rt_use_target_table(on: i32);" in lib
    tests = [v for k, v in rendered.items() if k.startswith("generated/hopper/rust/tests/")]
    assert tests and all("kg::use_target_table(true);" in t for t in tests)
