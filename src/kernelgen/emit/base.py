"""What every emitter shares: the one Jinja environment (with a project's ``templates/`` over it,
whose errors are :class:`TemplateError`s naming the file and line), the stamp, and views.

The environment uses StrictUndefined, so a missing value is an error rather than an empty
string. Templates receive strings that their emitter computed; they never see spec text that
was not validated by the loader and escaped for its destination.
"""

from __future__ import annotations

import contextlib
import difflib
import linecache
import re
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from kernelgen import names, pyexpr
from kernelgen.errors import KernelgenError, did_you_mean
from kernelgen.lower import LChain, LKernel, LModule

# kernelgen's own templates (the package's templates/ folder).
OWN_TEMPLATES = Path(__file__).resolve().parents[1] / "templates"

# Templates of C and C++ files (by name: ``launchers.cu.j2``): an integer they print is C's.
C_TEMPLATE_SUFFIXES = (".c.j2", ".h.j2", ".cpp.j2", ".hpp.j2", ".cu.j2", ".cuh.j2")
# INT64_MIN as C and C++ spell it: the literal -9223372036854775808 is 9223372036854775808 (too
# large for long long, so unsigned or an error) negated.
C_INT64_MIN = "(-9223372036854775807LL - 1)"
_c_output: list[bool] = [False]  # per render() in progress: whether its template writes C or C++


def c_int(value: int) -> str:
    """An int64 value as a C or C++ literal."""
    return C_INT64_MIN if value == pyexpr.INT64_MIN else str(value)


def _finalize(value: object) -> object:
    """What ``{{ value }}`` prints: an integer in a C or C++ template as :func:`c_int` spells it
    (a constant or a variant value of -2**63), anything else as it is."""
    if type(value) is int and _c_output[-1]:
        return c_int(value)
    return value


ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("kernelgen", "templates"),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    autoescape=False,
    finalize=_finalize,
)


def _attribute_names(obj: object) -> list[str]:
    """The names a template can write after ``obj.``: its public attributes, those of the object a
    view wraps (a kernel view's ``ir``, a module view's ``lm``, a target view's ``t``), or a
    mapping's keys."""
    if isinstance(obj, dict):
        return sorted(k for k in obj if isinstance(k, str))
    found = {n for n in dir(obj) if not n.startswith("_")}
    for inner in (vars(obj).get(a) for a in ("ir", "lm", "t")) if hasattr(obj, "__dict__") else ():
        if inner is not None:
            found |= {n for n in dir(inner) if not n.startswith("_")}
    return sorted(found)


