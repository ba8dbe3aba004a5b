-- Recall's fact arm (plpgsql/recall/recall.sql composes the steps): the facts about
-- the entities the query names (by name or alias), valid at the requested
-- time and currently believed, ranked by how many query terms their
-- statement shares, then salience and confidence. recall fuses them as a
-- third list. As of a past moment (p_as_of): the facts valid then (or at
-- p_at) and believed then.

create or replace function __tenant__._fact_arm(p_principal_id bigint, p_scopes text[], p_purpose text,
                                               p_at timestamptz, p_query text, p_as_of timestamptz default null)
returns table (fact_ids bigint[], entities text[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_entities bigint[];
    v_any_term tsquery;
begin
    fact_ids := '{}';
    entities := '{}';
    -- Finding the entities a query names costs more than the rest of the arm
    -- (~0.3 ms); in a tenant without a fact it could find none worth naming
    -- (any fact, not the scopes': fact has no index on scope to ask cheaply). The table alone, not an
    -- EXISTS: on Citus a one-table statement without a subquery takes the fast path.
    perform 1 from fact f limit 1;
    if found then
        v_entities := _entities_in_text(p_scopes, p_query);
    end if;
    if cardinality(v_entities) > 0 then
        v_any_term := nullif(array_to_string(array(select quote_literal(u.lexeme)
                                                     from unnest(to_tsvector('english', p_query)) u), ' | '), '')::tsquery;
        with about as (
            -- two index-driven arms, not an OR
            select f.id, f.statement, f.predicate, f.salience, f.confidence
              from fact f
             where _fact_eligible(f.scope, f.audience_peer_id, f.purposes, f.valid, f.known,
                                  p_principal_id, p_scopes, p_purpose, coalesce(p_at, p_as_of, now()), p_as_of)
               and f.subject_id = any (v_entities)
            union
            select f.id, f.statement, f.predicate, f.salience, f.confidence
              from fact f
             where _fact_eligible(f.scope, f.audience_peer_id, f.purposes, f.valid, f.known,
                                  p_principal_id, p_scopes, p_purpose, coalesce(p_at, p_as_of, now()), p_as_of)
               and f.object_id = any (v_entities)
        ), ranked as (
            select a.id, coalesce(ts_rank(to_tsvector('english', a.statement || ' ' || replace(a.predicate, '_', ' ')),
                                          v_any_term), 0) as relevance, a.salience, a.confidence
              from about a
             order by 2 desc, a.salience desc, a.confidence desc, a.id desc
             limit (_setting_value('recall_fact_limit') #>> '{}')::integer)
        select coalesce(array_agg(r.id order by r.relevance desc, r.salience desc, r.confidence desc, r.id desc), '{}')
          into fact_ids from ranked r;
        -- the entities whose facts were found (an entity only a hidden fact names stays unnamed)
        select coalesce(array_agg(e.name order by e.name), '{}') into entities
          from entity e
         where e.id = any (v_entities)
           and exists (select 1 from fact f where f.id = any (fact_ids) and (f.subject_id = e.id or f.object_id = e.id));
    end if;
    return next;
end
$$;
comment on function __tenant__._fact_arm(bigint, text[], text, timestamptz, text, timestamptz) is
    'Internal: recall''s fact arm: eligible current facts about the entities the query names, best first, and those entities'' names.';
