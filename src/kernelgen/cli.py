"""The ``kernelgen`` command line.

    kernelgen init [DIR] --package NAME [--target T]...   a new project (--keep-existing: beside a repository's files)
    kernelgen draft SOURCE... [--write]   a first spec for the __global__ functions of CUDA sources
    kernelgen generate [--check]     regenerate generated/ from specs/ (or check it is current)
    kernelgen build [--target T]     regenerate, then build and install the targets; the project's
                                     package is then importable in the active environment
    kernelgen unlink                 stop making the package importable (remove the .pth file)
    kernelgen cmake --out FILE       the CMake script a project's wheel build includes
    kernelgen list                   the modules, kernels, dispatchers, chains and structs per target
    kernelgen plan NAME [ARG=V]...   a kernel's or chain's plan for those arguments, per target
    kernelgen sass [NAME]...         the built kernels' registers and SASS instructions (--against: a change)
    kernelgen schema [--targets|--project]   the JSON Schema of module specs (or of specs/targets.yaml,
                                     specs/project.yaml)

Errors in user input print one message naming file:line and exit with status 2.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import shlex
import sys
import time
from pathlib import Path

from kernelgen import __version__
from kernelgen.emit import render_catalog
from kernelgen.emit.base import unused_templates
from kernelgen.errors import KernelgenError, SpecError, SpecErrors, closest
from kernelgen.loader import load_catalog
from kernelgen.model import Catalog, Target
from kernelgen.wording import count
from kernelgen.writer import check_files, write_files


def find_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` that holds specs/targets.yaml."""
    for d in [start, *start.parents]:
        if (d / "specs" / "targets.yaml").is_file():
            return d
    raise KernelgenError(
        f"no specs/targets.yaml at or above {start}; run kernelgen from a project folder or pass --root"
    )


def check_root(root: Path) -> Path:
    """The project folder that ``--root`` names, resolved; an error naming it (absolute) where it
    is no folder, or holds no specs/targets.yaml (saying which folder above it has one: --root
    given the project's specs/ folder, say)."""
    path = root.absolute()
    if not path.exists():
        raise KernelgenError(f"--root {root}: no such folder ({path})")
    above = next((d for d in path.resolve().parents if (d / "specs" / "targets.yaml").is_file()), None)
    if not path.is_dir():
        hint = f" ({above} is one: --root {above})" if above is not None else ""
        raise KernelgenError(f"--root {root}: {path} is a file; give the project's folder, which holds "
                             f"specs/targets.yaml{hint}")
    path = path.resolve()
    registry = path / "specs" / "targets.yaml"
    if registry.exists() or registry.is_symlink():  # the loader says what is wrong with one
        return path
    if above is not None:
        which = "its parent" if above == path.parent else "the folder"
        raise KernelgenError(f"--root {root}: no specs/targets.yaml in {path} ({which} {above} has one: "
                             f"--root {above})")
    raise KernelgenError(f"--root {root}: no specs/targets.yaml in {path}, so it is not a kernelgen project "
                         "(kernelgen init creates one)")


def _targets(catalog: Catalog, names: list[str] | None) -> list[Target]:
    if not names:
        return list(catalog.targets)
    out = []
    for n in names:
        t = catalog.target(n)
        if t is None:
            from kernelgen.errors import did_you_mean

            known = [x.name for x in catalog.targets]
            raise KernelgenError(f"unknown target '{n}' ({did_you_mean(n, known)}); targets are in specs/targets.yaml")
        if t not in out:
            out.append(t)
    return out


def _warn_namespace_clashes(catalog: Catalog, root: Path) -> None:
    """A warning for each module whose sources declare the namespace of its generated C++ API
    (``<namespace>::<module>``, the namespace coming from the package by default) and define or
    call a function named like one of its launchers: the compiler's error would name no spec."""
    from kernelgen import names

    for m in catalog.modules:
        ns = f"{catalog.naming.namespace}::{m.name}"
        launchers = [k.name for k in m.kernels] + [d.name for d in m.dispatches] + [f.name for f in m.fallbacks]
        for src in m.sources:
            try:
                text = (root / src).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            clash = names.namespace_clashes(text, ns, launchers)
            if not clash:
                continue
            print(f"kernelgen: warning: {m.loc}: module '{m.name}': {src} declares namespace {ns}, where the "
                  f"generated C++ launchers of the module live (<namespace>::<module>; the namespace "
                  f"'{catalog.naming.namespace}' comes from specs/project.yaml), and names {', '.join(clash)} there "
                  "too, so the compiler sees them declared twice; give the generated API a namespace of its own "
                  f"with `namespace: {catalog.naming.namespace}_api` in specs/project.yaml (the Python package keeps "
                  "its name), or rename the package", file=sys.stderr)
            break


