-- Recall, step 2: the lexical arm (plpgsql/recall/recall.sql composes the steps).
--
--   _query_terms        the query's distinct lexemes
--   _prune_terms        from prune_min_terms terms on, a term in prune_df_ratio
--                       or more of the documents is dropped; BM25's idf of the
--                       rest (message search prunes passages with it too)
--   _lexical_recruiters the tsqueries that may recruit candidates, narrowest first
--   _lexical_candidates BM25 over the eligible memories one recruiter matches
--                       (_lexical_candidates_planned for a query past 12 terms;
--                       _lexical_matched, also among the few on Citus, reads
--                       the matches a table alone, ordered by _quick_score)
--   _lexical_arm        the above in order, for memories: ranked ids and scores
--                       with what recall's metadata reports
--
-- Each works on whole arrays, once per recall: nothing here is called per row.

-- The distinct lexemes of a query (english configuration), sorted.
create or replace function __tenant__._query_terms(p_query text)
returns text[]
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(array_agg(distinct u.lexeme order by u.lexeme), '{}')
      from unnest(to_tsvector('english', coalesce(p_query, ''))) u
$$;
comment on function __tenant__._query_terms(text) is 'Internal: the distinct lexemes of a query, sorted.';

-- BM25, written once: the weight of a term that occurs p_tf times in a
-- document of p_length lexemes (the corpus averaging p_avg_length), before
-- its idf. A plain SQL expression (no definer, no SET, no table) that the
-- planner inlines into every query that scores, so it costs no call per row:
-- the lexical arm of recall (both of _lexical_candidates' branches) and of
-- message search score with it. The cheap presence score that bounds the
-- candidates is sum(idf of the terms present) x _bm25_tf(1, ...), the same
-- formula with every term counted once.
create or replace function __tenant__._bm25_tf(p_tf double precision, p_length double precision,
                                              p_k1 double precision, p_b double precision,
                                              p_avg_length double precision)
returns double precision
language sql immutable parallel safe
as $$
    select p_tf * (p_k1 + 1) / (p_tf + p_k1 * (1 - p_b + p_b * p_length / p_avg_length))
$$;
comment on function __tenant__._bm25_tf(double precision, double precision, double precision, double precision,
                                        double precision) is
    'Internal: BM25''s term-frequency weight (k1, b) of a term occurring p_tf times in a document of p_length lexemes; inlined.';

-- The quick score of a memory's text vector for a query of up to 12 terms:
-- the idf (p_w) of each term query (p_q) it matches, a CASE per term, a
-- slot past the last term NULL (it matches nothing and adds 0). Times
-- _bm25_tf(1, ...) it is the presence score that bounds the lexical
-- candidates (_lexical_matched). Inlined: the planner expands it into the
-- caller's ORDER BY, where a call or a subquery per matched row cost as much
-- as the row's heap visit; each term a parameter of its own, because a
-- subscript per row cost 3-9% of the statement.
create or replace function __tenant__._quick_score(
    p_tsv tsvector,
    p_q1 tsquery, p_q2 tsquery, p_q3 tsquery, p_q4 tsquery, p_q5 tsquery, p_q6 tsquery,
    p_q7 tsquery, p_q8 tsquery, p_q9 tsquery, p_q10 tsquery, p_q11 tsquery, p_q12 tsquery,
    p_w1 double precision, p_w2 double precision, p_w3 double precision, p_w4 double precision,
    p_w5 double precision, p_w6 double precision, p_w7 double precision, p_w8 double precision,
    p_w9 double precision, p_w10 double precision, p_w11 double precision, p_w12 double precision)
returns double precision
language sql immutable parallel safe
as $$
    select case when p_tsv @@ p_q1 then p_w1 else 0 end
         + case when p_tsv @@ p_q2 then p_w2 else 0 end
         + case when p_tsv @@ p_q3 then p_w3 else 0 end
         + case when p_tsv @@ p_q4 then p_w4 else 0 end
         + case when p_tsv @@ p_q5 then p_w5 else 0 end
         + case when p_tsv @@ p_q6 then p_w6 else 0 end
         + case when p_tsv @@ p_q7 then p_w7 else 0 end
         + case when p_tsv @@ p_q8 then p_w8 else 0 end
         + case when p_tsv @@ p_q9 then p_w9 else 0 end
         + case when p_tsv @@ p_q10 then p_w10 else 0 end
         + case when p_tsv @@ p_q11 then p_w11 else 0 end
         + case when p_tsv @@ p_q12 then p_w12 else 0 end
$$;
comment on function __tenant__._quick_score(tsvector, tsquery, tsquery, tsquery, tsquery, tsquery, tsquery, tsquery, tsquery, tsquery, tsquery, tsquery, tsquery, double precision, double precision, double precision, double precision, double precision, double precision, double precision, double precision, double precision, double precision, double precision, double precision) is
    'Internal: the sum of the weights of the term queries a text vector matches (up to 12, NULL slots add 0); inlined.';

-- Term pruning and idf, one row per term (sorted). From p_min_terms query
-- terms on, a term that occurs in p_ratio or more of the p_documents is
-- dropped. Pruning removes noise, it never empties a query: when every term
-- is common, the rarest one (then the first by name) is kept. A term in one
-- document is never common, however few the documents: in a new tenant's
-- first three memories, one memory is a third of them, and every word of a
-- question was dropped but the first by name (a word no memory held, whose df
-- is counted as 1, found nothing). idf is BM25's,
-- ln(1 + (N - df + 0.5) / (df + 0.5)).
create or replace function __tenant__._prune_terms(p_terms text[], p_df bigint[], p_documents bigint,
                                                  p_min_terms integer, p_ratio double precision)
returns table (term text, df bigint, idf double precision, pruned boolean)
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with freq as (
        select u.term, u.df from unnest(p_terms, p_df) as u(term, df)
    )
    select f.term, f.df, ln(1 + (p_documents - f.df + 0.5) / (f.df + 0.5))::double precision,
           cardinality(p_terms) >= p_min_terms and f.df >= greatest(p_ratio * p_documents, 2)
           and f.term <> (select r.term from freq r order by r.df, r.term limit 1)
      from freq f
     order by f.term
$$;
comment on function __tenant__._prune_terms(text[], bigint[], bigint, integer, double precision) is
    'Internal: each query term with its document frequency, BM25 idf, and whether pruning drops it as too common.';

-- The queries that may recruit the lexical arm's candidates, narrowest
-- first; the last is every kept term. Matching every memory that shares a
-- common word is what makes the arm slow at scale, and a memory with only
-- common words rarely outranks one with a rare word, so candidates are
-- recruited by the narrowest query that finds p_depth of them (every kept
-- term still scores each candidate). The rare terms are the rarest ones whose
-- document frequencies add up to at most p_budget, and at least p_depth (so a
-- term the corpus lacks does not stand alone).
--   a. if the rare terms still match more than the budget: a rare term and
--      any other kept term (holding two query terms outranks holding one,
--      short of a large gap in rarity or length);
--   b. the rare terms, when they are fewer than all;
--   c. every kept term.
create or replace function __tenant__._lexical_recruiters(p_terms text[], p_df bigint[], p_depth integer,
                                                         p_budget bigint)
returns tsquery[]
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with ordered as (
        select u.term, sum(u.df) over w as running, coalesce(sum(u.df) over w - u.df, 0) as before,
               row_number() over w as n
          from unnest(p_terms, p_df) as u(term, df)
        window w as (order by u.df, u.term)
    ), rare as (
        select o.* from ordered o
         where o.n = 1 or o.before < p_depth or o.running <= p_budget
    ), queries as (
        select array_to_string(array(select quote_literal(t) from unnest(p_terms) t), ' | ')::tsquery as every_term,
               array_to_string(array(select quote_literal(r.term) from rare r order by r.n), ' | ')::tsquery
                   as rare_terms,
               case when max(r.running) > p_budget and cardinality(p_terms) >= 2 then
                   array_to_string(array(
                       select '(' || quote_literal(x.term) || ' & (' ||
                              array_to_string(array(select quote_literal(o) from unnest(p_terms) o where o <> x.term),
                                              ' | ')
                              || '))'
                         from rare x order by x.n), ' | ')::tsquery
               end as pairs
          from rare r
    )
    select coalesce((select array_remove(array[q.pairs,
                                               case when numnode(q.rare_terms) < numnode(q.every_term)
                                                    then q.rare_terms end,
                                               q.every_term], null)
                       from queries q
                      where cardinality(p_terms) > 0), '{}')
$$;
comment on function __tenant__._lexical_recruiters(text[], bigint[], integer, bigint) is
    'Internal: the queries that may recruit lexical candidates, narrowest first (pairs with a rare term, rare terms, every term).';

-- The lexical candidates of a query of more than 12 terms (_lexical_candidates
-- below serves the shorter ones): the same statement with a CASE per term,
-- written for the query and planned per call.
create or replace function __tenant__._lexical_candidates_planned(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_match tsquery, p_term_queries tsquery[], p_terms text[], p_idf double precision[],
    p_k1 double precision, p_b double precision, p_avg_length double precision, p_depth integer,
    p_as_of timestamptz default null)
returns table (id bigint, score double precision)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return query execute format($q$
    with matched as (
        select e.id, e.tsv,
               (%1$s) * _bm25_tf(1, length(e.tsv), $10, $11, $12) as quick
          from memory e
         where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                $1, $2, $3, $4, $5)%2$s
           and e.tsv @@ $6
         order by quick desc, e.id
         limit greatest(2 * $13, 100)
    )
    select m.id,
           (select sum($9[array_position($8, u.lexeme)] * _bm25_tf(cardinality(u.positions), length(m.tsv), $10, $11, $12))
              from unnest(m.tsv) u where u.lexeme = any ($8)) as s
      from matched m
     order by s desc, m.id
     limit $13$q$,
        array_to_string(array(select format('case when e.tsv @@ $7[%1$s] then $9[%1$s] else 0 end', i)
                                from generate_subscripts(p_term_queries, 1) i), ' + '),
        -- as of a past moment, only the memories unchanged since (the rest: _lexical_arm)
        case when p_as_of is not null then ' and _unchanged_since(e.updated_at, $14)' else '' end)
    using p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_match, p_term_queries, p_terms, p_idf,
          p_k1, p_b, p_avg_length, p_depth, p_as_of;
