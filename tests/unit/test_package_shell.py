"""The package shell (kernelgen's runtime/python): immutable outcomes, attribute lookups that
resolve a target only for the names of built modules, and launcher signatures."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen import project

sys.path.insert(0, str(project.SHELL_DIR))
try:
    import _api  # the shell's _api.py, importable on its own
finally:
    sys.path.remove(str(project.SHELL_DIR))


def test_outcomes_are_immutable() -> None:
    o = _api.Outcome("m", "k", 0, 5, "k: not launched: empty work")
    for change in (lambda: setattr(o, "launched", True), lambda: setattr(o, "other", 1),
                   lambda: delattr(o, "reason"), lambda: o.__init__("m", "k", 1, 0, "")):
        with pytest.raises(AttributeError, match="Outcome is read-only"):
            change()
    assert (o.module, o.kernel, o.launched, o.code, o.reason, bool(o)) == ("m", "k", False, 5,
                                                                          "k: not launched: empty work", False)
    assert repr(_api.Outcome("m", "k", 1, 0, "")) == "<Outcome m.k: launched>"


def test_launcher_signature_follows_the_docstring() -> None:
    sig = _api._launcher_signature(("x", "w", "n", "h"), 3,
                                   "(x: const f32|bf16*, w: const f16* | None, n: u32, *, h: u64, stream=None) -> "
                                   "Outcome\n\nSummary.")
    assert str(sig) == ("(x: 'const f32|bf16*', w: 'const f16* | None', n: 'u32', *, h: 'u64', stream=None) "
                        "-> 'Outcome'")
    kinds = [p.kind for p in sig.parameters.values()]
    assert kinds == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 3 + [inspect.Parameter.KEYWORD_ONLY] * 2
    # a docstring without a signature line: names and kinds alone
    assert str(_api._launcher_signature(("n",), 0, "Summary.")) == "(*, n, stream=None) -> 'Outcome'"


def _install(tmp_path: Path, modules: tuple[str, ...] | None) -> Path:
    """A package of the shell and a built target "hopper" (modules ``ops``) on a machine without a GPU."""
    pkg = tmp_path / "shellpkg"
    files = {n: (project.SHELL_DIR / n).read_text() for n in project.SHELL_FILES}
    files["_project.py"] = "PACKAGE = 'shellpkg'\nTARGETS = {'hopper': (9, 0)}\nROOT = None\n"
    project.write_shell(pkg, files)
    (pkg / "hopper").mkdir()
    listed = f"MODULES = {modules!r}\n" if modules is not None else ""
    (pkg / "hopper" / "__init__.py").write_text(f"{listed}COMPUTE_CAPABILITY = (9, 0)\n")
    (pkg / "hopper" / "_runtime.py").write_text("def device_count():\n    return 0\n")
    (pkg / "hopper" / "ops.py").write_text("WHO = 'hopper'\n")
    return tmp_path


def _python(prefix: Path, code: str, **env: str) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("KERNELGEN_TARGET", "KERNELGEN_OPS_PATH")}
    environ.update(PYTHONPATH=str(prefix), **env)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


LOOKUPS = """
import shellpkg
print(hasattr(shellpkg, 'nosuch'), getattr(shellpkg, 'opz', 'default'))
for name in ('refesh', 'opz', 'nosuch', '_private'):
    try:
        getattr(shellpkg, name)
    except AttributeError as e:
        print('AttributeError', e)
try:
    from shellpkg import ops
except shellpkg.TargetError as e:
    print('TargetError', str(e).split(',')[0])
"""


def test_only_module_names_resolve_the_target(tmp_path: Path) -> None:
    """Without a GPU, a name that is no built module is an AttributeError (hasattr and getattr
    with a default work, with a did-you-mean); a module's name still says why no target is chosen."""
    assert _python(_install(tmp_path, ("ops",)), LOOKUPS) == [
        "False default",
        "AttributeError module 'shellpkg' has no attribute or module 'refesh' (its modules: ops); did you mean "
        "'refresh'?",
        "AttributeError module 'shellpkg' has no attribute or module 'opz' (its modules: ops); did you mean 'ops'?",
        "AttributeError module 'shellpkg' has no attribute or module 'nosuch' (its modules: ops)",
        "AttributeError module 'shellpkg' has no attribute or module '_private'",
        "TargetError shellpkg: no CUDA GPU is visible (no GPU",
    ]


def test_a_chosen_target_gives_its_modules(tmp_path: Path) -> None:
    code = "import shellpkg\nfrom shellpkg import ops\nprint(ops.WHO, hasattr(shellpkg, 'nosuch'))\n"
    assert _python(_install(tmp_path, ("ops",)), code, KERNELGEN_TARGET="hopper") == ["hopper False"]


BROKEN = """
import shellpkg
for how in ("getattr", "from"):
    try:
        if how == "getattr":
            shellpkg.scale
        else:
            from shellpkg import scale  # noqa: F401
    except ImportError as e:
        print(type(e).__name__, type(e.__cause__).__name__, e)
"""


