"""Two projects with their own package names, built for this GPU's target, in one process.

Each project (a package of its own: ``twin_alpha`` and ``twin_beta``) has a module ``ops`` with a
kernel ``apply`` of the same signature, so everything but the project's names is the same: the
module and kernel names, the kernel symbol, the target. Both packages are imported in this
process, selected for the GPU automatically and through their target subpackage, and each
launches its kernel; the outputs show that each call reached its own project's kernel.
"""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.gpu import guards_build

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():  # pragma: no cover - depends on the machine
    pytest.skip("no CUDA GPU", allow_module_level=True)

TARGET = guards_build.current_target_or_skip()

SPEC = """\
module: ops
summary: out = {what} over n floats.
sources: [kernels/ops.cu]
kernels:
  apply:
    symbol: apply_kernel
    summary: One thread per element.
    args:
      x: {{type: const f32*, size: 'n'}}
      out: {{type: f32*, size: 'n'}}
      'n': u32
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    skip_if: [n == 0]
    examples:
      - {{'n': 1000}}
"""

KERNEL = """\
#pragma once
#include <cstdint>
__global__ void apply_kernel(const float* x, float* out, uint32_t n) {{
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = {expr};
}}
"""

PROJECTS = {
    "twin_alpha": ("2 * x", "2.0f * x[i]", lambda x: 2 * x),
    "twin_beta": ("x + 3", "x[i] + 3.0f", lambda x: x + 3),
}


def _populate(package: str):
    what, expr, _ = PROJECTS[package]

    def populate(root):
        (root / "specs").mkdir()
        (root / "kernels").mkdir()
        (root / "specs" / "project.yaml").write_text(f"package: {package}\n")
        (root / "specs" / "targets.yaml").write_text(
            (guards_build.REPO / "specs" / "targets.yaml").read_text())
        (root / "specs" / "ops.yaml").write_text(SPEC.format(what=what))
        (root / "kernels" / "ops.cu").write_text(KERNEL.format(expr=expr))

    return populate


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    out = {}
    for package in PROJECTS:
        target_dir = guards_build.build(tmp_path_factory, TARGET, populate=_populate(package), name=package)
        assert target_dir.parent.name == package
        sys.path.insert(0, str(target_dir.parent.parent))
        out[package] = importlib.import_module(package)
        out[package].built_dir = target_dir
    return out


def test_each_project_has_its_own_names(packages):
    libs = {p: sorted(f.name for f in pkg.built_dir.glob("lib*.so")) for p, pkg in packages.items()}
    assert libs["twin_alpha"][0].startswith(f"libtwin_alpha_{TARGET}_"), libs
    assert libs["twin_beta"][0].startswith(f"libtwin_beta_{TARGET}_"), libs
    for p, pkg in packages.items():
        assert pkg.__name__ == p and pkg.target() == TARGET
        assert pkg.registry()[TARGET] == tuple(torch.cuda.get_device_capability())


@pytest.mark.parametrize("n", [1000, 4097])
def test_both_projects_launch_in_one_process(packages, n):
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    for package, (_, _, ref) in PROJECTS.items():
        ops = importlib.import_module(f"{package}.{TARGET}.ops")
        via_package = packages[package].ops  # auto-selected for this GPU
        assert via_package is ops
        out = torch.full_like(x, float("nan"))
        outcome = ops.apply(x, out, n)
        assert outcome, outcome
        assert outcome.kernel == "apply"
        torch.cuda.synchronize()
        assert torch.equal(out, ref(x)), package
    # each package's errors are its own
    alpha, beta = packages["twin_alpha"], packages["twin_beta"]
    assert alpha.ArgumentError is not beta.ArgumentError
    with pytest.raises(beta.ArgumentError, match="apply"):
        importlib.import_module(f"twin_beta.{TARGET}.ops").apply(x, x[:10], n)
