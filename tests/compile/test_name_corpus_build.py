"""A sample of the collision corpus built with nvcc: names the templates themselves emit (plan
locals, helper and table names, module attributes, types) used as every kind of spec name,
and random specs drawn as the property test draws them, compile for hopper and pass their
generated contract tests."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.conftest import cargo_tests_pass, contract_tests_pass, run_cli
from tests.namecorpus import KINDS, corpus, random_names, sample_modules, spec_text, write_batch

pytestmark = pytest.mark.build


def _random_modules(count: int, seed: int = 16) -> dict[str, str]:
    """``count`` specs from the property test's distribution that generate, each its own module."""
    rng = random.Random(seed)
    out: dict[str, str] = {}
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"kg-names-probe-{os.getpid()}"
    while len(out) < count:
        names = random_names(rng)
        names["module"] = f"probe_random{len(out)}"
        write_batch(probe, {names["module"]: spec_text(names)})
        try:
            render_catalog(load_catalog(probe))
        except SpecError:
            continue
        out[names["module"]] = spec_text(names)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("names") / "project"
    modules = sample_modules() | _random_modules(2)
    nargs = len(re.findall(r"^      \w+: u32$", modules["probe_argument"], re.M))
    write_batch(root, modules, nargs=nargs)
    res = run_cli("build", "--target", "hopper", "--no-torch-reader", cwd=root)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return root


def test_sample_covers_every_kind_and_internal_names() -> None:
    modules = sample_modules()
    assert {f"probe_{k}" for k in KINDS if k != "module"} <= set(modules)
    text = "\n".join(modules.values())
    assert len(corpus()) > 1500 and len(text) > 1000


def test_corpus_sample_passes_its_contract_tests(built: Path) -> None:
    contract_tests_pass(built, "hopper", least=10, timeout=600)


def test_macro_list_covers_the_headers_generated_code_includes() -> None:
    """src/kernelgen/macro_names.py holds every macro nvcc's preprocessor sees in those headers."""
    from tests.conftest import REPO

    res = subprocess.run([sys.executable, str(REPO / "scripts" / "macro_names.py"), "--check"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed (apt-get install cargo)")
def test_corpus_sample_rust_crate_tests_pass(built: Path, tmp_path: Path) -> None:
    res = cargo_tests_pass(built, "hopper", tmp_path / "t")
    assert "test result: ok" in res.stdout, res.stdout[-2000:]
