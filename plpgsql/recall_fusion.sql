-- Recall, steps 4 and 5 (plpgsql/recall.sql composes the steps):
--   _rrf_fuse         Reciprocal Rank Fusion of the two arms (message search
--                     fuses its arms with it too): setting fusion = 'rrf'
--   _score_fuse       the arms' scores, each over its own best, added:
--                     setting fusion = 'scores'
--   _evidence_scores  the same evidence for memories RRF chose, with the
--                     dense arm's cosine computed for each: setting fusion =
--                     'rrf_scores' (RRF chooses the rows, these order them)
--   _walk_provenance  the permission walk over the fused list
--   _recall_items     the rows recall returns: the first memories that passed
--                     the walk and the fact arm's facts, ranked together, with
--                     provenance (step 7's items; step 6, the re-rank, is the
--                     caller's, on these rows)

-- Reciprocal Rank Fusion, written once: each id scores the sum of 1 / (k +
-- rank) over the lists it is in; best p_limit ids first (ties by id). Four
-- lists: recall's lexical, dense, people and time lists (_fused_candidates);
-- an empty list adds nothing, so two lists are _rrf_fuse below.
create or replace function __tenant__._rrf_fuse4(p_first bigint[], p_second bigint[], p_third bigint[],
                                                p_fourth bigint[], p_k double precision, p_limit integer)
returns bigint[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with ranks as (
        select x.id, x.ord from unnest(p_first) with ordinality as x(id, ord)
        union all
        select x.id, x.ord from unnest(p_second) with ordinality as x(id, ord)
        union all
        select x.id, x.ord from unnest(p_third) with ordinality as x(id, ord)
        union all
        select x.id, x.ord from unnest(p_fourth) with ordinality as x(id, ord)
    ), fused as (
        select r.id, sum(1.0 / (p_k + r.ord)) as s from ranks r group by r.id
    )
    select coalesce(array_agg(f.id order by f.s desc, f.id), '{}')
      from (select * from fused order by s desc, id limit p_limit) f
$$;
comment on function __tenant__._rrf_fuse4(bigint[], bigint[], bigint[], bigint[], double precision, integer) is
    'Internal: Reciprocal Rank Fusion of up to four ranked id lists (an empty one adds nothing), best p_limit first.';

-- Two lists (recall's arms under fusion rrf, message search's): _rrf_fuse4
-- with the other two empty.
create or replace function __tenant__._rrf_fuse(p_first bigint[], p_second bigint[], p_k double precision,
                                               p_limit integer)
returns bigint[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _rrf_fuse4(p_first, p_second, '{}', '{}', p_k, p_limit)
$$;
comment on function __tenant__._rrf_fuse(bigint[], bigint[], double precision, integer) is
    'Internal: Reciprocal Rank Fusion of two ranked id lists, best p_limit first.';

-- Score fusion: each arm's evidence, measured against that arm's best for
-- this query, added. BM25 has no scale of its own (it grows with the query's
-- rarity), so a lexical score counts as a share of the first one; a cosine
-- counts by how far it rises above dense_floor (the design's "no evidence")
-- as a share of how far the first one does. Unlike rank fusion, a memory the
-- lexical arm scores nearly as high as its first keeps nearly the first's
-- weight, whatever its rank, and the dense arm's tail, where cosines barely
-- clear the floor, adds next to nothing: a memory rises by the strength of
-- each arm's evidence, not by both arms having listed it somewhere.
-- Returns the best p_limit ids with their fused scores (ties by id).
create or replace function __tenant__._score_fuse(p_lexical_ids bigint[], p_bm25 double precision[],
                                                 p_dense_ids bigint[], p_cosines double precision[],
                                                 p_floor double precision, p_limit integer)
returns table (ids bigint[], scores double precision[])
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with a as (
        select x.id, x.s / p_bm25[1] as s
          from unnest(p_lexical_ids, p_bm25) as x(id, s)
         where p_bm25[1] > 0
    ), b as (
        select x.id, case when p_cosines[1] > p_floor then (x.c - p_floor) / (p_cosines[1] - p_floor) else 1 end as s
          from unnest(p_dense_ids, p_cosines) as x(id, c)
    ), fused as (
        select coalesce(a.id, b.id) as id, coalesce(a.s, 0) + coalesce(b.s, 0) as s
          from a full join b on b.id = a.id
         order by 2 desc, 1
         limit p_limit
    )
    select coalesce(array_agg(f.id order by f.s desc, f.id), '{}'),
           coalesce(array_agg(f.s order by f.s desc, f.id), '{}')
      from fused f
$$;
comment on function __tenant__._score_fuse(bigint[], double precision[], bigint[], double precision[],
                                           double precision, integer) is
    'Internal: score fusion (setting fusion = scores): BM25 over the first BM25 plus cosine above the floor over the first''s, best p_limit first.';

-- The fused list the permission walk reads, by the setting fusion: score
-- fusion (scores) or RRF (rrf, and rrf_scores, whose rows RRF chooses), up
-- to walk_depth ids.
create or replace function __tenant__._fused_ids(p_lexical_ids bigint[], p_bm25 double precision[],
                                                p_dense_ids bigint[], p_cosines double precision[], p_settings jsonb)
returns bigint[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select case when p_settings ->> 'fusion' = 'scores'
                then (select f.ids from _score_fuse(p_lexical_ids, p_bm25, p_dense_ids, p_cosines,
                                                    (p_settings ->> 'dense_floor')::double precision,
                                                    (p_settings ->> 'walk_depth')::integer) f)
                else _rrf_fuse(p_lexical_ids, p_dense_ids, (p_settings ->> 'rrf_k')::double precision,
                               (p_settings ->> 'walk_depth')::integer) end
$$;
comment on function __tenant__._fused_ids(bigint[], double precision[], bigint[], double precision[], jsonb) is
    'Internal: recall''s fused candidate ids, by the setting fusion (score fusion or RRF), up to walk_depth.';

-- The evidence of each chosen memory, in p_ids' order, on _score_fuse's
-- scale: BM25 over the lexical arm's first (0 when the arm did not list it),
-- plus the cosine's rise above p_floor over the dense arm's first's (0 at or
-- below the floor, or when the dense arm did not run). fusion = 'rrf_scores'
-- orders RRF's rows by it. The cosine is computed for each of the few chosen
-- memories rather than read from the dense arm's list: a memory the lexical
-- arm found is often past the dense arm's first arm_candidates, and would
-- count as no dense evidence at all where it has some (on LoCoMo, reading
-- the arms' first 20 instead of 100 lost 0.03 of recall@5). One statement
-- over p_ids (the rows asked for), by primary key.
create or replace function __tenant__._evidence_scores(p_ids bigint[], p_lexical_ids bigint[],
                                                      p_bm25 double precision[], p_dense_ids bigint[],
                                                      p_cosines double precision[],
                                                      p_query_embedding double precision[], p_floor double precision,
                                                      p_model text, p_version integer)
returns double precision[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result double precision[];
begin
    select coalesce(array_agg(
               coalesce(p_bm25[array_position(p_lexical_ids, c.id)] / nullif(p_bm25[1], 0), 0)
               + case when cardinality(p_dense_ids) = 0 or me.embedding is null then 0
                      when p_cosines[1] > p_floor
                      then greatest(1 - (me.embedding operator(__ext__.<=>) p_query_embedding::__ext__.halfvec)
                                    - p_floor, 0) / (p_cosines[1] - p_floor)
                      else (1 - (me.embedding operator(__ext__.<=>) p_query_embedding::__ext__.halfvec)
                            >= p_floor)::integer end
               order by c.ord), '{}')
      from unnest(p_ids) with ordinality as c(id, ord)
      left join memory_embedding me
        on me.memory_id = c.id and me.model = p_model and me.input_version = p_version
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._evidence_scores(bigint[], bigint[], double precision[], bigint[], double precision[],
                                                double precision[], double precision, text, integer) is
    'Internal: each memory''s evidence on score fusion''s scale (BM25 over the first BM25 plus the cosine above the floor over the dense first''s), the cosine computed for each.';

-- Keeps, in order, the candidates whose whole derived_from chain the
-- principal may see (superseded sources are history and stay visible;
-- forgotten or other-audience sources are not).
create or replace function __tenant__._walk_provenance(p_candidates bigint[], p_principal_id bigint, p_scopes text[])
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    with recursive reach (root, source, depth) as (
        select c.id, l.target_memory_id, 1
          from unnest(p_candidates) c(id)
          join memory_link l on l.memory_id = c.id and l.link_type = 'derived_from' and l.target_memory_id is not null
        union
        select r.root, l.target_memory_id, r.depth + 1
          from reach r
          join memory_link l on l.memory_id = r.source and l.link_type = 'derived_from' and l.target_memory_id is not null
         where r.depth < 32
    ), hidden as (
        -- (Observation links need no check: evidence is always in the memory's
        -- own scope, which eligibility has already authorised.)
        select distinct r.root from reach r
         where not exists (select 1 from memory e
                            where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                                   p_principal_id, p_scopes, null, true, null) and e.id = r.source)
    )
    select coalesce(array_agg(c.id order by c.ord), '{}')
      from unnest(p_candidates) with ordinality c(id, ord)
     where c.id not in (select h.root from hidden h)
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._walk_provenance(bigint[], bigint, text[]) is
    'Internal: the candidates, in order, whose provenance the principal may see.';


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
      -- as of a past moment, the text then of a memory corrected since (plpgsql/recall_as_of.sql)
      left join lateral (select r.title, r.body from memory_revision r
                          where p_as_of is not null and r.memory_id = m.id and r.changed_at > p_as_of
                          order by r.revision limit 1) tx on true
      join _provenance_of(array(select t2.id from top t2 where t2.item = 'memory'), p_principal_id, p_scopes) pv
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
