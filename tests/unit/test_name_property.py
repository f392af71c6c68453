"""Property: a spec whose names are drawn from the collision corpus is either refused with
the spec's file:line naming one of the drawn names, or generated; a name refused on its own
is refused in any company. A sample of such specs is built with nvcc in
tests/compile/test_name_corpus_build.py."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.namecorpus import DEFAULTS, KINDS, corpus, expected_refusal, spec_text, write_project

names_st = st.dictionaries(st.sampled_from(KINDS), st.sampled_from(corpus()), max_size=len(KINDS))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=names_st)
def test_random_corpus_names_are_refused_by_name_or_generated(names: dict[str, str]) -> None:
    root = Path(tempfile.mkdtemp(prefix="kg-names-"))
    try:
        try:
            spec = write_project(root, {})
            for old in (root / "specs").glob("*.yaml"):
                if old.name != "targets.yaml":
                    old.unlink()
            spec = root / "specs" / f"{names.get('module', DEFAULTS['module'])}.yaml"
            spec.write_text(spec_text(names))
        except OSError:
            return
        try:
            files = render_catalog(load_catalog(root))
        except SpecError as exc:
            text = str(exc)
            assert re.match(r"specs/[A-Za-z0-9_.]+:[1-9][0-9]*:", text), text
            assert any(n in text for n in names.values()), (names, text)
            return
        assert files
        refused_alone = [(k, n) for k, n in names.items() if expected_refusal(n, k)]
        assert not refused_alone, f"generated although {refused_alone} is refused on its own"
    finally:
        shutil.rmtree(root, ignore_errors=True)
