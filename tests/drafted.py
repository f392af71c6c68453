"""The drafted project: the sources of tests/fixtures/drafted, written as their authors' projects
have them (a FlashAttention-style traits source, a PyTorch extension's source), with their specs
drafted by `kernelgen draft` and nothing edited, under the repository's target table.
tests/compile/test_drafted_sources.py builds it; tests/gpu/test_drafted_sources.py runs it."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO / "tests" / "fixtures" / "drafted"
PACKAGE = "drafted_ops"
# the kernels the drafts name: fwd.cu's instance for head dim 128 (through run_hdim128<float>) and
# its instance launched through a local alias; act.cu's kernel over the dispatched element types
FWD_128 = "fwd_fwd_traits_128_128_64_4_false_half_false"
FWD_64 = "fwd_fwd_traits_64_64_32_8_true"
ACT = "act"


def populate(root: Path) -> None:
    """Writes the project into the empty folder ``root``: specs/targets.yaml (the repository's),
    specs/project.yaml (package drafted_ops), csrc/ (the sources) and the drafted specs."""
    from kernelgen.draft import draft_files

    (root / "specs").mkdir(parents=True)
    shutil.copy(REPO / "specs" / "targets.yaml", root / "specs" / "targets.yaml")
    (root / "specs" / "project.yaml").write_text(f"package: {PACKAGE}\n")
    shutil.copytree(SOURCES, root / "csrc")
    for path, text in draft_files(root, [root / "csrc" / "fwd.cu", root / "csrc" / "act.cu"], write=True):
        path.write_text(text)
