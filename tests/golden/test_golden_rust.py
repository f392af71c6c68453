"""Golden files of the Rust crate generated for the fixture project, byte for byte.

Refresh with KERNELGEN_UPDATE_GOLDEN=1 pytest tests/golden and review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelgen.emit import library_name, render_catalog
from kernelgen.loader import load_catalog

HERE = Path(__file__).resolve().parent
REF = HERE / "fixture_ops"
FIXTURE = HERE.parent / "fixtures" / "project"
CHECKED = [
    "generated/hopper/rust/Cargo.toml",
    "generated/hopper/rust/build.rs",
    "generated/hopper/rust/src/lib.rs",
    "generated/hopper/rust/src/fixture_ops.rs",
    "generated/hopper/rust/tests/fixture_ops.rs",
]


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return render_catalog(load_catalog(FIXTURE))


@pytest.mark.parametrize("path", CHECKED)
def test_rust_text_matches_reference(rendered: dict[str, str], path: str) -> None:
    ref = REF / (path.replace("/", "__") + ".ref")
    if os.environ.get("KERNELGEN_UPDATE_GOLDEN"):
        ref.write_text(rendered[path])
    assert ref.is_file(), f"missing {ref}; create it with KERNELGEN_UPDATE_GOLDEN=1 pytest tests/golden"
    assert rendered[path] == ref.read_text(), (
        f"{path} differs from {ref.name}. If the change is intended, run "
        "KERNELGEN_UPDATE_GOLDEN=1 pytest tests/golden and review the diff."
    )


def test_every_target_gets_a_crate_linking_its_library(rendered: dict[str, str]) -> None:
    for target in ("gb10", "hopper"):
        files = sorted(p for p in rendered if p.startswith(f"generated/{target}/rust/"))
        assert files == [f"generated/{target}/rust/{p}" for p in
                         ("Cargo.toml", "build.rs", "src/fixture_ops.rs", "src/lib.rs", "tests/fixture_ops.rs")]
        lib = library_name(target, ["fixture_ops"])
        assert f'const LIBRARY: &str = "{lib}";' in rendered[f"generated/{target}/rust/build.rs"]
        assert f'name = "kernelgen_{target}"' in rendered[f"generated/{target}/rust/Cargo.toml"]


def test_absent_kernel_is_documented_and_tested_as_absent_on_gb10(rendered: dict[str, str]) -> None:
    gb10 = rendered["generated/gb10/rust/src/fixture_ops.rs"]
    assert "Absent on target `gb10`" in gb10
    assert "Absent on target" not in rendered["generated/hopper/rust/src/fixture_ops.rs"]
    tests = rendered["generated/gb10/rust/tests/fixture_ops.rs"]
    assert "fn big_smem_absent_is_not_launched()" in tests
    assert '"big_smem: not launched: absent on target gb10"' in tests
    assert "fn big_smem_absent_is_not_launched()" not in rendered["generated/hopper/rust/tests/fixture_ops.rs"]
