-- A turn's words with its neighbours' (migration 0049, setting
-- recall_lexical_window): the lexical arm's candidates scored by BM25 over
-- each memory's window (input version 2's text as a text vector: its own
-- words, and those of the turns around its evidence that its audience may
-- see), a neighbour's occurrence counting half and the window's length
-- against the windows' average; a memory without a window yet (not embedded,
-- or embedded under version 1) by its own words, as the arm scores them.
-- Measured offline first (eval/results/offline51.md): a reply is found by the
-- words of the question it answers. Eligibility is the memory's
-- (_memory_eligible, or among p_among when the caller holds the few the
-- principal may see); the idf is the arm's (the memories' own term
-- statistics). Not used as of a past moment: a window holds today's
-- neighbours.
create or replace function __tenant__._window_candidates(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_match tsquery, p_term_queries tsquery[], p_terms text[], p_idf double precision[],
    p_k1 double precision, p_b double precision, p_avg_length double precision, p_depth integer,
    p_among bigint[] default null)
returns table (id bigint, score double precision)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_window_avg double precision;
begin
    select c.window_avg_length into v_window_avg from corpus_stat c;
    if v_window_avg is null then
        -- no snapshot since windows were written: counted now
        select avg(me.window_length) into v_window_avg from memory_embedding me where me.window_length is not null;
    end if;
    v_window_avg := greatest(coalesce(v_window_avg, p_avg_length), 1);
    return query
    with matched as (
        select w.memory_id as id, w.window_tsv as tsv, w.window_length::double precision as len,
               v_window_avg as avg_len, true as is_window
          from memory_embedding w
          join memory e on e.id = w.memory_id
         where w.window_tsv @@ p_match
           and _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
           and (p_among is null or e.id = any (p_among))
        union all
        select e.id, e.tsv, length(e.tsv)::double precision, p_avg_length, false
          from memory e
         where e.tsv @@ p_match
           and _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
           and (p_among is null or e.id = any (p_among))
           and not exists (select 1 from memory_embedding w where w.memory_id = e.id and w.window_tsv is not null)
    ), bounded as (
        -- the presence score bounds the exact scoring, as in _lexical_matched
        select m.*
          from matched m
         order by (select coalesce(sum(p_idf[i]), 0) from generate_subscripts(p_term_queries, 1) i
                    where m.tsv @@ p_term_queries[i]) * _bm25_tf(1, m.len, p_k1, p_b, m.avg_len) desc, m.id
         limit greatest(2 * p_depth, 100)
    )
    select b.id,
           (select sum(p_idf[array_position(p_terms, u.lexeme)]
                       * _bm25_tf(cardinality(u.positions)
                                  - case when b.is_window then 0.5 * cardinality(array_positions(u.weights, 'D'))
                                         else 0 end,
                                  b.len, p_k1, p_b, b.avg_len))
              from unnest(b.tsv) u where u.lexeme = any (p_terms)) as s
      from bounded b
     order by s desc, b.id
     limit p_depth;
end
$$;
comment on function __tenant__._window_candidates(bigint, text[], text, boolean, timestamptz, tsquery, tsquery[], text[],
                                                  double precision[], double precision, double precision,
                                                  double precision, integer, bigint[]) is
    'Internal (recall_lexical_window): BM25 over the eligible memories'' windows (own words, and a neighbour''s at half), or their own words without one; best p_depth first.';

-- With recall_window_beside, the lexical evidence that orders RRF's rows
-- (_evidence_scores): each memory's BM25 as a share of its list's first, by
-- its own words and by its window, averaged (0 for a list that did not hold
-- it), so the two lexical lists together weigh what the lexical arm alone
-- does. Returned best first; the shares are on the scale 1 (p_bm25_scale).
create or replace function __tenant__._window_beside_shares(p_own_ids bigint[], p_own_bm25 double precision[],
                                                           p_window_ids bigint[], p_window_bm25 double precision[])
returns table (ids bigint[], shares double precision[])
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with own as (
        select x.id, x.s / nullif(p_own_bm25[1], 0) as s from unnest(p_own_ids, p_own_bm25) x(id, s)
    ), win as (
        select x.id, x.s / nullif(p_window_bm25[1], 0) as s from unnest(p_window_ids, p_window_bm25) x(id, s)
    ), mean as (
        select coalesce(own.id, win.id) as id, (coalesce(own.s, 0) + coalesce(win.s, 0)) / 2 as s
          from own full join win on win.id = own.id
    )
    select coalesce(array_agg(m.id order by m.s desc, m.id), '{}'), coalesce(array_agg(m.s order by m.s desc, m.id), '{}')
      from mean m
$$;
comment on function __tenant__._window_beside_shares(bigint[], double precision[], bigint[], double precision[]) is
    'Internal (recall_window_beside): each memory''s lexical evidence, the mean of its BM25 shares by its own words and by its window, best first.';

-- Recall's lexical lists: the lexical arm's (_lexical_arm), and with
-- recall_window_beside on (not as of a past moment: a window holds today's
-- neighbours) the windows' list beside it, the lexical arm once more with
-- recall_lexical_window. The first list is then by the memories' own words
-- (and their keys, with recall_memory_keys: the windows' list holds none).
create or replace function __tenant__._lexical_lists(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_query text, p_depth integer, p_settings jsonb, p_among bigint[] default null,
    p_as_of timestamptz default null, p_as_of_ids bigint[] default null, p_as_of_tsv tsvector[] default null)
returns table (ids bigint[], scores double precision[], terms text[], dropped text[], term_stats text,
               recruited_by tsquery, recruited boolean, window_ids bigint[], window_scores double precision[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_beside boolean := (p_settings ->> 'recall_window_beside')::boolean;
begin
    select a.ids, a.scores, a.terms, a.dropped, a.term_stats, a.recruited_by, a.recruited
      into ids, scores, terms, dropped, term_stats, recruited_by, recruited
      from _lexical_arm(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_query, p_depth,
                        case when v_beside then p_settings || '{"recall_lexical_window": false}' else p_settings end,
                        p_among, p_as_of, p_as_of_ids, p_as_of_tsv) a;
    window_ids := '{}';
    window_scores := '{}';
    if v_beside and p_as_of is null then
        select a.ids, a.scores into window_ids, window_scores
          from _lexical_arm(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_query, p_depth,
                            p_settings || '{"recall_lexical_window": true, "recall_memory_keys": false}', p_among) a;
    end if;
    return next;
end
$$;
comment on function __tenant__._lexical_lists(bigint, text[], text, boolean, timestamptz, text, integer, jsonb, bigint[],
                                              timestamptz, bigint[], tsvector[]) is
    'Internal: recall''s lexical lists: the lexical arm''s, and with recall_window_beside on, the windows'' list beside it.';
