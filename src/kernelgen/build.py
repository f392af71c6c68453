"""The build driver: generate, then configure (once), build and install each target.

Each target gets its own CMake build tree (``build/<target>``) made from kernelgen's
driver project; ninja decides what to recompile, so a no-op build runs no compiler and
an edited spec or kernel recompiles only its module's translation units. Built files are
installed into ``bindings/<package>/<target>/`` (the project's package, ``kernelgen_ops`` for
kernelgen's own catalog), beside the package's shell (see :mod:`kernelgen.project`).
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelgen import kernel_source, schema, toolkit, writer
from kernelgen.errors import BuildError, SpecError
from kernelgen.model import Catalog, Target

DRIVER_DIR = Path(__file__).parent / "cmake"
_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]\s+(.*)$")
_COMPILE = re.compile(r"^(Building \S+ object|Linking \S+)")


def _path_char(path: Path | str, find: Callable[[str], tuple[str, str] | None]) -> tuple[str, str, str] | None:
    """The first character ``find`` picks in ``path`` (made absolute), or where it leads through
    symbolic links: (the character as shown, " (it leads to ...)" or "", why)."""
    full = Path(os.path.abspath(path))
    places = [full]
    with contextlib.suppress(OSError, RuntimeError):
        if full.resolve() != full:
            places.append(full.resolve())
    for place in places:
        found = find(str(place))
        if found is None:
            continue
        c, why = found
        shown = repr(c) if c.isprintable() else f"U+{ord(c):04X}"
        return shown, f" (it leads to {place})" if place != full else "", why
    return None


def path_problem(path: Path | str) -> str | None:
    """Why a build cannot use ``path`` (a folder or file it hands to CMake or nvcc, made absolute;
    where it leads through symbolic links as well): the character CMake or nvcc cannot take and
    why (:data:`kernelgen.schema.PATH_REFUSED`), or None when a build can use it. For a check before
    a build (an error) or a warning where a project is made."""
    found = _path_char(path, schema.path_refusal)
    if found is None:
        return None
    shown, leads, why = found
    return f"has the character {shown}{leads}, which CMake and nvcc cannot take in a path: {why}"


def path_slowdown(path: Path | str) -> str | None:
    """Why every build with ``path`` compiles its CUDA sources again (:data:`kernelgen.schema.PATH_SLOW`,
    judged as :func:`path_problem` judges), or None."""
    found = _path_char(path, schema.path_slowdown)
    if found is None:
        return None
    shown, leads, why = found
    return f"has the character {shown}{leads}, with which every build compiles the CUDA sources again: {why}"


def slow_path_warnings(paths: Iterable[tuple[str, Path | str, str]]) -> list[str]:
    """A warning for each of ``paths`` (as for :func:`check_paths`) with which every build compiles
    its CUDA sources again (:func:`path_slowdown`), but those inside one warned about already (the
    build folder in the project's)."""
    out: list[str] = []
    warned: list[Path] = []
    for what, path, fix in paths:
        full = Path(os.path.abspath(path))
        slow = path_slowdown(full)
        if slow and not any(full.is_relative_to(w) for w in warned):
            warned.append(full)
            out.append(f"kernelgen: warning: {what} {full} {slow}. The build works; for builds that compile only "
                       f"what changed: {fix}")
    return out


def check_paths(paths: Iterable[tuple[str, Path | str, str]]) -> None:
    """A :class:`BuildError` for the first of ``paths`` (what it is, the path, how to choose another)
    that a build cannot hand to CMake or nvcc (:func:`path_problem`)."""
    for what, path, fix in paths:
        problem = path_problem(path)
        if problem:
            raise BuildError(f"{what} {os.path.abspath(path)} {problem}. Nothing was built; to fix: {fix}")


_MOVE_PROJECT = "move (or copy) the project to a folder whose path has none of these characters"


def build_paths(opts: BuildOptions) -> list[tuple[str, Path | str, str]]:
    """The folders a build of ``opts`` hands to CMake and nvcc, each with what it is and how to
    choose another, for :func:`check_paths`."""
    return [
        ("the project folder", opts.root, _MOVE_PROJECT),
        ("the build folder", opts.build_dir, "choose another with --build-dir DIR"),
        ("the install folder", opts.install_prefix, "choose another with --install-dir DIR"),
        ("kernelgen's CMake driver (kernelgen's installation)", DRIVER_DIR,
         "install kernelgen into an environment whose path has none of these characters"),
        ("the Python interpreter", sys.executable,
         "use a Python environment whose path has none of these characters"),
    ]


def toolkit_paths(tk: toolkit.Toolkit) -> list[tuple[str, Path | str, str]]:
    """The CUDA toolkit's folder and its nvcc, for :func:`check_paths`."""
    fix = ("use a CUDA toolkit whose path has none of these characters (CUDA_HOME), or an environment whose "
           "path has none for the CUDA wheels")
    return [(f"the CUDA toolkit (from {tk.source})", tk.root, fix), ("nvcc", tk.nvcc, fix)]


def tool_paths(tools: Tools) -> list[tuple[str, Path | str, str]]:
    """The programs and folders found for a build (:class:`Tools`) that it hands to CMake and nvcc,
    for :func:`check_paths`."""
    paths: list[tuple[str, Path | str, str]] = [
        *toolkit_paths(tools.cuda),
        ("cmake", tools.cmake, "install cmake where its path has none of these characters"),
        ("ninja", tools.ninja, "install ninja where its path has none of these characters"),
        ("pybind11's CMake folder", tools.pybind11_dir, "install pybind11 where its path has none of these characters"),
    ]
    if tools.torch:
        paths.append(("torch", tools.torch["dir"], "build without the torch reader (--no-torch-reader)"))
    return paths


def check_include_dirs(catalog: Catalog, root: Path, targets: Sequence[Target]) -> list[Path]:
    """Every `build.include_dirs` folder the targets' builds use exists (the compiler would skip a
    missing one without a word, and then fail on the first header it holds), and it and the project
    root have only characters that CMake and nvcc take in a path (:func:`path_problem`). Returns
    those folders (absolute), for :attr:`BuildOptions.include_dirs`."""
    check_paths([("the project folder", root, _MOVE_PROJECT)])
    found: list[Path] = []
    layers = [(catalog.build, "build")] + [(t.build, f"{t.name}.build") for t in targets]
    layers += [(m.build, "build") for m in catalog.modules]
    for build, field_path in layers:
        for d, loc in build.include_dirs:
            path = Path(d) if d.startswith("/") else root / d
            if not path.is_dir():
                what = "is not a folder" if path.exists() else "does not exist"
                raise SpecError(loc, f"{field_path}.include_dirs", f"include folder {d} {what} ({path.resolve()})",
                                "a relative folder is read from the project root; check it out or fix the path")
            problem = path_problem(path)
            if problem:
                raise SpecError(loc, f"{field_path}.include_dirs", f"include folder {d} {problem}",
                                "move (or copy) the headers to a folder whose path has none of these characters")
            full = Path(os.path.abspath(path))
            if full not in found:
                found.append(full)
    return found


@dataclass
class TargetResult:
    target: str
    seconds: float
    compiled: list[str] = field(default_factory=list)  # ninja's steps that compiled or linked a file
    steps: int = 0  # every step ninja ran (also the module objects' localizing, CMake's re-run)
    configured: bool = False
    ptxas: list[str] = field(default_factory=list)  # ptxas's performance messages (ptxas_report)
    warnings: list[str] = field(default_factory=list)  # the compilers' warnings on the project's files

    def summary(self) -> str:
        """What the build ran: ``17 build steps: 9 compiled, 4 linked``, or that nothing was out of date."""
        if not self.steps:
            return "up to date: no build step ran"
        linked = sum(1 for s in self.compiled if s.startswith("Linking"))
        return (f"{self.steps} build step{'s' if self.steps != 1 else ''}: {len(self.compiled) - linked} compiled, "
                f"{linked} linked")


# ptxas's messages about the code it made, in a build's output (nvcc passes them through):
# MMAs it had to serialize, and (with --warn-on-spills, which the module objects are built with)
# register spills. A build that succeeds shows no compiler output, so these are reported apart.
_PTXAS_LOSS = re.compile(r"^ptxas info\s*: \((C\d+)\) Potential Performance Loss: (.*?)"
                         r"(?: for the function '(\S+)')?\.?$")
_PTXAS_WARNING = re.compile(r"^ptxas warning\s*: (.*?)(?: in function '(\S+)')?(?:, (.*))?$")


def _skip_template_args(name: str, i: int) -> int:
    """The index past the template arguments I...E that start at name[i]."""
    depth, i = 1, i + 1
    while i < len(name) and depth:
        d = re.match(r"\d+", name[i:])
        if d is not None:  # a length-prefixed name inside the arguments
            i += d.end() + int(d.group())
        elif name[i] == "L":  # a literal: L <type> [n]<digits> E
            t = re.match(r"L(?:N(?:\d+\w*?|S\w*?_)*?E|\d+|[a-zA-Z])n?\d*E", name[i:])
            i += t.end() if t else 1
        else:
            depth += 1 if name[i] in "IN" else -1 if name[i] == "E" else 0
            i += 1
    return i


def demangle(name: str) -> str:
    """A function's qualified name from its Itanium-mangled symbol, template arguments shown as
    <...> (_Z<len><name>[I...E]..., or the nested _ZN<len><part>[I...E]...E...); anything else
    as it is."""
    if not name.startswith("_Z"):
        return name
    nested = name.startswith("_ZN")
    i, parts = 3 if nested else 2, []
    while (n := re.match(r"\d+", name[i:])) is not None:
        size = int(n.group())
        parts.append(name[i + n.end():i + n.end() + size])
        i += n.end() + size
        if name[i:i + 1] == "I":
            i = _skip_template_args(name, i)
            parts[-1] += "<...>"
        if not nested:
            break
    return "::".join(parts) or name


def ptxas_report(lines: Sequence[str]) -> list[str]:
    """ptxas's performance messages in build output, one line per kernel and message, in order,
    without repeats: serialized MMAs (the (Cnnnn) 'Potential Performance Loss' notes) and
    warnings such as register spills."""
    out: list[str] = []
    for ln in lines:
        m = _PTXAS_LOSS.match(ln.strip())
        if m:
            what = f"{demangle(m.group(3))}: " if m.group(3) else ""
            out.append(f"{what}{m.group(2)} ({m.group(1)})")
            continue
        m = _PTXAS_WARNING.match(ln.strip())
        if m:
            what = f"{demangle(m.group(2))}: " if m.group(2) else ""
            out.append(f"{what}{m.group(1)}{', ' + m.group(3) if m.group(3) else ''}")
    return list(dict.fromkeys(out))


# A compiler's warning: nvcc's front end (``f.cu(12): warning #177-D: ...``) or the host compiler
# (``f.cu:12:5: warning: ...``).
_WARNING = re.compile(r"^(?P<path>[^\s(:][^(:]*?)(?:\((?P<l1>\d+)\):|:(?P<l2>\d+):\d+:) "
                      r"warning(?: #(?P<code>[\w-]+))?: (?P<msg>.*)$")


# Folders that by convention hold other projects' code inside a project (a CUTLASS checkout).
_VENDORED = {"third_party", "thirdparty", "3rdparty", "external", "extern", "vendor", "vendored", "deps", "_deps",
             "submodules"}
# At most this many warnings are listed after a build (-v shows every line).
MAX_WARNINGS = 40


def _project_file(path: str, root: Path) -> Path | None:
    """A compiler's path (absolute, or relative to ``root``) relative to the project root, when it is
    a file of the project and not of a library kept inside it (third_party/, external/ ...)."""
    full = Path(path)
    try:
        rel = (full if full.is_absolute() else root / full).resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return None
    if not rel.parts or any(part.lower() in _VENDORED for part in rel.parts[:-1]):
        return None
    return rel


def source_warnings(lines: Sequence[str], root: Path) -> list[str]:
    """The compilers' warnings about the project's own files (kernel sources and the headers they
    include, under ``root`` and outside ``generated/`` and build folders), as ``path:line: message``
    relative to ``root``, in order, without repeats. Warnings about third-party headers (an include
    folder outside the project, the toolkit, or a library kept inside it under third_party/,
    external/, vendor/ ...) are left to ``--verbose``."""
    out: list[str] = []
    for ln in lines:
        m = _WARNING.match(ln.strip())
        if m is None:
            continue
        rel = _project_file(m.group("path"), root)
        if rel is None or rel.parts[0] in ("generated", "build", "bindings", ".venv"):
            continue
        code = f" [#{m.group('code')}]" if m.group("code") else ""
        out.append(f"{rel.as_posix()}:{m.group('l1') or m.group('l2')}: {m.group('msg').strip()}{code}")
    return list(dict.fromkeys(out))


def torch_info(cache_dir: Path) -> dict[str, str] | None:
    """Where torch is installed, its version and C++ ABI, without importing it here.

    The ABI flag needs torch imported, which takes seconds: it is asked once, in a
    subprocess, and cached per torch installation under the build folder.
    """
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    tdir = Path(spec.origin).parent
    if not (tdir / "include" / "torch" / "csrc" / "autograd" / "python_variable.h").is_file():
        return None
    m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", (tdir / "version.py").read_text())
    if m is None:
        return None
    info = {"dir": str(tdir), "version": m.group(1)}
    cache = cache_dir / ".kernelgen-torch.json"
    try:
        cached = json.loads(cache.read_text())
        if {k: cached[k] for k in info} == info:
            return cached
    except (OSError, ValueError, KeyError):
        pass
    probe = subprocess.run([sys.executable, "-c", "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"],
                           capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        return None
    info["cxx11_abi"] = probe.stdout.strip()
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(info))
    return info


@dataclass
class BuildOptions:
    root: Path
    build_dir: Path
    install_prefix: Path
    jobs: int | None = None
    compiler_launcher: str | None = None
    verbose: bool = False
    build_type: str = "Release"
    extra_cmake_args: Sequence[str] = ()
    torch_reader: bool = True  # build the C++ torch tensor reader when torch is installed
    package: str = "kernelgen_ops"  # the project's Python package: installs go to install_prefix/package
    lineinfo: bool = True  # device code with source line information (nvcc -lineinfo: the sources' paths)
    include_dirs: Sequence[Path] = ()  # the specs' include folders (check_include_dirs): their headers' paths


class _Signalled(BaseException):
    """A signal that ends kernelgen (SIGTERM, SIGHUP) arrived while a command ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_signalled(signum: int, frame: object) -> None:
    raise _Signalled(signum)


# How long a stopped command's session is given to exit after SIGINT, then after SIGTERM, then
# after SIGKILL (seconds).
STOP_WAITS = (10.0, 5.0, 5.0)


def _run(cmd: list[str], cwd: Path, echo: Callable[[str], None], verbose: bool) -> tuple[int, list[str], list[str]]:
    """Run a command, streaming progress; returns (exit code, output lines, ninja steps).

    The command runs in a session (and process group) of its own. When kernelgen stops while it runs
    (Ctrl-C, SIGINT sent to kernelgen alone, SIGTERM or SIGHUP, a closed output, any error), the whole
    session (CMake, ninja and the compilers they started) is stopped and waited for before kernelgen
    goes on stopping (a SIGTERM or SIGHUP then ends it as it would have), so that no compiler outlives
    the build and its lock."""
    lines: list[str] = []
    steps: list[str] = []
    env = dict(os.environ)
    env.setdefault("NINJA_STATUS", "[%f/%t] ")
    handlers: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is signal.SIG_DFL:  # a signal that would end kernelgen on the spot
                handlers[signum] = signal.signal(signum, _raise_signalled)
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                errors="replace", start_new_session=True)
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                line = line.rstrip("\n")
                lines.append(line)
                m = _PROGRESS.match(line)
                if m:
                    steps.append(m.group(3))
                    echo(f"  [{m.group(1)}/{m.group(2)}] {_short(m.group(3))}")
                elif verbose:
                    echo(f"  {line}")
            return proc.wait(), lines, steps
        except BaseException:
            _stop(proc)
            raise
    except _Signalled as exc:
        # the children are gone: end as the signal would have ended kernelgen
        signal.signal(exc.signum, signal.SIG_DFL)
        handlers.pop(exc.signum, None)
        os.kill(os.getpid(), exc.signum)
        raise
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]


def _session(sid: int) -> list[int] | None:
    """The processes of session ``sid`` that still run (a zombie, which has exited and waits for its
    parent to collect it, does not), from /proc; None where there is no /proc to read."""
    if not Path("/proc/self/stat").is_file():
        return None
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, _, session = stat.read_text().rsplit(")", 1)[1].split()[:4]
            if int(session) == sid and state != "Z":
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _running(proc: subprocess.Popen[str]) -> bool:
    """Whether the command, or anything it started in its session, still runs."""
    if proc.poll() is None:
        return True
    members = _session(proc.pid)
    if members is not None:
        return bool(members)
    try:  # without /proc: whether its process group is there at all
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _signal(proc: subprocess.Popen[str], signum: int) -> None:
    """``signum`` to the command's process group and to every other process of its session (ninja
    starts each compiler in a process group of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)
    for pid in _session(proc.pid) or []:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _stop(proc: subprocess.Popen[str], waits: Sequence[float] | None = None) -> None:
    """Stops a command started in a session of its own, with everything it started: SIGINT to every
    process of the session (as Ctrl-C in a terminal: ninja stops its compilers and waits for them),
    then SIGTERM, then SIGKILL, each after a bounded wait for them all to exit. The command's output
    is read and dropped meanwhile (a command blocked writing to a full pipe could not exit). Another
    interruption while it waits moves on to the next signal."""
    fd = proc.stdout.fileno() if proc.stdout is not None else None
    if fd is not None:
        os.set_blocking(fd, False)
    for signum, wait in zip((signal.SIGINT, signal.SIGTERM, signal.SIGKILL), waits or STOP_WAITS):
        try:
            _signal(proc, signum)
            deadline = time.monotonic() + wait
            while _running(proc):
                if time.monotonic() >= deadline:
                    break
                if fd is not None:
                    with contextlib.suppress(OSError):
                        while os.read(fd, 65536):
                            pass
                time.sleep(0.05)
            else:
                break
        except (KeyboardInterrupt, _Signalled):
            continue
    if proc.stdout is not None:
        with contextlib.suppress(OSError):
            proc.stdout.close()


