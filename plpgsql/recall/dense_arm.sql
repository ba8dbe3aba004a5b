-- Recall, step 3: the dense arm (plpgsql/recall/recall.sql composes the steps).
--
--   _check_query_embedding  PR154 unless a query embedding is _embedding_dimensions() finite numbers
--                           (message search checks with it too)
--   _dense_reason           why the arm cannot run (no query embedding, another
--                           model, no embeddings yet), or NULL when it can
--   _exact_dense_limit      how many eligible memories are "few": below it
--                           exact distances beat the index
--   _few_eligible           the eligible memories' ids when they are few (one
--                           read, shared by both arms), else NULL
--   _eligible_ids           its read on Citus, a statement of one table
--   _eligible_at_least      whether at least so many are eligible (no ids read)
--   _eligible_estimate      the planner's estimate of how many memories the
--                           principal may see (no rows read)
--   _nearest_among          the exact path's distances over the few ids
--   _nearest_by_index       the HNSW path on Citus, a table at a time
--   _dense_arm              cosine against the current embeddings of the
--                           eligible memories, floor dense_floor: exact when
--                           few are eligible, HNSW with iterative scan otherwise

create or replace function __tenant__._check_query_embedding(p_query_embedding double precision[])
returns void
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_query_embedding is not null
       and (cardinality(p_query_embedding) <> _embedding_dimensions() or array_ndims(p_query_embedding) <> 1
            or array_position(p_query_embedding, null) is not null
            -- array_position scans in C (NaN equals NaN for float8), where
            -- unnesting the numbers into rows cost ~0.1 ms a recall
            or array_position(p_query_embedding, 'NaN'::float8) is not null
            or array_position(p_query_embedding, 'Infinity'::float8) is not null
            or array_position(p_query_embedding, '-Infinity'::float8) is not null) then
        perform _fail('PR154', format('the query embedding must be %s finite numbers, not %s',
                                      _embedding_dimensions(), coalesce(array_dims(p_query_embedding), 'empty')),
                      format('Embed the query with the tenant''s model (its setting embedding_model; %s numbers), '
                             'or pass NULL.', _embedding_dimensions()));
    end if;
end
$$;
comment on function __tenant__._check_query_embedding(double precision[]) is
    'Internal: PR154 unless a query embedding is NULL or _embedding_dimensions() finite numbers.';

