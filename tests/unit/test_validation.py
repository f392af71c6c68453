"""Spec checks beyond key shapes: format versions, cluster shapes against the kernel sources,
and `kernelgen list` rejecting exactly what `kernelgen generate` rejects."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.errors import SpecError
from kernelgen.kernel_source import SourceScanError, global_declarations
from kernelgen.loader import load_catalog
from tests.unit.test_loader import GOOD, sub, write_project

CLUSTER_KERNEL = """\
#define CX 4
namespace demo_detail { constexpr unsigned kY = 1u; }
// __global__ void __cluster_dims__(2, 1, 1) scale(  <- a comment, not a declaration
__global__ void __cluster_dims__(CX, kY) __launch_bounds__(256)
scale(const float* x, float* out, unsigned n, float alpha) {}
"""

CLUSTER_SPEC = sub("    block: [THREADS, 1, 1]\n", "    block: [THREADS, 1, 1]\n    cluster: [CX, 1, 1]\n").replace(
    "{THREADS: 256}", "{THREADS: 256, CX: 4}"
).replace("[div_ceil(n, THREADS), 1, 1]", "[div_ceil(n, THREADS * CX) * CX, 1, 1]")


def cluster_project(tmp_path: Path, spec: str, kernel: str = CLUSTER_KERNEL) -> Path:
    root = write_project(tmp_path, spec)
    (root / "kernels" / "demo.cu").write_text(kernel)
    return root


def load_error(root: Path) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_catalog(root)
    return info.value


# ------------------------------------------------------------------ version


def test_version_1_is_accepted_and_the_default(tmp_path: Path) -> None:
    cat = load_catalog(write_project(tmp_path, "version: 1\n" + GOOD))
    assert cat.modules[0].name == "demo"


@pytest.mark.parametrize("value,fragment", [
    ("2", "spec format version 2 is not supported"),
    ("0", "spec format version 0 is not supported"),
    ("'1'", "expected an integer format version, got string '1'"),
    ("[1]", "expected an integer format version, got a list"),
])
def test_other_versions_are_one_located_error(tmp_path: Path, value: str, fragment: str) -> None:
    # the version is judged before other keys: a newer format may have keys this one lacks
    err = load_error(write_project(tmp_path, f"version: {value}\n" + GOOD + "new_key: 1\n"))
    assert str(err).startswith("specs/demo.yaml:1: version: "), err
    assert fragment in str(err)
    assert "supported versions: 1" in str(err)


def test_targets_file_takes_a_version(tmp_path: Path) -> None:
    root = write_project(tmp_path, GOOD)
    targets = root / "specs" / "targets.yaml"
    targets.write_text("version: 1\n" + targets.read_text())
    assert [t.name for t in load_catalog(root).targets] == ["gb10", "hopper"]
    targets.write_text(targets.read_text().replace("version: 1", "version: 3"))
    err = load_error(root)
    assert str(err).startswith("specs/targets.yaml:1: version: spec format version 3 is not supported"), err


# ------------------------------------------------------------------ cluster


def test_cluster_matching_the_kernel_loads(tmp_path: Path) -> None:
    (m,) = load_catalog(cluster_project(tmp_path, CLUSTER_SPEC)).modules
    assert m.kernels[0].cluster == (4, 1, 1)


def test_argmax_declares_its_cluster() -> None:
    repo = Path(__file__).resolve().parents[2]
    argmax = load_catalog(repo).module("argmax")
    assert argmax is not None and argmax.kernels[0].cluster == (8, 1, 1)


@pytest.mark.parametrize("case,spec,kernel,line,fragment", [
    ("differs", CLUSTER_SPEC.replace("CX: 4", "CX: 2"), CLUSTER_KERNEL, 16,
     "kernels.scale.cluster: kernel 'scale' declares cluster [2, 1, 1], but 'scale' at kernels/demo.cu:4 "
     "has __cluster_dims__(4, 1, 1)"),
    ("absent in kernel", CLUSTER_SPEC, CLUSTER_KERNEL.replace("__cluster_dims__(CX, kY) ", ""), 16,
     "has no __cluster_dims__ attribute"),
    ("kernel not in sources", CLUSTER_SPEC, "// nothing here\n", 16,
     "cannot find the __global__ definition of 'scale'"),
    ("absent in spec", GOOD, CLUSTER_KERNEL, 7,
     "kernels.scale.symbol: 'scale' is declared with __cluster_dims__(4, 1, 1) at kernels/demo.cu:4, "
     "but the spec declares no cluster (add 'cluster: [4, 1, 1]' to kernel 'scale')"),
    ("unreadable attribute", CLUSTER_SPEC, CLUSTER_KERNEL.replace("(CX, kY)", "(CX * 1, kY)"), 16,
     "cannot evaluate the __cluster_dims__ argument 'CX * 1'"),
    ("argument in cluster", CLUSTER_SPEC.replace("cluster: [CX, 1, 1]", "cluster: [n, 1, 1]"), CLUSTER_KERNEL, 16,
     "kernels.scale.cluster[0]: 'n' is not a constant"),
    ("two entries", CLUSTER_SPEC.replace("cluster: [CX, 1, 1]", "cluster: [CX, 1]"), CLUSTER_KERNEL, 16,
     "expected a list of 3 constant expressions [x, y, z], got 2 entries"),
    ("zero", CLUSTER_SPEC.replace("cluster: [CX, 1, 1]", "cluster: [CX, 0, 1]"), CLUSTER_KERNEL, 16,
     "cluster dimension 0 is less than 1"),
    ("grid not whole clusters", CLUSTER_SPEC.replace("div_ceil(n, THREADS * CX) * CX", "div_ceil(n, THREADS)"),
     CLUSTER_KERNEL, 16, "is not a whole number of clusters [4, 1, 1]"),
])
def test_cluster_errors(tmp_path: Path, case: str, spec: str, kernel: str, line: int, fragment: str) -> None:
    err = load_error(cluster_project(tmp_path, spec, kernel))
    assert str(err).startswith(f"specs/demo.yaml:{line}: "), err
    assert fragment in str(err), err


TEMPLATE_CLUSTER_KERNEL = """\
template <typename T, unsigned C, int MIN_BLOCKS = 2>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(256, MIN_BLOCKS)
scale(const T* x, T* out, unsigned n, float alpha) {}
"""

TEMPLATE_CLUSTER_SPEC = sub("    summary: Scales.\n", """\
    summary: Scales.
    symbol: scale<float, {CLUSTER}>
    instantiate:
      CLUSTER: [2, 4]
    cluster: [CLUSTER, 1, 1]
