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
from tests.unit.test_emit_rust import KEYWORDS, UPPER
from tests.unit.test_loader import write_project
from tests.unit.test_rust_unused import SHAPES, UNCHECKED

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


def test_crate_of_changed_specs_does_not_link_against_the_older_library(built: Path, tmp_path: Path) -> None:
    """A kernel's argument changed and `kernelgen generate` run, not `build`: the library keeps its
    name, build.rs stops naming the module's C ABI symbol, and past build.rs (its list edited)
    linking fails on that symbol rather than producing a program that calls the old signature."""
    from tests.conftest import FIXTURE

    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    spec = project / "specs" / "fixture_ops.yaml"
    text = spec.read_text()
    old = "      n: u32\n      alpha: f32\n    grid: [div_ceil(n, THREADS), 1, 1]"
    assert text.count(old) == 1
    spec.write_text(text.replace(old, old.replace("alpha: f32", "alpha: f64")))
    source = project / "kernels" / "scale.cu"
    kernel = "float* __restrict__ out, uint32_t n, float alpha"
    assert kernel in source.read_text()
    source.write_text(source.read_text().replace(kernel, kernel.replace("float alpha", "double alpha")))
    for path, body in render_catalog(load_catalog(project)).items():
        if path.startswith("generated/hopper/rust/"):
            (project / path).parent.mkdir(parents=True, exist_ok=True)
            (project / path).write_text(body)
    crate = project / "generated" / "hopper" / "rust"
    (old_sym,) = _abi_symbols(built / "generated" / "hopper" / "rust")
    (new_sym,) = _abi_symbols(crate)
    assert old_sym != new_sym
    env = {"KERNELGEN_LIB_DIR": str(built / "bindings" / "kernelgen_ops" / "hopper"),
           "CARGO_TARGET_DIR": str(tmp_path / "t")}
    res = _cargo(crate, "build", "--tests", env=env)
    assert res.returncode != 0
    assert f"built from other specs than this crate was generated from (it lacks the C ABI symbols {new_sym})" \
        in res.stderr, res.stderr[-3000:]
    build_rs = crate / "build.rs"
    build_rs.write_text(build_rs.read_text().replace(f'"{new_sym}"', f'"{old_sym}"'))
    res = _cargo(crate, "build", "--tests", env=env)
    assert res.returncode != 0
    assert re.search(rf"undefined (symbol: |reference to `){new_sym}", res.stderr), res.stderr[-3000:]


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


def _abi_symbols(crate: Path) -> list[str]:
    """The C ABI digest symbols build.rs looks for in the library."""
    return re.findall(r'"(\w+__abi__[0-9a-f]{8})"', (crate / "build.rs").read_text())


def _fake_library(crate: Path, lib: str, tmp_path: Path, symbols: list[str] | None = None) -> Path:
    """A stand-in library file holding the names build.rs looks for (checking links nothing)."""
    fake = tmp_path / "lib"
    fake.mkdir(exist_ok=True)
    names = _abi_symbols(crate) if symbols is None else symbols
    (fake / f"lib{lib}.so").write_bytes(b"\0ELF\0" + b"".join(n.encode() + b"\0" for n in names))
    return fake


def _cargo_check(crate: Path, lib: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None,
                 symbols: list[str] | None = None) -> subprocess.CompletedProcess:
    fake = _fake_library(crate, lib, tmp_path, symbols)
    env = dict(os.environ, KERNELGEN_LIB_DIR=str(fake), CARGO_TARGET_DIR=str(tmp_path / "target")) | (env or {})
    res = subprocess.run(["cargo", "check", "--offline", *(args or ("--all-targets",))], cwd=crate, env=env,
                         capture_output=True, text=True, timeout=600)
    if not args:
        assert res.returncode == 0, res.stderr[-4000:]
        assert "warning" not in res.stderr, res.stderr[-4000:]
    return res


def _write_crate(tmp_path: Path, spec: str, name: str) -> Path:
    (tmp_path / "p").mkdir()
    root = write_project(tmp_path / "p", spec, f"{name}.yaml")
    for path, text in render_catalog(load_catalog(root)).items():
        if path.startswith("generated/hopper/rust/"):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
    return root / "generated/hopper/rust"


def test_crate_with_rust_keyword_names_type_checks(tmp_path: Path) -> None:
    _cargo_check(_write_crate(tmp_path, KEYWORDS, "mod"), library_name("hopper", ["mod"]), tmp_path)


@pytest.mark.parametrize("module", ["code", "fmt"])
def test_crate_of_a_module_named_like_a_crate_root_item_type_checks(module: str, tmp_path: Path) -> None:
    spec = UPPER.replace("module: gemmy", f"module: {module}", 1)
    _cargo_check(_write_crate(tmp_path, spec, module), library_name("hopper", [module]), tmp_path)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error")
            and not line.startswith(("error: could not compile", "error: aborting"))]


