-- Who may see each turn of the log (issue #27). Until now the audience lived
-- on memories only, and message search, quotes, passages and the graph
-- handed anyone authorised for the scope the words of a session they were
-- not in. A turn's audience is decided when it is appended and never changes
-- (the log is append-only): NULL is everyone authorised for the scope (a turn
-- appended outside any session); otherwise the ids of the peers who may see
-- it, sorted: by default the peers of its session at that moment and its
-- sender, or a narrower set the caller named (plpgsql/append_observation.sql).
-- plpgsql/eligibility.sql holds the one rule that reads it, for turns and
-- memories alike.

alter table __tenant__.observation add column audience bigint[];
alter table __tenant__.observation add constraint observation_audience_is_a_set check (
    audience is null or (cardinality(audience) >= 1 and array_position(audience, null) is null));
comment on column __tenant__.observation.audience is
    'The peers who may see this turn (sorted ids), decided at append; NULL: everyone authorised for the scope.';

-- Turns already logged in a session: every peer that is or was in it, and the
-- sender. Who was there at each moment is not recorded (a peer who rejoins
-- gets a new joined_at), so nobody who may read a turn today loses it; turns
-- outside sessions stay the scope's. The log refuses updates; this one-off
-- data change, adding what the new column holds, goes around its trigger
-- (on a fresh tenant the trigger does not exist yet: no user trigger of the
-- table fires on UPDATE but that one).
alter table __tenant__.observation disable trigger user;
update __tenant__.observation o
   set audience = array(select x.peer_id
                          from (select sp.peer_id from __tenant__.session_peer sp where sp.session_id = o.session_id
                                union
                                select o.actor_id) x
                         order by x.peer_id)
 where o.session_id is not null;
alter table __tenant__.observation enable trigger user;

-- Passages copy their observation's audience, as they copy its session and
-- sender, so that message search filters inside each scope's partition
-- before anything is ranked.
alter table __tenant__.passage add column audience bigint[];
update __tenant__.passage p set audience = o.audience
  from __tenant__.observation o
 where o.id = p.observation_id and o.audience is not null;
-- The two halves of the rule as index conditions ("no audience", "the
-- principal is in it"), for the semantic arm's count of the passages a
-- principal may see and its exact scan when they are few.
create index passage_audience on __tenant__.passage using gin (audience);
create index passage_public on __tenant__.passage (scope) where audience is null;

-- A memory may reach more peers than a turn it cites only when the call that
-- wrote it said why; the reason is kept on the row and shown in provenance.
alter table __tenant__.memory add column widening_reason text
    check (widening_reason is null or char_length(widening_reason) between 1 and 2000);
comment on column __tenant__.memory.widening_reason is
    'Why this memory may be seen by more peers than a turn it cites (NULL: it is not).';
