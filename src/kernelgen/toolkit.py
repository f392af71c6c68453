"""Finding the tools a build needs: nvcc (CUDA toolkit), CMake, ninja and pybind11.

nvcc is looked for, in order: ``$CUDACXX``; ``$CUDA_HOME``/``$CUDA_PATH``; ``nvcc`` on
PATH; ``/usr/local/cuda``; and the CUDA toolkit wheels from PyPI (``pip install
'kernelgen[cuda]'``: nvidia-cuda-nvcc, -runtime, -cccl, -crt, nvidia-nvvm), which
cuda-pathfinder can locate, or which sit under ``site-packages/nvidia``.

A variable that is set but names no toolkit (a folder that does not exist, an nvcc without the
toolkit's headers beside it) is passed over with a warning naming the toolkit used instead.

When none is found, ``kernelgen build`` installs those wheels into the active environment (pip's
own progress is shown; ``KERNELGEN_NO_CUDA_INSTALL=1`` turns this off). ``KERNELGEN_IGNORE_SYSTEM_CUDA=1``
hides every toolkit but the wheels, so that CI can prove a machine without a toolkit works. Both are
on/off variables read by :func:`env_flag`.
"""

from __future__ import annotations

import importlib
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernelgen.errors import ToolkitError

SYSTEM_ROOTS = [Path("/usr/local/cuda")]
# The CUDA toolkit from PyPI: the `cuda` extra of kernelgen's pyproject.toml (a test keeps them equal).
CUDA_WHEELS = (
    "nvidia-cuda-nvcc>=13.0,<14",
    "nvidia-cuda-runtime>=13.0,<14",
    "nvidia-cuda-cccl>=13.0,<14",
    "nvidia-cuda-crt>=13.0,<14",
    "nvidia-nvvm>=13.0,<14",
    "cuda-pathfinder>=1.1",
)
HOW_TO_GET_CUDA = (
    "install the CUDA toolkit (nvcc) and set CUDA_HOME, or run: "
    "pip install 'kernelgen[cuda]' to get it from PyPI"
)


@dataclass(frozen=True)
class Toolkit:
    nvcc: Path
    root: Path  # contains bin/nvcc, include/cuda_runtime.h, lib64 or lib
    version: str
    source: str  # where it was found, for messages


# The values that turn an on/off variable off (case-insensitive); any other value turns it on.
FLAG_OFF = ("", "0", "false", "no", "off")


def env_flag(name: str) -> bool:
    """Whether the on/off environment variable ``name`` (kernelgen's ``KERNELGEN_*`` switches) is on:
    set to anything but an off value (unset, empty, ``0``, ``false``, ``no``, ``off``, in any case,
    surrounding spaces ignored)."""
    return os.environ.get(name, "").strip().lower() not in FLAG_OFF


def _nvcc_in(root: Path) -> Path | None:
    """root/bin/nvcc, when root is a whole toolkit (its headers are there too)."""
    p = root / "bin" / "nvcc"
    if p.is_file() and os.access(p, os.X_OK) and (root / "include" / "cuda_runtime.h").is_file():
        return p
    return None


def _version(nvcc: Path) -> str:
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    for line in out.splitlines():
        if "release" in line:
            return line.split("release", 1)[1].split(",")[0].strip()
    return ""


_GPU_ARCHES: dict[str, frozenset[str] | None] = {}


def gpu_arches(nvcc: Path) -> frozenset[str] | None:
    """The architecture numbers this nvcc builds ("75", "90", "121": the ``compute_NN`` names of
    ``nvcc --list-gpu-arch``; an ``a`` or ``f`` suffix is built where its number is), asked once
    per nvcc path; None when nvcc does not answer the option."""
    key = str(nvcc)
    if key not in _GPU_ARCHES:
        try:
            proc = subprocess.run([key, "--list-gpu-arch"], capture_output=True, text=True, timeout=30)
            found = frozenset(w.removeprefix("compute_") for w in proc.stdout.split() if w.startswith("compute_"))
            _GPU_ARCHES[key] = found if proc.returncode == 0 and found else None
        except (OSError, subprocess.SubprocessError):
            _GPU_ARCHES[key] = None
    return _GPU_ARCHES[key]


