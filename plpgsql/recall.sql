-- recall: ranked retrieval, in the design's order.
--   1. eligibility (the one rule, _eligible_memories) before anything is ranked
--   2. lexical arm: BM25 from document frequencies; from prune_min_terms query
--      terms on, terms in prune_df_ratio or more of memories are dropped
--   3. dense arm: cosine against current embeddings, floor dense_floor; exact
--      when few memories are eligible, HNSW with iterative scan otherwise
--   4. Reciprocal Rank Fusion: sum of 1 / (rrf_k + rank) over each arm's
--      first max(arm_candidates, 2 x limit)
--   5. permission walk over the fused list: a candidate whose provenance the
--      principal may not see is dropped
--   6. (re-rank happens in the caller, on rows that passed)
--   7. rows, plus metadata (counts after the walk, dropped terms,
--      dense_available, embeddings missing, freshness)
--
-- _recall() does the work and returns the items followed by one row with
-- item = 'meta' that carries the metadata; recall() returns the items (what
-- a psql user reads) and recall_answer() both, in one call. The metadata is
-- never kept anywhere after the call: nothing of one principal's recall is
-- readable by a later call on the same connection.

create or replace function __tenant__._recall(
    p_principal           text,
    p_scopes              text[],
    p_query               text,
    p_purpose             text default 'converse',
    p_query_embedding     double precision[] default null,  -- 384 numbers; a vector casts with ::real[]
    p_mode                text default null,          -- hybrid, lexical or dense; NULL: the tenant's default
    p_limit               integer default 10,
    p_include_superseded  boolean default false,
    p_at                  timestamptz default null,
    p_query_model         text default null           -- the model that embedded the query, if known
)
returns table (
    rank integer, memory_id bigint, scope text, kind text, title text, body text, score double precision,
    lexical_rank integer, dense_rank integer, cosine double precision, bm25 double precision, provenance jsonb,
    item text, fact_id bigint, fact_rank integer, meta jsonb
)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_set jsonb := _settings();
    v_principal bigint := _peer_id(p_principal);
    v_mode text := coalesce(p_mode, v_set ->> 'default_mode');
    v_include boolean := coalesce(p_include_superseded, false);
    v_depth integer := (v_set ->> 'arm_candidates')::integer;
    v_walk integer := (v_set ->> 'walk_depth')::integer;
    v_rrf_k double precision := (v_set ->> 'rrf_k')::double precision;
    v_floor double precision := (v_set ->> 'dense_floor')::double precision;
    v_model text := v_set ->> 'embedding_model';
    v_version integer := (v_set ->> 'embedding_input_version')::integer;
    v_k1 double precision := (v_set ->> 'bm25_k1')::double precision;
    v_b double precision := (v_set ->> 'bm25_b')::double precision;
    v_terms text[] := '{}';
    v_kept text[] := '{}';
    v_dropped text[] := '{}';
    v_idf double precision[];
    v_kept_df bigint[];
    v_recruit_query tsquery;
    v_recruit_queries tsquery[];
    v_pair_query tsquery;
    v_recruited_by tsquery;
    v_recruited boolean := false;
    v_documents bigint;
    v_avg_length double precision;
    v_stats_source text;
    v_query tsquery;
    v_term_queries tsquery[];
    v_lex_ids bigint[] := '{}';
    v_lex_scores double precision[] := '{}';
    v_dense_ids bigint[] := '{}';
    v_dense_cos double precision[] := '{}';
    v_dense_available boolean := false;
    v_dense_reason text;
    v_dense_method text;
    v_eligible_probe bigint;
    v_fused_ids bigint[] := '{}';
    v_kept_ids bigint[] := '{}';
    v_missing bigint;
    v_meta jsonb;
    v_embedding __ext__.vector;
    v_entities bigint[] := '{}';
    v_fact_ids bigint[] := '{}';
    v_any_term tsquery;
    -- The dense arm's HNSW settings are set for this call and restored after
    -- (a SET clause on the function would need rights the owner lacks).
    v_saved_ef text := current_setting('hnsw.ef_search', true);
    v_saved_iterative text := current_setting('hnsw.iterative_scan', true);
    v_saved_plan_mode text := current_setting('plan_cache_mode');
