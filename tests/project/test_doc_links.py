"""Every relative link in the README and docs/ reaches a file of this repository
and, where it names one, a heading of that file: pages move and split as the
project grows, and a newcomer following a dead link loses the thread. A link out
of the repository (to a folder beside the checkout) works on one machine only."""

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


def dead_links(page: Path, root: Path = ROOT) -> list[str]:
    """Return ``page``'s relative links that leave ``root`` or whose file or
    heading does not exist."""
    dead = []
    # Code blocks quote text (a command's output, code): their brackets are not links.
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.is_relative_to(root.resolve()):
            dead.append(f"{target} (outside the repository)")
        elif not linked.exists():
            dead.append(f"{target} (no file {linked})")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            dead.append(f"{target} (no heading #{fragment} in {linked.name})")
    return dead


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_reaches_its_file_and_heading(page):
    assert dead_links(page) == []


def test_a_missing_heading_or_file_and_a_link_out_of_the_repository_are_found(
    tmp_path,
):
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "beside.md").write_text("# Beside\n")
    (root / "a.md").write_text("# Title\n\n## Some section\n")
    page = root / "b.md"
    page.write_text(
        "[ok](a.md#some-section) [gone](a.md#other) [nofile](c.md) [self](#title)\n"
        "[out](../beside.md)\n# Title\n```\nxs[0](ys)\n```\n"
    )
    assert dead_links(page, root) == [
        "a.md#other (no heading #other in a.md)",
        f"c.md (no file {root / 'c.md'})",
        "../beside.md (outside the repository)",
    ]
