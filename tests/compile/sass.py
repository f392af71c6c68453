"""Reading the SASS of compiled CUDA code (cuobjdump), for the compile tests: no GPU needed."""

from __future__ import annotations

import collections
import subprocess
from pathlib import Path

from kernelgen.sass import Tool, cuobjdump_tool, parse_sass, run_tool  # noqa: F401 (cuobjdump_tool: the compile tests')
from kernelgen.toolkit import find_toolkit


def sass(tool: Tool, binary_path: Path) -> str:
    return run_tool(tool, "-sass", str(binary_path))


def opcode_counts(tool: Tool, binary_path: Path) -> dict[str, collections.Counter[str]]:
    """{function: Counter(opcode -> instructions)} for every function of `binary_path`."""
    return parse_sass(sass(tool, binary_path))


def compile_cubin(source: Path, out_dir: Path, arch: str = "sm_90a") -> Path:
    """`source` compiled to out_dir/<stem>.cubin, with its PTX kept beside it (<stem>.ptx)."""
    cubin = out_dir / f"{source.stem}.cubin"
    res = subprocess.run(
        [str(find_toolkit().nvcc), "-std=c++17", "-O3", f"-arch={arch}", "-cubin", "--keep", "--keep-dir",
         str(out_dir), str(source), "-o", str(cubin)],
        capture_output=True, text=True, timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return cubin
