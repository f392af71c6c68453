"""Finding the tools a build needs: nvcc (CUDA toolkit), CMake, ninja and pybind11.

nvcc is looked for, in order: ``$CUDACXX``; ``$CUDA_HOME``/``$CUDA_PATH``; ``nvcc`` on
PATH; ``/usr/local/cuda``; and the CUDA toolkit wheels from PyPI (:data:`CUDA_WHEELS`:
nvidia-cuda-nvcc, -runtime, -cccl, -crt, nvidia-nvvm), which cuda-pathfinder can locate, or which
sit under ``site-packages/nvidia``.

A variable that is set but names no toolkit (a folder that does not exist, a program that is not
nvcc, an nvcc without the toolkit's headers beside it) is passed over with a warning naming the
toolkit used instead. ``$CUDACXX`` names nvcc by its path or, like CMake takes it, by a name on
PATH. A toolkit whose nvcc cannot link (the libraries it links against are not where its
``bin/nvcc.profile`` looks, as in the nvidia-cuda-nvcc wheels before 13.2.86) is passed over too.

When none is found, ``kernelgen build`` installs those wheels into the active environment with pip
(pip's progress bar on a terminal, its messages otherwise; ``KERNELGEN_NO_CUDA_INSTALL=1`` turns
this off). It installs nothing from an isolated build environment (``pip wheel`` of a project with
build isolation): the error says how to supply the toolkit there. ``KERNELGEN_IGNORE_SYSTEM_CUDA=1``
hides every toolkit but the wheels, so that CI can prove a machine without a toolkit works. Both are
on/off variables read by :func:`env_flag`.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
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
# nvidia-cuda-nvcc before 13.2.86 looks for the libraries it links against in lib64/, where
# nvidia-cuda-runtime has none (find_toolkit passes such a toolkit over, whatever its version).
CUDA_WHEELS = (
    "nvidia-cuda-nvcc>=13.2.86,<14",
    "nvidia-cuda-runtime>=13.2,<14",
    "nvidia-cuda-cccl>=13.2,<14",
    "nvidia-cuda-crt>=13.2,<14",
    "nvidia-nvvm>=13.2,<14",
    "cuda-pathfinder>=1.1",
)
# The static libraries CMake links CUDA code against (-lcudadevrt -lcudart_static), from the
# folders nvcc's profile names.
LINKED_LIBRARIES = ("libcudadevrt.a", "libcudart_static.a")


def pip_install_wheels(python: str | None = None, upgrade: bool = False, installer: str = "-m pip") -> str:
    """The command that installs the CUDA wheels (:data:`CUDA_WHEELS`) into ``python``'s environment
    (this one's by default; ``python="uv", installer="pip"``: uv's command), for messages."""
    head = [shlex.quote(python or sys.executable), *installer.split()]
    return " ".join([*head, "install", *(["--upgrade"] if upgrade else []), *(shlex.quote(w) for w in CUDA_WHEELS)])


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


_LINK_PROBLEMS: dict[str, str | None] = {}


def link_problem(nvcc: Path) -> str | None:
    """Why this nvcc cannot link CUDA code (the libraries it links against, :data:`LINKED_LIBRARIES`,
    are in none of the folders its ``bin/nvcc.profile`` names: ``nvcc -dryrun``'s LIBRARIES), or
    None when they are there or nvcc does not say; asked once per nvcc path."""
    key = str(nvcc)
    if key not in _LINK_PROBLEMS:
        _LINK_PROBLEMS[key] = None
        try:
            proc = subprocess.run([key, "-dryrun", "kernelgen_probe.cu"], capture_output=True, text=True, timeout=30)
            listed = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("#$ LIBRARIES=")]
        except (OSError, subprocess.SubprocessError):
            listed = []
        if listed:
            dirs = re.findall(r'-L"?([^"\s]+)', listed[-1])
            missing = [lib for lib in LINKED_LIBRARIES if not any((Path(d) / lib).is_file() for d in dirs)]
            if missing:
                where = ", ".join(os.path.normpath(d) for d in dirs) or "no folder"
                _LINK_PROBLEMS[key] = (f"cannot link: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                                       f"not where its bin/nvcc.profile looks ({where})")
    return _LINK_PROBLEMS[key]


# The folders of the CUDA wheels under a site-packages folder: CUDA 13's one toolkit folder, and
# CUDA 12's nvcc wheel (whose toolkit is spread over several folders: not a whole toolkit).
WHEEL_FOLDERS = (("nvidia", "cu13"), ("nvidia", "cuda_nvcc"), ("nvidia", "cu12"))


def _site_dirs() -> list[Path]:
    """The site-packages folders of the running interpreter (its environment's and the user's, and
    those on sys.path), where the CUDA wheels are looked for."""
    dirs = [Path(p) for p in site.getsitepackages() + [site.getusersitepackages()]]
    dirs += [Path(p) for p in sys.path if p.endswith("site-packages")]
    return list(dict.fromkeys(dirs))


def _wheel_folders() -> list[Path]:
    """The folders the CUDA wheels may hold a toolkit in (:data:`WHEEL_FOLDERS` under each of
    :func:`_site_dirs`)."""
    return [d.joinpath(*parts) for d in _site_dirs() for parts in WHEEL_FOLDERS]


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
    roots += [cand for cand in _wheel_folders() if _nvcc_in(cand)]
    return list(dict.fromkeys(roots))


def _partial_wheels() -> list[str]:
    """The CUDA wheels' folders that hold an nvcc but not a whole toolkit (CUDA 12's layout), each with
    what it is, for the error that no toolkit was found."""
    out = []
    for cand in _wheel_folders():
        nvcc = cand / "bin" / "nvcc"
        if nvcc.is_file() and _nvcc_in(cand) is None:
            version = _version(nvcc) if os.access(nvcc, os.X_OK) else ""
            out.append(f"{cand} (nvcc {version or '(unknown version)'} without the toolkit's headers beside it "
                       "(no include/cuda_runtime.h): a CUDA 12 wheel; kernelgen takes the CUDA 13 wheels)")
    return out


def _system_hidden() -> bool:
    return env_flag("KERNELGEN_IGNORE_SYSTEM_CUDA")


def _cudacxx() -> Path | None:
    """The program ``$CUDACXX`` names: its path, or (a bare name) the program of that name on PATH,
    as CMake takes it; None when unset or a bare name not on PATH."""
    value = os.environ.get("CUDACXX", "")
    if not value:
        return None
    if os.sep not in value:
        found = shutil.which(value)
        return Path(found) if found else None
    return Path(value)


def _is_nvcc(path: Path) -> bool:
    """Whether ``path`` is nvcc by its name (or the name of the file it links to)."""
    try:
        return path.name == "nvcc" or path.resolve().name == "nvcc"
    except (OSError, RuntimeError):
        return path.name == "nvcc"


def _not_a_toolkit(source: str, root: Path | None) -> str:
    """What is wrong with the toolkit a variable names (``root``, from ``$CUDA_HOME`` or the nvcc of
    ``$CUDACXX``), for a warning."""
    if source == "CUDACXX":
        nvcc = _cudacxx()
        if nvcc is None:
            return "is not a program on the PATH"
        if not nvcc.exists():
            return "does not exist"
        if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
            return "is not an executable file"
        if not _is_nvcc(nvcc):
            return "is not nvcc (CUDACXX names the CUDA compiler: a toolkit's bin/nvcc, or nvcc on the PATH)"
        if root is not None and _nvcc_in(root) is not None:
            return f"{link_problem(nvcc)}"
        return f"is not in a CUDA toolkit ({root} has no include/cuda_runtime.h)"
    if root is None:
        return "does not exist"
    if not root.exists():
        return "does not exist"
    if not root.is_dir():
        return "is not a folder"
    nvcc = root / "bin" / "nvcc"
    if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
        return "is not a CUDA toolkit (no executable bin/nvcc in it)"
    if _nvcc_in(root) is None:
        return "is not a whole CUDA toolkit (no include/cuda_runtime.h in it)"
    return f"has an nvcc that {link_problem(nvcc)}"


_WARNED: set[str] = set()  # the warnings shown in this process, each shown once


def _isolated_environment() -> Path | None:
    """The temporary environment of an isolated build (``pip wheel`` or ``pip install`` with build
    isolation, ``python -m build``) that kernelgen runs from, or None: kernelgen is installed there
    (pip's ``pip-build-env-*``, build's ``build-env-*``), not in the interpreter's environment."""
    here = Path(__file__).resolve()
    for folder in here.parents:
        if folder.name.startswith(("pip-build-env-", "build-env-")):
            return folder
    return None


