"""The hub's version: ``__version__`` (bumped with each release, see CHANGELOG.md) and the git commit it runs.

Read by ``manage.py version``, the page footer, ``/healthz`` details and every backup's manifest. The commit is
read once from the checkout's ``.git`` (no ``git`` process); a copy without ``.git`` has none.
"""

from __future__ import annotations

import functools
from pathlib import Path

__version__ = "1.0.0"

_BASE = Path(__file__).resolve().parent.parent


def _git_dir(base: Path) -> Path | None:
    dot_git = base / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():  # a worktree or submodule: "gitdir: <path>"
        text = dot_git.read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            path = Path(text.removeprefix("gitdir:").strip())
            return path if path.is_absolute() else (base / path).resolve()
    return None


def _read_ref(git_dir: Path, ref: str) -> str:
    for where in (git_dir, _common_dir(git_dir)):
        loose = where / ref
        if loose.is_file():
            return loose.read_text().strip()
        packed = where / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                sha, _, name = line.partition(" ")
                if name == ref:
                    return sha
    return ""


def _common_dir(git_dir: Path) -> Path:
    common = git_dir / "commondir"
    if common.is_file():
        path = Path(common.read_text().strip())
        return path if path.is_absolute() else (git_dir / path).resolve()
    return git_dir


@functools.cache
def commit(base: Path = _BASE) -> str:
    """The checkout's commit (12 hex digits), or "" when it isn't a git checkout."""
    try:
        git_dir = _git_dir(base)
        if git_dir is None:
            return ""
        head = (git_dir / "HEAD").read_text().strip()
        sha = _read_ref(git_dir, head.removeprefix("ref:").strip()) if head.startswith("ref:") else head
    except OSError:
        return ""
    return sha[:12] if len(sha) >= 12 and all(c in "0123456789abcdef" for c in sha) else ""


def version_line() -> str:
    """``1.0.0 (4afcaa981767)``, or just the version outside a git checkout."""
    sha = commit()
    return f"{__version__} ({sha})" if sha else __version__
