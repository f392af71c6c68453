"""Property tests: whatever text a spec file holds, the loader answers with a SpecError (or a
valid module), never another exception."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgen.errors import SpecError
from kernelgen.loader import load_module, load_targets
from tests.unit.test_loader import GOOD, write_project

_DIR = write_project(Path(tempfile.mkdtemp(prefix="kernelgen-fuzz-")), "")
_TARGETS = load_targets(_DIR / "specs" / "targets.yaml", _DIR)


def _load(data: bytes) -> None:
    path = _DIR / "specs" / "demo.yaml"
    path.write_bytes(data)
    try:
        load_module(path, _DIR, _TARGETS)
    except SpecError as exc:
        assert str(exc).startswith("specs/demo.yaml"), str(exc)


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data: bytes) -> None:
    _load(data)


@SETTINGS
@given(st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    _load(text.encode("utf-8", "surrogatepass"))


@SETTINGS
@given(
    cut=st.integers(0, len(GOOD)),
    length=st.integers(0, 40),
    insert=st.text(alphabet=st.sampled_from(list(":-[]{},'\"!&*#|>%@`\n \t0123456789abcxyzn().+/")), max_size=30),
)
def test_mutated_valid_spec(cut: int, length: int, insert: str) -> None:
    _load((GOOD[:cut] + insert + GOOD[cut + length:]).encode())
