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
-- The rows are chosen from the arrays alone; the memories, their text as of
-- p_as_of and their provenance are each read by statements of one table, and
-- put together by a statement that reads none (but through _provenance_of): on Citus a statement that
-- joins tenant tables is planned, deparsed and planned again on every call,
-- one of a single table takes the fast path (docs/scale-out.md, section 4).
-- The facts, when there are any, are read by _recall_fact_items.
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
    v_rank integer[]; v_item text[]; v_id bigint[]; v_pos integer[]; v_score double precision[];  -- the rows
    v_memory bigint[]; v_scope text[]; v_kind text[]; v_title text[]; v_body text[];
    v_then bigint[]; v_then_revision integer[]; v_then_title text[]; v_then_body text[];
begin
    if p_fusion = 'scores' then
        select f.ids, f.scores into v_fused_ids, v_fused_scores
          from _score_fuse(p_lexical_ids, p_bm25, p_dense_ids, p_cosines, p_floor,
                           cardinality(p_lexical_ids) + cardinality(p_dense_ids)) f;
    end if;
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
    select coalesce(array_agg(t.r order by t.r), '{}'), array_agg(t.item order by t.r), array_agg(t.id order by t.r),
           array_agg(t.pos order by t.r), array_agg(t.score order by t.r),
           coalesce(array_agg(t.id) filter (where t.item = 'memory'), '{}')
      into v_rank, v_item, v_id, v_pos, v_score, v_memory
      from top t;
    if v_rank = '{}' then
        return;
    end if;
    select coalesce(array_agg(m.id), '{}'), array_agg(m.scope), array_agg(m.kind), array_agg(m.title), array_agg(m.body)
      into v_memory, v_scope, v_kind, v_title, v_body
      from memory m
     where m.id = any (v_memory);
    if p_as_of is not null and v_memory <> '{}' then
        -- as of a past moment, the text then of a memory corrected since (as_of.sql): its first revision after
        select array_agg(r.memory_id), array_agg(r.revision), array_agg(r.title), array_agg(r.body)
          into v_then, v_then_revision, v_then_title, v_then_body
          from memory_revision r
         where r.memory_id = any (v_memory) and r.changed_at > p_as_of;
    end if;
    return query
    select t.r, m.id, m.scope, m.kind, case when tx.body is null then m.title else tx.title end,
           coalesce(tx.body, m.body), t.score,
           array_position(p_lexical_ids, m.id), array_position(p_dense_ids, m.id),
           p_cosines[array_position(p_dense_ids, m.id)], p_bm25[array_position(p_lexical_ids, m.id)],
           'memory'::text, null::bigint, null::integer, pv.provenance, null::fact_provenance
      from unnest(v_rank, v_item, v_id, v_score) as t(r, item, id, score)
      join unnest(v_memory, v_scope, v_kind, v_title, v_body) as m(id, scope, kind, title, body) on m.id = t.id
      left join lateral (select x.title, x.body
                           from unnest(v_then, v_then_revision, v_then_title, v_then_body) as x(id, revision, title, body)
                          where x.id = m.id
                          order by x.revision limit 1) tx on true
      join _provenance_of(v_memory, p_principal_id, p_scopes, p_as_of) pv on pv.memory_id = m.id
     where t.item = 'memory'
    union all
    -- the facts' statement joins their tables: only run when a fact is among the rows
    select f.* from unnest(case when 'fact' = any (v_item) then
                                    _recall_fact_items(v_rank, v_item, v_id, v_pos, v_score, p_principal_id, p_scopes)
                               end) f
     order by 1;
end
$$;
comment on function __tenant__._recall_items(bigint[], bigint[], bigint[], double precision[], bigint[],
                                             double precision[], double precision, integer, bigint, text[], text,
                                             double precision, double precision[], timestamptz) is
    'Internal: recall''s rows from the walked memories and the fact list: scored by the tenant''s fusion, best p_limit, with provenance.';

-- _recall_items' facts (p_item 'fact' of the rows chosen: their ranks, ids,
-- places in the fact list and scores), with subject, object, validity and
-- the evidence the principal may see.
create or replace function __tenant__._recall_fact_items(
    p_rank integer[], p_item text[], p_id bigint[], p_pos integer[], p_score double precision[],
    p_principal_id bigint, p_scopes text[])
returns __tenant__.recall_item[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_rows recall_item[];
begin
    select coalesce(array_agg(row(
               t.r, null, f.scope, 'fact', f.predicate, f.statement, t.score, null, null, null, null,
               'fact', f.id, t.pos, null,
               row(se.name, f.predicate, coalesce(oe.name, f.object_value), f.valid, f.confidence, q.quotes,
                   array(select x.offset from unnest(q.quotes) x))::fact_provenance)::recall_item), '{}')
      into v_rows
      from unnest(p_rank, p_item, p_id, p_pos, p_score) as t(r, item, id, pos, score)
      join fact f on f.id = t.id
      join entity se on se.id = f.subject_id
      left join entity oe on oe.id = f.object_id
     cross join lateral (select _fact_quotes(f.id, p_principal_id, p_scopes) as quotes) q
     where t.item = 'fact';
    return v_rows;
end
$$;
comment on function __tenant__._recall_fact_items(integer[], text[], bigint[], integer[], double precision[], bigint,
                                                  text[]) is
    'Internal: the facts among recall''s rows, with subject, object, validity and the evidence the principal may see.';
