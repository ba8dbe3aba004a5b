"""The eligibility rule, checked exhaustively on a small fixture for read and derive.

principal x audience x purposes x scope x authorised set x invalidated x
superseded (x include_superseded for read). The expected answer is computed
here from the design's rule, independently of the SQL.
"""

import itertools

import pytest

from pgrecall import errors

PRINCIPALS = ["ana", "ben"]
AUDIENCES = [None, "ana", "ben"]
PURPOSE_SETS = [("converse",), ("act", "review")]
SCOPES = ["default", "other"]
AUTHORISED = [("default",), ("default", "other")]
READ_PURPOSES = ["converse", "act", "personalize", "review"]


def expected_visible(row, principal, authorised, purpose, include_superseded):
    return (
        row["scope"] in authorised
        and (row["audience"] is None or row["audience"] == principal)
        and (purpose is None or purpose in row["purposes"])
        and not row["invalidated"]
        and (include_superseded or not row["superseded"])
    )


@pytest.fixture
def matrix(acme):
    both = ["default", "other"]
    rows = []
    for audience, purposes, scope, invalidated, superseded in itertools.product(
        AUDIENCES, PURPOSE_SETS, SCOPES, (False, True), (False, True)
    ):
        tag = f"{audience}-{'+'.join(purposes)}-{scope}-{invalidated}-{superseded}"
        off = acme.append(f"said {tag}", role="user", actor="ana", scope=scope, scopes=both)
        mid = acme.remember(f"memory {tag}", evidence=[off], purposes=list(purposes), audience=audience,
                            scope=scope, scopes=both).memory_id
        if superseded:
            acme.supersede(mid, f"replacement {tag}", revision=1, evidence=[off], scopes=both, principal=audience or "bot")
        if invalidated:
            acme.forget(mid, reason="matrix", scopes=both, principal=audience or "bot")
        rows.append({"id": mid, "audience": audience, "purposes": purposes, "scope": scope,
                     "invalidated": invalidated, "superseded": superseded})
    return acme, rows


def test_read_eligibility_matrix(matrix):
    acme, rows = matrix
    checked = mismatches = 0
    problems = []
    for row, principal, authorised, purpose, include in itertools.product(
        rows, PRINCIPALS, AUTHORISED, READ_PURPOSES, (False, True)
    ):
        want = expected_visible(row, principal, authorised, purpose, include)
        try:
            got = acme.read(row["id"], purpose=purpose, include_superseded=include, principal=principal,
                            scopes=list(authorised)).id == row["id"]
        except errors.MemoryNotFound:
            got = False
        checked += 1
        if got != want:
            mismatches += 1
            problems.append((row, principal, authorised, purpose, include, got))
    assert checked == 48 * 2 * 2 * 4 * 2
    assert mismatches == 0, problems[:5]


def test_derive_source_eligibility_matrix(matrix):
    acme, rows = matrix
    problems = []
    for row, principal, authorised in itertools.product(rows, PRINCIPALS, AUTHORISED):
        # derive reads its sources for any purpose, and only live ones
        want = expected_visible(row, principal, authorised, None, False)
        try:
            new = acme.derive([row["id"]], f"derived from {row['id']}", principal=principal, scopes=list(authorised))
            got = True
            derived = acme.read(new, purpose=row["purposes"][0], principal=principal, scopes=list(authorised))
            assert derived.audience == row["audience"] and tuple(derived.purposes) == tuple(sorted(row["purposes"]))
        except errors.MemoryNotFound:
            got = False
        if got != want:
            problems.append((row, principal, authorised, got))
    assert problems == []
