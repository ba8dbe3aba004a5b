-- Data steps: one-off work on a tenant's rows that needs the tenant's
-- functions. A migration cannot do it itself: it carries no function body,
-- and it runs before the function files are applied (an upgrade applies every
-- pending migration first, then the functions of the newest release). So a
-- migration requests the step by inserting its row here, and
-- pgrecall.upgrade_tenant() calls each pending step's function once, after
-- every function file, in the same transaction, then records when it did.
--
-- The first step: the passages of observations logged before passages
-- existed (migration 0010). Until now the end of plpgsql/passages.sql wrote
-- them whenever that file was applied, so the backfill depended on which
-- function files sort before it. Requested on every tenant: where every
-- observation already has its passages the step writes nothing.

create table __tenant__.data_step (
    -- A function of the tenant, called without arguments.
    name          text primary key check (name ~ '^_[a-z][a-z0-9_]*$'),
    requested_by  integer not null check (requested_by > 0),
    done_at       timestamptz,
    -- What the function returned: how many rows it wrote.
    rows_written  bigint
);
comment on table __tenant__.data_step is
    'Ledger of data steps: requested by a migration, run once by upgrade_tenant() after the function files.';

insert into __tenant__.data_step (name, requested_by) values ('_backfill_passages', 17);
