"""A turn's words with its neighbours' (issue #48; migration 0049, plpgsql/recall/window_arm.sql): with the
setting recall_lexical_window on, the lexical arm scores each memory by the text input version 2 embeds (its
own words, and those of the turns around its evidence that its audience may see), so a reply is found by the
words of the question it answers. The window is written with the memory's vector and goes with it: a
neighbour its audience did not see is never in it, erasing a neighbour takes its words out, and a memory not
embedded yet is still found by its own words.

Real PostgreSQL, real all-MiniLM-L6-v2 embeddings computed by the real worker.
"""

import pytest

from pgrecall.worker import Worker

QUESTION = "Which zqpottery class did you join last month?"
REPLY = "We made two bowls and a cup, the kids loved it."
LATER = "Lovely! See you at the weekend then."
ASKED = "Anything else?"
OWN = "My zqpottery teacher says hello."


def window_setting(conninfo, on: bool, key: str = "recall_lexical_window") -> None:
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        admin.execute("select acme.set_setting(%s, %s::jsonb)", (key, "true" if on else "false"))


# The windows scored in the lexical arm's place, or as a list of their own beside it (migration 0051):
# what a window may hold, and what erasing takes out of it, is the same rule both ways.
BOTH_WAYS = pytest.mark.parametrize("key", ["recall_lexical_window", "recall_window_beside"])


def said(mem, text: str, actor: str) -> int:
    offset = mem.append(text, role="user", actor=actor)
    got = mem.remember(text, evidence=[offset], purposes=["converse"])
    assert got.created, got
    return got.memory_id


def drain(conninfo) -> None:
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()


def ids(result) -> list[int]:
    return [i.memory_id for i in result.items]


def window_words(db, memory_id: int) -> set[str] | None:
    row = db.execute("select array(select u.lexeme from unnest(window_tsv) u) from acme.memory_embedding "
                     "where memory_id = %s and window_tsv is not null", (memory_id,)).fetchone()
    return None if row is None else set(row[0])


@pytest.fixture
def pottery(acme, conninfo):
    """A question (a turn, never a memory: it states nothing), its reply, then a turn that names the word
    itself, two turns away from the question."""
    acme.append(QUESTION, role="user", actor="ana")
    reply, later = said(acme, REPLY, "ben"), said(acme, LATER, "ana")
    acme.append(ASKED, role="user", actor="ben")
    own = said(acme, OWN, "ana")
    drain(conninfo)
    return reply, later, own


def test_a_reply_is_found_by_the_words_of_the_question_it_answers(acme, conninfo, db, pottery):
    reply, later, own = pottery
    assert ids(acme.recall("zqpottery", mode="lexical")) == [own], "off: the reply does not say it"
    window_setting(conninfo, True)
    r = acme.recall("zqpottery", mode="lexical")
    # a word of its own counts whole, a neighbour's half; the turn after the reply does not border the question
    assert ids(r) == [own, reply]
    assert r.items[1].body == REPLY, "the memory's own text, never its window"
    assert r.items[0].score > r.items[1].score
    assert {"zqpotteri", "bowl"} <= window_words(db, reply)
    window_setting(conninfo, False)
    assert ids(acme.recall("zqpottery", mode="lexical")) == [own]


def test_a_memory_not_embedded_yet_is_found_by_its_own_words(acme, conninfo, pottery):
    window_setting(conninfo, True)
    fresh = said(acme, "The zqkiln fires on Thursdays.", "ben")
    assert ids(acme.recall("zqkiln", mode="lexical")) == [fresh]


@BOTH_WAYS
def test_a_neighbour_its_audience_did_not_see_is_not_in_its_window(acme, conninfo, db, key):
    s = acme.create_session("ana first, ben later")
    acme.add_session_peers(s, ["ana", "bot"])
    [secret] = acme.add_messages(s, [{"actor": "ana", "body": "The zqsecret code is heron"}])
    acme.add_session_peers(s, ["ben"])
    [jazz, _after] = acme.add_messages(s, [{"actor": "ben", "body": "I like jazz"},
                                          {"actor": "ana", "body": "Ben plays the zqtrumpet"}])
    ben = acme.remember("Ben likes jazz", evidence=[jazz.offset], purposes=["converse"], audience="ben",
                        principal="ben").memory_id
    drain(conninfo)
    window_setting(conninfo, True, key)
    words = window_words(db, ben)
    assert "zqsecret" not in words and "zqtrumpet" in words
    assert ids(acme.recall("zqtrumpet", mode="lexical", principal="ben")) == [ben]
    assert ids(acme.recall("zqsecret", mode="lexical", principal="ben")) == []