def _warn_struct_header_guards(catalog: Catalog, root: Path) -> None:
    """A warning for each struct header (or project header it includes) that the package copies
    beside its API headers and that is protected by #pragma once only (kernelgen.emit.cpp)."""
    from kernelgen.emit.cpp import struct_header_warnings

    for text in struct_header_warnings(catalog, root):
        print(f"kernelgen: warning: {text}", file=sys.stderr)


def _warn_unused_templates(root: Path) -> None:
    """A warning for each file of the project's templates/ folder that no rendering reads (a
    template named like none of kernelgen's, which nothing includes)."""
    for text in unused_templates(root / "templates"):
        print(f"kernelgen: warning: {text}", file=sys.stderr)


def _warn_unreachable_members(catalog: Catalog) -> None:
    """A warning for each fallback-chain member that an earlier member keeps from ever launching
    (kernelgen.lower.unreachable_members)."""
    from kernelgen.lower import unreachable_members

    for text in unreachable_members(catalog):
        print(f"kernelgen: warning: {text}", file=sys.stderr)


def _warn_catalog(catalog: Catalog, root: Path) -> None:
    """What generate and build warn about before rendering."""
    _warn_namespace_clashes(catalog, root)
    _warn_struct_header_guards(catalog, root)
    _warn_unused_templates(root)
    _warn_unreachable_members(catalog)


# A catalog of at least this many modules takes a while to render: generate says so first (stderr).
PROGRESS_MODULES = 100


def cmd_generate(args: argparse.Namespace) -> int:
    root = args.root
    start = time.monotonic()
    catalog = load_catalog(root)
    if len(catalog.modules) >= PROGRESS_MODULES:
        print(f"kernelgen: generating {count(len(catalog.modules), 'module')} ...", file=sys.stderr, flush=True)
    _warn_catalog(catalog, root)
    all_targets = [t.name for t in catalog.targets]
    files = render_catalog(catalog, templates=root / "templates")
    if args.check:
        report = check_files(root, files, all_targets)
        if report.ok:
            print(f"kernelgen: generated/ is up to date ({count(len(files), 'file')})")
            return 0
        for label, paths in (("stale", report.stale), ("missing", report.missing), ("orphaned", report.orphaned)):
            for p in paths:
                print(f"{label}: {p}", file=sys.stderr)
        print("kernelgen: generated/ does not match specs/ and templates; run: kernelgen generate", file=sys.stderr)
        return 1
    report = write_files(root, files, all_targets)
    took = time.monotonic() - start
    print(
        f"kernelgen: {count(len(catalog.modules), 'module')}, {count(len(files), 'file')}: "
        f"{len(report.written)} written, "
        f"{len(report.unchanged)} unchanged, {len(report.removed)} removed ({took:.2f} s)"
    )
    return 0


def _check_writable(option: str, folder: Path) -> None:
    """An error naming ``folder`` (chosen with ``option``) where it, or the nearest folder above it
    that exists (where it would be created), cannot be written."""
    here = folder.absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    if not os.access(here, os.W_OK | os.X_OK):
        what = f"{folder} is" if here == folder.absolute() else f"{here}, where {folder} would be created, is"
        raise KernelgenError(f"{what} not writable: choose another folder with {option}, or make it writable "
                             "(its permissions, or a file system mounted read-only)")


