"""The generated Rust crates linked against built target libraries (no GPU needed): the fixture
project is built for both targets (big_smem is absent on gb10) and each crate's generated tests
run with `cargo test`: plans against the spec, absence, not-launched reasons, the kill switch,
argument errors, and a launch without a GPU failing with an error naming the kernel. Where the
catalog's own targets are built (`kernelgen build`, as CI does), their crates are tested too."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelgen.emit import library_name, render_catalog
from kernelgen.loader import load_catalog
from tests.conftest import REPO, run_cli
from tests.unit.test_emit_rust import KEYWORDS
from tests.unit.test_loader import write_project

pytestmark = [
    pytest.mark.build,
    pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed (apt-get install cargo)"),
]


def _cargo(crate: Path, *args: str, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["cargo", *args, "--offline"], cwd=crate, env=dict(os.environ) | env, capture_output=True,
                          text=True, timeout=timeout)


def _passed(out: str) -> int:
    return sum(int(n) for n in re.findall(r"test result: ok\. (\d+) passed", out))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import FIXTURE

    root = tmp_path_factory.mktemp("rust") / "project"
    shutil.copytree(FIXTURE, root)
    res = run_cli("build", cwd=root)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return root


@pytest.mark.parametrize("target", ["gb10", "hopper"])
def test_generated_crate_tests_pass_against_the_built_library(built: Path, target: str, tmp_path: Path) -> None:
    crate = built / "generated" / target / "rust"
    lib_dir = built / "bindings" / "kernelgen_ops" / target
    res = _cargo(crate, "test", env={"KERNELGEN_LIB_DIR": str(lib_dir), "CARGO_TARGET_DIR": str(tmp_path / "t")})
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "FAILED" not in out and _passed(out) >= 20, out[-2000:]
    # The tests ran against this target: absence and the chain's member where it is absent.
    if target == "gb10":
        assert "test big_smem_absent_is_not_launched ... ok" in out, out[-3000:]
    assert "compile fail ... ok" in out, out[-2000:]  # out-of-range integers do not compile


def test_crate_builds_against_the_default_library_folder_and_generate_check_ignores_cargo_output(built: Path) -> None:
    """Without KERNELGEN_LIB_DIR the crate links the project's installed library; cargo's target/
    and Cargo.lock beside the crate are neither stale nor orphaned generated files."""
    crate = built / "generated" / "gb10" / "rust"
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELGEN_LIB_DIR", "CARGO_TARGET_DIR")}
    res = subprocess.run(["cargo", "test", "--offline", "--test", "fixture_ops", "--", "plan"], cwd=crate, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert (crate / "target").is_dir() and (crate / "Cargo.lock").is_file()
    res = run_cli("generate", "--check", cwd=built)
    assert res.returncode == 0, res.stderr
    assert run_cli("generate", cwd=built).returncode == 0
    assert (crate / "target").is_dir() and (crate / "Cargo.lock").is_file()


def test_missing_library_fails_the_build_naming_the_file_and_the_variable(built: Path, tmp_path: Path) -> None:
    crate = built / "generated" / "hopper" / "rust"
    res = _cargo(crate, "build", env={"KERNELGEN_LIB_DIR": str(tmp_path / "nowhere"),
                                      "CARGO_TARGET_DIR": str(tmp_path / "t")})
    assert res.returncode != 0
    lib = library_name("hopper", ["fixture_ops"])
    assert f"lib{lib}.so not found" in res.stderr, res.stderr[-2000:]
    assert "KERNELGEN_LIB_DIR" in res.stderr


@pytest.mark.parametrize("target", ["gb10", "hopper"])
def test_catalog_crate_tests_pass_where_the_catalog_is_built(target: str, tmp_path: Path) -> None:
    catalog = load_catalog(REPO)
    lib = library_name(target, [m.name for m in catalog.modules])
    lib_dir = REPO / "bindings" / "kernelgen_ops" / target
    if not (lib_dir / f"lib{lib}.so").is_file():
        if os.environ.get("KERNELGEN_REQUIRE_BUILT"):
            pytest.fail(f"target {target} is not built (lib{lib}.so missing in {lib_dir})")
        pytest.skip(f"target {target} of the catalog is not built (kernelgen build --target {target})")
    crate = REPO / "generated" / target / "rust"
    res = _cargo(crate, "test", env={"KERNELGEN_LIB_DIR": str(lib_dir), "CARGO_TARGET_DIR": str(tmp_path / "t")})
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "FAILED" not in out and _passed(out) >= 50, out[-2000:]


# Type checks against a stand-in library file (checking links nothing): no nvcc needed.


def _cargo_check(crate: Path, lib: str, tmp_path: Path) -> None:
    fake = tmp_path / "lib"
    fake.mkdir(exist_ok=True)
    (fake / f"lib{lib}.so").write_bytes(b"")  # build.rs only checks it exists; checking links nothing
    env = dict(os.environ, KERNELGEN_LIB_DIR=str(fake), CARGO_TARGET_DIR=str(tmp_path / "target"))
    res = subprocess.run(["cargo", "check", "--offline", "--all-targets"], cwd=crate, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "warning" not in res.stderr, res.stderr[-4000:]


def test_crate_with_rust_keyword_names_type_checks(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    root = write_project(tmp_path / "p", KEYWORDS, "mod.yaml")
    for path, text in render_catalog(load_catalog(root)).items():
        if path.startswith("generated/hopper/rust/"):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
    _cargo_check(root / "generated/hopper/rust", library_name("hopper", ["mod"]), tmp_path)


def test_catalog_crate_type_checks(tmp_path: Path) -> None:
    names = [m.name for m in load_catalog(REPO).modules]
    _cargo_check(REPO / "generated/hopper/rust", library_name("hopper", names), tmp_path)
