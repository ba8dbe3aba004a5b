-- Leases of the three queues (embedding_job, passage_embedding_job, work_task)
-- end at lease_until or, sooner, when the database session that took them
-- ends: a worker that is killed keeps nothing for long (design section 5: a
-- crashed worker's tasks return). The queues share one implementation, at the
-- end of this file: a claim (_lease_claim) takes
-- v_session := _lease_session() and v_holders := _lease_holders(), records
-- v_session on the rows it leases, and treats a row as claimable when
-- (_lease_over)
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
-- (_lease_taken_over, _lease_holder_alive): a living session's holder row and backend are there,
-- since a session registers before it leases anything. Four workers starting
-- together took each other's fresh leases without it.
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

-- The one lease queue. The three queues keep their own tables (their rows
-- carry different things: a memory or a passage and a generation, a lane
-- position and results) and share every lease operation below, each
-- parameterised by the queue's name:
--   _lease_claim    SKIP LOCKED, the lease and its session, attempts
--   _lease_dead_letter  a task whose lease ended on its last allowed attempt
--                   is dead (_lease_claim does this first)
--   _lease_held     the items a worker still holds (at the generation it was
--                   given), locked, before it stores results
--   _lease_done     the items are finished: a job row is removed, a task is done
--   _lease_release  the items go back: a job at once; a task after
--                   task_backoff_seconds x 2^(attempts - 1), dead after
--                   task_max_attempts
--   _lease_counts   open items, and those under a live lease
-- What differs between the queues is data, in _lease_queue(): the table, its
-- key, the claim order, which rows are open, and what a claim, a finish and a
-- release set besides the lease. The statements are built from it, so each
-- is planned per call; a claim plans in well under a millisecond.

-- How each queue is stored. Internal names only: the fragments below are
-- constants of this file, never caller input.
create or replace function __tenant__._lease_queue(p_queue text)
returns table (table_name text, key_column text, claim_order text, open_rows text, due_rows text, on_claim text,
               on_done text, on_release text, lease_setting text, has_generation boolean, dead_letters boolean)
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    case p_queue
    when 'embedding' then
        return query select 'embedding_job', 'memory_id', 'q.enqueued_at, q.memory_id', 'true', 'true', '', 'delete',
                            'leased_by = null, lease_until = null, lease_session = null',
                            'embedding_lease_seconds', true, false;
    when 'passage_embedding' then
        return query select 'passage_embedding_job', 'passage_id', 'q.enqueued_at, q.passage_id', 'true', 'true', '',
                            'delete',
                            'leased_by = null, lease_until = null, lease_session = null',
                            'embedding_lease_seconds', true, false;
    when 'task' then
        -- Only open tasks that are due; lane order is the caller's (claim_tasks
        -- passes the lanes' heads).
        return query select 'work_task', 'id', 'q.available_at, q.id',
                            'q.status in (''pending'', ''leased'')', 'q.available_at <= clock_timestamp()',
                            -- x.lease_token: the new token of the row's key (x is $2 and $6 side by side)
                            ', status = ''leased'', lease_token = x.lease_token',
                            -- $2: the clock, read before the UPDATE (Citus refuses a volatile function in it)
                            'status = ''done'', finished_at = $2, lease_token = null, lease_until = null',
                            -- a task given back on an attempt before its last (_lease_release makes the others
                            -- dead first); $3: the error; $5: task_backoff_seconds; $6: the clock in epoch
                            -- seconds (Citus refuses a stable function, timestamptz + interval, over a column)
                            'status = ''pending'', available_at = to_timestamp($6 + $5 * 2 ^ least(q.attempts - 1, 20)), '
                            'lease_token = null, lease_until = null, '
                            'last_error = left(coalesce($3, ''failed without a reason''), 2000)',
                            'task_lease_seconds', false, true;
    else
        perform _fail('PR107', format('unknown queue %s', coalesce(p_queue, 'NULL')),
                      'Queues are embedding, passage_embedding and task.');
    end case;
end
$$;
comment on function __tenant__._lease_queue(text) is
    'Internal: how a queue is stored (table, key, claim order, open rows, what claim/done/release set), for the lease functions.';

-- The lease rule, as SQL over the queue row q: the lease is over (or there
-- is none) when lease_until has passed or the session that took it has
-- ended. $holders is the placeholder of _lease_holders()' result. Spelled
-- into each statement rather than called per row: a function call per
-- leased row tripled a claim past 2000 leased jobs (2.7 -> 7-10 ms).
create or replace function __tenant__._lease_over(p_holders text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select format('(q.lease_until is null or q.lease_until < clock_timestamp()'
                  ' or (%1$s is not null and q.lease_session is not null and not (q.lease_session = any (%1$s))))',
                  p_holders)
$$;
comment on function __tenant__._lease_over(text) is
    'Internal: the lease rule as a SQL condition on queue row q (no lease, expired, or its session ended).';

-- The lease rule again, for the row as the claim locked it: a lease that its
-- living session took after the holders were read is not over (see the top).
-- It asks pg_stat_activity only about a row whose lease has not expired.
create or replace function __tenant__._lease_over_locked()
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select '(q.lease_until is null or q.lease_until < clock_timestamp() or q.lease_session is null'
           ' or not _lease_holder_alive(q.lease_session))'
$$;
comment on function __tenant__._lease_over_locked() is
    'Internal: the lease rule as a SQL condition on a locked queue row q, asking pg_stat_activity afresh about its session.';

-- A task whose lease ended (expired, or its session did) on its last allowed
-- attempt is dead: a task that kills its worker every time stops there.
-- Returns how many were dead-lettered.
create or replace function __tenant__._lease_dead_letter(p_queue text)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_q record;
    v_count integer;
    v_keys bigint[];
begin
    select * into v_q from _lease_queue(p_queue);
    if not v_q.dead_letters then
        return 0;
    end if;
    -- locked first, the clock read before the UPDATE: Citus refuses volatile functions in it (see _lease_claim)
    v_keys := _lease_lock(format($q$
        select q.%2$I from %1$I q where q.status = 'leased' and q.attempts >= $3 and %3$s
           for update skip locked$q$, v_q.table_name, v_q.key_column, _lease_over('$1')),
        _lease_holders(), null, (_setting_value('task_max_attempts') #>> '{}')::integer);
    v_keys := _lease_taken_over(p_queue, v_keys);
    execute format($q$
        update %1$I q
           set status = 'dead', finished_at = $2, lease_token = null, lease_until = null,
               last_error = case when q.lease_until < $2 then 'lease expired on attempt '
                                 else 'the session that leased it ended, on attempt ' end || q.attempts::text
         where q.%2$I = any ($1)$q$, v_q.table_name, v_q.key_column)
    using v_keys, clock_timestamp();
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__._lease_dead_letter(text) is
    'Internal: dead-letters the tasks whose lease ended on their last allowed attempt.';

-- Leases up to p_limit ready items (among p_among when given) to p_worker:
-- free, or under a lease that is over, oldest first, skipping rows another
-- claimer has locked. Returns their keys.
--
-- Three statements, not one UPDATE: Citus refuses a volatile function
-- anywhere in an UPDATE of a distributed table, and the lease rule reads the
-- clock and pg_stat_activity. So the rows are locked by a SELECT (FOR UPDATE
-- SKIP LOCKED, which follows a row updated since the snapshot to its newest
-- version, as the UPDATE did), asked again about their session once held
-- (_lease_taken_over), and updated with the clock and the tokens taken
-- first. The row locks keep them until the transaction ends, so no claimer
-- can come between the statements.
create or replace function __tenant__._lease_claim(p_queue text, p_worker text, p_limit integer,
                                                  p_among bigint[] default null)
returns setof bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_q record;
    v_session integer;
    v_holders integer[];
    v_locked bigint[];
    v_now timestamptz;
begin
    select * into v_q from _lease_queue(p_queue);
    perform _check_claim(p_worker, p_limit);
    v_session := _lease_session();
    v_holders := _lease_holders();
    if v_q.dead_letters then
        perform _lease_dead_letter(p_queue);
    end if;
    v_locked := _lease_lock(format($q$
        select q.%2$I from %1$I q
         where %3$s and %4$s and %5$s and ($2::bigint[] is null or q.%2$I = any ($2))
         order by %6$s
         limit $3
         for update skip locked$q$,
        v_q.table_name, v_q.key_column, v_q.open_rows, v_q.due_rows, _lease_over('$1'), v_q.claim_order),
        v_holders, p_among, p_limit);
    v_locked := _lease_taken_over(p_queue, v_locked);
    v_now := clock_timestamp();
    -- each row's token joined by key, not subscripted: Citus 14 crashes planning an UPDATE of a
    -- distributed table whose SET holds an array subscript
    return query execute format($q$
        update %1$I q
           set leased_by = $1, lease_until = $3 + $4, lease_session = $5, attempts = q.attempts + 1 %3$s
          from unnest($2::bigint[], $6::uuid[]) as x(key, lease_token)
         where q.%2$I = x.key
        returning q.%2$I$q$, v_q.table_name, v_q.key_column, v_q.on_claim)
    using p_worker, v_locked, v_now,
          make_interval(secs => (_setting_value(v_q.lease_setting) #>> '{}')::double precision), v_session,
          -- a task's lease token, one per locked row (gen_random_uuid() is volatile: not in the UPDATE)
          array(select gen_random_uuid() from generate_series(1, cardinality(v_locked)));
end
$$;
comment on function __tenant__._lease_claim(text, text, integer, bigint[]) is
    'Internal: leases up to p_limit ready items of a queue (SKIP LOCKED, the lease rule of leases.sql) and returns their keys.';

-- The keys a locking SELECT (p_sql, with $1..$3 = p_holders, p_among,
-- p_limit) returns, the rows locked until the transaction ends.
create or replace function __tenant__._lease_lock(p_sql text, p_holders integer[], p_among bigint[], p_limit integer)
returns bigint[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_key bigint;
    v_keys bigint[] := '{}';
begin
    -- a loop, not array(...) around it: Citus plans FOR UPDATE only in a statement of its own
    for v_key in execute p_sql using p_holders, p_among, p_limit loop
        v_keys := v_keys || v_key;
    end loop;
    return v_keys;
end
$$;
comment on function __tenant__._lease_lock(text, integer[], bigint[], integer) is
    'Internal: runs a queue''s locking SELECT and returns the keys it locked.';

-- Of the rows this transaction has locked, those whose lease is over as the
-- row stands now: a lease that its living session took after the holders
-- were read is not over (see the top). Asks pg_stat_activity only about
-- rows whose lease has not expired.
create or replace function __tenant__._lease_taken_over(p_queue text, p_keys bigint[])
returns bigint[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_q record;
    v_keys bigint[];
begin
    select * into v_q from _lease_queue(p_queue);
    execute format('select coalesce(array_agg(q.%2$I), ''{}'') from %1$I q where q.%2$I = any ($1) and %3$s',
                   v_q.table_name, v_q.key_column, _lease_over_locked())
    into v_keys using p_keys;
    return v_keys;
end
$$;
comment on function __tenant__._lease_taken_over(text, bigint[]) is
    'Internal: of rows already locked, those whose lease is over now (the session asked afresh).';

-- The items p_worker still holds at the generations it was given, locked
-- until the transaction ends: a re-worded item (a new generation) or a lease
-- taken over by another worker is not among them.
create or replace function __tenant__._lease_held(p_queue text, p_worker text, p_keys bigint[],
                                                 p_generations bigint[])
returns setof bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_q record;
begin
    perform _check_worker(p_worker);
    select * into v_q from _lease_queue(p_queue);
    if not v_q.has_generation then
        perform _fail('PR107', format('queue %s holds items by lease token, not by generation', p_queue));
    end if;
    return query execute format($q$
        select q.%2$I from unnest($2, $3) as x(key, generation)
          join %1$I q on q.%2$I = x.key and q.generation = x.generation and q.leased_by = $1
         order by q.%2$I
           for update of q$q$, v_q.table_name, v_q.key_column)
    using p_worker, p_keys, p_generations;
end
$$;
comment on function __tenant__._lease_held(text, text, bigint[], bigint[]) is
    'Internal: the items a worker still holds at the given generations, locked.';

-- The items are finished (their results are stored in this transaction).
create or replace function __tenant__._lease_done(p_queue text, p_keys bigint[])
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_q record;
    v_count integer;
    v_now timestamptz := clock_timestamp();  -- read first: Citus refuses a volatile function in an UPDATE
begin
    select * into v_q from _lease_queue(p_queue);
    if v_q.on_done = 'delete' then
        execute format('delete from %1$I q where q.%2$I = any ($1)', v_q.table_name, v_q.key_column) using p_keys;
    else
        execute format('update %1$I q set %3$s where q.%2$I = any ($1)', v_q.table_name, v_q.key_column, v_q.on_done)
        using p_keys, v_now;
    end if;
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__._lease_done(text, bigint[]) is 'Internal: finishes leased items (a job is removed, a task is done).';

-- Gives leased items back (a worker that failed or is stopping): only those
-- p_worker holds, or any of p_keys when p_worker is NULL (a task's caller
-- proved its lease with the token). Returns how many.
create or replace function __tenant__._lease_release(p_queue text, p_worker text, p_keys bigint[],
                                                    p_error text default null)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_q record;
    v_count integer;
    v_dead integer := 0;
    v_now timestamptz := clock_timestamp();
    v_max_attempts integer := (_setting_value('task_max_attempts') #>> '{}')::integer;
begin
    perform _check_worker(p_worker);
    select * into v_q from _lease_queue(p_queue);
    -- A task given back on its last allowed attempt is dead. A statement of its own, not a CASE in
    -- the one below: Citus refuses a function that is not immutable (the clock's arithmetic) in one.
    if v_q.dead_letters then
        execute format('update %1$I q set status = ''dead'', finished_at = $3, lease_token = null, lease_until = null, '
                       'last_error = left(coalesce($4, ''failed without a reason''), 2000) '
                       'where q.%2$I = any ($1) and q.lease_until is not null and ($2::text is null or q.leased_by = $2) '
                       'and q.attempts >= $5', v_q.table_name, v_q.key_column)
        using p_keys, p_worker, v_now, p_error, v_max_attempts;
        get diagnostics v_dead = row_count;
    end if;
    execute format('update %1$I q set %3$s where q.%2$I = any ($1) and q.lease_until is not null '
                   'and ($2::text is null or q.leased_by = $2)', v_q.table_name, v_q.key_column, v_q.on_release)
    using p_keys, p_worker, p_error, v_max_attempts,
          (_setting_value('task_backoff_seconds') #>> '{}')::double precision, extract(epoch from v_now)::double precision;
    get diagnostics v_count = row_count;
    return v_count + v_dead;
end
$$;
comment on function __tenant__._lease_release(text, text, bigint[], text) is
    'Internal: gives leased items back: a job at once, a task after its backoff (dead after task_max_attempts).';

-- Open items of a queue, and those under a live lease (by the lease rule).
create or replace function __tenant__._lease_counts(p_queue text)
returns table (open bigint, leased bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_q record;
begin
    select * into v_q from _lease_queue(p_queue);
    return query execute format('select count(*), count(*) filter (where q.lease_until is not null and not %3$s) '
                                'from %1$I q where %2$s',
                                v_q.table_name, v_q.open_rows, _lease_over('$1'))
    using _lease_holders();
end
$$;
comment on function __tenant__._lease_counts(text) is 'Internal: a queue''s open items and those under a live lease.';
