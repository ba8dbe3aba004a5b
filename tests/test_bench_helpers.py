"""The benchmark's own logic that is easy to get wrong: the derived corpus (bench/derive.py) and the
helpers that score the dense arm and split the corpus among principals (bench/run.py). No model:
synthetic vectors with a known structure; one test ingests into a real tenant. All run in seconds."""

import random
import re
from collections import Counter

import numpy as np
import pytest
from bench import corpus, derive
from bench.run import (
    ERASED_SUBJECT,
    NARROW,
    SUBJECTS,
    USERS,
    assign_users,
    exact_top,
    recall_at_k,
    text_of_memory_index,
    vector_literals,
)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def clustered(n_clusters=40, per_cluster=25, dim=48, spread=0.35, seed=3):
    """Unit vectors in clusters, like embeddings of memories made from the same few templates."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((n_clusters, dim)))
    labels = np.repeat(np.arange(n_clusters), per_cluster)
    return unit(centres[labels] + spread * rng.standard_normal((len(labels), dim)) / np.sqrt(dim)), labels


class BagOfWords:
    """A stand-in for the model: a text's vector is the normalised sum of its words' random vectors,
    so the truth about any derived text is known."""

    def __init__(self, dim=64, seed=3):
        self.dim, self.rng, self.words = dim, np.random.default_rng(seed), {}

    def __call__(self, kind, texts):
        return unit(np.array([sum(self._word(w) for w in t.replace("'s", "").split()) for t in texts]))

    def _word(self, word):
        if word not in self.words:
            self.words[word] = self.rng.standard_normal(self.dim).astype(np.float32)
        return self.words[word]


def test_moved_vectors_keep_unit_norm():
    rng = np.random.default_rng(0)
    sources = unit(rng.standard_normal((50, 32)))
    deltas = rng.standard_normal((50, 32)).astype(np.float32)
    for weight in (0.0, 0.3, 1.0, 5.0):
        out = derive.moved(sources, deltas, weight)
        assert out.dtype == np.float32
        assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert np.allclose(derive.moved(sources, deltas, 0.0), sources, atol=1e-6)


def test_fitted_weight_is_the_one_that_made_the_truth():
    rng = np.random.default_rng(1)
    sources = unit(rng.standard_normal((300, 32)))
    deltas = rng.standard_normal((300, 32)).astype(np.float32) / 4
    truth = derive.moved(sources, deltas, 0.7)
    assert derive.fit_weight(sources, deltas, truth) == pytest.approx(0.7, abs=1e-3)


def _extended(n_total=3000, base_n=600):
    model = BagOfWords()
    texts = corpus.memories(base_n, seed=5)
    return model, texts, derive.extend(texts, model("corpus", texts), n_total, model)


def test_derived_vectors_follow_the_model_and_their_neighbours_stay_close():
    model, texts, d = _extended()
    base = d.vectors[:len(texts)]
    assert len(d.texts) == len(d.vectors) == len(d.sources) == 3000
    assert d.texts[:len(texts)] == texts and np.array_equal(base, model("corpus", texts))
    assert np.allclose(np.linalg.norm(d.vectors, axis=1), 1.0, atol=1e-5)
    assert d.report["weight"] > 0 and d.report["cosine_to_model"] > 0.9
    # What the model itself says about the derived texts.
    derived, truth = d.vectors[len(texts):], model("derived", d.texts[len(texts):])
    assert np.mean(np.sum(derived * truth, axis=1)) > 0.9
    nearest = np.argsort(-(derived @ base.T), axis=1)[:, :10]
    true_nearest = np.argsort(-(truth @ base.T), axis=1)[:, :10]
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(nearest, true_nearest)]) > 0.6


def test_derivation_is_deterministic():
    _, _, first = _extended(1500)
    _, _, second = _extended(1500)
    assert first.texts == second.texts
    assert np.array_equal(first.vectors, second.vectors)


def test_derived_text_changes_the_person_and_one_more_detail():
    pool = derive.people(1_000_000)
    rng = random.Random(4)
    for text in corpus.memories(300, seed=8):
        new, subs = derive.derive_text(text, rng, pool)
        assert new != text and 1 <= len(subs) <= 2
        assert derive._PERSON.search(new).group(0) in pool
        # the derived text is the source with exactly these details swapped: same words otherwise
        words = Counter(text.replace("'s", " 's").split())
        for old, repl in subs:
            words.subtract(old.split())
            words.update(repl.split())
        assert +words == Counter(new.replace("'s", " 's").split()), (text, new, subs)


def test_derived_text_names_people_that_queries_of_that_size_ask_about():
    pool = set(derive.people(1_000_000))
    asked = {m.group(0) for q in corpus.queries(500, 1_000_000) for m in derive._PERSON.finditer(q)}
    assert asked and asked <= pool


def test_vector_literals_round_trip():
    rows = unit(np.random.default_rng(6).standard_normal((20, 384)))
    literals = vector_literals(rows)
    parsed = np.array([[float(x) for x in re.fullmatch(r"\[(.*)\]", lit).group(1).split(",")] for lit in literals])
    assert parsed.shape == (20, 384)
    assert np.allclose(parsed, rows, rtol=1e-5, atol=1e-7)


def test_exact_top_matches_brute_force_across_chunks_and_applies_the_floor():
    vectors, _ = clustered(dim=384 // 8)
    rng = np.random.default_rng(7)
    rows = rng.choice(len(vectors), size=600, replace=False)
    queries = unit(rng.standard_normal((15, vectors.shape[1])))
    got = exact_top(queries, vectors, rows, k=10, floor=0.2, chunk=97)
    for q, positions in zip(queries, got):
        scores = vectors[rows] @ q
        expected = [p for p in np.argsort(-scores, kind="stable")[:10] if scores[p] >= 0.2]
        assert list(positions) == expected


def test_recall_at_k():
    exact = [np.array([1, 2, 3, 4]), np.array([]), np.array([9])]
    assert recall_at_k([[1, 2, 7], [5], [9, 8]], exact) == pytest.approx((0.5 + 1.0) / 2)
    assert recall_at_k([[1]], [np.array([])]) is None


def test_memory_and_text_indexes_are_inverse():
    memory_of_text = np.array([5, -1, 3, 4, -1, 9])
    inverse = text_of_memory_index(memory_of_text)
    for text, memory in enumerate(memory_of_text):
        if memory >= 0:
            assert inverse[memory] == text
    assert set(np.nonzero(inverse >= 0)[0]) == {3, 4, 5, 9}


def test_every_user_gets_a_share_and_the_narrow_principal_exactly_its_own():
    n = 12_000
    rng = np.random.default_rng(8)
    memory_of_text = np.where(rng.random(n) < 0.9, rng.permutation(n) + 1, -1)  # 10% duplicates
    a = assign_users(memory_of_text)
    assert np.all(np.diff(a["ids"]) > 0)
    text = text_of_memory_index(memory_of_text)[a["ids"]]
    narrow = a["users"] == USERS
    assert narrow.sum() == NARROW
    assert np.all(a["converse"][narrow]) and np.all(text[narrow] % SUBJECTS != ERASED_SUBJECT)
    assert np.all(a["users"][~narrow] == a["ids"][~narrow] % USERS)
    assert np.array_equal(a["converse"], text % 10 != 5)
    # spread over the corpus, not the first 200 ids
    assert a["ids"][narrow].max() - a["ids"][narrow].min() > 0.9 * (a["ids"].max() - a["ids"].min())


def test_bench_ingest_stores_each_memory_with_its_own_texts_vector(db, conninfo, make_tenant):
    # The ingest goes scope by scope, so memory ids do not follow the texts' order, and duplicates
    # create no memory: each stored vector must still be the one computed from its memory's text.
    from bench.run import ingest, store_embeddings

    make_tenant("benchmap")
    app = conninfo.dsn(user="pgrecall_benchmap_app")
    texts = corpus.memories(60, seed=12)
    texts[23] = texts[3]  # same scope (i mod 4) and audience (i mod 10): remember_many makes it a no-op
    vectors = unit(np.random.default_rng(13).standard_normal((len(texts), 384)))
    report, memory_of_text = ingest(app, "benchmap", texts, batch=7)
    assert memory_of_text[23] == -1 and report["created"] == len(texts) - 1
    stored = store_embeddings(conninfo.dsn(user="pgrecall_benchmap_worker"), "benchmap", text_of_memory_index(memory_of_text), vectors, batch=5)
    assert stored["stored"] == len(texts) - 1
    rows = db.execute("select m.id, m.body, e.embedding::text from benchmap.memory m "
                      "join benchmap.memory_embedding e on e.memory_id = m.id").fetchall()
    assert len(rows) == len(texts) - 1
    for memory_id, body, embedding in rows:
        i = int(np.nonzero(memory_of_text == memory_id)[0][0])
        assert body == texts[i]
        # stored as halfvec (migration 0032): the vector rounded to half precision, within one unit in the
        # last place of a component below 0.25 (other memories' vectors differ by ~0.05 per component)
        assert np.allclose([float(x) for x in embedding.strip("[]").split(",")],
                           vectors[i].astype(np.float16).astype(np.float32), atol=2.5e-4)
