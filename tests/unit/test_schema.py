"""The declared schema: its JSON Schema validates every spec, rejects malformed ones, and the
committed schema files and the docs' field reference are current."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kernelgen import schema
from kernelgen.yamlio import YMap, YNode, YSeq, load

jsonschema = pytest.importorskip("jsonschema")

REPO = Path(__file__).resolve().parents[2]
SPEC_DIRS = [REPO / "specs", *sorted((REPO / "tests" / "fixtures").glob("*/specs"))]
MODULE_SPECS = [p for d in SPEC_DIRS for p in sorted(d.glob("*.yaml")) if p.name not in ("targets.yaml", "project.yaml")]
TARGET_FILES = [d / "targets.yaml" for d in SPEC_DIRS]
PROJECT_FILES = sorted({*REPO.glob("tests/fixtures/*/specs/project.yaml"), *REPO.glob("examples/*/specs/project.yaml")})


def _jsonable(v: object) -> object:
    """A parsed YAML value as JSON has it: mapping keys are strings."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def _plain(n: YNode) -> object:
    """The value as kernelgen reads it (expressions split at commas rejoined)."""
    if isinstance(n, YMap):
        return {str(k.value): _plain(v) for k, v in n.items}
    if isinstance(n, YSeq):
        return [_plain(i) for i in n.items]
    return n.value


def _validator(which: str):
    s = schema.json_schema(which)
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def _both_readings(path: Path) -> list[object]:
    text = path.read_text()
    return [_jsonable(yaml.safe_load(text)), _plain(load(path.name, text.encode()))]


@pytest.mark.parametrize("path", MODULE_SPECS, ids=[p.relative_to(REPO).as_posix() for p in MODULE_SPECS])
def test_every_module_spec_is_valid(path: Path) -> None:
    v = _validator("module")
    for doc in _both_readings(path):  # as an editor's YAML parser reads it, and as kernelgen does
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]
        assert not errors, errors


@pytest.mark.parametrize("path", TARGET_FILES, ids=[p.relative_to(REPO).as_posix() for p in TARGET_FILES])
def test_every_target_registry_is_valid(path: Path) -> None:
    v = _validator("targets")
    for doc in _both_readings(path):
        assert not list(v.iter_errors(doc))
    assert not list(v.iter_errors({"version": 1, **_both_readings(path)[0]}))  # type: ignore[dict-item]


def _module() -> dict:
    return _jsonable(yaml.safe_load((REPO / "specs" / "rms_norm.yaml").read_text()))  # type: ignore[return-value]


def _kernel(doc: dict) -> dict:
    return next(iter(doc["kernels"].values()))


BAD_MODULES = [
    ("unknown top key", lambda d: d.update(kil_switch="X")),
    ("missing module", lambda d: d.pop("module")),
    ("version 2", lambda d: d.update(version=2)),
    ("module name upper case", lambda d: d.update(module="RmsNorm")),
    ("source not cuda", lambda d: d.update(sources=["kernels/x.py"])),
    ("source escapes", lambda d: d.update(sources=["../x.cu"])),
    ("kill switch lower case", lambda d: d.update(kill_switch="off")),
    ("unknown kernel key", lambda d: _kernel(d).update(gird=[1, 1, 1])),
    ("missing kernel key", lambda d: _kernel(d).pop("examples")),
    ("grid of two", lambda d: _kernel(d).update(grid=[1, 1])),
    ("bad type", lambda d: _kernel(d)["args"].update(n="uint*")),
    ("host pointer", lambda d: _kernel(d).update(host_args={"h": "const f32*"})),
    ("argument long form typo", lambda d: _kernel(d)["args"].update(x={"type": "const f32*", "sise": "n"})),
    ("no examples", lambda d: _kernel(d).update(examples=[])),
    ("fallback of one", lambda d: d.update(fallbacks={"any": ["a"]})),
    ("variant key not int", lambda d: _kernel(d).update(variants={"arg": "n", "symbols": {"x": "k"}})),
]


@pytest.mark.parametrize("case,change", BAD_MODULES, ids=[c[0] for c in BAD_MODULES])
def test_json_schema_rejects_malformed_specs(case: str, change) -> None:
    doc = _module()
    change(doc)
    assert list(_validator("module").iter_errors(doc)), case


