"""A large corpus from a smaller embedded one: 1M memories for the price of 100k model embeddings.

Embedding 1M texts with the model takes about an hour of both cores here; the recall benchmark
needs the vectors, not the model. So beyond ``--base`` memories (default 100k, embedded once and
cached under bench/cache/) every further memory is DERIVED from a real one:

* Text: the source memory with its first person replaced by another person of the larger corpus's
  pool (the pool ``corpus.queries`` draws from at that size, so queries name people who exist) and
  one further detail replaced by another of its kind: a place, a hobby, a food, a job, a time, or
  the second person. "Ana Silva likes jazz on Mondays" becomes "Omar Costa likes jazz every
  weekend": the same kind of statement about someone else, as a real store of that size holds.
* Vector: the source's vector moved by what the text change means to the model, then put back on
  the unit sphere: v = normalise(v_source + w * sum(e(new) - e(old))), where e(x) is the model's own
  embedding of each replaced detail ("Omar Costa", "every weekend") and w one weight for the corpus,
  fitted so that on a sample of derived texts that the model DID embed (cached), the derived vectors
  are as close as they can be to the model's embeddings of those texts.

Why this rule. A derived memory should sit where the model would put its text: near the memories
that share its new details, not beside its source. Measured on a 2,000-memory base with 1,000
derived texts embedded by the model: the model's embedding of a derived text has cosine 0.50 to its
source and is nearest to its source only 5% of the time (it lands among the memories about the new
person). Perturbing the source with noise of the corpus's own covariance, scaled to the same 0.50,
gives vectors with cosine 0.26 to the model's embeddings of the same texts, still nearest to their
source 53% of the time; the detail arithmetic gives cosine 0.90 to the model's embeddings (w = 0.6),
0.53 to the source, nearest to it 7% of the time. Every run reports these figures for its own
sample (``report``), and the benchmark checks the result where it matters: on the derived corpus
the HNSW arm's top 10 must find >= 0.95 of the exact top 10 (bench/run.py). Deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import corpus

SEED = 1729
CALIBRATION_SAMPLE = 1000

_SURNAMES = [f"{a}{b}" for a in ("Sil", "Cos", "Mar", "Fer", "Lop", "Alv", "Rod", "Per")
             for b in ("va", "ta", "ez", "es")]
_PERSON = re.compile(r"\b(?:{}) (?:{})\b".format("|".join(corpus.FIRST), "|".join(_SURNAMES)))


def _alternation(words: list[str]) -> re.Pattern:
    # longest first, so that "on Tuesday evenings" wins over anything shorter
    return re.compile(r"\b(?:{})\b".format("|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))))


DETAILS = {
    "place": (_alternation(corpus.PLACES), corpus.PLACES),
    "thing": (_alternation(corpus.THINGS), sorted(set(corpus.THINGS))),
    "food": (_alternation(corpus.FOODS), corpus.FOODS),
    "job": (_alternation(corpus.JOBS), corpus.JOBS),
    "time": (_alternation(corpus.TIMES), corpus.TIMES),
}

Substitutions = list[tuple[str, str]]  # (old, new) details of one derived text


def people(corpus_size: int) -> list[str]:
    """The person pool of a corpus of this size: the one corpus.queries() names people from."""
    return corpus._people(random.Random(7), max(50, corpus_size // 200))


def derive_text(text: str, rng: random.Random, pool: list[str]) -> tuple[str, Substitutions]:
    """The text with its first person replaced and one further detail of another kind replaced,
    and the (old, new) pairs replaced."""
    done: Substitutions = []
    people_found = list(_PERSON.finditer(text))
    if people_found:
        first = people_found[0]
        new = _other(first.group(0), pool, rng)
        text = text[:first.start()] + new + text[first.end():]
        done.append((first.group(0), new))
    kinds = [k for k, (pattern, _) in DETAILS.items() if pattern.search(text)]
    if len(people_found) > 1:
        kinds.append("person")
    if kinds:
        kind = rng.choice(kinds)
        if kind == "person":
            found = list(_PERSON.finditer(text))[-1]
            new = _other(found.group(0), pool, rng)
        else:
            pattern, choices = DETAILS[kind]
            found = rng.choice(list(pattern.finditer(text)))
            new = _other(found.group(0), choices, rng)
        text = text[:found.start()] + new + text[found.end():]
        done.append((found.group(0), new))
    return text, [(old, new) for old, new in done if old != new]


def _other(current: str, choices: list[str], rng: random.Random) -> str:
    for _ in range(8):
        pick = rng.choice(choices)
        if pick != current:
            return pick
    return current


def calibration_texts(base_texts: list[str], corpus_size: int, sample: int = CALIBRATION_SAMPLE,
                      seed: int = SEED) -> tuple[np.ndarray, list[str], list[Substitutions]]:
    """Sources, derived texts and their substitutions for the weight's fit (a random stream of its own)."""
    rng = random.Random(seed * 31 + 1)
    pool = people(corpus_size)
    sources = np.array(sorted(rng.sample(range(len(base_texts)), min(sample, len(base_texts)))))
    derived = [derive_text(base_texts[s], rng, pool) for s in sources]
    return sources, [t for t, _ in derived], [s for _, s in derived]


