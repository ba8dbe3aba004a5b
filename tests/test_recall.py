"""Recall, step by step, on corpora built so that the right answer is known.

Real PostgreSQL, real all-MiniLM-L6-v2 embeddings computed by the real worker.
"""

import math

import pytest

from pgrecall import errors
from pgrecall.embedder import ModelUnavailable, get_embedder
from pgrecall.worker import Worker


@pytest.fixture(scope="session")
def embedder():
    return get_embedder()


def put(mem, text, *, purposes=("converse",), audience=None, scope="default", about=(), scopes=None):
    scopes = scopes or ["default", "other"]
    off = mem.append(f"said: {text}", role="user", actor="ana", scope=scope, scopes=scopes)
    r = mem.remember(text, evidence=[off], purposes=list(purposes), audience=audience, scope=scope,
                     about=list(about), scopes=scopes)
    assert r.created, r
    return r.memory_id


def embed_all(conninfo, tenant="acme"):
    return Worker(tenant, conninfo=conninfo.dsn(user=f"pgrecall_{tenant}_worker")).drain()


def ids(result):
    return [i.memory_id for i in result.items]


# -- 1. eligibility, and 5. the walk ------------------------------------------------------------

def test_ineligible_rows_are_never_ranked_counted_or_returned(acme, conninfo, embedder):
    visible = [put(acme, f"zebra fact number {i} about the savanna") for i in range(3)]
    hidden = [
        put(acme, "zebra fact for ben only", audience="ben"),
        put(acme, "zebra fact for acting only", purposes=("act",)),
        put(acme, "zebra fact in the other scope", scope="other"),
    ]
    gone = put(acme, "zebra fact that was forgotten")
    acme.forget(gone, reason="asked")
    old = put(acme, "zebra fact that was replaced")
    newer = acme.supersede(old, "zebra fact replacement about the savanna", revision=1,
                           evidence=[acme.append("update", role="user", actor="ana")])
    source = put(acme, "zebra source memory")
    derived = acme.derive([source], "zebra summary derived from a source")
    acme.forget(source, reason="source withdrawn")  # derived is eligible but its provenance is not
    embed_all(conninfo)

    for mode in ("hybrid", "lexical", "dense"):
        r = acme.recall("zebra fact savanna", mode=mode, limit=50, principal="ana")
        got = set(ids(r))
        assert got.isdisjoint(hidden + [gone, old, derived, source]), (mode, got)
        assert got <= set(visible + [newer])
        assert r.meta.fused_count == len(got)
        if mode != "dense":
            assert set(visible + [newer]) <= got
            assert r.meta.lexical_count == len([i for i in r.items if i.lexical_rank])
    # for ben too: his own memory is found, the derived one resting on a forgotten source is not
    r = acme.recall("zebra", mode="lexical", limit=50, principal="ben")
    assert derived not in ids(r) and hidden[0] in ids(r)


def test_walk_follows_derived_from_chains(acme, conninfo):
    a = put(acme, "kiwi origin note")
    b = acme.derive([a], "kiwi first summary")
    c = acme.derive([b], "kiwi second summary")
    r = acme.recall("kiwi", mode="lexical", limit=10, principal="ana")
    assert set(ids(r)) == {a, b, c}
    acme.forget(a, reason="wrong")
    r = acme.recall("kiwi", mode="lexical", limit=10, principal="ana")
    assert ids(r) == []  # b and c rest on a forgotten memory, two links away for c
    assert r.meta.fused_count == 0 and r.meta.lexical_count == 0


# -- 2. the lexical arm: BM25 and pruning --------------------------------------------------------

def pruning_corpus(acme):
    # 20 memories; "common" is in 3 of them (15%), "popular" in 2 (10%), "frequent" in 5 (25%).
    made = []
    for i in range(20):
        words = [f"unique{i}", "filler"]
        if i >= 15:
            words.append("frequent")
        if i < 3:
            words.append("common")
        if 3 <= i < 5:
            words.append("popular")
        made.append(put(acme, " ".join(words)))
    return made


@pytest.mark.parametrize("stats", ["live", "snapshot"])
def test_a_question_about_one_of_a_few_memories_is_not_pruned_to_a_word_none_holds(acme, db, stats):
    """A new tenant's first memories: with three of them, a word in one is 33% of the corpus, over the 15% that
    makes a word common. Every word of "Ana job nurse" was dropped but the first by name, "job", which no memory
    holds: the recall found nothing though one memory says Ana is a nurse."""
    put(acme, "Ana lives in Lisbon")
    nurse = put(acme, "Ana works as a nurse")
    put(acme, "Ana moved to Porto")
    if stats == "snapshot":
        db.execute("select * from acme.refresh_term_stats()")
    r = acme.recall("Ana job nurse", mode="lexical", limit=10)
    assert r.meta.term_stats == stats
    assert r.meta.dropped_terms == ["ana"]
    assert ids(r) == [nurse]


