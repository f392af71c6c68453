"""Mistakes a spec can make that only values show: a null under `extends` whose key is misspelt, a
size or a `let` that the first example cannot compute, a target's cluster limit above the
portable size, an axis used nowhere or negative, the fields that errors under an argument's long
form and a tensor map's box name, and the kill switch's example name."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import schema
from kernelgen.cli import main
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog, load_targets
from tests.unit.test_loader_mistakes import SOURCE, SPEC, TARGETS, project, refused, sub

BASE = sub("    examples: [{n: 1000}]\n", "    applies_if: [n > 4]\n    examples: [{n: 1000}]\n")
STRIDED_SOURCE = SOURCE + "__global__ void strided_kernel(const float* x, float* out, uint32_t n, uint32_t s) {}\n"


# ---------------------------------------------------------------- null under extends

@pytest.mark.parametrize("entry,fragment", [
    ("applies_iff: null", "kernels.b.applies_iff: unknown key (did you mean 'applies_if'?)"),
    ("skip_iff: null", "kernels.b.skip_iff: unknown key (did you mean 'skip_if'?)"),
    ("lett: null", "kernels.b.lett: unknown key (did you mean 'let'?)"),
    ("3: null", "kernels.b.3: unknown key (expected one of: "),
])
def test_a_misspelt_key_set_to_null_under_extends_is_an_unknown_key(tmp_path: Path, entry: str, fragment: str
                                                                    ) -> None:
    err = refused(project(tmp_path, BASE + f"  b: {{extends: add, summary: again., {entry}}}\n"))
    assert err.startswith("specs/m.yaml:13: ") and fragment in err, err


def test_null_under_extends_still_removes_an_inherited_key(tmp_path: Path) -> None:
    cat = load_catalog(project(tmp_path, BASE + "  b: {extends: add, summary: again., applies_if: null}\n"))
    a, b = cat.modules[0].kernels
    assert a.applies_if and not b.applies_if


# ---------------------------------------------------------------- the first example's values

def test_a_size_the_first_example_cannot_compute_is_refused_at_the_example(tmp_path: Path) -> None:
    err = refused(project(tmp_path, sub("out: f32*", "out: {type: f32*, size: n // 0}")))
    assert err.startswith("specs/m.yaml:11: kernels.add.examples[0]: the first example must launch, but the size of "
                          "'out' ('n // 0') cannot be computed for it: division by zero; the launchers refuse every "
                          "call with these arguments (computing the array sizes)"), err


def test_a_size_that_overflows_for_the_first_example_is_refused(tmp_path: Path) -> None:
    spec = sub("symbol: add_kernel", "symbol: strided_kernel", sub(
        "args: {x: const f32*, out: f32*, n: u32}",
        "args: {x: {type: const f32*, size: '(n - 1) * s + n'}, out: f32*, n: u32, s: u32}", sub(
            "examples: [{n: 1000}]", "examples: [{n: 4294967295, s: 4294967295}]")))
    spec = sub('grid: ["div_ceil(n, 256)", 1, 1]', "grid: [1, 1, 1]", spec)
    err = refused(project(tmp_path, spec, STRIDED_SOURCE))
    assert "kernels.add.examples[0]: the first example must launch, but the size of 'x' ('((n - 1) * s) + n') " \
           "cannot be computed for it: integer overflow" in err, err


@pytest.mark.parametrize("let,fragment", [
    ("{u: n // 0}", "kernels.add.let.u: 'u' cannot be computed for examples[0] on target 'gb10': division by zero"),
    ("{t: n, u: t << 70}", "kernels.add.let.u: 'u' cannot be computed for examples[0] on target 'gb10': shift count"),
    ("{u: device.sm_count * 9223372036854775807}", "kernels.add.let.u: 'u' cannot be computed for examples[0] on "
     "target 'gb10': integer overflow"),
])
def test_a_let_the_first_example_cannot_compute_is_refused_even_unused(tmp_path: Path, let: str, fragment: str
                                                                       ) -> None:
    err = refused(project(tmp_path, sub("    block: [256, 1, 1]\n", f"    block: [256, 1, 1]\n    let: {let}\n")))
    assert err.startswith("specs/m.yaml:11: " + fragment), err


# ---------------------------------------------------------------- cluster limits

def test_a_target_cluster_limit_above_the_portable_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(TARGETS.replace("  max_cluster_size: 8\n", "  max_cluster_size: 16\n", 1))
    with pytest.raises(SpecError) as info:
        load_targets(path, tmp_path)
    assert "gb10.max_cluster_size: max_cluster_size 16 is more than 8, the portable cluster size the launchers " \
           "use" in str(info.value), str(info.value)
    assert schema.json_schema("targets")["$defs"]["target"]["properties"]["max_cluster_size"]["maximum"] == 8
    path.write_text(TARGETS.replace("  max_cluster_size: 8\n", "  max_cluster_size: 0\n", 1))
    with pytest.raises(SpecError, match=r"gb10\.max_cluster_size: 0 is less than 1$"):
        load_targets(path, tmp_path)


# ---------------------------------------------------------------- instantiate axes

def test_an_integer_axis_used_nowhere_is_refused(tmp_path: Path) -> None:
    err = refused(project(tmp_path, sub("    symbol: add_kernel\n",
                                        "    symbol: add_kernel\n    instantiate: {TILE: [64, 128]}\n")))
    assert err.startswith("specs/m.yaml:7: kernels.add.instantiate.TILE: axis 'TILE' is used nowhere"), err


@pytest.mark.parametrize("where", ['grid: ["div_ceil(n, TILE)", 1, 1]', "applies_if: [n % TILE == 0]"])
def test_an_integer_axis_in_an_expression_is_used(tmp_path: Path, where: str) -> None:
    spec = sub("    symbol: add_kernel\n", "    symbol: add_kernel\n    instantiate: {TILE: [8, 4]}\n")
    spec = sub('grid: ["div_ceil(n, 256)", 1, 1]', where, spec) if where.startswith("grid") else \
        sub("    examples:", f"    {where}\n    examples:", spec)
    cat = load_catalog(project(tmp_path, spec))
    assert [k.name for k in cat.modules[0].kernels] == ["add_8", "add_4"]


def test_a_negative_integer_axis_value_gives_a_valid_name(tmp_path: Path) -> None:
    spec = sub("    symbol: add_kernel\n", "    symbol: add_kernel\n    instantiate: {SHIFT: [1, -1]}\n")
    spec = sub("    examples:", "    requires: [n + SHIFT >= 0]\n    examples:", spec)
    cat = load_catalog(project(tmp_path, spec))
    assert [k.name for k in cat.modules[0].kernels] == ["add_1", "add_m1"]
    named = load_catalog(project(tmp_path / "named", sub("    symbol: add_kernel\n", "    symbol: add_kernel\n"
                                                         "    instance_name: add_s{SHIFT}\n", spec)))
    assert [k.name for k in named.modules[0].kernels] == ["add_s1", "add_sm1"]


# ---------------------------------------------------------------- error fields

def test_an_expression_in_an_arguments_long_form_names_the_args_field(tmp_path: Path) -> None:
    err = refused(project(tmp_path, sub("out: f32*", "out: {type: f32*, size: nn}")))
    assert "kernels.add.args.out.size: undefined name 'nn'" in err, err


@pytest.mark.parametrize("box,fragment", [
    ("[512]", "kernels.add.tensor_maps.x_map.box[0]: box entry 0 is 512"),
    ("[2]", "kernels.add.tensor_maps.x_map.box[0]: the box's innermost entry is 8 bytes"),
    ("['1 // 0']", "kernels.add.tensor_maps.x_map.box[0]: cannot evaluate box entry 0: division by zero"),
    ("[4, 4]", "kernels.add.tensor_maps.x_map.box: the box has 2 entries but 'dims' has 1"),
])
def test_a_tensor_map_box_error_names_the_box(tmp_path: Path, box: str, fragment: str) -> None:
    spec = sub("    grid:", f"    tensor_maps:\n      x_map: {{array: x, dims: [n], box: {box}}}\n    grid:")
    err = refused(project(tmp_path, spec))
    assert fragment in err, err


# ---------------------------------------------------------------- the kill switch's example

@pytest.mark.parametrize("switch,fragment", [
    ("no-m", "use upper-case letters, digits and '_', e.g. MYPKG_NO_M"),
    ("PATH", "name it after the project and the module, e.g. MYPKG_NO_M"),
])
def test_the_kill_switch_example_is_the_projects_own(tmp_path: Path, switch: str, fragment: str) -> None:
    root = project(tmp_path, sub("sources: [kernels/m.cu]\n", f"sources: [kernels/m.cu]\nkill_switch: {switch}\n"))
    err = refused(root)
    assert "<PACKAGE>_NO_M" in err, err
    (root / "specs" / "project.yaml").write_text("package: mypkg\n")
    err = refused(root)
    assert fragment in err and "METRALE" not in err, err


def test_kernelgen_plan_says_the_array_sizes(tmp_path: Path, capsys) -> None:
    root = project(tmp_path, sub("args: {x: const f32*, out: f32*, n: u32}",
                                 "args: {x: {type: const f32*, size: n}, out: {type: f32*, size: 2 * n}, n: u32}"))
    assert main(["--root", str(root), "plan", "m.add", "n=1000", "-t", "hopper"]) == 0
    assert "    sizes: x = 1000, out = 2000\n" in capsys.readouterr().out


def test_kernelgen_plan_reports_a_size_that_cannot_be_computed_as_plan_does(tmp_path: Path, capsys) -> None:
    """The plan launches (as plan() says, whose sizes are then None), and the size says the error a
    call raises."""
    spec = sub("symbol: add_kernel", "symbol: strided_kernel", sub(
        "args: {x: const f32*, out: f32*, n: u32}",
        "args: {x: {type: const f32*, size: '(n - 1) * s + n'}, out: f32*, n: u32, s: u32}", sub(
            "examples: [{n: 1000}]", "examples: [{n: 1000, s: 1000}]")))
    root = project(tmp_path, sub('grid: ["div_ceil(n, 256)", 1, 1]', "grid: [1, 1, 1]", spec), STRIDED_SOURCE)
    assert main(["--root", str(root), "plan", "m.add", "n=4294967295", "s=4294967295", "-t", "hopper"]) == 0
    out = capsys.readouterr().out
    assert "  hopper (132 SMs): launched  grid [1, 1, 1]" in out and "    sizes: x = (invalid arguments: integer " \
           "overflow while computing the launch, in size of x '((n - 1) * s) + n': a call raises ArgumentError)\n" \
           in out, out
    assert main(["--root", str(root), "plan", "m.add", "n=4294967295", "s=4294967295,1", "-t", "hopper"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 4294967295")]
    assert "a call raises ArgumentError" in rows[0] and rows[1].endswith("| x=8589934589 |"), rows


TYPED_SOURCE = SOURCE + "template <class T> __global__ void typed_kernel(const T* x, T* out, uint32_t n) {}\n"
TYPED = SPEC + """\
  typed:
    symbol: typed_kernel<{T}>
    summary: typed.
    instantiate: {T: [f32, bf16]}
    args: {x: 'const {T}*', out: '{T}*', n: u32}
    grid: [n, 1, 1]
    block: [32, 1, 1]
    examples: [{n: 4}]
