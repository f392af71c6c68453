"""A large valid spec for timing generation: ``kernels`` kernels of ``args`` arguments (an eighth
of them pointers) and ``clauses`` clauses each. The defaults make the 1 MB spec (350 kernels,
64 arguments, 64 clauses).

    python -m tests.bigspec DIR [KERNELS ARGS CLAUSES]   # writes a project to DIR and times generate
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

TARGETS = """\
hopper:
  arch: sm_90a
  compute_capability: "9.0"
  max_threads_per_block: 1024
  max_block_dims: [1024, 1024, 64]
  max_shared_mem_per_block_optin: 232448
"""


def kernel_source(args: int) -> str:
    nptr = max(1, args // 8)
    params = [f"float* p{i}" for i in range(nptr)] + [f"uint32_t n{i}" for i in range(args - nptr)]
    return f"#pragma once\n#include <cstdint>\n__global__ void big_kernel({', '.join(params)}) {{}}\n"


def spec_text(kernels: int = 350, args: int = 64, clauses: int = 64) -> str:
    nptr = max(1, args // 8)
    nint = args - nptr
    assert clauses <= 2 * nint, "two clauses per integer argument at most"
    lines = ["module: big", "summary: A large spec for timing generation.", "sources: [kernels/big.cu]",
             "constants:", "  THREADS: 256", "kernels:"]
    for k in range(kernels):
        lines += [f"  big_{k}:", "    symbol: big_kernel", f"    summary: Kernel {k} of the large spec.", "    args:"]
        lines += [f"      p{i}: {{type: f32*, size: n0 * {i + 1}}}" for i in range(nptr)]
        lines += [f"      n{i}: u32" for i in range(nint)]
        lines += ["    grid: [div_ceil(n0, THREADS), n1 + 1, 1]", "    block: [THREADS, 1, 1]",
                  "    skip_if: [n0 == 0]"]
        # each integer argument gets a lower and an upper bound, so each clause can decide alone
        req, app = [], []
        for c in range(clauses - 1):
            i = 1 + c // 2 if c // 2 + 1 < nint else c // 2
            (req if c % 2 else app).append(f"n{i} <= {100000 + c}" if c % 2 else f"n{i} >= 1")
        lines.append("    requires: [" + ", ".join(req) + "]")
        lines.append("    applies_if: [" + ", ".join(app) + "]")
        lines.append("    examples:")
        lines.append("      - {" + ", ".join(f"n{i}: {1000 if i == 0 else 10}" for i in range(nint)) + "}")
    return "\n".join(lines) + "\n"


def write_project(root: Path, kernels: int = 350, args: int = 64, clauses: int = 64) -> Path:
    (root / "specs").mkdir(parents=True, exist_ok=True)
    (root / "kernels").mkdir(exist_ok=True)
    (root / "specs" / "targets.yaml").write_text(TARGETS)
    (root / "kernels" / "big.cu").write_text(kernel_source(args))
    spec = root / "specs" / "big.yaml"
    spec.write_text(spec_text(kernels, args, clauses))
    return spec


def main() -> int:
    from kernelgen.emit import render_catalog
    from kernelgen.loader import load_catalog

    root = Path(sys.argv[1])
    sizes = [int(x) for x in sys.argv[2:5]] or [350, 64, 64]
    spec = write_project(root, *sizes)
    start = time.perf_counter()
    files = render_catalog(load_catalog(root))
    took = time.perf_counter() - start
    print(f"{spec.stat().st_size} bytes of spec, {len(files)} files generated in {took:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