def _short(step: str) -> str:
    m = re.search(r"Building (\S+) object (\S+)", step)
    if m:
        obj = m.group(2).split(".dir/")[-1].removesuffix(".o")
        if "/kernelgen/runtime/src/" in f"/{obj}":  # kernelgen's runtime, wherever kernelgen is installed
            obj = "kernelgen runtime/" + obj.rsplit("/", 1)[-1]
        return f"compiling {obj} ({m.group(1)})"
    m = re.search(r"Linking \S+ (?:shared|static)? ?(?:module|library) (\S+)", step)
    if m:
        return f"linking {m.group(1).split('/')[-1]}"
    return step[:120]


# nvcc (EDG) naming a name it cannot find: unqualified, at global scope, or in a namespace.
_NVCC_ERROR = re.compile(r"^(?P<path>.+?\.cu)\((?P<line>\d+)\): error: (?P<msg>.*)$")
_UNDEFINED = re.compile(r'identifier "(?P<a>[^"]+)" is undefined|(?:the global scope|namespace "[^"]*") has no '
                        r'(?:member )?"(?P<b>[^"]+)"')
# The line of a generated .cu that names a kernel's symbol (at global scope): the symbol, then the
# comment naming the spec's kernel and its parameters.
_SIGNATURE_CHECK = re.compile(r"constexpr auto kg_kernel_\w+ = kg::pick<\w+>\(&(?P<sym>.+?), 0\);  "
                              r"// kernelgen: (?P<where>\S+?:\d+): kernel '(?P<kernel>[^']+)': "
                              r"parameters \((?P<sig>[^)\n]*)\)")
