"""Recall's steps, each called on its own as the tenant owner would (the tester is a member of it): the
lexical arm and its parts, the dense arm, the fact arm, fusion, the walk, the rows, and message search's
arms over passages. recall() composes them; each test below checks one step's contract, and the last
ones that the composition is exactly these steps."""

import dataclasses
import math

import psycopg
import pytest

from test_recall import TOPICS, embed_all, embedded_texts, embedder, ids, put  # noqa: F401 (a fixture)


def one(db, query, params=()):
    return db.execute(query, params).fetchone()


def peer(db, name):
    return one(db, "select id from acme.peer where name = %s", (name,))[0]


# -- 2. the lexical arm --------------------------------------------------------------------------

def test_query_terms_are_the_distinct_stemmed_lexemes_sorted(db, acme):
    assert one(db, "select acme._query_terms('The cats were running; a cat runs!')")[0] == ["cat", "run"]
    assert one(db, "select acme._query_terms('the of and')")[0] == []  # stop words only
    assert one(db, "select acme._query_terms(null)")[0] == []


def test_prune_terms_drops_common_terms_from_three_terms_on_but_never_all(db, acme):
    rows = db.execute("select term, df, idf, pruned from acme._prune_terms(%s, %s, 100, 3, 0.15)",
                      (["rare", "common", "everywhere"], [2, 15, 100])).fetchall()
    assert [(t, df, pruned) for t, df, _, pruned in rows] == \
        [("common", 15, True), ("everywhere", 100, True), ("rare", 2, False)]
    idf = {t: v for t, _, v, _ in rows}
    assert math.isclose(idf["rare"], math.log(1 + (100 - 2 + 0.5) / (2 + 0.5)))
    # two terms: nothing is pruned, however common
    assert [r[0] for r in db.execute("select term from acme._prune_terms(%s, %s, 100, 3, 0.15) where pruned",
                                     (["common", "everywhere"], [15, 100]))] == []
    # every term common: the rarest is kept (on a tie, the first by name)
    kept = db.execute("select term from acme._prune_terms(%s, %s, 100, 3, 0.15) where not pruned",
                      (["b", "a", "c"], [50, 50, 90])).fetchall()
    assert kept == [("a",)]
    # a term in one document is never common, however few the documents: of three memories, "ana" is in all
    # three and dropped, "job" and "nurs" in one each (or none: a missing term counts as one) and both searched
    pruned = db.execute("select term, pruned from acme._prune_terms(%s, %s, 3, 3, 0.15)",
                        (["ana", "job", "nurs"], [3, 1, 1])).fetchall()
    assert pruned == [("ana", True), ("job", False), ("nurs", False)]


def test_lexical_recruiters_go_from_pairs_to_rare_terms_to_every_term(db, acme):
    def recruiters(terms, df, depth, budget):
        return [str(q) for q in one(db, "select acme._lexical_recruiters(%s, %s, %s, %s)::text[]",
                                    (terms, df, depth, budget))[0]]

    # within the budget: every term recruits
    assert recruiters(["cat", "dog"], [5, 7], 20, 1000) == ["'cat' | 'dog'"]
    # the rare ones (up to the budget, and at least the depth) first, then all
    assert recruiters(["cat", "dog", "the"], [5, 30, 5000], 20, 1000) == ["'cat' | 'dog'", "'cat' | 'dog' | 'the'"]
    # even the rare ones match more than the budget: a rare term with another term first
    assert recruiters(["cat", "dog", "the"], [1500, 3000, 5000], 20, 1000) == \
        ["'cat' & ( 'dog' | 'the' )", "'cat'", "'cat' | 'dog' | 'the'"]
    assert recruiters([], [], 20, 1000) == []