def _broken_install(tmp_path: Path, how: str) -> Path:
    """_install's package with a module "scale" that hopper's MODULES lists: missing, or an extension
    cut short (0 bytes), as an install that did not finish leaves them."""
    import importlib.machinery

    prefix = _install(tmp_path, ("ops", "scale"))
    if how == "empty extension":
        (prefix / "shellpkg" / "hopper" / f"scale{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    return prefix


@pytest.mark.parametrize("how", ["missing", "empty extension"])
def test_a_listed_module_that_does_not_load_says_so_and_what_to_run(tmp_path: Path, how: str) -> None:
    lines = _python(_broken_install(tmp_path, how), BROKEN, KERNELGEN_TARGET="hopper")
    assert len(lines) == 2 and lines[0] == lines[1]  # the same error through getattr and from-import
    cause = "ModuleNotFoundError" if how == "missing" else "ImportError"
    assert lines[0].startswith(f"ImportError {cause} shellpkg: module 'scale' of target 'hopper' cannot be loaded (")
    assert ("; the installed build of target 'hopper' is incomplete or damaged; run: pip wheel --no-build-isolation"
            in lines[0])
    if how == "empty extension":
        assert "file too short" in lines[0]


def test_an_interrupted_install_is_named(tmp_path: Path) -> None:
    from kernelgen import build

    prefix = _broken_install(tmp_path, "missing")
    (prefix / "shellpkg" / "hopper" / build.INSTALL_MARKER).write_text("")
    (prefix / "shellpkg" / "_project.py").write_text(
        f"PACKAGE = 'shellpkg'\nTARGETS = {{'hopper': (9, 0)}}\nROOT = {str(tmp_path)!r}\n")
    lines = _python(prefix, BROKEN, KERNELGEN_TARGET="hopper")
    # installed in tmp_path, not the project's bindings/: the build to run installs there again
    assert lines[0].endswith(f"; the last install of target 'hopper' was interrupted or failed; run: cd {tmp_path} "
                             f"&& kernelgen build --target hopper --install-dir {tmp_path}")


def test_a_runtime_that_does_not_load_says_so(tmp_path: Path) -> None:
    import importlib.machinery

    prefix = _install(tmp_path, ("ops",))
    (prefix / "shellpkg" / "hopper" / "_runtime.py").unlink()
    (prefix / "shellpkg" / "hopper" / f"_runtime{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    code = "import shellpkg\ntry:\n    from shellpkg import ops\nexcept ImportError as e:\n    print(e)\n"
    (line,) = _python(prefix, code)
    assert line.startswith("shellpkg: the runtime of target 'hopper' cannot be loaded (ImportError: ")
    assert "file too short" in line and "incomplete or damaged; run: " in line


def test_a_module_no_built_target_lists_stays_an_attribute_error(tmp_path: Path) -> None:
    code = "import shellpkg\nprint(hasattr(shellpkg, 'other'))\n"
    prefix = _install(tmp_path, ("ops", "other"))
    (tmp_path / "shellpkg" / "ampere").mkdir()
    (tmp_path / "shellpkg" / "ampere" / "__init__.py").write_text("MODULES = ('ops',)\nCOMPUTE_CAPABILITY = (8, 0)\n")
    (tmp_path / "shellpkg" / "ampere" / "ops.py").write_text("")
    assert _python(prefix, code, KERNELGEN_TARGET="ampere") == ["False"]


def test_importing_a_target_that_is_not_built_says_what_to_build(tmp_path: Path) -> None:
    """import <package>.<target>.<module> of a target of the project that is not installed is a
    TargetError naming the built ones (it was a bare ModuleNotFoundError); a name that is no target
    is still a ModuleNotFoundError."""
    prefix = _install(tmp_path, ("ops",))
    shell = tmp_path / "shellpkg" / "_project.py"
    shell.write_text(shell.read_text().replace("{'hopper': (9, 0)}", "{'hopper': (9, 0), 'gb10': (12, 1)}"))
    code = """
import shellpkg
import shellpkg.hopper.ops as o
print(o.WHO)
for name in ('shellpkg.gb10.ops', 'shellpkg.volta.ops'):
    try:
        __import__(name)
    except shellpkg.TargetError as e:
        print('TargetError', str(e).split(';')[0])
    except ModuleNotFoundError as e:
        print('ModuleNotFoundError', e)
"""
    assert _python(prefix, code) == [
        "hopper",
        "TargetError shellpkg: target 'gb10' is not built (built: hopper)",
        "ModuleNotFoundError No module named 'shellpkg.volta'",
    ]


def test_a_checkouts_package_before_its_first_build_says_to_build_the_project(tmp_path: Path) -> None:
    """A shell in <root>/bindings/<package> of a project (specs/targets.yaml), with no _project.py
    yet, names `kernelgen build` in the project (it called itself an installed wheel)."""
    pkg = tmp_path / "bindings" / "shellpkg"
    project.write_shell(pkg, {n: (project.SHELL_DIR / n).read_text() for n in project.SHELL_FILES})
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "targets.yaml").write_text("hopper: {arch: sm_90a}\n")
    code = "import shellpkg\ntry:\n    shellpkg.target()\nexcept shellpkg.TargetError as e:\n    print(e)\n"
    assert _python(tmp_path / "bindings", code) == [f"shellpkg: no target is built; run: cd {tmp_path} && kernelgen build"]
