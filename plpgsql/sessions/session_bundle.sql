-- The session-start bundle: what an agent starts a conversation with before
-- it recalls anything (recent memories, pinned procedural notes, the entities
-- most written about), all through the same eligibility rule, each memory
-- with its provenance as read and recall give it.

-- The bundle's memories in the order given, each with its provenance as read
-- and recall give it; a recent one with when it last changed.
create or replace function __tenant__._bundle_memories(p_ids bigint[], p_principal_id bigint, p_scopes text[],
                                                      p_with_time boolean)
returns __tenant__.bundle_memory[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return (select coalesce(array_agg(row(m.id, m.kind, m.title, m.body, m.scope,
                                  case when p_with_time then m.updated_at end, pv.provenance)::bundle_memory order by k.ord), '{}')
      from unnest(p_ids) with ordinality as k(id, ord)
      join memory m on m.id = k.id
      left join _provenance_of(p_ids, p_principal_id, p_scopes) pv on pv.memory_id = m.id);
end
$$;
comment on function __tenant__._bundle_memories(bigint[], bigint, text[], boolean) is
    'Internal: the session-start bundle''s memories, in order, with their provenance.';

create or replace function __tenant__.session_bundle(
    p_principal  text,
    p_scopes     text[],
    p_purpose    text default 'converse',
    p_recent     integer default 10,
    p_entities   integer default 5,
    p_session    bigint default null     -- a session the principal is in: adds its working representation
)
returns __tenant__.session_bundle
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_recent bigint[];
    v_pinned bigint[];
    v_bundle session_bundle;
begin
    perform _check_scopes(p_scopes);
    perform _check_purpose(p_purpose);
    if p_recent is null or p_recent not between 0 and 100 or p_entities is null or p_entities not between 0 and 100 then
        perform _fail('PR150', 'p_recent and p_entities must be between 0 and 100');
    end if;
    v_recent := array(select e.id from memory e
                       where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                              v_principal, p_scopes, p_purpose, false, null) and not e.pinned
                       order by e.updated_at desc, e.id desc limit p_recent);
    v_pinned := array(select e.id from memory e
                       where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                              v_principal, p_scopes, p_purpose, false, null) and e.pinned order by e.id);
    v_bundle.recent := _bundle_memories(v_recent, v_principal, p_scopes, true);
    v_bundle.pinned := _bundle_memories(v_pinned, v_principal, p_scopes, false);
    v_bundle.entities := array(
        select row(en.name, en.entity_type, en.scope, count(*))::bundle_entity
          from memory e
          join memory_link l on l.memory_id = e.id and l.link_type = 'about'
          join entity en on en.id = l.target_entity_id
         where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by,
                                e.valid, v_principal, p_scopes, p_purpose, false, null)
         group by en.id, en.name, en.entity_type, en.scope
         order by count(*) desc, en.name limit p_entities);
    -- The principal's own working representation of the others in the
    -- session (PR120/PR122 when the session is unknown or the principal not in it).
    if p_session is not null then
        v_bundle.working_representation := get_representation(p_principal, p_scopes, p_session, p_principal);
    end if;
    return v_bundle;
end
$$;
comment on function __tenant__.session_bundle(text, text[], text, integer, integer, bigint) is
    'What an agent starts with: recent memories, pinned procedural notes, top entities, the working representation.';

create or replace function __tenant__.pin(p_principal text, p_scopes text[], p_memory_id bigint,
                                         p_pinned boolean default true)
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_memory memory := _lock_for_revision(_peer_id(p_principal), p_scopes, p_memory_id, null, true);
begin
    -- updated_at is left alone: pinning is not an edit, and unpinning must not
    -- make a memory look recent.
    update memory m set pinned = coalesce(p_pinned, true) where m.id = v_memory.id;
    return coalesce(p_pinned, true);
end
$$;
comment on function __tenant__.pin(text, text[], bigint, boolean) is
    'Pins (or unpins) a live memory the principal may see, so it is in every session-start bundle.';