@pytest.mark.parametrize("stats", ["live", "snapshot"])
def test_pruning_applies_only_from_three_terms(acme, db, stats):
    made = pruning_corpus(acme)
    if stats == "snapshot":
        db.execute("select * from acme.refresh_term_stats()")
    # "filler" is in 100%, "common" in exactly 15%: both dropped from three terms on
    r = acme.recall("common popular filler", mode="lexical", limit=20)
    assert r.meta.term_stats == stats
    assert r.meta.dropped_terms == ["common", "filler"]
    assert set(ids(r)) == set(made[3:5])  # only "popular" was searched
    # two terms: nothing is dropped, however common
    r = acme.recall("common filler", mode="lexical", limit=20)
    assert r.meta.dropped_terms == [] and len(r.items) == 20
    # three terms, all rare: nothing dropped
    r = acme.recall("unique1 unique2 popular", mode="lexical", limit=20)
    assert r.meta.dropped_terms == []
    # every term common: the rarest ("common", 15%) is kept rather than searching nothing
    r = acme.recall("filler common frequent", mode="lexical", limit=20)
    assert r.meta.dropped_terms == ["filler", "frequent"]
    assert set(ids(r)) == set(made[:3])


def test_rare_terms_recruit_candidates_and_common_terms_only_score(acme, db):
    """The match budget: the rarest terms recruit candidates (up to lexical_match_budget matches together),
    the others only score; unless the rare terms find fewer memories than the arm takes."""
    db.execute("select pgrecall.set_tenant_setting('acme', 'arm_candidates', '4')")
    db.execute("select pgrecall.set_tenant_setting('acme', 'lexical_match_budget', '10')")
    [put(acme, f"coffee note {i}") for i in range(20)]
    both = put(acme, "coffee at the zebra crossing")
    rare_only = [put(acme, f"zebra sighting {i}") for i in range(5)]
    # limit 2: the arm takes max(arm_candidates, 2 x limit) = 4
    r = acme.recall("coffee zebra", mode="lexical", limit=2)
    assert r.meta.recruited_by_rare_terms is True and r.meta.recruited_by == "'zebra'"
    assert ids(r)[0] == both                       # the common term still scores: both terms beat one
    assert ids(r)[1] in rare_only and r.meta.lexical_count == 4
    # too few rare matches (6) to fill the arm (10): every term recruits
    db.execute("select pgrecall.set_tenant_setting('acme', 'arm_candidates', '10')")
    r = acme.recall("coffee zebra", mode="lexical", limit=2)
    assert r.meta.recruited_by_rare_terms is False and r.meta.recruited_by == "'coffe' | 'zebra'"
    assert ids(r)[0] == both and r.meta.lexical_count == 10   # only 6 memories have "zebra"
    # all terms' matches fit in the budget: every term recruits
    db.execute("select pgrecall.set_tenant_setting('acme', 'lexical_match_budget', '1000')")
    r = acme.recall("coffee zebra", mode="lexical", limit=10)
    assert r.meta.recruited_by_rare_terms is False and ids(r)[0] == both and len(ids(r)) == 10


def test_when_even_the_rarest_term_is_common_memories_with_two_query_terms_recruit(acme, db):
    """Past the budget, the rarest term recruits only together with another query term; if that finds
    too few memories, the rarest term alone recruits. Either way both-term memories rank first."""
    db.execute("select pgrecall.set_tenant_setting('acme', 'arm_candidates', '3')")
    db.execute("select pgrecall.set_tenant_setting('acme', 'lexical_match_budget', '5')")
    both = [put(acme, f"zebra crossing on street {i}") for i in range(4)]
    _crossing_only = [put(acme, f"crossing the river number {i}") for i in range(5)]
    for i in range(12):
        put(acme, f"zebra at the zoo number {i}")
    r = acme.recall("zebra crossing", mode="lexical", limit=1)          # the arm takes 3
    assert r.meta.recruited_by_rare_terms is True
    assert r.meta.recruited_by == "'cross' & 'zebra'"
    assert ids(r)[0] in both and r.meta.lexical_count == 3
    # the pairs (4) fill fewer than the arm takes (6): the rarest term alone recruits, and still scores both terms
    db.execute("select pgrecall.set_tenant_setting('acme', 'arm_candidates', '6')")
    r = acme.recall("zebra crossing", mode="lexical", limit=3)          # the arm takes 6
    assert r.meta.recruited_by == "'cross'" and r.meta.lexical_count == 6
    assert set(ids(r)) <= set(both) and len(ids(r)) == 3
    # within the budget nothing is split: every term recruits
    db.execute("select pgrecall.set_tenant_setting('acme', 'lexical_match_budget', '1000')")
    r = acme.recall("zebra crossing", mode="lexical", limit=10)
    assert r.meta.recruited_by_rare_terms is False and r.meta.recruited_by == "'cross' | 'zebra'"


