"""The reference's examples, run: every psql transcript of docs/reference.md prints what it shows.

The transcripts run story by story (tests/doc_examples.py says how they are read) through the
embedded server's own psql, as the role each prompt names, against fresh tenants on the test
server; only times read from the clock and lease tokens may differ. docs/examples.sql is the
main story generated from the same transcripts, and must be what the generator writes now.
"""

from __future__ import annotations

import re

import pytest

import doc_examples as docs
from conftest import BASE_DB


@pytest.fixture
def server(pg_server, cluster_roles_kept):
    return docs.Server(pg_server.superuser_dsn, template=BASE_DB)


@pytest.mark.slow  # runs every psql example of docs/reference.md in a fresh database
def test_every_example_prints_what_the_reference_shows(server):
    blocks = docs.parse()
    outcomes = docs.run_blocks(blocks, server)
    assert len(outcomes) == sum(len(b.steps) for b in blocks)
    problems = docs.report(outcomes, docs.REFERENCE)
    assert problems == "", "\n" + problems


def test_examples_sql_is_the_reference_story():
    expected = docs.examples_sql(docs.parse())
    assert docs.EXAMPLES_SQL.read_text() == expected, "run: .venv/bin/python tests/doc_examples.py --write-sql"


def _first_blocks_through(text: str, marker: str) -> list[docs.Block]:
    """The blocks of a reference text up to the one holding `marker`: the start of the main story."""
    blocks = docs.parse(text=text)
    index = next(i for i, b in enumerate(blocks) if any(marker in s.text for s in b.steps))
    return blocks[:index + 1]


def test_a_stale_shown_value_fails(server):
    text = docs.REFERENCE.read_text()
    rows = re.findall(r"^ acme   \|\s+(\d+) \|.*$", text, re.M)
    assert len(rows) == 1, "the schema_info example changed: pick another value to make stale"
    shown = re.search(r"^ acme   \|\s+\d+ \|.*$", text, re.M).group(0)
    stale = shown.replace(f" {rows[0]} |", f" {int(rows[0]) - 1} |", 1)
    blocks = _first_blocks_through(text.replace(shown, stale), "acme.schema_info()")
    outcomes = docs.run_blocks(blocks, server)
    stale = [(o.step.heading, o.problem) for o in outcomes if o.problem]
    assert stale == [("\\<tenant\\>.schema_info", "output differs")]


def test_a_wrong_sqlstate_fails_and_so_does_an_error_without_one(server):
    text = docs.REFERENCE.read_text()
    marked = "select pgrecall.check_tenant_name('Team-2');  -- PR001"
    assert text.count(marked) == 1
    for changed, problem in ((marked.replace("PR001", "PR002"), "expected to fail with PR002, got PR001"),
                             (marked.replace("  -- PR001", ""), "failed with PR001, but the document marks")):
        blocks = _first_blocks_through(text.replace(marked, changed), "check_tenant_name('Team-2')")
        outcomes = docs.run_blocks(blocks, server)
        assert [o.problem[:len(problem)] for o in outcomes if o.problem] == [problem]


@pytest.mark.parametrize("shown, printed, same", [
    # a time read from the clock, and the padding of its column
    (["        at", "-------------------------------", " 2026-11-30 13:12:38.133963+00"],
     ["          at", "------------------------------", " 2026-12-01 02:00:00.5+00"], True),
    (['{"at": "2026-11-30T13:15:41.863+00:00"}'], ['{"at": "2031-01-01T00:00:00.000001+00:00"}'], True),
    (["69a2fc3f-9d48-497c-b5b3-14deb4e49342"], ["862e5574-962f-4496-8c50-15b7348ee25b"], True),
    # a date or time the example wrote itself is compared as it is
    (['["2036-12-01 00:00:00+00","2036-12-15 00:00:00+00")'], ['["2036-12-01 00:00:00+00","2036-12-16 00:00:00+00")'],
     False),
    # without a varying value, alignment counts too
    ([" id | body", "----+------", "  1 | x"], [" id | body", "----+------", " 1  | x"], False),
    ([" 16"], [" 15"], False),
])
def test_only_what_varies_between_runs_is_normalised(shown, printed, same):
    assert docs.same_output(shown, printed) is same
