"""scripts/check_structure.py (make lint, which also runs it on the tree): what it flags and what it lets pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_structure", ROOT / "scripts" / "check_structure.py")
check_structure = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_structure)


@pytest.fixture
def source(tmp_path, monkeypatch):
    monkeypatch.setattr(check_structure, "ROOT", tmp_path)
    (tmp_path / "jobs").mkdir()

    def write(text: str) -> list[str]:
        path = tmp_path / "jobs" / "mod.py"
        path.write_text(text)
        return check_structure.check(path)

    return write


def _branches(n: int) -> str:
    return "".join(f"    if x == {i}:\n        return {i}\n" for i in range(n))


def test_a_deferred_import_needs_a_reason(source):
    problems = source("def f():\n    from jobs.models import Job\n    return Job\n")
    assert problems == ["jobs/mod.py:2: a function-local import without a one-line reason"]


def test_a_comment_on_the_line_or_above_the_block_is_a_reason(source):
    assert source("def f():\n    from jobs import models  # the registry is not ready at import\n") == []
    assert (
        source(
            "def f():\n    # the registry is not ready at import\n    from jobs import a\n    from jobs import b\n"
        )
        == []
    )


def test_imports_of_other_packages_are_not_counted(source):
    assert source("def f():\n    import json\n    from django.conf import settings\n") == []


def test_complexity_over_15_is_flagged_unless_a_comment_says_why(source):
    problems = source("def g(x):\n" + _branches(16))
    assert len(problems) == 1 and "g has complexity 17" in problems[0]
    assert source("# complexity: one table of cases, read top to bottom\ndef g(x):\n" + _branches(16)) == []
    assert source("def g(x):\n" + _branches(14)) == []


def test_a_module_over_700_lines_is_flagged(source):
    problems = source("x = 1\n" * 701)
    assert problems == ["jobs/mod.py: 701 lines (at most 700): split it along what it does"]
