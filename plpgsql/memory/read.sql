-- read: one memory with its provenance, only if the principal may see it for
-- the purpose named. A memory the principal may not see is reported exactly
-- like one that does not exist.

create or replace function __tenant__.read(
    p_principal           text,
    p_scopes              text[],
    p_memory_id           bigint,
    p_purpose             text,
    p_include_superseded  boolean default false
)
returns table (
    id bigint, scope text, kind text, title text, body text, origin text, revision integer,
    confidence real, audience text, purposes text[], superseded_by bigint, created_by text,
    created_at timestamptz, updated_at timestamptz, valid tstzrange, provenance __tenant__.memory_provenance,
    revisions __tenant__.memory_text_revision[]
)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_memory memory;
begin
    perform _check_scopes(p_scopes);
    perform _check_purpose(p_purpose);
    perform _check_id(p_memory_id, 'memory id');
    select e.* into v_memory
      from memory e
     where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                            v_principal, p_scopes, p_purpose, coalesce(p_include_superseded, false), null) and e.id = p_memory_id;
    if v_memory.id is null then
        perform _fail('PR104', format('memory %s not found', p_memory_id),
                      'It does not exist, this principal may not see it for this purpose, or it was superseded '
                      '(pass p_include_superseded => true to read history).');
    end if;

    return query
    select v_memory.id, v_memory.scope, v_memory.kind, v_memory.title, v_memory.body, v_memory.origin,
           v_memory.revision, v_memory.confidence,
           (select p.name from peer p where p.id = v_memory.audience_peer_id),
           v_memory.purposes, v_memory.superseded_by,
           (select p.name from peer p where p.id = v_memory.created_by),
           v_memory.created_at, v_memory.updated_at, v_memory.valid,
           _provenance(v_memory.id, v_principal, p_scopes),
           array(select row(r.revision, r.kind, r.title, r.body, r.confidence, cp.name, r.changed_at, r.reason,
                            -- what the correction that replaced this text (and made revision + 1) cited
                            array(select o.log_offset
                                    from memory_correction_evidence c
                                    join observation o on o.id = c.observation_id
                                   where c.memory_id = r.memory_id and c.revision = r.revision + 1
                                   order by o.log_offset))::memory_text_revision
                   from memory_revision r join peer cp on cp.id = r.changed_by
                  where r.memory_id = v_memory.id
                  order by r.revision);
end
$$;
comment on function __tenant__.read(text, text[], bigint, text, boolean) is
    'One memory with its provenance and revision history, if the principal may see it for the purpose.';

