"""Values a caller can send that PostgreSQL itself would refuse (or store and then fail to read back):
timestamps that are infinite or outside years 1-9999, confidences too small for a real, offsets and ids
beyond bigint. Each is a pgrecall error of class PR naming the value, and nothing is written."""

import psycopg
import pytest

from conftest import table_counts

APP = "pgrecall_acme_app"
WHO = "'bot', array['default']"


@pytest.fixture
def app(acme, conninfo):
    conn = conninfo.connect(user=APP, autocommit=True)
    off = acme.append("I like green tea", role="user", actor="ana")
    mid = acme.remember("Ana likes green tea", evidence=[off], purposes=["converse"]).memory_id
    yield conn, off, mid
    conn.close()


def sqlstate_of(conn, statement: str, params=None) -> str | None:
    try:
        conn.execute(statement, params)
    except psycopg.Error as exc:
        return exc.sqlstate
    return None


BAD_TIMES = ["infinity", "-infinity", "4713-01-01 BC", "294276-12-31", "0001-01-01 BC", "10000-01-01"]


@pytest.mark.parametrize("when", BAD_TIMES)
def test_append_observation_refuses_a_time_outside_years_1_to_9999(app, db, when):
    conn, off, mid = app
    before = table_counts(db)
    code = sqlstate_of(conn, f"select acme.append_observation({WHO}, 'default', 'hi', 'user', "
                             "p_occurred_at => %s::timestamptz)", (when,))
    assert code == "PR152"
    code = sqlstate_of(conn, f"select acme.append_observation({WHO}, 'default', 'hi', 'user', "
                             "p_retention_until => %s::timestamptz)", (when,))
    assert code == "PR152"
    assert table_counts(db) == before


@pytest.mark.parametrize("when", ["infinity", "4713-01-01 BC", "294276-12-31", "20000-01-01"])
def test_append_observations_refuses_a_row_time_outside_years_1_to_9999(app, db, when):
    conn, off, mid = app
    before = table_counts(db)
    rows = psycopg.types.json.Jsonb([{"body": "hi", "source_role": "user", "occurred_at": when}])
    assert sqlstate_of(conn, f"select acme.append_observations({WHO}, 'default', %s)", (rows,)) == "PR152"
    assert table_counts(db) == before


def test_log_turn_refuses_times_outside_years_1_to_9999(app, db):
    conn, off, mid = app
    before = table_counts(db)
    for when in ["4713-01-01 BC", "294276-12-31", "infinity"]:
        code = sqlstate_of(conn, f"select acme.log_turn({WHO}, 'default', 'ana', 'ana', 'hello', 'user', "
                                 "%s::timestamptz)", (when,))
        assert code == "PR152", when
    assert table_counts(db) == before


def test_fact_and_recall_times_must_be_finite(app, db):
    conn, off, mid = app
    assert sqlstate_of(conn, f"select * from acme.facts_as_of({WHO}, 'ana', p_valid_at => 'infinity')") == "PR152"
    assert sqlstate_of(conn, f"select * from acme.facts_as_of({WHO}, 'ana', p_known_at => '-infinity')") == "PR152"


@pytest.mark.parametrize("confidence", ["5e-324", "1e-50", "-0.5", "'NaN'::float8", "'Infinity'::float8"])
def test_confidence_that_a_real_cannot_hold_is_refused(app, db, confidence):
    conn, off, mid = app
    before = table_counts(db)
    assert sqlstate_of(conn, f"select acme.remember({WHO}, 'default', 'a note', array[{off}]::bigint[], "
                             f"array['converse'], p_confidence => {confidence})") == "PR150"
    assert sqlstate_of(conn, f"select acme.derive({WHO}, array[{mid}]::bigint[], 'a summary', "
                             f"p_confidence => {confidence})") == "PR150"
    quote = {"offset": off, "quote": "green tea", "start": 7, "end": 16}
    assert sqlstate_of(conn, f"select acme.assert_fact({WHO}, 'default', 'ana', 'likes', 'green tea', %s, "
                             f"p_confidence => {confidence})", (psycopg.types.json.Jsonb([quote]),)) == "PR150"
    assert table_counts(db) == before


@pytest.mark.parametrize("confidence", [1e-6, 1e-37])
def test_small_but_storable_confidence_is_kept(app, db, confidence):
    """Accepted is not enough: what is read back is the confidence given (as a real holds it), not 0 or 1."""
    conn, off, mid = app
    remembered, status, _ = conn.execute(
        f"select * from acme.remember({WHO}, 'default', 'a note', array[{off}]::bigint[], "
        "array['converse'], p_confidence => %s)", (confidence,)).fetchone()
    assert status == "created"
    derived = conn.execute(f"select acme.derive({WHO}, array[{mid}]::bigint[], 'a summary', p_confidence => %s)",
                           (confidence,)).fetchone()[0]
    for memory_id in (remembered, derived):
        stored = db.execute("select confidence from acme.memory where id = %s", (memory_id,)).fetchone()[0]
        assert stored == pytest.approx(confidence, rel=1e-6), memory_id


@pytest.mark.parametrize("number", ["1e300", "9223372036854775808", "-1e300", "1.5", "\"7\""])
def test_json_offsets_beyond_bigint_are_refused(app, db, number):
    conn, off, mid = app
    before = table_counts(db)
    quote = f'[{{"offset": {number}, "quote": "green tea", "start": 7, "end": 16}}]'
    code = sqlstate_of(conn, f"select acme.assert_fact({WHO}, 'default', 'ana', 'likes', 'green tea', %s::jsonb)",
                       (quote,))
    assert code is not None and code.startswith("PR"), code
    item = f'[{{"body": "a note", "evidence": [{number}], "purposes": ["converse"]}}]'
    code = sqlstate_of(conn, f"select acme.remember_many({WHO}, 'default', %s::jsonb)", (item,))
    assert code is not None and code.startswith("PR"), code
    code = sqlstate_of(conn, "select * from acme.erase('x', %s::jsonb, 'why')",
                       (f'{{"observation": {{"scope": "default", "offset": {number}}}}}',))
    assert (code is not None and code.startswith("PR")) or code == "42501", code
    assert table_counts(db) == before


def test_erase_selector_offset_beyond_bigint_is_refused_for_the_admin(acme_admin, conninfo, db):
    before = table_counts(db)
    with conninfo.connect(user="pgrecall_acme_admin", autocommit=True) as conn:
        for number in ["1e300", "9223372036854775808", "1.5"]:
            code = sqlstate_of(conn, "select * from acme.erase('x', %s::jsonb, 'why')",
                               (f'{{"observation": {{"scope": "default", "offset": {number}}}}}',))
            assert code == "PR153", (number, code)
    assert table_counts(db) == before


@pytest.mark.parametrize("timeout", [-1, 600001, 2**31 - 1])
def test_wait_for_refuses_a_timeout_that_would_hold_a_backend_for_days(app, timeout):
    conn, off, mid = app
    code = sqlstate_of(conn, f"select acme.wait_for({WHO}, 'default', 99, 'log', %s)", (timeout,))
    assert code == "PR150"


def test_completing_jobs_with_no_arrays_is_refused_as_ours(acme_worker, conninfo):
    with conninfo.connect(user="pgrecall_acme_worker", autocommit=True) as conn:
        for fn in ("complete_embedding_jobs", "complete_passage_embedding_jobs"):
            code = sqlstate_of(conn, f"select acme.{fn}('w', null, null, null, 'all-MiniLM-L6-v2', 2)")
            assert code == "PR107", (fn, code)
