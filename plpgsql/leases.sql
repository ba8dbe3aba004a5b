-- Leases of the three queues (embedding_job, passage_embedding_job, work_task)
-- end at lease_until or, sooner, when the database session that took them
-- ends: a worker that is killed keeps nothing for long (design section 5: a
-- crashed worker's tasks return). Each claim function takes
-- v_session := _lease_session() and v_holders := _lease_holders(), records
-- v_session on the rows it leases, and treats a row as claimable when
--     lease_until is null or lease_until < clock_timestamp()
--     or (v_holders is not null and lease_session is not null
--         and not (lease_session = any (v_holders)))
--
-- How a claim knows that a session is gone: a claiming session holds a
-- session-level advisory lock (class 'pgrl', a random key of its own), taken
-- at its first claim, and each lease records that key. PostgreSQL drops the
-- lock when the session ends, however it ends: a clean exit, SIGKILL of the
-- client (its socket closes), a terminated backend, a server restart. Any
-- role sees every session's locks in pg_locks. pg_stat_activity would not do:
-- it shows other roles' pids but hides their backend_start (and, inside a
-- SECURITY DEFINER function, the caller's own), so a pid found there could be
-- a later session that reused it; a random key is not reused.
--
-- The list of holders is read before the claim's query, and a claim that
-- skips locked rows reads each row it may take in its newest committed
-- version: one leased a moment ago by a session whose first claim came after
-- that read. So the update that takes a row whose lease has not expired asks
-- pg_locks again, once it holds the row (_lease_held): a living session's key
-- is there, since a session takes its key before it leases anything. Four
-- workers starting together took each other's fresh leases without it.
--
-- A session, not a client process: a client that closes its connection
-- between claiming and completing (psql per call, a pool that closes idle
-- connections, DISCARD ALL or pg_advisory_unlock_all() in between) ends its
-- leases; behind a transaction-mode pooler a lease lives as long as the
-- server connection that claimed it. With leases_end_with_session = false,
-- leases end only at lease_until.

-- This session's lease key, taken on its first claim; NULL when leases end
-- only at lease_until.
create or replace function __tenant__._lease_session()
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    c_lock_class constant integer := 1885827692;  -- 'pgrl': pgrecall lease
    v_key integer;
begin
    if not (_setting_value('leases_end_with_session') #>> '{}')::boolean then
        return null;
    end if;
    select l.objid::bigint::integer into v_key
      from pg_locks l
     where l.locktype = 'advisory' and l.pid = pg_backend_pid() and l.granted and l.objsubid = 2
       and l.database = (select d.oid from pg_database d where d.datname = current_database())
       and l.classid = c_lock_class::oid
     limit 1;
    while v_key is null loop
        v_key := 1 + floor(random() * 2147483646)::integer;
        -- try: a key another session (or an unrelated advisory lock) holds is skipped, never waited for
        if not pg_try_advisory_lock(c_lock_class, v_key) then
            v_key := null;
        end if;
    end loop;
    return v_key;
end
$$;
comment on function __tenant__._lease_session() is
    'Internal: the lease key of this session (a session-level advisory lock), taken on first use; NULL if leases end only at lease_until.';

-- The lease keys of every session that holds one; NULL when leases end only
-- at lease_until.
create or replace function __tenant__._lease_holders()
returns integer[]
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select case when (_setting_value('leases_end_with_session') #>> '{}')::boolean then
           coalesce((select array_agg(l.objid::bigint::integer)
                       from pg_locks l
                      where l.locktype = 'advisory' and l.granted and l.objsubid = 2
                        and l.database = (select d.oid from pg_database d where d.datname = current_database())
                        and l.classid = 1885827692::oid), '{}') end
$$;
comment on function __tenant__._lease_holders() is
    'Internal: the lease keys of the sessions that hold queue leases now; NULL if leases end only at lease_until.';

-- Whether the session with this lease key still holds it, read now (see above).
create or replace function __tenant__._lease_held(p_key integer)
returns boolean
language sql volatile
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select exists (select 1 from pg_locks l
                    where l.locktype = 'advisory' and l.granted and l.objsubid = 2
                      and l.database = (select d.oid from pg_database d where d.datname = current_database())
                      and l.classid = 1885827692::oid and l.objid::bigint::integer = p_key)
$$;
comment on function __tenant__._lease_held(integer) is
    'Internal: whether a session holds this lease key now (read after the claimed row is locked).';