# The linker's own lines: what collect2's "ld returned 1 exit status" summarises.
_LINKER = re.compile(r"(?:^|[\s/])ld(?:\.\w+)?: |multiple definition of|undefined reference to|first defined here"
                     r"|collect2: ")


def _base_name(symbol: str) -> str:
    """A symbol's last name, without namespaces or template arguments: what nvcc says is missing."""
    return symbol.split("<", 1)[0].split("::")[-1].strip()


# a generated translation unit's includes that may be the project's sources (which it includes as
# <path>, from the project root; a path the project does not have is passed over)
_SOURCE_INCLUDE = re.compile(r'^#include [<"](?P<path>[^">]+\.(?:cu|cuh|h|hpp))[">]', re.M)


def _global_names_hint(missing: str, generated: str, root: Path) -> str:
    """``; the sources declare __global__ a, b`` (with the closest first) for the sources a
    generated translation unit includes from the project, or nothing when it has none."""
    sources = []
    for m in _SOURCE_INCLUDE.finditer(generated):
        if m.group("path").startswith("kernelgen/"):
            continue
        try:
            sources.append((m.group("path"), (root / m.group("path")).read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    names = kernel_source.global_names(sources)
    if not names:
        return ""
    base = {n: _base_name(n) for n in names}
    same = [n for n in names if base[n] == missing]
    if same:
        return (f" (the sources declare __global__ {', '.join(same)}: spell the symbol with its namespace, or "
                "check the preprocessor branch that declares it is taken)")
    close = difflib.get_close_matches(missing, list(base.values()), n=1, cutoff=0.6)
    if close:
        full = next(n for n in names if base[n] == close[0])
        return f" (did you mean '{full}'? it is a __global__ function of the sources)"
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return f" (the sources declare __global__ functions {shown})"


def _undefined_symbols(lines: list[str], root: Path) -> list[str]:
    """For each kernel whose ``symbol`` nvcc cannot find or compile in a generated translation
    unit: the spec's file:line, the kernel and the symbol, read back from the generated line that
    names that kernel's symbol. A symbol is the kernel's when nvcc names its function name as
    undeclared, or reports any error on that line (a template-id whose arguments do not compile:
    an undeclared type, a wrong number of arguments). Where the line's errors include one of the
    arguments', that is the one reported, not the failed choice among overloads it leads to. A
    symbol reported undeclared gets that explanation alone: the other errors on its line (``type
    name is not allowed`` for the template arguments of a name nvcc does not know) follow from it."""
    out: list[str] = []
    checks: dict[Path, list[tuple[int, re.Match[str]]]] = {}
    texts: dict[Path, str] = {}
    on_line: dict[tuple[Path, int], list[str]] = {}  # the errors on a symbol's line, in order

    def text_of(path: Path) -> str:
        if path not in texts:
            try:
                texts[path] = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                texts[path] = ""
        return texts[path]

    def add(msg: str) -> None:
        if msg not in out:
            out.append(msg)

    found: list[tuple[Path, int, re.Match[str]]] = []
    undeclared: set[tuple[Path, int]] = set()  # the symbols' lines explained as not declared
    for ln in lines:
        m = _NVCC_ERROR.match(ln.strip())
        if m is None:
            continue
        u = _UNDEFINED.search(m.group("msg"))
        path = Path(m.group("path"))
        path = path if path.is_absolute() else root / path
        if "generated" not in path.parts:
            continue
        if path not in checks:
            text = text_of(path)
            checks[path] = [(text.count("\n", 0, c.start()) + 1, c) for c in _SIGNATURE_CHECK.finditer(text)]
        name = (u.group("a") or u.group("b")) if u else None
        line = int(m.group("line"))
        # An error on a symbol's line is about that symbol alone (another kernel's symbol of the
        # same name, spelled with its namespace, may be fine); elsewhere, about each of that name.
        on_a_symbol = any(at == line for at, _ in checks[path])
        for at, c in checks[path]:
            sym = c.group("sym").removeprefix("::")
            where = f"kernelgen: {c.group('where')}: kernel '{c.group('kernel')}': symbol '{sym}'"
            if name is not None and _base_name(c.group("sym")) == _base_name(name) and (line == at or not on_a_symbol):
                undeclared.add((path, at))
                add(f"{where} is not declared by the module's sources; make the spec's symbol name the kernel's "
                    "__global__ function (and its namespace), or list the source that defines it under sources"
                    + _global_names_hint(_base_name(name), text_of(path), root))
            elif line == at:
                if (path, at) not in on_line:
                    found.append((path, at, c))
                on_line.setdefault((path, at), []).append(m.group("msg").strip())
    for path, at, c in found:
        if (path, at) in undeclared:
            continue
        sym = c.group("sym").removeprefix("::")
        where = f"kernelgen: {c.group('where')}: kernel '{c.group('kernel')}': symbol '{sym}'"
        errors = on_line[(path, at)]
        own = [e for e in errors if '"kg::pick"' not in e]
        if own:
            add(f"{where} does not compile: {own[0]}; check the template arguments of the spec's symbol against "
                "the kernel's template parameters, and that the sources declare every type and function they name "
                "(spelled as from the global namespace)")
        elif _overloaded(c.group("sym"), text_of(path), root):
            add(f"{where} names overloaded __global__ functions, and none takes exactly the spec's parameters "
                f"({c.group('sig')}); make the spec's args one overload's parameters, in order, with its types "
                "(among overloads an integer must be spelled as the spec's C++ type: int64_t, not long long), or "
                "give that kernel a name of its own")
        else:
            add(f"{where} names no function that can take the spec's parameters ({c.group('sig')}): for a "
                "template, check the symbol's template arguments against its template parameters (their number, "
                "kinds and order) and that the instance they name is declared by the sources")
    return out


# A host argument's __constant__ variable, checked by size in a generated .cu (CppKernel.symbol_copies).
_SYMBOL_COPY = re.compile(r"static_assert\(sizeof\((?P<var>[\w:]+)\) == \d+, \"kernelgen: (?P<where>\S+?:\d+): "
                          r"kernel '(?P<kernel>[^']+)': host argument '(?P<arg>[^']+)': to_symbol '(?P<sym>[^']+)'")
# The variables a source declares in device memory (``__constant__ float g_scale;``).
_DEVICE_VARIABLE = re.compile(r"\b__(?:constant|device)__\s+(?:(?:static|const|volatile|__align__\s*\(\s*\d+\s*\))\s+)*"
                              r"[A-Za-z_][\w:<>, ]*?[\s*&]+([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*[;=]")


def _undefined_constants(lines: list[str], root: Path) -> list[str]:
    """For each host argument whose ``to_symbol`` names no variable of the module's sources (nvcc
    reports the name undeclared on the generated line that checks its size): the spec's file:line
    and the __constant__ / __device__ variables the sources do declare, the closest first."""
    out: list[str] = []
    for ln in lines:
        m = _NVCC_ERROR.match(ln.strip())
        if m is None or _UNDEFINED.search(m.group("msg")) is None:
            continue
        path = Path(m.group("path"))
        path = path if path.is_absolute() else root / path
        if "generated" not in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        line = text.splitlines()[int(m.group("line")) - 1] if int(m.group("line")) <= text.count("\n") + 1 else ""
        c = _SYMBOL_COPY.search(line)
        if c is None:
            continue
        variables = []
        for inc in _SOURCE_INCLUDE.finditer(text):
            if inc.group("path").startswith("kernelgen/"):
                continue
            try:
                src = kernel_source.strip_comments((root / inc.group("path")).read_text(encoding="utf-8",
                                                                                        errors="replace"))
            except OSError:
                continue
            spaces = kernel_source.namespaces_at(src)
            for v in _DEVICE_VARIABLE.finditer(src):
                ns = [n for at, n in spaces if at <= v.start()][-1]
                variables.append(f"{ns}::{v.group(1)}" if ns else v.group(1))
        close = difflib.get_close_matches(c.group("sym").removeprefix("::"), variables, n=1, cutoff=0.6)
        hint = (f" (did you mean '{close[0]}'?)" if close else
                f" (the sources declare {', '.join(variables[:8])})" if variables else
                " (the sources declare no __constant__ variable)")
        msg = (f"kernelgen: {c.group('where')}: kernel '{c.group('kernel')}': host argument '{c.group('arg')}': "
               f"to_symbol '{c.group('sym')}' is not declared by the module's sources; name the __constant__ "
               f"variable the kernel reads, with its namespace{hint}")
        if msg not in out:
            out.append(msg)
    return out


def _overloaded(symbol: str, generated: str, root: Path) -> bool:
    """Whether the sources a generated translation unit includes declare more than one __global__
    function that ``symbol`` names (overloads, or templates beside functions), by their
    declarations: those its qualified name reaches (kernel_source's lookup rule), else (a name
    reached through a using-directive, say) every one of its last name."""
    want = "".join(symbol.split("<", 1)[0].split()).removeprefix("::")
    decls = []
    for m in _SOURCE_INCLUDE.finditer(generated):
        if m.group("path").startswith("kernelgen/"):
            continue
        try:
            text = (root / m.group("path")).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        decls += [d for d in kernel_source.global_decls(kernel_source.strip_comments(text))
                  if d.name == _base_name(want) and d.template_args is None]
    spelled = [d for d in decls if want in d.spellings] or decls
    return len({" ".join(d.params.split()) for d in spelled}) > 1


def _failed_step_blocks(lines: list[str]) -> list[list[str]]:
    """Each failed ninja step's lines (``FAILED: <outputs>``, its command, its output), in order."""
    blocks: list[list[str]] = []
    inside = False
    for ln in lines:
        if ln.startswith("FAILED: "):
            blocks.append([ln])
            inside = True
        elif inside and (_PROGRESS.match(ln) or ln.startswith("ninja: ")):
            inside = False
        elif inside:
            blocks[-1].append(ln)
    return blocks


def _failed_steps_output(lines: list[str]) -> list[str]:
    """What the failed ninja steps printed, without their command lines: ninja prints
    ``FAILED: <outputs>``, the command, then the command's output (:func:`_failed_step_blocks`)."""
    return [ln for block in _failed_step_blocks(lines) for ln in block[2:]]


# A module's object as the linker names it: compiled (src/<module>.cu.o), or with its hidden
# symbols made local (kg_local/<module>.o).
_LINKED_OBJECT = re.compile(r"/(?:src/(?P<module>[a-z][a-z0-9_]*)\.cu|kg_local/(?P<local>[a-z][a-z0-9_]*))\.o\b")


def _modules_in_link(linker: list[str], root: Path | None) -> list[str]:
    """The spec file:line (its ``sources``) of each module whose object the linker's lines name."""
    if root is None:
        return []
    out: list[str] = []
    found = (x.group("module") or x.group("local") for ln in linker for x in _LINKED_OBJECT.finditer(ln))
    for m in dict.fromkeys(found):
        spec = next(iter(sorted((root / "specs").rglob(f"{m}.yaml"))), None)
        try:
            lines = spec.read_text(encoding="utf-8").splitlines() if spec else []
        except OSError:
            lines = []
        if not lines:
            continue
        line = next((i + 1 for i, t in enumerate(lines) if t.startswith("sources:")), 1)
        rel = spec.relative_to(root).as_posix()
        out.append(f"kernelgen: {rel}:{line}: module '{m}': its sources are in this failed link")
    return out


_ERROR_LINE = re.compile(r"\((\d+)\): error")
_LAYOUT_NOTE = re.compile(r'kg_layout<kg_spec, kg_cpp> \[with kg_spec=(\d+)\w*, kg_cpp=(\d+)\w*\]" at line (\d+)')


def _layout_value(lines: list[str], error: str) -> str:
    """For a failed struct layout check (a static_assert over kg_layout<spec's, C++ type's>), the
    C++ type's number, which nvcc's note on the kg_layout instantiation at the check's line shows."""
    at = _ERROR_LINE.search(error)
    if at is None:
        return ""
    for ln in lines:
        note = _LAYOUT_NOTE.search(ln)
        if note and note.group(3) == at.group(1):
            return f" (the C++ type's: {note.group(2)})"
    return ""


# The first line of a compiler's error (never indented: indented lines are an error's context, its
# source excerpt say): nvcc's front end, the host compiler, the linker (``error``), or a CUDA tool's
# fatal error (``ptxas fatal   : ...``, ``nvlink fatal   : ...``).
_ERROR_START = re.compile(r"^\S.*\berror\b|^(?:ptxas|nvlink|nvcc|fatbinary|cicc|cudafe\+\+)\b.*\bfatal\b")
# nvcc's count at the end of a translation unit's errors.
_ERROR_COUNT = re.compile(r"^\d+ errors? detected in the compilation of ")
# Lines that belong to the error above them: the source excerpt and caret (indented), nvcc's
# "detected during instantiation of ... at line N of FILE" notes, the host compiler's notes.
_ERROR_CONTEXT = re.compile(r"^\s+\S|: note: |: required from |\bIn instantiation of\b")
# A file and line in a compiler's context line: nvcc's ``at line 12 of FILE`` or ``FILE(12)``, the
# host compiler's ``FILE:12:``.
_CONTEXT_PLACE = re.compile(r"at line \d+ of (?P<a>\S+)|^\s*(?P<b>[^\s(:][^(:]*?)(?:\(\d+\)|:\d+:)")
# At most this many errors are shown, each with at most this many of its context lines (and, past
# them, those that name a file of the project: where a template in a library was instantiated).
MAX_ERRORS = 8
MAX_CONTEXT = 8
# A compiler or ptxas refusing an option: gcc's ``unrecognized command-line option '--x'`` (quoted
# in U+2018 / U+2019 in a UTF-8 locale), nvcc's and ptxas's ``Unknown option '-x'``.
_QUOTE, _UNQUOTE = "['`\"\u2018]", "['`\"\u2019]"
_UNKNOWN_OPTION = re.compile(rf"(?:unrecognized (?:command[- ]line )?option|Unknown option) {_QUOTE}"
                             rf"(?P<option>.+?){_UNQUOTE}")
_UNRESOLVED_EXTERN = re.compile(r"^ptxas fatal\s*: Unresolved extern function '(?P<sym>[^']+)'")


def _compiler_errors(output: list[str], root: Path | None, limit: int = MAX_ERRORS) -> list[str]:
    """The compilers' errors in a failed build's output (the first ``limit``), each with its own
    context lines (bounded, keeping those that lead back to the project's files), then nvcc's
    error counts."""
    shown: list[str] = []
    counts = [ln for ln in output if _ERROR_COUNT.match(ln)]
    errors = 0
    i = 0
    while i < len(output):
        ln = output[i]
        i += 1
        if _ERROR_COUNT.match(ln) or not _ERROR_START.search(ln):
            continue
        errors += 1
        context: list[str] = []
        while i < len(output) and not _ERROR_START.search(output[i]) and (
                _ERROR_CONTEXT.search(output[i])
                or (not output[i].strip() and i + 1 < len(output) and _ERROR_CONTEXT.search(output[i + 1])
                    and not _ERROR_COUNT.match(output[i + 1]))):
            if output[i].strip():
                context.append(output[i])
            i += 1
        if errors > limit:
            continue
        kept = context[:MAX_CONTEXT]
        if root is not None:
            kept += [c for c in context[MAX_CONTEXT:]
                     if (m := _CONTEXT_PLACE.search(c)) and _project_file(m.group("a") or m.group("b"), root)]
        shown.append(ln)
        shown += kept
        if len(kept) < len(context):
            shown.append(f"    ... ({len(context) - len(kept)} more lines of this error; -v shows them)")
    if errors > limit:
        shown.append(f"... ({errors - limit} more errors; -v shows them)")
    return shown + counts


def _option_origins(output: list[str], root: Path | None) -> list[str]:
    """For each option the compilers or ptxas refuse: the spec lines whose ``build.nvcc_flags``
    (specs/project.yaml's, a target's in specs/targets.yaml, a module's) give it. The generated
    CMakeLists.txt adds those settings to each module's compile, after kernelgen's own options."""
    if root is None:
        return []
    out: list[str] = []
    refused = {m.group("option"): (ln.split(":", 1)[0].split() or ["the compiler"])[0]
               for ln in output if (m := _UNKNOWN_OPTION.search(ln))}
    for option, tool in refused.items():
        bare = option.lstrip("-")
        if not bare:
            continue
        places = []
        for spec in sorted((root / "specs").rglob("*.yaml")):
            try:
                text = spec.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "nvcc_flags" not in text:
                continue
            places += [f"{spec.relative_to(root).as_posix()}:{n}" for n, line in enumerate(text.splitlines(), 1)
                       if re.search(rf"(?<![\w-])-*{re.escape(bare)}(?![\w-])", line.split("#", 1)[0])]
        if places:
            out += [f"kernelgen: {where}: option '{option}' is one of the specs' build flags (build.nvcc_flags, "
                    f"passed to nvcc for the modules it applies to), and {tool} refuses it; fix or remove it "
                    "(an option for the host compiler goes in -Xcompiler=..., one for ptxas in -Xptxas=...)"
                    for where in places]
        else:
            out.append(f"kernelgen: {tool} refuses option '{option}', and no spec's build.nvcc_flags gives it (an "
                       "option given to CMake, CMAKE_CUDA_FLAGS or CUDAFLAGS, say)")
    return out


def _ptxas_hints(output: list[str]) -> list[str]:
    """What a ptxas failure means in kernelgen's terms: a device function declared but defined in no
    source of the module (each module is compiled whole, without relocatable device code)."""
    out = []
    for ln in output:
        m = _UNRESOLVED_EXTERN.match(ln.strip())
        if m:
            out.append(f"kernelgen: the device function {demangle(m.group('sym'))} ({m.group('sym')}) is declared "
                       "but not defined in the module's translation unit: each module's sources are compiled "
                       "together, without relocatable device code; define it in (or #include its definition "
                       "from) a source the module lists")
    return list(dict.fromkeys(out))


# A static_assert of kernelgen's own that failed: a check whose message starts "kernelgen: " (a
# spec's file:line, or the runtime's), or the layout helper's (kg_layout) beside a layout check.
_OWN_CHECK = re.compile(r'static assertion failed with "(?:kernelgen: |the spec\'s layout \(kg_spec\))')
# At most this many of the compiler's errors that precede kernelgen's first failed check are shown.
MAX_ERRORS_BEFORE_CHECK = 3


def _errors_before_check(lines: list[str], check: str) -> list[str]:
    """The output of the failed step (the translation unit) that reports kernelgen's check
    ``check``, before it, when it holds compiler errors of its own (not kernelgen's static_asserts):
    a check that fails after such an error (an undeclared or ill-formed type) may only follow from
    it. kernelgen's own failed static_asserts among them are left out; empty when there is no
    other error before the check."""
    at = lines.index(check)
    start = 0
    for i in range(at - 1, -1, -1):
        if lines[i].startswith("FAILED: "):
            start = i + 2  # past the command line
            break
    before: list[str] = []
    own = False  # inside one of kernelgen's own static_asserts (its error line and context): left out
    for ln in lines[start:at]:
        if _ERROR_START.search(ln):
            own = bool(_OWN_CHECK.search(ln))
        if not own and not _PROGRESS.match(ln):
            before.append(ln)
    if not any(_ERROR_START.search(ln) and not _ERROR_COUNT.match(ln) for ln in before):
        return []
    return before


# A compiler error (nvcc's front end) at a file's line.
_ERROR_AT = re.compile(r"^(?P<path>\S.*?)\((?P<line>\d+)\): error: (?P<msg>.*)$")
# nvcc's "(declared at line N of FILE)" or, in the same file, "(declared at line N)".
_DECLARED_AT = re.compile(r"\bdeclared at line (?P<line>\d+)(?: of \"?(?P<path>[^\s\")]+))?")
# A forward declaration of a struct type in a generated C++ API header (CppModule.struct_decls):
# its comment names the spec's struct.
_FORWARD_DECL = re.compile(r"\bstruct \w+; (?:\} )*\s*// (?P<where>\S+?:\d+): struct '(?P<struct>[^']+)' "
                           r"\(C\+\+ (?P<cpp>.*?)\): forward-declared")


def _forward_declared(errors: list[str], root: Path | None) -> list[str]:
    """For each struct whose forward declaration in a generated C++ API header the compiler
    refuses together with the sources' declaration of that name (a typedef or an alias: nvcc's
    "invalid redeclaration of type name", at either declaration, naming the other's line): the
    struct's spec line and what it needs."""
    out: list[str] = []
    texts: dict[Path, list[str]] = {}

    def line_of(path_text: str, line: int) -> str:
        path = Path(path_text)
        if not path.is_absolute() and root is not None:
            path = root / path
        if "generated" not in path.parts:
            return ""
        if path not in texts:
            try:
                texts[path] = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                texts[path] = []
        return texts[path][line - 1] if 0 < line <= len(texts[path]) else ""

    for ln in errors:
        m = _ERROR_AT.match(ln.strip())
        if m is None:
            continue
        places = [(m.group("path"), int(m.group("line")))]
        places += [(d.group("path") or m.group("path"), int(d.group("line")))
                   for d in _DECLARED_AT.finditer(m.group("msg"))]
        for path, line in places:
            f = _FORWARD_DECL.search(line_of(path, line))
            if f is None:
                continue
            msg = (f"kernelgen: {f.group('where')}: struct '{f.group('struct')}' (C++ {f.group('cpp')}): the sources "
                   f"declare {f.group('cpp')} otherwise than as a struct or class of that name (a typedef or an "
                   "alias, say), which the C++ API header cannot forward-declare; give the struct header: the "
                   "source that declares the type (the C++ API header includes it instead)")
            if msg not in out:
                out.append(msg)
    return out


# Where an error is: the compilers' ``FILE(12): error``, ``FILE:12:5: error``; CMake's ``CMake Error at FILE:12``.
_ERROR_FILE = re.compile(r"^(?:CMake Error at (?P<cmake>[^:]+):\d+|(?P<path>[^\s(:][^(:]*?)(?:\(\d+\)|:\d+)[:,]?)")


def _override_notes(lines: list[str], root: Path) -> list[str]:
    """For each generated file an error of the failed steps is in whose template the project
    replaces (``templates/<name>.j2``, copied whole from an earlier kernelgen, say): that the file
    comes from the project's own template, and kernelgen's to compare it with."""
    from kernelgen.emit.base import OWN_TEMPLATES, output_template
    from kernelgen.loader import PROJECT_FILE

    folder = root / "templates"
    if not folder.is_dir():
        return []
    modules = sorted({p.stem for p in (root / "specs").rglob("*.yaml")} - {"targets", Path(PROJECT_FILE).stem})
    out: list[str] = []
    for ln in _failed_steps_output(lines) or lines:
        m = _ERROR_FILE.match(ln)
        if m is None or not (ln.startswith("CMake Error") or _ERROR_START.search(ln)):
            continue
        rel = _project_file(m.group("cmake") or m.group("path"), root)
        if rel is None or len(rel.parts) < 3 or rel.parts[0] != "generated":
            continue
        template = output_template("/".join(rel.parts[2:]), modules)
        if template is None or not (folder / template).is_file():
            continue
        try:
            extends = f"kernelgen/{template}" in (folder / template).read_text(encoding="utf-8", errors="replace")
        except OSError:
            extends = False
        note = (f"kernelgen: {rel.as_posix()} comes from {folder.name}/{template}, the project's own template: "
                f"compare it with kernelgen's ({OWN_TEMPLATES / template}); "
                + (f"it names \"kernelgen/{template}\": what it writes around kernelgen's is the project's own"
                   if extends else
                   "a template copied whole from another kernelgen version writes what that version's build expected "
                   f"(where its headers are, its names), and one that extends or includes \"kernelgen/{template}\" "
                   "stays in step with kernelgen's"))
        if note not in out:
            out.append(note)
    return out


# Failed steps explained one by one in a build's error; the others are counted.
MAX_FAILED_STEPS = 8


def _explain_failure(lines: list[str], root: Path | None = None, project: Path | None = None) -> str:
    """:func:`_explain_step` for a build with one failed step; with several (ninja goes on past a
    failure), each step's explanation under a line naming what it was making."""
    blocks = _failed_step_blocks(lines)
    if len(blocks) < 2:
        return _explain_step(lines, root, project)
    parts = [f"{len(blocks)} build steps failed:"]
    for i, block in enumerate(blocks[:MAX_FAILED_STEPS], 1):
        made = block[0].removeprefix("FAILED: ").strip()
        made = re.sub(r"^\[code=\d+\]\s*", "", made)
        parts += [f"failed step {i} of {len(blocks)}: {made}", _explain_step(block, root, project)]
    if len(blocks) > MAX_FAILED_STEPS:
        parts.append(f"... and {len(blocks) - MAX_FAILED_STEPS} more failed steps (kernelgen build -v shows them)")
    return "\n".join(parts)


def _explain_step(lines: list[str], root: Path | None = None, project: Path | None = None) -> str:
    """The most useful part of a failed build log: kernelgen's own checks first (after the
    compiler's first errors where they precede the check in its translation unit), then a kernel
    symbol the compiler cannot find or a struct it cannot forward-declare (named by its spec), then
    the compilers' errors with their context lines (without the failed command lines), and where a
    refused option comes from; for a failed link, the linker's own lines. Last, for an error in a
    file rendered from one of the project's templates (``project``, else ``root``: the project
    root), which template that is (:func:`_override_notes`)."""
    text = _explain(lines, root)
    notes = _override_notes(lines, project or root) if (project or root) is not None else []
    return "\n".join([text, *notes]) if notes else text


def _explain(lines: list[str], root: Path | None) -> str:
    """:func:`_explain_step` but for the notes about the project's templates."""
    # kernelgen's checks are static_asserts whose message starts "kernelgen: <spec>:<line>"; nvcc
    # reports one as `error: static assertion failed with "<message>"`. (Its echo of a source line
    # that merely holds such a message, under another error, is not one of them.)
    # A check that fails after compiler errors of its own translation unit may only follow from them
    # (a type that does not compile has no members): those errors come first, then the check.
    ours = [ln for ln in lines if "kernelgen: " in ln and "static assertion failed" in ln]
    if ours:
        msg = ours[0]
        i = msg.find("kernelgen: ")
        check = msg[i:].strip().strip('"') + _layout_value(lines, msg)
        before = _errors_before_check(lines, msg)
        if not before:
            return check
        errors = [ln for ln in before if _ERROR_START.search(ln)]
        named = (_undefined_symbols(errors, root) + _undefined_constants(errors, root)) if root is not None else []
        return "\n".join(_forward_declared(errors, root) + named
                         + _compiler_errors(before, root, MAX_ERRORS_BEFORE_CHECK)
                         + ["kernelgen: the compiler's errors above come before kernelgen's first failed check, "
                            "which may follow from them:", check])
    output = _failed_steps_output(lines) or lines
    errors = [ln for ln in output if _ERROR_START.search(ln)]
    shown = _compiler_errors(output, root)
    undefined = _forward_declared(errors, root)
    if root is not None:
        undefined += _undefined_symbols(errors, root) + _undefined_constants(errors, root)
    if undefined:
        return "\n".join(undefined + shown)
    if any(_LINKER.search(ln) for ln in errors):
        linker = [ln for ln in _failed_steps_output(lines) if ln.strip()]
        if linker:
            shown = linker[:20] + ([f"... ({len(linker) - 20} more lines; -v shows them)"] if len(linker) > 20 else [])
            shown += _modules_in_link(linker, root)
            if any("multiple definition of" in ln for ln in linker):
                shown.append("kernelgen: each module's sources are #included into its launcher translation unit, "
                             "compiled with hidden visibility and kept local to the module; a function the sources "
                             "export (visibility(\"default\")) in two modules is defined twice in the target library: "
                             "mark such helpers static or inline, or leave their visibility hidden")
            return "\n".join(shown)
    if not shown:
        return "\n".join(lines[-25:])
    return "\n".join(shown + _ptxas_hints(output) + _option_origins(output, root))


@contextlib.contextmanager
def _target_lock(path: Path, echo: Callable[[str], None]):
    """One build of a target's tree at a time; other kernelgen processes wait their turn."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            echo(f"kernelgen: waiting for another build of {path.stem.lstrip('.')} to finish")
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@dataclass(frozen=True)
class Tools:
    """The programs a build runs, found once per build."""

    cuda: toolkit.Toolkit
    cmake: str
    ninja: str
    pybind11_dir: str
    torch: dict[str, str] | None  # torch_info, when the torch reader is built

    @staticmethod
    def find(opts: BuildOptions, echo: Callable[[str], None] = print) -> Tools:
        """The programs for a build of ``opts``, each at a path a build can hand to CMake and nvcc."""
        tools = Tools(toolkit.find_toolkit(install=True, echo=echo), toolkit.find_cmake(), toolkit.find_ninja(),
                      toolkit.find_pybind11(),
                      torch_info(opts.build_dir) if opts.torch_reader else None)
        check_paths(tool_paths(tools))
        return tools


def configure_args(opts: BuildOptions, target: Target, tools: Tools) -> list[str]:
    tk = tools.cuda
    args = [
        tools.cmake, "-S", str(DRIVER_DIR), "-B", str(opts.build_dir / target.name), "-G", "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={tools.ninja}",
        f"-DCMAKE_CUDA_COMPILER={tk.nvcc}",
        f"-DCUDAToolkit_ROOT={tk.root}",
        f"-DCMAKE_BUILD_TYPE={opts.build_type}",
        f"-DCMAKE_INSTALL_PREFIX={opts.install_prefix}",
        f"-DKERNELGEN_ROOT={opts.root}",
        f"-DKERNELGEN_TARGETS={target.name}",
        f"-DKERNELGEN_INSTALL_DIR={opts.package}",
        f"-Dpybind11_DIR={tools.pybind11_dir}",
        f"-DPython_EXECUTABLE={sys.executable}",
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        f"-DKERNELGEN_LINEINFO={'ON' if opts.lineinfo else 'OFF'}",
    ]
    torch = tools.torch
    if torch:
        args += [f"-DKERNELGEN_TORCH_DIR={torch['dir']}", f"-DKERNELGEN_TORCH_VERSION={torch['version']}",
                 f"-DKERNELGEN_TORCH_CXX11_ABI={torch['cxx11_abi']}"]
    else:
        args += ["-DKERNELGEN_TORCH_DIR="]
    # Always given, empty without a launcher: CMake keeps a cache variable until it is set again, so a
    # build without the option must clear the launcher an earlier build set.
    launcher = opts.compiler_launcher or ""
    args += [f"-DCMAKE_CUDA_COMPILER_LAUNCHER={launcher}", f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}"]
    return args + list(opts.extra_cmake_args)


def check_launcher(launcher: str | None) -> None:
    """A ``--compiler-launcher`` names a program: a name on the PATH, or the path of an executable
    file (CMake would take any word, and every compile of the tree would then fail)."""
    if not launcher:
        return
    program = launcher.split(";", 1)[0]  # CMake's launcher is a list: the program, then its arguments
    if shutil.which(program) is None:
        where = "is not an executable file" if os.sep in program else "is not on the PATH"
        raise BuildError(f"compiler launcher '{program}' {where}; install it (ccache, sccache), give its path, "
                         "or build without --compiler-launcher")


def _same_folder(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return False


def _configured_elsewhere(bdir: Path, driver: Path | None = None) -> str | None:
    """Why a build tree's CMake cache cannot be used by this build (CMake refuses it), or None when
    it can: the cache was made in another folder than ``bdir`` (the project was moved or copied),
    or from kernelgen's driver project at another place than ``driver`` (kernelgen is installed
    elsewhere now: another environment, or the temporary one of an isolated ``pip wheel``);
    ``driver`` is kernelgen's own by default."""
    driver = driver or DRIVER_DIR
    cache = _cache_entries(bdir)
    made_in, made_from = cache.get("CMAKE_CACHEFILE_DIR"), cache.get("CMAKE_HOME_DIRECTORY")
    if made_in and not _same_folder(made_in, bdir):
        return f"was configured in {made_in}"
    if made_from and not _same_folder(made_from, driver):
        return f"was configured from kernelgen's CMake driver at {made_from}, and kernelgen's is now {driver}"
    return None


# A target tree's configure stamp: the CMake arguments of its last finished configure.
STAMP = ".kernelgen-configure.json"
# The file in a target's install folder while its install runs (the package shell knows the name).
INSTALL_MARKER = ".kernelgen-installing"


def _read_stamp(stamp: Path) -> list[str] | None:
    """The arguments a configure stamp records, or None when it is missing or unreadable (empty, cut
    short, not a list of strings): the target is then configured again."""
    try:
        args = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return args if isinstance(args, list) and all(isinstance(a, str) for a in args) else None


def _cache_entries(bdir: Path) -> dict[str, str]:
    """The CMake cache's entries (name -> value), or none without a readable cache."""
    try:
        text = (bdir / "CMakeCache.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^([\w.+-]+):[A-Z]+=(.*)$", text, re.M)}