class _HintingUndefined(jinja2.StrictUndefined):
    """StrictUndefined whose message for a missing attribute of one of kernelgen's objects names
    the closest attributes it has, or lists them."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        text = super()._undefined_message
        obj, name = self._undefined_obj, self._undefined_name
        if obj is jinja2.utils.missing or not isinstance(name, str):
            return text
        known = _attribute_names(obj)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        if close:
            return f"{text} (did you mean {' or '.join(repr(c) for c in close)}?)"
        if isinstance(obj, dict) or type(obj).__module__.startswith("kernelgen."):
            return f"{text} (its attributes: {', '.join(known)})"
        return text


class TemplateError(KernelgenError):
    """A template of the project's ``templates/`` folder cannot be rendered (a syntax error, an
    undefined name, a missing include); the message names the template file and line."""


class _ProjectLoader(jinja2.FileSystemLoader):
    """The project's ``templates/`` folder, where a template that cannot be read (not UTF-8,
    unreadable) is a :class:`TemplateError` naming it."""

    def __init__(self, folder: Path) -> None:
        super().__init__(str(folder))
        self.folder = folder

    def get_source(self, environment: jinja2.Environment, template: str
                   ) -> tuple[str, str | None, Callable[[], bool] | None]:
        try:
            return super().get_source(environment, template)
        except jinja2.TemplateNotFound:  # kernelgen's of that name, next
            raise
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"{self.folder.name}/{template}: cannot be read as a UTF-8 text file: {exc}") from None


@dataclass(frozen=True)
class _Templates:
    env: jinja2.Environment
    folder: Path | None  # the project's templates/ folder, over kernelgen's; None: kernelgen's alone


_stack: list[_Templates] = [_Templates(ENV, None)]


@contextlib.contextmanager
def project_templates(folder: Path | None) -> Iterator[None]:
    """While rendering, templates in a project's ``templates/`` folder override (same file name) or
    extend (new names, for ``{% extends %}``/``{% include %}``) kernelgen's own; kernelgen's stay
    reachable as ``kernelgen/<name>``, so an override can extend the original."""
    if folder is None or not folder.is_dir():
        yield
        return
    # ``kernelgen/<name>`` always names kernelgen's own (a templates/kernelgen/ folder is never read:
    # unused_templates warns about its files).
    env = ENV.overlay(loader=jinja2.ChoiceLoader([
        jinja2.PrefixLoader({"kernelgen": ENV.loader}),  # type: ignore[dict-item]
        _ProjectLoader(folder),
        ENV.loader,  # type: ignore[list-item]
    ]), undefined=_HintingUndefined)
    _stack.append(_Templates(env, folder))
    try:
        yield
    finally:
        _stack.pop()


def render(template: str, context: dict[str, object]) -> str:
    """A template rendered with its emitter's context, plus ``project``: the project's names
    (:class:`kernelgen.names.Naming`). An error that a template of the project's ``templates/``
    folder takes part in is a :class:`TemplateError` naming the file and line."""
    current = _stack[-1]
    full = {"project": names.current(), **context}
    _c_output.append(template.endswith(C_TEMPLATE_SUFFIXES))
    try:
        return current.env.get_template(template).render(full)
    except KernelgenError:
        raise
    except Exception as exc:
        if current.folder is None:  # kernelgen's own templates alone: the error is kernelgen's
            raise
        error = _template_error(exc, current, sorted(full))
        if error is None:
            raise
        output = _output_name(template, context)
        if output:
            error = TemplateError(f"{error}, while rendering {output}")
        raise error from None
    finally:
        _c_output.pop()


# What each of kernelgen's templates renders (by its name without .j2), in generated/<target>/:
# (module, target) -> path; the per-target files' ignore the module. test_template_messages.py
# keeps this in step with the files generation writes.
_OUTPUTS: dict[str, Callable[[str, str], str]] = {
    "launchers.cu": lambda m, t: f"src/{m}.cu",
    "api.h": lambda m, t: f"include/{names.module_header(m)}",
    "api_c.h": lambda m, t: f"include/{names.module_header(m, '_c')}",
    "binding.cpp": lambda m, t: f"python/{m}.cpp",
    "stub.pyi": lambda m, t: f"python/{m}.pyi",
    "test_contract.py": names.contract_test,
    "rust/module.rs": lambda m, t: _rust_paths(m)[0],
    "rust/contract.rs": lambda m, t: _rust_paths(m)[1],
    "CMakeLists.txt": lambda m, t: "CMakeLists.txt",
    "package_target.cmake": lambda m, t: "package_target.cmake",
    "target_init.py": lambda m, t: "python/__init__.py",
    "runtime_module.cpp": lambda m, t: "python/_runtime.cpp",
    "types.h": lambda m, t: "include/kernelgen/types.h",
    "plan_codes.h": lambda m, t: "include/kernelgen/plan_codes.h",
    "target_table.h": lambda m, t: "include/kernelgen/target_table.h",
    "rust/Cargo.toml": lambda m, t: "rust/Cargo.toml",
    "rust/build.rs": lambda m, t: "rust/build.rs",
    "rust/lib.rs": lambda m, t: "rust/src/lib.rs",
}
_MODULE_OUTPUTS = ("launchers.cu", "api.h", "api_c.h", "binding.cpp", "stub.pyi", "test_contract.py",
                   "rust/module.rs", "rust/contract.rs")


def _rust_paths(module: str) -> tuple[str, str]:
    from kernelgen.emit import rust  # (it imports this module)

    return rust.module_paths(module)


def output_template(path: str, modules: Sequence[str] | None = None) -> str | None:
    """kernelgen's template (``launchers.cu.j2``) that renders ``path``, a file of
    ``generated/<target>/`` (``src/scale.cu``); None for a file no template renders. A module's
    file names its module (one of ``modules``, where given) and, for an API header, the
    project's header folder (any). The inverse of :func:`_output_name`."""
    for stem in sorted(set(_OUTPUTS) - set(_MODULE_OUTPUTS)):
        if _OUTPUTS[stem]("", "") == path:
            return f"{stem}.j2"
    module, folder, target, package = "\x00", "\x01", "\x02", "\x03"
    with names.using(names.Naming(package, namespace=folder)):
        # a package's place in a name, with the '_' after it: the file names of kernelgen's own
        # package leave it out (names.contract_test)
        patterns = {stem: _OUTPUTS[stem](module, target).replace(package + "_", package) for stem in _MODULE_OUTPUTS}
    holes = {
        module: "(?:" + "|".join(re.escape(m) for m in sorted(modules, key=len, reverse=True)) + ")"
        if modules is not None else "[A-Za-z_][A-Za-z0-9_]*",
        folder: "[A-Za-z0-9_/]+",
        target: "[A-Za-z0-9_]+",
        package: "(?:[A-Za-z_][A-Za-z0-9_]*_)?",
    }
    # the longest fixed text first: ``include/<dir>/<m>_c.h`` is the C header of <m>, not the C++ one of <m>_c
    for stem, spelled in sorted(patterns.items(), key=lambda kv: -len(kv[1])):
        regex = "".join(holes.get(part, re.escape(part)) for part in re.split("([\x00-\x03])", spelled))
        if (modules is None or modules) and re.fullmatch(regex, path):
            return f"{stem}.j2"
    return None


