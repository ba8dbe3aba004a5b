"""A large corpus from a smaller embedded one: 1M memories for the price of 100k model embeddings.

Embedding 1M texts with the model takes about an hour of both cores here; the recall benchmark
needs the vectors, not the model. So beyond ``--base`` memories (default 100k, embedded once and
cached under bench/cache/) every further memory is DERIVED from a real one:

* Text: the source memory with its first person replaced by another person of the larger corpus's
  pool (the pool ``corpus.queries`` draws from at that size, so queries name people who exist) and
  one further detail replaced by another of its kind: a place, a hobby, a food, a job, a time, or
  the second person. "Ana Silva likes jazz on Mondays" becomes "Omar Costa likes jazz every
  weekend": the same kind of statement about someone else, as a real store of that size holds.
* Vector: the source's vector plus Gaussian noise drawn with the CORPUS'S OWN COVARIANCE (the
  covariance of the base vectors), renormalised to unit length as the model's output is. The noise
  moves a vector along the directions in which real memories differ from one another, in
  proportion to how much they differ there, so a derived vector stays on the region of the sphere
  the model actually uses; isotropic noise would push it off into directions no real memory
  occupies, which makes nearest-neighbour search both easier to fool and unrealistic.
* Scale: calibrated, not guessed. A cached sample of derived TEXTS is embedded with the real model,
  and the noise scale is the one at which the mean cosine between a derived vector and its source
  equals the mean cosine the model gives between a detail-changed text and its source.

The report carries the calibration (both mean cosines, and how often a derived memory's nearest
base memory is its own source, with the model and with the noise), and the benchmark checks the
result where it matters: on the derived corpus, the HNSW arm's top 10 must find >= 0.95 of the
exact top 10 (``bench/run.py``). The derivation is deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np

from . import corpus

SEED = 1729
CALIBRATION_SAMPLE = 1000

# One alternation per kind of detail; longest first so "on Tuesday evenings" wins over shorter times.
_SURNAMES = [f"{a}{b}" for a in ("Sil", "Cos", "Mar", "Fer", "Lop", "Alv", "Rod", "Per") for b in ("va", "ta", "ez", "es")]
_PERSON = re.compile(r"\b(?:%s) (?:%s)\b" % ("|".join(corpus.FIRST), "|".join(_SURNAMES)))


def _alternation(words: list[str]) -> re.Pattern:
    return re.compile(r"\b(?:%s)\b" % "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True)))


DETAILS = {
    "place": (_alternation(corpus.PLACES), corpus.PLACES),
    "thing": (_alternation(corpus.THINGS), sorted(set(corpus.THINGS))),
    "food": (_alternation(corpus.FOODS), corpus.FOODS),
    "job": (_alternation(corpus.JOBS), corpus.JOBS),
    "time": (_alternation(corpus.TIMES), corpus.TIMES),
}


def people(corpus_size: int) -> list[str]:
    """The person pool of a corpus of this size: the one corpus.queries() names people from."""
    return corpus._people(random.Random(7), max(50, corpus_size // 200))


def derive_text(text: str, rng: random.Random, pool: list[str]) -> str:
    """The text with its first person replaced, and one further detail of another kind replaced."""
    people_found = list(_PERSON.finditer(text))
    if people_found:
        first = people_found[0]
        text = text[:first.start()] + _other(first.group(0), pool, rng) + text[first.end():]
    kinds = [k for k, (pattern, _) in DETAILS.items() if pattern.search(text)]
    if len(people_found) > 1:
        kinds.append("person")
    if kinds:
        kind = rng.choice(kinds)
        if kind == "person":
            second = list(_PERSON.finditer(text))[-1]
            text = text[:second.start()] + _other(second.group(0), pool, rng) + text[second.end():]
        else:
            pattern, choices = DETAILS[kind]
            found = rng.choice(list(pattern.finditer(text)))
            text = text[:found.start()] + _other(found.group(0), choices, rng) + text[found.end():]
    return text


def _other(current: str, choices: list[str], rng: random.Random) -> str:
    for _ in range(8):
        pick = rng.choice(choices)
        if pick != current:
            return pick
    return current


@dataclass
class NoiseModel:
    """Gaussian noise with the covariance of a set of unit vectors: sample = z @ basis."""

    basis: np.ndarray  # (d, d): rows are principal directions scaled by their standard deviations

    @classmethod
    def fit(cls, vectors: np.ndarray) -> "NoiseModel":
        sample = vectors.astype(np.float64)
        centred = sample - sample.mean(axis=0)
        covariance = centred.T @ centred / max(1, len(sample) - 1)
        values, vectors_ = np.linalg.eigh(covariance)
        values = np.clip(values, 0, None)
        return cls((vectors_ * np.sqrt(values)).T.astype(np.float32))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal((n, self.basis.shape[0]), dtype=np.float32) @ self.basis


def perturb(sources: np.ndarray, noise: np.ndarray, scale: float) -> np.ndarray:
    """Each source vector moved by scale x its noise row, back on the unit sphere."""
    moved = sources + np.float32(scale) * noise
    return (moved / np.linalg.norm(moved, axis=1, keepdims=True)).astype(np.float32)


def calibrate_scale(sources: np.ndarray, noise: np.ndarray, target_cosine: float) -> float:
    """The scale at which the mean cosine between perturbed vectors and their sources is target_cosine."""
    def mean_cosine(scale: float) -> float:
        return float(np.mean(np.sum(perturb(sources, noise, scale) * sources, axis=1)))

    low, high = 0.0, 1.0
    while mean_cosine(high) > target_cosine and high < 1e4:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        if mean_cosine(middle) > target_cosine:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def nearest_is_source(derived: np.ndarray, base: np.ndarray, sources: np.ndarray) -> float:
    """Share of derived vectors whose nearest base vector (by cosine) is their own source."""
    hits = 0
    for start in range(0, len(derived), 256):
        scores = derived[start:start + 256] @ base.T
        hits += int(np.sum(np.argmax(scores, axis=1) == sources[start:start + 256]))
    return hits / len(derived)


def calibration_texts(base_texts: list[str], corpus_size: int, sample: int = CALIBRATION_SAMPLE,
                      seed: int = SEED) -> tuple[np.ndarray, list[str]]:
    """The sources and derived texts whose real embeddings calibrate the noise (their own random stream)."""
    rng = random.Random(seed * 31 + 1)
    pool = people(corpus_size)
    sources = np.array(sorted(rng.sample(range(len(base_texts)), min(sample, len(base_texts)))))
    return sources, [derive_text(base_texts[s], rng, pool) for s in sources]


@dataclass
class Derived:
    texts: list[str]
    vectors: np.ndarray          # (n, d) float32, unit rows; the first len(base) are the real ones
    sources: np.ndarray          # (n,) index of each memory's source in the base (itself for the base)
    report: dict


def extend(base_texts: list[str], base_vectors: np.ndarray, n: int, calibration: tuple[np.ndarray, np.ndarray],
           seed: int = SEED) -> Derived:
    """n memories: the base ones, then derived ones cycling over the base as sources.

    calibration is (sources, real embeddings of their derived texts), from calibration_texts()."""
    base_n = len(base_texts)
    if n <= base_n:
        raise ValueError(f"a derived corpus must be larger than its base ({n} <= {base_n})")
    noise_model = NoiseModel.fit(base_vectors)
    cal_sources, cal_vectors = calibration
    real_cos = np.sum(cal_vectors * base_vectors[cal_sources], axis=1)
    cal_noise = noise_model.sample(len(cal_sources), np.random.default_rng(seed * 31 + 2))
    scale = calibrate_scale(base_vectors[cal_sources], cal_noise, float(real_cos.mean()))
    cal_perturbed = perturb(base_vectors[cal_sources], cal_noise, scale)
    perturbed_cos = np.sum(cal_perturbed * base_vectors[cal_sources], axis=1)

    extra = n - base_n
    sources = np.concatenate([np.arange(base_n), np.arange(extra) % base_n])
    pool = people(n)
    rng = random.Random(seed)
    texts = list(base_texts) + [derive_text(base_texts[s], rng, pool) for s in sources[base_n:]]
    vectors = np.empty((n, base_vectors.shape[1]), dtype=np.float32)
    vectors[:base_n] = base_vectors
    noise_rng = np.random.default_rng(seed)
    for start in range(base_n, n, 65536):
        stop = min(n, start + 65536)
        vectors[start:stop] = perturb(base_vectors[sources[start:stop]], noise_model.sample(stop - start, noise_rng),
                                      scale)
    report = {
        "rule": "text: first person and one further detail replaced; vector: source + covariance-shaped "
                "Gaussian noise, renormalised, scale calibrated on real embeddings of derived texts",
        "base": base_n, "derived": extra, "noise_scale": scale, "calibration_sample": len(cal_sources),
        "cosine_to_source_model_mean": float(real_cos.mean()),
        "cosine_to_source_model_p10_p90": [float(np.percentile(real_cos, 10)), float(np.percentile(real_cos, 90))],
        "cosine_to_source_noise_mean": float(perturbed_cos.mean()),
        "cosine_to_source_noise_p10_p90": [float(np.percentile(perturbed_cos, 10)),
                                           float(np.percentile(perturbed_cos, 90))],
        "nearest_base_is_source_model": nearest_is_source(cal_vectors, base_vectors, cal_sources),
        "nearest_base_is_source_noise": nearest_is_source(cal_perturbed, base_vectors, cal_sources),
    }
    return Derived(texts, vectors, sources, report)