def cmd_build(args: argparse.Namespace) -> int:
    from kernelgen.build import BuildOptions, build_paths, build_targets, check_include_dirs, check_paths

    root = args.root
    from kernelgen import project

    catalog = load_catalog(root)
    targets = _targets(catalog, args.target)
    includes = check_include_dirs(catalog, root, targets)
    _warn_catalog(catalog, root)
    dirs = (("--build-dir", args.build_dir or root / "build"), ("--install-dir", args.install_dir or root / "bindings"))
    for label, d in dirs:  # checked before anything is written
        if (d.is_symlink() and not d.exists()) or (d.exists() and not d.is_dir()):
            raise KernelgenError(f"{label} {d} is not a folder")
        _check_writable(f"{label} DIR", d)
    package = catalog.naming.package
    opts = BuildOptions(
        root=root,
        build_dir=(args.build_dir or root / "build").resolve(),
        install_prefix=(args.install_dir or root / "bindings").resolve(),
        jobs=args.jobs,
        compiler_launcher=args.compiler_launcher,
        verbose=args.verbose,
        torch_reader=not args.no_torch_reader,
        package=package,
        lineinfo=not args.no_lineinfo,
        include_dirs=includes,
    )
    check_paths(build_paths(opts))  # before anything is written
    files = render_catalog(catalog, templates=root / "templates")
    report = write_files(root, files, [t.name for t in catalog.targets])
    print(f"kernelgen: generated {count(len(files), 'file')} ({len(report.written)} changed, "
          f"{len(report.removed)} removed)")
    build_targets(opts, targets)
    folder = opts.install_prefix / package
    project.write_shell(folder, project.shell_files(catalog, root, folder))
    for note in project.tidy_install(opts.build_dir, opts.install_prefix, package,
                                     [t.name for t in catalog.targets], root):
        print(f"kernelgen: {note}")
    for note in project.stale_build_trees(opts.build_dir, [t.name for t in catalog.targets]):
        print(f"kernelgen: {note}")
    if args.install_dir is None and not args.no_link:
        print(f"kernelgen: {project.link(package, opts.install_prefix)}")
    else:
        print(f"kernelgen: installed {package} in {opts.install_prefix}")
    return 0


def cmd_unlink(args: argparse.Namespace) -> int:
    from kernelgen import project

    catalog = load_catalog(args.root)
    print(f"kernelgen: {project.unlink(catalog.naming.package, (args.root / 'bindings').resolve())}")
    return 0


def init_folder(folder: Path | None, root: Path | None) -> Path:
    """The folder ``kernelgen init`` writes into: its DIR, else the --root before the command, else
    the current folder; DIR and --root naming two folders is an error."""
    if folder is not None and root is not None and folder.resolve() != root.resolve():
        raise KernelgenError(f"--root {root} and the folder {folder} name two folders: give one (kernelgen init DIR, "
                             "or kernelgen --root DIR init)")
    chosen = (folder or root or Path.cwd()).resolve()
    if chosen.exists() and not chosen.is_dir():
        raise KernelgenError(f"{chosen} is a file: kernelgen init writes a project into a folder")
    return chosen


def cmd_init(args: argparse.Namespace) -> int:
    from kernelgen import scaffold
    from kernelgen.build import path_problem, path_slowdown

    folder = init_folder(args.dir, args.root)
    written = scaffold.init(folder, args.package, args.target or list(scaffold.DEFAULT_TARGETS), force=args.force,
                            keep_existing=args.keep_existing)
    problem = path_problem(folder)
    if problem:
        print(f"kernelgen: warning: the project folder {folder} {problem}; kernelgen build will refuse it: "
              "move the project to a folder whose path has none of these characters", file=sys.stderr)
    slow = path_slowdown(folder)
    if slow:
        print(f"kernelgen: warning: the project folder {folder} {slow}; kernelgen build works there, but for "
              "builds that compile only what changed, move the project to a folder without that character",
              file=sys.stderr)
    print(f"kernelgen: created {count(len(written), 'file')} in {folder}:")
    for p in written:
        print(f"  {p}")
    kept = [p for p in scaffold.init_files(args.package)
            if p not in written and p != ".gitignore" and (folder / p).exists()]
    if args.keep_existing and kept:
        print("kernelgen: kept the project's own:")
        for p in kept:
            hint = scaffold.KEPT_HINTS.get(p)
            print(f"  {p}" + (f": {hint}" if hint else ""))
    own = scaffold.example_kept(folder, args.package) if args.keep_existing else []
    example = scaffold.example_files(args.package)
    if own and len(own) < len(example):
        print(f"kernelgen: did not write the example kernel ({', '.join(example)}): the project "
              f"has its own {', '.join(own)}, and the example's spec and test belong with its source")
    cd = shlex.quote(str(folder))
    if scaffold.has_module_specs(folder):
        print(f"next: cd {cd} && kernelgen build && pytest")
    else:
        source = next((shlex.quote(p) for p in own if p.endswith(".cu")), "kernels/<file>.cu")
        print(f"next: cd {cd} && kernelgen draft {source} --write (a first spec of a source's __global__ "
              "functions; check the entries it marks), then kernelgen build && pytest")
    return 0


