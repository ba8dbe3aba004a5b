"""Time in the question (setting recall_question_time, plpgsql/recall/time_arm.sql): a question naming a date or a time
relative to the recall's clock prefers the memories said within it, never outside eligibility."""

from datetime import UTC, datetime

import psycopg
import pytest

from test_recall import embed_all, embedder, ids  # noqa: F401 (a fixture)

CLOCK = "2026-12-04 10:00+00"  # a Friday


def one(db, query, params=()):
    return db.execute(query, params).fetchone()


def period(db, question, clock=CLOCK):
    got = one(db, "select lower(p)::date::text, upper(p)::date::text "
                  "from acme._question_period(%s, %s::timestamptz) p", (question, clock))
    return None if got == (None, None) else got


def said(mem, actor, text, when, *, audience=None, scope="default", purposes=("converse",)):
    off = mem.append(f"{actor}: {text}", role="user", actor=actor, scope=scope, scopes=["default", "other"],
                     occurred_at=datetime.fromisoformat(when).replace(tzinfo=UTC))
    r = mem.remember(f"{actor}: {text}", evidence=[off], purposes=list(purposes), audience=audience, scope=scope,
                     scopes=["default", "other"])
    assert r.created, r
    return r.memory_id


def arm(db, candidates, query, principal="bot", scopes="{default}", at=None):
    return one(db, "select acme._time_arm(%s, (select id from acme.peer where name = %s), %s, 'converse', false, "
                   "%s, %s)", (candidates, principal, scopes, at, query))[0]


def question_time_on(conninfo, on=True):
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        admin.execute("select acme.set_setting('recall_question_time', %s::jsonb)", ("true" if on else "false",))


def test_a_calendar_date_in_the_question_names_its_day_month_or_year(db, acme):
    assert period(db, "What did Maria do on 3 June, 2023?") == ("2023-06-03", "2023-06-04")
    assert period(db, "What painting did she show on October 13, 2023?") == ("2023-10-13", "2023-10-14")
    assert period(db, "what happened on the 1st of February 2023") == ("2023-02-01", "2023-02-02")
    assert period(db, "What setback did Melanie face in October 2023?") == ("2023-10-01", "2023-11-01")
    assert period(db, "What did he start in December,  2023?") == ("2023-12-01", "2024-01-01")
    assert period(db, "How many times did she go to the beach in 2023?") == ("2023-01-01", "2024-01-01")
    # a day that does not exist names its month; a bare number is a count, not a year
    assert period(db, "what was said on 31 February 2024") == ("2024-02-01", "2024-03-01")
    assert period(db, "she took 2023 photos") is None
    # the date comes first: "last weekend before April 10, 2023" is about April 10, 2023, not the clock's week
    assert period(db, "What did Maria do last weekend before April 10, 2023?") == ("2023-04-10", "2023-04-11")
    assert period(db, "May I ask what Ben baked?") is None
    assert period(db, "What did Ben bake?") is None and period(db, None) is None


def test_a_relative_time_counts_from_the_clock(db, acme):
    assert period(db, "what did I say yesterday") == ("2026-12-03", "2026-12-04")
    assert period(db, "what happened today") == ("2026-12-04", "2026-12-05")
    assert period(db, "Where did we go last week?") == ("2026-11-23", "2026-11-30")
    assert period(db, "what is planned this week") == ("2026-11-30", "2026-12-07")
    assert period(db, "what did Ben do last weekend") == ("2026-11-28", "2026-11-30")
    assert period(db, "what did ana buy last month") == ("2026-11-01", "2026-12-01")
    assert period(db, "Where did John go on a road trip last year?") == ("2025-01-01", "2026-01-01")
    assert period(db, "what did she adopt two weeks ago") == ("2026-11-16", "2026-11-23")
    assert period(db, "Where did Caroline move from 4 years ago?") == ("2022-01-01", "2023-01-01")
    assert period(db, "what did I cook 3 days ago") == ("2026-12-01", "2026-12-02")
    assert period(db, "what did we eat last Saturday") == ("2026-11-28", "2026-11-29")
    assert period(db, "what did we eat last friday") == ("2026-11-27", "2026-11-28")
    # a month named alone: the latest that has begun ("last": the latest before this one)
    assert period(db, "When did Melanie go camping in June?") == ("2026-06-01", "2026-07-01")
    assert period(db, "what happened in december") == ("2026-12-01", "2027-01-01")
    assert period(db, "what happened last december") == ("2025-12-01", "2026-01-01")
    assert period(db, "what happened in january", "2027-03-01 00:00+00") == ("2027-01-01", "2027-02-01")
    # the clock's day is its UTC day
    assert period(db, "what did I say yesterday", "2026-12-04 23:30-05") == ("2026-12-04", "2026-12-05")


def test_bad_input_to_the_new_functions_is_a_clear_error(db, acme):
    for clock, code, words in ((None, "PR107", "clock"), ("infinity", "PR152", "clock")):
        with pytest.raises(psycopg.Error, match=words) as e:
            one(db, "select acme._question_period('what did I say last week', %s::timestamptz)", (clock,))
        assert e.value.sqlstate == code
        db.rollback()
    with pytest.raises(psycopg.Error, match="query is 10001 bytes") as e:
        one(db, "select acme._question_period(%s, now())", ("x" * 10001,))
    assert e.value.sqlstate == "PR151"
    db.rollback()
    with pytest.raises(psycopg.Error, match="query is 10001 bytes") as e:
        arm(db, [1], "x" * 10001)
    assert e.value.sqlstate == "PR151"
    db.rollback()
    with pytest.raises(psycopg.Error, match="outside years 1 to 9999") as e:
        arm(db, [1], "what did I say last week", at="-infinity")
    assert e.value.sqlstate == "PR152"


