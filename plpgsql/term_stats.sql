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
    perform pg_advisory_xact_lock(hashtext('pgrecall.term_stats'), hashtext('__tenant__'));
    select count(*), coalesce(avg(length(m.tsv)), 0), coalesce(max(m.id), 0)
      into v_documents, v_avg, v_max
      from memory m where m.superseded_by is null and m.invalidated_at is null;
    delete from term_stat;
    insert into term_stat (term, df)
    select s.word, s.ndoc from ts_stat(
        'select m.tsv from __tenant__.memory m where m.superseded_by is null and m.invalidated_at is null') s;
    insert into corpus_stat as c (singleton, documents, avg_length, max_memory_id, refreshed_at)
    values (true, v_documents, v_avg, v_max, now())
    on conflict (singleton) do update
        set documents = excluded.documents, avg_length = excluded.avg_length,
            max_memory_id = excluded.max_memory_id, refreshed_at = excluded.refreshed_at;
    return query select v_documents, (select count(*) from term_stat);
end
$$;
comment on function __tenant__.refresh_term_stats() is
    'Recomputes the document frequencies that lexical ranking and pruning use (a snapshot of live memories).';

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
begin
    select c.* into v_corpus from corpus_stat c;
    if v_corpus.singleton then
        return query
        select t, coalesce((select s.df::bigint from term_stat s where s.term = t), 1),
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
      from (select u.lexeme, count(*) as n
              from memory m cross join lateral unnest(m.tsv) u
             where m.id = any (p_memory_ids) and m.superseded_by is null and m.invalidated_at is null
             group by u.lexeme) g
     where t.term = g.lexeme and t.df > g.n;
    delete from term_stat t
     where t.term = any (v_terms)
       and not exists (select 1 from memory m where m.tsv @@ quote_literal(t.term)::tsquery
                          and m.superseded_by is null and m.invalidated_at is null
                          and not (m.id = any (p_memory_ids)));
    update corpus_stat c set documents = greatest(c.documents - (
        select count(*) from memory m
         where m.id = any (p_memory_ids) and m.superseded_by is null and m.invalidated_at is null), 0);
    return v_terms;
end
$$;
comment on function __tenant__._forget_terms(bigint[]) is
    'Internal: remove memories about to be erased from the term statistics; returns their terms.';
