-- Recall as of a past moment (recall's p_as_of): the memory as it stood
-- then. plpgsql/recall/recall.sql composes the steps; this file holds what only an
-- as-of recall runs.
--
-- A memory's row either has not changed since the moment (updated_at at or
-- before it: _unchanged_since, eligibility.sql) and is read as it is now by
-- every step, or it has, and its state then is rebuilt from its history:
--   created after the moment            not there yet
--   forgotten after it                  still there (invalidated_at later)
--   superseded after it                 still current, valid without an end
--                                       (supersession ends valid at its time)
--   corrected after it                  the text it had then: the earliest
--                                       revision kept after the moment
--                                       (memory_revision.changed_at; read
--                                       here and by _recall_items)
-- Who may see it, and for which purpose, is decided by the rule of now: as-of
-- is history, not a way around eligibility. What was erased is gone from
-- the history too.
--
-- Vectors: a memory keeps one, of its current text, and only while it is
-- live (a superseded or forgotten memory's vector is dropped, and passages
-- that borrowed it get their own: embedding_queue.sql). So of the memories
-- changed since the moment, the dense arm ranks those whose current vector
-- is of the text they had then (live again, or changed in nothing but
-- state); one corrected, superseded or forgotten since is not found by the
-- dense arm as of then. The lexical arm finds it by the text it had, so
-- hybrid recall answers with it.

-- The memories changed since p_as_of that the principal may see as they
-- stood at p_as_of: the one eligibility rule applied to their state then.
-- One row: their ids, the tsvectors of their text then (as memory.tsv is
-- made: memory.tsv itself when the text is unchanged), and the ids of those
-- with a vector of their text then: live now (a memory that is not keeps no
-- vector: _memory_changed, queues/embedding_queue.sql) and not corrected
-- since. Empty arrays when p_as_of is NULL; PR152 for a p_as_of that is not
-- a past time. p_texts false (no lexical step will read them): tsvs is NULL.
create or replace function __tenant__._memories_as_of(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_as_of timestamptz, p_texts boolean default true, out ids bigint[], out tsvs tsvector[], out vector_ids bigint[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_live boolean[];
begin
    perform _check_past_moment(p_as_of, 'as_of',
                               'An as-of read answers what was known at a past moment: leave as_of out to read as of now.');
    ids := '{}';
    tsvs := '{}';
    vector_ids := '{}';
    if p_as_of is null then
        return;
    end if;
    select coalesce(array_agg(m.id order by m.id), '{}'),
           -- "filter": an aggregate under a false CASE is computed all the same
           case when p_texts then coalesce(array_agg(m.tsv order by m.id) filter (where p_texts), '{}') end,
           coalesce(array_agg(m.superseded_by is null and m.invalidated_at is null order by m.id), '{}')
      into ids, tsvs, v_live
      from memory m
     where m.updated_at > m.created_at  -- the index memory_changed
       and m.updated_at > p_as_of and m.created_at <= p_as_of
       and _memory_eligible(m.scope, m.audience_peer_id, m.purposes,
                            case when m.invalidated_at <= p_as_of then m.invalidated_at end,
                            case when upper(m.valid) <= p_as_of then m.superseded_by end,
                            case when m.superseded_by is not null and upper(m.valid) > p_as_of
                                 then tstzrange(lower(m.valid), null) else m.valid end,
                            p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at);
    if cardinality(ids) = 0 then
        return;
    end if;
    -- The text of those corrected since: the earliest revision replaced
    -- after the moment (its tsvector kept with it, migration 0041), the
    -- revisions of all of them read at once. A lookup per memory (a lateral
    -- join) was planned as a scan of the revisions for each: 7.5 ms of a 21
    -- ms dense recall as of a moment 394 changes ago (100k memories,
    -- bench.as_of); parsing every text then, 2.8 ms more.
    with then_ as (
        select distinct on (r.memory_id) r.memory_id, r.tsv
          from memory_revision r
         where r.memory_id = any (ids) and r.changed_at > p_as_of
         order by r.memory_id, r.revision)
    select case when p_texts then array_agg(coalesce(t.tsv, u.tsv) order by u.id) filter (where p_texts) end,
           coalesce(array_agg(u.id order by u.id) filter (where u.live and t.memory_id is null), '{}')
      into tsvs, vector_ids
      from unnest(ids, tsvs, v_live) u(id, tsv, live)
      left join then_ t on t.memory_id = u.id;
end
$$;
comment on function __tenant__._memories_as_of(bigint, text[], text, boolean, timestamptz, timestamptz, boolean) is
    'Internal: for recall as of p_as_of, the memories changed since then that the principal may see as they stood then, with their text then.';

-- A moment to read the past at (recall's p_as_of, a fact read's p_known_at):
-- a finite time, not after now, since what is known later is not known yet
-- (a later time the world is asked about is p_at or p_valid_at, and allowed).
-- p_what names it as the driver and the MCP tool do (as_of, not p_as_of): a
-- psql user reads those words as well, a Python user is not shown the SQL's.
create or replace function __tenant__._check_past_moment(p_moment timestamptz, p_what text, p_hint text)
returns void
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_time(p_moment, p_what);
    if p_moment > now() then
        perform _fail('PR152', format('%s %s is in the future (now is %s)', p_what, p_moment, now()), p_hint);
    end if;
end
$$;
comment on function __tenant__._check_past_moment(timestamptz, text, text) is
    'Internal: PR152 unless p_moment is NULL or a finite time not after now; p_what names it, p_hint says what to do.';

-- A ranked list with the memories changed since the moment scored alike,
-- the best p_depth of both, best first (ties by id): how the lexical and
-- the dense arm merge what _memories_as_of rebuilt into their own ranking.
create or replace function __tenant__._merge_ranked(p_ids bigint[], p_scores double precision[],
                                                   p_more_ids bigint[], p_more_scores double precision[],
                                                   p_depth integer)
returns table (merged_ids bigint[], merged_scores double precision[])
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with best as (
        select u.id, u.score
          from (select a.id, a.score from unnest(p_ids, p_scores) a(id, score)
                union all
                select b.id, b.score from unnest(p_more_ids, p_more_scores) b(id, score)) u
         order by u.score desc, u.id
         limit p_depth
    )
    select coalesce(array_agg(b.id order by b.score desc, b.id), '{}'),
           coalesce(array_agg(b.score order by b.score desc, b.id), '{}')
      from best b
$$;
comment on function __tenant__._merge_ranked(bigint[], double precision[], bigint[], double precision[], integer) is
    'Internal (as of a past moment): two ranked lists as one, the best p_depth first.';
