-- recall: ranked retrieval, in the design's order (section 6). Each step is
-- a function of its own that a DBA can call and test alone; recall_answer()
-- runs them in order. Each step's file is in this folder (plpgsql/recall/),
-- named for the step, and plpgsql/install_order lists them in this order.
--   0. as of a past moment (p_as_of; NULL: now): the memories changed since
--      then, as they stood then (text, forgotten, superseded):
--        _memories_as_of (recall/as_of.sql); each step below reads the other
--        memories only when unchanged since (_unchanged_since), and the arms
--        rank the changed ones by their text (and vector) of then; facts are
--        those valid and believed then
--   1. eligibility (the one rule) before anything is ranked:
--        _memory_eligible (shared/eligibility.sql); every step filters with it;
--        when the principal may see only a few memories, their ids, read once
--        and shared by both arms: _few_eligible (recall/dense_arm.sql)
--   2. lexical arm: BM25 from document frequencies; from prune_min_terms query
--      terms on, terms in prune_df_ratio or more of memories are dropped:
--        _lexical_arm = _query_terms, _prune_terms, _lexical_recruiters,
--        _lexical_candidates (recall/lexical_arm.sql)
--   2b. with recall_window_beside on, the lexical arm once more over the
--      memories' windows, a list of its own for steps 4 and 6:
--        _lexical_lists = _lexical_arm twice (recall/window_arm.sql)
--   3. dense arm: cosine against current embeddings, floor dense_floor; exact
--      when few memories are eligible, HNSW with iterative scan otherwise:
--        _dense_reason, _dense_arm (recall/dense_arm.sql)
--      facts about the entities the query names, a third list:
--        _fact_arm (recall/fact_arm.sql)
--   4. fusion, by the setting fusion: Reciprocal Rank Fusion (rrf), sum of
--      1 / (rrf_k + rank) over each arm's first max(arm_candidates, 2 x limit);
--      or score fusion (scores), each arm's scores over its best, added, over
--      each arm's first max(arm_candidates, 10 x limit); or both (rrf_scores):
--      RRF chooses the rows, the arms' evidence orders them:
--        _fused_ids = _rrf_fuse or _score_fuse, _evidence_scores (recall/fusion.sql);
--      with recall_people_arm on, the memories said by the peers or about the
--      entities the question names, a list of its own fused by RRF; with
--      recall_question_time on, those said within the time the question names:
--        _fused_candidates = _people_arm, _time_arm, _rrf_fuse4
--        (recall/people_arm.sql, recall/time_arm.sql, recall/fusion.sql);
--      with recall_window_beside on, the windows' list too, it and the
--      lexical arm's at half weight each
--   5. permission walk over the fused list: a candidate whose provenance the
--      principal may not see is dropped:
--        _walk_provenance (recall/permission_walk.sql)
--   5b. an answer spread over the conversation: with recall_second_round
--      on, the query's terms the first rows do not hold are searched for
--      again and those rows take turns with the walk's; with
--      recall_neighbour_turns on, the turns next to the first hits come in
--      below the rows that outscore them; with recall_session_spread on, a
--      session gives at most 30% of the rows while another session's row
--      waits close by:
--        _spread_over_answer = _uncovered_terms, _lexical_arm, _interleave_rounds,
--        _neighbour_turns, _walk_provenance, _session_spread
--        (recall/spread.sql, recall/neighbour_turns.sql)
--   6. under rrf_scores, the chosen rows ordered by their evidence (with
--      recall_question_time on, a row of the question's time counts as an
--      arm's first more): _ordering_evidence (recall/ordering.sql); any further
--      re-rank happens in the caller, on rows that passed
--   7. rows, plus metadata (counts after the walk, dropped terms,
--      dense_available, embeddings missing, freshness):
--        _recall_items (recall/rows.sql), _missing_embeddings and the
--        metadata here (recall_meta)
--
-- Each step takes and returns whole arrays and is called once per recall:
-- no step is called per row, so every set-wise query stays one query.
--
-- recall_answer() returns one value of the declared type recall_answer: the
-- items (recall_item[]) and the metadata (recall_meta) of this very call;
-- recall() returns the items as rows of recall_item (what a psql user reads).
-- The types are declared in migration 0027. The metadata is never kept
-- anywhere after the call: nothing of one principal's recall is readable by
-- a later call on the same connection.

-- How deep each arm reads for a recall of p_limit rows. Each arm contributes
-- twice the rows asked for (at least arm_candidates). With rrf_k = 60 a
-- memory ranked d in both arms outscores the other arm's first alone
-- whenever d < 62: fusing deep lists lets agreement between two mediocre
-- rankings outvote either arm's best. Score fusion needs no shallow cut: a
-- memory deep in one arm's list adds only what its score is worth next to
-- that arm's first, so it cannot outvote a strong hit; the arms' lists are
-- read ten times the rows asked for, so that what one arm ranks in its head
-- is found in the other's list when it is there at all.
create or replace function __tenant__._arm_depth(p_limit integer, p_settings jsonb)
returns integer
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select case when p_settings ->> 'fusion' = 'scores'
                then least(greatest((p_settings ->> 'arm_candidates')::integer, 10 * p_limit),
                           (p_settings ->> 'walk_depth')::integer)
                else greatest((p_settings ->> 'arm_candidates')::integer, 2 * p_limit) end
$$;
comment on function __tenant__._arm_depth(integer, jsonb) is
    'Internal: how many rows each recall arm reads for p_limit rows (twice, or ten times under score fusion).';

-- Before the arms: whether the principal may see only a few memories (the
-- dense arm then searches them exactly, and the lexical arm works among the
-- same ids instead of the whole tenant's text index). Learning that they are
-- many reads exact_dense rows (~1.5 ms at 100k memories, more at 1M), so when
-- the planner expects at least twice that many, the index is searched first,
-- visiting at most twice that many elements: finding p_depth eligible
-- memories settles it without the read, and its rows are the dense arm's
-- (method set). Finding fewer (the estimate was wrong), the read decides.
create or replace function __tenant__._few_or_dense(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_query_embedding double precision[], p_depth integer, p_settings jsonb, p_as_of timestamptz default null,
    p_as_of_ids bigint[] default null)
returns table (few bigint[], ids bigint[], cosines double precision[], method text)
language plpgsql  -- volatile: the dense arm sets (and restores) the HNSW settings
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_exact_below integer;
    -- Below this many rows the read that tells few from many costs less than
    -- the estimate that could spare it (~0.1 ms against ~0.3 us a row).
    c_estimate_from constant integer := 2000;
    v_returned integer;
    v_documents bigint;
    v_many boolean := false;
begin
    -- The estimate (~0.2 ms) is worth asking when many may be eligible: a
    -- large bound, or a tenant whose last term-statistics snapshot counted
    -- at least twice the bound. Reading 1,550 eligible rows of a 10k tenant
    -- to learn that they are many cost 0.8 ms of every recall there, which
    -- made a 10k tenant recall slower than a 100k one (bench.recall_phases).
    -- The snapshot, which the bound grows with too, is read by a statement of
    -- its own (on Citus: the fast path).
    select c.documents into v_documents from corpus_stat c;
    v_exact_below := _exact_dense_limit(p_depth, v_documents, p_settings);
    if (v_exact_below >= c_estimate_from or v_documents >= 2 * v_exact_below)
       and _eligible_estimate(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_as_of)
           >= 2 * v_exact_below then
        select a.ids, a.cosines, a.method, a.returned into ids, cosines, method, v_returned
          from _dense_arm(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_query_embedding,
                          p_depth, p_settings, true, null, 2 * v_exact_below, p_as_of, p_as_of_ids) a;
        if v_returned < p_depth then
            method := null;
        end if;
    end if;
    if method is null then
        -- On Citus (no estimate) a tenant that counted at least the bound is first asked whether its
        -- principal sees as many, a read that returns no ids: most do, and then no ids are read.
        if current_setting('citus.version', true) is not null and coalesce(v_documents >= v_exact_below, false) then
            if _eligible_at_least(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, v_exact_below,
                                  p_as_of) then
                v_many := true;
            end if;
        end if;
        if not v_many then
            few := _few_eligible(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, v_exact_below,
                                 p_as_of);
        end if;
        ids := null;
        cosines := null;
    end if;
    return next;
end
$$;
comment on function __tenant__._few_or_dense(bigint, text[], text, boolean, timestamptz, double precision[], integer,
                                             jsonb, timestamptz, bigint[]) is
    'Internal: before recall''s arms, the ids the principal may see when they are few, or else the dense arm''s rows when the index settled it.';

-- Eligible memories still waiting for their vector, counted up to 1001.
-- Every live memory without a current embedding has a job (the write path and
-- set_embedding_version queue them), so the queue answers this. The count
-- stops at 1000: after a large import, counting a backlog of tens of
-- thousands would cost every recall ~100 ms until the worker catches up. It
-- starts from the queue and looks each job's memory up ("offset 0" keeps it a
-- lookup): as a join, the plan made while the queue was full read every
-- eligible memory on each recall after the worker emptied it.
create or replace function __tenant__._missing_embeddings(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz)
returns bigint
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint;
begin
    select count(*) from (
        select 1 from embedding_job j
         where exists (select 1 from memory e
                        where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                               p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at) and e.id = j.memory_id offset 0)
         limit 1001) x
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._missing_embeddings(bigint, text[], text, boolean, timestamptz) is
    'Internal: how many memories the principal may see still wait for their embedding, counted up to 1001.';