def test_each_arm_contributes_twice_the_rows_asked_for(acme, conninfo, db):
    """An arm's depth is max(arm_candidates, 2 x limit): deep agreement cannot outvote either arm's best."""
    made = [put(acme, f"{t} (note {i})") for i in range(6) for t in TOPICS]      # 36 memories
    embed_all(conninfo)
    db.execute("select pgrecall.set_tenant_setting('acme', 'arm_candidates', '1')")
    db.execute("select pgrecall.set_tenant_setting('acme', 'dense_floor', '-1')")  # every memory is a dense match
    for limit in (1, 3, 7):
        r = acme.recall("sourdough bread baked on Sunday", limit=limit)
        assert r.meta.dense_available is True
        assert r.meta.lexical_count <= 2 * limit and r.meta.dense_count == min(2 * limit, len(made))
        assert all(item.dense_rank is None or item.dense_rank <= 2 * limit for item in r.items)
    db.execute("select pgrecall.set_tenant_setting('acme', 'arm_candidates', '30')")
    r = acme.recall("sourdough bread baked on Sunday", limit=3)
    assert len(made) > 30 and r.meta.dense_count == 30


def test_bm25_prefers_rare_terms_and_repeated_matches(acme):
    a = put(acme, "apple banana")
    b = put(acme, "apple apple apple cherry")
    rest = [put(acme, f"apple note {i}") for i in range(6)]
    r = acme.recall("banana apple", mode="lexical", limit=10)
    assert ids(r)[0] == a  # the rare term dominates
    r = acme.recall("apple cherry", mode="lexical", limit=10)
    assert ids(r)[0] == b
    assert all(i.bm25 > 0 for i in r.items) and r.items[0].bm25 > r.items[1].bm25
    assert len(rest) == 6


# -- 3. the dense arm ------------------------------------------------------------------------

TOPICS = ["The cat sat on the warm windowsill", "Quarterly revenue grew by eight percent",
          "The volcano erupted and covered the village in ash", "She baked sourdough bread every Sunday",
          "The football match ended in a penalty shootout", "Quantum computers use qubits for calculations"]


def embedded_texts(db, ids):
    """What the worker embedded for each memory, under the tenant's input version."""
    return [db.execute("select acme._embedding_input(%s, (acme._setting_value('embedding_input_version') #>> '{}')::int)",
                       (m,)).fetchone()[0] for m in ids]


def test_dense_floor_is_honoured(acme, conninfo, db, embedder):
    made = [put(acme, t) for t in TOPICS]
    embed_all(conninfo)
    query = "a pet resting in the sun by the window"
    r = acme.recall(query, mode="dense", limit=10)
    qv = embedder.embed([query])[0]
    vectors = dict(zip(made, embedder.embed(embedded_texts(db, made))))
    cos = {m: sum(a * b for a, b in zip(qv, v)) for m, v in vectors.items()}
    expected = [m for m in sorted(made, key=lambda m: -cos[m]) if cos[m] >= 0.30]
    assert ids(r) == expected and len(expected) >= 1 and len(expected) < len(made)
    for item in r.items:
        assert item.cosine >= 0.30 and math.isclose(item.cosine, cos[item.memory_id], abs_tol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["exact", "hnsw"])
def test_dense_arm_finds_the_true_nearest_when_one_percent_is_eligible(acme, conninfo, db, embedder, path):
    texts = [f"{TOPICS[i % len(TOPICS)]} (variant {i})" for i in range(600)]
    # One observation is the evidence of all 600: its single passage keeps the embedding work on the memories.
    said = acme.append("said: all of the variants below", role="user", actor="ana", scopes=["default", "other"])
    made = []
    for i, t in enumerate(texts):
        r = acme.remember(t, evidence=[said], purposes=["converse"], audience="ana" if i % 100 == 7 else "ben",
                          scopes=["default", "other"])  # 6 of 600 are ana's
        assert r.created, r
        made.append(r.memory_id)
    embed_all(conninfo)
    if path == "hnsw":
        db.execute("select pgrecall.set_tenant_setting('acme', 'exact_dense_below', '0')")
    query = "volcanic ash over a village"
    r = acme.recall(query, mode="dense", limit=10, principal="ana")
    assert r.meta.dense_method == path
    qv = embedder.embed([query])[0]
    eligible = [(m, t) for i, (m, t) in enumerate(zip(made, texts)) if i % 100 == 7]
    vecs = embedder.embed(embedded_texts(db, [m for m, _ in eligible]))
    brute = sorted(((sum(a * b for a, b in zip(qv, v)), m) for (m, _), v in zip(eligible, vecs)), reverse=True)
    expected = [m for c, m in brute if c >= 0.30]
    assert ids(r) == expected