def _install_refusal(reason: str) -> str | None:
    """Why kernelgen does not install the CUDA wheels from here (an isolated build environment), with
    how to supply the toolkit instead; None when it may."""
    outer = sys.executable
    isolated = _isolated_environment()
    if isolated is not None:
        requires = ("list them in the project's pyproject.toml [build-system] requires ("
                    + ", ".join(f'"{w}"' for w in CUDA_WHEELS) + "), or build without isolation")
        if isolated in Path(sys.prefix).resolve().parents or isolated == Path(sys.prefix).resolve():
            supply = f"To fix: {requires}"  # the isolated environment is the interpreter's own
        else:  # pip's isolation: the interpreter of the environment pip runs in, with kernelgen beside it
            supply = (f"To fix: install the CUDA wheels into the environment that runs the build: "
                      f"{pip_install_wheels(outer)} (an isolated build finds them there), or {requires}")
        return (f"{reason}, and kernelgen runs in an isolated build environment ({isolated}), which lasts one "
                f"build: it installs the CUDA toolkit neither there nor into the environment that runs the build "
                f"({sys.prefix}). {supply} (pip wheel --no-build-isolation); or install the CUDA toolkit (nvcc) "
                "and set CUDA_HOME")
    return None


def _no_pip(reason: str) -> str:
    """The error for an environment without pip, where the CUDA wheels were to be installed."""
    uv = pip_install_wheels("uv", installer="pip")
    return (f"{reason}, and pip is not installed in this environment ({sys.prefix}), so kernelgen cannot install "
            f"the CUDA toolkit from PyPI. To fix: {shlex.quote(sys.executable)} -m ensurepip, then build again; or "
            f"install the CUDA wheels with the tool that made the environment ({uv}); "
            "or install the CUDA toolkit (nvcc) and set CUDA_HOME")


