"""Spec loading: every malformed spec gives one SpecError naming file:line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import expr
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog

TARGETS = (Path(__file__).resolve().parents[1] / "fixtures" / "project" / "specs" / "targets.yaml").read_text()

GOOD = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
kill_switch: DEMO_OFF
constants: {THREADS: 256}
kernels:
  scale:
    summary: Scales.
    args:
      x: {type: const f32*, size: n}
      out: f32*
      n: u32
      alpha: f32
    grid: [div_ceil(n, THREADS), 1, 1]
    block: [THREADS, 1, 1]
    skip_if: [n == 0]
    applies_if: [n % 4 == 0]
    examples:
      - {n: 1024}
"""


def write_project(tmp_path: Path, spec: str, name: str = "demo.yaml") -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "demo.cu").write_text("// demo\n")
    (tmp_path / "specs" / "targets.yaml").write_text(TARGETS)
    (tmp_path / "specs" / name).write_text(spec)
    return tmp_path


def test_good_spec_loads(tmp_path: Path) -> None:
    cat = load_catalog(write_project(tmp_path, GOOD))
    (m,) = cat.modules
    k = m.kernels[0]
    assert (m.name, m.kill_switch, k.name, k.symbol) == ("demo", "DEMO_OFF", "scale", "scale")
    assert [a.spelling for a in k.args] == ["const f32*", "f32*", "u32", "f32"]
    assert [c.text for c in k.applies_if] == ["(n % 4) == 0"]