def test_lexical_candidates_rank_eligible_matches_by_bm25(db, acme):
    both = put(acme, "apple banana")
    apple = [put(acme, f"apple note {i}") for i in range(3)]
    hidden = put(acme, "apple banana for ben only", audience="ben")
    ana = peer(db, "ana")
    rows = db.execute(
        "select id, score from acme._lexical_candidates(%s, '{default}', 'converse', false, null, "
        "'appl | banana'::tsquery, array['appl'::tsquery, 'banana'::tsquery], '{appl,banana}', "
        "'{0.1,1.5}', 1.2, 0.75, 3.0, 10)", (ana,)).fetchall()
    assert rows[0][0] == both and {r[0] for r in rows} == {both, *apple}   # ben's memory is never scored
    assert hidden not in {r[0] for r in rows}
    assert [s for _, s in rows] == sorted((s for _, s in rows), reverse=True)
    # at most p_depth rows
    assert len(db.execute("select * from acme._lexical_candidates(%s, '{default}', 'converse', false, null, "
                          "'appl'::tsquery, array['appl'::tsquery], '{appl}', '{0.1}', 1.2, 0.75, 3.0, 2)",
                          (ana,)).fetchall()) == 2


def test_lexical_candidates_score_alike_up_to_twelve_terms_and_past(db, acme):
    """Up to 12 terms one planned statement scores the candidates, past 12 a statement written for the
    terms does. Only the best 100 by the quick score are scored exactly, so the one rare match must get
    the weight of its term in the 12th slot as in the 13th: it comes first either way."""
    apples = [put(acme, f"apple and other words here {i}") for i in range(101)]
    cherry = put(acme, "cherry and other words here")
    ana = peer(db, "ana")
    absent = [f"aa{i:02d}" for i in range(10)]     # sorted before the others, as the arm sorts its terms

    def candidates(words):
        return db.execute(
            "select id, score from acme._lexical_candidates(%s, '{default}', 'converse', false, null, "
            "'appl | cherri'::tsquery, array(select quote_literal(w)::tsquery from unnest(%s::text[]) w), %s, %s, "
            "1.2, 0.75, 6.0, 10)", (ana, words, words, [1.0] * (len(words) - 1) + [2.0])).fetchall()

    twelve = candidates(absent + ["appl", "cherri"])
    thirteen = candidates(absent + ["aa99", "appl", "cherri"])
    assert twelve[0][0] == cherry and {i for i, _ in twelve[1:]} <= set(apples) and len(twelve) == 10
    assert twelve == thirteen


def test_lexical_arm_reports_terms_pruning_statistics_and_recruitment(db, acme):
    db.execute("select pgrecall.set_tenant_setting('acme', 'lexical_match_budget', '3')")
    made = [put(acme, f"coffee note {i}") for i in range(10)]
    zebra = put(acme, "coffee at the zebra crossing")
    ids_, scores, terms, dropped, stats, recruited_by, recruited = one(
        db, "select ids, scores, terms, dropped, term_stats, recruited_by::text, recruited "
            "from acme._lexical_arm(%s, '{default}', 'converse', false, null, 'zebra coffee notes', 4)",
        (peer(db, "ana"),))
    assert terms == ["coffe", "note", "zebra"] and dropped == ["coffe", "note"]  # in 100% and 91% of memories
    assert stats == "live" and ids_ == [zebra] and len(scores) == 1
    assert recruited_by == "'zebra'" and recruited is False  # the only kept term: nothing narrower
    # two terms are never pruned; the rare one recruits and the common one still scores
    ids_, recruited_by, recruited = one(
        db, "select ids, recruited_by::text, recruited "
            "from acme._lexical_arm(%s, '{default}', 'converse', false, null, 'zebra coffee', 4)",
        (peer(db, "ana"),))
    assert ids_[0] == zebra and len(ids_) == 4 and set(ids_[1:]) <= set(made)
    assert (recruited_by, recruited) == ("'coffe' | 'zebra'", False)   # 'zebra' alone finds 1 of the 4 asked
    # no terms: nothing ranked, nothing reported
    assert one(db, "select ids, terms, term_stats from acme._lexical_arm(%s, '{default}', 'converse', false, "
                   "null, 'the', 4)", (peer(db, "ana"),)) == ([], [], None)


def test_few_eligible_reads_the_ids_a_principal_may_see_only_when_they_are_few(db, acme):
    mine = [put(acme, f"ben's note {i}", audience="ben") for i in range(3)]
    shared = put(acme, "a note for everyone")
    for i in range(5):
        put(acme, f"ana's note {i}", audience="ana")
    few = "select acme._few_eligible(%s, '{default}', 'converse', false, null, %s)"
    assert sorted(one(db, few, (peer(db, "ben"), 10))[0]) == sorted(mine + [shared])
    assert one(db, few, (peer(db, "ben"), 4))[0] is None  # four eligible: not fewer than four
    assert one(db, few, (peer(db, "ben"), 0))[0] is None  # exact_dense_below 0: never few


