-- Message search: the passages of the log, at tenant level (every authorised
-- scope), session level (p_session_id) or peer level (what p_peer sent).
--   * lexical arm: BM25 over passages, document frequencies counted live in
--     the authorised scopes, corpus size from passage_stat; from
--     prune_min_terms query terms on, terms in prune_df_ratio or more of the
--     passages are dropped (as recall does);
--   * semantic arm: cosine against passage embeddings of the current model and
--     input version (a passage's own, or the vector of a memory quoting it
--     word for word: passage_vectors.sql), floor dense_floor; exact over few
--     rows, HNSW otherwise;
--     only passages their scope's passage_embedding policy embeds have one
--     (by default those of messages: passages.sql), the lexical arm sees all;
--   * both: Reciprocal Rank Fusion (rrf_k).
-- Tenant settings message_search_lexical / message_search_semantic decide
-- which arms may run; p_mode (hybrid, lexical, semantic) asks for arms among
-- those. Without a usable query embedding the semantic arm is skipped and the
-- answer is lexical: the metadata says so and why. SQLSTATE: PR130 message
-- search is switched off for the arms asked for (an unknown session is
-- sessions.sql's PR120).
--
-- The steps are recall's where they are the same thing over passages: the
-- query's terms (_query_terms), pruning and idf (_prune_terms), the query
-- embedding's check (_check_query_embedding) and the fusion (_rrf_fuse).
-- Recruiting candidates by rare terms is recall's alone: passages' document
-- frequencies are counted live, so a common term is paid for there already.
-- The arms' own queries differ from recall's (passages are filtered by scope,
-- audience, session and sender, and their HNSW index is one per partition),
-- so they are functions of their own: _passage_lexical_arm and
-- _passage_dense_arm. Both filter with _passage_eligible, which applies the
-- audience rule of memories (_audience_admits) to the audience each passage
-- copies from its turn: a passage the principal may not see is never
-- counted (the lexical arm's document frequencies), ranked or returned.
--
-- search_messages_answer() returns one value of the declared type
-- search_messages_answer: the hits (message_hit[]) and the metadata
-- (message_search_meta) of this very call; search_messages() returns the hits
-- as rows of message_hit. The types are declared in migration 0027. Nothing
-- is kept after the call.

-- The passages a search is about: those the principal may see in the
-- authorised scopes, narrowed to one session and/or one sender when asked.
-- Like _memory_eligible, an expression on the passage's columns (no definer,
-- no SET, no table read) that the planner inlines into the arms' queries, so
-- each keeps its partition pruning and indexes.
create or replace function __tenant__._passage_eligible(p_scope text, p_audience bigint[], p_passage_session bigint,
                                                       p_passage_actor bigint, p_principal_id bigint, p_scopes text[],
                                                       p_session_id bigint, p_actor_id bigint)
returns boolean
language sql stable
as $$
    select p_scope = any (p_scopes)
       and __tenant__._audience_admits(p_principal_id, null, p_audience)
       and (p_session_id is null or p_passage_session = p_session_id)
       and (p_actor_id is null or p_passage_actor = p_actor_id)
$$;
comment on function __tenant__._passage_eligible(text, bigint[], bigint, bigint, bigint, text[], bigint, bigint) is
    'Internal: whether a passage (its columns) is one the principal may see in the scopes, of the session and sender when given; inlined into message search''s arms.';

-- The same as a set, for psql and the tests on one server (no tenant function calls it).
create or replace function __tenant__._passages_in(p_principal_id bigint, p_scopes text[], p_session_id bigint,
                                                  p_actor_id bigint)
returns setof __tenant__.passage
language sql stable
as $$
    select p.*
      from __tenant__.passage p
     where __tenant__._passage_eligible(p.scope, p.audience, p.session_id, p.actor_id,
                                        p_principal_id, p_scopes, p_session_id, p_actor_id)
$$;
comment on function __tenant__._passages_in(bigint, text[], bigint, bigint) is
    'Internal: the passages the principal may see (_passage_eligible as a set), for psql and tests on one server.';

-- The lexical arm over passages: BM25, document frequencies counted live in
-- the scopes, corpus size from passage_stat. As in recall, a cheap presence
-- score bounds the candidates and the best 2 x p_depth get exact BM25 term
-- frequencies (_bm25_tf, recall/lexical_arm.sql). One row: ids and scores best first, the terms, those dropped.
create or replace function __tenant__._passage_lexical_arm(p_principal_id bigint, p_scopes text[], p_session_id bigint,
                                                          p_actor_id bigint, p_query text, p_depth integer,
                                                          p_settings jsonb default null)
returns table (ids bigint[], scores double precision[], terms text[], dropped text[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_set jsonb := coalesce(p_settings, _settings());
    v_k1 double precision := (v_set ->> 'bm25_k1')::double precision;
    v_b double precision := (v_set ->> 'bm25_b')::double precision;
    v_documents bigint;
    v_avg_length double precision;
    v_kept text[] := '{}';
    v_idf double precision[];
    v_query tsquery;
    v_term_queries tsquery[];
begin
    ids := '{}';
    scores := '{}';
    dropped := '{}';
    terms := _query_terms(p_query);
    select coalesce(sum(s.passages), 0), coalesce(sum(s.lexemes)::double precision / nullif(sum(s.passages), 0), 1)
      into v_documents, v_avg_length
      from passage_stat s where s.scope = any (p_scopes);
    if cardinality(terms) > 0 and v_documents > 0 then
        select coalesce(array_agg(p.term order by p.term) filter (where not p.pruned), '{}'),
               coalesce(array_agg(p.term order by p.term) filter (where p.pruned), '{}'),
               array_agg(p.idf order by p.term) filter (where not p.pruned)
          into v_kept, dropped, v_idf
          from _prune_terms(terms,
                            array(select greatest((select count(*) from passage x
                                                    where _passage_eligible(x.scope, x.audience, x.session_id, x.actor_id,
                                                                            p_principal_id, p_scopes, null, null) and x.tsv @@ quote_literal(u.t)::tsquery), 1)
                                    from unnest(terms) with ordinality u(t, n) order by u.n),
                            v_documents, (v_set ->> 'prune_min_terms')::integer,
                            (v_set ->> 'prune_df_ratio')::double precision) p;
    end if;
    if cardinality(v_kept) = 0 then
        return next;
        return;
    end if;
    v_query := array_to_string(array(select quote_literal(t) from unnest(v_kept) t), ' | ')::tsquery;
    v_term_queries := array(select quote_literal(t)::tsquery from unnest(v_kept) t);
    with matched as (
        select p.id, p.tsv,
               (select sum(v_idf[i]) from generate_subscripts(v_term_queries, 1) i
                 where p.tsv @@ v_term_queries[i])
               * _bm25_tf(1, length(p.tsv), v_k1, v_b, v_avg_length) as quick
          from passage p
         where _passage_eligible(p.scope, p.audience, p.session_id, p.actor_id,
                                 p_principal_id, p_scopes, p_session_id, p_actor_id) and p.tsv @@ v_query
         order by quick desc, p.id
         limit 2 * p_depth
    ), scored as (
        select m.id,
               (select sum(v_idf[array_position(v_kept, u.lexeme)]
                           * _bm25_tf(cardinality(u.positions), length(m.tsv), v_k1, v_b, v_avg_length))
                  from unnest(m.tsv) u where u.lexeme = any (v_kept)) as s
          from matched m
         order by s desc, m.id
         limit p_depth)
    select coalesce(array_agg(x.id order by x.s desc, x.id), '{}'),
           coalesce(array_agg(x.s order by x.s desc, x.id), '{}')
      into ids, scores from scored x;
    return next;
end
$$;
comment on function __tenant__._passage_lexical_arm(bigint, text[], bigint, bigint, text, integer, jsonb) is
    'Internal: message search''s lexical arm: pruned query terms, BM25 over the passages in scope, best p_depth first.';

-- The nearest passages of one kind of vector: their own (p_lent false) or
-- the memory vector they borrow (passage_vectors.sql), exact or through the
-- HNSW index of that vector's table, always filtered by the passage's own
-- eligibility: a lender's audience plays no part. Up to p_depth (id, distance).
create or replace function __tenant__._passages_nearest(p_principal_id bigint, p_scopes text[], p_session_id bigint,
                                                       p_actor_id bigint, p_embedding __ext__.halfvec, p_model text,
                                                       p_version integer, p_depth integer, p_lent boolean,
                                                       p_exact boolean)
returns table (id bigint, distance double precision)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    if not p_lent and p_exact then
        return query
        select p.id, p.embedding operator(__ext__.<=>) p_embedding
          from passage p
         where _passage_eligible(p.scope, p.audience, p.session_id, p.actor_id, p_principal_id, p_scopes, p_session_id,
                                 p_actor_id) and p.embedding_model = p_model and p.embedding_input_version = p_version
         order by (p.embedding operator(__ext__.<=>) p_embedding) + 0, p.id
         limit p_depth;
    elsif not p_lent then
        return query
        select p.id, p.embedding operator(__ext__.<=>) p_embedding
          from passage p
         where _passage_eligible(p.scope, p.audience, p.session_id, p.actor_id, p_principal_id, p_scopes, p_session_id,
                                 p_actor_id) and p.embedding_model = p_model and p.embedding_input_version = p_version
         order by p.embedding operator(__ext__.<=>) p_embedding
         limit p_depth;
    elsif p_exact then
        return query
        select p.id, me.embedding operator(__ext__.<=>) p_embedding
          from passage p join memory_embedding me on me.memory_id = p.vector_memory_id
         where _passage_eligible(p.scope, p.audience, p.session_id, p.actor_id, p_principal_id, p_scopes, p_session_id,
                                 p_actor_id) and me.model = p_model and me.input_version = p_version
         order by (me.embedding operator(__ext__.<=>) p_embedding) + 0, p.id
         limit p_depth;
    else
        -- As recall's HNSW path: the passage's eligibility is a per-row filter on the index scan ("offset 0"
        -- keeps the planner from turning it into a join that reads every vector).
        return query
        with nearest as (
            select me.memory_id, me.embedding operator(__ext__.<=>) p_embedding as distance
              from memory_embedding me
             where me.model = p_model and me.input_version = p_version
               and exists (select 1 from passage p
                            where p.vector_memory_id = me.memory_id
                              and _passage_eligible(p.scope, p.audience, p.session_id, p.actor_id, p_principal_id,
                                                    p_scopes, p_session_id, p_actor_id) offset 0)
             order by me.embedding operator(__ext__.<=>) p_embedding
             limit p_depth)
        select p.id, n.distance
          from nearest n join passage p on p.vector_memory_id = n.memory_id
         where _passage_eligible(p.scope, p.audience, p.session_id, p.actor_id, p_principal_id, p_scopes, p_session_id,
                                 p_actor_id)
         order by n.distance, p.id
         limit p_depth;
    end if;
end
$$;
comment on function __tenant__._passages_nearest(bigint, text[], bigint, bigint, __ext__.halfvec, text, integer, integer, boolean, boolean) is
    'Internal: the eligible passages nearest a query by their own vectors or by the memory vectors they borrow, exact or HNSW.';

-- How many eligible passages have a vector of the stamp, their own (p_lent
-- false) or borrowed, counted up to p_cap: what decides exact or HNSW.
create or replace function __tenant__._passages_with_vectors(p_principal_id bigint, p_scopes text[],
                                                            p_session_id bigint, p_actor_id bigint, p_model text,
                                                            p_version integer, p_lent boolean, p_cap integer)
returns bigint
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count bigint;
begin
    if p_lent then
        select count(*) into v_count from (
            select 1 from passage p join memory_embedding me on me.memory_id = p.vector_memory_id
             where _passage_eligible(p.scope, p.audience, p.session_id, p.actor_id, p_principal_id, p_scopes,
                                     p_session_id, p_actor_id) and me.model = p_model and me.input_version = p_version
             limit p_cap) x;
    else
        select count(*) into v_count from (
            select 1 from passage p
             where _passage_eligible(p.scope, p.audience, p.session_id, p.actor_id, p_principal_id, p_scopes,
                                     p_session_id, p_actor_id) and p.embedding_model = p_model
               and p.embedding_input_version = p_version
             limit p_cap) x;
    end if;
    return v_count;
end
$$;
comment on function __tenant__._passages_with_vectors(bigint, text[], bigint, bigint, text, integer, boolean, integer) is
    'Internal: how many eligible passages have a current vector of their own (or a borrowed one), up to p_cap.';

-- The semantic arm over passages: cosine against each passage's vector of
-- the current model and input version (its own, or the memory vector it
-- borrows), floor dense_floor, nearest p_depth first; each kind exact over
-- few rows, HNSW otherwise. One row: ids, cosines, the method.
create or replace function __tenant__._passage_dense_arm(p_principal_id bigint, p_scopes text[], p_session_id bigint,
                                                        p_actor_id bigint, p_query_embedding double precision[],
                                                        p_depth integer, p_settings jsonb default null)
returns table (ids bigint[], cosines double precision[], method text)
language plpgsql  -- volatile: it sets (and restores) the HNSW settings
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_set jsonb := coalesce(p_settings, _settings());
    v_model text := v_set ->> 'embedding_model';
    v_version integer := (v_set ->> 'embedding_input_version')::integer;
    v_floor double precision := (v_set ->> 'dense_floor')::double precision;
    v_below integer := (v_set ->> 'exact_dense_below')::integer;
    v_embedding __ext__.halfvec := p_query_embedding::__ext__.halfvec;
    v_own_exact boolean;
    v_lent_exact boolean;
    v_saved_ef text := current_setting('hnsw.ef_search', true);
    v_saved_iterative text := current_setting('hnsw.iterative_scan', true);
begin
    v_own_exact := _passages_with_vectors(p_principal_id, p_scopes, p_session_id, p_actor_id, v_model, v_version,
                                          false, v_below) < v_below;
    v_lent_exact := _passages_with_vectors(p_principal_id, p_scopes, p_session_id, p_actor_id, v_model, v_version,
                                           true, v_below) < v_below;
    method := case when v_own_exact and v_lent_exact then 'exact' else 'hnsw' end;
    if method = 'hnsw' then
        -- One HNSW index per partition, merged in distance order; strict
        -- order keeps the merge correct while the scan iterates past rows
        -- the filters reject.
        perform set_config('hnsw.ef_search', v_set ->> 'hnsw_ef_search', true);
        perform set_config('hnsw.iterative_scan', 'strict_order', true);
    end if;
    with nearest as (
        select n.id, n.distance
          from (select * from _passages_nearest(p_principal_id, p_scopes, p_session_id, p_actor_id, v_embedding,
                                                v_model, v_version, p_depth, false, v_own_exact)
                union all
                select * from _passages_nearest(p_principal_id, p_scopes, p_session_id, p_actor_id, v_embedding,
                                                v_model, v_version, p_depth, true, v_lent_exact)) n
         order by n.distance, n.id
         limit p_depth)
    select coalesce(array_agg(n.id order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}'),
           coalesce(array_agg(1 - n.distance order by n.distance, n.id) filter (where 1 - n.distance >= v_floor), '{}')
      into ids, cosines from nearest n;
    if method = 'hnsw' then
        perform set_config('hnsw.ef_search', coalesce(v_saved_ef, '40'), true);
        perform set_config('hnsw.iterative_scan', coalesce(v_saved_iterative, 'off'), true);
    end if;
    return next;
end
$$;
comment on function __tenant__._passage_dense_arm(bigint, text[], bigint, bigint, double precision[], integer, jsonb) is
    'Internal: message search''s semantic arm: the passages in scope nearest the query embedding (their own or a borrowed memory vector; floor dense_floor), exact or HNSW.';

-- Which arms a message search runs: what the mode asks for, among what the
-- tenant switched on (PR130 when that leaves none), and why not the semantic
-- one when it is not asked for or switched off.
create or replace function __tenant__._message_search_arms(p_mode text, p_settings jsonb)
returns table (lexical boolean, semantic boolean, semantic_reason text)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    lexical := p_mode in ('hybrid', 'lexical') and (p_settings ->> 'message_search_lexical')::boolean;
    semantic := p_mode in ('hybrid', 'semantic') and (p_settings ->> 'message_search_semantic')::boolean;
    if not (lexical or semantic) then
        perform _fail('PR130', format('%s message search is switched off for this tenant',
                                      case p_mode when 'hybrid' then 'lexical and semantic' else p_mode end),
                      'Turn it on with pgrecall.set_tenant_setting(tenant, ''message_search_lexical'' or '
                      '''message_search_semantic'', ''true''), or ask for the other mode.');
    end if;
    semantic_reason := case when semantic then null
                            when p_mode <> 'lexical' then 'semantic message search is switched off'
                            else 'mode is lexical' end;
    return next;
end
$$;
comment on function __tenant__._message_search_arms(text, jsonb) is
    'Internal: which arms a message search runs (PR130 when the tenant switched off what the mode asks for), and why not the semantic one.';

-- Why message search's semantic arm cannot run, or NULL when it can: no
-- query embedding, one of another model, or no passage in the scopes embedded
-- by the current model and input version (and whether the scopes embed none).
create or replace function __tenant__._passage_semantic_reason(p_principal_id bigint, p_scopes text[],
                                                              p_query_embedding double precision[],
                                                              p_query_model text, p_settings jsonb)
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return case
        when p_query_embedding is null then 'no query embedding'
        when p_query_model is not null and p_query_model <> p_settings ->> 'embedding_model'
            then format('query embedded with %s, passages with %s', p_query_model, p_settings ->> 'embedding_model')
        when _passages_with_vectors(p_principal_id, p_scopes, null, null, p_settings ->> 'embedding_model',
                                    (p_settings ->> 'embedding_input_version')::integer, false, 1) > 0
          or _passages_with_vectors(p_principal_id, p_scopes, null, null, p_settings ->> 'embedding_model',
                                    (p_settings ->> 'embedding_input_version')::integer, true, 1) > 0
            then null
        when not exists (select 1 from _passage_embedding_policies() pol
                          where pol.scope = any (p_scopes) and pol.policy <> 'none')
            then 'these scopes embed no passages (passage_embedding none)'
        else 'no passage embeddings yet' end;
end
$$;
comment on function __tenant__._passage_semantic_reason(bigint, text[], double precision[], text, jsonb) is
    'Internal: why message search''s semantic arm cannot run (no query embedding, another model, no passage embedded yet), or NULL.';

create or replace function __tenant__.search_messages_answer(
    p_principal        text,
    p_scopes           text[],
    p_query            text,
    p_query_embedding  double precision[] default null,
    p_mode             text default null,      -- hybrid (default), lexical or semantic
    p_session_id       bigint default null,
    p_peer             text default null,      -- only passages of messages this peer sent
    p_limit            integer default 10,
    p_query_model      text default null
)
returns __tenant__.search_messages_answer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_answer search_messages_answer;
    v_set jsonb := _settings();
    v_mode text := coalesce(p_mode, 'hybrid');
    v_principal bigint;
    v_actor bigint;
    v_depth integer := (v_set ->> 'arm_candidates')::integer;
    v_max_limit integer := (v_set ->> 'walk_depth')::integer;
    v_rrf_k double precision := (v_set ->> 'rrf_k')::double precision;
    v_lexical boolean;
    v_semantic boolean;
    v_semantic_reason text;
    v_semantic_method text;
    v_terms text[] := '{}';
    v_dropped text[] := '{}';
    v_lex_ids bigint[] := '{}';
    v_lex_scores double precision[] := '{}';
    v_sem_ids bigint[] := '{}';
    v_sem_cos double precision[] := '{}';
    v_fused bigint[] := '{}';
begin
    v_principal := _peer_id(p_principal);
    perform _check_scopes(p_scopes);
    perform _check_one_of(v_mode, 'message search mode', array['hybrid', 'lexical', 'semantic']);
    perform _check_limit(p_limit, v_max_limit);
    perform _check_text(p_query, 'query', 10000);
    perform _check_length(p_query_model, 'query model name', 200);
    v_depth := greatest(v_depth, 2 * p_limit);  -- as in recall: each arm gives twice the rows asked for
    if p_peer is not null then
        v_actor := _peer_id(p_peer, 'sender');
    end if;
    if p_session_id is not null then
        perform _session_row(p_session_id, p_scopes);  -- PR120 unknown, PR103 in a scope not authorised
    end if;
    perform _check_query_embedding(p_query_embedding);

    select a.lexical, a.semantic, a.semantic_reason into v_lexical, v_semantic, v_semantic_reason
      from _message_search_arms(v_mode, v_set) a;
    if v_semantic then
        v_semantic_reason := _passage_semantic_reason(v_principal, p_scopes, p_query_embedding, p_query_model, v_set);
        if v_semantic_reason is not null then
            v_semantic := false;
            -- Degrade: the lexical arm answers when the tenant allows it.
            v_lexical := (v_set ->> 'message_search_lexical')::boolean;
        end if;
    end if;

    if v_lexical then
        select a.ids, a.scores, a.terms, a.dropped into v_lex_ids, v_lex_scores, v_terms, v_dropped
          from _passage_lexical_arm(v_principal, p_scopes, p_session_id, v_actor, p_query, v_depth, v_set) a;
    end if;
    if v_semantic then
        select a.ids, a.cosines, a.method into v_sem_ids, v_sem_cos, v_semantic_method
          from _passage_dense_arm(v_principal, p_scopes, p_session_id, v_actor, p_query_embedding, v_depth, v_set) a;
    end if;
    v_fused := _rrf_fuse(v_lex_ids, v_sem_ids, v_rrf_k, p_limit);

    v_answer.meta := row(
        p_query, v_mode,
        case when p_session_id is not null then 'session' when p_peer is not null then 'peer' else 'tenant' end,
        p_session_id, p_peer, p_scopes, v_lexical, v_semantic, v_semantic, v_semantic_reason, v_semantic_method,
        v_terms, v_dropped, cardinality(v_lex_ids), cardinality(v_sem_ids), cardinality(v_fused),
        (select count(*) from passage_embedding_job j where j.scope = any (p_scopes)))::message_search_meta;

    select coalesce(array_agg(row(
               k.ord::integer, p.scope, o.log_offset, p.session_id, pe.name, o.source_role, o.kind, p.occurred_at,
               p.id, p.ordinal, p.start_byte, p.end_byte, p.body,
               coalesce(1.0 / (v_rrf_k + array_position(v_lex_ids, p.id)), 0)
                 + coalesce(1.0 / (v_rrf_k + array_position(v_sem_ids, p.id)), 0),
               array_position(v_lex_ids, p.id), array_position(v_sem_ids, p.id),
               v_lex_scores[array_position(v_lex_ids, p.id)], v_sem_cos[array_position(v_sem_ids, p.id)]
           )::message_hit order by k.ord), '{}')
      into v_answer.items
      from unnest(v_fused) with ordinality as k(id, ord)
      join passage p on p.id = k.id and p.scope = any (p_scopes)
      join observation o on o.id = p.observation_id
      join peer pe on pe.id = p.actor_id;
    return v_answer;
end
$$;
comment on function __tenant__.search_messages_answer(text, text[], text, double precision[], text, bigint, text, integer, text) is
    'search_messages() and its metadata (arms that ran, why the semantic arm did not, terms, counts) in one value: (items message_hit[], meta message_search_meta). In psql: select (a.meta).* from search_messages_answer(...) a.';

create or replace function __tenant__.search_messages(
    p_principal        text,
    p_scopes           text[],
    p_query            text,
    p_query_embedding  double precision[] default null,
    p_mode             text default null,
    p_session_id       bigint default null,
    p_peer             text default null,
    p_limit            integer default 10,
    p_query_model      text default null
)
returns setof __tenant__.message_hit
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select h.*
      from unnest((search_messages_answer(p_principal, p_scopes, p_query, p_query_embedding, p_mode, p_session_id,
                                          p_peer, p_limit, p_query_model)).items) h
     order by h.rank
$$;
comment on function __tenant__.search_messages(text, text[], text, double precision[], text, bigint, text, integer, text) is
    'Searches the passages of the log in the authorised scopes (optionally one session or one sender): BM25 and/or cosine, fused by RRF. With its metadata: search_messages_answer().';
