"""The tenant's functions mean the same in a session with standard_conforming_strings off.

PL/pgSQL parses a function's statements in the calling session, so a plain
literal's backslash ('\\s+') is an escape there when that setting is off: a
regex changes meaning, or stops compiling, under an application whose role or
database still sets it.
"""

from __future__ import annotations

import re

import pytest

import pgrecall
from pgrecall import sources


def _plain_literals_with_a_backslash(text: str) -> list[str]:
    """Plain '...' constants holding a backslash, outside comments, E'' constants and $tag$ quotes
    (a function body's own $$ is looked into: its statements are what the session parses)."""
    found, i = [], 0
    while i < len(text):
        if text.startswith("--", i):
            i = text.find("\n", i) + 1 or len(text)
        elif text[i] == "$" and (m := re.match(r"\$([A-Za-z_]\w*)\$", text[i:])):
            end = text.find(m.group(0), i + len(m.group(0)))
            i = end + len(m.group(0))
        elif text[i] == "'":
            escaped = i > 0 and text[i - 1] in "eE" and not (i > 1 and (text[i - 2].isalnum() or text[i - 2] == "_"))
            j = i + 1
            while j < len(text):
                if escaped and text[j] == "\\":
                    j += 2
                    continue
                if text[j] == "'":
                    if text.startswith("''", j):
                        j += 2
                        continue
                    break
                j += 1
            if not escaped and "\\" in text[i:j + 1]:
                found.append(text[i:j + 1])
            i = j + 1
        else:
            i += 1
    return found


def test_no_function_file_has_a_plain_literal_with_a_backslash():
    assert _plain_literals_with_a_backslash(r"""select '\s', E'\\s', $re$\s$re$, 'it''s' -- '\x'""") == [r"'\s'"]
    offenders = {f.name: found for f in sources.functions() if (found := _plain_literals_with_a_backslash(f.body))}
    assert offenders == {}


@pytest.fixture
def off_session(acme, conninfo):
    """acme's application role in a session with standard_conforming_strings off."""
    conn = conninfo.connect(user="pgrecall_acme_app")
    conn.execute("set standard_conforming_strings = off")
    mem = pgrecall.connect(tenant="acme", principal="bot", scopes=["default"], conn=conn)
    yield mem
    conn.close()


def test_remember_reads_the_same_with_standard_strings_off(off_session):
    said = off_session.append("I like   green tea. Do you?", role="user", actor="ana")
    first = off_session.remember("Ana likes green tea", evidence=[said], purposes=["converse"], about=["Green  Tea"])
    assert first.created
    again = off_session.remember("Ana  likes green\ttea", evidence=[said], purposes=["converse"])
    assert (again.status, again.memory_id) == ("noop", first.memory_id) and again.reason.startswith("duplicate")
    question = off_session.remember("Does Ana like green tea?", evidence=[said], purposes=["converse"])
    assert question.status == "noop" and question.reason.startswith("question")
    about = off_session.read(first.memory_id, purpose="converse").provenance.about
    assert [(a.entity, a.type) for a in about] == [("Green  Tea", None)]
    # the entity is found by its normalised name, whitespace folded
    assert off_session.recall("green tea", purpose="converse").items[0].memory_id == first.memory_id


def test_passages_split_the_same_with_standard_strings_off(off_session, acme, db):
    text = "First sentence here. " + "word " * 400
    off = off_session.append(text, role="document", kind="document", actor="ana")
    on = acme.append(text, role="document", kind="document", actor="ana")
    rows = db.execute("select o.log_offset, p.ordinal, p.start_byte, p.end_byte from acme.passage p "
                      "join acme.observation o on o.id = p.observation_id where o.log_offset in (%s, %s) "
                      "order by 2, 1", (off, on)).fetchall()
    by_offset = {o: [r[1:] for r in rows if r[0] == o] for o in (off, on)}
    assert len(by_offset[on]) > 1 and by_offset[off] == by_offset[on]
