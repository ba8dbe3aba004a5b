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
--
-- A refresh folds in the memories written since the last one (their terms
-- added to the counts) rather than recounting every memory's terms, which at
-- 5,000 memories cost 19-38 ms each time the corpus grew 10%: the counts it
-- ends with are the recount's. It may fold only while the memories the
-- snapshot counted are as they were: their number and the sum of their
-- revisions are kept (corpus_stat.memories, revisions), and an edit, a
-- supersession or a forget raises a revision; an erasure, which deletes and
-- rewrites memories (and may make a superseded one current again), marks the
-- statistics for a recount (corpus_stat.erased). Anything else is recounted
-- whole: a counted memory that changed, a first snapshot, an erasure since,
-- and, as a bound on whatever this reasoning missed, a corpus twice the size
-- of the last recount's. Ids below the snapshot's largest that it did not see
-- (a transaction in flight, or one rolled back) are kept as pending and
-- folded when they appear; one missing for an hour is given up.

create or replace function __tenant__.refresh_term_stats()
returns table (documents bigint, terms bigint)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_corpus corpus_stat;
begin
    -- One refresher at a time; a second caller waits and then refreshes again.
    perform _lock('term_stats', array['refresh']);
    -- The first refresh comes after a new tenant's first writes: the planner's statistics too.
    perform _analyze_unseen_tables();
    select c.* into v_corpus from corpus_stat c;
    if v_corpus.singleton is null or v_corpus.erased <> v_corpus.recounted_erased
       or v_corpus.documents >= 2 * v_corpus.recounted_documents
       or not _fold_term_stats(v_corpus) then
        perform _recount_term_stats(v_corpus);
    end if;
    return query select c.documents, (select count(*) from term_stat) from corpus_stat c;
end
$$;
comment on function __tenant__.refresh_term_stats() is
    'Brings the document frequencies that lexical ranking and pruning use up to date (a snapshot of live memories: the new ones folded in, or all recounted), and takes the planner statistics of tables never analyzed.';

-- The ids at most p_max that a snapshot which saw p_seen above p_from (and
-- some of p_pending) did not see, each with when it was first missed.
create or replace function __tenant__._unseen_memory_ids(p_pending bigint[], p_since timestamptz[], p_from bigint,
                                                         p_max bigint, p_seen bigint[])
