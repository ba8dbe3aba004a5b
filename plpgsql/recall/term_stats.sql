-- Corpus statistics for BM25 and term pruning.
--
-- Document frequencies come from a snapshot (term_stat, corpus_stat) taken by
-- refresh_term_stats(), which the worker runs when the corpus has grown by
-- stats_refresh_ratio since the last one. Writers never update a statistic,
-- so a common word is not a row every insert contends on. How stale they may
-- be: a snapshot is at most stats_refresh_ratio (10%) of the corpus behind
-- while a worker runs; a term new since the snapshot counts as df = 1 (rare),
-- which errs toward keeping it. With no snapshot yet, recall counts the query
-- terms' frequencies live, which is exact and cheap on a small corpus.

create or replace function __tenant__.refresh_term_stats()
returns table (documents bigint, terms bigint)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_documents bigint;
    v_avg double precision;
    v_max bigint;
begin
    -- One refresher at a time; a second caller waits and then refreshes again.
    perform _lock('term_stats', array['refresh']);
    -- The first refresh comes after a new tenant's first writes: the planner's statistics too.
    perform _analyze_unseen_tables();
    select count(*), coalesce(avg(length(m.tsv)), 0), coalesce(max(m.id), 0)
      into v_documents, v_avg, v_max
      from memory m where m.superseded_by is null and m.invalidated_at is null;
    delete from term_stat;
    -- Each term's document frequency, and one memory that uses it (its witness).
    insert into term_stat (term, df, witness_memory_id)
    select u.lexeme, count(*), max(m.id)
      from memory m cross join lateral unnest(m.tsv) u
     where m.superseded_by is null and m.invalidated_at is null
     group by u.lexeme;
    insert into corpus_stat as c (singleton, documents, avg_length, max_memory_id, refreshed_at)
    values (true, v_documents, v_avg, v_max, now())
    on conflict (singleton) do update
        set documents = excluded.documents, avg_length = excluded.avg_length,
            max_memory_id = excluded.max_memory_id, refreshed_at = excluded.refreshed_at;
    return query select v_documents, (select count(*) from term_stat);
end
$$;
comment on function __tenant__.refresh_term_stats() is
    'Recomputes the document frequencies that lexical ranking and pruning use (a snapshot of live memories), and takes the planner statistics of tables never analyzed.';

