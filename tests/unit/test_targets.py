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


def test_bindings_pick_targets_by_the_registry_capabilities() -> None:
    import kernelgen_ops

    targets = load_targets(REPO / "specs" / "targets.yaml", REPO)
    assert kernelgen_ops.TARGETS == {t.compute_capability: t.name for t in targets}
