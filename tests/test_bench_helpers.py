"""The benchmark's own logic that is easy to get wrong: the derived corpus (bench/derive.py) and the
helpers that score the dense arm and split the corpus among principals (bench/run.py). No database,
no model: synthetic vectors with a known structure, so each test runs in well under a second."""

import random
import re

import numpy as np
import pytest

from bench import corpus, derive
from bench.run import (NARROW, SUBJECTS, ERASED_SUBJECT, USERS, assign_users, exact_top, recall_at_k,
                       text_of_memory_index, vector_literals)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def clustered(n_clusters=40, per_cluster=25, dim=48, spread=0.35, seed=3):
    """Unit vectors in clusters, like embeddings of memories made from the same few templates."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((n_clusters, dim)))
    labels = np.repeat(np.arange(n_clusters), per_cluster)
    return unit(centres[labels] + spread * rng.standard_normal((len(labels), dim)) / np.sqrt(dim)), labels


def test_perturbed_vectors_keep_unit_norm():
    base, _ = clustered()
    noise = derive.NoiseModel.fit(base).sample(len(base), np.random.default_rng(0))
    for scale in (0.0, 0.5, 3.0, 40.0):
        out = derive.perturb(base, noise, scale)
        assert out.dtype == np.float32
        assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_noise_stays_in_the_directions_the_corpus_uses():
    # Vectors confined to a 6-dimensional subspace of 48: covariance-shaped noise stays in it,
    # where isotropic noise would leave it.
    rng = np.random.default_rng(1)
    basis = np.linalg.qr(rng.standard_normal((48, 6)))[0]
    base = unit(rng.standard_normal((500, 6)) @ basis.T + 2.0 * basis[:, 0])
    noise = derive.NoiseModel.fit(base).sample(2000, rng)
    outside = noise - (noise @ basis) @ basis.T
    assert np.linalg.norm(outside) / np.linalg.norm(noise) < 1e-3


def test_calibrated_scale_gives_the_target_cosine():
    base, _ = clustered()
    noise = derive.NoiseModel.fit(base).sample(len(base), np.random.default_rng(2))
    for target in (0.95, 0.8, 0.6):
        scale = derive.calibrate_scale(base, noise, target)
        achieved = np.mean(np.sum(derive.perturb(base, noise, scale) * base, axis=1))
        assert achieved == pytest.approx(target, abs=1e-3)


def _extended(n_total=3000):
    base, labels = clustered()
    texts = corpus.memories(len(base), seed=5)
    # Stand-ins for the model's embeddings of derived texts: perturbed with a known scale.
    cal_sources = np.arange(0, len(base), 3)
    model_noise = derive.NoiseModel.fit(base).sample(len(cal_sources), np.random.default_rng(9))
    true_scale = derive.calibrate_scale(base[cal_sources], model_noise, 0.85)
    cal_vectors = derive.perturb(base[cal_sources], model_noise, true_scale)
    return base, labels, texts, derive.extend(texts, base, n_total, (cal_sources, cal_vectors))


def test_derived_corpus_is_calibrated_and_its_neighbours_stay_close():
    base, labels, texts, d = _extended()
    assert len(d.texts) == len(d.vectors) == len(d.sources) == 3000
    assert np.array_equal(d.vectors[:len(base)], base) and d.texts[:len(base)] == texts
    assert np.allclose(np.linalg.norm(d.vectors, axis=1), 1.0, atol=1e-5)
    report = d.report
    assert report["cosine_to_source_noise_mean"] == pytest.approx(report["cosine_to_source_model_mean"], abs=2e-3)
    derived = d.vectors[len(base):]
    sources = d.sources[len(base):]
    cosine = np.sum(derived * base[sources], axis=1)
    assert cosine.mean() == pytest.approx(0.85, abs=0.02)
    # Each derived vector's nearest base vectors are its source's neighbourhood: the same cluster,
    # and most of the source's own ten nearest.
    nearest = np.argsort(-(derived @ base.T), axis=1)[:, :10]
    assert np.mean(labels[nearest[:, 0]] == labels[sources]) > 0.95
    source_nearest = np.argsort(-(base[sources] @ base.T), axis=1)[:, :10]
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(nearest, source_nearest)])
    assert overlap > 0.6


def test_derivation_is_deterministic():
    _, _, _, first = _extended(2000)
    _, _, _, second = _extended(2000)
    assert first.texts == second.texts
    assert np.array_equal(first.vectors, second.vectors)


def test_derived_text_changes_the_person_and_one_more_detail():
    pool = derive.people(1_000_000)
    rng = random.Random(4)
    people_pattern = derive._PERSON
    for text in corpus.memories(300, seed=8):
        new = derive.derive_text(text, rng, pool)
        before, after = text.split(), new.split()
        assert new != text
        # a person is two words and a detail at most three ("on Tuesday evenings"): the sentence keeps its frame
        changed = sum(a != b for a, b in zip(before, after)) + abs(len(before) - len(after))
        assert 1 <= changed <= 6, (text, new)
        first_person = people_pattern.search(new).group(0)
        assert first_person in pool


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
    stored = store_embeddings(app, "benchmap", text_of_memory_index(memory_of_text), vectors, batch=5)
    assert stored["stored"] == len(texts) - 1
    rows = db.execute("select m.id, m.body, e.embedding::text from benchmap.memory m "
                      "join benchmap.memory_embedding e on e.memory_id = m.id").fetchall()
    assert len(rows) == len(texts) - 1
    for memory_id, body, embedding in rows:
        i = int(np.nonzero(memory_of_text == memory_id)[0][0])
        assert body == texts[i]
        assert np.allclose([float(x) for x in embedding.strip("[]").split(",")], vectors[i], atol=1e-5)
