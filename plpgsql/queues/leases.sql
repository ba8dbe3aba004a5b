-- Leases of the three queues (embedding_job, passage_embedding_job, work_task)
-- end at lease_until or, sooner, when the database session that took them
-- ends: a worker that is killed keeps nothing for long (design section 5: a
-- crashed worker's tasks return). Every claim takes
-- v_session := _lease_session() and v_holders := _lease_holders(), records
-- v_session on the rows it leases, and treats a row q as claimable when
-- _lease_over(q.lease_until, q.lease_session, v_holders):
--     lease_until is null or lease_until < clock_timestamp()
--     or (v_holders is not null and lease_session is not null
--         and not (lease_session = any (v_holders)))
--
-- How a claim knows that a session is gone: a claiming session registers,
-- at its first claim, a row of lease_holder naming its backend (pid, login
-- role and start time, as pg_stat_activity shows them), and each lease
-- records that row's id. A holder is alive while pg_stat_activity shows a
-- backend with the same pid, role and start time; the backend goes when the
-- session ends, however it ends: a clean exit, SIGKILL of the client (its
-- socket closes), a terminated backend, a server restart. Nothing here can
-- be held or forged by another role: only the tenant's functions write
-- lease_holder, and no other role can open a backend as the tenant's login
-- roles. (An advisory lock per session did this before; any role could read
-- its key from pg_locks and take it the moment the session ended, keeping a
-- killed worker's jobs leased to the end of the lease.)
--
-- The start time tells a pid reused by a later backend from the one that
-- registered; pg_stat_activity shows it only to the backend's own role, its
-- members and pg_read_all_stats, so the tenant's owner is made a member of
-- its login roles (PostgreSQL 16+, inherit only; sql/control.sql). For any
-- other claiming role (a superuser, PostgreSQL 15) the start time reads NULL
-- both when a holder registers and when it is checked, and the pid and role
-- decide: a pid reused by the same role within the lease keeps the dead
-- session's leases until lease_until, never fewer.
--
-- pg_stat_activity is read into a snapshot at its first use in a transaction
-- and kept until the transaction ends, so every read here starts with
-- pg_stat_clear_snapshot(): a backend that started after the snapshot would
-- otherwise look dead to a claim in a long transaction. The list of holders
-- is read before the claim's query, and a claim that skips locked rows reads
-- each row it may take in its newest committed version: one leased a moment
-- ago by a session that registered after that read. So a row whose lease has
-- not expired is asked about again once the claim holds its lock
-- (_lease_over_now, _lease_holder_alive): a living session's holder row and
-- backend are there, since a session registers before it leases anything.
-- Four workers starting together took each other's fresh leases without it.
--
-- A session, not a client process: a client that closes its connection
-- between claiming and completing (psql per call, a pool that closes idle
-- connections) ends its leases; behind a transaction-mode pooler a lease lives
-- as long as the server connection that claimed it. On Citus the backend is
-- the one the function runs in: the client's own on the coordinator, or, for
-- a call delegated to the node holding the tenant's schema, the coordinator's
-- connection to that node, which Citus may close and reopen while the client
-- lives (citus.max_cached_connection_lifetime); a lease then looks ended
-- early, and the worker that held it loses it (PR123, or its results are
-- dropped), never its correctness. Send one tenant's claims through one node.
-- With leases_end_with_session = false, leases end only at lease_until.

-- The lease holders alive now: registered, and their backend still running.
-- The one place that reads pg_stat_activity for liveness.
create or replace function __tenant__._lease_holders_alive(p_ids integer[] default null)
returns setof integer
language plpgsql volatile
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform pg_stat_clear_snapshot();  -- the backends as they are now, not as this transaction first saw them
    return query
    select h.id from lease_holder h
     where (p_ids is null or h.id = any (p_ids))
       and exists (select 1 from pg_stat_get_activity(h.backend_pid) a
                    -- to_regrole, not the pg_roles view: Citus expands the view beside a tenant table
                    -- and reads pg_authid with the caller's rights
                    where a.usesysid = to_regrole(quote_ident(h.backend_role))::oid
                      and a.backend_start is not distinct from h.backend_start);
end
$$;
comment on function __tenant__._lease_holders_alive(integer[]) is
    'Internal: the lease holders (of p_ids, or all) whose backend pg_stat_activity shows now: same pid, role and start time.';

-- This session's lease holder, registered on its first claim; NULL when
-- leases end only at lease_until. Registering also forgets the holders whose
-- backend is gone, so the table holds about one row per claiming session.
create or replace function __tenant__._lease_session()
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_role text;
    v_start timestamptz;
    v_id integer;
begin
    if not (_setting_value('leases_end_with_session') #>> '{}')::boolean then
        return null;
    end if;
    select r.rolname::text, a.backend_start into v_role, v_start
      from pg_stat_get_activity(pg_backend_pid()) a join pg_roles r on r.oid = a.usesysid;
    select h.id into v_id from lease_holder h
     where h.backend_pid = pg_backend_pid() and h.backend_role = v_role
       and h.backend_start is not distinct from v_start;
    if v_id is not null then
        return v_id;
    end if;
    -- the holders whose backend is gone; one another registering session is deleting is left to it
    delete from lease_holder h
     where h.id in (select d.id from lease_holder d where not (d.id in (select _lease_holders_alive()))
                       for update skip locked);
    while v_id is null loop
        -- random, as the lease_session of an earlier release was: an id is not handed out twice in a row
        insert into lease_holder (id, backend_pid, backend_role, backend_start)
        values (1 + floor(random() * 2147483646)::integer, pg_backend_pid(), v_role, v_start)
        on conflict (id) do nothing
        returning id into v_id;
    end loop;
    return v_id;
end
$$;
comment on function __tenant__._lease_session() is
    'Internal: the lease holder of this session (its backend, registered on first use); NULL if leases end only at lease_until.';

-- The lease holders alive now; NULL when leases end only at lease_until.
create or replace function __tenant__._lease_holders()
returns integer[]
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select case when (_setting_value('leases_end_with_session') #>> '{}')::boolean then
           coalesce((select array_agg(x) from _lease_holders_alive() x), '{}') end
$$;
comment on function __tenant__._lease_holders() is
    'Internal: the ids of the lease holders whose session lives now; NULL if leases end only at lease_until.';

-- Whether this lease holder's session lives, read now (see above).
create or replace function __tenant__._lease_holder_alive(p_id integer)
returns boolean
language sql volatile
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select exists (select 1 from _lease_holders_alive(array[p_id]))
$$;
comment on function __tenant__._lease_holder_alive(integer) is
    'Internal: whether a lease holder''s session lives now (asked after the claimed row is locked).';

-- The lease engine: static statements, one set per queue. The three queues
-- keep their own tables (their rows carry different things: a memory or a
-- passage and a generation, a lane position and results), so each has its
-- own functions, named _lease_<operation>_<queue>; what they share is the
-- lease rule and the session's liveness, in the helpers above and the two
-- predicates below, each written once:
--   _lease_claim_*      SKIP LOCKED, the lease and its session, attempts
--                       (embedding, passage_embedding, task)
--   _lease_dead_letter_task  a task whose lease ended on its last allowed
--                       attempt is dead (_lease_claim_task does this first)
--   _lease_held_*       the jobs a worker still holds (at the generation it
--                       was given), locked, before it stores results
--                       (embedding, passage_embedding)
--   _lease_done_*       the items are finished: a job row is removed
--                       (passage_embedding; complete_embedding_jobs removes
--                       its jobs in the statement that stores their vectors),
--                       a task is done (task)
--   _lease_release_*    the items go back: a job at once; a task after
--                       task_backoff_seconds x 2^(attempts - 1), dead after
--                       task_max_attempts (embedding, passage_embedding, task)
--   _lease_counts_*     open jobs, and those under a live lease (embedding,
--                       passage_embedding)
-- No statement is assembled from text (no EXECUTE): each is planned once per
-- session and its plan kept, and a distributed planner (Citus) plans it like
-- any other function's statement. A claim is three statements, not one
-- UPDATE: Citus refuses a volatile function anywhere in an UPDATE of a
-- distributed table, and the lease rule reads the clock and
-- pg_stat_activity. So the rows are locked by a SELECT (FOR UPDATE SKIP
-- LOCKED, which follows a row updated since the snapshot to its newest
-- version, as the UPDATE did) in a loop (Citus plans FOR UPDATE only in a
-- statement of its own, not inside array(...)), asked again about their
-- session once held (_lease_over_now), and updated with the clock and the
-- tokens taken first. The row locks keep them until the transaction ends, so
-- no claimer can come between the statements.

-- The lease rule on a queue row's columns: the lease is over (or there is
-- none) when lease_until has passed or the session that took it has ended;
-- p_holders is _lease_holders()' result, read once per statement into a
-- variable. An SQL expression the planner inlines into the caller's statement
-- (no SECURITY DEFINER, no SET): a function call per leased row tripled a
-- claim past 2000 leased jobs (2.7 -> 7-10 ms).
create or replace function __tenant__._lease_over(p_lease_until timestamptz, p_lease_session integer,
                                                 p_holders integer[])
returns boolean
language sql volatile
as $$
    select p_lease_until is null or p_lease_until < clock_timestamp()
        or (p_holders is not null and p_lease_session is not null and not (p_lease_session = any (p_holders)))
$$;
comment on function __tenant__._lease_over(timestamptz, integer, integer[]) is
    'Internal: the lease rule on a queue row (no lease, expired, or its session ended among p_holders); inlined.';

-- The lease rule again, for a row the claim has locked: a lease that its
-- living session took after the holders were read is not over (see the top).
-- It asks pg_stat_activity only about a row whose lease has not expired.
create or replace function __tenant__._lease_over_now(p_lease_until timestamptz, p_lease_session integer)
returns boolean
language sql volatile
as $$
    select p_lease_until is null or p_lease_until < clock_timestamp() or p_lease_session is null
        or not __tenant__._lease_holder_alive(p_lease_session)
$$;
comment on function __tenant__._lease_over_now(timestamptz, integer) is
    'Internal: the lease rule on a locked queue row, asking pg_stat_activity afresh about its session; inlined.';

-- Memory embedding jobs (embedding_job, by memory_id): leases up to p_limit
-- ready jobs to p_worker, oldest first, skipping rows another claimer has
-- locked. Returns their keys.
create or replace function __tenant__._lease_claim_embedding(p_worker text, p_limit integer)
returns setof bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session integer;
    v_holders integer[];
    v_key bigint;
    v_locked bigint[] := '{}';
    v_now timestamptz;
    v_lease interval;
begin
    perform _check_claim(p_worker, p_limit);
    v_session := _lease_session();
    v_holders := _lease_holders();
    for v_key in
        select q.memory_id from embedding_job q
         where _lease_over(q.lease_until, q.lease_session, v_holders)
         order by q.enqueued_at, q.memory_id
         limit p_limit
           for update skip locked
    loop
        v_locked := v_locked || v_key;
    end loop;
    select coalesce(array_agg(q.memory_id), '{}') into v_locked
      from embedding_job q where q.memory_id = any (v_locked) and _lease_over_now(q.lease_until, q.lease_session);
    -- read first: Citus refuses a volatile function in an UPDATE
    v_now := clock_timestamp();
    v_lease := make_interval(secs => (_setting_value('embedding_lease_seconds') #>> '{}')::double precision);
    return query
    update embedding_job q
       set leased_by = p_worker, lease_until = v_now + v_lease,
           lease_session = v_session, attempts = q.attempts + 1
     where q.memory_id = any (v_locked)
    returning q.memory_id;
end
$$;
comment on function __tenant__._lease_claim_embedding(text, integer) is
    'Internal: leases up to p_limit ready memory embedding jobs (SKIP LOCKED, the lease rule of leases.sql); returns their memory ids.';

-- The memory embedding jobs p_worker still holds at the generations it was
-- given, locked until the transaction ends: a re-worded memory (a new
-- generation) or a lease taken over by another worker is not among them.
create or replace function __tenant__._lease_held_embedding(p_worker text, p_keys bigint[], p_generations bigint[])
returns setof bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_worker(p_worker);
    return query
    select q.memory_id from unnest(p_keys, p_generations) as x(key, generation)
      join embedding_job q on q.memory_id = x.key and q.generation = x.generation and q.leased_by = p_worker
     order by q.memory_id
       for update of q;
end
$$;
comment on function __tenant__._lease_held_embedding(text, bigint[], bigint[]) is
    'Internal: the memory embedding jobs a worker still holds at the given generations, locked.';

-- Gives p_worker's leased memory embedding jobs back at once. Returns how many.
create or replace function __tenant__._lease_release_embedding(p_worker text, p_keys bigint[])
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count integer;
begin
    perform _check_worker(p_worker);
    update embedding_job q set leased_by = null, lease_until = null, lease_session = null
     where q.memory_id = any (p_keys) and q.lease_until is not null and q.leased_by = p_worker;
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__._lease_release_embedding(text, bigint[]) is
    'Internal: gives a worker''s leased memory embedding jobs back at once.';

-- Memory embedding jobs, and those under a live lease (by the lease rule).
create or replace function __tenant__._lease_counts_embedding()
returns table (open bigint, leased bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_holders integer[] := _lease_holders();
begin
    return query
    select count(*), count(*) filter (where q.lease_until is not null
                                        and not _lease_over(q.lease_until, q.lease_session, v_holders))
      from embedding_job q;
end
$$;
comment on function __tenant__._lease_counts_embedding() is
    'Internal: queued memory embedding jobs and those under a live lease.';

-- Passage embedding jobs (passage_embedding_job, by passage_id): as memory
-- embedding jobs.
create or replace function __tenant__._lease_claim_passage_embedding(p_worker text, p_limit integer)
returns setof bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session integer;
    v_holders integer[];
    v_key bigint;
    v_locked bigint[] := '{}';
    v_now timestamptz;
    v_lease interval;
begin
    perform _check_claim(p_worker, p_limit);
    v_session := _lease_session();
    v_holders := _lease_holders();
    for v_key in
        select q.passage_id from passage_embedding_job q
         where _lease_over(q.lease_until, q.lease_session, v_holders)
         order by q.enqueued_at, q.passage_id
         limit p_limit
           for update skip locked
    loop
        v_locked := v_locked || v_key;
    end loop;
    select coalesce(array_agg(q.passage_id), '{}') into v_locked
      from passage_embedding_job q
     where q.passage_id = any (v_locked) and _lease_over_now(q.lease_until, q.lease_session);
    -- read first: Citus refuses a volatile function in an UPDATE
    v_now := clock_timestamp();
    v_lease := make_interval(secs => (_setting_value('embedding_lease_seconds') #>> '{}')::double precision);
    return query
    update passage_embedding_job q
       set leased_by = p_worker, lease_until = v_now + v_lease,
           lease_session = v_session, attempts = q.attempts + 1
     where q.passage_id = any (v_locked)
    returning q.passage_id;
end
$$;
comment on function __tenant__._lease_claim_passage_embedding(text, integer) is
    'Internal: leases up to p_limit ready passage embedding jobs (SKIP LOCKED, the lease rule of leases.sql); returns their passage ids.';

-- The passage embedding jobs p_worker still holds at the generations it was given, locked.
create or replace function __tenant__._lease_held_passage_embedding(p_worker text, p_keys bigint[],
                                                                   p_generations bigint[])
returns setof bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_worker(p_worker);
    return query
    select q.passage_id from unnest(p_keys, p_generations) as x(key, generation)
      join passage_embedding_job q on q.passage_id = x.key and q.generation = x.generation and q.leased_by = p_worker
     order by q.passage_id
       for update of q;
end
$$;
comment on function __tenant__._lease_held_passage_embedding(text, bigint[], bigint[]) is
    'Internal: the passage embedding jobs a worker still holds at the given generations, locked.';

-- The passage embedding jobs are finished (their vectors are stored in this transaction).
create or replace function __tenant__._lease_done_passage_embedding(p_keys bigint[])
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count integer;
begin
    delete from passage_embedding_job q where q.passage_id = any (p_keys);
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__._lease_done_passage_embedding(bigint[]) is
    'Internal: removes finished passage embedding jobs.';

-- Gives p_worker's leased passage embedding jobs back at once. Returns how many.
create or replace function __tenant__._lease_release_passage_embedding(p_worker text, p_keys bigint[])
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count integer;
begin
    perform _check_worker(p_worker);
    update passage_embedding_job q set leased_by = null, lease_until = null, lease_session = null
     where q.passage_id = any (p_keys) and q.lease_until is not null and q.leased_by = p_worker;
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__._lease_release_passage_embedding(text, bigint[]) is
    'Internal: gives a worker''s leased passage embedding jobs back at once.';

-- Passage embedding jobs, and those under a live lease (by the lease rule).
create or replace function __tenant__._lease_counts_passage_embedding()
returns table (open bigint, leased bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_holders integer[] := _lease_holders();
begin
    return query
    select count(*), count(*) filter (where q.lease_until is not null
                                        and not _lease_over(q.lease_until, q.lease_session, v_holders))
      from passage_embedding_job q;
end
$$;
comment on function __tenant__._lease_counts_passage_embedding() is
    'Internal: queued passage embedding jobs and those under a live lease.';

-- Derivation tasks (work_task, by id). A task whose lease ended (expired, or
-- its session did) on its last allowed attempt is dead: a task that kills its
-- worker every time stops there. Returns how many were dead-lettered.
create or replace function __tenant__._lease_dead_letter_task()
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_holders integer[] := _lease_holders();
    v_max_attempts integer := (_setting_value('task_max_attempts') #>> '{}')::integer;
    v_key bigint;
    v_keys bigint[] := '{}';
    v_now timestamptz;
    v_count integer;
begin
    -- locked first, the clock read before the UPDATE: Citus refuses volatile functions in it
    for v_key in
        select q.id from work_task q
         where q.status = 'leased' and q.attempts >= v_max_attempts
           and _lease_over(q.lease_until, q.lease_session, v_holders)
           for update skip locked
    loop
        v_keys := v_keys || v_key;
    end loop;
    select coalesce(array_agg(q.id), '{}') into v_keys
      from work_task q where q.id = any (v_keys) and _lease_over_now(q.lease_until, q.lease_session);
    v_now := clock_timestamp();
    update work_task q
       set status = 'dead', finished_at = v_now, lease_token = null, lease_until = null,
           last_error = case when q.lease_until < v_now then 'lease expired on attempt '
                             else 'the session that leased it ended, on attempt ' end || q.attempts::text
     where q.id = any (v_keys);
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__._lease_dead_letter_task() is
    'Internal: dead-letters the tasks whose lease ended on their last allowed attempt.';

-- Leases up to p_limit ready tasks among p_among (claim_tasks passes its
-- lanes' heads, in lane order) to p_worker: open and due, or under a lease
-- that is over, oldest first, skipping rows another claimer has locked; each
-- gets a new lease token. Returns their ids.
create or replace function __tenant__._lease_claim_task(p_worker text, p_limit integer, p_among bigint[])
returns setof bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session integer;
    v_holders integer[];
    v_key bigint;
    v_locked bigint[] := '{}';
    v_now timestamptz;
    v_lease interval;
    v_tokens uuid[];
begin
    perform _check_claim(p_worker, p_limit);
    v_session := _lease_session();
    v_holders := _lease_holders();
    perform _lease_dead_letter_task();
    for v_key in
        select q.id from work_task q
         where q.status in ('pending', 'leased') and q.available_at <= clock_timestamp()
           and _lease_over(q.lease_until, q.lease_session, v_holders)
           and (p_among is null or q.id = any (p_among))
         order by q.available_at, q.id
         limit p_limit
           for update skip locked
    loop
        v_locked := v_locked || v_key;
    end loop;
    select coalesce(array_agg(q.id), '{}') into v_locked
      from work_task q where q.id = any (v_locked) and _lease_over_now(q.lease_until, q.lease_session);
    -- read first: Citus refuses a volatile function in an UPDATE
    v_now := clock_timestamp();
    v_lease := make_interval(secs => (_setting_value('task_lease_seconds') #>> '{}')::double precision);
    -- a lease token per locked row (gen_random_uuid() is volatile: not in the UPDATE)
    v_tokens := array(select gen_random_uuid() from generate_series(1, cardinality(v_locked)));
    -- each row's token joined by key, not subscripted: Citus 14 crashes planning an UPDATE of a
    -- distributed table whose SET holds an array subscript
    return query
    update work_task q
       set leased_by = p_worker, lease_until = v_now + v_lease, lease_session = v_session,
           attempts = q.attempts + 1, status = 'leased', lease_token = x.lease_token
      from unnest(v_locked, v_tokens) as x(key, lease_token)
     where q.id = x.key
    returning q.id;
end
$$;
comment on function __tenant__._lease_claim_task(text, integer, bigint[]) is
    'Internal: leases up to p_limit ready tasks among the given ones (SKIP LOCKED, the lease rule of leases.sql), each with a new token; returns their ids.';

-- The tasks are finished (their results are stored in this transaction).
create or replace function __tenant__._lease_done_task(p_keys bigint[])
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count integer;
    v_now timestamptz := clock_timestamp();  -- read first: Citus refuses a volatile function in an UPDATE
begin
    update work_task q set status = 'done', finished_at = v_now, lease_token = null, lease_until = null
     where q.id = any (p_keys);
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__._lease_done_task(bigint[]) is 'Internal: marks leased tasks done.';

-- Gives leased tasks back after a failure: those p_worker holds, or any of
-- p_keys when p_worker is NULL (fail_task's caller proved its lease with the
-- token). A task on an attempt before its last is pending again after
-- task_backoff_seconds x 2^(attempts - 1); on its last it is dead. Returns how many.
create or replace function __tenant__._lease_release_task(p_worker text, p_keys bigint[], p_error text)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count integer;
    v_dead integer;
    v_now timestamptz := clock_timestamp();
    -- the clock in epoch seconds: Citus refuses a stable function (timestamptz + interval) over a column
    v_epoch double precision := extract(epoch from v_now)::double precision;
    v_max_attempts integer := (_setting_value('task_max_attempts') #>> '{}')::integer;
    v_backoff double precision := (_setting_value('task_backoff_seconds') #>> '{}')::double precision;
    v_error text := left(coalesce(p_error, 'failed without a reason'), 2000);
begin
    perform _check_worker(p_worker);
    -- A statement of its own, not a CASE in the one below: Citus refuses a function that is not
    -- immutable (the clock's arithmetic) in one.
    update work_task q
       set status = 'dead', finished_at = v_now, lease_token = null, lease_until = null, last_error = v_error
     where q.id = any (p_keys) and q.lease_until is not null and (p_worker is null or q.leased_by = p_worker)
       and q.attempts >= v_max_attempts;
    get diagnostics v_dead = row_count;
    update work_task q
       set status = 'pending', available_at = to_timestamp(v_epoch + v_backoff * 2 ^ least(q.attempts - 1, 20)),
           lease_token = null, lease_until = null, last_error = v_error
     where q.id = any (p_keys) and q.lease_until is not null and (p_worker is null or q.leased_by = p_worker);
    get diagnostics v_count = row_count;
    return v_count + v_dead;
end
$$;
comment on function __tenant__._lease_release_task(text, bigint[], text) is
    'Internal: gives leased tasks back: pending after their backoff, dead after task_max_attempts.';