def arch_problem(tk: Toolkit, target_name: str, arch: str) -> str | None:
    """Why this toolkit cannot build for ``arch`` (a target's, e.g. sm_90a), or None when it can
    or cannot say (an nvcc without ``--list-gpu-arch``)."""
    known = gpu_arches(tk.nvcc)
    number = arch.removeprefix("sm_").rstrip("af")
    if known is None or number in known:
        return None
    listed = ", ".join(f"sm_{n}" for n in sorted(known, key=lambda n: (len(n), n)))
    return (f"target '{target_name}' has arch {arch}, which nvcc {tk.version or '(unknown version)'} ({tk.nvcc}, "
            f"from {tk.source}) cannot build; it builds {listed} (nvcc --list-gpu-arch). To fix: build the "
            f"other targets (-t), or use a CUDA toolkit that supports {arch} (CUDA_HOME or CUDACXX)")


def _wheel_roots() -> list[Path]:
    """Toolkit roots provided by the nvidia-* wheels, when installed."""
    roots: list[Path] = []
    try:  # cuda-pathfinder knows the wheels' layouts
        from cuda import pathfinder  # type: ignore[import-not-found]

        found = pathfinder.find_nvidia_binary_utility("nvcc")  # type: ignore[attr-defined]
        if found:
            roots.append(Path(found).resolve().parent.parent)
    except Exception:
        pass
    dirs = [Path(p) for p in site.getsitepackages() + [site.getusersitepackages()]]
    dirs += [Path(p) for p in sys.path if p.endswith("site-packages")]
    for d in dirs:
        for cand in (d / "nvidia" / "cu13", d / "nvidia" / "cuda_nvcc", d / "nvidia" / "cu12"):
            if _nvcc_in(cand):
                roots.append(cand)
    return roots


def _system_hidden() -> bool:
    return env_flag("KERNELGEN_IGNORE_SYSTEM_CUDA")


def _not_a_toolkit(source: str, root: Path) -> str:
    """What is wrong with the toolkit a variable names (``root``, from ``$CUDA_HOME`` or the nvcc of
    ``$CUDACXX``), for a warning."""
    if source == "CUDACXX":
        nvcc = Path(os.environ["CUDACXX"])
        if not nvcc.exists():
            return "does not exist"
        if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
            return "is not an executable file"
        return f"is not in a CUDA toolkit ({root} has no include/cuda_runtime.h)"
    if not root.exists():
        return "does not exist"
    if not root.is_dir():
        return "is not a folder"
    nvcc = root / "bin" / "nvcc"
    if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
        return "is not a CUDA toolkit (no executable bin/nvcc in it)"
    return "is not a whole CUDA toolkit (no include/cuda_runtime.h in it)"


_WARNED: set[str] = set()  # the warnings shown in this process, each shown once


def find_toolkit(install: bool = False, echo: Callable[[str], None] = print) -> Toolkit:
    """The CUDA toolkit to build with; with ``install``, where none is found, the PyPI wheels are
    installed into this environment first (unless KERNELGEN_NO_CUDA_INSTALL is set)."""
    try:
        return _found(_find_toolkit(), echo)
    except ToolkitError as exc:
        if not install or env_flag("KERNELGEN_NO_CUDA_INSTALL"):
            raise
        reason = str(exc).split(";", 1)[0]
    echo(f"kernelgen: {reason}: installing the CUDA toolkit from PyPI into this environment ({sys.prefix})")
    cmd = [sys.executable, "-m", "pip", "install", "--progress-bar", "off", *CUDA_WHEELS]
    echo("  $ " + " ".join(cmd[2:]))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip():
            echo(f"  {line.rstrip()}")
    if proc.wait() != 0:
        raise ToolkitError(f"installing the CUDA toolkit from PyPI failed (pip's messages above). To fix: "
                           f"{HOW_TO_GET_CUDA}")
    importlib.invalidate_caches()
    tk = _find_toolkit()
    echo(f"kernelgen: installed nvcc {tk.version} in {tk.root}")
    return _found(tk, echo)


