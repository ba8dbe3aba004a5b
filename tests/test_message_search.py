"""search_messages: tenant, session and peer level; lexical, semantic and hybrid; settings; bad input."""

import psycopg
import pytest

from conftest import table_counts
from pgrecall import errors
from pgrecall.worker import Worker

TURNS = [
    # (scope, session, actor, role, text)
    ("default", 1, "ana", "user", "I adopted a puppy last week, a golden retriever called Rex."),
    ("default", 1, "bot", "assistant", "Congratulations on the puppy! Golden retrievers are friendly dogs."),
    ("default", 1, "ana", "user", "My sister lives in Porto and works as a nurse."),
    ("default", 2, "ben", "user", "The quarterly budget review is scheduled for Thursday."),
    ("default", 2, "bot", "assistant", "I will prepare the budget spreadsheet before Thursday."),
    ("default", 2, "ben", "user", "I started learning to play the violin."),
    ("other", 3, "ana", "user", "zqhidden: my dog Rex chewed the sofa."),
]


@pytest.fixture
def chat(acme, conninfo):
    made = [acme.create_session(name, scope=scope, scopes=["default", "other"])
            for name, scope in (("one", "default"), ("two", "default"), ("three", "other"))]
    assert made == [1, 2, 3]  # a fresh tenant numbers its sessions from 1, as TURNS does
    for session in made:  # who is in each: its speakers and the bot (a turn is seen by who was there)
        acme.add_session_peers(session, sorted({t[2] for t in TURNS if t[1] == session} | {"bot"}),
                               scopes=["default", "other"])
    for scope, session, actor, role, text in TURNS:
        acme.append(text, role=role, actor=actor, session_id=session, scope=scope, scopes=["default", "other"])
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain(refresh_stats=False)
    return acme


def bodies(found):
    return [h.body for h in found.items]


def test_tenant_level_searches_only_the_authorised_scopes(chat):
    found = chat.search_messages("retriever called Rex", mode="lexical")
    assert found.items and all(h.scope == "default" for h in found.items)
    assert bodies(found)[0].startswith("I adopted a puppy")
    both = chat.search_messages("dog Rex", mode="lexical", scopes=["default", "other"])
    assert any(h.body.startswith("zqhidden") for h in both.items)
    semantic = chat.search_messages("my new pet dog", mode="semantic")
    assert semantic.semantic_available and all(h.scope == "default" for h in semantic.items)
    assert not any("zqhidden" in b for b in bodies(semantic))
    assert found.meta.level == "tenant"


def test_a_hit_cites_its_observation_and_byte_span(chat, db):
    hit = chat.search_messages("violin", mode="lexical").items[0]
    assert (hit.scope, hit.session_id, hit.actor, hit.source_role, hit.kind) == ("default", 2, "ben", "user", "message")
    body = db.execute("select body from acme.observation where scope = %s and log_offset = %s",
                      (hit.scope, hit.log_offset)).fetchone()[0]
    assert body.encode()[hit.start_byte:hit.end_byte].decode() == hit.body
    assert hit.lexical_rank == 1 and hit.bm25 > 0 and hit.semantic_rank is None


def test_session_level_returns_only_that_session(chat):
    found = chat.search_messages("budget Thursday puppy", session_id=2)
    assert found.items and {h.session_id for h in found.items} == {2}
    assert found.meta.level == "session"
    found = chat.search_messages("puppy", session_id=1, mode="semantic")
    assert found.items and {h.session_id for h in found.items} == {1}


def test_peer_level_returns_only_what_that_peer_sent(chat):
    found = chat.search_messages("puppy golden retriever", peer="bot")
    assert found.items and {h.actor for h in found.items} == {"bot"}
    assert bodies(found)[0].startswith("Congratulations")
    found = chat.search_messages("budget", peer="ben", session_id=2, mode="lexical")
    assert bodies(found) == ["The quarterly budget review is scheduled for Thursday."]
    assert found.meta.level == "session" and found.meta.peer == "ben"


def test_semantic_finds_a_paraphrase_that_lexical_misses(chat):
    assert chat.search_messages("canine companion", mode="lexical").items == []
    found = chat.search_messages("canine companion", mode="semantic")
    assert bodies(found)[0].startswith(("I adopted a puppy", "Congratulations on the puppy"))
    assert all(h.cosine >= 0.30 for h in found.items)  # the tenant's dense floor


def test_hybrid_fuses_both_arms_by_rrf(chat):
    found = chat.search_messages("puppy")
    assert found.meta.lexical and found.meta.semantic
    top = found.items[0]
    assert top.lexical_rank is not None and top.semantic_rank is not None
    assert top.score == pytest.approx(1 / (60 + top.lexical_rank) + 1 / (60 + top.semantic_rank))
    assert [h.score for h in found.items] == sorted((h.score for h in found.items), reverse=True)