_COMPILER_ARG = re.compile(r"^-DCMAKE_(\w+)_COMPILER(?::\w+)?=(.*)$")


def _same_program(a: str, b: str) -> bool:
    """Whether two compiler values name the same program as CMake compares them: the same path, a
    bare name taken as the PATH's program of that name."""
    a, b = (shutil.which(v) or v if v and not os.path.isabs(v) else v for v in (a, b))
    return os.path.normpath(a) == os.path.normpath(b) if a and b else a == b


def _cache_conflict(bdir: Path, args: Sequence[str]) -> str | None:
    """Why a build tree's CMake cache would be deleted or refused by a configure with ``args``, or
    None: another compiler than the cache's (CMake deletes its cache and configures again without the
    other -D settings), or another generator (CMake refuses)."""
    cache = _cache_entries(bdir)
    if not cache:
        return None
    for arg in args:
        m = _COMPILER_ARG.match(arg)
        if m is None:
            continue
        old = cache.get(f"CMAKE_{m.group(1)}_COMPILER")
        if old and not _same_program(old, m.group(2)):
            return f"was configured with the {m.group(1)} compiler {old}, and this build uses {m.group(2)}"
    generators = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-G"]
    old = cache.get("CMAKE_GENERATOR")
    if generators and old and old != generators[-1]:
        return f"was configured for the {old} generator, and this build uses {generators[-1]}"
    return None


