"""The README and docs/ name only what exists: every link opens a file, every `make` target is in the Makefile,
every `manage.py` command is one of the hub's, and every setting the hub reads is in docs/configuration.md.

A page that tells a person to run something that is not there is the first thing a new user meets, so the
pages are checked like code. (Each command they name has its own tests; this keeps the names true.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import get_commands

BASE = Path(__file__).resolve().parents[2]
PAGES = [BASE / "README.md", *sorted((BASE / "docs").rglob("*.md"))]
FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def code_of(text: str) -> list[str]:
    """What a page shows as code: fenced blocks and inline spans."""
    blocks = FENCE.findall(text)
    rest = FENCE.sub("", text)
    return [*blocks, *SPAN.findall(rest)]


def named(pattern: str) -> set[tuple[str, str]]:
    found = set()
    for page in PAGES:
        for code in code_of(page.read_text()):
            for match in re.finditer(pattern, code):
                found.add((page.name, match.group(1)))
    return found


def makefile_targets() -> set[str]:
    text = (BASE / "Makefile").read_text()
    return set(re.findall(r"(?m)^([A-Za-z][\w-]*)\s*:(?!=)", text))


def test_the_readme_is_a_first_page():
    lines = (BASE / "README.md").read_text().splitlines()
    assert len(lines) <= 60, f"README.md has {len(lines)} lines; the reference belongs in docs/"
    text = "\n".join(lines)
    for must in ("make up", "make test", "phone", "real Tiiny", "docs/"):
        assert must in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_opens_a_file(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{page.name} links to missing files: {broken}"


def test_every_make_target_a_page_names_exists():
    targets = makefile_targets()
    missing = sorted({(p, t) for p, t in named(r"\bmake ([a-z][\w-]*)") if t not in targets})
    assert not missing, f"pages name make targets the Makefile lacks: {missing}"


# manage.py answers these itself with another command (Django would print its own version).
ALIASES = {"version": "hub_version"}


def test_every_manage_command_a_page_names_exists():
    commands = set(get_commands()) | {a for a, c in ALIASES.items() if c in get_commands()}
    missing = sorted({(p, c) for p, c in named(r"manage\.py ([a-z_]+)") if c not in commands})
    assert not missing, f"pages name manage.py commands that don't exist: {missing}"


def settings_read_from_the_environment() -> set[str]:
    """Every variable hub/settings.py reads through hub.env (or os.environ)."""
    text = (BASE / "hub" / "settings.py").read_text()
    found = set(re.findall(r"env_\w+\(\s*\"([A-Z][A-Z0-9_]+)\"", text))
    found |= set(re.findall(r"os\.environ(?:\.get)?\(\s*\"([A-Z][A-Z0-9_]+)\"", text))
    found |= set(re.findall(r"os\.environ\[\"([A-Z][A-Z0-9_]+)\"\]", text))
    return found


# Read by settings.py, but for the test run or the launcher's own processes, not for a person to set.
INTERNAL = {"HUB_WEB_SERVER_PROCESS", "HUB_TEST_DB", "HUB_INSECURE_FAST_HASHER", "DJANGO_SETTINGS_MODULE"}


def test_every_setting_is_documented():
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", (BASE / "docs" / "configuration.md").read_text()))
    missing = sorted(settings_read_from_the_environment() - documented - INTERNAL)
    assert not missing, f"settings read from the environment but not in docs/configuration.md: {missing}"


OUR_APPS = ("hub", "devices", "jobs", "notify", "backups")


def test_every_command_of_ours_a_page_names_has_a_test():
    """A command of the hub's own (not Django's or a library's) that a page tells people to run is run by a test."""
    commands = get_commands()
    names = {ALIASES.get(c, c) for _, c in named(r"manage\.py ([a-z_]+)")}
    ours = {c for c in names if commands.get(c, "").split(".")[0] in OUR_APPS}
    tests = "\n".join(p.read_text() for p in BASE.glob("*/**/tests/**/test_*.py"))
    untested = sorted(c for c in ours if f'"{c}"' not in tests and f"'{c}'" not in tests)
    assert not untested, f"commands the pages name without a test that runs them: {untested}"