returns table (ids bigint[], since timestamptz[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return query
    select coalesce(array_agg(h.id order by h.id), '{}'), coalesce(array_agg(h.since order by h.id), '{}')
      from (select p.id, p.since from unnest(p_pending, p_since) p(id, since)
             where p.since > now() - interval '1 hour' and p.id <= p_max
               and not exists (select 1 from unnest(p_seen) s(id) where s.id = p.id)
            union all
            -- the gaps between the ids seen above p_from, in order. A gap wider than 10,000 ids is a jump
            -- of the sequence, not transactions in flight (on Citus each node draws ids from a range of
            -- its own, 2^48 apart); the recount each time the corpus doubles counts what one hid.
            select g.id, now() from (
                select s.id, lag(s.id, 1, nullif(p_from, 0)) over (order by s.id) as prev
                  from unnest(p_seen) s(id) where s.id > p_from) x
             cross join lateral generate_series(x.prev + 1, case when x.id - x.prev <= 10000 then x.id - 1 else x.prev end)
                   g(id)) h;
end
$$;
comment on function __tenant__._unseen_memory_ids(bigint[], timestamptz[], bigint, bigint, bigint[]) is
    'Internal: the memory ids up to p_max a snapshot did not see (p_seen: those it saw above p_from or among p_pending), with when each was first missed.';

-- The memories written since the snapshot, folded in: false, having changed
-- nothing, when one the snapshot counted changed or went.
create or replace function __tenant__._fold_term_stats(p_corpus __tenant__.corpus_stat)
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_max bigint;
    v_memories bigint;
    v_revisions bigint;
    v_seen bigint[];
    v_seen_revisions bigint;
    v_live bigint[];
    v_tsv tsvector[];
    v_length bigint;
    v_pending bigint[];
    v_since timestamptz[];
begin
    -- One statement, one snapshot: the counted memories' check and the new ones' terms agree.
    select coalesce(max(m.id), 0),
           count(*) filter (where not f.added), coalesce(sum(m.revision) filter (where not f.added), 0),
           coalesce(array_agg(m.id) filter (where f.added), '{}'),
           coalesce(sum(m.revision) filter (where f.added), 0),
           coalesce(array_agg(m.id) filter (where f.added and f.live), '{}'),
           coalesce(array_agg(m.tsv) filter (where f.added and f.live), '{}'),
           coalesce(sum(length(m.tsv)) filter (where f.added and f.live), 0)
      into v_max, v_memories, v_revisions, v_seen, v_seen_revisions, v_live, v_tsv, v_length
      from memory m
      left join unnest(p_corpus.pending_ids) p(id) on p.id = m.id
     cross join lateral (select m.id > p_corpus.max_memory_id or p.id is not null as added,
                                m.superseded_by is null and m.invalidated_at is null as live) f;
    if v_memories <> p_corpus.memories or v_revisions <> p_corpus.revisions then
        return false;
    end if;
    insert into term_stat as t (term, df, witness_memory_id)
    select u.lexeme, count(*), max(x.id)
      from unnest(v_live, v_tsv) x(id, tsv) cross join lateral unnest(x.tsv) u
     group by u.lexeme
    on conflict (term) do update
        set df = t.df + excluded.df, witness_memory_id = greatest(t.witness_memory_id, excluded.witness_memory_id);
    select u.ids, u.since into v_pending, v_since
      from _unseen_memory_ids(p_corpus.pending_ids, p_corpus.pending_since, p_corpus.max_memory_id,
                              greatest(v_max, p_corpus.max_memory_id), v_seen) u;
    v_memories := p_corpus.memories + cardinality(v_seen);
    v_revisions := p_corpus.revisions + v_seen_revisions;
    v_length := p_corpus.total_length + v_length;
    v_max := greatest(v_max, p_corpus.max_memory_id);
    perform _write_corpus_stat(p_corpus.documents + cardinality(v_live), v_length, v_max, v_memories, v_revisions,
                               v_pending, v_since, p_corpus.recounted_documents, p_corpus.recounted_erased);
    return true;
end
$$;
comment on function __tenant__._fold_term_stats(__tenant__.corpus_stat) is
    'Internal: adds the memories written since the snapshot to the term statistics; false (nothing changed) when a memory it counted changed or went.';

-- Every live memory's terms counted again.
create or replace function __tenant__._recount_term_stats(p_corpus __tenant__.corpus_stat)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_from bigint := coalesce(p_corpus.max_memory_id, 0);
    v_max bigint;
    v_memories bigint;
    v_revisions bigint;
    v_documents bigint;
    v_length bigint;
    v_seen bigint[];
    v_pending bigint[];
    v_since timestamptz[];
begin
    -- What is counted, from one snapshot; the terms are counted by the next statement, of the same
    -- memories: one changed in between has a higher revision than is kept here, and the next refresh
    -- recounts.
    select coalesce(max(m.id), 0), count(*), coalesce(sum(m.revision), 0),
           count(*) filter (where m.superseded_by is null and m.invalidated_at is null),
           coalesce(sum(length(m.tsv)) filter (where m.superseded_by is null and m.invalidated_at is null), 0),
           coalesce(array_agg(m.id) filter (where m.id > v_from or p.id is not null), '{}')
      into v_max, v_memories, v_revisions, v_documents, v_length, v_seen
      from memory m left join unnest(coalesce(p_corpus.pending_ids, '{}')) p(id) on p.id = m.id;
    select u.ids, u.since into v_pending, v_since
      from _unseen_memory_ids(coalesce(p_corpus.pending_ids, '{}'), coalesce(p_corpus.pending_since, '{}'), v_from,
                              v_max, v_seen) u;
    delete from term_stat;
    -- Each term's document frequency, and one memory that uses it (its witness).
    insert into term_stat (term, df, witness_memory_id)
    select u.lexeme, count(*), max(m.id)
      from memory m cross join lateral unnest(m.tsv) u
     where m.superseded_by is null and m.invalidated_at is null
       and m.id <= v_max and not (m.id = any (v_pending))
     group by u.lexeme;
    perform _write_corpus_stat(v_documents, v_length, v_max, v_memories, v_revisions, v_pending, v_since,
                               v_documents, coalesce(p_corpus.erased, 0));
end
$$;
comment on function __tenant__._recount_term_stats(__tenant__.corpus_stat) is
    'Internal: recounts every live memory''s terms into the term statistics.';

create or replace function __tenant__._write_corpus_stat(p_documents bigint, p_total_length bigint, p_max bigint,
                                                         p_memories bigint, p_revisions bigint, p_pending bigint[],
                                                         p_since timestamptz[], p_recounted_documents bigint,
                                                         p_recounted_erased bigint)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_avg double precision := case when p_documents > 0 then p_total_length::double precision / p_documents else 0 end;
    v_window_avg double precision;
begin
    -- The windows (migration 0049) are averaged whole at each snapshot: they
    -- change as the embedding worker stores vectors, not as memories are
    -- written, so there is no count of them to fold.
    select avg(me.window_length) into v_window_avg from memory_embedding me where me.window_length is not null;
    -- erased is not written: an erasure that bumped it meanwhile makes the next refresh recount.
    insert into corpus_stat as c (singleton, documents, avg_length, max_memory_id, refreshed_at, memories, revisions,
                                  total_length, pending_ids, pending_since, recounted_documents, recounted_erased,
                                  window_avg_length)
    values (_unkept_on_citus(true), p_documents, v_avg, p_max, now(), p_memories, p_revisions, p_total_length, p_pending, p_since,
            p_recounted_documents, p_recounted_erased, v_window_avg)
    on conflict (singleton) do update
        set documents = excluded.documents, avg_length = excluded.avg_length,
            window_avg_length = excluded.window_avg_length,
            max_memory_id = excluded.max_memory_id, refreshed_at = excluded.refreshed_at,
            memories = excluded.memories, revisions = excluded.revisions, total_length = excluded.total_length,
            pending_ids = excluded.pending_ids, pending_since = excluded.pending_since,
            recounted_documents = excluded.recounted_documents, recounted_erased = excluded.recounted_erased;
end
$$;
comment on function __tenant__._write_corpus_stat(bigint, bigint, bigint, bigint, bigint, bigint[], timestamptz[], bigint, bigint) is
    'Internal: the snapshot''s corpus figures and what the next refresh needs to fold onto it.';

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
    -- erased: the next refresh recounts (these memories go, and what they superseded is current again).
    update corpus_stat c set documents = greatest(c.documents - (
        select count(*) from memory m
         where m.id = any (p_memory_ids) and m.superseded_by is null and m.invalidated_at is null), 0),
        erased = c.erased + 1;
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
    -- The texts changed without a new revision: the next refresh recounts rather than folds.
    update corpus_stat c set erased = c.erased + 1;
    return v_terms;
end
$$;
comment on function __tenant__._retext_terms(bigint[], jsonb, bigint[]) is
    'Internal: move the term statistics from memories'' old texts (_term_uses before) to their new ones; returns the terms they dropped.';