def test_lexical_arm_among_few_eligible_ranks_as_the_whole_index_does(db, acme):
    """Given the few ids a principal may see, the arm reads them by id instead of the text index: the
    ranking is the one the general path reaches with every kept term."""
    for i in range(30):
        put(acme, f"coffee and tea notes {i}", audience="ana")  # matches the principal may not see
    visible = [put(acme, text, audience="ben") for text in
               ("coffee with milk", "tea at noon", "coffee and tea, twice coffee", "nothing relevant")]
    ben = peer(db, "ben")
    general = one(db, "select ids, scores, recruited_by::text from acme._lexical_arm(%s, '{default}', 'converse', "
                      "false, null, 'coffee tea', 10)", (ben,))
    among = one(db, "select ids, scores, recruited_by::text from acme._lexical_arm(%s, '{default}', 'converse', "
                    "false, null, 'coffee tea', 10, null, %s)", (ben, visible))
    assert general[2] == among[2] == "'coffe' | 'tea'"
    assert among[0] == general[0] and set(among[0]) == set(visible[:3])
    assert among[1] == pytest.approx(general[1])
    assert among[0][0] == visible[2]  # both terms, coffee twice


# -- 3. the dense arm ----------------------------------------------------------------------------

def test_dense_reason_says_why_the_arm_cannot_run(db, acme, conninfo):
    vector = [0.05] * 384
    assert one(db, "select acme._dense_reason(null, null)")[0] == "no query embedding"
    assert one(db, "select acme._dense_reason(%s, null)", (vector,))[0] == "no embeddings yet"
    put(acme, "a memory to embed")
    embed_all(conninfo)
    assert one(db, "select acme._dense_reason(%s, null)", (vector,))[0] is None
    assert one(db, "select acme._dense_reason(%s, 'all-MiniLM-L6-v2')", (vector,))[0] is None
    assert one(db, "select acme._dense_reason(%s, 'other-model')", (vector,))[0] == \
        "query embedded with other-model, memories with all-MiniLM-L6-v2"
    with pytest.raises(Exception) as info:
        db.execute("select acme._dense_reason(%s, null)", ([0.1, 0.2, 0.3],))
    assert info.value.sqlstate == "PR154"  # WrongDimensions


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, None])
def test_one_number_that_is_not_finite_makes_a_query_embedding_malformed(db, acme, bad):
    vector = [0.05] * 383 + [bad]
    with pytest.raises(psycopg.Error) as info:
        db.execute("select acme._check_query_embedding(%s)", (vector,))
    assert info.value.sqlstate == "PR154"
    assert "384 finite numbers" in info.value.diag.message_primary
    db.execute("select acme._check_query_embedding(%s)", ([0.05] * 384,))  # and a good one passes


@pytest.mark.parametrize("path", ["exact", "hnsw"])
def test_dense_arm_returns_eligible_memories_nearest_first_above_the_floor(db, acme, conninfo, embedder, path):
    made = [put(acme, t) for t in TOPICS]
    hidden = put(acme, "A cat dozing on a sunny windowsill", audience="ben")
    embed_all(conninfo)
    if path == "hnsw":
        db.execute("select pgrecall.set_tenant_setting('acme', 'exact_dense_below', '0')")
    db.execute("set hnsw.ef_search = 17")
    query = "a pet resting in the sun by the window"
    qv = embedder.embed([query])[0]
    found, cosines, method = one(
        db, "select ids, cosines, method from acme._dense_arm(%s, '{default}', 'converse', false, null, %s, 20)",
        (peer(db, "ana"), list(map(float, qv))))
    assert method == path and hidden not in found
    vectors = dict(zip(made, embedder.embed(embedded_texts(db, made))))
    cos = {m: sum(a * b for a, b in zip(qv, v)) for m, v in vectors.items()}
    assert found == [m for m in sorted(made, key=lambda m: -cos[m]) if cos[m] >= 0.30]
    assert all(math.isclose(c, cos[m], abs_tol=1e-3) for m, c in zip(found, cosines))
    # the arm's HNSW settings are its own: the session's are as they were
    assert one(db, "show hnsw.ef_search")[0] == "17"
    assert one(db, "select current_setting('hnsw.iterative_scan', true)")[0] in (None, "", "off")


