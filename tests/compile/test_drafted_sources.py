"""Sources as their authors' projects have them, drafted by `kernelgen draft` and built with the
drafts unedited (tests/drafted.py): a FlashAttention-style source whose launches are sized by
traits class templates, and a PyTorch extension's source whose wrapper dispatches on the dtype
(kept out of the build by #ifndef KERNELGEN_TARGET_NAME). Their plans are the source's own
launches'. tests/gpu/test_drafted_sources.py runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import drafted
from tests.conftest import run_cli

pytestmark = pytest.mark.build


def test_drafted_sources_build_and_plan_as_their_launches(tmp_path: Path) -> None:
    root = tmp_path / "project"
    drafted.populate(root)
    fwd = (root / "specs" / "fwd.yaml").read_text()
    assert "check: csrc/act.cu includes PyTorch's headers" in (root / "specs" / "act.yaml").read_text()
    res = run_cli("build", "--target", "hopper", "--no-torch-reader", "--no-link", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # the instance for head dim 128: grid from seqlen_q over kBlockM, kNThreads, kSmemSize (halves)
    res = run_cli("plan", f"fwd.{drafted.FWD_128}", "params.seqlen_q=1000", "params.b=2", "params.h=8",
                  "-t", "hopper", cwd=root)
    assert res.returncode == 0 and "launched  grid [8, 2, 8]  block [128, 1, 1]  shared_mem 65536" in res.stdout, \
        res.stdout + res.stderr + fwd
    res = run_cli("plan", f"fwd.{drafted.FWD_64}", "params.b=16", "-t", "hopper", cwd=root)
    assert res.returncode == 0 and "launched  grid [16, 1, 1]  block [256, 1, 1]  shared_mem 32768" in res.stdout, \
        res.stdout + res.stderr + fwd
    # the dtypes the wrapper's dispatch macro gives act_kernel, each built
    act = (root / "specs" / "act.yaml").read_text()
    assert "      scalar: [f64, f32, f16, bf16]" in act, act
    res = run_cli("plan", "act.act_f16", "d=1000", "num_tokens=4", "-t", "hopper", cwd=root)
    assert res.returncode == 0 and "launched  grid [4, 1, 1]  block [1000, 1, 1]" in res.stdout, res.stdout + res.stderr