def sub(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def test_expression_over_several_lines(tmp_path: Path) -> None:
    """A folded block scalar keeps the line breaks of its more-indented lines: the expression
    reads them as spaces."""
    spec = sub("    block: [THREADS, 1, 1]\n", "    block: [THREADS, 1, 1]\n    shared_mem: >-\n"
               "      max(4 * THREADS,\n          div_ceil(n, 64) * 16)\n")
    k = load_catalog(write_project(tmp_path, spec)).modules[0].kernels[0]
    assert expr.to_text(k.shared_mem) == "max(4 * THREADS, div_ceil(n, 64) * 16)"


# (case id, spec text, expected line, fragment of the message)
BAD = [
    ("duplicate key", sub("  scale:\n", "  scale:\n    summary: one\n"), 9, "duplicate key"),
    ("python tag", sub("summary: A demo module.", "summary: !!python/object:os.system ls"), 2, "tag"),
    ("custom tag", sub("summary: A demo module.", "summary: !shell ls"), 2, "tag"),
    ("yaml 1.1 bool", sub("A demo module.", "no"), 2, "boolean in YAML 1.1"),
    ("yaml 1.1 on", sub("kill_switch: DEMO_OFF", "kill_switch: on"), 4, "boolean in YAML 1.1"),
    ("hex literal", sub("{THREADS: 256}", "{THREADS: 0x100}"), 5, "not a plain decimal integer"),
    ("underscore literal", sub("{n: 1024}", "{n: 1_024}"), 19, "not a plain decimal integer"),
    ("leading zero", sub("{n: 1024}", "{n: 01024}"), 19, "not a plain decimal integer"),
    ("unknown top key", sub("kill_switch: DEMO_OFF", "kil_switch: DEMO_OFF"), 4, "did you mean 'kill_switch'"),
    ("unknown kernel key", sub("    grid:", "    gird: [1, 1, 1]\n    grid:"), 14, "did you mean 'grid'"),
    ("missing key", sub("    block: [THREADS, 1, 1]\n", ""), 8, "missing required key 'block'"),
    ("missing keys at once", sub("    summary: Scales.\n", "").replace("    examples:\n      - {n: 1024}\n", ""), 8,
     "missing required keys 'examples', 'summary' (a list of argument values for which the kernel launches"),
    ("wrong type list", sub("sources: [kernels/demo.cu]", "sources: kernels/demo.cu"), 3, "expected a list"),
    ("wrong type int", sub("{THREADS: 256}", "{THREADS: [256]}"), 5, "expected an expression"),
    ("unknown scalar type", sub("      n: u32", "      n: uint"), 12, "unknown scalar type 'uint'"),
    ("unknown elem type", sub("      out: f32*", "      out: float*"), 11,
     "unknown element type 'float' (did you mean 'f32'? (kernelgen's name for C++ float))"),
    ("c spelling of a scalar", sub("      n: u32", "      n: int"), 12,
     "unknown scalar type 'int' (did you mean 'i32'? (kernelgen's name for C++ int))"),
    ("cuda spelling of an element", sub("      out: f32*", "      out: __nv_bfloat16*"), 11,
     "did you mean 'bf16'? (kernelgen's name for C++ __nv_bfloat16)"),
    ("const scalar", sub("      n: u32", "      n: const u32"), 12, "'const' applies only to pointers"),
    ("keyword arg name", sub("      alpha: f32", "      class: f32"), 13, "reserved"),
    ("python keyword arg", sub("      alpha: f32", "      lambda: f32"), 13, "reserved"),
    ("c++ keyword kernel", sub("  scale:", "  new:"), 7, "reserved"),
    ("arg collides with constant", sub("      alpha: f32", "      THREADS: u32"), 13,
     "argument 'THREADS' is also a module constant (line 5)"),
    ("reserved stream", sub("      alpha: f32", "      stream: u32"), 13, "reserved"),
    ("bad name", sub("  scale:", "  2scale:"), 7, "not a valid kernel name"),
    ("undefined name", sub("[n % 4 == 0]", "[m % 4 == 0]"), 17, "undefined name 'm'"),
    ("float in expression", sub("[n % 4 == 0]", "[alpha > 0]"), 17, "'alpha' is a float"),
    ("pointer in expression", sub("[n % 4 == 0]", "[x > 0]"), 17, "'x' is a pointer"),
    ("unknown function", sub("div_ceil(n, THREADS)", "ceil(n, THREADS)"), 14, "unknown function 'ceil'"),
    ("constant division by zero", sub("{THREADS: 256}", "{THREADS: 256, BAD: 1 // 0}"), 5, "division by zero"),
    ("constant before its constant", sub("{THREADS: 256}", "{A: B * 2, B: 128, THREADS: 256}"), 5,
     "undefined name 'B' (a constant may use only the constants above it; move B above this one)"),
    ("float division", sub("[n % 4 == 0]", "[n / 4 == 0]"), 17, "operator '/' is not allowed (use // for integer"),
    ("kernel kill switch", sub("    summary: Scales.", "    summary: Scales.\n    kill_switch: X_OFF"), 9,
     "a kill switch is the module's"),
    ("extends itself", sub("  scale:\n", "  scale:\n    extends: scale\n"), 8, "kernel 'scale' extends itself"),
    ("grid of two", sub("[div_ceil(n, THREADS), 1, 1]", "[div_ceil(n, THREADS), 1]"), 14, "expected 3 entries"),
    ("block over limit", sub("{THREADS: 256}", "{THREADS: 2048}"), 15, "outside 1..1024"),
    ("shared mem over gb10 limit", sub("    skip_if:", "    shared_mem: 101377\n    skip_if:"), 16, "101376-byte opt-in limit of target 'gb10'"),
    ("bad env name", sub("kill_switch: DEMO_OFF", "kill_switch: 'DEMO OFF; rm -rf'"), 4, "not a valid environment variable name"),
    ("kernelgen's own variable", sub("kill_switch: DEMO_OFF", "kill_switch: KERNELGEN_NO_PDL"), 4,
     "kernelgen's own variables"),
    ("kernelgen's prefix", sub("kill_switch: DEMO_OFF", "kill_switch: KERNELGEN_CHECKS"), 4, "(KERNELGEN_*, such as"),
    ("unknown target", sub("    summary: Scales.", "    summary: Scales.\n    targets: [ampere]"), 9, "unknown target 'ampere'"),
    ("missing source", sub("kernels/demo.cu", "kernels/nope.cu"), 3, "does not exist"),
    ("source escapes", sub("kernels/demo.cu", "../demo.cu"), 3, "not a valid source path: '..' leaves"),
    ("source with a space", sub("kernels/demo.cu", "'kernels/my demo.cu'"), 3, "it has a space; source paths take"),
    ("source from ./", sub("kernels/demo.cu", "./kernels/demo.cu"), 3, "without the leading './'"),
    ("absolute source", sub("kernels/demo.cu", "/tmp/demo.cu"), 3, "it is an absolute path"),
    ("example fails clause", sub("{n: 1024}", "{n: 1022}"), 19, "must launch"),
    ("example out of range", sub("{n: 1024}", "{n: -4}"), 19, "does not fit u32"),
    ("fallback to unknown kernel", GOOD + "fallbacks:\n  any: [scale, nope]\n", 21, "no kernel 'nope'"),
    ("fallback of one", GOOD + "fallbacks:\n  any: [scale]\n", 21, "at least two kernels"),
    ("module name vs file", sub("module: demo", "module: other"), 1, "must be defined in other.yaml"),
    ("control char in summary", sub("A demo module.", '"A demo\\u2028module."'), 2, "U+2028"),
    ("statement break in grid", sub("[div_ceil(n, THREADS), 1, 1]", "['n); system(\"x\"); (1', 1, 1]"), 14, "not allowed"),
    ("jinja in grid", sub("[div_ceil(n, THREADS), 1, 1]", "['{{ n }}', 1, 1]"), 14, "not allowed"),
    ("symbol injection", sub("    summary: Scales.", "    summary: Scales.\n    symbol: 'k(); int x'"), 9, "not a C++ function name"),
    ("anchor alias", sub("    block: [THREADS, 1, 1]", "    block: &b [THREADS, 1, 1]\n    host_args: *b"), 15, "aliases"),
    ("anchor alone", sub("    block: [THREADS, 1, 1]", "    block: &b [THREADS, 1, 1]"), 15, "anchors and aliases"),
    ("explicit str tag", sub("    block: [THREADS, 1, 1]", "    block: [!!str 256, 1, 1]"), 15, "tag '!!str'"),
    ("explicit map tag", sub("    block: [THREADS, 1, 1]", "    block: [THREADS, 1, 1]\n    launch: !!map {}"), 16,
     "tag '!!map'"),
    ("not yaml", "module: [demo\n", 2, "YAML syntax error"),
    ("tab indentation", GOOD.replace("    summary: Scales.", "\tsummary: Scales."), 8, "YAML syntax error"),
    ("yaml 1.1 yes", sub("A demo module.", "yes"), 2, "boolean in YAML 1.1"),
    ("yaml 1.1 off", sub("{n: 1024}", "{n: off}"), 19, "boolean in YAML 1.1"),
    ("octal literal", sub("{THREADS: 256}", "{THREADS: 0o400}"), 5, "not a plain decimal integer"),
    ("float literal", sub("{n: 1024}", "{n: 1e3}"), 19, "not written as a plain decimal number"),
    ("unsigned exponent", sub("{n: 1024}", "{n: 1.0e3}"), 19, "1.0e+3"),
    ("bare point", sub("{n: 1024}", "{n: .5}"), 19, "not written as a plain decimal number"),
    ("sexagesimal", sub("{n: 1024}", "{n: 1:30}"), 19, "not a plain decimal integer"),
    ("number as text", sub("summary: A demo module.", "summary: 12"), 2, "expected text, got integer 12"),
    ("list as name", sub("module: demo", "module: [demo]"), 1, "expected a string, got a list"),
    ("missing module key", sub("module: demo\n", ""), 1, "missing required key 'module'"),
    ("missing kernels", GOOD.split("kernels:")[0], 1, "missing required key 'kernels'"),
    ("empty kernels", GOOD.split("kernels:")[0] + "kernels: {}\n", 6, "expected a mapping of kernel names"),
    ("kernel not a mapping", GOOD.split("kernels:")[0] + "kernels:\n  scale: 3\n", 7, "expected a mapping"),
    ("args not a mapping", sub("      x: {type: const f32*, size: n}\n      out: f32*\n      n: u32\n      alpha: f32\n",
                               "      - x\n"), 10, "expected a mapping of argument names"),
    ("duplicate arg", sub("      alpha: f32", "      alpha: f32\n      n: u32"), 14,
     "kernels.scale.args.n: duplicate key (first defined at line 12)"),
    ("float literal names its field", sub("{n: 1024}", "{n: 1e3}"), 19, "kernels.scale.examples[0].n: '1e3' is not"),
    ("host arg pointer", sub("    grid:", "    host_args: {h: const f32*}\n    grid:"), 14, "host arguments must be scalars"),
    ("host arg float", sub("    grid:", "    host_args: {h: f32}\n    grid:"), 14, "host arguments must be integers"),
    ("size on scalar", sub("      n: u32", "      n: {type: u32, size: 4}"), 12, "apply only to pointers"),
    ("contiguous not bool", sub("{type: const f32*, size: n}", "{type: const f32*, contiguous: 1}"), 10, "expected true or false"),
    ("predicate not boolean", sub("[n % 4 == 0]", "[n % 4]"), 17, "boolean expression is needed"),
    ("geometry not integer", sub("[THREADS, 1, 1]", "[THREADS > 1, 1, 1]"), 15, "integer expression is needed"),
    ("negative shared mem", sub("    skip_if:", "    shared_mem: -1\n    skip_if:"), 16,
     "shared_mem is -1 bytes for examples[0] (n=1024): dynamic shared memory cannot be negative"),
    ("block zero", sub("[THREADS, 1, 1]", "[THREADS, 0, 1]"), 15, "outside 1..1024"),
    ("block z over 64", sub("[THREADS, 1, 1]", "[4, 1, 65]"), 15, "outside 1..64"),
    ("threads over 1024", sub("[THREADS, 1, 1]", "[512, 4, 1]"), 15, "threads per block exceeds 1024"),
    ("variant arg unknown", sub("    grid:", "    variants: {arg: m, symbols: {1: a}}\n    grid:"), 14, "'m' is not an integer argument"),
    ("variant key not int", sub("    grid:", "    variants: {arg: n, symbols: {x: a}}\n    grid:"), 14, "variant keys are integer values"),
    ("example unknown arg", sub("{n: 1024}", "{n: 1024, m: 3}"), 19, "'m' is not an integer argument"),
    ("example missing arg", sub("{n: 1024}", "{}"), 19, "must give every integer argument"),
    ("no examples", sub("    examples:\n      - {n: 1024}", "    examples: []"), 18, "at least one example"),
    ("kernel named like constant", sub("{THREADS: 256}", "{THREADS: 256, scale: 1}"), 5,
     "constant 'scale' has the name of kernel 'scale' (line 7)"),
    ("fallback named like kernel", GOOD + "fallbacks:\n  scale: [scale, scale]\n", 21, "has the name of a kernel"),
    ("fallback unknown module", GOOD + "fallbacks:\n  any: [scale, other.k]\n", 21, "unknown module 'other'"),
    ("source not cuda", sub("kernels/demo.cu", "kernels/demo.py"), 3, "not a CUDA source"),
    ("kill switch lower case", sub("kill_switch: DEMO_OFF", "kill_switch: demo_off"), 4, "not a valid environment variable name"),
    ("divide in grid", sub("div_ceil(n, THREADS)", "n / THREADS"), 14, "use // for integer division"),
    ("empty file", "", 0, "empty"),
]


@pytest.mark.parametrize("case,spec,line,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_spec_is_one_located_error(tmp_path: Path, case: str, spec: str, line: int, fragment: str) -> None:
    root = write_project(tmp_path, spec)
    with pytest.raises(SpecError) as info:
        load_catalog(root)
    msg = str(info.value)
    assert fragment in msg, msg
    assert msg.startswith("specs/demo.yaml"), msg
    if line:
        assert info.value.loc.line == line, msg


def test_flow_lists_and_maps_keep_expressions_with_commas(tmp_path: Path) -> None:
    spec = sub("x: {type: const f32*, size: n}", "x: {type: const f32*, size: max(n, 4) * 2}")
    cat = load_catalog(write_project(tmp_path, spec))
    k = cat.modules[0].kernels[0]
    from kernelgen.expr import to_text

    assert to_text(k.args[0].size) == "max(n, 4) * 2"  # type: ignore[arg-type]
    assert to_text(k.grid[0]) == "div_ceil(n, THREADS)"


def test_cli_reports_bad_spec_without_traceback(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    root = write_project(tmp_path, sub("[n % 4 == 0]", "[m % 4 == 0]"))
    res = run_cli("generate", cwd=root)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "specs/demo.yaml:17: kernels.scale.applies_if[0]: undefined name 'm'" in res.stderr
    assert not (root / "generated" / "gb10").exists()


@pytest.mark.parametrize("case,spec,line,fragment", BAD, ids=[b[0] for b in BAD])
def test_cli_answers_every_bad_spec_with_one_message_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, spec: str, line: int, fragment: str
) -> None:
    from kernelgen.cli import main

    root = write_project(tmp_path, spec)
    assert main(["--root", str(root), "generate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernelgen: error: specs/demo.yaml"), err
    assert fragment in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (root / "generated").exists() or not any((root / "generated").rglob("*.cu"))


def test_doc_is_rendered_after_the_summary(tmp_path: Path) -> None:
    """A spec's doc (module and kernel) reaches the Python docstrings and the .pyi stub."""
    from kernelgen.emit import render_catalog

    spec = GOOD.replace("summary: A demo module.\n", "summary: A demo module.\ndoc: Module notes, line one.\n")
    spec = spec.replace("    summary: Scales.\n", "    summary: Scales.\n    doc: Kernel notes about alignment.\n")
    cat = load_catalog(write_project(tmp_path, spec))
    (m,) = cat.modules
    assert m.doc == "Module notes, line one." and m.kernels[0].doc == "Kernel notes about alignment."
    files = render_catalog(cat)
    pyi = files["generated/hopper/python/demo.pyi"]
    assert '"""A demo module.\n\nModule notes, line one."""' in pyi
    assert "Scales.\n\nKernel notes about alignment." in pyi
    binding = files["generated/hopper/python/demo.cpp"]
    assert "Module notes, line one." in binding and "Kernel notes about alignment." in binding


def test_specs_in_subfolders_are_modules(tmp_path: Path) -> None:
    write_project(tmp_path, GOOD)
    nested = tmp_path / "specs" / "attention" / "paged"
    nested.mkdir(parents=True)
    (nested / "other.yaml").write_text(GOOD.replace("module: demo", "module: other").replace("DEMO_OFF", "OTHER_OFF"))
    hidden = tmp_path / "specs" / ".drafts"
    hidden.mkdir()
    (hidden / "broken.yaml").write_text("not: a spec\n")
    catalog = load_catalog(tmp_path)
    assert [(m.name, m.path) for m in catalog.modules] == [
        ("demo", "specs/demo.yaml"), ("other", "specs/attention/paged/other.yaml")]


@pytest.mark.parametrize(("path", "text", "message"), [
    ("attention/demo.yaml", GOOD, "specs/demo.yaml:1: module: module 'demo' is also defined in "
                                  "specs/attention/demo.yaml"),
    ("attention/other.yml", GOOD, "specs/attention/other.yml: spec files must end in .yaml, not .yml"),
    ("demo.yml", GOOD, "specs/demo.yml: spec files must end in .yaml, not .yml, and demo.yaml is beside it "
                       "(remove or rename one of the two"),
    ("attention/targets.yaml", TARGETS, "specs/attention/targets.yaml: targets.yaml belongs directly in specs/, "
                                        "not in a subfolder"),
    ("attention/wrong.yaml", GOOD, "specs/attention/wrong.yaml:1: module: module 'demo' must be defined in "
                                   "demo.yaml, not wrong.yaml"),
])
def test_bad_nested_specs(tmp_path: Path, path: str, text: str, message: str) -> None:
    write_project(tmp_path, GOOD)
    target = tmp_path / "specs" / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    with pytest.raises(SpecError) as info:
        load_catalog(tmp_path)
    assert str(info.value).startswith(message), str(info.value)


def test_an_example_a_device_clause_turns_away_is_not_held_to_the_limits(tmp_path: Path) -> None:
    """shared_mem that outgrows the device for some examples, with an applies_if naming the device
    so that a chain falls back: the example the clause turns away (on the target's table) loads; a
    clause on host values alone still lets the limit check refuse an example it admits."""
    spec = sub("    applies_if: [n % 4 == 0]\n    examples:\n      - {n: 1024}\n",
               "    shared_mem: n * 4\n    applies_if: [n % 4 == 0, n * 4 <= device.max_shared_mem_optin]\n"
               "    examples:\n      - {n: 1024}\n      - {n: 100000}\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    load_catalog(write_project(tmp_path / "a", spec))
    bad = spec.replace("n * 4 <= device.max_shared_mem_optin", "n * 4 <= 1000000")
    with pytest.raises(SpecError, match="400000 bytes of dynamic shared memory exceeds"):
        load_catalog(write_project(tmp_path / "b", bad))
