-- A lease also ends when the database session that took it ends. A worker
-- killed mid-batch (SIGKILL, the OOM killer, a lost host) used to keep its
-- jobs for the whole lease, 300 s by default: `pgrecall worker --once` right
-- after the kill found nothing to do. Each claim now records which session
-- took the lease; the claim functions (plpgsql/leases.sql) treat a lease
-- whose session is gone as over.
alter table __tenant__.embedding_job add column lease_session integer;
alter table __tenant__.passage_embedding_job add column lease_session integer;
alter table __tenant__.work_task add column lease_session integer;
comment on column __tenant__.embedding_job.lease_session is
    'The lease key of the session holding the lease (an advisory lock in pg_locks); the lease ends with that session or at lease_until.';
comment on column __tenant__.passage_embedding_job.lease_session is
    'The lease key of the session holding the lease (an advisory lock in pg_locks); the lease ends with that session or at lease_until.';
comment on column __tenant__.work_task.lease_session is
    'The lease key of the session holding the lease (an advisory lock in pg_locks); the lease ends with that session or at lease_until.';

insert into __tenant__.setting (key, value, description) values
    ('leases_end_with_session', 'true',
     'A queued job or task leased by a database session that has ended is claimable at once (false: only when its lease expires)');
