-- Representations (design section 5): what is believed about a peer, and
-- from whose perspective.
--
-- A memory about a peer is one linked (about) to the entity named as the
-- peer in the memory's scope (through aliases and merges); a fact about a
-- peer has that entity as its subject. The observer column of both says
-- whose view it is: NULL is the global view (derived from everything the
-- peer sent), a peer is that peer's local view (derived from what it saw).
-- Everything returned goes through _memory_eligible or _fact_eligible: a
-- representation never shows the principal a row it may not see; a working
-- representation shows only items from turns the principal may see.

create or replace function __tenant__.representation(
    p_principal  text,
    p_scopes     text[],
    p_target     text,                        -- the peer represented
    p_observer   text default null,           -- whose view; NULL: the global representation
    p_purpose    text default 'converse',
    p_limit      integer default 100
)
returns table (item text, id bigint, scope text, kind text, body text, confidence real, observer text,
               created_at timestamptz, evidence bigint[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_principal bigint := _peer_id(p_principal);
    v_target bigint := _peer_id(p_target, 'target');
    v_observer bigint := case when p_observer is null then null else _peer_id(p_observer, 'observer') end;
    v_entities bigint[];
begin
    perform _check_scopes(p_scopes);
    perform _check_purpose(p_purpose);
    if p_limit is null or p_limit < 1 or p_limit > 10000 then
        perform _fail('PR150', format('limit must be 1 to 10000, not %s', coalesce(p_limit::text, 'NULL')));
    end if;
    -- The peer's entity in each authorised scope (through aliases and merges).
    v_entities := array(select _entity_named(s, p_target) from unnest(p_scopes) s where _entity_named(s, p_target) is not null);
    return query
    (select 'memory'::text, m.id, m.scope, m.kind, m.body, m.confidence, p_observer, m.created_at,
            array(select o.log_offset from memory_link l join observation o on o.id = l.target_observation_id
                   where l.memory_id = m.id and l.link_type = 'derived_from' order by o.log_offset)
       from memory m
      where _memory_eligible(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                             v_principal, p_scopes, p_purpose, false, null) and m.observer_peer_id is not distinct from v_observer
        and exists (select 1 from memory_link l join entity e on e.id = l.target_entity_id
                     where l.memory_id = m.id and l.link_type = 'about'
                       and coalesce(e.merged_into, e.id) = any (v_entities))
      order by m.created_at desc, m.id desc
      limit p_limit)
    union all
    -- currently believed facts about the peer, valid now
    (select 'fact'::text, f.id, f.scope, f.predicate, f.statement, f.confidence, p_observer, f.created_at,
            array(select distinct o.log_offset from fact_evidence x join observation o on o.id = x.observation_id
                   where x.fact_id = f.id order by o.log_offset)
       from fact f
      where _fact_eligible(f.scope, f.audience_peer_id, f.purposes, f.valid, f.known,
                           v_principal, p_scopes, p_purpose, now(), null) and f.observer_peer_id is not distinct from v_observer
        and f.subject_id = any (v_entities)
      order by f.created_at desc, f.id desc
      limit p_limit);
end
$$;
comment on function __tenant__.representation(text, text[], text, text, text, integer) is
    'The memories and current facts about a peer from one perspective (global when observer is NULL) that the principal may see for the purpose.';

-- A working representation as a principal may read it: only the items
-- derived from turns it may see (each item names its observation); an
-- observed peer left with none is left out.
create or replace function __tenant__._working_seen_by(p_document jsonb, p_principal_id bigint, p_scopes text[])
returns jsonb
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result jsonb;
begin
    select coalesce(jsonb_object_agg(d.key, d.items), '{}')
      from (select t.key, jsonb_agg(i.item order by i.n) as items
              from jsonb_each(p_document) t
             cross join lateral jsonb_array_elements(t.value) with ordinality as i(item, n)
             where exists (select 1 from observation o
                            where _observation_eligible(o.scope, o.audience,
                                                        p_principal_id, p_scopes) and o.id = (i.item ->> 'observation_id')::bigint)
             group by t.key) d
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._working_seen_by(jsonb, bigint, text[]) is
    'Internal: a working representation without the items derived from turns the principal may not see.';

create or replace function __tenant__.get_representation(p_principal text, p_scopes text[], p_session bigint,
                                                        p_peer text, p_target text default null)
returns __tenant__.working_representation
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_row session_peer := _session_peer_row(p_principal, p_scopes, p_session, p_peer);
    v_seen jsonb := _working_seen_by(v_row.working_representation, _peer_id(p_principal), p_scopes);
begin
    if p_target is not null then
        perform _peer_id(p_target, 'target');
    end if;
    return row(v_row.session_id, p_peer, v_row.working_updated_at,
               case when p_target is null then v_seen
                    else jsonb_build_object(p_target, coalesce(v_seen -> p_target, '[]'))
               end)::working_representation;
end
$$;
comment on function __tenant__.get_representation(text, text[], bigint, text, text) is
    'A peer''s working representation in a session: per observed peer, the newest derived observations (one target if named), '
    'those from turns the principal may not see left out.';

-- Erasure: working representations lose every item derived from an erased
-- observation (and an erased peer its whole document); items that survive
-- lose references to memories and facts that are gone; a target left with
-- nothing is removed.
create or replace function __tenant__._scrubbed_working(p_document jsonb, p_observation_ids bigint[])
returns jsonb
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result jsonb;
begin
    select coalesce(jsonb_object_agg(d.key, d.items), '{}')
      from (select t.key,
                   jsonb_agg(i.item - array(
                       select r.k from (values
                           ('memory_id', not exists (select 1 from memory m where m.id = (i.item ->> 'memory_id')::bigint)),
                           ('fact_id', not exists (select 1 from fact f where f.id = (i.item ->> 'fact_id')::bigint))) r(k, gone)
                        where r.gone and i.item ? r.k) order by i.n) as items
              from jsonb_each(p_document) t
             cross join lateral jsonb_array_elements(t.value) with ordinality as i(item, n)
             where not ((i.item ->> 'observation_id')::bigint = any (p_observation_ids))
             group by t.key) d
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._scrubbed_working(jsonb, bigint[]) is
    'Internal (erasure): a working representation without items from these observations or references to deleted rows.';

create or replace function __tenant__._scrub_working_representations(p_observation_ids bigint[], p_peer_id bigint)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count bigint;
    v_sessions bigint[];
    v_peers bigint[];
    v_documents jsonb[];
begin
    -- The new documents are computed first and written by key: Citus refuses a function that
    -- is not immutable called with column references in an UPDATE.
    select coalesce(array_agg(w.session_id), '{}'), coalesce(array_agg(w.peer_id), '{}'), coalesce(array_agg(w.doc), '{}')
      into v_sessions, v_peers, v_documents
      from (select sp.session_id, sp.peer_id, sp.working_representation as old,
                   case when sp.peer_id = p_peer_id then '{}'::jsonb
                        else _scrubbed_working(sp.working_representation, p_observation_ids) end as doc
              from session_peer sp
             where sp.working_representation <> '{}') w
     where w.peer_id is not distinct from p_peer_id or w.doc <> w.old;
    update session_peer sp
       set working_representation = n.doc, working_updated_at = now()
      from unnest(v_sessions, v_peers, v_documents) n(session_id, peer_id, doc)
     where sp.session_id = n.session_id and sp.peer_id = n.peer_id;
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__._scrub_working_representations(bigint[], bigint) is
    'Internal (erasure): removes working-representation items derived from erased observations; clears an erased peer''s.';

create or replace function __tenant__._working_cites(p_document jsonb, p_observation_ids bigint[])
returns boolean
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select exists (select 1 from jsonb_each(p_document) t cross join lateral jsonb_array_elements(t.value) i(item)
                    where (i.item ->> 'observation_id')::bigint = any (p_observation_ids))
$$;
comment on function __tenant__._working_cites(jsonb, bigint[]) is
    'Internal: whether a working representation holds an item derived from one of these observations.';
