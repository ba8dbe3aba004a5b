"""Answers spread over sessions (setting recall_session_spread, plpgsql/recall/spread.sql): the rows a recall
returns do not all come from one conversation session while another session's row scores close."""

import pytest

LAKE = [  # one session that says "painting" again and again: each turn outranks the studio's
    "Painting the lake at dawn, painting the reeds, painting the fog.",
    "More painting at the lake: painting the boats and painting the pier.",
    "Painting again by the lake; painting is all I did, painting all day.",
    "Painting the lake house, then painting the dock, painting till dusk.",
    "Painting the swans on the lake, painting their wake, painting the ripples.",
    "Painting the jetty at the lake and painting the lake's old boathouse, painting.",
]
STUDIO = "At the studio my painting of a sunflower won the town's spring prize for amateurs this year."


def spread(conninfo, on: bool) -> None:
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        admin.execute("select acme.set_setting('recall_session_spread', %s::jsonb)", ("true" if on else "false",))


def remembered(acme, session: int, bodies: list[str]) -> list[int]:
    added = acme.add_messages(session, [{"actor": "ana", "body": b} for b in bodies])
    return [acme.remember(b, evidence=[a.offset], purposes=["converse"],
                          audience="bot").memory_id for a, b in zip(added, bodies, strict=True)]


@pytest.fixture
def two_sessions(acme):
    lake, studio = acme.create_session("the lake trip"), acme.create_session("the studio")
    for s in (lake, studio):
        acme.add_session_peers(s, ["ana", "bot"])
    return remembered(acme, lake, LAKE), remembered(acme, studio, [STUDIO])[0]


def test_one_session_no_longer_fills_the_list_when_another_scores_close(acme, conninfo, two_sessions):
    lake, studio = two_sessions
    off = [i.memory_id for i in acme.recall("painting", mode="lexical", limit=5).items]
    assert set(off) <= set(lake) and len(off) == 5, "the lake session fills the list by default"
    spread(conninfo, True)
    on = [i.memory_id for i in acme.recall("painting", mode="lexical", limit=5).items]
    assert studio in on and len(on) == 5
    assert len([m for m in on if m in lake]) == 4, "the lake's rows still fill what the window has no other for"
    # the session's best two stay: a share of 30% of 5 rows is 2
    assert set(off[:2]) <= set(on)
    all_rows = [i.memory_id for i in acme.recall("painting", mode="lexical", limit=10).items]
    assert sorted(all_rows) == sorted([*lake, studio]), "nothing is dropped when every row fits"


def test_the_share_moves_rows_back_not_out_and_turns_without_a_session_have_none(acme, conninfo, two_sessions):
    lake, studio = two_sessions
    notes = []
    for n in range(3):  # turns outside any session, each remembered
        said = f"A note on painting number {n}: painting, painting and painting again."
        offset = acme.append(said, role="user", actor="ana")
        notes.append(acme.remember(said, evidence=[offset], purposes=["converse"]).memory_id)
    spread(conninfo, True)
    got = acme.recall("painting", mode="lexical", limit=5)
    ids = [i.memory_id for i in got.items]
    # of the lake, at most 2 while notes and the studio wait in the window; notes are never moved back
    assert len([m for m in ids if m in lake]) == 2, ids
    assert set(notes) <= set(ids) and len(ids) == 5
    assert got.meta.fused_count == len(lake) + len(notes) + 1


def test_the_spread_keeps_to_what_the_principal_may_see(acme, conninfo, two_sessions):
    lake, studio = two_sessions
    spread(conninfo, True)
    # ben was in neither session: the turns and the memories derived from them are not his to see
    assert acme.recall("painting", mode="lexical", limit=5, principal="ben").items == []


def second_round(conninfo, on: bool) -> None:
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        admin.execute("select acme.set_setting('recall_second_round', %s::jsonb)", ("true" if on else "false",))


POTTERY = [  # as many turns hold "pottery" as hold "painting", each once in a longer sentence: they rank lower
    f"Ana: on {day} I went to the pottery class at the community centre with my neighbour and her two kids."
    for day in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
]


