-- Wake-ups for the tenant's workers: a NOTIFY, with an empty payload, on a
-- channel whose name is a per-tenant secret (table notification_channel).
--
-- LISTEN and NOTIFY take no privilege: any role may listen on, or notify,
-- any channel it can name. A name spelled in a function body is readable by
-- every role (pg_proc.prosrc), and one built from the tenant's name can be
-- guessed, so the names are random and read here, by the tenant's functions,
-- and by the worker role through listen_channel(). A notification is a hint:
-- the worker polls anyway, and a flood of them costs it at most one empty
-- claim per poll interval (python/pgrecall/loop.py).
--
-- The writes that queue embedding work on the hot path (an append's
-- passages, a remembered memory) send no notification when work is waiting
-- already, unleased (_embed_work_waiting, asked before their own jobs are
-- queued): a worker will come for it, and a NOTIFY is not free. PostgreSQL
-- serialises the commits of every transaction that notified, database-wide
-- (a lock taken at commit and held through its WAL flush), so under load an
-- append queued behind the commits of remembers that notified (issue #51).
-- Nothing waits for it: the worker that takes the waiting job looks again
-- after its busy round, once the transactions in flight then have ended
-- (pgrecall.loop), and so finds the jobs of a transaction that skipped.

create or replace function __tenant__._notify(p_kind text)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_channel text;
begin
    -- Not on a Citus node: a write there may commit with two-phase commit (a call coordinated
    -- from the coordinator in a transaction block, the switch of a move), and PostgreSQL refuses
    -- to PREPARE a transaction that notified; a notification would also reach only the
    -- listeners of the node where it commits. The worker and the deriver poll (every 5 s).
    if current_setting('citus.version', true) is not null then
        return;
    end if;
    select c.channel into v_channel from notification_channel c where c.kind = p_kind;
    if v_channel is not null then
        perform pg_notify(v_channel, '');
    end if;
end
$$;
comment on function __tenant__._notify(text) is
    'Internal: wakes the workers of one queue kind (embed, derive) on the tenant''s secret channel.';

-- Whether embedding work is waiting that no worker holds: a job of either
-- queue with no lease. Asked before a write queues its own jobs; a job this
-- transaction queued earlier counts, as its write either notified (the
-- commit notifies once for all) or found other work waiting. False on a
-- Citus node, where _notify sends nothing anyway (and the question would
-- reach every shard).
create or replace function __tenant__._embed_work_waiting()
returns boolean
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if current_setting('citus.version', true) is not null then
        return false;
    end if;
    return exists (select 1 from passage_embedding_job j where j.leased_by is null)
        or exists (select 1 from embedding_job j where j.leased_by is null);
end
$$;
comment on function __tenant__._embed_work_waiting() is
    'Internal: whether an embedding job waits unleased (a write that queues more then need not notify: a worker will come).';

-- SQLSTATE: PR107 unknown kind.
create or replace function __tenant__.listen_channel(p_kind text)
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_channel text;
begin
    perform _check_one_of(p_kind, 'channel kind', array['embed', 'derive']);
    select c.channel into v_channel from notification_channel c where c.kind = p_kind;
    return v_channel;
end
$$;
comment on function __tenant__.listen_channel(text) is
    'The channel a worker LISTENs on to be woken when work of a kind (embed, derive) is queued; a secret of the tenant.';