-- How current recall's answer is: memories the principal may see that still
-- wait for their embedding (up to 1001), each authorised scope's log
-- watermark, the embedding queue. Each table is read by a statement of its own:
-- on Citus a statement with a table is sent to the shard with every variable
-- it names, and one that named recall's 39 lost a parameter's type on the way.
create or replace function __tenant__._recall_freshness(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    out missing bigint, out watermarks jsonb, out queued bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    -- Each a SELECT ... INTO of one table (on Citus: the fast path), not an assignment of a subquery. A
    -- memory waiting for its vector has a job: with none queued, none waits.
    select count(*) into queued from embedding_job;
    missing := case when queued > 0 then _missing_embeddings(p_principal_id, p_scopes, p_purpose,
                                                              p_include_superseded, p_at) else 0 end;
    select jsonb_object_agg(s.name, s.log_watermark) into watermarks from scope s where s.name = any (p_scopes);
end
$$;
comment on function __tenant__._recall_freshness(bigint, text[], text, boolean, timestamptz) is
    'Internal: recall''s freshness (memories waiting for an embedding, log watermarks, the embedding queue).';

-- Recall, its steps in order. None of the steps' plans depends on the values
-- they are run with (the lexical candidates, which do, are planned per call as
-- dynamic SQL), but PostgreSQL would re-plan several of them on every call:
-- ~1 ms. So plan_cache_mode is force_generic_plan while the steps run; the
-- setting is this transaction's, so it reaches the steps' statements. On Citus
-- too (not _plan_cache_mode, which keeps the session's mode there for the
-- writers' INSERT ... SELECT): recall only reads, a single-shard table's
-- statement goes to its one shard whatever the values, and the statements
-- that read no table (the fusion, the rows' assembly) are planned once per
-- session instead of on every call.
create or replace function __tenant__.recall_answer(
    p_principal           text,
    p_scopes              text[],
    p_query               text,
    p_purpose             text default 'converse',
    p_query_embedding     double precision[] default null,  -- _embedding_dimensions() numbers; a vector casts with ::real[]
    p_mode                text default null,          -- hybrid, lexical or dense; NULL: the tenant's default
    p_limit               integer default 10,
    p_include_superseded  boolean default false,
    p_at                  timestamptz default null,
    p_query_model         text default null,          -- the model that embedded the query, if known
    p_as_of               timestamptz default null    -- answer as the memory stood then (NULL: now)
)
returns __tenant__.recall_answer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_set jsonb := _settings();
    v_principal bigint := _peer_id(p_principal);
    v_mode text := coalesce(p_mode, v_set ->> 'default_mode');
    v_include boolean := coalesce(p_include_superseded, false);
    v_depth integer;
    v_terms text[] := '{}'; v_dropped text[] := '{}';  -- the query's terms, those pruned
    v_stats_source text;
    v_recruited_by tsquery;
    v_recruited boolean := false;
    v_lex_ids bigint[] := '{}'; v_lex_scores double precision[] := '{}';     -- the lexical arm's rows
    v_window_ids bigint[] := '{}'; v_window_scores double precision[] := '{}';  -- recall_window_beside's list
    v_dense_reason text;
    v_few bigint[];              -- the ids the principal may see, when they are few
    v_dense_method text;
    v_dense_ids bigint[] := '{}'; v_dense_cos double precision[] := '{}';  -- the dense arm's rows
    v_kept_ids bigint[];
    v_evidence double precision[];  -- fusion rrf_scores: the order of the rows RRF chose
    v_fact_ids bigint[];
    v_entities text[];
    v_answer recall_answer;
    v_lag record;
    v_as_of record;              -- as of a past moment: the memories changed since (_memories_as_of)
    v_saved_plan_mode text := current_setting('plan_cache_mode');
begin
    perform _check_scopes(p_scopes);
    perform _check_purpose(p_purpose);
    perform _check_one_of(v_mode, 'recall mode', array['hybrid', 'lexical', 'dense']);
    perform _check_limit(p_limit, (v_set ->> 'walk_depth')::integer);
    perform _check_time(p_at, 'p_at');
    perform _check_text(p_query, 'query', 10000);
    v_as_of := _memories_as_of(v_principal, p_scopes, p_purpose, v_include, p_at, p_as_of, v_mode <> 'dense');
    v_depth := _arm_depth(p_limit, v_set);
    perform set_config('plan_cache_mode', 'force_generic_plan', true);  -- see above
    v_dense_reason := case when v_mode in ('hybrid', 'dense') then _dense_reason(p_query_embedding, p_query_model, v_set)
                           else 'mode is lexical' end;
    if v_dense_reason is null then                                           -- 1.
        select d.few, d.ids, d.cosines, d.method into v_few, v_dense_ids, v_dense_cos, v_dense_method
          from _few_or_dense(v_principal, p_scopes, p_purpose, v_include, p_at, p_query_embedding, v_depth, v_set,
                             p_as_of, v_as_of.vector_ids) d;
    end if;
    if v_mode in ('hybrid', 'lexical') then                                  -- 2.
        select a.* into v_lex_ids, v_lex_scores, v_terms, v_dropped, v_stats_source, v_recruited_by, v_recruited,
                        v_window_ids, v_window_scores  -- _lexical_lists' columns, in order
          from _lexical_lists(v_principal, p_scopes, p_purpose, v_include, p_at, p_query, v_depth, v_set, v_few,
                              p_as_of, v_as_of.ids, v_as_of.tsvs) a;                -- 2b.
    end if;
    if v_dense_reason is null and v_dense_method is null then                -- 3.
        select a.ids, a.cosines, a.method into v_dense_ids, v_dense_cos, v_dense_method
          from _dense_arm(v_principal, p_scopes, p_purpose, v_include, p_at, p_query_embedding, v_depth, v_set,
                          true, v_few, null, p_as_of, v_as_of.vector_ids) a;
    end if;
    select a.fact_ids, a.entities into v_fact_ids, v_entities
      from _fact_arm(v_principal, p_scopes, p_purpose, p_at, p_query, p_as_of) a;
    v_kept_ids := _walk_provenance(_fused_candidates(v_lex_ids, v_lex_scores, v_dense_ids, v_dense_cos,  -- 4.
                                                     v_principal, p_scopes, p_purpose, v_include, p_at, p_query,
                                                     v_set, v_window_ids), v_principal, p_scopes, p_as_of);  -- 5.
    v_kept_ids := _spread_over_answer(v_kept_ids, p_limit, v_terms, v_dropped, v_principal, p_scopes, p_purpose,  -- 5b.
                                      v_include, p_at, v_depth, v_set, v_few, p_as_of, v_as_of.ids, v_as_of.tsvs);
    v_evidence := _ordering_evidence(v_kept_ids[1:p_limit], v_lex_ids, v_lex_scores, v_dense_ids, v_dense_cos,
                                     p_query_embedding, v_principal, p_scopes, p_purpose, v_include, p_at, p_query,
                                     v_set, v_window_ids, v_window_scores);
    -- 7. Metadata, with counts taken after the walk (the tables are read apart: _recall_freshness).
    v_lag := _recall_freshness(v_principal, p_scopes, p_purpose, v_include, p_at);
    v_answer.meta := jsonb_populate_record(null::recall_meta, jsonb_build_object(  -- by field name
        'query', p_query, 'mode', v_mode, 'purpose', p_purpose, 'terms', v_terms, 'dropped_terms', v_dropped,
        'term_stats', v_stats_source, 'recruited_by_rare_terms', v_recruited, 'recruited_by', v_recruited_by::text,
        'dense_available', v_mode in ('hybrid', 'dense') and v_dense_reason is null, 'dense_reason', v_dense_reason,
        'dense_method', v_dense_method, 'fused_count', cardinality(v_kept_ids), 'entities', v_entities,
        'lexical_count', (select count(*) from unnest(v_lex_ids) i where i = any (v_kept_ids)),
        'dense_count', (select count(*) from unnest(v_dense_ids) i where i = any (v_kept_ids)),
        'returned', least(p_limit, cardinality(v_kept_ids) + cardinality(v_fact_ids)),
        'watermarks', v_lag.watermarks, 'embedding_queue', v_lag.queued, 'fact_count', cardinality(v_fact_ids),
        'as_of', p_as_of, 'missing_embeddings', least(v_lag.missing, 1000), 'missing_embeddings_more', v_lag.missing > 1000));
    select coalesce(array_agg(i order by i.rank), '{}') into v_answer.items
      from _recall_items(v_kept_ids, v_fact_ids, v_lex_ids, v_lex_scores, v_dense_ids, v_dense_cos,
                         (v_set ->> 'rrf_k')::double precision, p_limit, v_principal, p_scopes,
                         v_set ->> 'fusion', (v_set ->> 'dense_floor')::double precision, v_evidence, p_as_of) i;
    perform set_config('plan_cache_mode', v_saved_plan_mode, true);
    return v_answer;
end
$$;
comment on function __tenant__.recall_answer(text, text[], text, text, double precision[], text, integer, boolean, timestamptz, text,
                                             timestamptz) is
    'recall() and its metadata (counts after the walk, dropped terms, dense_available and why not, freshness) in one value: (items recall_item[], meta recall_meta). In psql: select (a.meta).* from recall_answer(...) a.';

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
    p_query_model         text default null,
    p_as_of               timestamptz default null
)
returns setof __tenant__.recall_item
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select i.*
      from unnest((recall_answer(p_principal, p_scopes, p_query, p_purpose, p_query_embedding, p_mode, p_limit,
                                 p_include_superseded, p_at, p_query_model, p_as_of)).items) i
     order by i.rank
$$;
comment on function __tenant__.recall(text, text[], text, text, double precision[], text, integer, boolean, timestamptz, text,
                                      timestamptz) is
    'Ranked recall of the memories (and facts about entities the query names) the principal may see: BM25 lexical arm with term pruning, floored dense arm, fusion (by default RRF chooses the rows and the arms'' evidence orders them), permission walk. With its metadata: recall_answer().';
