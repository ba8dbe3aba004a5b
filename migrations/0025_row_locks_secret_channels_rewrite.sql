-- Nothing a tenant waits on, or signals with, is visible to or takable by
-- another tenant's roles (issue #28), and an erasure can reach the disk.
--
-- Advisory locks are one namespace for the whole server: any role reads the
-- keys held from pg_locks and takes them, salted or not. A neighbour held a
-- tenant's writer keys (its remember, log_turn and refresh_term_stats then
-- waited for it) and the worker liveness key of a killed worker (whose jobs
-- then stayed leased for the whole lease). Writers now serialise on rows of
-- the tenant's own schema, and a lease names the backend that holds it.

-- Writers take row locks on these stripes (plpgsql/locks.sql): a key hashes
-- to one of 4096, so unrelated keys share a stripe rarely, and the table
-- never grows. Only the tenant's functions can lock them (no role has a
-- privilege on the table, and MAINTAIN's LOCK TABLE is the tenant's own admin).
create table __tenant__.lock_stripe (
    stripe integer primary key check (stripe >= 0 and stripe < 4096)
);
insert into __tenant__.lock_stripe (stripe) select generate_series(0, 4095);
comment on table __tenant__.lock_stripe is
    'Row locks that serialise writers (plpgsql/locks.sql): one row per stripe, 4096, fixed.';

-- Its keys were advisory lock keys; nothing reads it now.
drop table __tenant__.lock_salt;

-- The database sessions that hold queue leases: a lease records the id of
-- one of these rows (lease_session), and it is alive while pg_stat_activity
-- shows that backend: the same pid, login role and start time. Only the
-- tenant's functions write here, and no other role can open a backend as
-- this tenant's login roles.
create table __tenant__.lease_holder (
    id             integer primary key,
    backend_pid    integer not null,
    backend_role   text not null,
    -- NULL where the tenant's owner may not see it (a role it is not a member
    -- of, or PostgreSQL 15): the pid and role are compared then.
    backend_start  timestamptz,
    registered_at  timestamptz not null default clock_timestamp()
);
create index lease_holder_backend on __tenant__.lease_holder (backend_pid);
comment on table __tenant__.lease_holder is
    'Database sessions holding queue leases (plpgsql/leases.sql): a lease is alive while its backend runs.';
comment on column __tenant__.embedding_job.lease_session is
    'The lease_holder of the session holding the lease; the lease ends with that backend or at lease_until.';
comment on column __tenant__.passage_embedding_job.lease_session is
    'The lease_holder of the session holding the lease; the lease ends with that backend or at lease_until.';
comment on column __tenant__.work_task.lease_session is
    'The lease_holder of the session holding the lease; the lease ends with that backend or at lease_until.';

-- The channels the tenant's workers LISTEN on: random names, read only by
-- the tenant's functions (a name spelled in a function body would be
-- readable by every role in pg_proc.prosrc), so that no other role can
-- listen to a tenant's wake-ups or send it any.
create table __tenant__.notification_channel (
    kind     text primary key check (kind in ('embed', 'derive')),
    channel  text not null unique check (channel ~ '^pgrecall_[0-9a-f]{32}$')
);
insert into __tenant__.notification_channel (kind, channel)
select k, 'pgrecall_' || md5(gen_random_uuid()::text || gen_random_uuid()::text)
  from unnest(array['embed', 'derive']) k;
comment on table __tenant__.notification_channel is
    'The secret NOTIFY channel of each queue kind; the worker role reads its name with listen_channel().';

-- What an erasure's rewrite (rewrite_erased, the admin's) and flush
-- (pgrecall.flush_erasure, the operator's) did, and what may still hold the
-- erased words.
alter table __tenant__.erasure_request
    add column rewritten_at timestamptz,
    add column rewritten_tables text[],
    add column rewrite_lsn pg_catalog.pg_lsn,
    add column flushed_at timestamptz,
    add column flushed_by text,
    add column flush_redo_lsn pg_catalog.pg_lsn,
    add column still_held_by jsonb;
comment on column __tenant__.erasure_request.rewritten_at is
    'When every table the erasure touched was rewritten (new files, indexes and TOAST rebuilt): no page keeps the erased rows.';
comment on column __tenant__.erasure_request.rewrite_lsn is
    'The WAL position after the rewrite: WAL before it may hold the erased words, WAL after it does not.';
comment on column __tenant__.erasure_request.flush_redo_lsn is
    'The redo point of the checkpoint that pgrecall.flush_erasure() forced past the rewrite, after a WAL segment switch.';
comment on column __tenant__.erasure_request.still_held_by is
    'What may still hold the erased words after the flush (WAL, archives, backups, replicas, logs), and when each is clean.';
