"""Write one benchmark's section of docs/performance.md and keep the others as they are.

Each benchmark owns the text between its ``<!-- <name>:begin -->`` and
``<!-- <name>:end -->`` markers; re-running it replaces that text only, and a section
not yet in the file is appended. The benchmarks run as scripts
(``python benchmarks/bench_x.py``), so they import this module by its plain name.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PERFORMANCE_MD = ROOT / "docs" / "performance.md"


def markers(name: str) -> tuple[str, str]:
    """Return the begin and end markers of the section ``name``."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_section(name: str, body: str, path: Path = PERFORMANCE_MD) -> None:
    """Put ``body`` (markdown without the markers) into the section ``name``."""
    begin, end = markers(name)
    block = f"{begin}\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else "# Performance\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
