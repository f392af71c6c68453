#!/usr/bin/env python3
"""Regenerate src/kernelgen/macro_names.py: the object-like and function-like macros that the
headers generated code includes define (CUDA runtime and element-type headers, the C and C++
standard headers the runtime uses, Python.h and pybind11), as nvcc's host compiler sees them
with the GNU extensions CMake enables. A spec name equal to one of them would be replaced by
the preprocessor wherever the name is emitted bare, so the loader refuses them.

    python scripts/macro_names.py            # rewrite the list
    python scripts/macro_names.py --check    # exit 1 when the list is missing a macro
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "kernelgen" / "macro_names.py"
HEADERS = (
    "type_traits", "cstdint", "string", "atomic", "stddef.h", "stdint.h", "cuda_runtime.h",
    "cuda_bf16.h", "cuda_fp16.h", "cuda_fp8.h", "cuda_fp4.h", "Python.h", "pybind11/pybind11.h",
)


def nvcc() -> str:
    for cand in (os.environ.get("CUDA_HOME", "") + "/bin/nvcc", shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise SystemExit("nvcc not found")


def compiler_macros() -> set[str]:
    """Macro names (without a leading '_': those are reserved to the implementation and
    refused by the loader anyway) that the included headers define."""
    import pybind11

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "m.cu"
        src.write_text("".join(f"#include <{h}>\n" for h in HEADERS))
        out = Path(tmp) / "m.txt"
        subprocess.run(
            [nvcc(), "-std=c++17", "-arch=sm_90a", "-E", "-Xcompiler", "-dM", "-Xcompiler", "-std=gnu++17",
             "-I", sysconfig.get_paths()["include"], "-I", pybind11.get_include(), str(src), "-o", str(out)],
            check=True, capture_output=True,
        )
        names = set()
        for line in out.read_text().splitlines():
            m = re.match(r"#define\s+([A-Za-z][A-Za-z0-9_]*)", line)
            if m:
                names.add(m.group(1))
    return names


def render(names: set[str]) -> str:
    body = "".join(f"    {n!r},\n" for n in sorted(names))
    return (
        '"""Macro names defined by the headers generated code includes (from scripts/macro_names.py;\n'
        'do not edit). A spec name equal to one would be rewritten by the preprocessor."""\n\n'
        f"MACRO_NAMES = frozenset((\n{body}))\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    names = compiler_macros()
    if args.check:
        sys.path.insert(0, str(ROOT / "src"))
        from kernelgen.macro_names import MACRO_NAMES

        missing = sorted(names - MACRO_NAMES)
        if missing:
            print("missing from src/kernelgen/macro_names.py: " + " ".join(missing))
            return 1
        return 0
    OUT.write_text(render(names))
    print(f"{OUT}: {len(names)} names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
