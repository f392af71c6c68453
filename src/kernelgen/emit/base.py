"""What every emitter shares: the one Jinja environment (with a project's ``templates/`` over it,
whose errors are :class:`TemplateError`s naming the file and line), the stamp, and views.

The environment uses StrictUndefined, so a missing value is an error rather than an empty
string. Templates receive strings that their emitter computed; they never see spec text that
was not validated by the loader and escaped for its destination.
"""

from __future__ import annotations

import contextlib
import linecache
import re
import traceback
from collections.abc import Callable, Iterator
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
    env = ENV.overlay(loader=jinja2.ChoiceLoader([
        _ProjectLoader(folder),
        jinja2.PrefixLoader({"kernelgen": ENV.loader}),  # type: ignore[dict-item]
        ENV.loader,  # type: ignore[list-item]
    ]))
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
        raise error from None
    finally:
        _c_output.pop()


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
    elif isinstance(exc, jinja2.TemplateError):
        text = exc.message or type(exc).__name__
    else:
        text = f"{type(exc).__name__}: {exc}"
    where, *outer = reversed(chain)
    return TemplateError(f"{where}: {text}" + (f" (included from {', '.join(outer)})" if outer else ""))


def unused_templates(folder: Path) -> list[str]:
    """Warnings for files of a project's ``templates/`` folder that no rendering reads: a template
    (a ``.j2`` file, or one of kernelgen's names without ``.j2``) that is named like none of
    kernelgen's templates and that no file of the folder names in quotes (an include, an extends,
    an import), each with the closest of kernelgen's names. Files whose names start with '.' are left out."""
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
        if name in own or not (name.endswith(".j2") or f"{name}.j2" in own):
            continue
        if any(f'"{name}"' in text or f"'{name}'" in text for other, text in texts.items() if other != name):
            continue
        out.append(f"{folder.name}/{name} is not used: it replaces none of kernelgen's templates and no template "
                   f"of {folder.name}/ includes it ({did_you_mean(name, own)})")
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