end
$$;
comment on function __tenant__._lexical_candidates_planned(bigint, text[], text, boolean, timestamptz, tsquery, tsquery[],
                                                            text[], double precision[], double precision,
                                                            double precision, double precision, integer, timestamptz) is
    'Internal: _lexical_candidates for a query of more than 12 terms, its statement planned per call.';

-- _lexical_candidates' matches of a query of up to 12 terms: the eligible
-- memories p_match finds, best max(2 x p_depth, 100) by the quick score,
-- with their text vectors (their exact score is the caller's). Each term and
-- its idf is a variable of its own (_quick_score says why).
-- p_among: the few memories the principal may see (_few_eligible's), read by
-- id from a statement of the memory table alone. On Citus _lexical_candidates
-- reads the few with it, where its CTE with a subquery per row was planned,
-- deparsed and planned again on every call (one server keeps the CTE,
-- planned once).
create or replace function __tenant__._lexical_matched(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_match tsquery, p_term_queries tsquery[], p_idf double precision[],
    p_k1 double precision, p_b double precision, p_avg_length double precision, p_depth integer,
    p_as_of timestamptz default null, p_among bigint[] default null)
returns table (id bigint, tsv tsvector)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_q1 tsquery; v_q2 tsquery; v_q3 tsquery; v_q4 tsquery; v_q5 tsquery; v_q6 tsquery;
    v_q7 tsquery; v_q8 tsquery; v_q9 tsquery; v_q10 tsquery; v_q11 tsquery; v_q12 tsquery;
    v_w1 double precision; v_w2 double precision; v_w3 double precision; v_w4 double precision;
    v_w5 double precision; v_w6 double precision; v_w7 double precision; v_w8 double precision;
    v_w9 double precision; v_w10 double precision; v_w11 double precision; v_w12 double precision;
begin
    select p_term_queries[1], p_term_queries[2], p_term_queries[3], p_term_queries[4], p_term_queries[5],
           p_term_queries[6], p_term_queries[7], p_term_queries[8], p_term_queries[9], p_term_queries[10],
           p_term_queries[11], p_term_queries[12], p_idf[1], p_idf[2], p_idf[3], p_idf[4], p_idf[5], p_idf[6],
           p_idf[7], p_idf[8], p_idf[9], p_idf[10], p_idf[11], p_idf[12]
      into v_q1, v_q2, v_q3, v_q4, v_q5, v_q6, v_q7, v_q8, v_q9, v_q10, v_q11, v_q12,
           v_w1, v_w2, v_w3, v_w4, v_w5, v_w6, v_w7, v_w8, v_w9, v_w10, v_w11, v_w12;
    if p_among is not null then
        return query
        select e.id, e.tsv
          from memory e
         where e.id = any (p_among) and e.tsv @@ p_match
         order by _quick_score(e.tsv, v_q1, v_q2, v_q3, v_q4, v_q5, v_q6, v_q7, v_q8, v_q9, v_q10, v_q11, v_q12,
                               v_w1, v_w2, v_w3, v_w4, v_w5, v_w6, v_w7, v_w8, v_w9, v_w10, v_w11, v_w12)
                  * _bm25_tf(1, length(e.tsv), p_k1, p_b, p_avg_length) desc,
                  e.id
         limit greatest(2 * p_depth, 100);
        return;
    end if;
    return query
    select e.id, e.tsv
      from memory e
     where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                            p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
       and _unchanged_since(e.updated_at, p_as_of)
       and e.tsv @@ p_match
     order by _quick_score(e.tsv, v_q1, v_q2, v_q3, v_q4, v_q5, v_q6, v_q7, v_q8, v_q9, v_q10, v_q11, v_q12,
                           v_w1, v_w2, v_w3, v_w4, v_w5, v_w6, v_w7, v_w8, v_w9, v_w10, v_w11, v_w12)
              * _bm25_tf(1, length(e.tsv), p_k1, p_b, p_avg_length) desc,
              e.id
     limit greatest(2 * p_depth, 100);
end
$$;
comment on function __tenant__._lexical_matched(bigint, text[], text, boolean, timestamptz, tsquery, tsquery[],
                                                double precision[], double precision, double precision,
                                                double precision, integer, timestamptz, bigint[]) is
    'Internal: the eligible memories (or those of p_among) a lexical recruiter matches, best max(2 x p_depth, 100) by the quick score, with their text vectors.';

-- BM25 over a bounded candidate set: every eligible memory matching p_match
-- is first scored as if each query term occurred once (a tsvector membership
-- test per term, cheap), and only the best max(2 x p_depth, 100) are scored
-- exactly (term frequencies from the tsvector's positions, costly). Memories
-- are short, so a repeated term rarely moves a match from outside the bound
-- into the top; with 40 instead of 100 it did, on LoCoMo (lexical recall@10
-- 0.657 instead of 0.661). Rows come best first.
-- The quick score is spelled out term by term (a CASE per term) because a
-- subquery per matched row costs twice as much as the row's heap visit. Up
-- to 12 terms one statement serves every query: each term and its idf in a
-- variable of its own (a subscript per row cost 3-9% of the statement), a
-- slot past the last term NULL, which matches nothing and adds 0, so the
-- slots add up to the same score in the same order. Under recall's
-- force_generic_plan it is planned once per session, where planning it per
-- call cost as much as running it (~0.3 ms of a 10k recall). The generic
-- plan reads the text index whatever the terms; a query of 12 common terms
-- matching 41% of a 10k tenant took 7 ms so, 11-12 ms planned for its terms.
-- More terms: _lexical_candidates_planned.
-- p_among: when the caller already holds the few memories the principal may
-- see (_few_eligible), the candidates are those, read by id: no full-text
-- index scan of the whole tenant to keep a handful.
create or replace function __tenant__._lexical_candidates(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_match tsquery, p_term_queries tsquery[], p_terms text[], p_idf double precision[],
    p_k1 double precision, p_b double precision, p_avg_length double precision, p_depth integer,
    p_among bigint[] default null, p_as_of timestamptz default null)
returns table (id bigint, score double precision)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_among is not null and cardinality(p_term_queries) <= 12
       and current_setting('citus.version', true) is not null then
        return query
        select m.id,
               (select sum(p_idf[array_position(p_terms, u.lexeme)]
                           * _bm25_tf(cardinality(u.positions), length(m.tsv), p_k1, p_b, p_avg_length))
                  from unnest(m.tsv) u where u.lexeme = any (p_terms)) as s
          from _lexical_matched(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_match,
                                p_term_queries, p_idf, p_k1, p_b, p_avg_length, p_depth, null, p_among) m
         order by s desc, m.id
         limit p_depth;
        return;
    end if;
    if p_among is not null then
        -- The few are read by id whatever the terms are, so one plan serves
        -- every call (planning a statement per call cost ~0.3 ms, as much as
        -- the rest of the arm over 200 memories). Every branch, and
        -- _passage_lexical_arm over passages, scores with _bm25_tf (inlined).
        return query
        with matched as (
            select e.id, e.tsv,
                   (select coalesce(sum(p_idf[i]), 0) from generate_subscripts(p_term_queries, 1) i
                     where e.tsv @@ p_term_queries[i])
                   * _bm25_tf(1, length(e.tsv), p_k1, p_b, p_avg_length) as quick
              from memory e
             where e.id = any (p_among) and e.tsv @@ p_match
             order by quick desc, e.id
             limit greatest(2 * p_depth, 100)
        )
        select m.id,
               (select sum(p_idf[array_position(p_terms, u.lexeme)]
                           * _bm25_tf(cardinality(u.positions), length(m.tsv), p_k1, p_b, p_avg_length))
                  from unnest(m.tsv) u where u.lexeme = any (p_terms)) as s
          from matched m
         order by s desc, m.id
         limit p_depth;
        return;
    end if;
    if cardinality(p_term_queries) > 12 then
        return query select c.id, c.score
                       from _lexical_candidates_planned(p_principal_id, p_scopes, p_purpose, p_include_superseded,
                                                        p_at, p_match, p_term_queries, p_terms, p_idf, p_k1, p_b,
                                                        p_avg_length, p_depth, p_as_of) c;
        return;
    end if;
    -- The matches are read by a statement of the memories alone (_lexical_matched), scored exactly by one that
    -- reads no table: on Citus the first takes the fast path, where the two as one statement (a CTE) were
    -- planned, deparsed and planned again on every call.
    return query
    select m.id,
           (select sum(p_idf[array_position(p_terms, u.lexeme)]
                       * _bm25_tf(cardinality(u.positions), length(m.tsv), p_k1, p_b, p_avg_length))
              from unnest(m.tsv) u where u.lexeme = any (p_terms)) as s
      from _lexical_matched(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_match, p_term_queries,
                            p_idf, p_k1, p_b, p_avg_length, p_depth, p_as_of) m
     order by s desc, m.id
     limit p_depth;
end
$$;
comment on function __tenant__._lexical_candidates(bigint, text[], text, boolean, timestamptz, tsquery, tsquery[], text[],
                                                    double precision[], double precision, double precision,
                                                    double precision, integer, bigint[], timestamptz) is
    'Internal: BM25 over the eligible memories matching p_match, best p_depth first.';

-- The lexical arm over memories: the query's terms, pruned by the corpus
-- statistics (term_stats.sql: a snapshot, or counted live), and the best
-- p_depth eligible memories by BM25, recruited by the narrowest query that
-- finds p_depth of them. One row: the ranked ids and scores, and what the
-- metadata reports (terms, dropped terms, where the statistics came from,
-- which query recruited and whether it was narrower than every term).
-- p_settings: the tenant's settings when the caller has read them already
-- (reading them costs as much as the pruning).
-- p_among: the few memories the principal may see, when the caller knows
-- them (_few_eligible); every kept term then recruits among them at once.
-- recall_lexical_window: the candidates are scored over the memories'
-- windows (window_arm.sql), except as of a past moment.
create or replace function __tenant__._lexical_arm(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_query text, p_depth integer, p_settings jsonb default null, p_among bigint[] default null,
    p_as_of timestamptz default null, p_as_of_ids bigint[] default null, p_as_of_tsv tsvector[] default null)
returns table (ids bigint[], scores double precision[], terms text[], dropped text[], term_stats text,
               recruited_by tsquery, recruited boolean)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_set jsonb := coalesce(p_settings, _settings());
    v_df bigint[];
    v_documents bigint;
    v_avg_length double precision;
    v_kept text[];
    v_kept_df bigint[];
    v_idf double precision[];
    v_recruiters tsquery[];
    v_term_queries tsquery[];
begin
    ids := '{}';
    scores := '{}';
    dropped := '{}';
    recruited := false;
    terms := _query_terms(p_query);
    if cardinality(terms) = 0 then
        return next;
        return;
    end if;
    select array_agg(f.df order by f.term), max(f.documents), max(f.avg_length), max(f.source)
      into v_df, v_documents, v_avg_length, term_stats
      from _term_frequencies(terms) f;
    select coalesce(array_agg(p.term order by p.term) filter (where not p.pruned), '{}'),
           coalesce(array_agg(p.term order by p.term) filter (where p.pruned), '{}'),
           array_agg(p.df order by p.term) filter (where not p.pruned),
           array_agg(p.idf order by p.term) filter (where not p.pruned)
      into v_kept, dropped, v_kept_df, v_idf
      from _prune_terms(terms, v_df, v_documents, (v_set ->> 'prune_min_terms')::integer,
                        (v_set ->> 'prune_df_ratio')::double precision) p;
    v_term_queries := array(select quote_literal(t)::tsquery from unnest(v_kept) t);
    if p_among is not null then
        -- Narrower recruiters bound the matching work over a large eligible
        -- set; over a few memories they would only add a pass: every kept
        -- term recruits (_lexical_recruiters' last query, spelled as there).
        v_recruiters := array[array_to_string(array(select quote_literal(t) from unnest(v_kept) t), ' | ')::tsquery];
    else
        v_recruiters := _lexical_recruiters(v_kept, v_kept_df, p_depth, (v_set ->> 'lexical_match_budget')::bigint);
    end if;
    for i in 1 .. cardinality(v_recruiters) loop
        if (v_set ->> 'recall_lexical_window')::boolean and p_as_of is null then
            select coalesce(array_agg(c.id order by c.ord), '{}'), coalesce(array_agg(c.score order by c.ord), '{}')
              into ids, scores
              from _window_candidates(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, v_recruiters[i],
                                      v_term_queries, v_kept, v_idf, (v_set ->> 'bm25_k1')::double precision,
                                      (v_set ->> 'bm25_b')::double precision, v_avg_length, p_depth, p_among)
                   with ordinality as c(id, score, ord);
        else
            select coalesce(array_agg(c.id order by c.ord), '{}'), coalesce(array_agg(c.score order by c.ord), '{}')
              into ids, scores
              from _lexical_candidates(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at,
                                       v_recruiters[i], v_term_queries, v_kept, v_idf,
                                       (v_set ->> 'bm25_k1')::double precision, (v_set ->> 'bm25_b')::double precision,
                                       v_avg_length, p_depth, p_among, p_as_of)
                   with ordinality as c(id, score, ord);
        end if;
        recruited_by := v_recruiters[i];
        exit when cardinality(ids) >= p_depth;
    end loop;
    recruited := recruited_by is distinct from v_recruiters[cardinality(v_recruiters)];
    if (v_set ->> 'recall_memory_keys')::boolean and recruited_by is not null then
        -- The memories' keys (key_arm.sql): a key's hit counts for its memory, once.
        select r.merged_ids, r.merged_scores into ids, scores
          from _key_hits(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, recruited_by, v_kept, v_idf,
                         (v_set ->> 'bm25_k1')::double precision, (v_set ->> 'bm25_b')::double precision,
                         v_avg_length, p_depth, p_among, p_as_of) k
         cross join lateral _merge_best(ids, scores, k.key_ids, k.key_scores, p_depth) r;
    end if;
    if cardinality(p_as_of_ids) > 0 then
        -- As of a past moment: the memories changed since, by the text they
        -- had then (_memories_as_of), scored as the others and ranked with them.
        select r.merged_ids, r.merged_scores into ids, scores
          from (select coalesce(array_agg(h.id), '{}') as more_ids,
                       coalesce(array_agg((select sum(v_idf[array_position(v_kept, w.lexeme)]
                                                      * _bm25_tf(cardinality(w.positions), length(h.tsv),
                                                                 (v_set ->> 'bm25_k1')::double precision,
                                                                 (v_set ->> 'bm25_b')::double precision, v_avg_length))
                                             from unnest(h.tsv) w where w.lexeme = any (v_kept))), '{}') as more
                  from unnest(p_as_of_ids, p_as_of_tsv) h(id, tsv)
                 where h.tsv @@ v_recruiters[cardinality(v_recruiters)]) then_
         cross join lateral _merge_ranked(ids, scores, then_.more_ids, then_.more, p_depth) r;
    end if;
    return next;
end
$$;
comment on function __tenant__._lexical_arm(bigint, text[], text, boolean, timestamptz, text, integer, jsonb, bigint[],
                                            timestamptz, bigint[], tsvector[]) is
    'Internal: recall''s lexical arm: pruned query terms, BM25 over the eligible memories, best p_depth first.';