def test_json_schema_rejects_malformed_targets() -> None:
    v = _validator("targets")
    good = {"hopper": {"arch": "sm_90a", "compute_capability": "9.0", "max_shared_mem_per_block_optin": 1}}
    assert not list(v.iter_errors(good))
    for bad in (
        {"hopper": {**good["hopper"], "arch": "90a"}},
        {"hopper": {**good["hopper"], "compute_capability": 9.0}},
        {"hopper": {**good["hopper"], "max_block_dims": [1, 2]}},
        {"hopper": {"arch": "sm_90a", "compute_capability": "9.0"}},
        {"Hopper": good["hopper"]},
        {"version": 2, **good},
        {},
    ):
        assert list(v.iter_errors(bad)), bad


def test_loader_key_checks_come_from_the_schema(tmp_path: Path) -> None:
    """A field added to the declaration is accepted by the loader's key check; one that is
    not declared is an unknown key with a did-you-mean from the declared names."""
    from kernelgen.errors import SpecError
    from kernelgen.loader import load_catalog
    from tests.unit.test_loader import GOOD, write_project

    root = write_project(tmp_path, GOOD.replace("kill_switch:", "kill_swich:"))
    with pytest.raises(SpecError, match="did you mean 'kill_switch'"):
        load_catalog(root)
    assert schema.MODULE.required() == {"module", "summary", "sources", "kernels"}
    assert "cluster" in schema.KERNEL.optional()


def test_every_field_is_described() -> None:
    for s in schema.STRUCTS:
        assert s.description
        for f in s.fields:
            assert f.description.endswith((".", ")")), (s.name, f.name)
            assert f.required or f.default != "", (s.name, f.name)


@pytest.mark.parametrize("which", ["module", "targets", "project"])
def test_committed_json_schema_is_current(which: str) -> None:
    path = REPO / "docs" / "schema" / f"{which}.schema.json"
    want = schema.json_schema_text(which)
    option = "" if which == "module" else f"--{which} "
    assert path.is_file() and path.read_text() == want, (
        f"{path.relative_to(REPO)} is stale; run: kernelgen schema {option}--out {path.relative_to(REPO)}"
    )


def test_doc_field_reference_is_current() -> None:
    path = REPO / "docs" / "spec-format.md"
    text = path.read_text()
    assert schema.update_doc(text) == text, "docs/spec-format.md's field reference is stale; run: kernelgen schema --docs"
    for s in schema.STRUCTS:
        for f in s.fields:
            assert f"| `{f.name}` |" in text


