"""Every identifier the generator emits and every reserved word of its output languages, tried
as every kind of spec name: refused with the spec's file:line (exit 2 from the command line),
or generated. A sample of the generated ones is built and contract-tested in
tests/compile/test_name_corpus_build.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.conftest import run_cli
from tests.namecorpus import (
    DEFAULTS,
    KINDS,
    TARGETS,
    batch_modules,
    batches,
    corpus,
    emitted_identifiers,
    expected_refusal,
    spec_text,
    write_batch,
    write_project,
)

BATCH = 40


def test_corpus_comes_from_the_generated_code() -> None:
    ids = emitted_identifiers()
    # template internals, public names beside the spec's, types and macros the code spells
    assert {"kg_p", "kg_err", "kg_holds", "TARGET", "KILL_SWITCH", "plan_scale_f32", "int64_t", "INT64_MAX",
            "Outcome", "cudaGetLastError", "stream", "nullptr", "static_cast"} <= ids
    words = set(corpus())
    assert {"class", "lambda", "match", "fn", "crate", "Self", "EOF", "out", "p", "err", "x"} <= words
    assert len(words) > 1500


def _spec_error(root: Path) -> SpecError | None:
    try:
        render_catalog(load_catalog(root))
    except SpecError as exc:
        return exc
    return None


@pytest.mark.parametrize("kind", KINDS)
def test_each_refused_name_is_refused_at_its_line(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "p"
    write_project(root, {})
    assert _spec_error(root) is None
    refused = [n for n in corpus() if expected_refusal(n, kind)]
    wrong = []
    for name in refused:
        module = name if kind == "module" else DEFAULTS["module"]
        for old in (root / "specs").glob("*.yaml"):
            if old.name != "targets.yaml":
                old.unlink()
        (root / "specs" / "targets.yaml").write_text(TARGETS)  # module 'targets' replaces it
        spec = root / "specs" / f"{module}.yaml"
        try:
            spec.write_text(spec_text({kind: name}))
        except OSError:  # a name no file system takes
            continue
        err = _spec_error(root)
        text = str(err)
        if err is None or not re.match(rf"specs/{re.escape(spec.name)}:[1-9][0-9]*:", text) or name not in text:
            wrong.append((name, text))
    assert not wrong, f"{len(wrong)} of {len(refused)} names not refused by file:line: {wrong[:10]}"
    assert len(refused) > 300


@pytest.mark.parametrize("kind", KINDS)
def test_every_other_name_generates(kind: str, tmp_path: Path) -> None:
    accepted = [n for n in corpus() if not expected_refusal(n, kind)]
    assert "out" in accepted or kind == "module" or kind == "constant" or kind == "axis"
    failures = []
    for group in batches(kind, accepted, BATCH):
        root = tmp_path / "b"
        write_batch(root, batch_modules(kind, group), nargs=len(group) + 1)
        try:
            files = render_catalog(load_catalog(root))
        except SpecError as exc:
            failures.append(str(exc))
            continue
        text = "\n".join(v for k, v in files.items() if k.endswith((".cu", ".pyi")))
        emitted = [f"{n}_f32" if kind == "instance_name" else n for n in group]
        missing = [n for n in emitted if not re.search(rf"\b{re.escape(n)}\b", text)]
        if missing:
            failures.append(f"not in the generated C++ and stubs: {missing}")
    assert not failures, failures[:5]
    assert len(accepted) > 500


@pytest.mark.parametrize("kind,name", [
    ("module", "types"), ("kernel", "plan_probe_second"), ("argument", "INT64_MAX"), ("host_argument", "EOF"),
    ("constant", "KILL_SWITCH"), ("chain", "TARGET"), ("instance_name", "kg_probe"), ("axis", "size_t"),
])
def test_command_line_refuses_with_exit_2(kind: str, name: str, tmp_path: Path) -> None:
    root = tmp_path / "p"
    spec = write_project(root, {kind: name})
    res = run_cli("generate", cwd=root)
    assert res.returncode == 2, res.stdout + res.stderr
    assert re.match(rf"kernelgen: error: specs/{re.escape(spec.name)}:[1-9][0-9]*:", res.stderr), res.stderr
    assert name in res.stderr and "Traceback" not in res.stderr
    assert not (root / "generated" / "hopper").exists()