-- A memory's links as its provenance (memory_provenance). Linked memories
-- the principal may not see are counted, not shown. The observations include those cited by corrections,
-- each saying which revisions it justified: the proof of a corrected memory
-- points at the words that corrected it, not only at the ones it corrected.
-- A turn the principal may not see (_observation_eligible) is listed by its
-- offset only, "withheld": never its text, who said it or when. A turn shown
-- says who may see it (its audience's names, NULL for the scope); a memory
-- that reaches more peers than its turns says why (widening_reason).
-- Set-based: the provenance of all of recall's rows at once. As of a past
-- moment (p_as_of), only the links and corrections made by then: a turn that
-- corrected the memory later is not yet its source.
-- Each table is read by a statement of that table alone, into arrays, and
-- the provenance is assembled by a statement that reads no table: on Citus a
-- statement joining tenant tables is planned, deparsed for the shard and
-- planned again on every call (Citus keeps no local plan for a table without
-- a distribution key), while one of a single table takes the fast path
-- (docs/scale-out.md, section 4). The eligibility of a turn and of a source
-- memory is the expression the joins had, read beside its row; what a
-- withheld turn does not show is not read out of it.
create or replace function __tenant__._provenance_of(p_memory_ids bigint[], p_principal_id bigint, p_scopes text[],
                                                   p_as_of timestamptz default null)
returns table (memory_id bigint, provenance __tenant__.memory_provenance)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_link_memory bigint[]; v_link_type text[]; v_link_turn bigint[]; v_link_source bigint[]; v_link_entity bigint[];
    v_memory bigint[]; v_memory_title text[]; v_memory_kind text[]; v_memory_widening text[]; v_memory_seen boolean[];
    v_turn bigint[]; v_turn_scope text[]; v_turn_offset bigint[]; v_turn_role text[]; v_turn_at timestamptz[];
    v_turn_text text[]; v_turn_seen boolean[]; v_turn_actor bigint[]; v_turn_audience jsonb[];
    v_peer bigint[]; v_peer_name text[]; v_fix_memory bigint[]; v_fix_turn bigint[]; v_fix_revision integer[];
    v_entity bigint[]; v_entity_name text[]; v_entity_type text[];
    v_corrected boolean;  -- whether a memory asked about has a revision a correction may have made
begin
    if cardinality(p_memory_ids) = 0 then
        return;
    end if;
    select coalesce(array_agg(k.memory_id), '{}'), array_agg(k.link_type), array_agg(k.target_observation_id),
           array_agg(k.target_memory_id), array_agg(k.target_entity_id)
      into v_link_memory, v_link_type, v_link_turn, v_link_source, v_link_entity
      from memory_link k where k.memory_id = any (p_memory_ids) and _unchanged_since(k.created_at, p_as_of);
    select coalesce(array_agg(e.id), '{}'), array_agg(e.title), array_agg(e.kind), array_agg(e.widening_reason),
           array_agg(_memory_eligible(e.scope, e.audience_peer_id, e.purposes,
                                      case when e.invalidated_at > p_as_of then null else e.invalidated_at end,
                                      e.superseded_by, e.valid, p_principal_id, p_scopes, null, true, null)),
           coalesce(bool_or(e.revision > 1 and e.id = any (p_memory_ids)), false)
      into v_memory, v_memory_title, v_memory_kind, v_memory_widening, v_memory_seen, v_corrected
      from memory e where e.id = any (p_memory_ids || v_link_source);
    if array_remove(v_link_turn, null) <> '{}' then
        select coalesce(array_agg(t.id), '{}'), array_agg(t.scope), array_agg(t.log_offset),
               array_agg(_observation_eligible(t.scope, t.audience, p_principal_id, p_scopes) is true),
               array_agg(case when _observation_eligible(t.scope, t.audience, p_principal_id, p_scopes) then t.source_role end),
               array_agg(case when _observation_eligible(t.scope, t.audience, p_principal_id, p_scopes) then t.occurred_at end),
               array_agg(case when _observation_eligible(t.scope, t.audience, p_principal_id, p_scopes) then left(t.body, 500) end),
               array_agg(case when _observation_eligible(t.scope, t.audience, p_principal_id, p_scopes) then t.actor_id end),
               array_agg(case when _observation_eligible(t.scope, t.audience, p_principal_id, p_scopes) then to_jsonb(t.audience) end)
          into v_turn, v_turn_scope, v_turn_offset, v_turn_seen, v_turn_role, v_turn_at, v_turn_text, v_turn_actor,
               v_turn_audience
          from observation t where t.id = any (v_link_turn) and t.scope = any (p_scopes);
        v_peer := v_turn_actor;
        if array_remove(v_turn_audience, null) <> '{}' then  -- the peers named by the turns' audiences
            v_peer := v_peer || array(select jsonb_array_elements_text(a)::bigint
                                        from unnest(v_turn_audience) a where jsonb_typeof(a) = 'array');
        end if;
        select coalesce(array_agg(n.id), '{}'), array_agg(n.name) into v_peer, v_peer_name
          from peer n where n.id = any (v_peer);
    end if;
    if v_corrected and v_turn <> '{}' then  -- a correction makes revision 2 or later
        select array_agg(x.memory_id), array_agg(x.observation_id), array_agg(x.revision)
          into v_fix_memory, v_fix_turn, v_fix_revision
          from memory_correction_evidence x where x.memory_id = any (p_memory_ids) and _unchanged_since(x.created_at, p_as_of);
    end if;
    if 'about' = any (v_link_type) then
        select array_agg(n.id), array_agg(n.name), array_agg(n.entity_type) into v_entity, v_entity_name, v_entity_type
          from entity n where n.id = any (v_link_entity);
    end if;
    return query
    with link as (select * from unnest(v_link_memory, v_link_type, v_link_turn, v_link_source, v_link_entity)
                                    as k(memory_id, type, turn, source, entity)
    ), named as (select * from unnest(v_peer, v_peer_name) as n(id, name)
    ), fixed as (select f.memory, f.turn, array_agg(f.revision order by f.revision) as list
                   from unnest(v_fix_memory, v_fix_turn, v_fix_revision) f(memory, turn, revision) group by 1, 2)
    select i.id, row(coalesce(obs.list, '{}'), coalesce(src.list, '{}'), coalesce(src.hidden, 0),
                     coalesce(ab.list, '{}'), v_memory_widening[array_position(v_memory, i.id)],
                     coalesce(obs.offsets, '{}'))::memory_provenance
      from unnest(p_memory_ids) as i(id)
      left join (
            select k.memory_id, array_agg(row(
                       t.scope, t.log_offset, not t.seen, t.role, a.name, t.at, t.body,
                       case when jsonb_typeof(t.audience) = 'array' then
                           array(select n.name from named n where t.audience @> to_jsonb(n.id) order by n.name) end,
                       coalesce(x.list, '{}'))::observation_ref order by t.log_offset) as list,
                   array_agg(t.log_offset order by t.log_offset) as offsets
              from link k
              join unnest(v_turn, v_turn_scope, v_turn_offset, v_turn_role, v_turn_at, v_turn_text, v_turn_seen,
                          v_turn_actor, v_turn_audience) as t(id, scope, log_offset, role, at, body, seen, actor, audience)
                on t.id = k.turn
              left join named a on a.id = t.actor
              left join fixed x on x.memory = k.memory_id and x.turn = t.id
             where k.type = 'derived_from'
             group by k.memory_id) obs on obs.memory_id = i.id
      left join (select k.memory_id, (count(*) filter (where s.seen is not true))::integer as hidden,
                   array_agg(row(s.id, s.title, s.kind)::source_memory order by s.id) filter (where s.seen) as list
              from link k
              left join unnest(v_memory, v_memory_title, v_memory_kind, v_memory_seen) as s(id, title, kind, seen)
                on s.id = k.source
             where k.type = 'derived_from' and k.source is not null
             group by k.memory_id) src on src.memory_id = i.id
      left join (select k.memory_id, array_agg(row(n.name, n.type)::about_entity order by n.name) as list
              from link k join unnest(v_entity, v_entity_name, v_entity_type) n(id, name, type) on n.id = k.entity
             where k.type = 'about'
             group by k.memory_id) ab on ab.memory_id = i.id;
end
$$;
comment on function __tenant__._provenance_of(bigint[], bigint, text[], timestamptz) is
    'Internal: for each memory, its observations (withheld where the principal may not see them), visible source memories, hidden-source count, entities, widening reason and cited offsets (as of p_as_of: the links and corrections made by then, a source forgotten since not yet forgotten).';

create or replace function __tenant__._provenance(p_memory_id bigint, p_principal_id bigint, p_scopes text[])
returns __tenant__.memory_provenance
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select p.provenance from _provenance_of(array[p_memory_id], p_principal_id, p_scopes) p
$$;
comment on function __tenant__._provenance(bigint, bigint, text[]) is
    'Internal: a memory''s observations, visible source memories, hidden-source count and entities.';