def cmd_cmake(args: argparse.Namespace) -> int:
    from kernelgen import scaffold
    from kernelgen.build import BuildOptions, build_paths, build_targets, check_include_dirs, check_paths

    root = args.root
    catalog = load_catalog(root)
    targets = _targets(catalog, [x for t in args.target or [] for x in t.split(";") if x] or None)
    includes = check_include_dirs(catalog, root, targets)
    out_dir = args.out.resolve().parent
    # The targets are built by kernelgen's own driver in the project's build/ (after `kernelgen build`
    # nothing is recompiled), without the torch reader (it is locked to one torch version), and
    # installed into a staging folder whose package the wheel's CMake installs as it is.
    opts = BuildOptions(root=root, build_dir=(args.build_dir or root / "build").resolve(),
                        install_prefix=out_dir / "install", torch_reader=False, package=catalog.naming.package,
                        verbose=args.verbose, lineinfo=not args.no_lineinfo, include_dirs=includes)
    check_paths(build_paths(opts))  # before anything is written
    for option, d in (("--build-dir DIR", opts.build_dir), ("--out FILE", out_dir)):
        _check_writable(option, d)
    files = render_catalog(catalog, templates=root / "templates")
    write_files(root, files, [t.name for t in catalog.targets])
    # A build folder kept between wheel builds keeps what earlier ones staged: only this one's targets
    # go into the wheel.
    for folder in scaffold.prune_staging(opts.install_prefix, opts.package, [t.name for t in targets]):
        print(f"kernelgen: removed {folder} (staged by an earlier wheel build, not asked for now)")
    build_targets(opts, targets)
    text = scaffold.cmake_script(catalog, opts.install_prefix, [t.name for t in targets])
    args.out.write_text(text, encoding="utf-8")
    print(f"kernelgen: wrote {args.out} ({catalog.naming.package}: {', '.join(t.name for t in targets)})")
    return 0


def cmd_draft(args: argparse.Namespace) -> int:
    from kernelgen import draft, writer
    from kernelgen.errors import relpath

    root = args.root
    drafts = draft.draft_files(root, list(args.source), args.module, args.kernel, args.write)
    if not args.write:
        sys.stdout.write(drafts[0][1])
        return 0
    taken = [relpath(out, root) for out, _ in drafts if out.exists()]
    if taken and not args.force:
        raise KernelgenError(f"{', '.join(taken)} exist{'s' if len(taken) == 1 else ''}; use --force to replace, "
                             "or print a draft without --write")
    for out, text in drafts:
        writer.write_text(out, text)
        print(f"kernelgen: wrote {relpath(out, root)}")
    print("kernelgen: check the entries marked 'check', then kernelgen build")
    return 0