# -- facts ---------------------------------------------------------------------------------------

def test_fact_arm_finds_facts_about_the_entities_the_query_names(db, acme):
    said = acme.append("I live in Lisbon and my name is Ana", role="user", actor="ana")
    lives = acme.assert_fact("ana", "lives_in", "Lisbon", evidence=[{"offset": said, "quote": "I live in Lisbon"}])
    acme.assert_fact("ben", "lives_in", "Porto", evidence=[{"offset": acme.append("I live in Porto", role="user",
                                                                                  actor="ben"),
                                                            "quote": "I live in Porto"}], audience="ben")
    fact_ids, entities = one(db, "select fact_ids, entities from acme._fact_arm(%s, '{default}', 'converse', null, "
                                 "'where does ana live?')", (peer(db, "ana"),))
    assert fact_ids == [lives.fact_id] and entities == ["ana"]
    # ben's fact is his audience's only: for ana, Porto names no fact she may see, and stays unnamed
    assert one(db, "select fact_ids, entities from acme._fact_arm(%s, '{default}', 'converse', null, "
                   "'who lives in porto')", (peer(db, "ana"),)) == ([], [])
    assert one(db, "select fact_ids, entities from acme._fact_arm(%s, '{default}', 'converse', null, "
                   "'nothing named here')", (peer(db, "ana"),)) == ([], [])


# -- 4. fusion and 5. the walk -------------------------------------------------------------------

def test_rrf_fuse_sums_reciprocal_ranks(db, acme):
    # 3: 1/63 + 1/61; 1: 1/61; 4: 1/62; 2: 1/62
    assert one(db, "select acme._rrf_fuse('{1,2,3}', '{3,4}', 60, 10)")[0] == [3, 1, 2, 4]
    assert one(db, "select acme._rrf_fuse('{1,2,3}', '{3,4}', 60, 2)")[0] == [3, 1]
    assert one(db, "select acme._rrf_fuse('{}', '{}', 60, 10)")[0] == []


def test_score_fuse_weighs_each_arm_by_its_evidence_not_its_rank(db, acme):
    # lexical: 1 (BM25 10), 2 (9.5), 3 (1); dense: 3 (cosine 0.7), 5 (0.6), 2 (0.31, just above the floor 0.3)
    ids, scores = one(db, "select ids, scores from acme._score_fuse('{1,2,3}', '{10,9.5,1}', '{3,5,2}', "
                          "'{0.7,0.6,0.31}', 0.3, 10)")
    # RRF lifts 2 over the lexical first on a cosine that barely clears the floor; by evidence it adds 0.025
    assert one(db, "select acme._rrf_fuse('{1,2,3}', '{3,5,2}', 60, 10)")[0] == [3, 2, 1, 5]
    assert ids == [3, 1, 2, 5]
    assert [round(x, 4) for x in scores] == [1.1, 1.0, 0.975, 0.75]
    assert one(db, "select ids from acme._score_fuse('{1,2,3}', '{10,9.5,1}', '{3,5,2}', '{0.7,0.6,0.31}', 0.3, 2)"
               )[0] == [3, 1]
    assert one(db, "select ids, scores from acme._score_fuse('{}', '{}', '{}', '{}', 0.3, 10)") == ([], [])


def test_recall_with_fusion_scores_is_the_score_fused_walk(db, acme, conninfo, embedder):
    for i, t in enumerate(TOPICS * 3):
        put(acme, f"{t} (note {i})")
    embed_all(conninfo)
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        admin.execute("select acme.set_setting('fusion', '\"scores\"')")
    query = "bread baked on Sunday in the village"
    qv = list(map(float, embedder.embed([query])[0]))
    ana = peer(db, "ana")
    r = acme.recall(query, limit=5, principal="ana")
    # score fusion reads each arm ten times the rows asked for
    lexical = one(db, "select ids, scores from acme._lexical_arm(%s, '{default}', 'converse', false, null, %s, 50)",
                  (ana, query))
    dense = one(db, "select ids, cosines from acme._dense_arm(%s, '{default}', 'converse', false, null, %s, 50)",
                (ana, qv))
    fused = one(db, "select ids, scores from acme._score_fuse(%s, %s, %s, %s, 0.3, 500)",
                (lexical[0], lexical[1], dense[0], dense[1]))
    assert ids(r) == fused[0][:5]
    assert [round(i.score, 9) for i in r.items] == [round(x, 9) for x in fused[1][:5]]