# What Python says when ``python -m pip`` finds no pip.
_NO_PIP = re.compile(r"No module named pip\b")


def find_toolkit(install: bool = False, echo: Callable[[str], None] = print) -> Toolkit:
    """The CUDA toolkit to build with; with ``install``, where none is found, the PyPI wheels are
    installed into this environment first (unless KERNELGEN_NO_CUDA_INSTALL is set, or pip cannot:
    an isolated build environment, an environment without pip)."""
    try:
        return _found(_find_toolkit(), echo)
    except ToolkitError as exc:
        if not install:
            raise
        if env_flag("KERNELGEN_NO_CUDA_INSTALL"):
            stopped = ". KERNELGEN_NO_CUDA_INSTALL is set, so kernelgen build did not install the CUDA wheels from PyPI"
            raise ToolkitError(str(exc).replace(". To fix: ", f"{stopped}. To fix: ", 1)) from None
        reason = str(exc).split(";", 1)[0]
    refusal = _install_refusal(reason)
    if refusal is not None:
        raise ToolkitError(refusal)
    echo(f"kernelgen: {reason}: installing the CUDA toolkit from PyPI into this environment ({sys.prefix})")
    cmd = [sys.executable, "-m", "pip", "install", *CUDA_WHEELS]
    echo("  $ " + " ".join(cmd[2:]))
    said: list[str] = []
    if _terminal():
        # pip draws its progress bar on the terminal itself (the toolkit is a large download); its
        # errors are read as they come, to tell an environment without pip
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace")
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)
            sys.stderr.write(line)
    else:
        cmd[4:4] = ["--progress-bar", "off"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            said.append(line)
            if line.strip():
                echo(f"  {line.rstrip()}")
    rc = proc.wait()
    if rc != 0 and any(_NO_PIP.search(line) for line in said):
        raise ToolkitError(_no_pip(reason))
    if rc != 0:
        raise ToolkitError(f"installing the CUDA toolkit from PyPI failed (pip's messages above). To fix: "
                           f"{_how_to_get_cuda()}")
    importlib.invalidate_caches()
    tk = _find_toolkit()
    echo(f"kernelgen: installed nvcc {tk.version} in {tk.root}")
    return _found(tk, echo)


def _terminal() -> bool:
    """Whether kernelgen's messages go to a terminal (pip's progress bar is then shown)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


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


def _named_root(var: str) -> Path | None:
    """The toolkit folder a variable names: the folder above the folder of ``$CUDACXX``'s nvcc (None
    where it names no nvcc), or the folder."""
    if var != "CUDACXX":
        return Path(os.environ[var])
    nvcc = _cudacxx()
    if nvcc is None or not (nvcc.is_file() and os.access(nvcc, os.X_OK)) or not _is_nvcc(nvcc):
        return None
    return nvcc.resolve().parent.parent


def _usable(root: Path | None) -> bool:
    """Whether ``root`` is a whole toolkit whose nvcc can link."""
    nvcc = _nvcc_in(root) if root is not None else None
    return nvcc is not None and link_problem(nvcc) is None


def _passed_over(tk: Toolkit) -> list[str]:
    """The variables, of those looked at before ``tk``'s source, that are set and name no toolkit."""
    if _system_hidden():
        return []
    order = ["CUDACXX", "CUDA_HOME", "CUDA_PATH"]
    before = order[:order.index(tk.source)] if tk.source in order else order
    return [var for var in before if os.environ.get(var) and not _usable(_named_root(var))]


