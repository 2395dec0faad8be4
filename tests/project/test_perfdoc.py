"""The benchmarks' shared writer of docs/performance.md sections."""

from __future__ import annotations

from benchmarks.perfdoc import PERFORMANCE_MD, markers, write_section


def test_a_section_is_replaced_and_the_others_kept(tmp_path):
    doc = tmp_path / "performance.md"
    write_section("bench_a", "## A\n\nfirst", doc)
    write_section("bench_b", "## B\n\nother", doc)
    write_section("bench_a", "## A\n\nsecond\n", doc)
    text = doc.read_text()
    assert text.startswith("# Performance\n")
    assert "first" not in text and text.count("<!-- bench_a:begin -->") == 1
    assert "<!-- bench_a:begin -->\n## A\n\nsecond\n<!-- bench_a:end -->" in text
    assert text.index("bench_a:end") < text.index("bench_b:begin")  # order kept
    assert "other" in text


def test_rewriting_every_recorded_section_changes_nothing(tmp_path):
    original = PERFORMANCE_MD.read_text()
    copy = tmp_path / "performance.md"
    copy.write_text(original)
    names = ["bench_simulate", "bench_http", "bench_predict", "bench_training"]
    names += ["bench_hook", "bench_retrain"]
    for name in names:
        begin, end = markers(name)
        assert begin in original, name
        write_section(name, original.split(begin, 1)[1].split(end, 1)[0], copy)
    assert copy.read_text() == original