# -- 4. fusion ------------------------------------------------------------------------------

def test_rrf_arithmetic(acme, conninfo, db):
    for t in TOPICS:
        put(acme, t)
    embed_all(conninfo)
    db.execute("select pgrecall.set_tenant_setting('acme', 'fusion', '\"rrf\"')")
    for k in (60, 10):
        db.execute("select pgrecall.set_tenant_setting('acme', 'rrf_k', %s::jsonb)", (str(k),))
        r = acme.recall("bread baked on Sunday mornings", limit=10)
        assert r.items
        for item in r.items:
            want = sum(1 / (k + rank) for rank in (item.lexical_rank, item.dense_rank) if rank)
            assert math.isclose(item.score, want, rel_tol=1e-9)
        scores = [i.score for i in r.items]
        assert scores == sorted(scores, reverse=True) and [i.rank for i in r.items] == list(range(1, len(scores) + 1))


# -- degrade ---------------------------------------------------------------------------------

def test_degrades_to_lexical_never_fails(acme, conninfo, monkeypatch):
    m = put(acme, "the lighthouse keeper lit the lamp")
    # no embeddings yet
    r = acme.recall("lighthouse lamp")
    assert not r.dense_available and r.meta.dense_reason == "no embeddings yet" and ids(r) == [m]
    assert r.meta.missing_embeddings == 1
    embed_all(conninfo)
    # no query embedding: a psql caller
    r = acme.recall("lighthouse lamp", embed=False)
    assert not r.dense_available and r.meta.dense_reason == "no query embedding" and ids(r) == [m]
    # the model is down
    import pgrecall.embedder as emb

    def broken():
        raise ModelUnavailable("simulated")

    monkeypatch.setattr(emb, "get_embedder", broken)
    r = acme.recall("lighthouse lamp")
    assert not r.dense_available and ids(r) == [m]
    r = acme.recall("lighthouse lamp", mode="dense")
    assert not r.dense_available and ids(r) == []
    monkeypatch.undo()
    r = acme.recall("lighthouse lamp")
    assert r.dense_available and r.meta.missing_embeddings == 0


def test_the_missing_embeddings_count_stops_at_a_thousand(acme):
    offsets = acme.append_many([{"body": f"import line {i}", "source_role": "user", "actor": "ana"} for i in range(1005)])
    acme.remember_many([{"body": f"imported note {i}", "evidence": [o], "purposes": ["converse"]}
                        for i, o in enumerate(offsets)])
    r = acme.recall("imported note", embed=False)
    assert r.meta.missing_embeddings == 1000 and r.meta.missing_embeddings_more is True
    r = acme.recall("imported note", embed=False, principal="ana", purpose="act")
    assert r.meta.missing_embeddings == 0 and r.meta.missing_embeddings_more is False


def test_from_sql_without_an_embedding(acme, conninfo):
    m = put(acme, "the lighthouse keeper lit the lamp")
    with conninfo.connect(user="pgrecall_acme_app") as conn:
        rows = conn.execute("select rank, memory_id, lexical_rank, dense_rank from acme.recall("
                            "'bot', array['default'], 'lighthouse')").fetchall()
        items, meta = conn.execute("select to_jsonb(items), to_jsonb(meta) from acme.recall_answer("
                                   "'bot', array['default'], 'lighthouse')").fetchone()
    assert rows == [(1, m, 1, None)]
    assert [(i["rank"], i["memory_id"], i["lexical_rank"], i["dense_rank"]) for i in items] == rows
    assert meta["dense_available"] is False and meta["fused_count"] == 1 and meta["returned"] == 1


def test_recall_bad_input(acme):
    put(acme, "something")
    with pytest.raises(errors.InvalidArgument):
        acme.recall("something", limit=0)
    with pytest.raises(errors.InvalidArgument):
        acme.recall("something", mode="fuzzy")
    with pytest.raises(errors.InvalidPurpose):
        acme.recall("something", purpose="gossip")
    with pytest.raises(errors.ScopeNotAuthorised):
        acme.recall("something", scopes=["nowhere"])


def test_rerank_hook_sees_only_rows_that_passed(acme, conninfo):
    a, b = put(acme, "orange juice"), put(acme, "orange peel")
    secret = put(acme, "orange secret", audience="ben")
    seen = []

    def reverse(query, items):
        seen.extend(i.memory_id for i in items)
        return list(reversed(items))

    r = acme.recall("orange", mode="lexical", rerank=reverse, principal="ana")
    assert secret not in seen and set(seen) == {a, b}
    assert ids(r) == list(reversed(seen))
    with pytest.raises(ValueError):
        acme.recall("orange", mode="lexical", rerank=lambda q, items: items + items[:1] + [items[0].__class__(
            **{**items[0].__dict__, "memory_id": secret})], principal="ana")
