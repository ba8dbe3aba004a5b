-- The session-start bundle: what an agent starts a conversation with before
-- it recalls anything (recent memories, pinned procedural notes, the entities
-- most written about), all through the same eligibility rule, each memory
-- with its provenance as read and recall give it.

create or replace function __tenant__.session_bundle(
    p_principal  text,
    p_scopes     text[],
    p_purpose    text default 'converse',
    p_recent     integer default 10,
    p_entities   integer default 5,
    p_session    bigint default null     -- a session the principal is in: adds its working representation
)
returns jsonb
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_recent bigint[];
    v_pinned bigint[];
    v_provenance jsonb;
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
    -- Each memory carries its provenance, as read and recall give it.
    select coalesce(jsonb_object_agg(pv.memory_id::text, pv.provenance), '{}') into v_provenance
      from _provenance_of(v_recent || v_pinned, v_principal, p_scopes) pv;
    return jsonb_build_object(
        'recent', coalesce((
            select jsonb_agg(jsonb_build_object('id', m.id, 'kind', m.kind, 'title', m.title, 'body', m.body,
                                                'scope', m.scope, 'updated_at', m.updated_at,
                                                'provenance', v_provenance -> m.id::text)
                             order by k.ord)
              from unnest(v_recent) with ordinality as k(id, ord) join memory m on m.id = k.id), '[]'::jsonb),
        'pinned', coalesce((
            select jsonb_agg(jsonb_build_object('id', m.id, 'kind', m.kind, 'title', m.title, 'body', m.body,
                                                'scope', m.scope, 'provenance', v_provenance -> m.id::text)
                             order by k.ord)
              from unnest(v_pinned) with ordinality as k(id, ord) join memory m on m.id = k.id), '[]'::jsonb),
        'entities', coalesce((
            select jsonb_agg(jsonb_build_object('entity', t.name, 'type', t.entity_type, 'scope', t.scope,
                                                'memories', t.n) order by t.n desc, t.name)
              from (select en.name, en.entity_type, en.scope, count(*) as n
                      from memory e
                      join memory_link l on l.memory_id = e.id and l.link_type = 'about'
                      join entity en on en.id = l.target_entity_id
                     where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by,
                                            e.valid, v_principal, p_scopes, p_purpose, false, null)
                     group by en.id, en.name, en.entity_type, en.scope
                     order by n desc, en.name limit p_entities) t), '[]'::jsonb),
        -- The principal's own working representation of the others in the
        -- session (PR120/PR122 when the session is unknown or the principal not in it).
        'working_representation', case when p_session is null then null
                                       else get_representation(p_principal, p_scopes, p_session, p_principal) end);
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