create or replace function __tenant__.term_stats_stale()
returns boolean
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce((
        select (select coalesce(max(m.id), 0) from memory m) - c.max_memory_id
               > greatest(1, c.documents * (_setting_value('stats_refresh_ratio') #>> '{}')::double precision)
          from corpus_stat c), true)
$$;
comment on function __tenant__.term_stats_stale() is
    'True when there is no snapshot, or memories grew by more than stats_refresh_ratio since it was taken.';

-- Document frequency of each term, and the corpus size and mean length, from
-- the snapshot when there is one, else counted live.
create or replace function __tenant__._term_frequencies(p_terms text[])
returns table (term text, df bigint, documents bigint, avg_length double precision, source text)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_corpus corpus_stat;
    v_terms text[];
    v_df bigint[];
begin
    select c.* into v_corpus from corpus_stat c;
    if v_corpus.singleton then
        -- The table alone, then matched: on Citus a one-table statement without a subquery takes the
        -- fast path.
        select coalesce(array_agg(s.term), '{}'), coalesce(array_agg(s.df::bigint), '{}') into v_terms, v_df
          from term_stat s where s.term = any (p_terms);
        return query
        select t, coalesce(v_df[array_position(v_terms, t)], 1),
               greatest(v_corpus.documents, 1), greatest(v_corpus.avg_length, 1), 'snapshot'::text
          from unnest(p_terms) t;
        return;
    end if;
    return query
    with live as (
        select count(*) as n, greatest(coalesce(avg(length(m.tsv)), 1), 1)::double precision as avg_len
          from memory m where m.superseded_by is null and m.invalidated_at is null)
    select t,
           greatest((select count(*) from memory m where m.superseded_by is null and m.invalidated_at is null
                       and m.tsv @@ (quote_literal(t))::tsquery), 1),
           greatest(live.n, 1), live.avg_len, 'live'::text
      from unnest(p_terms) t, live;
end
$$;
comment on function __tenant__._term_frequencies(text[]) is
    'Internal: df per term, corpus size and mean length (snapshot, or live when there is none).';

-- A term leaves the statistics when no live memory uses it any more. Each
-- term keeps a witness (a memory that used it) so that proving it survives is
-- one row read; only a term whose witness no longer holds costs an index
-- probe, and whatever the probe finds becomes the new witness. p_leaving are
-- memories about to be erased, which prove nothing.
create or replace function __tenant__._drop_unused_terms(p_terms text[], p_leaving bigint[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    with unproven as (
        select t.term from term_stat t
         where t.term = any (p_terms)
           and not exists (select 1 from memory w
                            where w.id = t.witness_memory_id and not (w.id = any (p_leaving))
                              and w.superseded_by is null and w.invalidated_at is null
                              and w.tsv @@ quote_literal(t.term)::tsquery)
    ), probed as (
        select u.term, (select m.id from memory m
                         where m.tsv @@ quote_literal(u.term)::tsquery
                           and m.superseded_by is null and m.invalidated_at is null
                           and not (m.id = any (p_leaving))
                         limit 1) as witness
          from unproven u
    ), rewitnessed as (
        update term_stat t set witness_memory_id = p.witness
          from probed p where t.term = p.term and p.witness is not null
    )
    delete from term_stat t using probed p where t.term = p.term and p.witness is null;
end
$$;
comment on function __tenant__._drop_unused_terms(text[], bigint[]) is
    'Internal: delete the terms no live memory (other than p_leaving) uses; re-witness the others.';

-- What the statistics count of some memories: each term, how many of them
-- that are live use it, and one of those (a witness). PL/pgSQL, not an
-- inlined SQL function: on Citus a query whose table comes from an SQL
-- function with parameters cannot be planned; its callers join the counts of
-- a few memories' terms, which need no index of theirs.
create or replace function __tenant__._live_term_counts(p_memory_ids bigint[])
returns table (lexeme text, n integer, witness bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select u.lexeme, count(*)::integer, max(m.id)
      from __tenant__.memory m, unnest(m.tsv) u
     where m.id = any (p_memory_ids) and m.superseded_by is null and m.invalidated_at is null
     group by u.lexeme;
end
$$;
comment on function __tenant__._live_term_counts(bigint[]) is
    'Internal: per term, how many of these memories that are live use it, and the largest such id.';

-- Erasure takes memories out of the statistics without a full refresh: the
-- frequencies of their terms drop, and a term that no surviving live memory
-- uses is deleted, so no erased word survives in term_stat. Returns the
-- memories' terms, for the erasure's residual.
create or replace function __tenant__._forget_terms(p_memory_ids bigint[])
returns text[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_terms text[];
begin
    select coalesce(array_agg(distinct u.lexeme), '{}') into v_terms
      from memory m cross join lateral unnest(m.tsv) u where m.id = any (p_memory_ids);
    update term_stat t set df = t.df - g.n
      from _live_term_counts(p_memory_ids) g
     where t.term = g.lexeme and t.df > g.n;
    perform _drop_unused_terms(v_terms, p_memory_ids);
    update corpus_stat c set documents = greatest(c.documents - (
        select count(*) from memory m
         where m.id = any (p_memory_ids) and m.superseded_by is null and m.invalidated_at is null), 0);
    return v_terms;
end
$$;
comment on function __tenant__._forget_terms(bigint[]) is
    'Internal: remove memories about to be erased from the term statistics; returns their terms.';

-- Erasure also rewrites memories: undoing a correction gives a memory back an
-- earlier text. _term_uses, taken before the rewrite, counts how many of the
-- live memories use each term; _retext_terms, after it, moves the statistics
-- from the old texts to the new ones (a term the new texts bring is counted,
-- one they dropped loses their count and leaves when no live memory uses it;
-- p_leaving, memories the same erasure deletes, do not count as using it).
create or replace function __tenant__._term_uses(p_memory_ids bigint[])
returns jsonb
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(jsonb_object_agg(g.lexeme, g.n), '{}') from _live_term_counts(p_memory_ids) g
$$;
comment on function __tenant__._term_uses(bigint[]) is
    'Internal: {term: how many of these live memories use it}, taken before erasure rewrites them.';

create or replace function __tenant__._retext_terms(p_memory_ids bigint[], p_before jsonb, p_leaving bigint[])
returns text[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_terms text[];
    v_change integer[];
    v_witness bigint[];
begin
    select coalesce(array_agg(coalesce(a.lexeme, b.lexeme)), '{}'),
           coalesce(array_agg(coalesce(a.n, 0) - coalesce(b.n, 0)), '{}'),
           coalesce(array_agg(a.witness), '{}')
      into v_terms, v_change, v_witness
      from _live_term_counts(p_memory_ids) a
      full join (select j.key as lexeme, j.value::integer as n from jsonb_each_text(p_before) j) b
        on b.lexeme = a.lexeme
     where coalesce(a.n, 0) <> coalesce(b.n, 0);
    insert into term_stat as t (term, df, witness_memory_id)
    select c.term, c.change, c.witness from unnest(v_terms, v_change, v_witness) c(term, change, witness)
     where c.change > 0
    on conflict (term) do update set df = t.df + excluded.df;
    -- A term whose snapshot count came only from the old texts goes at once,
    -- unproven: a memory written since the snapshot may still use it, but
    -- then it counts once, as any term missing from the snapshot does, and
    -- its own count would have been no higher. A proof would cost a probe per
    -- term, which the planner makes a whole-table read for each term nothing
    -- uses: an erasure that took 2,000 such words away from 10k memories took
    -- 20 s with the probes, 1 s without.
    delete from term_stat t
     using unnest(v_terms, v_change) c(term, change)
     where c.change < 0 and t.term = c.term and t.df <= -c.change;
    update term_stat t set df = t.df + c.change
      from unnest(v_terms, v_change) c(term, change)
     where c.change < 0 and t.term = c.term and t.df > -c.change;
    -- The others were counted in other memories too; they stay while one of
    -- those (or any live memory) still uses them.
    v_terms := array(select c.term from unnest(v_terms, v_change) c(term, change) where c.change < 0);
    perform _drop_unused_terms(v_terms, p_leaving);
    return v_terms;
end
$$;
comment on function __tenant__._retext_terms(bigint[], jsonb, bigint[]) is
    'Internal: move the term statistics from memories'' old texts (_term_uses before) to their new ones; returns the terms they dropped.';