def _build_file(bdir: Path) -> str | None:
    """The file a configure writes for the build tool of the tree's generator (build.ninja,
    Makefile), or None when the cache does not say."""
    generator = _cache_entries(bdir).get("CMAKE_GENERATOR", "")
    if "Ninja" in generator:
        return "build.ninja"
    if "Makefiles" in generator:
        return "Makefile"
    return None


# ninja failing to read its build files: a file cut short, a missing one.
_NINJA_LOAD = re.compile(r"^ninja: error: (?:loading '(?P<a>[^']+\.ninja)': (?P<why>.*)|(?P<b>[^\s:']+\.ninja):\d+: "
                         r"(?P<msg>.*))$")


def _damaged_build_file(lines: Sequence[str]) -> tuple[str, str] | None:
    """The build file ninja could not read (relative to the build tree) and its error, from a failed
    build's output; None when the failure is another."""
    for ln in lines:
        m = _NINJA_LOAD.match(ln.strip())
        if m:
            return (m.group("a") or m.group("b"), (m.group("why") or m.group("msg")).strip())
    return None


# ninja's records of a build tree: what it built with which command (.ninja_log), the headers each
# object depends on (.ninja_deps). Both name files by their paths when built: a tree copied or moved
# elsewhere holds the old tree's paths.
NINJA_RECORDS = (".ninja_log", ".ninja_deps")