def test_evidence_scores_compute_the_cosine_of_memories_the_dense_arm_did_not_list(db, acme, conninfo, embedder):
    for i, t in enumerate(TOPICS * 3):
        put(acme, f"{t} (note {i})")
    embed_all(conninfo)
    query = "bread baked on Sunday in the village"
    qv = list(map(float, embedder.embed([query])[0]))
    ana = peer(db, "ana")
    every, cosines = one(db, "select ids, cosines from acme._dense_arm(%s, '{default}', 'converse', false, null, "
                             "%s, 50)", (ana, qv))
    assert len(every) >= 3
    lexical, bm25 = one(db, "select ids, scores from acme._lexical_arm(%s, '{default}', 'converse', false, null, "
                            "%s, 50)", (ana, query))
    # the dense arm read to depth 1 lists only its first; the third is scored by its own cosine all the same
    chosen = [every[2], every[0]]
    got = one(db, "select acme._evidence_scores(%s, %s, %s, %s, %s, %s, 0.3, 'all-MiniLM-L6-v2', 2)",
              (chosen, lexical, bm25, every[:1], cosines[:1], qv))[0]

    def lexical_share(m):
        return bm25[lexical.index(m)] / bm25[0] if m in lexical else 0

    want = [lexical_share(m) + (c - 0.3) / (cosines[0] - 0.3) for m, c in ((every[2], cosines[2]),
                                                                           (every[0], cosines[0]))]
    assert [round(x, 9) for x in got] == [round(x, 9) for x in want]
    # without a dense arm (it did not run) only the lexical evidence counts; a memory neither arm knows, none
    assert one(db, "select acme._evidence_scores(%s, %s, %s, '{}', '{}', null, 0.3, 'all-MiniLM-L6-v2', 2)",
               (chosen, lexical, bm25))[0] == [lexical_share(m) for m in chosen]
    assert one(db, "select acme._evidence_scores('{-1}', '{}', '{}', '{}', '{}', null, 0.3, 'm', 2)")[0] == [0]


def test_recall_by_default_returns_rrfs_rows_ordered_by_their_evidence(db, acme, conninfo, embedder):
    for i, t in enumerate(TOPICS * 3):
        put(acme, f"{t} (note {i})")
    embed_all(conninfo)
    assert one(db, "select value #>> '{}' from acme.setting where key = 'fusion'")[0] == "rrf_scores"
    ana = peer(db, "ana")
    reordered = 0
    for query in ("bread baked on Sunday in the village", "ash from the volcano over the village",
                  "a pet resting in the sun by the window", "revenue of the football club grew",
                  "computers calculating with qubits every Sunday", "the cat and the village match"):
        qv = list(map(float, embedder.embed([query])[0]))
        r = acme.recall(query, limit=5, principal="ana")
        lexical = one(db, "select ids, scores from acme._lexical_arm(%s, '{default}', 'converse', false, null, %s, "
                          "20)", (ana, query))
        dense = one(db, "select ids, cosines from acme._dense_arm(%s, '{default}', 'converse', false, null, %s, 20)",
                    (ana, qv))
        walked = one(db, "select acme._walk_provenance(acme._rrf_fuse(%s, %s, 60, 500), %s, '{default}')",
                     (lexical[0], dense[0], ana))[0]
        evidence = one(db, "select acme._evidence_scores(%s, %s, %s, %s, %s, %s, 0.3, 'all-MiniLM-L6-v2', 2)",
                       (walked[:5], lexical[0], lexical[1], dense[0], dense[1], qv))[0]
        by_evidence = sorted(zip(evidence, walked[:5]), key=lambda p: -p[0])
        # the same rows RRF returns, in the order (and with the scores) of their evidence
        assert ids(r) == [m for _, m in by_evidence], query
        assert [round(i.score, 9) for i in r.items] == [round(e, 9) for e, _ in by_evidence], query
        reordered += ids(r) != walked[:5]
    assert reordered  # for some of these queries the order is not RRF's


