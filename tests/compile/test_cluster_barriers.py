"""Thread-block-cluster barriers in the built kernels are never split over divergent paths.

`barrier.cluster.arrive` and `barrier.cluster.wait` (kcommon::cluster_arrive_* / cluster_wait /
cluster_sync) are `.aligned`: every thread of a warp must execute the same instruction. Written
in both branches of a thread-dependent condition (`if (tid == 0) { ...; wait } else { wait }`),
a wait compiles to two instructions, and the kernel hangs on the GPU: a drafter attention
kernel did, on the H200. No GPU is needed to see it: in the SASS such a kernel has more waits
(UCGABAR_WAIT) than arrivals (UCGABAR_ARV), or the reverse. This test reads the SASS of every
kernel of every built target (cuobjdump over the build's module objects) and checks that the
counts match; a planted kernel with the divergent form shows that the check catches it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kernelgen.loader import load_catalog, load_targets
from kernelgen.sass import module_objects
from tests.compile.sass import compile_cubin, sass
from tests.conftest import REPO

pytestmark = pytest.mark.build

PLANTED = r"""
__global__ void __cluster_dims__(2, 1, 1) divergent(int* p) {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    if (threadIdx.x == 0) {
        p[blockIdx.x] = 1;
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
        p[blockIdx.x + 64] = 2;
    } else {
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    }
}
__global__ void __cluster_dims__(2, 1, 1) converged(int* p) {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    if (threadIdx.x == 0) p[blockIdx.x] = 1;
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (threadIdx.x == 0) p[blockIdx.x + 64] = 2;
}
"""


def barrier_counts(tool: tuple[Path, dict[str, str]], binary: Path) -> dict[str, tuple[int, int]]:
    """{kernel: (cluster arrivals, cluster waits)} for the kernels of `binary` that have either."""
    counts: dict[str, list[int]] = {}
    kernel = None
    for line in sass(tool, binary).splitlines():
        if m := re.search(r"Function\s*:\s*(\S+)", line):
            kernel = m.group(1)
        elif kernel and (m := re.search(r"\bUCGABAR_(ARV|WAIT)\b", line)):
            counts.setdefault(kernel, [0, 0])[m.group(1) == "WAIT"] += 1
    return {k: (a, w) for k, (a, w) in counts.items()}


def test_the_check_catches_a_divergent_wait(cuobjdump, tmp_path: Path) -> None:
    src = tmp_path / "planted.cu"
    src.write_text(PLANTED)
    cubin = compile_cubin(src, tmp_path)
    counts = {re.sub(r"^_Z\d+(\w+?)Pi$", r"\1", k): v for k, v in barrier_counts(cuobjdump, cubin).items()}
    assert counts["divergent"][0] != counts["divergent"][1], counts
    assert counts["converged"] == (1, 1), counts


def _module_objects(target: str) -> dict[str, Path]:
    """The build's object of each catalog module for `target` (kernelgen build's default build
    folder: build/<target>, one <module>.cu.o per module)."""
    names = {m.name for m in load_catalog(REPO).modules}
    return {name: obj for name, obj in module_objects(REPO / "build", target).items() if name in names}


@pytest.mark.parametrize("target", [t.name for t in load_targets(REPO / "specs" / "targets.yaml", REPO)])
def test_built_kernels_pair_their_cluster_barriers(cuobjdump, target: str) -> None:
    objects = _module_objects(target)
    if not objects:
        if os.environ.get("KERNELGEN_REQUIRE_BUILT"):
            pytest.fail(f"target {target} is not built (no module objects under build/{target})")
        pytest.skip(f"target {target} is not built (kernelgen build --target {target})")
    with_barriers = 0
    unpaired = []
    for module, obj in sorted(objects.items()):
        for kernel, (arrive, wait) in barrier_counts(cuobjdump, obj).items():
            with_barriers += 1
            if arrive != wait:
                unpaired.append(f"{module}: {kernel}: {arrive} cluster arrivals, {wait} waits")
    assert not unpaired, "cluster barriers split over divergent paths?\n" + "\n".join(unpaired)
    assert with_barriers >= 10, f"only {with_barriers} kernels with cluster barriers found in {target}'s objects"