begin
    perform _check_scopes(p_scopes);
    perform _check_purpose(p_purpose);
    perform _check_one_of(v_mode, 'recall mode', array['hybrid', 'lexical', 'dense']);
    if p_limit is null or p_limit < 1 or p_limit > v_walk then
        perform _fail('PR107', format('limit must be 1 to %s, not %s', v_walk, coalesce(p_limit::text, 'NULL')));
    end if;
    perform _check_text(p_query, 'query', 10000);
    -- Each arm contributes twice the rows asked for (at least arm_candidates).
    -- With rrf_k = 60 a memory ranked d in both arms outscores the other arm's
    -- first alone whenever d < 62: fusing deep lists lets agreement between
    -- two mediocre rankings outvote either arm's best.
    v_depth := greatest(v_depth, 2 * p_limit);
    -- None of the plans below depends on the values they are run with (the
    -- lexical candidates, which do, are planned per call as dynamic SQL), but
    -- PostgreSQL would re-plan several of them on every call: ~1 ms.
    perform set_config('plan_cache_mode', 'force_generic_plan', true);

    -- 2. Lexical arm.
    if v_mode in ('hybrid', 'lexical') then
        select coalesce(array_agg(distinct u.lexeme order by u.lexeme), '{}')
          into v_terms from unnest(to_tsvector('english', p_query)) u;
        if cardinality(v_terms) > 0 then
            with freq as (
                select * from _term_frequencies(v_terms)
            ), judged as (
                select t.*, cardinality(v_terms) >= (v_set ->> 'prune_min_terms')::integer
                            and t.df >= (v_set ->> 'prune_df_ratio')::double precision * t.documents
                            -- Pruning removes noise, it never empties a query: when every
                            -- term is common, the rarest one is kept.
                            and t.term <> (select r.term from freq r order by r.df, r.term limit 1)
                           as drop
                  from freq t)
            select array_agg(f.term order by f.term) filter (where not f.drop),
                   coalesce(array_agg(f.term order by f.term) filter (where f.drop), '{}'),
                   array_agg(ln(1 + (f.documents - f.df + 0.5) / (f.df + 0.5)) order by f.term) filter (where not f.drop),
                   array_agg(f.df order by f.term) filter (where not f.drop),
                   max(f.documents), max(f.avg_length), max(f.source)
              into v_kept, v_dropped, v_idf, v_kept_df, v_documents, v_avg_length, v_stats_source
              from judged f;
            v_kept := coalesce(v_kept, '{}');
        end if;
        if cardinality(v_kept) > 0 then
            v_query := array_to_string(array(select quote_literal(t) from unnest(v_kept) t), ' | ')::tsquery;
            v_term_queries := array(select quote_literal(t)::tsquery from unnest(v_kept) t);
            -- Candidates are recruited by the narrowest of these queries that finds
            -- at least arm_candidates eligible memories; every kept term still
            -- scores each candidate (BM25 over all of them). Matching every memory
            -- that shares a common word is what makes the arm slow at scale, and
            -- a memory with only common words rarely outranks one with a rare word.
            -- The rare terms are the rarest ones whose document frequencies add up
            -- to at most lexical_match_budget, and at least arm_candidates (so a
            -- term the corpus lacks does not stand alone).
            --   a. if the rare terms still match more than the budget: memories with
            --      a rare term and any other kept term (holding two query terms
            --      outranks holding one, short of a large gap in rarity or length);
            --   b. the rare terms;
            --   c. every kept term.
            with ordered as (
                select u.term, sum(u.df) over w as running, coalesce(sum(u.df) over w - u.df, 0) as before,
                       row_number() over w as n
                  from unnest(v_kept, v_kept_df) as u(term, df)
                window w as (order by u.df, u.term)
            ), rare as (
                select o.* from ordered o
                 where o.n = 1 or o.before < v_depth or o.running <= (v_set ->> 'lexical_match_budget')::bigint
            )
            select array_to_string(array(select quote_literal(r.term) from rare r order by r.n), ' | ')::tsquery,
                   case when max(r.running) > (v_set ->> 'lexical_match_budget')::bigint and cardinality(v_kept) >= 2 then
                       array_to_string(array(
                           select '(' || quote_literal(x.term) || ' & (' ||
                                  array_to_string(array(select quote_literal(o) from unnest(v_kept) o where o <> x.term), ' | ')
                                  || '))'
                             from rare x order by x.n), ' | ')::tsquery
                   end
              into v_recruit_query, v_pair_query
              from rare r;
            v_recruit_queries := array_remove(array[v_pair_query,
                                                    case when numnode(v_recruit_query) < numnode(v_query) then v_recruit_query end,
                                                    v_query], null);
            for i in 1 .. cardinality(v_recruit_queries) loop
                select coalesce(array_agg(c.id order by c.ord), '{}'), coalesce(array_agg(c.score order by c.ord), '{}')
                  into v_lex_ids, v_lex_scores
                  from _lexical_candidates(v_principal, p_scopes, p_purpose, v_include, p_at, v_recruit_queries[i],
                                           v_term_queries, v_kept, v_idf, v_k1, v_b, v_avg_length, v_depth)
                       with ordinality as c(id, score, ord);
                v_recruited_by := v_recruit_queries[i];
                exit when cardinality(v_lex_ids) >= v_depth;
            end loop;
            v_recruited := v_recruited_by is distinct from v_query;
        end if;
    end if;

    -- 3. Dense arm.
    if v_mode in ('hybrid', 'dense') then
        if p_query_embedding is null then
            v_dense_reason := 'no query embedding';
        elsif cardinality(p_query_embedding) <> 384 or array_ndims(p_query_embedding) <> 1
              or array_position(p_query_embedding, null) is not null then
            perform _fail('PR107', format('the query embedding must be 384 numbers, not %s',
                                          coalesce(array_dims(p_query_embedding), 'empty')));
        elsif p_query_model is not null and p_query_model <> v_model then
            v_dense_reason := format('query embedded with %s, memories with %s', p_query_model, v_model);
        elsif not exists (select 1 from memory_embedding me where me.model = v_model and me.input_version = v_version) then
            v_dense_reason := 'no embeddings yet';
        else
            v_dense_available := true;
            v_embedding := p_query_embedding::__ext__.vector;
            perform set_config('hnsw.ef_search', v_set ->> 'hnsw_ef_search', true);
            perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
            -- Few eligible rows: exact distances over them are cheap and exact.
            -- Many: the HNSW index, iterating past rows the filter rejects.
            select count(*) into v_eligible_probe from (
                select 1 from _eligible_memories(v_principal, p_scopes, p_purpose, v_include, p_at) e
                 limit (v_set ->> 'exact_dense_below')::integer) x;
            if v_eligible_probe < (v_set ->> 'exact_dense_below')::integer then
                v_dense_method := 'exact';
                with nearest as (
                    select e.id, me.embedding operator(__ext__.<=>) v_embedding as distance
                      from _eligible_memories(v_principal, p_scopes, p_purpose, v_include, p_at) e
                      join memory_embedding me on me.memory_id = e.id
                     where me.model = v_model and me.input_version = v_version
                     -- "+ 0": an ordering the HNSW index cannot serve, so this path stays exact.
                     order by (me.embedding operator(__ext__.<=>) v_embedding) + 0, e.id
                     limit v_depth)
                select coalesce(array_agg(n.id order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}'),
                       coalesce(array_agg(1 - n.distance order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}')
                  into v_dense_ids, v_dense_cos from nearest n;
            else
                v_dense_method := 'hnsw';
                -- Eligibility is a per-row filter on the index scan ("offset 0" keeps
                -- the planner from turning it into a join that reads every vector),
                -- so the iterative scan walks the graph until v_depth eligible rows pass.
                with nearest as (
                    select me.memory_id as id, me.embedding operator(__ext__.<=>) v_embedding as distance
                      from memory_embedding me
                     where me.model = v_model and me.input_version = v_version
                       and exists (select 1 from _eligible_memories(v_principal, p_scopes, p_purpose, v_include, p_at) e
                                    where e.id = me.memory_id offset 0)
                     order by me.embedding operator(__ext__.<=>) v_embedding
                     limit v_depth)
                select coalesce(array_agg(n.id order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}'),
                       coalesce(array_agg(1 - n.distance order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}')
                  into v_dense_ids, v_dense_cos from nearest n;
            end if;
        end if;
        perform set_config('hnsw.ef_search', coalesce(v_saved_ef, '40'), true);
        perform set_config('hnsw.iterative_scan', coalesce(v_saved_iterative, 'off'), true);
    else
        v_dense_reason := 'mode is lexical';
    end if;

    -- 4. Fusion, and 5. the permission walk over the first v_walk candidates.
    v_fused_ids := _rrf_fuse(v_lex_ids, v_dense_ids, v_rrf_k, v_walk);
    v_kept_ids := _walk_provenance(v_fused_ids, v_principal, p_scopes);

    -- Facts about the entities the query names (by name or alias), valid at
    -- the requested time and currently believed; ranked by how many query
    -- terms their statement shares, then salience. Fused as a third list.
    v_entities := _entities_in_text(p_scopes, p_query);
    if cardinality(v_entities) > 0 then
        v_any_term := nullif(array_to_string(array(select quote_literal(u.lexeme)
                                                     from unnest(to_tsvector('english', p_query)) u), ' | '), '')::tsquery;
        with about as (
            select f.id, f.statement, f.predicate, f.salience, f.confidence
              from _eligible_facts(v_principal, p_scopes, p_purpose, coalesce(p_at, now()), null) f
             where f.subject_id = any (v_entities)
            union
            select f.id, f.statement, f.predicate, f.salience, f.confidence
              from _eligible_facts(v_principal, p_scopes, p_purpose, coalesce(p_at, now()), null) f
             where f.object_id = any (v_entities)
        ), ranked as (
            select a.id, coalesce(ts_rank(to_tsvector('english', a.statement || ' ' || replace(a.predicate, '_', ' ')),
                                          v_any_term), 0) as relevance, a.salience, a.confidence
              from about a
             order by 2 desc, a.salience desc, a.confidence desc, a.id desc
             limit (v_set ->> 'recall_fact_limit')::integer)
        select coalesce(array_agg(r.id order by r.relevance desc, r.salience desc, r.confidence desc, r.id desc), '{}')
          into v_fact_ids from ranked r;
    end if;

    -- 7. Metadata, with counts taken after the walk.
    -- Every live memory without a current embedding has a job (the write path
    -- and set_embedding_version queue them), so the queue answers this. The
    -- count stops at 1000: after a large import, counting a backlog of tens of
    -- thousands would cost every recall ~100 ms until the worker catches up.
    select count(*) into v_missing from (
        select 1 from embedding_job j
          join _eligible_memories(v_principal, p_scopes, p_purpose, v_include, p_at) e on e.id = j.memory_id
         limit 1001) x;
    v_meta := jsonb_build_object(
        'query', p_query, 'mode', v_mode, 'purpose', p_purpose,
        'terms', to_jsonb(v_terms), 'dropped_terms', to_jsonb(v_dropped), 'term_stats', v_stats_source,
        'recruited_by_rare_terms', v_recruited, 'recruited_by', v_recruited_by::text,
        'dense_available', v_dense_available, 'dense_reason', v_dense_reason, 'dense_method', v_dense_method,
        'lexical_count', (select count(*) from unnest(v_lex_ids) i where i = any (v_kept_ids)),
        'dense_count', (select count(*) from unnest(v_dense_ids) i where i = any (v_kept_ids)),
        'fused_count', cardinality(v_kept_ids),
        'fact_count', cardinality(v_fact_ids),
        -- the entities whose facts were found (an entity only a hidden fact names stays unnamed)
        'entities', (select coalesce(jsonb_agg(e.name order by e.name), '[]') from entity e
                      where e.id = any (v_entities)
                        and exists (select 1 from fact f where f.id = any (v_fact_ids)
                                       and (f.subject_id = e.id or f.object_id = e.id))),
        'returned', least(p_limit, cardinality(v_kept_ids) + cardinality(v_fact_ids)),
        'missing_embeddings', least(v_missing, 1000),
        'missing_embeddings_more', v_missing > 1000,
        'watermarks', (select jsonb_object_agg(s.name, s.log_watermark) from scope s where s.name = any (p_scopes)),
        'embedding_queue', (select count(*) from embedding_job));
    perform set_config('plan_cache_mode', v_saved_plan_mode, true);

    return query
    with items as (
        select 'memory'::text as item, k.id, k.ord::integer as pos,
               coalesce(1.0 / (v_rrf_k + array_position(v_lex_ids, k.id)), 0)
                 + coalesce(1.0 / (v_rrf_k + array_position(v_dense_ids, k.id)), 0) as score
          -- the walk keeps fused order, so only the first p_limit can be returned
          from unnest(v_kept_ids[1:p_limit]) with ordinality as k(id, ord)
        union all
        select 'fact', f.id, f.ord::integer, 1.0 / (v_rrf_k + f.ord)
          from unnest(v_fact_ids) with ordinality as f(id, ord)
    ), top as (
        -- On a tie a fact comes first: it is current, about an entity the
        -- query names, and carries its quote.
        select i.*, row_number() over (order by i.score desc, i.item, i.pos)::integer as r
          from items i
         order by i.score desc, i.item, i.pos
         limit p_limit
    )
    select t.r, m.id, m.scope, m.kind, m.title, m.body, t.score,
           array_position(v_lex_ids, m.id), array_position(v_dense_ids, m.id),
           v_dense_cos[array_position(v_dense_ids, m.id)], v_lex_scores[array_position(v_lex_ids, m.id)],
           pv.provenance, 'memory'::text, null::bigint, null::integer, null::jsonb
      from top t join memory m on m.id = t.id
      join _provenance_of(array(select t2.id from top t2 where t2.item = 'memory'), v_principal, p_scopes) pv
        on pv.memory_id = m.id
     where t.item = 'memory'
    union all
    select t.r, null::bigint, f.scope, 'fact'::text, f.predicate, f.statement, t.score,
           null::integer, null::integer, null::double precision, null::double precision,
           jsonb_build_object('subject', se.name, 'predicate', f.predicate,
                              'object', coalesce(oe.name, f.object_value), 'valid', f.valid::text,
                              'confidence', f.confidence, 'evidence', _fact_evidence_json(f.id)),
           'fact'::text, f.id, t.pos, null::jsonb
      from top t join fact f on f.id = t.id
      join entity se on se.id = f.subject_id
      left join entity oe on oe.id = f.object_id
     where t.item = 'fact'
     order by 1;
    return query select null::integer, null::bigint, null::text, null::text, null::text, null::text,
                        null::double precision, null::integer, null::integer, null::double precision,
                        null::double precision, null::jsonb, 'meta'::text, null::bigint, null::integer, v_meta;
end
$$;
comment on function __tenant__._recall(text, text[], text, text, double precision[], text, integer, boolean, timestamptz, text) is
    'Internal: recall''s items, then one row (item = meta) with the metadata of this call.';

create or replace function __tenant__.recall(
    p_principal           text,
    p_scopes              text[],
    p_query               text,
    p_purpose             text default 'converse',
    p_query_embedding     double precision[] default null,
    p_mode                text default null,
    p_limit               integer default 10,
    p_include_superseded  boolean default false,
    p_at                  timestamptz default null,
    p_query_model         text default null
)
returns table (
    rank integer, memory_id bigint, scope text, kind text, title text, body text, score double precision,
    lexical_rank integer, dense_rank integer, cosine double precision, bm25 double precision, provenance jsonb,
    item text, fact_id bigint, fact_rank integer
)
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select r.rank, r.memory_id, r.scope, r.kind, r.title, r.body, r.score, r.lexical_rank, r.dense_rank,
           r.cosine, r.bm25, r.provenance, r.item, r.fact_id, r.fact_rank
      from _recall(p_principal, p_scopes, p_query, p_purpose, p_query_embedding, p_mode, p_limit,
                   p_include_superseded, p_at, p_query_model) r
     where r.meta is null
     order by r.rank
$$;
comment on function __tenant__.recall(text, text[], text, text, double precision[], text, integer, boolean, timestamptz, text) is
    'Ranked recall of the memories (and facts about entities the query names) the principal may see: BM25 lexical arm with term pruning, floored dense arm, RRF, permission walk. With its metadata: recall_answer().';

-- The same recall, answered as one row: the items (a JSON array of objects
-- with recall()'s columns) and the metadata of this very call.
create or replace function __tenant__.recall_answer(
    p_principal           text,
    p_scopes              text[],
    p_query               text,
    p_purpose             text default 'converse',
    p_query_embedding     double precision[] default null,
    p_mode                text default null,
    p_limit               integer default 10,
    p_include_superseded  boolean default false,
    p_at                  timestamptz default null,
    p_query_model         text default null
)
returns table (items jsonb, meta jsonb)
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(jsonb_agg(to_jsonb(r) - 'meta' order by r.rank) filter (where r.meta is null), '[]'),
           (array_agg(r.meta) filter (where r.meta is not null))[1]
      from _recall(p_principal, p_scopes, p_query, p_purpose, p_query_embedding, p_mode, p_limit,
                   p_include_superseded, p_at, p_query_model) r
$$;
comment on function __tenant__.recall_answer(text, text[], text, text, double precision[], text, integer, boolean, timestamptz, text) is
    'recall() and its metadata (counts after the walk, dropped terms, dense_available and why not, freshness) in one row.';

-- Reciprocal Rank Fusion of two ranked lists: score = sum of 1 / (k + rank)
-- over the lists an id is in; best p_limit ids first (ties by id).
create or replace function __tenant__._rrf_fuse(p_first bigint[], p_second bigint[], p_k double precision,
                                               p_limit integer)
returns bigint[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with a as (
        select x.id, x.ord::integer as r from unnest(p_first) with ordinality as x(id, ord)
    ), b as (
        select x.id, x.ord::integer as r from unnest(p_second) with ordinality as x(id, ord)
    ), fused as (
        select coalesce(a.id, b.id) as id,
               coalesce(1.0 / (p_k + a.r), 0) + coalesce(1.0 / (p_k + b.r), 0) as s
          from a full join b on b.id = a.id
    )
    select coalesce(array_agg(f.id order by f.s desc, f.id), '{}')
      from (select * from fused order by s desc, id limit p_limit) f
$$;
comment on function __tenant__._rrf_fuse(bigint[], bigint[], double precision, integer) is
    'Internal: Reciprocal Rank Fusion of two ranked id lists, best p_limit first.';

-- The lexical arm's BM25 over a bounded candidate set: every memory matching
-- p_match is first scored as if each query term occurred once (a tsvector
-- membership test per term, cheap), and only the best max(2 x p_depth, 100)
-- are scored exactly (term frequencies from the tsvector's positions,
-- costly). Memories are short, so a repeated term rarely moves a match from
-- outside the bound into the top; with 40 instead of 100 it did, on LoCoMo
-- (lexical recall@10 0.657 instead of 0.661). Rows come best first.
create or replace function __tenant__._lexical_candidates(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_match tsquery, p_term_queries tsquery[], p_terms text[], p_idf double precision[],
    p_k1 double precision, p_b double precision, p_avg_length double precision, p_depth integer)
returns table (id bigint, score double precision)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    -- Dynamic SQL so that each call is planned for its own tsquery: a generic
    -- plan cannot tell a rare term (an index probe) from a common one. The
    -- quick score is spelled out term by term (a CASE per term) because a
    -- subquery per matched row costs twice as much as the row's heap visit.
    return query execute format($q$
    with matched as (
        select e.id, e.tsv,
               (%s) / (1 + $10 * (1 - $11 + $11 * length(e.tsv) / $12)) as quick
          from _eligible_memories($1, $2, $3, $4, $5) e
         where e.tsv @@ $6
         order by quick desc, e.id
         limit greatest(2 * $13, 100)
    )
    select m.id,
           (select sum($9[array_position($8, u.lexeme)] * (cardinality(u.positions) * ($10 + 1))
                       / (cardinality(u.positions) + $10 * (1 - $11 + $11 * length(m.tsv) / $12)))
              from unnest(m.tsv) u where u.lexeme = any ($8)) as s
      from matched m
     order by s desc, m.id
     limit $13$q$,
        array_to_string(array(select format('case when e.tsv @@ $7[%1$s] then $9[%1$s] else 0 end', i)
                                from generate_subscripts(p_term_queries, 1) i), ' + '))
    using p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_match, p_term_queries, p_terms, p_idf,
          p_k1, p_b, p_avg_length, p_depth;
end
$$;
comment on function __tenant__._lexical_candidates(bigint, text[], text, boolean, timestamptz, tsquery, tsquery[], text[],
                                                    double precision[], double precision, double precision,
                                                    double precision, integer) is
    'Internal: BM25 over the eligible memories matching p_match, best p_depth first.';

-- Step 5: keeps, in order, the candidates whose whole derived_from chain the
-- principal may see (superseded sources are history and stay visible;
-- forgotten or other-audience sources are not).
create or replace function __tenant__._walk_provenance(p_candidates bigint[], p_principal_id bigint, p_scopes text[])
returns bigint[]
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
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
         where not exists (select 1 from _eligible_memories(p_principal_id, p_scopes, null, true, null) e
                            where e.id = r.source)
    )
    select coalesce(array_agg(c.id order by c.ord), '{}')
      from unnest(p_candidates) with ordinality c(id, ord)
     where c.id not in (select h.root from hidden h)
$$;
comment on function __tenant__._walk_provenance(bigint[], bigint, text[]) is
    'Internal: the candidates, in order, whose provenance the principal may see.';