def test_walk_provenance_keeps_the_order_and_drops_what_rests_on_a_hidden_source(db, acme):
    source = put(acme, "kiwi origin note")
    derived = acme.derive([source], "kiwi summary")
    plain = put(acme, "kiwi plain note")
    ana = peer(db, "ana")
    assert one(db, "select acme._walk_provenance(%s, %s, '{default}')", ([plain, derived, source], ana))[0] == \
        [plain, derived, source]
    acme.forget(source, reason="wrong")
    assert one(db, "select acme._walk_provenance(%s, %s, '{default}')", ([plain, derived], ana))[0] == [plain]


# -- 7. the rows ---------------------------------------------------------------------------------

def a_fact_and_two_notes(acme):
    said = acme.append("I live in Lisbon", role="user", actor="ana")
    fact = acme.assert_fact("ana", "lives_in", "Lisbon", evidence=[{"offset": said, "quote": "I live in Lisbon"}])
    return fact, put(acme, "first note"), put(acme, "second note")


def test_recall_items_rank_memories_and_facts_together(db, acme):
    fact, a, b = a_fact_and_two_notes(acme)
    rows = db.execute(
        "select rank, item, memory_id, fact_id, score, lexical_rank, dense_rank, bm25, cosine, "
        "       coalesce(to_jsonb(provenance), to_jsonb(fact_provenance)) "
        "from acme._recall_items(%s, %s, %s, '{2.5,1.5}', %s, '{0.9}', 60, 10, %s, '{default}')",
        ([a, b], [fact.fact_id], [a, b], [b], peer(db, "ana"))).fetchall()
    # b: 1/62 + 1/61 > fact: 1/61 = a: 1/61 (a tie: the fact first)
    assert [(r[0], r[1], r[2] or r[3]) for r in rows] == [(1, "memory", b), (2, "fact", fact.fact_id),
                                                          (3, "memory", a)]
    assert math.isclose(rows[0][4], 1 / 62 + 1 / 61)
    assert rows[0][5:9] == (2, 1, 1.5, 0.9) and rows[2][5:9] == (1, None, 2.5, None)
    assert rows[0][9]["observations"][0]["text"] == "said: second note" and rows[1][9]["object"] == "Lisbon"
    limited = db.execute("select rank from acme._recall_items(%s, %s, %s, '{2.5,1.5}', %s, '{0.9}', 60, 2, %s, "
                         "'{default}')", ([a, b], [fact.fact_id], [a, b], [b], peer(db, "ana"))).fetchall()
    assert limited == [(1,), (2,)]


def test_recall_items_by_rrf_scores_return_rrfs_rows_in_the_order_of_their_evidence(db, acme):
    fact, a, b = a_fact_and_two_notes(acme)
    rows = db.execute(
        "select rank, item, coalesce(memory_id, fact_id), score "
        "from acme._recall_items(%s, %s, %s, '{2.5,1.5}', %s, '{0.9}', 60, 2, %s, '{default}', 'rrf_scores', 0.3, "
        "'{3.0,0.5}')", ([a, b], [fact.fact_id], [a, b], [b], peer(db, "ana"))).fetchall()
    # RRF chooses b (1/62 + 1/61) and the fact (1/61, ahead of a on the tie); a's evidence (3.0) does not bring it
    # back. The two are ordered by evidence: the first fact weighs 1, b 0.5.
    assert rows == [(1, "fact", fact.fact_id, 1.0), (2, "memory", b, 0.5)]


# -- the composition -----------------------------------------------------------------------------