""").replace("[div_ceil(n, THREADS), 1, 1]", "[div_ceil(n, THREADS * CLUSTER) * CLUSTER, 1, 1]")


def test_cluster_dims_from_a_template_parameter_the_symbol_gives(tmp_path: Path) -> None:
    """__cluster_dims__(C, 1, 1) with C a template parameter: each instance's template-id
    (scale<float, 2>, scale<float, 4>) gives C, checked against the instance's cluster; an
    integer parameter left out takes its default (MIN_BLOCKS in __launch_bounds__)."""
    (m,) = load_catalog(cluster_project(tmp_path, TEMPLATE_CLUSTER_SPEC, TEMPLATE_CLUSTER_KERNEL)).modules
    clusters = {k.name: k.cluster for k in m.kernels if k.instance_of is not None}
    assert clusters == {"scale_2": (2, 1, 1), "scale_4": (4, 1, 1)}, clusters
    decl, = global_declarations([("k.cu", TEMPLATE_CLUSTER_KERNEL)], "scale<float, 4>")
    assert decl.cluster == (4, 1, 1) and decl.launch_bounds == (256, 2)
    decl, = global_declarations([("k.cu", TEMPLATE_CLUSTER_KERNEL)], "scale<float, 4, 3>")
    assert decl.launch_bounds == (256, 3)


def test_cluster_dims_template_parameter_mismatch_and_missing_value(tmp_path: Path) -> None:
    wrong = TEMPLATE_CLUSTER_SPEC.replace("cluster: [CLUSTER, 1, 1]", "cluster: [2, 1, 1]")
    err = load_error(cluster_project(tmp_path, wrong, TEMPLATE_CLUSTER_KERNEL))
    assert "kernel 'scale_4' declares cluster [2, 1, 1], but 'scale<float,4>' at kernels/demo.cu:2 has " \
        "__cluster_dims__(4, 1, 1)" in str(err), err
    with pytest.raises(SourceScanError, match="template parameters given by the spec's template-id symbol"):
        global_declarations([("k.cu", TEMPLATE_CLUSTER_KERNEL)], "scale")  # no value for C


def test_grid_not_whole_clusters_names_the_launching_arguments(tmp_path: Path) -> None:
    # div_ceil(1024, 256) = 4 CTAs is one whole cluster of 4; the test-case sweep finds an n that is not
    spec = CLUSTER_SPEC.replace("div_ceil(n, THREADS * CX) * CX", "div_ceil(n, THREADS)")
    err = load_error(cluster_project(tmp_path, spec))
    assert "is not a whole number of clusters [4, 1, 1]" in str(err) and "round the grid up" in str(err), err


def test_scanner_reads_declarations_and_their_attributes() -> None:
    text = (
        "template <int D>\n__global__ void __cluster_dims__(2) k(int);\n"
        "template __global__ void k<64>(int);\n"
        "void k(float);\n"
        "__global__ void other(int) { k(1); }\n"
    )
    decls = global_declarations([("a.cu", text)], "k<64>")
    assert [(d.line, d.cluster) for d in decls] == [(2, (2, 1, 1)), (3, None)]
    assert global_declarations([("a.cu", text)], "ns::k<64>") == []  # k is declared at global scope
    with pytest.raises(SourceScanError, match="1 to 3 arguments"):
        global_declarations([("a.cu", "__global__ void __cluster_dims__(1, 1, 1, 1) k();")], "k")


# ------------------------------------------------------------------ list == generate


# Each spec loads clause by clause and passes the loader's own checks, but a check that used
# to run only during generation rejects it.
LIST_VS_GENERATE = [
    ("implied clause", sub("[n % 4 == 0]", "[n % 4 == 0, n % 2 == 0]"),
     "specs/demo.yaml:17: kernels.scale: cannot find arguments for which only '(n % 2) == 0' decides the outcome"
     " (where it does, at n = 1023, '(n % 4) == 0' fails too)"),
    # n == 0 decides first at n = 0 (tested so); n < 1 never decides
    ("clause never isolated", sub("    skip_if: [n == 0]\n", "    skip_if: [n == 0, n < 1]\n"),
     "specs/demo.yaml:16: kernels.scale: cannot find arguments for which only 'n < 1' decides the outcome"
     " (where it does, at n = 0, 'n == 0' holds too)"),
]


def test_skip_clause_that_a_later_clause_would_also_reject_is_tested_deciding_first(tmp_path: Path) -> None:
    """skip_if [n == 0] beside applies_if [n >= 64]: at n = 0 both would decide, and no argument
    set isolates the skip clause; the plan checks skip_if first, so n = 0 is its test case."""
    from kernelgen.cases import search_cases

    catalog = load_catalog(write_project(tmp_path, sub("[n % 4 == 0]", "[n % 4 == 0, n >= 64]")))
    module = catalog.modules[0]
    flips = {(kind, index): dict(env) for kind, index, env in search_cases(module, module.kernels[0],
                                                                          catalog.targets[0])[0]}
    assert flips[("skip", 0)]["n"] == 0
    assert flips[("applies", 1)]["n"] < 64 and flips[("applies", 1)]["n"] % 4 == 0


@pytest.mark.parametrize("case,spec,fragment", LIST_VS_GENERATE, ids=[c[0] for c in LIST_VS_GENERATE])
def test_list_rejects_what_generate_rejects_with_the_same_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str, spec: str,
    fragment: str,
) -> None:
    from kernelgen import loader
    from kernelgen.cli import main

    root = write_project(tmp_path, spec)
    # without the checks generation makes, the spec loads: this is what `list` used to accept
    monkeypatch.setattr(loader, "check_catalog", lambda catalog: None)
    assert load_catalog(root).modules[0].name == "demo"
    monkeypatch.undo()
    assert main(["--root", str(root), "list"]) == 2
    listed = capsys.readouterr()
    assert main(["--root", str(root), "generate"]) == 2
    generated = capsys.readouterr()
    assert listed.err == generated.err, (listed.err, generated.err)
    assert fragment in listed.err, listed.err
    assert listed.out == "" and len(listed.err.strip().splitlines()) == 1
    assert not (root / "generated").exists()


def test_list_and_generate_agree_on_cluster_grids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelgen.cli import main

    spec = CLUSTER_SPEC.replace("div_ceil(n, THREADS * CX) * CX", "div_ceil(n, THREADS)")
    root = cluster_project(tmp_path, spec)
    assert main(["--root", str(root), "list"]) == 2
    listed = capsys.readouterr().err
    assert main(["--root", str(root), "generate"]) == 2
    assert capsys.readouterr().err == listed
    assert "not a whole number of clusters" in listed


def test_build_fails_on_a_cluster_mismatch_before_compiling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelgen.cli import main

    root = cluster_project(tmp_path, CLUSTER_SPEC.replace("CX: 4", "CX: 2"))
    assert main(["--root", str(root), "build", "--build-dir", str(tmp_path / "build")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernelgen: error: specs/demo.yaml:16: kernels.scale.cluster: kernel 'scale' declares "
                          "cluster [2, 1, 1], but 'scale' at kernels/demo.cu:4 has __cluster_dims__(4, 1, 1)"), err
    assert not (tmp_path / "build").exists()