def _forget_configure(bdir: Path, ninja_files: bool = False) -> None:
    """Removes what a configure made of a build tree (CMake's cache and its CMakeFiles/, where its
    compiler checks are kept) and, with ``ninja_files``, ninja's records of what it built
    (:data:`NINJA_RECORDS`), so that the next configure starts from scratch."""
    (bdir / "CMakeCache.txt").unlink(missing_ok=True)
    shutil.rmtree(bdir / "CMakeFiles", ignore_errors=True)
    if ninja_files:
        for name in NINJA_RECORDS:
            (bdir / name).unlink(missing_ok=True)


def _inside(path: str, bdir: Path) -> bool:
    """Whether a path as ninja records it (relative to the build tree, or absolute) names a file in
    the tree ``bdir``, by its spelling (the tree reached through another path, a link to it say, is
    another tree's)."""
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(bdir, path))
    return full.startswith(os.path.join(os.path.normpath(bdir), ""))


def _forget_outside(bdir: Path, ninja: str) -> bool:
    """Drops from ninja's log of ``bdir`` the files outside the tree that its build does not make
    (the paths of a tree it was copied or moved from, which ``ninja -t cleandead`` would delete).
    Returns whether the log names only files of this tree or of its build now."""
    log = bdir / ".ninja_log"
    try:
        lines = log.read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True)
    except OSError:
        return True

    def path_of(line: str) -> str | None:
        fields = line.rstrip("\n").split("\t")
        return fields[3] if not line.startswith("#") and len(fields) >= 5 else None

    outside = {p for ln in lines if (p := path_of(ln)) is not None and not _inside(p, bdir)}
    if not outside:
        return True
    try:
        proc = subprocess.run([ninja, "-C", str(bdir), "-t", "targets", "all"], capture_output=True, text=True,
                              errors="surrogateescape", timeout=300)
    except (OSError, subprocess.SubprocessError):
        return False
    if proc.returncode != 0:
        return False
    outputs = {ln.rsplit(": ", 1)[0] for ln in proc.stdout.splitlines()}
    dead = outside - outputs
    if dead:
        kept = "".join(ln for ln in lines if path_of(ln) not in dead)
        tmp = log.with_name(f"{log.name}.kernelgen-tmp")
        tmp.write_text(kept, encoding="utf-8", errors="surrogateescape")
        os.replace(tmp, log)
    return True


