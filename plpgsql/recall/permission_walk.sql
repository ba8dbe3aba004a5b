-- Recall, step 5 (plpgsql/recall/recall.sql composes the steps): the permission walk over the fused
-- list.

-- Keeps, in order, the candidates whose whole derived_from chain the
-- principal may see (superseded sources are history and stay visible;
-- forgotten or other-audience sources are not). As of a past moment
-- (p_as_of), the chain is the links made by then, and a source forgotten
-- after it is not forgotten yet; who may see it is today's rule.
create or replace function __tenant__._walk_provenance(p_candidates bigint[], p_principal_id bigint, p_scopes text[],
                                                       p_as_of timestamptz default null)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    -- Most memories stand on turns alone: when no candidate is derived from a memory there is nothing to
    -- walk, and this probe of one table is all it costs (on Citus the fast path; the recursive statement
    -- below is planned, deparsed and planned again on the worker, ~0.4 ms a recall).
    perform 1 from memory_link l
     where l.memory_id = any (p_candidates) and l.link_type = 'derived_from' and l.target_memory_id is not null
       and (p_as_of is null or l.created_at <= p_as_of)
     limit 1;
    if not found then
        return coalesce(p_candidates, '{}');
    end if;
    with recursive reach (root, source, depth) as (
        select c.id, l.target_memory_id, 1
          from unnest(p_candidates) c(id)
          join memory_link l on l.memory_id = c.id and l.link_type = 'derived_from' and l.target_memory_id is not null
         where p_as_of is null or l.created_at <= p_as_of
        union
        select r.root, l.target_memory_id, r.depth + 1
          from reach r
          join memory_link l on l.memory_id = r.source and l.link_type = 'derived_from' and l.target_memory_id is not null
         where r.depth < 32 and (p_as_of is null or l.created_at <= p_as_of)
    ), hidden as (
        -- (Observation links need no check: evidence is always in the memory's
        -- own scope, which eligibility has already authorised.)
        select distinct r.root from reach r
         where not exists (select 1 from memory e
                            where _memory_eligible(e.scope, e.audience_peer_id, e.purposes,
                                                   case when e.invalidated_at > p_as_of then null else e.invalidated_at end,
                                                   e.superseded_by, e.valid, p_principal_id, p_scopes, null, true, null)
                              and e.id = r.source)
    )
    select coalesce(array_agg(c.id order by c.ord), '{}')
      from unnest(p_candidates) with ordinality c(id, ord)
     where c.id not in (select h.root from hidden h)
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._walk_provenance(bigint[], bigint, text[], timestamptz) is
    'Internal: the candidates, in order, whose provenance the principal may see (as of p_as_of when given).';
