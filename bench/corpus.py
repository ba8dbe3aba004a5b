"""A synthetic but realistic memory corpus and query set, deterministic for a seed.

Memories are short statements about people, places and habits, drawn from
vocabularies sized so that some words are very common (names, verbs) and most
are rare, as in real conversation memory. Queries mix two to six terms, so the
lexical arm's pruning is exercised.
"""

from __future__ import annotations

import random

FIRST = ["Ana", "Ben", "Chloe", "Diego", "Elif", "Farah", "Gus", "Hana", "Ivan", "Jon", "Kemi", "Liam", "Mei",
         "Nora", "Omar", "Pia", "Quinn", "Rui", "Sara", "Tom", "Uma", "Vik", "Wen", "Xavi", "Yara", "Zoe"]
PLACES = ["Lisbon", "Porto", "Berlin", "Madrid", "Oslo", "Kyoto", "Lima", "Accra", "Dublin", "Quebec", "Seville",
          "Bergen", "Nairobi", "Hanoi", "Krakow", "Tallinn", "Valencia", "Malmo", "Leeds", "Cork"]
THINGS = """hiking climbing jazz fado opera sourdough ramen tapas curry sushi chess tennis football rowing
cycling pottery painting knitting gardening birdwatching photography astronomy poetry salsa tango yoga
running swimming surfing skiing baking fishing sailing camping origami calligraphy woodworking beekeeping
podcasts crosswords sudoku chess poker trivia karaoke cinema theatre museums vinyl synthesizers drums
violin cello guitar piano harp trumpet ukulele flute saxophone accordion mandolin banjo""".split()
FOODS = """lentils chickpeas tofu tempeh quinoa oats almonds walnuts peanuts cashews mango papaya kiwi figs dates
olives avocado spinach kale broccoli mushrooms aubergine peppers tomatoes lemons limes oranges cherries
salmon sardines cod prawns mussels chicken lamb beef pork duck eggs cheese yoghurt butter honey chocolate""".split()
JOBS = """nurse carpenter teacher lawyer architect baker chef pilot engineer designer journalist plumber farmer
librarian pharmacist dentist translator electrician musician florist mechanic accountant surgeon""".split()
TIMES = ["on Mondays", "on Tuesday evenings", "every weekend", "in the summer", "before work", "after dinner",
         "twice a month", "on Sunday mornings", "during the holidays", "every spring"]
TEMPLATES = [
    "{p} likes {t} {w}",
    "{p} lives in {c} near the old harbour",
    "{p} is allergic to {f} and avoids it",
    "{p} works as a {j} in {c}",
    "{p} goes {t} with {q} {w}",
    "{p} prefers {f} over {g} for breakfast",
    "{p} visited {c} to see a {t} festival",
    "{p}'s favourite food is {f} with {g}",
    "{p} wants to learn {t} in {c}",
    "{p} and {q} met at a {t} class in {c}",
    "{p} is saving money for a trip to {c}",
    "{p} bought a second-hand {t} book about {f}",
]
QUERY_TEMPLATES = [
    "what does {p} like", "where does {p} live", "what is {p} allergic to", "who works as a {j}",
    "{t} in {c}", "{p} {t} {w}", "who likes {t} and {f}", "favourite food of {p}", "{p} trip to {c}",
    "who met {q} at a {t} class", "what does {p} eat for breakfast with {f} and {g}",
    "does anyone in {c} do {t} {w}",
]


def _people(rng: random.Random, n_people: int) -> list[str]:
    surnames = [f"{a}{b}" for a in ("Sil", "Cos", "Mar", "Fer", "Lop", "Alv", "Rod", "Per")
                for b in ("va", "ta", "ez", "es")]
    return [f"{rng.choice(FIRST)} {rng.choice(surnames)}" for _ in range(n_people)]


def _fill(template: str, rng: random.Random, people: list[str]) -> str:
    return template.format(p=rng.choice(people), q=rng.choice(people), c=rng.choice(PLACES), t=rng.choice(THINGS),
                           f=rng.choice(FOODS), g=rng.choice(FOODS), j=rng.choice(JOBS), w=rng.choice(TIMES))


def memories(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    people = _people(rng, max(50, n // 200))
    return [_fill(rng.choice(TEMPLATES), rng, people) for _ in range(n)]


def queries(n: int, corpus_size: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    people = _people(random.Random(7), max(50, corpus_size // 200))
    return [_fill(rng.choice(QUERY_TEMPLATES), rng, people) for _ in range(n)]