def test_recall_is_the_composition_of_its_steps(db, acme, conninfo, embedder):
    for i, t in enumerate(TOPICS * 3):
        put(acme, f"{t} (note {i})", audience="ben" if i % 5 == 0 else None)
    embed_all(conninfo)
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        admin.execute("select acme.set_setting('fusion', '\"rrf\"')")
    query = "bread baked on Sunday in the village"
    qv = list(map(float, embedder.embed([query])[0]))
    ana = peer(db, "ana")
    r = acme.recall(query, limit=5, principal="ana")   # the driver embeds the query with the same model
    lexical = one(db, "select ids, scores from acme._lexical_arm(%s, '{default}', 'converse', false, null, %s, 20)",
                  (ana, query))
    dense = one(db, "select ids, cosines from acme._dense_arm(%s, '{default}', 'converse', false, null, %s, 20)",
                (ana, qv))
    walked = one(db, "select acme._walk_provenance(acme._rrf_fuse(%s, %s, 60, 500), %s, '{default}')",
                 (lexical[0], dense[0], ana))[0]
    assert ids(r) == walked[:5]
    assert r.meta.fused_count == len(walked)
    assert r.meta.lexical_count == len(lexical[0]) and r.meta.dense_count == len(dense[0])
    for item in r.items:
        if item.lexical_rank:
            assert lexical[0][item.lexical_rank - 1] == item.memory_id
            assert math.isclose(item.bm25, lexical[1][item.lexical_rank - 1])
        if item.dense_rank:
            assert dense[0][item.dense_rank - 1] == item.memory_id


def test_recall_metadata_keys_are_unchanged(acme):
    r = acme.recall("anything at all", limit=3)
    # the driver reads the metadata into RecallMeta, whose fields must be exactly the keys (the tests set
    # PGRECALL_STRICT_ROWS: a key the SQL adds or drops fails the read)
    assert {f.name for f in dataclasses.fields(r.meta)} == {
        "query", "mode", "purpose", "terms", "dropped_terms", "term_stats", "recruited_by_rare_terms",
        "recruited_by", "dense_available", "dense_reason", "dense_method", "lexical_count", "dense_count",
        "fused_count", "fact_count", "entities", "returned", "missing_embeddings", "missing_embeddings_more",
        "watermarks", "embedding_queue", "as_of"}


# -- message search's arms over passages ---------------------------------------------------------

def test_passage_arms_filter_by_scope_audience_session_and_sender(db, acme, conninfo, embedder):
    s1 = acme.create_session("one")
    s2 = acme.create_session("two")
    acme.add_session_peers(s1, ["ana", "bot"])
    acme.add_session_peers(s2, ["ben", "bot"])
    acme.append("I adopted a puppy called Rex", role="user", actor="ana", session_id=s1)
    acme.append("Rex the puppy chewed my shoes", role="user", actor="ben", session_id=s2)
    acme.append("zqhidden puppy in the other scope", role="user", actor="ana", scope="other",
                scopes=["default", "other"])
    embed_all(conninfo)
    bot, ana = peer(db, "bot"), peer(db, "ana")

    def bodies(passage_ids):
        return [one(db, "select body from acme.passage where id = %s", (p,))[0] for p in passage_ids]

    found, _, terms, dropped = one(db, "select * from acme._passage_lexical_arm(%s, '{default}', null, null, "
                                       "'puppy Rex', 20)", (bot,))
    assert terms == ["puppi", "rex"] and dropped == [] and len(found) == 2
    # ana was not in session two: its passage is neither counted nor ranked for her
    assert bodies(one(db, "select ids from acme._passage_lexical_arm(%s, '{default}', null, null, 'puppy', 20)",
                      (ana,))[0]) == ["I adopted a puppy called Rex"]
    assert bodies(one(db, "select ids from acme._passage_lexical_arm(%s, '{default}', %s, null, 'puppy', 20)",
                      (bot, s2))[0]) == ["Rex the puppy chewed my shoes"]
    assert bodies(one(db, "select ids from acme._passage_lexical_arm(%s, '{default}', null, %s, 'puppy', 20)",
                      (bot, ana))[0]) == ["I adopted a puppy called Rex"]
    db.execute("select pgrecall.set_tenant_setting('acme', 'dense_floor', '-1')")  # every passage in scope is near
    qv = list(map(float, embedder.embed(["a young dog"])[0]))
    found, cosines, method = one(db, "select * from acme._passage_dense_arm(%s, '{default}', null, null, %s, 20)",
                                 (bot, qv))
    assert method == "exact" and len(found) == 2 and cosines == sorted(cosines, reverse=True)
    assert "zqhidden puppy in the other scope" not in bodies(found)
    found, _, _ = one(db, "select * from acme._passage_dense_arm(%s, '{default}', null, null, %s, 20)", (ana, qv))
    assert bodies(found) == ["I adopted a puppy called Rex"]
