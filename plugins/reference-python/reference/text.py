"""How values are quoted in messages, close to Rust's `{:?}` and serde's wording."""

from __future__ import annotations

import json
from typing import Any


def debug(s: str) -> str:
    """A string in double quotes with escapes, like Rust's `{:?}`."""
    return json.dumps(s, ensure_ascii=False)


def unexpected(value: Any) -> str:
    """What serde calls an unexpected JSON value: `integer `5``, `string "a"`, `null`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value!r}`"
    if isinstance(value, str):
        return f"string {debug(value)}"
    if isinstance(value, list):
        return "sequence"
    return "map"


def one_of(names: list[str]) -> str:
    """serde's list of what was expected: "`a`", "`a` or `b`", "one of `a`, `b`, `c`"."""
    quoted = [f"`{n}`" for n in names]
    if len(quoted) == 1:
        return quoted[0]
    if len(quoted) == 2:
        return f"{quoted[0]} or {quoted[1]}"
    return "one of " + ", ".join(quoted)
