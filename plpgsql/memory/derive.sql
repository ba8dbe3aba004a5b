-- derive: a new memory from other memories. The new row may be seen by and
-- used for only what EVERY source allows: scopes, audiences and purposes
-- intersect, and an empty intersection is refused (PR106), never widened.
-- Like every memory it is never more public than the turns it stands on
-- (the sources' text came from them): a source that was itself widened on
-- purpose does not widen what is derived from it unless this call says why
-- too (PR116 otherwise).

create or replace function __tenant__.derive(
    p_principal   text,
    p_scopes      text[],
    p_sources     bigint[],
    p_body        text,
    p_kind        text default 'summary',
    p_title       text default null,
    p_confidence  double precision default null,      -- NULL: the lowest of the sources'
    p_about       text[] default '{}',
    p_widening_reason text default null              -- why it may reach more peers than the sources' turns
)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_sources bigint[];
    v_missing bigint;
    v_scopes text[];
    v_purposes text[];
    v_audiences bigint[];
    v_audience bigint;
    v_confidence double precision;
    v_observations bigint[];
    v_id bigint;
    v_link bigint;
    v_source bigint;
begin
    perform _check_scopes(p_scopes);
    perform _check_one_of(p_kind, 'memory kind', _closed_set('memory kind'));
    perform _check_entity_names(p_about);
    perform _check_memory_fields(p_body, p_title, p_confidence);
    if p_sources is null or cardinality(p_sources) = 0 then
        perform _fail('PR107', 'derive needs at least one source memory');
    end if;
    foreach v_source in array p_sources loop
        perform _check_id(v_source, 'source memory id');
    end loop;
    v_sources := array(select distinct s from unnest(p_sources) s order by s);

    -- Every source must be visible to the principal (for some purpose) and live.
    select s into v_missing from unnest(v_sources) s
     where not exists (select 1 from memory e where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                                                     v_principal, p_scopes, null, false, null) and e.id = s)
     limit 1;
    if found then
        perform _fail('PR104', format('source memory %s not found', v_missing),
                      'Every source must exist, be live, and be visible to the principal.');
    end if;
    -- Lock the sources so none is corrected or superseded while we derive from it.
    perform 1 from memory m where m.id = any (v_sources) order by m.id for share;

    select array_agg(distinct m.scope), array_agg(distinct m.audience_peer_id) filter (where m.audience_peer_id is not null),
           min(m.confidence)
      into v_scopes, v_audiences, v_confidence
      from memory m where m.id = any (v_sources);
    if cardinality(v_scopes) > 1 then
        perform _fail('PR106', format('sources %s span scopes %s: no audience may see them all',
                                      v_sources::text, v_scopes::text),
                      'Derive only from memories of one scope.');
    end if;
    if cardinality(v_audiences) > 1 then
        perform _fail('PR106', format('sources %s are for different audiences: no peer may see them all', v_sources::text));
    end if;
    v_audience := v_audiences[1];  -- NULL when every source is scope-wide

    select array(select p from unnest(_purposes()) p
                  where (select bool_and(p = any (m.purposes)) from memory m where m.id = any (v_sources)) order by p)
      into v_purposes;
    if cardinality(v_purposes) = 0 then
        perform _fail('PR106', format('sources %s share no purpose: the derived memory could not be used for anything',
                                      v_sources::text),
                      'Derive from memories that allow a common purpose.');
    end if;

    -- The sources' current text, corrections included, is what this is concluded from.
    v_observations := _memory_text_observations(v_sources);
    perform set_config('pgrecall.memory_vectors_given', 'off', true);  -- queued whatever the session set (_memory_changed)
    insert into memory (scope, kind, title, body, confidence, origin, audience_peer_id, purposes, created_by,
                        widening_reason)
    values (v_scopes[1], p_kind, p_title, _trim(p_body), coalesce(p_confidence, v_confidence), 'derived',
            v_audience, v_purposes, v_principal, _widening(v_audience, v_observations, p_widening_reason))
    returning id into v_id;

    perform _register('memory', v_id::text, v_observations);
    foreach v_source in array v_sources loop
        insert into memory_link (memory_id, link_type, target_memory_id)
        values (v_id, 'derived_from', v_source) returning id into v_link;
        perform _register('memory_link', v_link::text, v_observations);
    end loop;
    perform _link_about(v_id, v_scopes[1], p_about, v_observations);
    return v_id;
end
$$;
comment on function __tenant__.derive(text, text[], bigint[], text, text, text, double precision, text[], text) is
    'A memory derived from other memories; its scope, audience and purposes are the intersection of the sources'' (PR106 if empty); '
    'PR116 if that reaches more peers than the turns they stand on, unless p_widening_reason says why.';
