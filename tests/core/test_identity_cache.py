"""A value kept while its sources are the same objects, rebuilt when one is replaced."""

from __future__ import annotations

from panda_predictor.core.identity_cache import cached_by_identity


class Owner:
    pass


def test_the_value_is_built_once_per_set_of_sources():
    owner, source, calls = Owner(), [1, 2], []

    def build():
        calls.append(1)
        return sum(source)

    assert cached_by_identity(owner, "_sum", (source,), build) == 3
    assert cached_by_identity(owner, "_sum", (source,), build) == 3
    assert len(calls) == 1


def test_an_equal_but_new_source_rebuilds_and_none_is_a_value():
    owner = Owner()
    first, second = [1], [1]
    assert cached_by_identity(owner, "_v", (first,), lambda: None) is None
    assert cached_by_identity(owner, "_v", (first,), lambda: "rebuilt") is None
    assert cached_by_identity(owner, "_v", (second,), lambda: "rebuilt") == "rebuilt"
