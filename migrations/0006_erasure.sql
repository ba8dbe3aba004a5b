-- Erasure with a receipt: the request log, and what erasure needs to know of
-- each projection kind to delete its rows generically.

-- How to find a projection row from its registry key (key_expression, over
-- alias t), in which order kinds are deleted (foreign keys), and, for rows
-- shared by many sources such as an entity's name, the condition under which
-- a row registered against an erased observation is kept (kept_while, over
-- alias t): a row is deleted when it came from an erased observation and
-- nothing that survives still needs it.
alter table __tenant__.projection_kind
    add column key_expression text,
    add column kept_while text,
    add column delete_order integer not null default 100;

update __tenant__.projection_kind set key_expression = 'id::text', delete_order = 10 where kind = 'memory_link';
update __tenant__.projection_kind set key_expression = 'memory_id || '':'' || revision', delete_order = 20
 where kind = 'memory_revision';
update __tenant__.projection_kind set key_expression = 'memory_id::text', delete_order = 30 where kind = 'memory_embedding';
update __tenant__.projection_kind set key_expression = 'id::text', delete_order = 40 where kind = 'memory';
update __tenant__.projection_kind set key_expression = 'id::text', delete_order = 50,
       kept_while = 'exists (select 1 from __tenant__.memory_link l where l.target_entity_id = t.id)'
 where kind = 'entity';
alter table __tenant__.projection_kind alter column key_expression set not null;

create table __tenant__.erasure_request (
    id                     bigint generated always as identity primary key,
    selector               jsonb not null,
    reason                 text not null check (reason <> ''),
    requested_by           text,
    requested_at           timestamptz not null default now(),
    completed_at           timestamptz,
    observations_erased    bigint,
    rows_erased            jsonb,
    -- Per projection kind, how many rows derived from the erased observations
    -- remain. A completed request always has one; anything but zeros is a failure.
    residual               jsonb,
    constraint erasure_completed_has_residual check ((completed_at is null) = (residual is null))
);
comment on table __tenant__.erasure_request is
    'Erasure receipts: what was asked, why, and per projection kind what was deleted and what remains (the residual).';