def _axis_value(v: str | int) -> str:
    """An axis value as the spec writes it (``true``, ``64``, ``bf16``, ``Act::Relu``)."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def cmd_list(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.root)
    _warn_unused_templates(args.root)
    names = [m.name for m in catalog.modules]
    for wanted in args.module:
        if wanted not in names:
            close = closest(wanted, names)
            hint = f"; did you mean {close!r}?" if close else ""
            raise KernelgenError(f"no module {wanted!r}{hint} ({count(len(names), 'module')}: kernelgen list "
                                 "without names shows them all)")
    print("targets: " + ", ".join(f"{t.name} ({t.arch}, {t.sm_label})" for t in catalog.targets))
    for m in catalog.modules:
        if args.module and m.name not in args.module:
            continue
        ks = f" (kill switch {m.kill_switch})" if m.kill_switch else ""
        print(f"{m.name}: {m.summary}{ks}  [{m.path}]")
        for k in m.kernels:
            reads = [a.name for a in k.args if a.device]
            dev = f"  read on device: {', '.join(reads)}" if reads else ""
            print(f"  {k.name}  targets: {', '.join(k.targets)}{dev}")
        for d in m.dispatches:
            axes = ", ".join(f"{a.name}: [{', '.join(_axis_value(v) for v in a.values)}]" for a in d.axes)
            if len(d.members) < math.prod(len(a.values) for a in d.axes):  # combinations listed one by one
                instances = {k.name: k for k in m.kernels}
                axes = "; ".join(", ".join(f"{n}: {_axis_value(v)}" for n, v in instances[r.kernel].axis_values)
                                 for r in d.members)
            print(f"  {d.name}  dispatches ({axes}): {' -> '.join(r.kernel for r in d.members)}")
        for fb in m.fallbacks:
            print(f"  {fb.name}  chain: {' -> '.join(r.qualname for r in fb.members)}")
        for s in m.structs:
            print(f"  {s.name}  {_struct_text(s)}")
        for where, text in _build_lines(catalog, m):
            print(f"  build{where}: {text}")
    return 0


def _struct_text(s) -> str:
    """A struct as `kernelgen list` shows it: its C++ type, size and fields (their types, arrays as
    T[n])."""
    align = f", align {s.over_aligned}" if s.over_aligned else ""
    head = f"struct {s.cpp} ({count(s.size, 'byte')}{align})"
    if s.stateless:
        return f"{head}: no fields (a functor type: callers pass nothing)"
    fields = ", ".join(f"{f.name}: {f.struct.name if f.struct is not None else f.scalar.name}"
                       + (f"[{f.count}]" if f.count else "") for f in s.fields)
    return f"{head}: {fields}"


def _build_lines(catalog, m) -> list[tuple[str, str]]:
    """A module's build settings as `kernelgen list` shows them: once when every target has the
    same, else per target."""

    def text(b) -> str:
        parts = []
        if b.include_dirs:
            parts.append("include " + ", ".join(d for d, _ in b.include_dirs))
        if b.defines:
            parts.append("defines " + ", ".join(b.define_texts))
        if b.nvcc_flags:
            parts.append("nvcc " + " ".join(b.nvcc_flags))
        return "; ".join(parts)

    per = [(t.name, text(catalog.module_build(m, t))) for t in catalog.targets]
    if not any(t for _, t in per):
        return []
    if len({t for _, t in per}) == 1:
        return [("", per[0][1])]
    return [(f" on {name}", t or "none") for name, t in per]


def cmd_plan(args: argparse.Namespace) -> int:
    from kernelgen import plan_cli

    catalog = load_catalog(args.root)
    return plan_cli.run(catalog, args.name, args.values, _targets(catalog, args.target))


def cmd_sass(args: argparse.Namespace) -> int:
    import json

    from kernelgen import sass

    catalog = load_catalog(args.root)
    targets = _targets(catalog, args.target)
    sass.select(catalog, args.names)  # unknown names fail before anything is read
    build_dir = (args.build_dir or args.root / "build").resolve()
    against = None
    if args.against is not None:
        try:
            against = json.loads(args.against.read_text(encoding="utf-8"))
            problem = sass.json_problem(against)  # the whole file, before anything is printed
            if problem:
                raise ValueError(problem)
        except (OSError, ValueError) as exc:
            raise KernelgenError(f"cannot read {args.against} (a kernelgen sass --json file): {exc}") from None
    per_target = {}
    for t in targets:
        if not (build_dir / t.name).is_dir():
            if args.target:
                raise KernelgenError(f"target {t.name} is not built (no {build_dir / t.name}); run: kernelgen build "
                                     f"--target {t.name}")
            continue
        code = sass.collect(catalog, build_dir, t.name, args.names)
        per_target[t.name] = code
        print(f"kernelgen: {t.name}: {count(len(code), 'kernel function')} (SASS of the objects in "
              f"{build_dir / t.name})")
        for line in sass.report(code, args.ops, None if against is None else against.get(t.name, {}), args.loops):
            print(f"  {line}")
    if not per_target:
        raise KernelgenError(f"no target is built under {build_dir}; run: kernelgen build")
    if args.json is not None:
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(sass.to_json(per_target), encoding="utf-8")
        except OSError as exc:
            raise KernelgenError(f"cannot write {args.json}: {exc}") from None
        print(f"kernelgen: wrote {args.json}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from kernelgen import schema

    if args.docs is not None:
        path = Path(args.docs) if args.docs else args.root / "docs" / "spec-format.md"
        try:
            text = path.read_text(encoding="utf-8")
            new = schema.update_doc(text)
        except (OSError, ValueError) as exc:
            raise KernelgenError(f"cannot update the field reference in {path}: {exc}") from None
        if new != text:
            path.write_text(new, encoding="utf-8")
        print(f"kernelgen: field reference in {path} {'updated' if new != text else 'is up to date'}")
        return 0
    text = schema.json_schema_text("targets" if args.targets else "project" if args.project else "module")
    if args.out:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise KernelgenError(f"cannot write {args.out}: {exc}") from None
        print(f"kernelgen: wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


# The most any integer option takes: what an int32 holds (CMake's limit for -j).
MOST = 2**31 - 1


def _count_option(p: argparse.ArgumentParser, *flags: str, least: int, most: int = MOST, **kwargs: object) -> None:
    """An integer option of ``p`` that must be from ``least`` to ``most`` (checked by :func:`main`,
    a usage error)."""
    action = p.add_argument(*flags, type=int, **kwargs)  # type: ignore[arg-type]
    p.set_defaults(counts=(*(p.get_default("counts") or ()), (action.dest, flags[0], least, most)))


def _count_error(args: argparse.Namespace) -> str | None:
    """The usage error of an integer option out of its range, or None."""
    for dest, flag, least, most in getattr(args, "counts", ()):
        value = getattr(args, dest)
        if value is not None and value < least:
            return f"{flag} must be {least} or more (got {flag} {value})"
        if value is not None and value > most:
            return f"{flag} must be {most} or less (got {flag} {value})"
    return None


# What `kernelgen build --help` says of the CUDA toolkit (kernelgen.toolkit finds it).
BUILD_TOOLKIT_HELP = """\
CUDA toolkit: nvcc is taken from, in order, $CUDACXX; $CUDA_HOME or $CUDA_PATH; nvcc on PATH;
/usr/local/cuda; the CUDA toolkit wheels from PyPI installed in this environment (nvidia-cuda-nvcc
and the others of kernelgen's `cuda` extra). Without any, the build installs those wheels from PyPI into the active
environment first (about 130 MB; KERNELGEN_NO_CUDA_INSTALL=1 turns that off, and the build then
stops saying what to install). KERNELGEN_IGNORE_SYSTEM_CUDA=1 hides every toolkit but the wheels
(to check that a machine without a toolkit works)."""


class _Output:
    """Standard output whose reader may go away (``kernelgen ... | head``): once the pipe is
    closed, what is written goes to /dev/null (the file descriptor too, for the final flush and
    any child), and ``stop`` says whether the command then stops (BrokenPipeError, which
    :func:`main` ends quietly) or goes on (a build, whose output is only its log)."""

    def __init__(self, stream, stop: bool) -> None:
        self.stream = stream
        self.stop = stop
        self.gone = False

    def _closed(self) -> None:
        if not self.gone:
            self.gone = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.stream.fileno())
            finally:
                os.close(devnull)
        if self.stop:
            raise BrokenPipeError(errno.EPIPE, "the reader of the output has gone")

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._closed()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._closed()

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


def _only_prints(args: argparse.Namespace) -> bool:
    """Whether the command's whole work is what it prints (so a closed output ends it), rather
    than files it writes or a build (which go on)."""
    if args.command in ("list", "plan"):
        return True
    if args.command == "sass":
        return args.json is None
    if args.command == "schema":
        return not args.out and args.docs is None
    if args.command == "draft":
        return not args.write
    return False


def main(argv: list[str] | None = None) -> int:
    stdout = sys.stdout
    try:
        return _main(argv)
    finally:
        if isinstance(sys.stdout, _Output):
            sys.stdout = stdout


ROOT_HELP = "project root (default: the folder above holding specs/targets.yaml)"


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser: each command a subparser."""
    parser = argparse.ArgumentParser(prog="kernelgen", description="CUDA kernel specs -> launchers, bindings, builds.")
    parser.add_argument("--version", action="version", version=f"kernelgen {__version__}")
    parser.add_argument("--root", type=Path, help=ROOT_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="regenerate generated/ from specs/")
    g.add_argument("--check", action="store_true", help="only check generated/ is current; exit 1 when stale")
    g.set_defaults(func=cmd_generate)
    b = sub.add_parser("build", help="regenerate, then build and install the targets",
                       description="Regenerate generated/ from specs/, then build and install every target (or "
                       "those named with --target); the project's package is then importable in the active "
                       "environment.", epilog=BUILD_TOOLKIT_HELP)
    b.add_argument("--target", "-t", action="append", help="target to build (repeatable; default: all)")
    _count_option(b, "--jobs", "-j", least=1, help="parallel compile jobs, 1 or more (default: ninja's choice)")
    b.add_argument("--compiler-launcher", help="compiler cache or launcher for nvcc and c++, e.g. ccache or sccache")
    b.add_argument("--build-dir", type=Path, help="build trees (default: <root>/build)")
    b.add_argument("--install-dir", type=Path, help="install prefix (default: <root>/bindings)")
    b.add_argument("--verbose", "-v", action="store_true", help="show every compiler command and message")
    b.add_argument("--no-torch-reader", action="store_true",
                   help="do not build the C++ reader of torch tensors even where torch is installed")
    b.add_argument("--no-lineinfo", action="store_true", help=_NO_LINEINFO)
    b.add_argument("--no-link", action="store_true",
                   help="do not make the package importable in the active environment (no .pth file)")
    b.set_defaults(func=cmd_build)
    i = sub.add_parser("init", help="create a new project: specs, an example kernel, pyproject.toml, a test")
    i.add_argument("dir", nargs="?", type=Path,
                   help="the project folder (default: --root's folder, else the current one)")
    i.add_argument("--package", "-p", required=True, help="the project's Python package (also its C++ namespace, "
                   "C ABI prefix and library names)")
    i.add_argument("--target", "-t", action="append",
                   help="a target for specs/targets.yaml (repeatable; default: gb10 and hopper; known: "
                   "ampere, ada, hopper, blackwell, gb10)")
    i.add_argument("--force", action="store_true", help="overwrite files that exist")
    i.add_argument("--keep-existing", action="store_true",
                   help="in a folder that has some of the files (an existing repository), write only the others "
                   "and append kernelgen's entries to its .gitignore")
    i.set_defaults(func=cmd_init, root_optional=True)
    dr = sub.add_parser("draft", help="a first module spec for the __global__ functions of a CUDA source, "
                        "to check and complete")
    dr.add_argument("source", type=Path, nargs="+", help="the CUDA source, inside the project (several with --write: "
                    "a module each)")
    dr.add_argument("--module", "-m", help="the module's name (default: the file's name)")
    dr.add_argument("--kernel", "-k", action="append", help="draft only this __global__ function (repeatable)")
    dr.add_argument("--write", action="store_true", help="write specs/<module>.yaml instead of printing it")
    dr.add_argument("--force", action="store_true", help="with --write: replace a spec that exists")
    dr.set_defaults(func=cmd_draft)
    u = sub.add_parser("unlink", help="remove the .pth file that makes the package importable")
    u.set_defaults(func=cmd_unlink)
    cm = sub.add_parser("cmake", help="write the CMake script that a project's CMakeLists.txt includes (wheels)")
    cm.add_argument("--out", "-o", type=Path, required=True, help="the script to write")
    cm.add_argument("--target", "-t", action="append", help="target to build (repeatable; default: all)")
    cm.add_argument("--build-dir", type=Path, help="build trees (default: <root>/build, shared with kernelgen build)")
    cm.add_argument("--verbose", "-v", action="store_true", help="show every compiler command and message")
    cm.add_argument("--no-lineinfo", action="store_true", help=_NO_LINEINFO)
    cm.set_defaults(func=cmd_cmake)
    ls = sub.add_parser("list", help="list modules, kernels, dispatchers, fallback chains and structs")
    ls.add_argument("module", nargs="*", help="show only these modules (default: every module)")
    ls.set_defaults(func=cmd_list)
    pl = sub.add_parser(
        "plan", help="what a kernel's or chain's plan gives for argument values, per target (no GPU)",
        description="Evaluate the plan of a kernel (or of each member of a fallback chain) for the given "
        "integer arguments from the specs alone: launched with its grid, block, shared memory, cluster and "
        "let values, not launched and why, or the error. Device names take the target's table.",
    )
    pl.add_argument("name", help="MODULE.KERNEL or MODULE.CHAIN (or a name only one module has)")
    pl.add_argument("values", nargs="*", metavar="ARG=VALUE",
                    help="integer arguments in decimal, as the specs write them, e.g. rows=256 n=4096 (a bool "
                    "argument: true, false, 0 or 1; a float argument, such as alpha=0.5, is checked and left out: "
                    "no plan reads it); a list (rows=64,256,2048) sweeps, one table row per argument set")
    pl.add_argument("--target", "-t", action="append", help="target (repeatable; default: all)")
    pl.set_defaults(func=cmd_plan)
    sa = sub.add_parser(
        "sass", help="registers, stack and SASS instructions of the built kernels (no GPU)",
        description="Read the SASS of each catalog kernel from the build's objects (cuobjdump): its registers, "
        "stack bytes and static instruction count, with --ops its largest opcode families and with --loops its "
        "largest loops. --json keeps "
        "the figures; --against compares with such a file (a change's effect on the code, before it runs).",
    )
    sa.add_argument("names", nargs="*", metavar="NAME",
                    help="MODULE, MODULE.KERNEL or MODULE.CHAIN (a chain: its members; default: every kernel)")
    sa.add_argument("--target", "-t", action="append", help="target (repeatable; default: every built target)")
    _count_option(sa, "--ops", least=0, default=0, metavar="N",
                    help="also list each kernel's N largest opcode families (with --against: N largest changes)")
    _count_option(sa, "--loops", least=0, default=0, metavar="N",
                    help="also list each kernel's N largest loops: static instructions from a backward branch's "
                    "target to the branch (with --against: beside the earlier ones)")
    sa.add_argument("--json", type=Path, metavar="FILE", help="write the figures to FILE")
    sa.add_argument("--against", type=Path, metavar="FILE", help="compare with a FILE written by --json")
    sa.add_argument("--build-dir", type=Path, help="build trees (default: <root>/build)")
    sa.set_defaults(func=cmd_sass)
    sc = sub.add_parser(
        "schema", help="print the JSON Schema of module specs, for editors",
        description="Print the JSON Schema (draft 2020-12) of module specs, or of specs/targets.yaml with "
        "--targets, or of specs/project.yaml with --project. An editor with the YAML language server uses it "
        "through a first line '# yaml-language-server: $schema=PATH' in a spec.",
    )
    which = sc.add_mutually_exclusive_group()
    which.add_argument("--targets", action="store_true", help="the schema of specs/targets.yaml instead")
    which.add_argument("--project", action="store_true", help="the schema of specs/project.yaml instead")
    sc.add_argument("--out", "-o", type=Path, help="write the schema to this file instead of printing it")
    sc.add_argument("--docs", nargs="?", const="", metavar="FILE",
                    help="regenerate the field reference in docs/spec-format.md (or FILE) instead")
    sc.set_defaults(func=cmd_schema, root_optional=True)
    for command in sub.choices.values():  # --root after the command too (kernelgen build --root DIR)
        command.add_argument("--root", type=Path, dest="command_root", metavar="ROOT", help=ROOT_HELP)
        command.set_defaults(parser=command)  # for the usage errors main() finds
    return parser


def _root_after_command(args: argparse.Namespace) -> str | None:
    """Takes a ``--root`` given after the command as one given before it (its only meaning); the
    usage error of two that name different folders, or None."""
    after = args.command_root
    if after is not None and args.root is not None and after.resolve() != args.root.resolve():
        return f"--root {args.root} and --root {after} name two folders: give one"
    if after is not None:
        args.root = after
    return None


def _main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = _count_error(args) or _root_after_command(args)
    if problem:
        args.parser.print_usage(sys.stderr)
        print(f"{args.parser.prog}: error: {problem}", file=sys.stderr)
        return 2
    sys.stdout = _Output(sys.stdout, stop=_only_prints(args))
    try:
        if args.root is not None and not getattr(args, "root_optional", False):
            args.root = check_root(args.root)
        elif args.root or not getattr(args, "root_optional", False) or getattr(args, "docs", None) == "":
            args.root = (args.root or find_root(Path.cwd())).resolve()
        code = int(args.func(args))
        sys.stdout.flush()  # what is still buffered meets a closed output here, as the rest did
        return code
    except BrokenPipeError as exc:
        if isinstance(sys.stdout, _Output) and sys.stdout.gone:
            # the reader of the output has gone (kernelgen list | head): end quietly, as Python's
            # own tools do (exit status 1, the rest of the output discarded)
            return 1
        print(f"kernelgen: error: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except SpecErrors as exc:
        for e in exc.errors[: exc.SHOWN]:
            print(f"kernelgen: error: {e}", file=sys.stderr)
        print(f"kernelgen: {exc.summary()}", file=sys.stderr)
        return 2
    except SpecError as exc:
        print(f"kernelgen: error: {exc}", file=sys.stderr)
        return 2
    except KernelgenError as exc:
        print(f"kernelgen: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"kernelgen: error: {exc.strerror or exc}{where}{_not_writable_hint(exc, args.command)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernelgen: interrupted", file=sys.stderr)
        return 130


# The options that choose the folders a command writes to.
_NO_LINEINFO = ("build the device code without source line information (nvcc -lineinfo, which records the "
                "sources' paths on this machine in the libraries)")
_FOLDER_OPTIONS = {"build": "--build-dir DIR, --install-dir DIR", "cmake": "--build-dir DIR, --out FILE",
                   "sass": "--json FILE", "schema": "--out FILE"}


def _not_writable_hint(exc: OSError, command: str) -> str:
    """For a file kernelgen could not write (permissions, a read-only file system): which folder,
    and what to do."""
    if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not exc.filename:
        return ""
    folder = Path(os.fsdecode(exc.filename)).parent
    options = _FOLDER_OPTIONS.get(command)
    return (f": {folder} is not writable (its permissions, or a file system mounted read-only); make it writable, "
            "or use another folder" + (f" ({options})" if options else ""))


def entry() -> None:
    """The ``kernelgen`` command: :func:`main`, then an exit that skips freeing the process's
    objects one by one (a large spec's catalog and caches took a second to tear down)."""
    try:
        code = main()
    except SystemExit as e:  # argparse's --help, --version and usage errors
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