def _clean_dead(bdir: Path, ninja: str, root: Path) -> None:
    """Removes the outputs of earlier configurations of ``bdir`` that its build no longer makes
    (``ninja -t cleandead``), never a file outside the tree: the log's entries for another tree's
    files are dropped first, and where that cannot be done nothing is removed."""
    if _forget_outside(bdir, ninja):
        _run([ninja, "-C", str(bdir), "-t", "cleandead"], root, lambda _: None, False)


def prune_install(folder: Path, manifest: Path) -> list[str]:
    """Removes from a target's install folder every file its last install did not write (CMake's
    install manifest): the extension, stub and headers of a module since removed, the libraries of
    earlier module sets, a torch reader no longer built. Returns their paths relative to ``folder``.

    The folder is kernelgen's alone (``<install prefix>/<package>/<target>``); Python's
    ``__pycache__`` folders are left to Python. Nothing is removed without a manifest that lists
    files in the folder.
    """
    try:
        installed = {Path(os.path.abspath(line)) for line in manifest.read_text(encoding="utf-8").splitlines() if line}
    except OSError:
        return []
    folder = folder.resolve()
    if not any(folder in p.parents for p in installed):
        return []
    removed = []
    for dirpath, _, filenames in os.walk(folder, topdown=False):
        here = Path(dirpath)
        if "__pycache__" in here.relative_to(folder).parts:
            continue
        for name in filenames:
            path = here / name
            if path not in installed and path != folder / INSTALL_MARKER:
                path.unlink()
                removed.append(str(path.relative_to(folder)))
        if here != folder and not any(here.iterdir()):
            here.rmdir()
    return sorted(removed)


