"""The target registry and its agreement with the bindings' GPU-to-target table."""

from __future__ import annotations

from pathlib import Path

from kernelgen.loader import load_targets

REPO = Path(__file__).resolve().parents[2]


def test_registry_has_gb10_and_hopper_with_their_limits() -> None:
    targets = {t.name: t for t in load_targets(REPO / "specs" / "targets.yaml", REPO)}
    assert targets["gb10"].arch == "sm_121a" and targets["gb10"].compute_capability == (12, 1)
    assert targets["hopper"].arch == "sm_90a" and targets["hopper"].compute_capability == (9, 0)
    assert targets["gb10"].max_shared_mem_per_block_optin == 101376
    assert targets["hopper"].max_shared_mem_per_block_optin == 232448
    assert targets["hopper"].arch_number == "90a"


def test_bindings_take_targets_from_the_installed_builds(tmp_path: Path, monkeypatch) -> None:
    """kernelgen_ops has no target table of its own: each installed build's package names its
    compute capability (generated from targets.yaml), so a project's own target is found."""
    import kernelgen_ops

    text = (REPO / "generated" / "hopper" / "python" / "__init__.py").read_text()
    assert "COMPUTE_CAPABILITY = (9, 0)" in text
    build = tmp_path / "ampere_probe"
    build.mkdir()
    (build / "__init__.py").write_text('TARGET = "ampere_probe"\nCOMPUTE_CAPABILITY = (8, 0)\n')
    monkeypatch.setattr(kernelgen_ops, "__path__", [str(tmp_path), *kernelgen_ops.__path__])
    assert kernelgen_ops.built_targets()[(8, 0)] == "ampere_probe"
    assert "ampere_probe" in kernelgen_ops.available_targets()