def test_cli_schema_prints_writes_and_updates_docs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelgen.cli import main

    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema.json_schema("module")
    out = tmp_path / "sub" / "t.json"
    assert main(["schema", "--targets", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == schema.json_schema("targets")
    assert main(["schema", "--project", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == schema.json_schema("project")
    doc = tmp_path / "spec.md"
    doc.write_text(f"# Spec\n\n{schema.DOC_BEGIN}\nSTALE TEXT\n{schema.DOC_END}\n\ntail\n")
    assert main(["schema", "--docs", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Spec\n") and text.endswith(f"{schema.DOC_END}\n\ntail\n") and "STALE TEXT" not in text
    assert schema.field_reference() in text
    capsys.readouterr()
    doc.write_text("no markers\n")
    assert main(["schema", "--docs", str(doc)]) == 2
    assert "markers" in capsys.readouterr().err


def test_yaml_language_server_modeline_is_a_comment(tmp_path: Path) -> None:
    """The editor's first line does not change what kernelgen reads."""
    from kernelgen.loader import load_catalog
    from tests.unit.test_loader import GOOD, write_project

    root = write_project(tmp_path, "# yaml-language-server: $schema=../docs/schema/module.schema.json\n" + GOOD)
    assert load_catalog(root).modules[0].kernels[0].name == "scale"


# ---------------------------------------------------------------- specs/project.yaml


def _scaffold_project_yaml() -> str:
    from kernelgen import scaffold

    return scaffold._files(["hopper"], "newops")["specs/project.yaml"].replace("@PKG@", "newops")


@pytest.mark.parametrize("path", PROJECT_FILES, ids=[p.relative_to(REPO).as_posix() for p in PROJECT_FILES])
def test_every_project_file_is_valid(path: Path) -> None:
    v = _validator("project")
    for doc in _both_readings(path):
        assert not list(v.iter_errors(doc))


def test_json_schema_of_project_yaml() -> None:
    v = _validator("project")
    assert not list(v.iter_errors(yaml.safe_load(_scaffold_project_yaml())))
    good = {"package": "myops", "namespace": "MyOps", "c_prefix": "mo", "library": "myops",
            "build": {"include_dirs": ["third_party/cutlass/include"], "defines": {"NDEBUG": True},
                      "nvcc_flags": ["--use_fast_math"]}}
    assert not list(v.iter_errors(good))
    for bad in ({}, {"package": "MyOps"}, {"package": "myops", "pakage": "x"}, {"package": "myops", "version": 2},
                {"package": "myops", "build": {"include_dir": ["x"]}}, {"package": "myops", "namespace": "a-b"}):
        assert list(v.iter_errors(bad)), bad


# ---------------------------------------------------------------- argument types and the long form


@pytest.mark.parametrize("spelling", ["u33", "f8", "i128", "bf32", "f32x3", "void", "fp8_e4m3", " u33 "])
def test_a_misspelt_scalar_type_is_not_taken_for_a_struct(spelling: str) -> None:
    doc = _module()
    _kernel(doc)["args"]["rows"] = spelling
    assert list(_validator("module").iter_errors(doc)), spelling
    field_type = schema.FIELD_TYPE.json["pattern"]
    assert not jsonschema.Draft202012Validator({"pattern": field_type}).is_valid(spelling.strip() + "[2]")


@pytest.mark.parametrize("spelling", ["u32", "bool", "bf16", " f32 ", "fa_window", "u32_pair", "f32x", "Params",
                                      "{T}", "const f32x4*", "u8x4*", "f32* const*"])
def test_scalar_struct_and_pointer_types_pass(spelling: str) -> None:
    doc = _module()
    _kernel(doc)["args"]["rows"] = spelling
    assert not list(_validator("module").iter_errors(doc)), spelling


def test_structs_may_not_be_named_like_scalar_types(tmp_path: Path) -> None:
    from kernelgen.errors import SpecError
    from kernelgen.loader import load_catalog
    from tests.unit.test_loader import GOOD, write_project

    v = jsonschema.Draft202012Validator({"pattern": schema.STRUCT_NAME.json["pattern"]})
    assert v.is_valid("fa_window") and not v.is_valid("u33") and not v.is_valid("f32")
    root = write_project(tmp_path, GOOD.replace("kernels:", "structs:\n  u33: {fields: {a: u32}}\nkernels:"))
    with pytest.raises(SpecError, match="struct 'u33' has a scalar type's spelling"):
        load_catalog(root)


LONG_FORM_TYPOS = [
    ("argument", lambda d: _kernel(d)["args"].update(x={"type": "const f32*", "sise": "n"}),
     ["args", "x", "sise"]),
    ("host argument", lambda d: _kernel(d).update(host_args={"h": {"type": "f32", "to_simbol": "g"}}),
     ["host_args", "h", "to_simbol"]),
    ("struct field", lambda d: d.update(structs={"s": {"fields": {"a": {"type": "u32", "cp": "b"}}}}),
     ["structs", "s", "fields", "a"]),
]


@pytest.mark.parametrize("case,change,path", LONG_FORM_TYPOS, ids=[c[0] for c in LONG_FORM_TYPOS])
def test_a_typo_in_a_long_form_is_reported_at_its_key(case: str, change, path: list[str]) -> None:
    """The short (string) and long (mapping) forms are told apart by type, so the long form's own
    error comes out, at the key, rather than "not valid under any of the given schemas"."""
    doc = _module()
    change(doc)
    errors = list(_validator("module").iter_errors(doc))
    assert errors, case
    for e in errors:
        assert "any of the given schemas" not in e.message, e.message
    where = [str(p) for p in jsonschema.exceptions.best_match(iter(errors)).absolute_path]
    assert where[-len(path):] == path or where[-len(path) - 1:-1] == path, where


def test_texts_match_behaviour() -> None:
    assert schema.BUILD["include_dirs"].kind.name == "list of directories"
    assert "host arguments" in schema.ARGUMENT["size"].description
    assert "`let` names" in schema.ARGUMENT["size"].description
    assert "an integer, `bool` or a float" in schema.ARGUMENT["to_symbol"].description
    assert not schema.KERNEL["host_args"].description.startswith("Integer arguments")
    assert "compute capability 9.0" in (schema.TARGET["max_cluster_size"].default or "")