def _output_name(template: str, context: dict[str, object]) -> str | None:
    """The file a rendering of ``template`` with ``context`` makes, as messages name it
    (``generated/hopper/src/scale.cu``; ``generated/<each target>/...`` for a file whose context
    names no target); None for a template kernelgen does not render into generated/."""
    m = context.get("m")
    lm = m if isinstance(m, LModule) else (vars(m).get("lm") if hasattr(m, "__dict__") else None)
    t = context.get("t")
    target = lm.target.name if isinstance(lm, LModule) else getattr(t, "name", None) if t is not None else None
    stem = template.removesuffix(".j2")
    path = _OUTPUTS.get(stem)
    if path is None or (stem in _MODULE_OUTPUTS and not isinstance(lm, LModule)):
        return None
    module = lm.name if isinstance(lm, LModule) else ""
    return f"generated/{target or '<each target>'}/{path(module, target or '<target>')}"


def _template_name(filename: str | None, folder: Path) -> str | None:
    """A template file as messages name it: ``templates/<name>`` for the project's (the folder's
    path in the project), ``kernelgen/<name>`` for kernelgen's own; None for any other file."""
    if not filename:
        return None
    path = Path(filename).resolve()
    for base, prefix in ((folder.resolve(), folder.name), (OWN_TEMPLATES, "kernelgen")):
        if path.is_relative_to(base):
            return f"{prefix}/{path.relative_to(base).as_posix()}"
    return None


def _naming_verb(filename: str, line: int) -> str:
    """How a template's line names another template: ``extends``, ``includes`` or ``imports`` (by
    the tag the line holds), else ``names``."""
    text = linecache.getline(filename, line)
    for tags, verb in (("extends", "extends"), ("include", "includes"), ("import|from", "imports")):
        if re.search(rf"{{%[-+]?\s*(?:{tags})\b", text):
            return verb
    return "names"


def _template_error(exc: Exception, current: _Templates, context: list[str]) -> TemplateError | None:
    """``exc`` as a TemplateError at the innermost template line it passed through, with the
    templates that included that one; None when no template of the project's folder took part."""
    assert current.folder is not None
    folder = current.folder
    frames = [(f.filename, f.lineno or 0) for f in traceback.extract_tb(exc.__traceback__)]
    if isinstance(exc, jinja2.TemplateSyntaxError):  # raised where the template is compiled
        frames.append((exc.filename or "", exc.lineno))
    # (the template as messages name it, its file, the line), innermost last
    lines = [(shown, filename, line) for filename, line in frames
             if (shown := _template_name(filename, folder)) is not None]
    chain = list(dict.fromkeys(f"{shown}:{line}" for shown, _, line in lines))
    if not any(where.startswith(f"{folder.name}/") for where in chain):
        return None
    if isinstance(exc, jinja2.TemplateNotFound):
        missing = [str(t) for t in exc.templates]
        # the project's templates, and kernelgen's by the names that always reach them
        own = ENV.list_templates()
        known = [n for n in current.env.list_templates() if n not in own and not Path(n).name.startswith(".")]
        hint = did_you_mean(missing[0], known) if len(missing) == 1 else ""
        verb = _naming_verb(lines[-1][1], lines[-1][2]) if lines else "names"
        text = (f"{verb} {' or '.join(repr(t) for t in missing)}, which {'is' if len(missing) == 1 else 'are'} "
                "not found" + (f" ({hint})" if hint else ""))
    elif isinstance(exc, jinja2.UndefinedError) and str(exc.message).endswith(" is undefined"):
        text = f"{exc.message} (the template's names: {', '.join(context)})"
    elif isinstance(exc, RecursionError):
        text = _recursion_text(lines)
    elif isinstance(exc, jinja2.TemplateError):
        text = exc.message or type(exc).__name__
    else:
        text = f"{type(exc).__name__}: {exc}"
    where, *outer = reversed(chain)
    return TemplateError(f"{where}: {text}" + (f" (included from {', '.join(outer)})" if outer else ""))