def test_upper_case_names_type_check_without_warnings_and_doctests_fail_only_on_the_value(tmp_path: Path) -> None:
    """GEMM-style upper-case names and kg_Self warn nowhere; the compile_fail doctests of a crate
    whose first u32 argument follows a bool one fail on the out-of-range value alone: the same
    call in range compiles."""
    crate = _write_crate(tmp_path, UPPER, "gemmy")
    lib = library_name("hopper", ["gemmy"])
    _cargo_check(crate, lib, tmp_path)
    text = (crate / "src/lib.rs").read_text()
    blocks = re.findall(r"//! ```(compile_fail|no_run)\n((?://! (?!```).*\n)+)//! ```", text)
    snippets = [(kind, "".join(line.removeprefix("//! ") for line in body.splitlines(True)))
                for kind, body in blocks if "GemmK::plan(" in body][:3]  # then the usage example
    assert [k for k, _ in snippets] == ["compile_fail", "compile_fail", "no_run"], blocks
    (crate / "examples").mkdir()
    for i, (kind, code) in enumerate(snippets):
        (crate / "examples" / f"snippet{i}.rs").write_text(f"fn main() {{\n{code}}}\n")
        res = _cargo_check(crate, lib, tmp_path, "--example", f"snippet{i}")
        if kind == "no_run":
            assert res.returncode == 0, res.stderr[-3000:]
        else:
            assert res.returncode != 0 and len(_errors(res.stderr)) == 1, res.stderr[-3000:]
            assert "u32" in _errors(res.stderr)[0], res.stderr[-3000:]


def test_library_of_other_specs_or_a_relative_folder_fails_the_build_clearly(tmp_path: Path) -> None:
    crate = _write_crate(tmp_path, UPPER, "gemmy")
    lib = library_name("hopper", ["gemmy"])
    (sym,) = _abi_symbols(crate)
    # A library of the same module names built from other specs (K was u64 then).
    res = _cargo_check(crate, lib, tmp_path, "--lib", symbols=[sym[:-8] + "00000000"])
    assert res.returncode != 0
    assert f"was built from other specs than this crate was generated from (it lacks the C ABI symbols {sym})" \
        in res.stderr, res.stderr[-3000:]
    assert "kernelgen build --target hopper" in res.stderr
    # A relative KERNELGEN_LIB_DIR is taken from the crate's folder: the message says so, with
    # the absolute path it tried.
    res = _cargo_check(crate, lib, tmp_path, "--lib", env={"KERNELGEN_LIB_DIR": "lib"})
    assert res.returncode != 0
    assert f"{crate.resolve()}/lib/lib{lib}.so not found" in res.stderr, res.stderr[-3000:]
    assert "KERNELGEN_LIB_DIR is relative" in res.stderr and "absolute path" in res.stderr


@pytest.mark.parametrize(("spec", "module"), [(SHAPES, "shapes"), (UNCHECKED, "unchecked")])
def test_crate_of_every_argument_shape_type_checks_with_warnings_denied(spec: str, module: str,
                                                                       tmp_path: Path) -> None:
    """Pointers none of which is sized, no pointers, no scalars, device scalars, variants,
    dispatchers and chains; and a crate whose launchers check no pointer for null: nothing unused.
    `DevicePtr::new` and `DevicePtrMut::new` take typed pointers as well as `c_void` ones."""
    crate = _write_crate(tmp_path, spec, module)
    if module == "shapes":
        (crate / "examples").mkdir()
        (crate / "examples" / "typed_pointers.rs").write_text(
            "use kernelgen_hopper::{shapes::r#unsized, DevicePtr, DevicePtrMut, DEFAULT_STREAM};\n"
            "fn main() {\n"
            "    let (x, y) = (0x1000 as *const u16, 0x2000 as *mut u16);\n"
            "    let (v, w) = (0x3000 as *const std::ffi::c_void, 0x4000 as *mut std::ffi::c_void);\n"
            "    let _ = unsafe { r#unsized::launch(DevicePtr::new(x), DevicePtrMut::new(y), 4, DEFAULT_STREAM) };\n"
            "    let _ = unsafe { r#unsized::launch(DevicePtr::new(v), DevicePtrMut::new(w), 4, DEFAULT_STREAM) };\n"
            "    const P: DevicePtr = DevicePtr::new(std::ptr::null::<f32>());\n"
            "    assert!(P.is_null());\n"
            "}\n")
    _cargo_check(crate, library_name("hopper", [module]), tmp_path, env={"RUSTFLAGS": "-D warnings"})


def test_catalog_crate_type_checks(tmp_path: Path) -> None:
    names = [m.name for m in load_catalog(REPO).modules]
    _cargo_check(REPO / "generated/hopper/rust", library_name("hopper", names), tmp_path)