"""


@pytest.mark.parametrize("name,fragment", [
    ("m.typed", "plan of m.typed() takes scalar arguments only; got pointer 'x' (the axis T chooses its element "
     "type: write T=bf16)"),
    ("m.typed_f32", "plan of m.typed_f32() takes scalar arguments only; got pointer 'x' (its element type is this "
     "instance's; to choose it, plan the dispatcher: kernelgen plan m.typed T=bf16 ...)"),
])
def test_kernelgen_plan_of_an_array_given_a_type_names_the_type_axis(tmp_path: Path, capsys, name: str,
                                                                    fragment: str) -> None:
    root = project(tmp_path, TYPED, TYPED_SOURCE)
    assert main(["--root", str(root), "plan", name, "x=bf16", "n=4"]) == 2
    assert fragment in capsys.readouterr().err


# ---------------------------------------------------------------- generated names

@pytest.mark.parametrize("prefix,what", [("plan_", "the plan function"), ("sizes_", "the C++ sizes function")])
def test_a_kernel_named_like_another_launchers_plan_or_sizes_function_is_refused(tmp_path: Path, prefix: str,
                                                                                 what: str) -> None:
    err = refused(project(tmp_path, BASE + f"  {prefix}add: {{extends: add, summary: again.}}\n"))
    assert f"{what} of kernel 'add' is named '{prefix}add' in the generated module, which is also kernel " \
           f"'{prefix}add'" in err, err


# ---------------------------------------------------------------- a bool argument's example values

BOOL_SOURCE = SOURCE + "__global__ void flag_kernel(const float* x, float* out, uint32_t n, bool f) {}\n"
BOOL_SPEC = sub("symbol: add_kernel", "symbol: flag_kernel",
                sub("args: {x: const f32*, out: f32*, n: u32}", "args: {x: const f32*, out: f32*, n: u32, f: bool}"))


@pytest.mark.parametrize("value", ["true", "false", "0", "1"])
def test_a_bool_example_value_may_be_a_boolean_or_0_or_1(tmp_path: Path, value: str) -> None:
    cat = load_catalog(project(tmp_path, sub("examples: [{n: 1000}]", f"examples: [{{n: 1000, f: {value}}}]",
                                             BOOL_SPEC), BOOL_SOURCE))
    assert dict(cat.modules[0].kernels[0].examples[0])["f"] == {"true": 1, "false": 0, "0": 0, "1": 1}[value]


@pytest.mark.parametrize("value,got", [("~", "null"), ("'yes'", "string 'yes'"), ("1.0", "number 1.0"),
                                       ("[1]", "a list")])
def test_a_bool_example_value_of_another_kind_is_named(tmp_path: Path, value: str, got: str) -> None:
    err = refused(project(tmp_path, sub("examples: [{n: 1000}]", f"examples: [{{n: 1000, f: {value}}}]", BOOL_SPEC),
                          BOOL_SOURCE))
    assert f"'f' is a bool; expected true, false, 0 or 1, got {got}" in err, err


# ---------------------------------------------------------------- let over let, written out

def _let_chain(levels: int) -> str:
    """A let of ``levels`` names, each adding 31 levels (a chain of 31 additions) to the one before."""
    def chain(v: str) -> str:
        return " + ".join([v] + ["1"] * 31)
    lines = ["    let:", f"      l0: '{chain('n')}'"]
    lines += [f"      l{i}: '{chain(f'l{i - 1}')}'" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_a_let_nested_too_deep_once_written_out_is_refused_at_its_name(tmp_path: Path) -> None:
    spec = sub("    examples: [{n: 1000}]\n", _let_chain(5) + "    examples: [{n: 1000}]\n")
    err = refused(project(tmp_path, spec))
    assert "kernels.add.let.l4: 'l4' with the let names it uses written out is nested 156 levels deep, more than " \
           "128" in err, err


def test_an_expression_nested_too_deep_once_its_lets_are_written_out_is_refused_there(tmp_path: Path) -> None:
    spec = sub("    examples: [{n: 1000}]\n", _let_chain(4) + "    examples: [{n: 1000}]\n")
    spec = sub('grid: ["div_ceil(n, 256)", 1, 1]', 'grid: ["div_ceil(n, 256) + l3 * 2 * 2 * 2", 1, 1]', spec)
    err = refused(project(tmp_path, spec))
    assert "kernels.add.grid[0]: the expression with the let names it uses written out is nested" in err, err


def _let_doubling(levels: int) -> str:
    """A let of ``levels`` names, each using the one before twice: written out, each level doubles."""
    lines = ["    let:", "      l0: 'n + 1'"]
    lines += [f"      l{i}: 'max(l{i - 1}, l{i - 1})'" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_a_let_too_large_once_written_out_is_refused_at_its_name_and_quickly(tmp_path: Path) -> None:
    import time
    spec = sub("    examples: [{n: 1000}]\n", _let_doubling(40) + "    examples: [{n: 1000}]\n", BASE)
    spec = sub("applies_if: [n > 4]", "applies_if: [l39 > 5]", spec)
    start = time.monotonic()
    err = refused(project(tmp_path, spec))
    assert time.monotonic() - start < 10
    assert "kernels.add.let.l11: 'l11' with the let names it uses written out has 8191 nodes (names, literals, " \
           "operators and calls), more than 4096" in err, err


def test_a_let_used_twice_within_the_node_limit_is_accepted(tmp_path: Path) -> None:
    spec = sub("    examples: [{n: 1000}]\n", _let_doubling(8) + "    examples: [{n: 1000}]\n", BASE)
    spec = sub("applies_if: [n > 4]", "applies_if: [l7 > 4]", spec)
    kernel = load_catalog(project(tmp_path, spec)).modules[0].kernels[0]
    assert kernel.applies_if


def test_an_expression_too_large_once_its_lets_are_written_out_is_refused_there(tmp_path: Path) -> None:
    spec = sub("    examples: [{n: 1000}]\n", _let_doubling(10) + "    examples: [{n: 1000}]\n", BASE)
    spec = sub("applies_if: [n > 4]", "applies_if: ['l9 + l9 + l9 > 4']", spec)
    err = refused(project(tmp_path, spec))
    assert "kernels.add.applies_if[0]: the expression with the let names it uses written out has 6145 nodes" in err, err
