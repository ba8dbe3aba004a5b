-- Passages: every observation is split into chunks (passage_chunks.sql) in
-- the transaction that appends it (a statement trigger, so one append and a
-- batch share the path), each chunk registered in the projection registry and
-- queued for the embedding worker (embedding_queue.sql). A passage copies
-- its observation's audience, so that message search filters by it inside
-- the partition before ranking. Each scope's
-- passages live in a partition of their own, provisioned when the scope is
-- added; passage_stat counts them for BM25.

-- Which passages get a vector: the scope's passage_embedding, or the
-- tenant's when the scope names none. 'messages' (the default) embeds the
-- passages of observations of kind message: message search is search over
-- what was said, a turn is one passage, so that costs one vector per message.
-- A document (or a long tool result) is cut into many passages, and its
-- meaning is already embedded through its memory; embedding every passage
-- too made storing a document cost four vectors instead of one. Its
-- passages keep their lexical index either way. 'all' embeds every passage,
-- 'none' none.
create or replace function __tenant__._passage_embedding_policies()
returns table (scope text, policy text)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select s.name, coalesce(s.passage_embedding, _setting_value('passage_embedding') #>> '{}') from scope s
$$;
comment on function __tenant__._passage_embedding_policies() is
    'Internal: each scope''s passage embedding policy (all, messages, none): its own, or the tenant''s setting.';

-- The passages (of these scopes, or all) that their scope's policy embeds
-- and that have no vector of the current stamp (or all of them, with
-- p_everything): what the worker should have.
create or replace function __tenant__._passages_wanting_vectors(p_scopes text[] default null,
                                                                p_everything boolean default false)
returns table (passage_id bigint, scope text)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select p.id, p.scope
      from _passage_embedding_policies() pol
      join passage p on p.scope = pol.scope
      join observation o on o.id = p.observation_id
     cross join _embedding_stamp() st
     where (p_scopes is null or pol.scope = any (p_scopes))
       and (pol.policy = 'all' or (pol.policy = 'messages' and o.kind = 'message'))
       and (p_everything
            or ((p.embedding_model is distinct from st.model or p.embedding_input_version is distinct from st.input_version)
                -- nor a memory's current vector of the same text (passage_vectors.sql)
                and not exists (select 1 from memory_embedding me where me.memory_id = p.vector_memory_id
                                   and me.model = st.model and me.input_version = st.input_version)));
end
$$;
comment on function __tenant__._passages_wanting_vectors(text[], boolean) is
    'Internal: passages their scope''s passage_embedding policy embeds that lack a current vector (or all of them).';

-- After a policy changed: queue what is now wanted, drop waiting jobs of
-- passages no longer wanted (a vector already stored stays: it is correct,
-- and semantic search may as well use it). Returns (queued, dropped).
create or replace function __tenant__._requeue_passages(p_scopes text[] default null)
returns table (queued bigint, dropped bigint)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    with wanted as (
        select w.passage_id, w.scope from _passages_wanting_vectors(p_scopes) w
    ), gone as (
        delete from passage_embedding_job j
         where (p_scopes is null or j.scope = any (p_scopes))
           and j.leased_by is null
           and not exists (select 1 from wanted w where w.passage_id = j.passage_id)
        returning 1
    ), added as (
        insert into passage_embedding_job (passage_id, scope)
        select w.passage_id, w.scope from wanted w
        on conflict (passage_id) do nothing
        returning 1
    )
    select (select count(*) from added), (select count(*) from gone) into queued, dropped;
    if queued > 0 then
        perform _notify('embed');
    end if;
    return next;
end
$$;
comment on function __tenant__._requeue_passages(text[]) is
    'Internal: after a passage_embedding change, queue the passages now wanted and drop waiting jobs of those no longer wanted.';

-- A scope's own choice of which passages are embedded (all, messages, none),
-- or NULL to follow the tenant setting passage_embedding. Takes effect at
-- once: passages now wanted are queued, waiting jobs of the others dropped.
create or replace function __tenant__.set_scope_passage_embedding(p_scope text, p_policy text)
returns table (scope text, policy text, queued bigint, dropped bigint)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_text(p_scope, 'scope', 64);
    if p_policy is not null then
        perform _check_one_of(p_policy, 'passage embedding policy', array['all', 'messages', 'none']);
    end if;
    update scope s set passage_embedding = p_policy where s.name = p_scope;
    if not found then
        perform _fail('PR131', format('scope %s does not exist', _shown(p_scope)),
                      'scopes() lists the scopes; add_scope() adds one.');
    end if;
    return query
    select p_scope, pol.policy, r.queued, r.dropped
      from _requeue_passages(array[p_scope]) r
      join _passage_embedding_policies() pol on pol.scope = p_scope;
end
$$;
comment on function __tenant__.set_scope_passage_embedding(text, text) is
    'Which of a scope''s passages are embedded for semantic message search: all, messages, none, or NULL for the tenant setting passage_embedding (admin duty); queues or drops passage jobs to match.';

-- Writes the passages of these observations with their registry rows and
-- embedding jobs (for the passages their scope's policy embeds). Returns how
-- many passages were written. The observations have no passage yet (a new
-- turn, or the backfill's). Separate statements over arrays, not one with
-- data-modifying CTEs, which Citus plans as subplans whose results it sends
-- to every worker, so that a turn on one worker failed while another worker
-- was down (and paid a round trip to each worker while all were up).
-- Planned once per session, not per call (plan_cache_mode), as _remember_batch.
create or replace function __tenant__._write_passages(p_observation_ids bigint[])
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_saved_plan_mode text := current_setting('plan_cache_mode');
    -- The three chunk sizes in one read of the setting table.
    v_set jsonb := (select jsonb_object_agg(s.key, s.value) from setting s where left(s.key, 8) = 'passage_');
    v_count bigint;
    v_queued bigint;
    v_ids bigint[];
    v_observations bigint[];
    v_scopes text[];
    v_ordinals integer[];
    v_starts integer[];
    v_ends integer[];
    v_bodies text[];
    v_queue boolean[];
    -- No notification when work waits already (notifications.sql), asked before these jobs are queued.
    v_waiting boolean := _embed_work_waiting();
begin
    perform set_config('plan_cache_mode', _plan_cache_mode(), true);
    -- The spans first, each with the id its passage will have: the passages,
    -- their registry rows and their jobs are then written from these arrays.
    -- Read back by their turns instead, under a plan made while the passage
    -- table was nearly empty, each turn's passages were looked for among every
    -- passage of its scope (test_plans_stay_probes).
    select coalesce(array_agg(nextval(pg_get_serial_sequence('__tenant__.passage', 'id'))), '{}'),
           array_agg(x.observation_id), array_agg(x.scope), array_agg(x.ordinal), array_agg(x.start_byte),
           array_agg(x.end_byte), array_agg(x.body), array_agg(x.queued)
      into v_ids, v_observations, v_scopes, v_ordinals, v_starts, v_ends, v_bodies, v_queue
      from (select o.id as observation_id, o.scope, s.ordinal, s.start_byte, s.end_byte, s.body,
                   coalesce(c.passage_embedding, v_set ->> 'passage_embedding') = 'all'
                   or (coalesce(c.passage_embedding, v_set ->> 'passage_embedding') = 'messages'
                       and o.kind = 'message') as queued
              from observation o
             cross join lateral _passage_spans(o.body, (v_set ->> 'passage_max_chars')::integer,
                                               (v_set ->> 'passage_target_chars')::integer,
                                               (v_set ->> 'passage_overlap_chars')::integer) s
             cross join lateral (select c.passage_embedding from scope c where c.name = o.scope limit 1) c
             where o.id = any (p_observation_ids)
             order by o.id, s.ordinal) x;
    -- Each turn probed by key ("limit 1" keeps it a probe) for what its passages copy.
    insert into passage (id, scope, observation_id, ordinal, start_byte, end_byte, body, session_id, actor_id,
                         occurred_at, audience)
    select u.id, u.scope, u.observation_id, u.ordinal, u.start_byte, u.end_byte, u.body, o.session_id,
           o.actor_id, o.occurred_at, o.audience
      from unnest(v_ids, v_observations, v_scopes, v_ordinals, v_starts, v_ends, v_bodies)
           u(id, observation_id, scope, ordinal, start_byte, end_byte, body)
     cross join lateral (select o.session_id, o.actor_id, o.occurred_at, o.audience
                           from observation o where o.id = u.observation_id limit 1) o
     order by u.id;
    v_count := cardinality(v_ids);
    insert into projection_dependency (kind, row_key, observation_id)
    select 'passage', u.id::text, u.observation_id from unnest(v_ids, v_observations) u(id, observation_id);
    insert into passage_embedding_job (passage_id, scope)
    select u.id, u.scope from unnest(v_ids, v_scopes, v_queue) u(id, scope, queued) where u.queued;
    get diagnostics v_queued = row_count;
    if v_queued > 0 and not v_waiting then
        perform _notify('embed');
    end if;
    perform set_config('plan_cache_mode', v_saved_plan_mode, true);
    return v_count;
end
$$;
comment on function __tenant__._write_passages(bigint[]) is
    'Internal: chunk observations into passages, register them as projections and queue those their scope''s policy embeds.';

create or replace function __tenant__._observations_appended()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _write_passages(array(select n.id from appended n));
    return null;
end
$$;
comment on function __tenant__._observations_appended() is
    'Internal trigger: the passages of appended observations are written in the same transaction.';

create or replace trigger observation_passages after insert on __tenant__.observation
    referencing new table as appended
    for each statement execute function __tenant__._observations_appended();

-- passage_stat follows inserts and deletes (erasure included).
create or replace function __tenant__._passages_counted()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_scopes text[];
    v_observations bigint[];
    v_passages bigint[];
    v_lexemes bigint[];
begin
    -- The transition table is read alone first: on Citus a statement that joins it to a table of
    -- the tenant is sent to the shard, where the transition table does not exist.
    if tg_op = 'INSERT' then
        select array_agg(n.scope), array_agg(n.observation_id), array_agg(length(n.tsv))
          into v_scopes, v_observations, v_lexemes
          from added n;
        -- Passages of rows still at a provisional offset (2^62 and above) are counted by
        -- _append_batch when it gives them their offsets, with the scope's counter, at the end of
        -- the append: this row of passage_stat is locked to commit once updated.
        select array_agg(g.scope), array_agg(g.n), array_agg(g.l) into v_scopes, v_passages, v_lexemes
          from (select a.scope, count(*) as n, sum(a.l) as l
                  from unnest(v_scopes, v_observations, v_lexemes) a(scope, observation_id, l)
                  -- one probe per passage ("limit 1" keeps it one): as an anti-join, the plan made
                  -- once per session on a small log hashed the whole log
                 cross join lateral (select o.log_offset from observation o
                                      where o.id = a.observation_id limit 1) o
                 where o.log_offset < 4611686018427387904
                 group by a.scope) g;
        insert into passage_stat as s (scope, passages, lexemes)
        select g.scope, g.n, g.l from unnest(v_scopes, v_passages, v_lexemes) g(scope, n, l)
        on conflict (scope) do update
            set passages = s.passages + excluded.passages, lexemes = s.lexemes + excluded.lexemes;
    else
        select array_agg(g.scope), array_agg(g.n), array_agg(g.l) into v_scopes, v_passages, v_lexemes
          from (select r.scope, count(*) as n, sum(length(r.tsv)) as l from removed r group by r.scope) g;
        update passage_stat s set passages = s.passages - g.n, lexemes = s.lexemes - g.l
          from unnest(v_scopes, v_passages, v_lexemes) g(scope, n, l)
         where s.scope = g.scope;
    end if;
    return null;
end
$$;
comment on function __tenant__._passages_counted() is 'Internal trigger: keeps passage_stat in step with passage.';

create or replace trigger passage_counted_insert after insert on __tenant__.passage
    referencing new table as added
    for each statement execute function __tenant__._passages_counted();
create or replace trigger passage_counted_delete after delete on __tenant__.passage
    referencing old table as removed
    for each statement execute function __tenant__._passages_counted();

-- The name of a scope's passage partition: readable, and unique through a hash.
create or replace function __tenant__._passage_partition_name(p_scope text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select 'passage_' || left(regexp_replace(p_scope, '[^a-z0-9_]', '_', 'g'), 40) || '_' || left(md5(p_scope), 8)
$$;
comment on function __tenant__._passage_partition_name(text) is 'Internal: the table name of a scope''s passage partition.';

-- A new scope gets its own partition, made by add_scope before the scope row. (Creating it
-- briefly locks the passage table and checks the DEFAULT partition for rows of the scope: none
-- can exist, as a passage names an existing scope.) Not by a trigger on scope: on Citus a trigger
-- fires on the worker holding the scope table, where tables of a distributed schema cannot be
-- created, while add_scope, which is never delegated, runs its DDL on the coordinator. (A tenant
-- upgraded from a release with that trigger loses it with its function, _scope_added, which the
-- function ledger drops with cascade when this file changes.)
create or replace function __tenant__._ensure_passage_partition(p_scope text)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_table text := _passage_partition_name(p_scope);
begin
    if to_regclass(format('__tenant__.%I', v_table)) is null then
        execute format('create table __tenant__.%I partition of __tenant__.passage for values in (%L)',
                       v_table, p_scope);
        execute format('comment on table __tenant__.%I is %L', v_table, format('Passages of scope %s.', p_scope));
    end if;
end
$$;
comment on function __tenant__._ensure_passage_partition(text) is
    'Internal: creates the passage partition of scope p_scope unless it exists (add_scope calls it).';


-- Observations already in the log when passages arrived (migration 0010)
-- get their passages from this data step, which migration 0017 requests and
-- upgrade_tenant() runs once, after every function file; afterwards the
-- trigger writes them. Only observations without a passage are chunked, so
-- a tenant whose passages were written by an earlier release gets nothing twice.
create or replace function __tenant__._backfill_passages()
returns bigint
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _write_passages(array(
        select o.id from observation o
         where not exists (select 1 from passage p where p.observation_id = o.id and p.scope = o.scope)
         order by o.id))
$$;
comment on function __tenant__._backfill_passages() is
    'Internal data step (migration 0017): writes the passages of observations that have none; returns how many.';
