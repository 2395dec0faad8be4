"""Read and edit PanDA's SPLITRULE string the way PanDA itself reads it.

SPLITRULE is comma-separated ``KEY=value`` rules. PanDA does not parse it into a
map: each accessor of ``JediTaskSpec`` searches the text for ``KEY=(\\d+)`` and takes
the *first* match (``JediTaskSpec.useScout``, ``getNumEventsPerJob``,
``check_split_rule``, ...). So ``US=`` without digits is no rule at all, the first of
two ``PC=`` rules is the one that counts, and a space after a comma changes nothing.
JEDI runs scout jobs when that first ``US`` value is ``2`` (``enum_useScout``,
"will update requirements"); ``3`` means the scouts already updated them, ``1`` no
scouts. A task skips its scouts when the rule is gone.

Editing keeps every byte that is not the scout rule, because other PanDA code reads
the same text (and some of it, ``task_split_rules.extract_rule_values``, compares
items by prefix).
"""

from __future__ import annotations

import re

#: The SPLITRULE key that makes JEDI run scout jobs.
SCOUT_KEY = "US"
#: The ``US`` value that schedules scouts (PanDA's ``enum_useScout``).
USE_SCOUT = "2"
#: One whole comma-separated item holding the scout rule (spaces around allowed).
_SCOUT_ITEM = re.compile(r"\s*US=\d+\s*")


class SplitRuleEditError(ValueError):
    """The scout rule cannot be removed without changing how PanDA reads the rest."""


def rule_value(rule: str | None, key: str) -> str | None:
    """Return the digits PanDA reads for ``key``: the first ``KEY=<digits>`` match.

    Mirrors ``re.search(token + r"=(\\d+)", splitRule)`` in PanDA's
    ``JediTaskSpec``; ``None`` when the rule is absent or has no digits.
    """
    if not rule:
        return None
    match = re.search(re.escape(key) + r"=(\d+)", rule)
    return match.group(1) if match else None


def has_scout_rule(rule: str | None) -> bool:
    """Return whether JEDI will run scouts for this SPLITRULE (``useScout()``)."""
    return rule_value(rule, SCOUT_KEY) == USE_SCOUT


def remove_scout_rule(rule: str | None) -> str | None:
    """Return the SPLITRULE without its ``US=<digits>`` items, so JEDI skips scouts.

    Only those items and one comma each go; every other byte stays as it was
    (order, duplicates, spaces). An empty result becomes ``None``, as PanDA stores
    a task without rules.

    Raises
    ------
    SplitRuleEditError
        When PanDA would still schedule scouts afterwards (``US=2`` glued into
        another item, e.g. ``XUS=2``): the task must keep its scouts.
    """
    if rule is None:
        return None
    kept = [item for item in rule.split(",") if not _SCOUT_ITEM.fullmatch(item)]
    edited = ",".join(kept)
    if has_scout_rule(edited):
        raise SplitRuleEditError(
            f"The 'splitRule' field must hold the scout rule as its own item "
            f"(',US=<digits>,'). Got {rule!r} instead, so the scouts stay."
        )
    return edited or None


def parse_split_rule(rule: str | None) -> dict[str, str]:
    """Return the rules of a SPLITRULE string as an ordered ``{key: value}`` mapping.

    For display and for reading values; the first of two rules with one key wins,
    as in PanDA. Never use it to rewrite the text (see :func:`remove_scout_rule`).

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
        parsed.setdefault(key.strip(), value.strip())
    return parsed


def format_split_rule(rules: dict[str, str]) -> str:
    """Return the SPLITRULE text of a ``{key: value}`` mapping, keeping its order."""
    return ",".join(f"{key}={value}" for key, value in rules.items())
