"""Check a static HTML report: well formed, every image decodes, every link exists.

Used by the tests and by ``scripts/check-report.sh`` (which also renders the page in
headless Chromium), so a broken figure or a dead link to a training report is found
before an operator opens the page.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

from PIL import Image

#: Tags without a closing tag.
VOID_TAGS = {"meta", "img", "br", "hr", "link", "input"}


class _PageParser(HTMLParser):
    """Collect image sources and local links; note tags that do not nest."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.images: list[str] = []
        self.links: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            self.images.append(values.get("src") or "")
            if not values.get("alt"):
                self.problems.append(f"<img src={values.get('src')!r}> has no alt text")
        if tag == "a" and values.get("href"):
            self.links.append(str(values["href"]))
        if tag not in VOID_TAGS:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"unexpected </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()


def _local(href: str) -> bool:
    parsed = urlparse(href)
    return not parsed.scheme and not parsed.netloc and not href.startswith("#")


def page_problems(page: Path) -> tuple[list[str], list[str], list[str]]:
    """Return ``(problems, images, links)`` of ``page``; no problems means it is fine.

    A problem is a tag that does not nest, an image without alt text, an image that
    is missing, empty or does not decode, or a local link to a missing file.
    """
    text = page.read_text()
    parser = _PageParser()
    parser.feed(text)
    problems = list(parser.problems)
    if not text.startswith("<!DOCTYPE html>"):
        problems.append("the page does not start with <!DOCTYPE html>")
    if parser.stack:
        problems.append(f"unclosed tags: {parser.stack}")
    for src in parser.images:
        path = page.parent / unquote(src)
        if not path.is_file() or path.stat().st_size == 0:
            problems.append(f"image {src!r} is missing or empty")
            continue
        try:
            with Image.open(path) as image:
                image.load()
        except OSError as exc:
            problems.append(f"image {src!r} does not decode: {exc}")
    for href in filter(_local, parser.links):
        if not (page.parent / unquote(urlparse(href).path)).exists():
            problems.append(f"link {href!r} points to a missing file")
    return problems, parser.images, parser.links


def main(argv: list[str] | None = None) -> int:
    """Check the pages named on the command line; print problems; 1 if any."""
    pages = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    failed = False
    for page in pages:
        problems, images, links = page_problems(page)
        for problem in problems:
            print(f"{page}: {problem}")
        failed = failed or bool(problems)
        print(
            f"{page}: {len(images)} images, {len(links)} links, "
            f"{len(problems)} problems"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
