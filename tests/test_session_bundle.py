"""The session-start bundle: recent, pinned and top entities, through the eligibility rule."""

from test_recall import put


def test_bundle_holds_recent_pinned_and_entities_the_principal_may_see(acme):
    rule = put(acme, "Always answer Ana in Portuguese", about=["Ana"])
    acme.pin(rule)
    notes = [put(acme, f"Ana note {i}", about=["Ana", "Lisbon"] if i % 2 else ["Ana"]) for i in range(4)]
    private = put(acme, "Ben's private note", audience="ben", about=["Ben"])
    bundle = acme.session_bundle(principal="ana", recent=3)
    assert [p.id for p in bundle.pinned] == [rule]
    assert [r.id for r in bundle.recent] == list(reversed(notes))[:3]
    assert [(e.entity, e.memories) for e in bundle.entities] == [("Ana", 5), ("Lisbon", 2)]
    assert bundle.working_representation is None
    ben = acme.session_bundle(principal="ben", recent=10)
    assert private in [r.id for r in ben.recent]
    assert ("Ben", 1) in [(e.entity, e.memories) for e in ben.entities]
    acme.pin(rule, False)
    assert acme.session_bundle(principal="ana").pinned == []
