"""Parse and edit PanDA's SPLITRULE string (comma-separated ``KEY=value`` rules).

JEDI switches scout jobs on with the ``US`` rule (``US=2``: use scouts, ``US=3``:
requirements updated); removing it is how a task skips its scouts.
"""

from __future__ import annotations

#: The SPLITRULE key that makes JEDI run scout jobs.
SCOUT_KEY = "US"


def parse_split_rule(rule: str | None) -> dict[str, str]:
    """Return the rules of a SPLITRULE string as an ordered ``{key: value}`` mapping.

    Parameters
    ----------
    rule:
        The SPLITRULE text; ``None`` or empty gives an empty mapping.
    """
    if rule is None:
        return {}
    if not isinstance(rule, str):
        raise ValueError(
            f"The 'splitRule' field must be a string of KEY=value rules. "
            f"Got {rule!r} instead."
        )
    parsed: dict[str, str] = {}
    for item in rule.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(
                f"The 'splitRule' field must be comma-separated KEY=value rules. "
                f"Got {item!r} in {rule!r} instead."
            )
        parsed[key.strip()] = value.strip()
    return parsed


def format_split_rule(rules: dict[str, str]) -> str:
    """Return the SPLITRULE text of a ``{key: value}`` mapping, keeping its order."""
    return ",".join(f"{key}={value}" for key, value in rules.items())


def has_scout_rule(rule: str | None) -> bool:
    """Return whether the SPLITRULE still asks JEDI for scout jobs (a ``US=`` rule)."""
    return SCOUT_KEY in parse_split_rule(rule)


def remove_scout_rule(rule: str | None) -> str | None:
    """Return the SPLITRULE without its ``US=`` rule, so JEDI skips the scouts.

    The other rules keep their order; an empty result becomes ``None``, as PanDA
    stores a task without rules.
    """
    rules = parse_split_rule(rule)
    rules.pop(SCOUT_KEY, None)
    return format_split_rule(rules) or None
