"""Build test of the launch_modes fixture (tests/fixtures/launch_modes) for hopper, without a GPU:
the cooperative, programmatic-dependent and launch-time-cluster launchers compile (through
cudaLaunchKernelEx), plans read the target's table for device names, and the generated contract
tests (expected plans from kernelgen.plan.expect with the same table) pass against the C++ plans."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, contract_tests_pass, run_cli

pytestmark = pytest.mark.build

TARGET = "hopper"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("launch_modes") / "project"
    shutil.copytree(REPO / "tests" / "fixtures" / "launch_modes", root)
    res = run_cli("build", "--target", TARGET, cwd=root)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return root


def _python(code: str, root: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, KERNELGEN_OPS_PATH=str(root / "bindings" / "kernelgen_ops"))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_plans_without_a_gpu_use_the_target_table(built: Path) -> None:
    res = _python(
        "import kernelgen_ops.hopper.launch_modes as m\n"
        "import kernelgen_ops.hopper._runtime as rt\n"
        "v = rt.device_values()\n"
        "print(v['device'], v['sm_count'], v['max_shared_mem_per_sm'])\n"
        "print(m.coop_sum.plan(n=1000)['grid'])\n"
        "print(m.coop_sum_blocks.plan(n=1000, blocks=1057)['reason'])\n"
        "print(m.sum_coop_or_atomic.plan(n=1000, blocks=1057)['kernel'])\n"
        "print(m.cluster_rank.plan(blocks=66, cluster_x=4)['reason'])\n"
        "print(m.bounded_scale.plan(n=1000, threads=512)['reason'])\n"
        "p = m.row_sum.plan(rows=4, cols=58113)\n"
        "print(p['kernel'], m.smem_row_sum.plan(rows=4, cols=58113)['code'])\n"
        "import kernelgen_ops\n"
        "print(kernelgen_ops.device_values('hopper') == rt.target_table())\n",
        built,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "-1 132 233472",
        "(1056, 1, 1)",
        "coop_sum_blocks: the cooperative grid has more blocks than can be co-resident "
        "(device.sm_count * kernel.blocks_per_sm)",
        "atomic_sum",
        "cluster_rank: grid x is not a whole number of clusters",
        "bounded_scale: the block has more threads than the kernel's __launch_bounds__",
        f"plain_row_sum {-(5 << 16)}",
        "True",
    ]


def test_an_occupancy_of_a_block_too_large_to_launch_is_zero(built: Path) -> None:
    """kernel.blocks_per_sm is read before the block's checks: a block whose extents overflow their
    product (4194304 x 4194304 x 1048576 wraps to 0 in 64 bits) plans as the block error that
    `kernelgen plan` gives (it divided by zero: SIGFPE), as does one of 1 x 1 x 2**40 threads."""
    res = _python(
        "import kernelgen_ops.hopper.launch_modes as m\n"
        "for b in ((4194304, 4194304, 1048576), (1, 1, 2**31), (2048, 1, 1), (128, 1, 1)):\n"
        "    p = m.occupancy_grid.plan(n=1000, bx=b[0], by=b[1], bz=b[2])\n"
        "    print(p['code'], p['grid'] if p['launched'] else p['reason'])\n",
        built,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        f"{-(4 << 16)} occupancy_grid: block x is outside the target's limits",
        f"{-(4 << 16) - 2} occupancy_grid: block z is outside the target's limits",
        f"{-(4 << 16)} occupancy_grid: block x is outside the target's limits",
        "0 (1000, 1, 1)",
    ], res.stdout


def test_limit_sms_caps_the_sm_count_plans_see(built: Path) -> None:
    """kernelgen_ops.limit_sms(n): plans see at most n SMs (a green context's share of the GPU), so
    a persistent grid shrinks and a cooperative grid's co-residency bound with it; 0 lifts it."""
    res = _python(
        "import kernelgen_ops\n"
        "import kernelgen_ops.hopper.launch_modes as m\n"
        "kernelgen_ops.limit_sms(48, 'hopper')\n"
        "print(kernelgen_ops.device_values('hopper')['sm_count'], m.coop_sum.plan(n=1000)['grid'])\n"
        "print(m.coop_sum_blocks.plan(n=1000, blocks=385)['reason'])\n"
        "print(m.coop_sum_blocks.plan(n=1000, blocks=384)['launched'])\n"
        "kernelgen_ops.limit_sms(1000, 'hopper')\n"
        "print(kernelgen_ops.device_values('hopper')['sm_count'])\n"
        "kernelgen_ops.limit_sms(0, 'hopper')\n"
        "print(kernelgen_ops.device_values('hopper')['sm_count'], m.coop_sum.plan(n=1000)['grid'])\n"
        "try:\n"
        "    kernelgen_ops.limit_sms(-1, 'hopper')\n"
        "except ValueError as e:\n"
        "    print(e)\n",
        built,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "48 (384, 1, 1)",
        "coop_sum_blocks: the cooperative grid has more blocks than can be co-resident "
        "(device.sm_count * kernel.blocks_per_sm)",
        "True",
        "132",
        "132 (1056, 1, 1)",
        "kernelgen_ops.limit_sms: argument 'n': -1 is out of range [0, 2147483647] (a number of SMs; 0 lifts the "
        "limit)",
    ]


def test_launch_modes_contract_tests_pass(built: Path) -> None:
    contract_tests_pass(built, TARGET, least=100)