def _found(tk: Toolkit, echo: Callable[[str], None]) -> Toolkit:
    """``tk``, after a warning (once per process) for each variable that names a toolkit that is
    not one and was passed over for ``tk``."""
    where = f"{tk.root}" + (f" ({tk.source})" if tk.source != str(tk.root) else "")
    for var in _passed_over(tk):
        msg = (f"kernelgen: warning: {var}={os.environ[var]} {_not_a_toolkit(var, _named_root(var))}; using nvcc "
               f"{tk.version or '(unknown version)'} from {where} instead")
        if msg not in _WARNED:
            _WARNED.add(msg)
            echo(msg)
    return tk


def _named_root(var: str) -> Path:
    """The toolkit folder a variable names: ``$CUDACXX``'s nvcc's folder's parent, or the folder."""
    value = Path(os.environ[var])
    return value.resolve().parent.parent if var == "CUDACXX" else value


def _passed_over(tk: Toolkit) -> list[str]:
    """The variables, of those looked at before ``tk``'s source, that are set and name no toolkit."""
    if _system_hidden():
        return []
    order = ["CUDACXX", "CUDA_HOME", "CUDA_PATH"]
    before = order[:order.index(tk.source)] if tk.source in order else order
    return [var for var in before if os.environ.get(var) and _nvcc_in(_named_root(var)) is None]


def _find_toolkit() -> Toolkit:
    candidates: list[tuple[str, Path]] = []
    if _system_hidden():
        pass
    elif os.environ.get("CUDACXX"):
        candidates.append(("CUDACXX", _named_root("CUDACXX")))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var) and not _system_hidden():
            candidates.append((var, _named_root(var)))
    which = shutil.which("nvcc")
    if which and not _system_hidden():
        candidates.append(("PATH", Path(which).resolve().parent.parent))
    if not _system_hidden():
        candidates += [(str(r), r) for r in SYSTEM_ROOTS]
    candidates += [("PyPI wheels", r) for r in _wheel_roots()]
    for source, root in candidates:
        nvcc = _nvcc_in(root)
        if nvcc is not None:
            return Toolkit(nvcc, root, _version(nvcc), source)
    looked = ", ".join(f"{s} ({r})" for s, r in candidates) or "nothing"
    hidden = " (the machine's toolkits are hidden: KERNELGEN_IGNORE_SYSTEM_CUDA is set)" if _system_hidden() else ""
    raise ToolkitError(f"no CUDA toolkit (nvcc) found{hidden}; looked in: {looked}. To fix: {HOW_TO_GET_CUDA}")


def _tool(name: str, module: str, bin_attr: str) -> str:
    """A build tool: the PyPI package's copy (a kernelgen dependency) first, then PATH."""
    try:
        mod = __import__(module)
        exe = Path(getattr(mod, bin_attr)) / name
        if exe.is_file():
            return str(exe)
    except (ImportError, AttributeError):
        pass
    found = shutil.which(name)
    if found:
        return found
    raise ToolkitError(f"{name} not found; run: pip install {module}")


def find_cmake() -> str:
    return _tool("cmake", "cmake", "CMAKE_BIN_DIR")


def find_ninja() -> str:
    return _tool("ninja", "ninja", "BIN_DIR")


def find_pybind11() -> str:
    try:
        import pybind11  # type: ignore[import-not-found]
    except ImportError:
        raise ToolkitError("pybind11 not found; run: pip install pybind11") from None
    return pybind11.get_cmake_dir()
