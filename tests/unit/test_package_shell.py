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