@BOTH_WAYS
def test_erasing_a_neighbour_takes_its_words_out_of_the_window(acme, conninfo, db, acme_admin, key):
    s = acme.create_session("neighbours")
    acme.add_session_peers(s, ["ana", "ben"])
    _, rows, _ = acme.add_messages(s, [
        {"actor": "ana", "body": "my nickname is zqneighbour", "data_subject_id": "subj-ana"},
        {"actor": "ben", "body": "I row on the river every Sunday", "data_subject_id": "subj-ben"},
        {"actor": "ben", "body": "and I cook on Mondays", "data_subject_id": "subj-ben"}])
    ben = acme.remember("Ben rows on Sundays", evidence=[rows.offset], purposes=["converse"], audience="ben",
                        principal="ben").memory_id
    drain(conninfo)
    window_setting(conninfo, True, key)
    assert "zqneighbour" in window_words(db, ben)
    assert ids(acme.recall("zqneighbour", mode="lexical", principal="ben")) == [ben]

    receipt = acme_admin.erase({"data_subject": "subj-ana"}, reason="request", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    assert window_words(db, ben) is None, "gone with the vector, in the erasing transaction"
    assert ids(acme.recall("zqneighbour", mode="lexical", principal="ben")) == []
    assert ids(acme.recall("Sundays", mode="lexical", principal="ben")) == [ben], "its own words still find it"
    drain(conninfo)
    assert "zqneighbour" not in window_words(db, ben) and "cook" in window_words(db, ben)
    assert ids(acme.recall("zqneighbour", mode="lexical", principal="ben")) == []


@BOTH_WAYS
def test_the_setting_is_a_boolean(acme, conninfo, key):
    import psycopg

    with conninfo.connect(user="pgrecall_acme_admin") as admin, pytest.raises(psycopg.Error) as e:
        admin.execute("select acme.set_setting(%s, '\"yes\"'::jsonb)", (key,))
    assert f"setting '{key}' takes a boolean value" in str(e.value)


def test_beside_its_own_words_a_reply_is_found_by_the_words_of_the_question(acme, conninfo, pottery):
    reply, later, own = pottery
    window_setting(conninfo, True, "recall_window_beside")
    r = acme.recall("zqpottery", mode="lexical")
    assert ids(r) == [own, reply], "found by its own word first, the reply by its question's"
    assert r.items[1].body == REPLY, "the memory's own text, never its window"
    r = acme.recall("zqpottery", mode="hybrid")
    assert r.dense_available and ids(r)[0] == own and reply in ids(r), ids(r)
    assert len(set(ids(r))) == len(ids(r)), "a memory comes once, found by its words, its window and its vector"
    assert ids(acme.recall("zqpottery", mode="lexical")) == [own, reply]
    # the lexical arm's own list is by the memories' own words, whatever recall_lexical_window says
    window_setting(conninfo, True)
    assert ids(acme.recall("zqpottery", mode="lexical")) == [own, reply]
    window_setting(conninfo, False, "recall_window_beside")
    window_setting(conninfo, False)
    assert ids(acme.recall("zqpottery", mode="lexical")) == [own]


def test_beside_its_own_words_as_of_a_past_moment_a_memory_is_found_by_its_own_words(acme, conninfo, pottery):
    from datetime import UTC, datetime

    reply, later, own = pottery
    window_setting(conninfo, True, "recall_window_beside")
    assert ids(acme.recall("zqpottery", mode="lexical", as_of=datetime.now(UTC))) == [own], \
        "a window holds today's neighbours"


def test_a_tenant_upgraded_to_0049_gets_its_windows_from_a_plain_rebuild(acme, conninfo, db, pottery):
    """Vectors stored under input version 2 before migration 0049 have no window; `pgrecall embeddings rebuild`
    (what is missing or stale) must queue them, or the setting quietly scores every memory by its own words."""
    reply, later, own = pottery
    db.execute("alter table acme.memory_embedding drop column window_tsv, drop column window_length")
    db.execute("alter table acme.corpus_stat drop column window_avg_length")
    db.execute("alter table acme.setting drop constraint setting_recall_lexical_window_boolean")
    db.execute("delete from acme.setting where key = 'recall_lexical_window'")
    db.execute("delete from acme.schema_migration where version = 49")
    applied = [tuple(r) for r in db.execute("select * from pgrecall.upgrade_tenant('acme')").fetchall()]
    assert ("migration", "0049_lexical_window.sql") in applied, applied
    assert window_words(db, reply) is None
    window_setting(conninfo, True)
    assert ids(acme.recall("zqpottery", mode="lexical")) == [own], "no window yet: by its own words"

    from test_install_paths import run_cli

    out = run_cli("embeddings", "rebuild", "--tenant", "acme", env={
        "PGRECALL_ADMIN_DSN": conninfo.dsn(user="pgrecall_acme_admin"),
        "PGRECALL_WORKER_DSN": conninfo.dsn(user="pgrecall_acme_worker"),
        "PGRECALL_APP_DSN": conninfo.dsn(user="pgrecall_acme_app")})
    assert "embedded 3 memories" in out.stdout, out.stdout
    assert "zqpotteri" in window_words(db, reply)
    assert ids(acme.recall("zqpottery", mode="lexical")) == [own, reply]
