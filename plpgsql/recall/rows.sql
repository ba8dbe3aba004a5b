-- Recall, step 7 (plpgsql/recall/recall.sql composes the steps): the rows recall returns.

-- Recall's rows: the memories that passed the walk (already in fused order,
-- so only the first p_limit can be returned) and the fact arm's facts, each
-- scored by the tenant's fusion (p_fusion): by RRF, a fact by its own rank
-- in the fact list, 1 / (k + rank); by scores, a memory by _score_fuse and
-- the fact ranked r by 1 / r, so the first fact weighs what an arm's first
-- memory does; by rrf_scores, RRF chooses the p_limit rows and they are
-- ordered (and scored) as under scores, a memory by p_evidence
-- (_evidence_scores of p_memory_ids[1:p_limit]). Best p_limit together. A
-- memory carries its provenance, a fact its subject, object, validity and
-- evidence.
create or replace function __tenant__._recall_items(
    p_memory_ids bigint[], p_fact_ids bigint[],
    p_lexical_ids bigint[], p_bm25 double precision[], p_dense_ids bigint[], p_cosines double precision[],
    p_rrf_k double precision, p_limit integer, p_principal_id bigint, p_scopes text[],
    p_fusion text default 'rrf', p_floor double precision default null,
    p_evidence double precision[] default null, p_as_of timestamptz default null)
returns setof __tenant__.recall_item
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_fused_ids bigint[];           -- score fusion's ids and scores; NULL under RRF
    v_fused_scores double precision[];
begin
    if p_fusion = 'scores' then
        select f.ids, f.scores into v_fused_ids, v_fused_scores
          from _score_fuse(p_lexical_ids, p_bm25, p_dense_ids, p_cosines, p_floor,
                           cardinality(p_lexical_ids) + cardinality(p_dense_ids)) f;
    end if;
    return query
    with items as (
        -- choose: what decides which rows are returned; score: their order
        select 'memory'::text as item, k.id, k.ord::integer as pos, x.choose,
               case when p_fusion = 'rrf_scores' then coalesce(p_evidence[k.ord], 0) else x.choose end as score
          from unnest(p_memory_ids[1:p_limit]) with ordinality as k(id, ord)
          cross join lateral (select
               case when v_fused_ids is not null then coalesce(v_fused_scores[array_position(v_fused_ids, k.id)], 0)
               else coalesce(1.0 / (p_rrf_k + array_position(p_lexical_ids, k.id)), 0)
                    + coalesce(1.0 / (p_rrf_k + array_position(p_dense_ids, k.id)), 0) end as choose) x
        union all
        select 'fact', f.id, f.ord::integer,
               case when p_fusion = 'scores' then 1.0 / f.ord else 1.0 / (p_rrf_k + f.ord) end,
               case when p_fusion in ('scores', 'rrf_scores') then 1.0 / f.ord else 1.0 / (p_rrf_k + f.ord) end
          from unnest(p_fact_ids) with ordinality as f(id, ord)
    ), chosen as (
        -- On a tie a fact comes first: it is current, about an entity the
        -- query names, and carries its quote.
        select i.* from items i
         order by i.choose desc, i.item, i.pos
         limit p_limit
    ), top as (
        select c.*, row_number() over (order by c.score desc, c.item, c.pos)::integer as r
          from chosen c
    )
    select t.r, m.id, m.scope, m.kind, case when tx.body is null then m.title else tx.title end,
           coalesce(tx.body, m.body), t.score,
           array_position(p_lexical_ids, m.id), array_position(p_dense_ids, m.id),
           p_cosines[array_position(p_dense_ids, m.id)], p_bm25[array_position(p_lexical_ids, m.id)],
           pv.provenance, 'memory'::text, null::bigint, null::integer
      from top t join memory m on m.id = t.id
      -- as of a past moment, the text then of a memory corrected since (plpgsql/recall/as_of.sql)
      left join lateral (select r.title, r.body from memory_revision r
                          where p_as_of is not null and r.memory_id = m.id and r.changed_at > p_as_of
                          order by r.revision limit 1) tx on true
      join _provenance_of(array(select t2.id from top t2 where t2.item = 'memory'), p_principal_id, p_scopes,
                          p_as_of) pv
        on pv.memory_id = m.id
     where t.item = 'memory'
    union all
    select t.r, null::bigint, f.scope, 'fact'::text, f.predicate, f.statement, t.score,
           null::integer, null::integer, null::double precision, null::double precision,
           jsonb_build_object('subject', se.name, 'predicate', f.predicate,
                              'object', coalesce(oe.name, f.object_value), 'valid', f.valid::text,
                              'confidence', f.confidence, 'evidence', _fact_evidence_json(f.id, p_principal_id, p_scopes)),
           'fact'::text, f.id, t.pos
      from top t join fact f on f.id = t.id
      join entity se on se.id = f.subject_id
      left join entity oe on oe.id = f.object_id
     where t.item = 'fact'
     order by 1;
end
$$;
comment on function __tenant__._recall_items(bigint[], bigint[], bigint[], double precision[], bigint[],
                                             double precision[], double precision, integer, bigint, text[], text,
                                             double precision, double precision[], timestamptz) is
    'Internal: recall''s rows from the walked memories and the fact list: scored by the tenant''s fusion, best p_limit, with provenance.';