def test_the_time_arm_keeps_the_candidates_said_within_the_period_in_their_order(db, acme):
    may = [said(acme, "ben", t, f"2023-05-0{i + 1} 12:00") for i, t in
           enumerate(["I baked sourdough bread", "I adopted a grey cat", "I ran a marathon"])]
    june = [said(acme, "ben", t, "2023-06-02 12:00") for t in ["I baked rye bread", "My team won the match"]]
    candidates = [june[0], may[2], june[1], may[0], may[1]]  # as the fusion ordered them
    assert arm(db, candidates, "What did Ben bake in May 2023?") == [may[2], may[0], may[1]]
    assert arm(db, candidates, "What did Ben do on 2 May, 2023?") == [may[1]]
    assert arm(db, candidates, "What did Ben do in 2023?") == candidates
    # counted from the recall's p_at (else now()): 40 years before 2063 is 2023
    assert arm(db, candidates, "what did Ben do 40 years ago", at="2063-02-01 09:00+00") == candidates
    assert arm(db, candidates, "what did Ben do 40 years ago") == []
    # no time named, none of the candidates then, or no candidates: no list
    assert arm(db, candidates, "What did Ben bake?") == []
    assert arm(db, candidates, "What did Ben bake in March 2024?") == []
    assert arm(db, [], "What did Ben bake in May 2023?") == []


def test_the_time_arm_never_returns_what_the_principal_may_not_see(db, acme, conninfo, embedder):
    """An attacker names the day the private memories were said and words the question as their text."""
    day = "2023-05-07 12:00"
    visible = said(acme, "ben", "I keep my spare key under the blue flowerpot", day, audience="bot")
    secret = "My bank password is hunter2 and my spare key is under the flowerpot"
    hidden = [said(acme, "ben", secret, day, audience="ben"),                        # another audience
              said(acme, "ben", secret + " (other scope)", day, scope="other"),      # a scope not asked for
              said(acme, "ben", secret + " (for acting)", day, purposes=("act",))]   # another purpose
    forgotten = said(acme, "ben", secret + " (forgotten)", day)
    acme.forget(forgotten, reason="test")
    embed_all(conninfo)
    query = f"What did ben say on 7 May, 2023? {secret}"
    # even handed every id as a candidate, the arm keeps only what bot may see
    assert arm(db, [*hidden, forgotten, visible], query) == [visible]
    assert arm(db, [*hidden, forgotten, visible], query, scopes="{default,other}") == [hidden[1], visible]
    for principal in ("bot", "ana"):  # the setting is on by default
        got = set(ids(acme.recall(query, limit=10, principal=principal)))
        assert not got & {*hidden, forgotten}, principal
    assert ids(acme.recall(query, limit=10, principal="bot")) == [visible]
    assert ids(acme.recall(query, limit=10, principal="ana")) == []  # audience bot: not ana's either


def test_a_question_naming_a_month_ranks_that_months_memory_above_an_otherwise_equal_one(db, acme, conninfo,
                                                                                         embedder):
    assert one(db, "select value from acme.setting where key = 'recall_question_time'")[0] is True  # adopted
    with conninfo.connect(user="pgrecall_acme_admin") as admin, pytest.raises(psycopg.Error, match="boolean") as e:
        admin.execute("select acme.set_setting('recall_question_time', '\"yes\"')")
    assert e.value.sqlstate == "PR006"
    june = said(acme, "ben", "I baked sourdough bread at home", "2023-06-10 12:00")
    may = said(acme, "ben", "I baked sourdough bread at home today", "2023-05-10 12:00")
    for text in ("I adopted a grey cat", "The volcano trip was cancelled", "Quarterly revenue grew"):
        said(acme, "ana", text, "2023-05-11 12:00")
    embed_all(conninfo)
    query = "What bread did Ben bake in May 2023?"
    question_time_on(conninfo, False)
    off = ids(acme.recall(query, limit=5, principal="bot"))
    timeless = ids(acme.recall("What bread did Ben bake?", limit=5, principal="bot"))
    assert off.index(june) < off.index(may)  # the two are alike; without the setting, June's words win
    question_time_on(conninfo)
    on = acme.recall(query, limit=5, principal="bot")
    assert ids(on)[0] == may and ids(on).index(may) < ids(on).index(june)
    assert on.items[0].score > on.items[1].score
    # a question naming no time is answered as before
    assert ids(acme.recall("What bread did Ben bake?", limit=5, principal="bot")) == timeless
    question_time_on(conninfo, False)
    assert ids(acme.recall(query, limit=5, principal="bot")) == off


def test_rrf_fuse4_sums_reciprocal_ranks_over_four_lists(db, acme):
    assert one(db, "select acme._rrf_fuse4('{1,2,3}', '{3,4}', '{}', '{}', 60, 10)")[0] == \
        one(db, "select acme._rrf_fuse('{1,2,3}', '{3,4}', 60, 10)")[0] == [3, 1, 2, 4]
    # 4 is in three lists: above 3 (two lists); 2, in two lists at ranks 2 and 1, above 1 (one list)
    assert one(db, "select acme._rrf_fuse4('{1,2,3}', '{3,4}', '{4}', '{2,4}', 60, 10)")[0] == [4, 2, 3, 1]
    assert one(db, "select acme._rrf_fuse4('{}', '{}', '{}', '{}', 60, 10)")[0] == []
