"""Recall's people-and-things arm (setting recall_people_arm, plpgsql/recall/people_arm.sql): the memories said by the
peers or about the entities a question names, a ranked list of their own fused by RRF, never outside eligibility."""

import psycopg
import pytest

from test_recall import embed_all, embedder, ids  # noqa: F401 (a fixture)


def one(db, query, params=()):
    return db.execute(query, params).fetchone()


def said(mem, actor, text, *, audience=None, scope="default", purposes=("converse",), about=()):
    off = mem.append(f"{actor}: {text}", role="user", actor=actor, scope=scope, scopes=["default", "other"])
    r = mem.remember(f"{actor}: {text}", evidence=[off], purposes=list(purposes), audience=audience, scope=scope,
                     about=list(about), scopes=["default", "other"])
    assert r.created, r
    return r.memory_id


def arm(db, candidates, query, principal="bot", scopes="{default}"):
    return one(db, "select acme._people_arm(%s, (select id from acme.peer where name = %s), %s, 'converse', false, "
                   "null, %s)", (candidates, principal, scopes, query))[0]


def people_arm_on(conninfo, on=True):
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        admin.execute("select acme.set_setting('recall_people_arm', %s::jsonb)", ("true" if on else "false",))


BEN = ["I baked sourdough bread last Sunday", "I adopted a grey cat from the shelter",
       "I ran a marathon in the rain", "My team won the football match on penalties"]
ANA = ["I baked rye bread for the village fair", "The volcano trip was cancelled because of ash",
       "Quarterly revenue at my company grew", "My cat sleeps on the warm windowsill"]


def test_the_arm_keeps_the_candidates_the_named_peer_said_in_their_order(db, acme):
    ben = [said(acme, "ben", t) for t in BEN]
    ana = [said(acme, "ana", t) for t in ANA]
    candidates = [ana[0], ben[2], ana[1], ben[0], ben[3]]  # as the fusion ordered them
    assert arm(db, candidates, "What bread did Ben bake?") == [ben[2], ben[0], ben[3]]
    assert arm(db, candidates, "did ana and ben meet") == candidates
    # the name is matched whole, case aside; a question naming no one has no list
    assert arm(db, candidates, "what did BEN bake") == [ben[2], ben[0], ben[3]]
    assert arm(db, candidates, "what did Benjamin bake") == [] and arm(db, candidates, "what was baked") == []
    assert arm(db, [], "What did Ben bake?") == []


def test_the_arm_keeps_the_candidates_about_a_named_entity(db, acme):
    about = said(acme, "ana", "We met at the harbour café for lunch", about=["Lisbon"])
    other = said(acme, "ana", "The harbour was full of boats")
    assert arm(db, [other, about], "where did they eat in lisbon") == [about]


def test_the_arm_never_returns_what_the_principal_may_not_see(db, acme, conninfo, embedder):
    """An attacker names the peer whose private memories it wants and words the question as their text."""
    visible = said(acme, "ben", "I keep my spare key under the blue flowerpot", audience="bot")
    secret = "My bank password is hunter2 and my spare key is under the flowerpot"
    hidden = [said(acme, "ben", secret, audience="ben"),                      # another audience
              said(acme, "ben", secret + " (other scope)", scope="other"),    # a scope not asked for
              said(acme, "ben", secret + " (for acting)", purposes=("act",))]  # another purpose
    forgotten = said(acme, "ben", secret + " (forgotten)")
    acme.forget(forgotten, reason="test")
    embed_all(conninfo)
    query = f"What did ben say? {secret}"
    # even handed every id as a candidate, the arm keeps only what bot may see
    assert arm(db, [*hidden, forgotten, visible], query) == [visible]
    assert arm(db, [*hidden, forgotten, visible], query, scopes="{default,other}") == [hidden[1], visible]
    people_arm_on(conninfo)
    for principal in ("bot", "ana"):
        got = set(ids(acme.recall(query, limit=10, principal=principal)))
        assert not got & {*hidden, forgotten}, principal
    assert ids(acme.recall(query, limit=10, principal="bot")) == [visible]
    assert ids(acme.recall(query, limit=10, principal="ana")) == []  # audience bot: not ana's either


def test_rrf_fuse4_sums_reciprocal_ranks_over_the_lists_and_two_lists_are_rrf_fuse(db, acme):
    assert one(db, "select acme._rrf_fuse4('{1,2,3}', '{3,4}', '{}', '{}', 60, 10)")[0] == \
        one(db, "select acme._rrf_fuse('{1,2,3}', '{3,4}', 60, 10)")[0] == [3, 1, 2, 4]
    # 4 is in two lists at ranks 2 and 1: above 3 (ranks 3 and 1) and 1 (rank 1 alone)
    assert one(db, "select acme._rrf_fuse4('{1,2,3}', '{3,4}', '{4}', '{}', 60, 10)")[0] == [4, 3, 1, 2]
    assert one(db, "select acme._rrf_fuse4('{1,2,3}', '{3,4}', '{4}', '{}', 60, 2)")[0] == [4, 3]
    assert one(db, "select acme._rrf_fuse4('{}', '{}', '{}', '{}', 60, 10)")[0] == []


def test_the_setting_is_off_by_default_boolean_and_recall_with_it_on_is_the_three_list_walk(db, acme, conninfo,
                                                                                           embedder):
    assert one(db, "select value from acme.setting where key = 'recall_people_arm'")[0] is False
    with conninfo.connect(user="pgrecall_acme_admin") as admin, pytest.raises(psycopg.Error, match="boolean") as e:
        admin.execute("select acme.set_setting('recall_people_arm', '\"yes\"')")
    assert e.value.sqlstate == "PR006"
    ben = [said(acme, "ben", t) for t in BEN]
    for t in ANA:
        said(acme, "ana", t)
    embed_all(conninfo)
    query = "What did Ben bake on Sunday?"
    qv = list(map(float, embedder.embed([query])[0]))
    bot = one(db, "select id from acme.peer where name = 'bot'")[0]
    off = ids(acme.recall(query, limit=5, principal="bot"))
    people_arm_on(conninfo)
    on = acme.recall(query, limit=5, principal="bot")
    lexical = one(db, "select ids from acme._lexical_arm(%s, '{default}', 'converse', false, null, %s, 20)",
                  (bot, query))[0]
    dense = one(db, "select ids from acme._dense_arm(%s, '{default}', 'converse', false, null, %s, 20)", (bot, qv))[0]
    fused = one(db, "select acme._rrf_fuse(%s, %s, 60, 500)", (lexical, dense))[0]
    people = arm(db, fused, query)
    assert people and set(people) <= set(ben)
    walked = one(db, "select acme._walk_provenance(acme._rrf_fuse4(%s, %s, %s, '{}', 60, 500), %s, '{default}')",
                 (lexical, dense, people, bot))[0]
    assert set(ids(on)) == set(walked[:5]) and on.meta.fused_count == len(walked)
    people_arm_on(conninfo, False)
    assert ids(acme.recall(query, limit=5, principal="bot")) == off