-- Degrade contract (design section 6): when the dense arm cannot contribute,
-- recall answers with the lexical rows and says why.
create or replace function __tenant__._dense_reason(p_query_embedding double precision[], p_query_model text,
                                                   p_settings jsonb default null)
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_model text := coalesce(p_settings -> 'embedding_model', _setting_value('embedding_model')) #>> '{}';
    v_version integer := (coalesce(p_settings -> 'embedding_input_version',
                                   _setting_value('embedding_input_version')) #>> '{}')::integer;
begin
    perform _check_length(p_query_model, 'query model name', 200);
    if p_query_embedding is null then
        return 'no query embedding';
    end if;
    perform _check_query_embedding(p_query_embedding);
    if p_query_model is not null and p_query_model <> v_model then
        return format('query embedded with %s, memories with %s', p_query_model, v_model);
    end if;
    -- a statement of the table alone, not an EXISTS subquery: on Citus the fast path
    perform 1 from memory_embedding me where me.model = v_model and me.input_version = v_version limit 1;
    if not found then
        return 'no embeddings yet';
    end if;
    return null;
end
$$;
comment on function __tenant__._dense_reason(double precision[], text, jsonb) is
    'Internal: why recall''s dense arm cannot run for this query embedding, or NULL when it can (PR154 for a malformed one).';

-- "Few" grows with the tenant: when a fraction f of N embedded memories is
-- eligible, the filtered HNSW scan visits about p_depth / f of them, and each
-- visit costs ~12 exact distances (a principal seeing 200 of 10k: 41 ms
-- through HNSW, 6 ms exactly); exact costs one distance per eligible row. So
-- exact wins below sqrt(12 x p_depth x N) eligible rows: 1,550 at 10k, 4,900
-- at 100k, 15,500 at 1M for 20 candidates. exact_dense_below is the floor;
-- 0 always searches the index. N is the live memories the last term-statistics
-- snapshot counted (corpus_stat.documents), not the planner's row estimate of
-- memory_embedding: on a Citus node that table is the shell of a shard and
-- estimates 0 rows, which kept the bound at its floor there, so a principal
-- seeing between the floor and the bound was searched exactly on one server
-- and through the index on Citus. The snapshot is the same figure on both.
create or replace function __tenant__._exact_dense_limit(p_depth integer, p_documents bigint,
                                                         p_settings jsonb default null)
returns integer
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select case when b.floor > 0
                then greatest(b.floor, ceil(sqrt(12 * p_depth * greatest(coalesce(p_documents, 0), 0)))::integer)
                else 0 end
      from (select (coalesce(p_settings -> 'exact_dense_below', _setting_value('exact_dense_below')) #>> '{}')::integer
                   as floor) b
$$;
comment on function __tenant__._exact_dense_limit(integer, bigint, jsonb) is
    'Internal: below this many eligible memories recall searches them exactly (0: never), for a tenant whose term-statistics snapshot counted p_documents live memories.';

-- One read of eligibility, stopping at p_below rows: the ids when fewer are
-- eligible (both arms then work among them), NULL when as many or more.
create or replace function __tenant__._few_eligible(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_below integer, p_as_of timestamptz default null)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    if current_setting('citus.version', true) is not null then
        -- On Citus an ARRAY(SELECT ...) of a tenant table is planned twice on every call (its
        -- distributed plan, then the shard's); the one-table read of _eligible_ids takes the fast
        -- path (0.68 -> 0.55 ms a call on the worker, 1,000 of 1,990 rows read). On one server
        -- the sublink, with its plan cached, is the cheaper (0.33 against 0.38 ms).
        v_result := array(select x.id from _eligible_ids(p_principal_id, p_scopes, p_purpose, p_include_superseded,
                                                         p_at, p_below, p_as_of) x);
    else
        -- Read into the variable first: a CASE naming the subquery twice ran it twice.
        v_result := array(select e.id
                            from memory e where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                                                 p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
                             and _unchanged_since(e.updated_at, p_as_of)
                           limit p_below);
    end if;
    return case when cardinality(v_result) < p_below then v_result end;
end
$$;
comment on function __tenant__._few_eligible(bigint, text[], text, boolean, timestamptz, integer, timestamptz) is
    'Internal: the ids of the memories the principal may see when there are fewer than p_below, else NULL (as of p_as_of: those unchanged since).';

-- The ids of up to p_below memories the principal may see, by a statement of
-- the memory table alone (on Citus the fast path): _few_eligible's read there.
create or replace function __tenant__._eligible_ids(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_below integer, p_as_of timestamptz default null)
returns table (id bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select e.id from memory e
     where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                            p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
       and _unchanged_since(e.updated_at, p_as_of)
     limit p_below;
end
$$;
comment on function __tenant__._eligible_ids(bigint, text[], text, boolean, timestamptz, integer, timestamptz) is
    'Internal: up to p_below ids of the memories the principal may see, read from the memory table alone.';

-- Whether the principal may see at least p_count memories: a statement of the
-- memory table alone that stops at the p_count-th and returns no ids. On
-- Citus, where a tenant holding that many memories usually lets its principal
-- see that many, recall asks this before _few_eligible (0.55 -> 0.39 ms a
-- call on the worker when they are many).
create or replace function __tenant__._eligible_at_least(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_count integer, p_as_of timestamptz default null)
returns boolean
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    if p_count <= 0 then
        return true;
    end if;
    perform 1 from memory e
     where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                            p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
       and _unchanged_since(e.updated_at, p_as_of)
    offset p_count - 1 limit 1;
    return found;
end
$$;
comment on function __tenant__._eligible_at_least(bigint, text[], text, boolean, timestamptz, integer, timestamptz) is
    'Internal: whether the principal may see at least p_count memories (as of p_as_of: those unchanged since), no ids read out.';

-- How many memories the planner expects _memory_eligible to admit: it
-- reads the column statistics (scopes, audiences, purposes), not the rows, so
-- it costs a plan (~0.1 ms) where _few_eligible reads up to p_below rows. An
-- estimate only chooses which search to try first; nothing is decided on it.
-- On a Citus node there is no estimate (NULL: _few_eligible's read decides).
-- Citus runs EXPLAIN of a distributed table on the shard's node over a
-- connection of its own, also when that node is this one; a delegated call
-- has read the tenant by local execution, and Citus then refused its next
-- statement ("cannot switch local execution status from local execution
-- required to local execution disabled"): a dense recall of any distributed
-- tenant large enough to ask failed. (Its plan's top node said 0 rows anyway.)
create or replace function __tenant__._eligible_estimate(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_as_of timestamptz default null)
returns double precision
language plpgsql  -- volatile: PostgreSQL runs EXPLAIN only in a volatile function
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_plan json;
begin
    if current_setting('citus.version', true) is not null then
        return null;
    end if;
    -- Literals, not parameters: a plan for parameters knows nothing of the values.
    execute format('explain (format json) select 1 from memory e where _memory_eligible(e.scope, e.audience_peer_id, '
                   'e.purposes, e.invalidated_at, e.superseded_by, e.valid, %s, %L::text[], %L, %L, %L::timestamptz) '
                   'and _unchanged_since(e.updated_at, %L::timestamptz)',
                   p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_as_of)
       into v_plan;
    return (v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::double precision;
end
$$;
comment on function __tenant__._eligible_estimate(bigint, text[], text, boolean, timestamptz, timestamptz) is
    'Internal: the planner''s estimate of how many memories the principal may see (from statistics, no rows read; NULL on Citus).';

-- The p_depth nearest of the memories p_ids by exact distance to the query
-- (their current vectors, model and input version): the dense arm's exact
-- path, a statement of memory_embedding alone.
create or replace function __tenant__._nearest_among(p_ids bigint[], p_model text, p_version integer,
                                                    p_embedding __ext__.halfvec, p_depth integer)
returns table (id bigint, distance double precision)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return query
    select me.memory_id, me.embedding operator(__ext__.<=>) p_embedding
      from memory_embedding me
     where me.memory_id = any (p_ids) and me.model = p_model and me.input_version = p_version
     -- "+ 0": an ordering the HNSW index cannot serve, so this path stays exact.
     order by (me.embedding operator(__ext__.<=>) p_embedding) + 0, me.memory_id
     limit p_depth;
end
$$;
comment on function __tenant__._nearest_among(bigint[], text, integer, __ext__.halfvec, integer) is
    'Internal: the p_depth nearest of the memories p_ids to the query vector, by exact distance.';

-- The first p_depth eligible memories in the HNSW index's order, as the dense
-- arm's search with its per-row EXISTS yields them, read by statements of one
-- table each (on Citus the fast path; the search's statement, with its
-- subquery, was planned twice there on every call: 1.55 -> 1.35 ms a call on
-- the worker, and 1.26 -> 1.33 ms on one server, which keeps the one
-- statement). The index's order does not depend on what filters its rows, so
-- its first rows are read unfiltered, twice as many as asked for, their
-- eligibility by id, and four times deeper until p_depth pass or the index
-- (or hnsw.max_scan_tuples) runs out. The caller sets the HNSW settings.
create or replace function __tenant__._nearest_by_index(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_model text, p_version integer, p_embedding __ext__.halfvec, p_depth integer, p_as_of timestamptz default null)
returns table (id bigint, distance double precision)
language plpgsql  -- volatile: it sets (and restores) the planner's settings
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_read integer := 2 * p_depth;
    v_ids bigint[];
    v_distances double precision[];
    v_eligible bigint[];
    v_row record;
    v_saved_seqscan text := current_setting('enable_seqscan');
    v_saved_sort text := current_setting('enable_sort');
begin
    loop
        v_ids := '{}';
        v_distances := '{}';
        -- Without a filter an exact sort of every vector looks cheaper to the planner: the index's order is asked for.
        perform set_config('enable_seqscan', 'off', true);
        perform set_config('enable_sort', 'off', true);
        for v_row in select me.memory_id, me.embedding operator(__ext__.<=>) p_embedding as distance
                       from memory_embedding me
                      where me.model = p_model and me.input_version = p_version
                      order by me.embedding operator(__ext__.<=>) p_embedding
                      limit v_read loop
            v_ids := v_ids || v_row.memory_id;
            v_distances := v_distances || v_row.distance;
        end loop;
        perform set_config('enable_seqscan', v_saved_seqscan, true);
        perform set_config('enable_sort', v_saved_sort, true);
        select coalesce(array_agg(e.id), '{}') into v_eligible
          from memory e
         where e.id = any (v_ids)
           and _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
           and _unchanged_since(e.updated_at, p_as_of);
        exit when cardinality(v_ids) < v_read or cardinality(v_eligible) >= p_depth;
        v_read := 4 * v_read;
    end loop;
    return query
    select n.id, n.distance
      from unnest(v_ids, v_distances) with ordinality n(id, distance, position)
     where n.id = any (v_eligible)
     order by n.position
     limit p_depth;
end
$$;
comment on function __tenant__._nearest_by_index(bigint, text[], text, boolean, timestamptz, text, integer, __ext__.halfvec,
                                                 integer, timestamptz) is
    'Internal: the first p_depth eligible memories in the HNSW index''s order for the query vector, read a table at a time.';

-- The dense arm over memories: the best p_depth eligible memories by cosine
-- with a current embedding (this model and input version), those at or above
-- dense_floor, nearest first. One row: ids, cosines, and the method used.
-- p_settings: the tenant's settings when the caller has read them already;
-- p_probed: the caller has asked _few_eligible, and p_few is its answer.
-- p_max_scan: how many index elements the HNSW search may visit before it
-- gives up (hnsw.max_scan_tuples; NULL: pgvector's setting). returned: how many
-- eligible memories the search returned before the floor; fewer than p_depth
-- means the principal may see fewer than p_depth, or the search gave up.
create or replace function __tenant__._dense_arm(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_query_embedding double precision[], p_depth integer, p_settings jsonb default null,
    p_probed boolean default false, p_few bigint[] default null, p_max_scan integer default null,
    p_as_of timestamptz default null, p_as_of_ids bigint[] default null)
returns table (ids bigint[], cosines double precision[], method text, returned integer)
language plpgsql  -- volatile: it sets (and restores) the HNSW settings
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_set jsonb := coalesce(p_settings, _settings());
    v_model text := v_set ->> 'embedding_model';
    v_version integer := (v_set ->> 'embedding_input_version')::integer;
    v_floor double precision := (v_set ->> 'dense_floor')::double precision;
    v_embedding __ext__.halfvec := p_query_embedding::__ext__.halfvec;
    v_few bigint[] := p_few;
    v_documents bigint;
    -- The HNSW settings are set for this call and restored after (a SET
    -- clause on the function would need rights the owner lacks).
    v_saved_ef text := current_setting('hnsw.ef_search', true);
    v_saved_iterative text := current_setting('hnsw.iterative_scan', true);
    v_saved_max_scan text := current_setting('hnsw.max_scan_tuples', true);
begin
    perform set_config('hnsw.ef_search', v_set ->> 'hnsw_ef_search', true);
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
    if p_max_scan is not null then
        perform set_config('hnsw.max_scan_tuples', greatest(p_max_scan, 1)::text, true);
    end if;
    -- Few eligible rows: exact distances over them are cheap and exact.
    -- Many: the HNSW index, iterating past rows the filter rejects.
    if not p_probed then
        select c.documents into v_documents from corpus_stat c;
        v_few := _few_eligible(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at,
                               _exact_dense_limit(p_depth, v_documents, v_set), p_as_of);
    end if;
    if v_few is not null then
        method := 'exact';
        -- the vectors read by a statement of their table alone (_nearest_among: on Citus the fast path)
        select coalesce(array_agg(n.id order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}'),
               coalesce(array_agg(1 - n.distance order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}'),
               count(*)
          into ids, cosines, returned from _nearest_among(v_few, v_model, v_version, v_embedding, p_depth) n;
    elsif current_setting('citus.version', true) is not null then
        method := 'hnsw';
        -- the same rows by statements of one table each (_nearest_by_index: on Citus the fast path)
        select coalesce(array_agg(n.id order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}'),
               coalesce(array_agg(1 - n.distance order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}'),
               count(*)
          into ids, cosines, returned
          from _nearest_by_index(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, v_model, v_version,
                                 v_embedding, p_depth, p_as_of) n;
    else
        method := 'hnsw';
        -- Eligibility is a per-row filter on the index scan ("offset 0" keeps
        -- the planner from turning it into a join that reads every vector),
        -- so the iterative scan walks the graph until p_depth eligible rows pass.
        with nearest as (
            select me.memory_id as id, me.embedding operator(__ext__.<=>) v_embedding as distance
              from memory_embedding me
             where me.model = v_model and me.input_version = v_version
               and exists (select 1 from memory e
                            where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                                   p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
                              and _unchanged_since(e.updated_at, p_as_of) and e.id = me.memory_id offset 0)
             order by me.embedding operator(__ext__.<=>) v_embedding
             limit p_depth)
        select coalesce(array_agg(n.id order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}'),
               coalesce(array_agg(1 - n.distance order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}'),
               count(*)
          into ids, cosines, returned from nearest n;
    end if;
    if cardinality(p_as_of_ids) > 0 then
        -- As of a past moment: the memories changed since whose text then is
        -- their current one (_memories_as_of), ranked with the rest.
        select r.merged_ids, r.merged_scores into ids, cosines
          from (select coalesce(array_agg(c.id), '{}') as more_ids, coalesce(array_agg(c.cosine), '{}') as more
                  from (select me.memory_id as id, 1 - (me.embedding operator(__ext__.<=>) v_embedding) as cosine
                          from memory_embedding me
                         where me.memory_id = any (p_as_of_ids) and me.model = v_model
                           and me.input_version = v_version) c
                 where c.cosine >= v_floor) then_
         cross join lateral _merge_ranked(ids, cosines, then_.more_ids, then_.more, p_depth) r;
    end if;
    if (v_set ->> 'recall_memory_keys_dense')::boolean then
        -- The memories' keys by meaning (key_arm.sql): a key's cosine counts for its memory, once.
        select r.merged_ids, r.merged_scores into ids, cosines
          from _key_nearest(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, v_embedding, v_model,
                            v_floor, p_depth, v_few, p_as_of) k
         cross join lateral _merge_best(ids, cosines, k.key_ids, k.key_cosines, p_depth) r;
    end if;
    perform set_config('hnsw.ef_search', coalesce(v_saved_ef, '40'), true);
    perform set_config('hnsw.iterative_scan', coalesce(v_saved_iterative, 'off'), true);
    perform set_config('hnsw.max_scan_tuples', coalesce(v_saved_max_scan, '20000'), true);
    return next;
end
$$;
comment on function __tenant__._dense_arm(bigint, text[], text, boolean, timestamptz, double precision[], integer, jsonb,
                                          boolean, bigint[], integer, timestamptz, bigint[]) is
    'Internal: recall''s dense arm: the eligible memories nearest the query embedding (floor dense_floor), exact or HNSW.';