class _Deltas:
    """Each derived text's substitutions as indexes into one list of detail strings (two at most)."""

    def __init__(self):
        self.strings: list[str] = []
        self._index: dict[str, int] = {}
        self.pairs: list[tuple[int, int, int, int]] = []

    def add(self, subs: Substitutions) -> None:
        ids = [(self._id(old), self._id(new)) for old, new in subs[:2]] + [(-1, -1)] * (2 - min(2, len(subs)))
        self.pairs.append((ids[0][0], ids[0][1], ids[1][0], ids[1][1]))

    def _id(self, s: str) -> int:
        if s not in self._index:
            self._index[s] = len(self.strings)
            self.strings.append(s)
        return self._index[s]

    def vectors(self, details: np.ndarray, start: int = 0, stop: int | None = None) -> np.ndarray:
        """sum(e(new) - e(old)) for the derived texts start..stop."""
        p = np.array(self.pairs[start:stop], dtype=np.int64).reshape(-1, 4)
        padded = np.vstack([details, np.zeros((1, details.shape[1]), dtype=details.dtype)])  # index -1: none
        return padded[p[:, 1]] - padded[p[:, 0]] + padded[p[:, 3]] - padded[p[:, 2]]


def moved(sources: np.ndarray, deltas: np.ndarray, weight: float) -> np.ndarray:
    """normalise(source + weight * delta), row by row."""
    out = sources + np.float32(weight) * deltas
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def fit_weight(sources: np.ndarray, deltas: np.ndarray, truth: np.ndarray) -> float:
    """The weight maximising the mean cosine between moved vectors and the model's own (golden section)."""
    def score(w: float) -> float:
        return float(np.mean(np.sum(moved(sources, deltas, w) * truth, axis=1)))

    lo, hi = 0.0, 3.0
    ratio = (5 ** 0.5 - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = score(a), score(b)
    for _ in range(40):
        if fa < fb:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = score(b)
        else:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = score(a)
    return (lo + hi) / 2


def nearest_is_source(vectors: np.ndarray, base: np.ndarray, sources: np.ndarray) -> float:
    """Share of vectors whose nearest base vector (by cosine) is their own source."""
    hits = 0
    for start in range(0, len(vectors), 256):
        scores = vectors[start:start + 256] @ base.T
        hits += int(np.sum(np.argmax(scores, axis=1) == sources[start:start + 256]))
    return hits / len(vectors)


def _neighbourhood(vectors: np.ndarray, base: np.ndarray) -> tuple[float, float]:
    """Mean cosine of each vector's nearest base vector, and of its ten nearest."""
    top1, top10 = [], []
    for start in range(0, len(vectors), 256):
        scores = np.sort(vectors[start:start + 256] @ base.T, axis=1)
        top1.append(scores[:, -1])
        top10.append(scores[:, -10:].mean(axis=1))
    return float(np.concatenate(top1).mean()), float(np.concatenate(top10).mean())


@dataclass
class Derived:
    texts: list[str]
    vectors: np.ndarray          # (n, d) float32 unit rows; the first len(base) are the model's own
    sources: np.ndarray          # (n,) each memory's source in the base (itself for the base)
    report: dict


Embed = Callable[[str, list[str]], np.ndarray]  # (kind, texts) -> the model's unit vectors


def extend(base_texts: list[str], base_vectors: np.ndarray, n: int, embed: Embed, seed: int = SEED) -> Derived:
    """n memories: the base ones, then derived ones cycling over the base as sources. embed(kind, texts)
    gives the model's vectors (bench/run.py caches them): for the calibration texts and the details."""
    base_n = len(base_texts)
    if n <= base_n:
        raise ValueError(f"a derived corpus must be larger than its base ({n} <= {base_n})")
    cal_sources, cal_texts, cal_subs = calibration_texts(base_texts, n, seed=seed)
    pool = people(n)
    rng = random.Random(seed)
    sources = np.concatenate([np.arange(base_n), np.arange(n - base_n) % base_n])
    texts = list(base_texts)
    deltas = _Deltas()
    for s in cal_subs:
        deltas.add(s)
    for s in sources[base_n:]:
        text, subs = derive_text(base_texts[s], rng, pool)
        texts.append(text)
        deltas.add(subs)
    details = embed("details", deltas.strings)
    cal_truth = embed("calibration", cal_texts)

    cal_deltas = deltas.vectors(details, 0, len(cal_sources))
    cal_base = base_vectors[cal_sources]
    weight = fit_weight(cal_base, cal_deltas, cal_truth)
    cal_moved = moved(cal_base, cal_deltas, weight)

    vectors = np.empty((n, base_vectors.shape[1]), dtype=np.float32)
    vectors[:base_n] = base_vectors
    offset = len(cal_sources) - base_n  # derived text i sits at deltas row i + offset
    for start in range(base_n, n, 65536):
        stop = min(n, start + 65536)
        vectors[start:stop] = moved(base_vectors[sources[start:stop]],
                                    deltas.vectors(details, start + offset, stop + offset), weight)

    model_top1, model_top10 = _neighbourhood(cal_truth, base_vectors)
    derived_top1, derived_top10 = _neighbourhood(cal_moved, base_vectors)
    report = {
        "rule": "text: first person and one further detail replaced; vector: normalise(source + w * sum of "
                "the model's embeddings of new minus old details), w fitted on model embeddings of derived texts",
        "base": base_n, "derived": n - base_n, "weight": weight, "calibration_sample": len(cal_sources),
        "detail_strings": len(deltas.strings),
        "cosine_to_model": float(np.mean(np.sum(cal_moved * cal_truth, axis=1))),
        "cosine_to_source_model": float(np.mean(np.sum(cal_truth * cal_base, axis=1))),
        "cosine_to_source_derived": float(np.mean(np.sum(cal_moved * cal_base, axis=1))),
        "nearest_base_is_source_model": nearest_is_source(cal_truth, base_vectors, cal_sources),
        "nearest_base_is_source_derived": nearest_is_source(cal_moved, base_vectors, cal_sources),
        "nearest_base_cosine_model": model_top1, "nearest_base_cosine_derived": derived_top1,
        "ten_nearest_cosine_model": model_top10, "ten_nearest_cosine_derived": derived_top10,
    }
    return Derived(texts, vectors, sources, report)
