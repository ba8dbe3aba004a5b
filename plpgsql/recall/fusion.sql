-- Recall, step 4 (plpgsql/recall/recall.sql composes the steps): the fused list.
--   _rrf_fuse          Reciprocal Rank Fusion of the two arms (message search
--                      fuses its arms with it too): setting fusion = 'rrf'
--   _score_fuse        the arms' scores, each over its own best, added:
--                      setting fusion = 'scores'
--   _evidence_scores   the same evidence for memories RRF chose, with the
--                      dense arm's cosine computed for each: setting fusion =
--                      'rrf_scores' (RRF chooses the rows, these order them;
--                      step 6, recall/ordering.sql)
--   _fused_candidates  what the permission walk reads: _fused_ids, or with the
--                      people or time arm on, RRF of all four lists

-- Reciprocal Rank Fusion, written once: each id scores the sum of w / (k +
-- rank) over the lists it is in (w the list's weight, 1 unless given); best
-- p_limit ids first (ties by id). Up to five lists: recall's lexical, dense,
-- people and time lists, and with recall_window_beside the windows' list
-- (_fused_candidates); an empty list adds nothing, so two lists are
-- _rrf_fuse below.
create or replace function __tenant__._rrf_fuse4(p_first bigint[], p_second bigint[], p_third bigint[],
                                                p_fourth bigint[], p_k double precision, p_limit integer,
                                                p_fifth bigint[] default '{}',
                                                p_weights double precision[] default '{1,1,1,1,1}')
returns bigint[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with ranks as (
        select x.id, x.ord, p_weights[1] as w from unnest(p_first) with ordinality as x(id, ord)
        union all
        select x.id, x.ord, p_weights[2] as w from unnest(p_second) with ordinality as x(id, ord)
        union all
        select x.id, x.ord, p_weights[3] as w from unnest(p_third) with ordinality as x(id, ord)
        union all
        select x.id, x.ord, p_weights[4] as w from unnest(p_fourth) with ordinality as x(id, ord)
        union all
        select x.id, x.ord, p_weights[5] as w from unnest(p_fifth) with ordinality as x(id, ord)
    ), fused as (
        select r.id, sum(r.w / (p_k + r.ord)) as s from ranks r group by r.id
    )
    select coalesce(array_agg(f.id order by f.s desc, f.id), '{}')
      from (select * from fused order by s desc, id limit p_limit) f
$$;
comment on function __tenant__._rrf_fuse4(bigint[], bigint[], bigint[], bigint[], double precision, integer, bigint[], double precision[]) is
    'Internal: Reciprocal Rank Fusion of up to five ranked id lists, each weighted (1 unless given; an empty one adds nothing), best p_limit first.';

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
-- the arms' first 20 instead of 100 lost 0.03 of recall@5). The vectors of
-- p_ids (the rows asked for) are read by primary key. p_bm25_scale: what a
-- lexical score is a share of, when not the first's (the shares themselves,
-- at 1, with recall_window_beside: _window_beside_shares).
create or replace function __tenant__._evidence_scores(p_ids bigint[], p_lexical_ids bigint[],
                                                      p_bm25 double precision[], p_dense_ids bigint[],
                                                      p_cosines double precision[],
                                                      p_query_embedding double precision[], p_floor double precision,
                                                      p_model text, p_version integer,
                                                      p_bm25_scale double precision default null)
returns double precision[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result double precision[];
    v_embedded bigint[]; v_cosine double precision[];  -- the memories with a current vector: its cosine to the query
begin
    -- Read alone (on Citus a statement of one table takes the fast path; one joining it to the ids is planned,
    -- deparsed and planned again on every call), and only when the dense arm ran: else a cosine counts 0.
    if cardinality(p_dense_ids) > 0 then
        select array_agg(me.memory_id), array_agg(1 - (me.embedding operator(__ext__.<=>) p_query_embedding::__ext__.halfvec))
          into v_embedded, v_cosine
          from memory_embedding me
         where me.memory_id = any (p_ids) and me.model = p_model and me.input_version = p_version;
    end if;
    select coalesce(array_agg(
               coalesce(p_bm25[array_position(p_lexical_ids, c.id)] / nullif(coalesce(p_bm25_scale, p_bm25[1]), 0), 0)
               + case when cardinality(p_dense_ids) = 0 or me.cosine is null then 0
                      when p_cosines[1] > p_floor then greatest(me.cosine - p_floor, 0) / (p_cosines[1] - p_floor)
                      else (me.cosine >= p_floor)::integer end
               order by c.ord), '{}')
      from unnest(p_ids) with ordinality as c(id, ord)
      left join unnest(v_embedded, v_cosine) as me(memory_id, cosine) on me.memory_id = c.id
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._evidence_scores(bigint[], bigint[], double precision[], bigint[], double precision[],
                                                double precision[], double precision, text, integer, double precision) is
    'Internal: each memory''s evidence on score fusion''s scale (BM25 over the first BM25 plus the cosine above the floor over the dense first''s), the cosine computed for each.';

-- The fused list recall's permission walk reads. With recall_people_arm on
-- and an RRF fusion (rrf, rrf_scores), the arm's list is fused with the
-- other two; so is, with recall_question_time on, the list of the candidates
-- said within the time the question names (_time_arm, recall/time_arm.sql).
-- Score fusion has no scale for a list without scores of its own, so there
-- neither is added. p_window_ids: with recall_window_beside, the windows'
-- list (_window_candidates), fused beside the lexical arm's under RRF, each
-- of the two at half a list's weight; under score fusion it is not used.
create or replace function __tenant__._fused_candidates(
    p_lexical_ids bigint[], p_bm25 double precision[], p_dense_ids bigint[], p_cosines double precision[],
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_query text, p_settings jsonb, p_window_ids bigint[] default '{}')
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    -- the two lexical lists (the memories' own words, their windows) share the lexical arm's vote
    v_weights double precision[] := case when cardinality(p_window_ids) > 0 then '{0.5, 1, 1, 1, 0.5}'
                                         else '{1, 1, 1, 1, 1}' end;
    v_fused bigint[] := case when cardinality(p_window_ids) > 0 and p_settings ->> 'fusion' in ('rrf', 'rrf_scores')
                             then _rrf_fuse4(p_lexical_ids, p_dense_ids, '{}', '{}', (p_settings ->> 'rrf_k')::double precision,
                                             (p_settings ->> 'walk_depth')::integer, p_window_ids, v_weights)
                             else _fused_ids(p_lexical_ids, p_bm25, p_dense_ids, p_cosines, p_settings) end;
    v_people bigint[] := '{}';
    v_time bigint[] := '{}';
begin
    if p_settings ->> 'fusion' not in ('rrf', 'rrf_scores') then
        return v_fused;
    end if;
    if (p_settings -> 'recall_people_arm')::boolean then
        v_people := _people_arm(v_fused, p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_query);
    end if;
    if (p_settings -> 'recall_question_time')::boolean then
        v_time := _time_arm(v_fused, p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_query);
    end if;
    if cardinality(v_people) + cardinality(v_time) = 0 then
        return v_fused;
    end if;
    return _rrf_fuse4(p_lexical_ids, p_dense_ids, v_people, v_time, (p_settings ->> 'rrf_k')::double precision,
                      (p_settings ->> 'walk_depth')::integer, p_window_ids, v_weights);
end
$$;
comment on function __tenant__._fused_candidates(bigint[], double precision[], bigint[], double precision[], bigint,
                                                 text[], text, boolean, timestamptz, text, jsonb, bigint[]) is
    'Internal: recall''s fused candidate ids: _fused_ids, or with recall_people_arm, recall_question_time or recall_window_beside on, RRF of the lexical and dense lists, the people and time lists and the windows'' list (the two lexical lists at half weight each).';
