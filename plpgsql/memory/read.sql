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
    created_at timestamptz, updated_at timestamptz, valid tstzrange, provenance jsonb, revisions jsonb
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
           (select coalesce(jsonb_agg(jsonb_build_object(
                        'revision', r.revision, 'kind', r.kind, 'title', r.title, 'body', r.body,
                        'confidence', r.confidence, 'changed_by', cp.name, 'changed_at', r.changed_at,
                        'reason', r.reason,
                        -- what the correction that replaced this text (and made revision + 1) cited
                        'evidence', coalesce((select jsonb_agg(o.log_offset order by o.log_offset)
                                                from memory_correction_evidence c
                                                join observation o on o.id = c.observation_id
                                               where c.memory_id = r.memory_id and c.revision = r.revision + 1),
                                             '[]'::jsonb)) order by r.revision), '[]'::jsonb)
              from memory_revision r join peer cp on cp.id = r.changed_by
             where r.memory_id = v_memory.id);
end
$$;
comment on function __tenant__.read(text, text[], bigint, text, boolean) is
    'One memory with its provenance and revision history, if the principal may see it for the purpose.';

-- A memory's links as JSON. Linked memories the principal may not see are
-- counted, not shown. The observations include those cited by corrections,
-- each saying which revisions it justified: the proof of a corrected memory
-- points at the words that corrected it, not only at the ones it corrected.
-- A turn the principal may not see (_eligible_observations) is listed by its
-- offset only, "withheld": never its text, who said it or when. A turn shown
-- says who may see it (its audience's names, NULL for the scope); a memory
-- that reaches more peers than its turns says why (widening_reason).
-- Set-based so that recall builds the provenance of all its rows in four
-- queries rather than four per row. As of a past moment (p_as_of), only the
-- links and corrections made by then: a turn that corrected the memory later
-- is not yet its source.
create or replace function __tenant__._provenance_of(p_memory_ids bigint[], p_principal_id bigint, p_scopes text[],
                                                   p_as_of timestamptz default null)
returns table (memory_id bigint, provenance jsonb)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select i.id, jsonb_build_object(
        'observations', coalesce(obs.list, '[]'::jsonb),
        'memories', coalesce(src.list, '[]'::jsonb),
        'hidden_sources', coalesce(hid.n, 0),
        'about', coalesce(ab.list, '[]'::jsonb),
        'widening_reason', (select m.widening_reason from memory m where m.id = i.id))
      from unnest(p_memory_ids) as i(id)
      left join (
            select l.memory_id,
                   jsonb_agg(case when seen.id is null then
                       jsonb_build_object(
                           'scope', o.scope, 'offset', o.log_offset, 'withheld', true, 'text', null,
                           'source_role', null, 'actor', null, 'occurred_at', null, 'audience', null,
                           'corrections', coalesce((select jsonb_agg(c.revision order by c.revision)
                                                      from memory_correction_evidence c
                                                     where c.memory_id = l.memory_id and c.observation_id = o.id
                                                       and _unchanged_since(c.created_at, p_as_of)),
                                                   '[]'::jsonb))
                   else jsonb_build_object(
                       'scope', o.scope, 'offset', o.log_offset, 'withheld', false, 'source_role', o.source_role,
                       'actor', a.name, 'occurred_at', o.occurred_at, 'text', left(o.body, 500),
                       -- the names read here, not by _audience_names per turn: on Citus each call of a
                       -- function that reads a table is a statement planned again inside this one's task
                       'audience', case when o.audience is not null then
                                        (select coalesce(jsonb_agg(ap.name order by ap.name), '[]'::jsonb)
                                           from peer ap where ap.id = any (o.audience)) end,
                       -- the revisions produced by corrections that cited it ([] when none did)
                       'corrections', coalesce((select jsonb_agg(c.revision order by c.revision)
                                                  from memory_correction_evidence c
                                                 where c.memory_id = l.memory_id and c.observation_id = o.id
                                                   and _unchanged_since(c.created_at, p_as_of)),
                                               '[]'::jsonb)) end
                     order by o.log_offset) as list
              from memory_link l
              join observation o on o.id = l.target_observation_id
              join peer a on a.id = o.actor_id
              left join observation seen on _observation_eligible(seen.scope, seen.audience,
                                                                  p_principal_id, p_scopes) and seen.id = o.id
             where l.memory_id = any (p_memory_ids) and l.link_type = 'derived_from'
               and o.scope = any (p_scopes) and _unchanged_since(l.created_at, p_as_of)
             group by l.memory_id) obs on obs.memory_id = i.id
      left join (
            select l.memory_id,
                   jsonb_agg(jsonb_build_object('id', e.id, 'title', e.title, 'kind', e.kind) order by e.id) as list
              from memory_link l
              join memory e on _memory_eligible(e.scope, e.audience_peer_id, e.purposes,
                                                case when e.invalidated_at > p_as_of then null else e.invalidated_at end,
                                                e.superseded_by, e.valid, p_principal_id, p_scopes, null, true, null)
                             and e.id = l.target_memory_id
             where l.memory_id = any (p_memory_ids) and l.link_type = 'derived_from'
               and _unchanged_since(l.created_at, p_as_of)
             group by l.memory_id) src on src.memory_id = i.id
      left join (
            select l.memory_id, count(*) as n
              from memory_link l
             where l.memory_id = any (p_memory_ids) and l.link_type = 'derived_from'
               and l.target_memory_id is not null and _unchanged_since(l.created_at, p_as_of)
               and not exists (select 1 from memory e
                                where _memory_eligible(e.scope, e.audience_peer_id, e.purposes,
                                                       case when e.invalidated_at > p_as_of then null else e.invalidated_at end,
                                                       e.superseded_by, e.valid, p_principal_id, p_scopes, null, true, null)
                                  and e.id = l.target_memory_id)
             group by l.memory_id) hid on hid.memory_id = i.id
      left join (
            select l.memory_id,
                   jsonb_agg(jsonb_build_object('entity', en.name, 'type', en.entity_type) order by en.name) as list
              from memory_link l join entity en on en.id = l.target_entity_id
             where l.memory_id = any (p_memory_ids) and l.link_type = 'about'
               and _unchanged_since(l.created_at, p_as_of)
             group by l.memory_id) ab on ab.memory_id = i.id;
end
$$;
comment on function __tenant__._provenance_of(bigint[], bigint, text[], timestamptz) is
    'Internal: for each memory, its observations (withheld where the principal may not see them), visible source memories, hidden-source count, entities and widening reason, as JSON (as of p_as_of: the links and corrections made by then, a source forgotten since not yet forgotten).';

create or replace function __tenant__._provenance(p_memory_id bigint, p_principal_id bigint, p_scopes text[])
returns jsonb
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select p.provenance from _provenance_of(array[p_memory_id], p_principal_id, p_scopes) p
$$;
comment on function __tenant__._provenance(bigint, bigint, text[]) is
    'Internal: a memory''s observations, visible source memories, hidden-source count and entities, as JSON.';