def test_the_hnsw_path_answers_like_the_exact_one(chat, db):
    exact = chat.search_messages("my new pet dog", mode="semantic")
    db.execute("select pgrecall.set_tenant_setting('acme', 'exact_dense_below', '1')")
    hnsw = chat.search_messages("my new pet dog", mode="semantic")
    assert (exact.meta.semantic_method, hnsw.meta.semantic_method) == ("exact", "hnsw")
    assert bodies(hnsw) == bodies(exact)
    session = chat.search_messages("my new pet dog", mode="semantic", session_id=2)
    assert {h.session_id for h in session.items} <= {2}


def test_without_a_query_embedding_it_degrades_to_lexical_and_says_so(chat):
    for mode in (None, "semantic"):
        found = chat.search_messages("puppy", mode=mode, embed=False)
        assert found.items and not found.semantic_available
        assert found.meta.semantic_reason == "no query embedding" and found.meta.lexical
        assert all(h.semantic_rank is None for h in found.items)


def test_tenant_settings_switch_the_arms_off(chat, db):
    db.execute("select pgrecall.set_tenant_setting('acme', 'message_search_semantic', 'false')")
    found = chat.search_messages("puppy")
    assert found.meta.lexical and not found.meta.semantic
    assert found.meta.semantic_reason == "semantic message search is switched off"
    assert all(h.semantic_rank is None for h in found.items)
    with pytest.raises(errors.MessageSearchOff):
        chat.search_messages("puppy", mode="semantic")
    db.execute("select pgrecall.set_tenant_setting('acme', 'message_search_semantic', 'true')")
    db.execute("select pgrecall.set_tenant_setting('acme', 'message_search_lexical', 'false')")
    found = chat.search_messages("puppy")
    assert found.meta.semantic and not found.meta.lexical
    assert found.items and all(h.lexical_rank is None for h in found.items)
    with pytest.raises(errors.MessageSearchOff):
        chat.search_messages("puppy", mode="lexical")
    # semantic only and no embedding: an empty answer that says why, never an error
    found = chat.search_messages("puppy", embed=False)
    assert found.items == [] and found.meta.semantic_reason == "no query embedding"
    db.execute("select pgrecall.set_tenant_setting('acme', 'message_search_semantic', 'false')")
    with pytest.raises(errors.MessageSearchOff):
        chat.search_messages("puppy")


def test_common_terms_are_pruned_from_long_queries(acme, db):
    for i in range(20):
        acme.append(f"meeting notes {i}: nothing special", role="user", actor="ana")
    acme.append("meeting notes: the zqrare topic came up", role="user", actor="ana")
    found = acme.search_messages("meeting notes zqrare", mode="lexical")
    assert set(found.meta.dropped_terms) == {"meet", "note"}
    assert bodies(found) == ["meeting notes: the zqrare topic came up"]


def test_bad_input_is_refused_with_our_sqlstates_and_writes_nothing(chat, db, conninfo):
    before = table_counts(db)
    cases = [
        (dict(principal="mallory"), errors.UnknownPeer),
        (dict(peer="mallory"), errors.UnknownPeer),
        (dict(scopes=["nowhere"]), errors.ScopeNotAuthorised),
        (dict(scopes=[]), errors.ScopeNotAuthorised),
        (dict(session_id=3), errors.ScopeNotAuthorised),   # session 3 is in scope other, not authorised
        (dict(session_id=99), errors.UnknownSession),
        (dict(session_id=0), errors.UnknownSession),
        (dict(mode="fuzzy"), errors.InvalidArgument),
        (dict(limit=0), errors.InvalidArgument),
        (dict(limit=-3), errors.InvalidArgument),
        (dict(limit=100000), errors.InvalidArgument),
    ]
    for kwargs, error in cases:
        with pytest.raises(error):
            chat.search_messages("puppy", **kwargs)
    with pytest.raises(errors.InvalidArgument):
        chat.search_messages(None)
    with conninfo.connect(user="pgrecall_acme_app") as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute("select * from acme.search_messages('bot', array['default'], 'puppy', array[1, 2, 3]::float8[])")
    assert isinstance(errors.translate(caught.value), errors.InvalidArgument)
    assert table_counts(db) == before


def test_the_app_role_may_search_but_not_call_the_helpers(chat, conninfo):
    with conninfo.connect(user="pgrecall_acme_app") as app:
        assert app.execute("select count(*) from acme.search_messages('bot', array['default'], 'puppy')").fetchone()[0]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("select * from acme._passage_spans('x', 10, 10, 1)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("select * from acme.passage")