def _recursion_text(lines: list[tuple[str, str, int]]) -> str:
    """What a RecursionError among templates means: which of the project's templates name each
    other (or themselves) without end, and, for one named like kernelgen's, that its name reaches
    the project's own: kernelgen's is ``kernelgen/<name>``."""
    own = set(ENV.list_templates())
    cycle = list(dict.fromkeys(shown for shown, _, _ in lines if not shown.startswith("kernelgen/")))
    if not cycle:
        return "RecursionError: the templates name each other without end"
    verb = _naming_verb(lines[-1][1], lines[-1][2]) if lines else "names"
    if len(cycle) == 1:
        text = f"RecursionError: {cycle[0]} {verb} itself without end"
    else:
        text = f"RecursionError: {', '.join(cycle)} name each other without end"
    shadowing = [name.split("/", 1)[1] for name in cycle if name.split("/", 1)[1] in own]
    if shadowing:
        name = shadowing[0]
        text += (f" ('{name}' names the project's own template, which replaces kernelgen's; kernelgen's own is "
                 f"'kernelgen/{name}')")
    return text


# Names of the copies editors and tools leave beside a file they change.
_BACKUP_SUFFIXES = ("~", ".bak", ".orig", ".old", ".swp", ".swo", ".tmp", ".rej")
# Endings of template files in other tools: a template here ends in .j2.
_OTHER_TEMPLATE_SUFFIXES = (".jinja2", ".jinja", ".j2", ".tmpl", ".tpl", ".template")
# Notes about the folder, left alone unless named like one of kernelgen's templates.
_NOTE_SUFFIXES = (".md", ".txt", ".rst")


def _meant_template(name: str, own: list[str]) -> str | None:
    """kernelgen's template that a file of templates/ was likely meant to replace: its name with
    another template ending (``launchers.cu.jinja``) or none (``launchers.cu``)."""
    for suffix in ("", *_OTHER_TEMPLATE_SUFFIXES):
        if name.endswith(suffix) and (meant := name[: len(name) - len(suffix)] + ".j2") in own and meant != name:
            return meant
    return None


def unused_templates(folder: Path) -> list[str]:
    """Warnings for files of a project's ``templates/`` folder that no rendering reads: a file
    named like none of kernelgen's templates that no file of the folder names in quotes (an
    include, an extends, an import), with the template it was likely meant to be (another ending:
    ``launchers.cu.jinja``) or the closest of kernelgen's names; an editor's backup (``*~``,
    ``*.bak``, ...) as such; every file under ``templates/kernelgen/`` (``kernelgen/<name>`` always
    names kernelgen's own). Files whose names start with '.' are left out, and so are notes
    (``.md``, ``.txt``, ``.rst``) named like none of kernelgen's templates."""
    if not folder.is_dir():
        return []
    own = ENV.list_templates()
    files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*"))
             if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)}
    texts = {}
    for name, path in files.items():
        try:
            texts[name] = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            texts[name] = ""
    out = []
    for name in files:
        shown = f"{folder.name}/{name}"
        if name.startswith("kernelgen/"):
            rest = name.removeprefix("kernelgen/")
            move = (f"; to replace kernelgen's {rest}, move it to {folder.name}/{rest}" if rest in own else "")
            out.append(f"{shown} is not used: 'kernelgen/<name>' always names kernelgen's own templates, so no "
                       f"rendering reads {folder.name}/kernelgen/{move}")
            continue
        if name in own:
            continue
        if any(f'"{name}"' in text or f"'{name}'" in text for other, text in texts.items() if other != name):
            continue
        backup = next((b for b in _BACKUP_SUFFIXES if name.endswith(b) and len(name) > len(b)), None)
        if backup is not None:
            original = name[: -len(backup)]
            of = f" of {folder.name}/{original}" if original in files or original in own else ""
            out.append(f"{shown} is not used: an editor's backup or leftover copy{of}; remove it, or rename it to "
                       "the template it should be")
            continue
        meant = _meant_template(name, own)
        if meant is None and name.endswith(_NOTE_SUFFIXES) and not difflib.get_close_matches(name, own, n=1):
            continue
        hint = f"did you mean '{meant}'?" if meant else did_you_mean(name, own)
        out.append(f"{shown} is not used: it replaces none of kernelgen's templates and no template "
                   f"of {folder.name}/ includes it ({hint})")
    return out


def stamp(spec: str) -> str:
    return f"generated by kernelgen from {spec}; do not edit."


@dataclass
class View:
    """A lowered object as one emitter's templates see it: the IR's fields, plus the
    properties the emitter adds in its own language."""

    ir: LKernel | LChain | LModule
    m: LModule

    def __getattr__(self, name: str) -> object:
        return getattr(self.ir, name)


class ModuleView:
    """A lowered module as one emitter's templates see it: its kernels and chains as that
    emitter's views, the IR's other fields, and properties the emitter adds."""

    def __init__(self, lm: LModule, kernel_view: type[View], chain_view: type[View]) -> None:
        self.lm = lm
        self.kernels = [kernel_view(k, lm) for k in lm.kernels]
        self.chains = [chain_view(c, lm) for c in lm.chains]

    def __getattr__(self, name: str) -> object:
        return getattr(self.lm, name)
