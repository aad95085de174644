"""The structure rules import-linter can't see (make lint runs this after lint-imports).

1. No module over 700 lines (migrations, tests and the emulator, which mirrors a device, aside).
2. No function over cyclomatic complexity 15 (radon) in jobs/, devices/clients/ and hub/, unless the line of
   its ``def`` (or the comment line just above it) says why, starting ``# complexity:``.
3. A function-local import of the hub's own code (hub, devices, jobs, notify) carries a one-line reason: a
   comment on its line or on the line above. Deferred imports must not hide a loop; import-linter counts them,
   and a reader must be able to tell the ones that matter.

Prints one line per breach and exits 1 when there is any.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parent.parent
APPS = ("hub", "devices", "jobs", "notify", "backups")
MAX_LINES = 700
MAX_COMPLEXITY = 15
COMPLEXITY_DIRS = ("jobs/", "devices/clients/", "hub/", "backups/")
PROJECT = APPS


def _sources() -> list[Path]:
    out = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/migrations/" in rel or "/tests/" in rel or rel.startswith("devices/emulator/"):
                continue
            out.append(path)
    return out


def _has_reason(lines: list[str], lineno: int, marker: str = "#") -> bool:
    """A comment (starting with ``marker``) on line ``lineno`` (1-based), or alone on the line above it or above
    the block of import lines it stands in (one reason may cover a group of deferred imports)."""
    line = lines[lineno - 1]
    code = line.split("#", 1)[0]
    if marker in line[len(code) :] or (marker != "#" and marker in line):
        return True
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith(("from ", "import ")) and marker == "#":
        i -= 1
    return i >= 0 and lines[i].strip().startswith(marker)


def _local_imports(tree: ast.AST):
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["." if node.level else (node.module or "")]
            else:
                continue
            if any(n == "." or n.split(".")[0] in PROJECT for n in names):
                yield node


def check(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text()
    lines = text.splitlines()
    problems = []
    if len(lines) > MAX_LINES:
        problems.append(f"{rel}: {len(lines)} lines (at most {MAX_LINES}): split it along what it does")
    tree = ast.parse(text)
    seen = set()
    for node in _local_imports(tree):
        if node.lineno in seen:
            continue
        seen.add(node.lineno)
        if not _has_reason(lines, node.lineno):
            problems.append(f"{rel}:{node.lineno}: a function-local import without a one-line reason")
    if rel.startswith(COMPLEXITY_DIRS):
        visited = cc_visit(text)
        blocks = {(b.lineno, b.fullname): b for b in visited if not hasattr(b, "methods")}
        for cls in (b for b in visited if hasattr(b, "methods")):
            blocks.update({(m.lineno, m.fullname): m for m in cls.methods})
        for item in blocks.values():
            if item.complexity > MAX_COMPLEXITY and not _has_reason(lines, item.lineno, "# complexity:"):
                problems.append(
                    f"{rel}:{item.lineno}: {item.fullname} has complexity {item.complexity} "
                    f"(at most {MAX_COMPLEXITY}, or a '# complexity:' comment saying why)"
                )
    return problems


def main() -> int:
    problems = [p for path in _sources() for p in check(path)]
    for p in problems:
        print(p)
    print(f"check_structure: {len(problems)} problem(s)" if problems else "check_structure: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
