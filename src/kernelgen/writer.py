"""The one place kernelgen writes generated files.

Writes are atomic (a temporary file in the same directory, then ``os.replace``), happen
only when content changed (so CMake rebuilds only what changed), and files under the
output directory that no spec produces any more are removed. A lock on the output
directory serialises concurrent generations of one tree.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kernelgen.errors import GenerationError

GENERATED = "generated"
# What tools write beside generated files, relative to generated/<target>/: cargo's output and
# lock file next to the Rust crate. Neither generated nor orphaned, so never removed.
BUILD_OUTPUTS = ("rust/target/", "rust/Cargo.lock")


@dataclass
class WriteReport:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass
class CheckReport:
    stale: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.stale or self.missing or self.orphaned)


def _existing(root: Path, subdirs: list[str]) -> set[str]:
    out: set[str] = set()
    for sub in subdirs:
        base = root / sub
        if not base.is_dir():
            continue
        for p in base.rglob("*"):
            if p.is_file() and not p.name.startswith(".kernelgen"):
                if p.relative_to(base).as_posix().startswith(BUILD_OUTPUTS):
                    continue
                out.add(p.relative_to(root).as_posix())
    return out


def _owned_dirs(targets: list[str]) -> list[str]:
    """The folders the writer owns: every file in them comes from the specs."""
    return sorted({f"{GENERATED}/{t}" for t in targets})


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``root/generated`` for the duration."""
    gen = root / GENERATED
    gen.mkdir(parents=True, exist_ok=True)
    fd = os.open(gen, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write_files(root: Path, files: dict[str, str], targets: list[str]) -> WriteReport:
    """Make ``root/generated/<target>/`` hold exactly ``files`` for the given targets."""
    report = WriteReport()
    for rel in files:
        if not rel.startswith(f"{GENERATED}/") or ".." in rel.split("/"):
            raise GenerationError(f"refusing to write outside {GENERATED}/: {rel}")
    with locked(root):
        for rel in sorted(files):
            path = root / rel
            data = files[rel].encode("utf-8")
            try:
                if path.read_bytes() == data:
                    report.unchanged.append(rel)
                    continue
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise GenerationError(f"cannot read {rel}: {exc}") from None
            _atomic_write(path, data)
            report.written.append(rel)
        for rel in sorted(_existing(root, _owned_dirs(targets)) - set(files)):
            (root / rel).unlink()
            report.removed.append(rel)
        for sub in _owned_dirs(targets):
            _remove_empty_dirs(root / sub)
    return report


def check_files(root: Path, files: dict[str, str], targets: list[str]) -> CheckReport:
    """Compare ``generated/`` with what the specs produce, without writing."""
    report = CheckReport()
    for rel in sorted(files):
        path = root / rel
        try:
            if path.read_bytes() != files[rel].encode("utf-8"):
                report.stale.append(rel)
        except FileNotFoundError:
            report.missing.append(rel)
    report.orphaned = sorted(_existing(root, _owned_dirs(targets)) - set(files))
    return report


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kernelgen-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _remove_empty_dirs(base: Path) -> None:
    if not base.is_dir():
        return
    for d in sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            d.rmdir()
