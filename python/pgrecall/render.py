"""Results as one JSON document (``--json``, MCP tool results) and the session-start bundle as text
written for a model's context (``pgrecall bundle``, the MCP prompt and resource).

Both are shared by the command line and the MCP server, so an agent sees the same shapes whichever
way it reaches its memory.
"""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from psycopg.types.range import Range

# How much of a source turn the text bundle quotes: enough to judge the claim, not a transcript.
QUOTE_CHARS = 240


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types: dataclasses as objects, times in ISO 8601, a time range as
    ``{"from": ..., "to": ...}`` (``to`` null while it is open), a number that is not finite as null.

    JSON has no NaN: a vector of zeros stored before such vectors were refused has a NaN cosine to
    every query, and printing it made ``--json`` and the MCP tools' text unreadable to strict parsers."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if isinstance(value, Range):
        if value.isempty:
            return {"from": None, "to": None, "empty": True}
        return {"from": jsonable(value.lower), "to": jsonable(value.upper)}
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (float, Decimal)):
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def jsonable_object(value: Any) -> dict[str, Any]:
    """A dataclass (or a dict) as a JSON object."""
    obj = jsonable(value)
    if not isinstance(obj, dict):
        raise TypeError(f"{type(value).__name__} is not a JSON object")
    return obj


def dumps(value: Any) -> str:
    """One JSON document with stable (sorted) keys."""
    return json.dumps(jsonable(value), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)


def count(n: int, noun: str) -> str:
    """"1 candidate", "3 candidates": a count with its noun in the right number (nouns taking -s)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _day(stamp: str | None) -> str:
    return (stamp or "")[:10] or "undated"


def source_lines(provenance: dict[str, Any] | None, indent: str = "    ") -> list[str]:
    """The turns and memories a memory came from, one line each, for a model to weigh the claim."""
    if not provenance:
        return []
    lines = []
    for o in provenance.get("observations") or []:
        fixed = f"; cited by the correction to revision {', '.join(map(str, o['corrections']))}" \
            if o.get("corrections") else ""
        if o.get("withheld"):
            lines.append(f"{indent}from {o['scope']}#{o['offset']}{fixed}: withheld (a turn you may not see)")
            continue
        lines.append(f"{indent}from {o['scope']}#{o['offset']} ({o['actor']}, {o['source_role']}, "
                     f"{_day(o.get('occurred_at'))}{fixed}): \"{clip(o['text'])}\"")
    if provenance.get("widening_reason"):
        lines.append(f"{indent}widened past its turns: {clip(provenance['widening_reason'])}")
    sources = [f"{m['id']}" + (f" ({m['title']})" if m.get("title") else "") for m in provenance.get("memories") or []]
    if sources:
        lines.append(f"{indent}derived from memor{'y' if len(sources) == 1 else 'ies'} {', '.join(sources)}")
    if provenance.get("hidden_sources"):
        lines.append(f"{indent}and {provenance['hidden_sources']} source memories you may not see")
    return lines


def _memory_line(m: dict[str, Any], dated: bool) -> str:
    when = f", changed {_day(m.get('updated_at'))}" if dated and m.get("updated_at") else ""
    title = f"{m['title']}: " if m.get("title") else ""
    return f"- [memory {m['id']}, {m['kind']}, scope {m['scope']}{when}] {title}{clip(m['body'], 1000)}"


def bundle_text(bundle: dict[str, Any], *, principal: str, tenant: str, scopes: list[str], purpose: str,
                session: int | None = None) -> str:
    """The session-start bundle as plain text for a model's context: what each item is, where it came
    from, and how far to trust it."""
    out = [
        f"# Memory for {principal} (pgrecall tenant {tenant}; scopes {', '.join(scopes)}; purpose {purpose})",
        "",
        "What follows is remembered from earlier conversations. Each memory is a dated claim, not current "
        "truth: it names the turns it came from; weigh those before relying on it. This is not everything "
        "remembered: before saying you have no context or do not know, call the recall tool (or run "
        "`pgrecall recall`) with the question.",
    ]
    pinned, recent = bundle.get("pinned") or [], bundle.get("recent") or []
    if pinned:
        out += ["", "## Pinned (standing notes and rules)"]
        for m in pinned:
            out.append(_memory_line(m, dated=False))
            out += source_lines(m.get("provenance"))
    if recent:
        out += ["", "## Recently changed memories (newest first)"]
        for m in recent:
            out.append(_memory_line(m, dated=True))
            out += source_lines(m.get("provenance"))
    entities = bundle.get("entities") or []
    if entities:
        out += ["", "## Most written about",
                ", ".join(f"{e['entity']} ({e['memories']} memor{'y' if e['memories'] == 1 else 'ies'})"
                          for e in entities)]
    if not (pinned or recent or entities):
        out += ["", f"Nothing is remembered yet that {principal} may see for {purpose}."]
    working = bundle.get("working_representation")
    if working:
        out += ["", f"## Working representation in session {working.get('session', session)} "
                    f"(what {principal} has observed of the others)"]
        document = working.get("representation") or {}
        if not document:
            out.append("(nothing observed yet)")
        for target, items in sorted(document.items()):
            out.append(f"- {target}: " + "; ".join(
                f"{clip(str(i.get('text', i)), 300)}" + (f" (turn {i['offset']})" if isinstance(i, dict)
                                                            and i.get("offset") is not None else "")
                for i in items))
    return "\n".join(out) + "\n"
