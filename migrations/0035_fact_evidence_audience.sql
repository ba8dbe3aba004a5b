-- A fact is never more public than the turns it cites (issue #51), the rule
-- memories follow since 0024: assert_fact() refuses (PR116) a fact whose
-- audience admits a peer that a cited turn does not, unless the call widens
-- it on purpose and says why; the reason is kept here. A widened fact's
-- quotes stay withheld from whoever may not see their turn (facts_as_of,
-- resolve_citation). A turn the asserting principal may not see cannot be
-- cited at all: it answers as missing (PR109), as for memories.
alter table __tenant__.fact add column widening_reason text
    check (widening_reason is null or char_length(widening_reason) between 1 and 2000);
comment on column __tenant__.fact.widening_reason is
    'Why this fact may be seen by more peers than a turn it cites (NULL: it is not).';

-- Facts written before this rule that reach more peers than a turn they
-- cite are narrowed, not flagged: until someone widens them on purpose, they
-- are seen by the peer who asserted them only. That peer wrote them, so no
-- one who could read them loses a fact they stated; every other peer stops
-- seeing words taken from a turn they were not in. A fact's history refuses
-- updates (fact_history_guard); this one-off change of who may see it goes
-- around the table's triggers (on a fresh tenant there are no facts).
alter table __tenant__.fact disable trigger user;
update __tenant__.fact f
   set audience_peer_id = f.asserted_by
 where f.audience_peer_id is distinct from f.asserted_by
   and exists (select 1
                 from __tenant__.fact_evidence x
                 join __tenant__.observation o on o.id = x.observation_id
                where x.fact_id = f.id
                  and o.audience is not null
                  and (f.audience_peer_id is null or not o.audience @> array[f.audience_peer_id]));
alter table __tenant__.fact enable trigger user;