def check_arches(targets: Sequence[Target], tk: toolkit.Toolkit) -> None:
    """Every target's arch is one the toolkit's nvcc builds (before anything is configured: nvcc
    would otherwise stop in the middle of the build with "Unsupported gpu architecture")."""
    for t in targets:
        problem = toolkit.arch_problem(tk, t.name, t.arch)
        if problem:
            raise BuildError(problem)


def build_targets(opts: BuildOptions, targets: list[Target], echo: Callable[[str], None] = print) -> list[TargetResult]:
    # CMake and nvcc misread some characters in a path (CMake splits one at ';' and would write the
    # build tree elsewhere): checked before anything is configured or installed.
    paths = build_paths(opts)
    check_paths(paths)
    check_launcher(opts.compiler_launcher)
    tools = Tools.find(opts, echo)
    check_arches(targets, tools.cuda)
    # The folders whose files nvcc's dependency files name (the project's, the build tree's,
    # kernelgen's runtime headers, the toolkit's headers, the specs' include folders).
    named = (opts.root, opts.build_dir, DRIVER_DIR, tools.cuda.root)
    includes = [("the include folder", d, "move (or copy) the headers to a folder whose path has no '#'")
                for d in opts.include_dirs]
    for warning in slow_path_warnings([*(p for p in (*paths, *toolkit_paths(tools.cuda)) if p[1] in named),
                                       *includes]):
        echo(warning)
    results = []
    for t in targets:
        with _target_lock(opts.build_dir / f".{t.name}.lock", echo):
            results.append(_build_one(opts, t, tools, echo))
    return results


def _build_one(opts: BuildOptions, t: Target, tools: Tools, echo: Callable[[str], None]) -> TargetResult:
    """Configure (when the arguments changed, or the tree lacks what a configure makes), build and
    install one target."""
    start = time.monotonic()
    res = TargetResult(t.name, 0.0)
    bdir = opts.build_dir / t.name
    bdir.mkdir(parents=True, exist_ok=True)
    args = configure_args(opts, t, tools)
    stamp = bdir / STAMP
    elsewhere = _configured_elsewhere(bdir) or _cache_conflict(bdir, args)
    if elsewhere:
        # The tree was configured in another folder (the project was moved or copied), or from
        # kernelgen's driver where kernelgen was installed then (an isolated wheel build's temporary
        # environment): CMake refuses to reuse its cache. Or with another compiler or generator:
        # CMake would delete its cache and configure without kernelgen's settings. Either way the
        # target is configured afresh and everything recompiled.
        echo(f"kernelgen: build/{t.name} {elsewhere}; configuring it afresh")
        _forget_configure(bdir, ninja_files=True)

    def configure() -> None:
        echo(f"kernelgen: configuring {t.name} ({t.arch}) with nvcc {tools.cuda.version} from {tools.cuda.source}")
        stamp.unlink(missing_ok=True)  # a configure that does not finish is done again by the next build
        rc, lines, _ = _run(args, opts.root, echo, opts.verbose)
        if rc != 0:
            # CMake keeps what its failed checks found (a compiler without features, say) and would
            # fail the same way once the cause is fixed: the next build configures from scratch.
            _forget_configure(bdir)
            raise BuildError(f"CMake configuration of target {t.name} failed:\n"
                             f"{_explain_failure(lines, project=opts.root)}\n"
                             f"kernelgen: removed what this configure left in {bdir} (CMakeCache.txt, "
                             "CMakeFiles/): the next build configures it from scratch")
        writer.write_text(stamp, json.dumps(args))
        res.configured = True

    build_file = _build_file(bdir)
    if (not (bdir / "CMakeCache.txt").is_file() or _read_stamp(stamp) != args
            or (build_file is not None and not (bdir / build_file).is_file())):
        configure()
    echo(f"kernelgen: building {t.name} ({t.arch})")
    cmd = [tools.cmake, "--build", str(bdir)]
    if opts.jobs:
        cmd += ["--parallel", str(opts.jobs)]
    # ninja goes on after a failed step with the steps that do not depend on it, so that one build
    # reports every module that does not compile (each failed step explained on its own)
    cmd += ["--", "-k", "0"]
    rc, lines, steps = _run(cmd, opts.root, echo, opts.verbose)
    damaged = _damaged_build_file(lines) if rc != 0 else None
    if damaged:
        # A build file cut short or lost (an interrupted configure, a full disk): ninja cannot read
        # it, and CMake, whose own check runs inside ninja, never rewrites it. A configure does.
        echo(f"kernelgen: build/{t.name}/{damaged[0]} cannot be read by ninja ({damaged[1]}); configuring "
             f"{t.name} again")
        unreadable = (bdir / damaged[0]).resolve()
        if bdir.resolve() in unreadable.parents:  # CMake writes it again; ninja's files are the tree's alone
            with contextlib.suppress(OSError):
                unreadable.unlink()
        configure()
        rc, lines, steps = _run(cmd, opts.root, echo, opts.verbose)
    if rc != 0:
        again = (f"\nkernelgen: the build files of {t.name} are still unreadable after a new configure; remove "
                 f"{bdir} and build again") if damaged and _damaged_build_file(lines) else ""
        raise BuildError(f"build of target {t.name} failed:\n{_explain_failure(lines, opts.root)}{again}")
    res.compiled = [s for s in steps if _COMPILE.search(s)]
    res.steps = len(steps)
    # Outputs of earlier configurations (a removed module's object, the library of an earlier module
    # set) that the build no longer makes: ninja removes those it once built, in this tree only.
    _clean_dead(bdir, tools.ninja, opts.root)
    res.ptxas = ptxas_report(lines)
    res.warnings = source_warnings(lines, opts.root)
    if res.warnings and not opts.verbose:
        echo(f"kernelgen: {t.name}: compiler warnings in the project's sources compiled now:")
        for msg in res.warnings[:MAX_WARNINGS]:
            echo(f"  {msg}")
        if len(res.warnings) > MAX_WARNINGS:
            echo(f"  ... and {len(res.warnings) - MAX_WARNINGS} more (kernelgen build -v shows the compilers' output)")
    if res.ptxas and not opts.verbose:
        echo(f"kernelgen: {t.name}: ptxas on the kernels compiled now:")
        for msg in res.ptxas:
            echo(f"  {msg}")
    folder = opts.install_prefix / opts.package / t.name
    # Present while the install runs: an install that does not finish leaves a package that may import
    # but fail to load, and the package shell names the cause when it finds this file.
    marker = folder / INSTALL_MARKER
    folder.mkdir(parents=True, exist_ok=True)
    marker.write_text("kernelgen build: installing; removed when the install finishes\n")
    rc, lines, _ = _run([tools.cmake, "--install", str(bdir), "--component", f"kernelgen_{t.name}"],
                        opts.root, echo, opts.verbose)
    if rc != 0:
        raise BuildError(f"install of target {t.name} failed:\n{_explain_failure(lines, project=opts.root)}")
    marker.unlink(missing_ok=True)
    removed = prune_install(folder, bdir / f"install_manifest_kernelgen_{t.name}.txt")
    if removed:
        shown = ", ".join(removed[:8]) + (f" and {len(removed) - 8} more" if len(removed) > 8 else "")
        echo(f"kernelgen: {t.name}: removed from {folder} what this build no longer installs: {shown}")
    res.seconds = time.monotonic() - start
    echo(f"kernelgen: {t.name} done in {res.seconds:.1f} s ({res.summary()})")
    return res
