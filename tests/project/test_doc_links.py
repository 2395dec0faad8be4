"""Every relative link in the README and docs/ reaches a file and, where it names
one, a heading of that file: pages move and split as the project grows, and a
newcomer following a dead link loses the thread."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
#: ``[text](target)``, the target without spaces (a title after it is not used here).
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
FENCE = re.compile(r"```.*?```", re.DOTALL)


def anchor(heading: str) -> str:
    """Return the anchor GitHub gives a heading: lower case, punctuation other
    than hyphens dropped, spaces turned into hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Return the anchors of ``page``'s headings (those in code blocks are not)."""
    return {anchor(h) for h in HEADING.findall(FENCE.sub("", page.read_text()))}


def dead_links(page: Path) -> list[str]:
    """Return ``page``'s relative links whose file or heading does not exist."""
    dead = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            dead.append(f"{target} (no file {linked})")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            dead.append(f"{target} (no heading #{fragment} in {linked.name})")
    return dead


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_reaches_its_file_and_heading(page):
    assert dead_links(page) == []


def test_a_link_to_a_missing_heading_is_found(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n## Some section\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#some-section) [gone](a.md#other) [nofile](c.md) [self](#title)\n"
        "# Title\n"
    )
    assert dead_links(page) == [
        "a.md#other (no heading #other in a.md)",
        f"c.md (no file {tmp_path / 'c.md'})",
    ]