def _how_to_get_cuda() -> str:
    """How to get a CUDA toolkit kernelgen finds, with the switches as they are set."""
    wheels = f"install the CUDA wheels into this environment: {pip_install_wheels()}"
    if _system_hidden():
        return (f"{wheels} (KERNELGEN_IGNORE_SYSTEM_CUDA is set: the machine's toolkits, CUDA_HOME's too, are "
                "hidden; unset it to use them)")
    return f"install the CUDA toolkit (nvcc) and set CUDA_HOME, or {wheels}"


def _find_toolkit() -> Toolkit:
    candidates: list[tuple[str, Path]] = []
    passed: list[str] = []  # what was looked at and passed over, with why
    if not _system_hidden():
        for var in ("CUDACXX", "CUDA_HOME", "CUDA_PATH"):
            if not os.environ.get(var):
                continue
            root = _named_root(var)
            if root is None:
                passed.append(f"{var}={os.environ[var]} ({_not_a_toolkit(var, root)})")
            else:
                candidates.append((var, root))
        which = shutil.which("nvcc")
        if which:
            candidates.append(("PATH", Path(which).resolve().parent.parent))
        candidates += [(str(r), r) for r in SYSTEM_ROOTS]
    candidates += [("PyPI wheels", r) for r in _wheel_roots()]
    upgrade = False
    for source, root in candidates:
        nvcc = _nvcc_in(root)
        if nvcc is None:
            why = _not_a_toolkit("", root).removeprefix("is ")
            passed.append(f"{source} ({root}: {why})" if source != str(root) else f"{root} ({why})")
            continue
        version = _version(nvcc)
        problem = link_problem(nvcc)
        if problem is None:
            return Toolkit(nvcc, root, version, source)
        upgrade = upgrade or source == "PyPI wheels"
        passed.append(f"{source} ({root}: nvcc {version or '(unknown version)'} {problem})")
    passed += [f"PyPI wheels ({p})" for p in _partial_wheels()]
    hidden = " (the machine's toolkits are hidden: KERNELGEN_IGNORE_SYSTEM_CUDA is set)" if _system_hidden() else ""
    wheel_dirs = ", ".join(str(d) for d in _site_dirs())
    looked = "; ".join(passed) or f"no CUDA wheels in {wheel_dirs}"
    fix = _how_to_get_cuda()
    if upgrade:
        fix = (f"upgrade the CUDA wheels (nvidia-cuda-nvcc before 13.2.86 looks for its libraries in lib64/, "
               f"where nvidia-cuda-runtime has none): {pip_install_wheels(upgrade=True)}")
    raise ToolkitError(f"no CUDA toolkit (nvcc) found{hidden}; looked in: {looked}. To fix: {fix}")


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
