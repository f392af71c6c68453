"""Reading the SASS of compiled CUDA code (cuobjdump), for the compile tests: no GPU needed."""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from kernelgen.toolkit import find_toolkit

# An instruction line: /*0130*/, an optional predicate (@P0, @!PT, @!UP1), the opcode.
_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")


def binary(name: str) -> Path | None:
    """`name` from the CUDA toolkit kernelgen uses, the PATH, or a PyPI wheel (nvidia/cu13/bin)."""
    candidates = []
    try:
        candidates.append(find_toolkit().nvcc.parent / name)
    except Exception:  # no toolkit: the wheels may still hold the tool
        pass
    if found := shutil.which(name):
        candidates.append(Path(found))
    candidates += [Path(p) / "nvidia" / "cu13" / "bin" / name for p in sys.path if p.endswith("site-packages")]
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


Tool = tuple[Path, dict[str, str]]


def cuobjdump_tool() -> Tool | None:
    """cuobjdump and the environment that lets it find nvdisasm, or None without them."""
    tool, disasm = binary("cuobjdump"), binary("nvdisasm")
    if tool is None or disasm is None:
        return None
    return tool, {**os.environ, "NVDISASM_PATH": str(disasm.parent)}


def sass(tool: Tool, binary_path: Path) -> str:
    exe, env = tool
    res = subprocess.run([str(exe), "-sass", str(binary_path)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def opcode_counts(tool: Tool, binary_path: Path) -> dict[str, collections.Counter[str]]:
    """{function: Counter(opcode -> instructions)} for every function of `binary_path`."""
    counts: dict[str, collections.Counter[str]] = {}
    current = None
    for line in sass(tool, binary_path).splitlines():
        if m := re.search(r"Function\s*:\s*(\S+)", line):
            current = counts.setdefault(m.group(1), collections.Counter())
        elif current is not None and (m := _INSTR.search(line)):
            current[m.group(1)] += 1
    return counts


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
