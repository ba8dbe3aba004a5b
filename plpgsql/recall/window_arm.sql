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