@pytest.fixture
def pottery(acme):
    """The pottery turns, outside any session: the whole scope sees them, ben too."""
    ids = []
    for said in POTTERY:
        offset = acme.append(said, role="user", actor="ana")
        ids.append(acme.remember(said, evidence=[offset], purposes=["converse"]).memory_id)
    return ids


def test_a_second_round_finds_the_piece_that_holds_only_the_words_the_first_hits_lack(acme, conninfo, two_sessions,
                                                                                      pottery):
    """'painting' fills the first rows; the pottery turns hold only the word none of them holds."""
    lake, studio = two_sessions
    off = [i.memory_id for i in acme.recall("painting pottery", mode="lexical", limit=4).items]
    assert set(off) <= set(lake), "the first round ranks the painting turns above every pottery turn"
    second_round(conninfo, True)
    on = [i.memory_id for i in acme.recall("painting pottery", mode="lexical", limit=4).items]
    assert len(on) == 4 and set(on) & set(pottery) and set(on) & set(lake), on
    assert off[0] in on, "the first round's best stays"
    # every kept term held by the first rows: nothing to search again, the rows are the first round's
    second_round(conninfo, False)
    same = [i.memory_id for i in acme.recall("painting lake", mode="lexical", limit=4).items]
    second_round(conninfo, True)
    assert [i.memory_id for i in acme.recall("painting lake", mode="lexical", limit=4).items] == same


def test_the_second_round_keeps_to_what_the_principal_may_see(acme, conninfo, two_sessions, pottery):
    """Ben may see the scope's turns but not the sessions': the second round finds for him only what he may see."""
    second_round(conninfo, True)
    got = [i.memory_id for i in acme.recall("painting pottery", mode="lexical", limit=4, principal="ben").items]
    assert len(got) == 4 and set(got) <= set(pottery)


def neighbours(conninfo, on: bool) -> None:
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        admin.execute("select acme.set_setting('recall_neighbour_turns', %s::jsonb)", ("true" if on else "false",))


@pytest.fixture
def gallery(acme):
    """A session where the answer is the turn after the hit and the turn before it, and twelve other turns that
    match the question's commonest word."""
    fillers = []
    for n in range(12):
        said = f"Studio note {n}: the studio was busy with visitors."
        offset = acme.append(said, role="user", actor="ben")
        fillers.append(acme.remember(said, evidence=[offset], purposes=["converse"]).memory_id)
    s = acme.create_session("the gallery")
    acme.add_session_peers(s, ["ana", "bot"])
    before, hit, after = remembered(acme, s, ["Ben asked me about the gallery opening on Sunday.",
                                              "I finished the studio piece yesterday, at last.",
                                              "It is a large canvas of sunflowers for my mother."])
    return fillers, before, hit, after


def test_the_turns_next_to_a_hit_come_in_below_the_rows_that_outscore_them(acme, conninfo, gallery):
    fillers, before, hit, after = gallery
    question = "studio yesterday"  # two terms: below prune_min_terms, the common one is kept
    off = [i.memory_id for i in acme.recall(question, mode="lexical", limit=10).items]
    assert off[0] == hit and before not in off and after not in off and len(off) == 10
    neighbours(conninfo, True)
    on = [i.memory_id for i in acme.recall(question, mode="lexical", limit=10).items]
    assert set(on) - set(off) == {before, after}, on
    assert on[0] == hit and set(off[:7]) <= set(on), "no row the arms ranked in the first seven is pushed out"
    # the first three of four: with rrf_k 60 a neighbour counts as a row ranked 8th; four rows leave it out
    assert [i.memory_id for i in acme.recall(question, mode="lexical", limit=4).items] == off[:4]


def test_a_neighbour_the_principal_may_not_see_is_not_brought(acme, conninfo, gallery):
    fillers, before, hit, after = gallery
    neighbours(conninfo, True)
    got = [i.memory_id for i in acme.recall("studio yesterday", mode="lexical", limit=10,
                                            principal="ben").items]
    assert set(got) <= set(fillers) and len(got) == 10
