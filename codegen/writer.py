"""The one object every generated file goes through.

``Writer.add(path, text)`` collects a file in memory and refuses a path
added twice (two templates or two groups rendering the same file is a bug,
not something to resolve by "last one wins"). Nothing touches the disk until
``write(out_dir)``, which writes only files whose text changed (unchanged
files keep their mtimes: the build relies on that to skip SWIG) and removes
stale ones; ``diff(out_dir)`` compares instead of writing (--check).
"""
from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path, PurePosixPath

from .errors import CodegenError


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        return "<not UTF-8>\n"


class Writer:
    """Generated files by path relative to the output folder."""

    def __init__(self, stale_patterns: tuple[str, ...] = ()):
        # Globs (relative to the output folder) of files this generator owns:
        # those it no longer produces are stale.
        self.stale_patterns = stale_patterns
        self._files: dict[str, str] = {}

    def add(self, path: str, text: str) -> None:
        p = PurePosixPath(path)
        if p.is_absolute() or ".." in p.parts or p.as_posix() != path:
            raise CodegenError(f"{path!r}: not a normalised relative path")
        if path in self._files:
            raise CodegenError(f"{path}: generated twice (two renderings map to one file)")
        self._files[path] = text

    @property
    def files(self) -> dict[str, str]:
        """{relative path: text}, sorted by path."""
        return dict(sorted(self._files.items()))

    def stale_files(self, out_dir: Path) -> list[str]:
        """Files under out_dir that match the stale patterns but were not added."""
        found = {p.relative_to(out_dir).as_posix()
                 for pattern in self.stale_patterns for p in out_dir.glob(pattern)
                 if p.is_file()}
        return sorted(found - set(self._files))

    def diff(self, out_dir: Path) -> str:
        """A unified diff from out_dir's contents to the added files ("" if equal)."""
        chunks = []
        base = out_dir.as_posix().rstrip("/")
        for rel in sorted(set(self._files) | set(self.stale_files(out_dir))):
            old = _read(out_dir / rel)
            new = self._files.get(rel)
            if old == new:
                continue
            for line in difflib.unified_diff(
                    (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                    fromfile=f"{base}/{rel}" if old is not None else "/dev/null",
                    tofile=f"{base}/{rel} (expected)" if new is not None else "/dev/null"):
                if not line.endswith("\n"):
                    line += "\n\\ No newline at end of file\n"
                chunks.append(line)
        return "".join(chunks)

    def write(self, out_dir: Path) -> tuple[list[str], list[str]]:
        """Makes out_dir match: writes changed files, removes stale ones.

        Each file is replaced atomically (a reader never sees half of one).
        Returns (written, removed), sorted.
        """
        removed = self.stale_files(out_dir)
        for rel in removed:
            (out_dir / rel).unlink()
        written = []
        umask = os.umask(0)
        os.umask(umask)
        for rel, text in self.files.items():
            path = out_dir / rel
            if _read(path) == text:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                    f.write(text)
                os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; open() would not
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
            written.append(rel)
        return written, removed
