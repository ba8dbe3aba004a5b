-- Scopes, peers, and the observation log: the append-only root that every
-- projection is derived from.

-- A scope is a project inside the tenant. Reads name the scopes they are
-- authorised for; log offsets are numbered per scope.
create table __tenant__.scope (
    name          text primary key check (name ~ '^[a-z0-9][a-z0-9_.:-]{0,63}$'),
    description   text,
    -- Largest offset below which the log has no hole. Offsets are taken from
    -- this counter under its row lock, so it is also the number of rows.
    log_watermark bigint not null default 0 check (log_watermark >= 0),
    created_at    timestamptz not null default now()
);
comment on table __tenant__.scope is 'Projects inside the tenant; log_watermark is the per-scope log watermark.';

create table __tenant__.peer (
    id          bigint generated always as identity primary key,
    name        text not null unique check (char_length(name) between 1 and 200),
    kind        text not null check (kind in ('human', 'agent', 'other')),
    metadata    jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object'),
    created_at  timestamptz not null default now()
);
comment on table __tenant__.peer is 'Participants: people, agents, NPCs. The principal of every call is a peer.';

create table __tenant__.observation (
    id               bigint generated always as identity primary key,
    scope            text not null references __tenant__.scope (name),
    log_offset       bigint not null check (log_offset > 0),
    kind             text not null check (kind in ('message', 'document', 'tool_result', 'event', 'note')),
    occurred_at      timestamptz not null,
    ingested_at      timestamptz not null default clock_timestamp(),
    source_role      text not null check (source_role in ('user', 'assistant', 'system', 'tool', 'document')),
    actor_id         bigint not null references __tenant__.peer (id),
    session_id       bigint,
    body             text not null,
    payload          jsonb not null default '{}' check (jsonb_typeof(payload) = 'object'),
    data_subject_id  text,
    lawful_basis     text check (lawful_basis in ('consent', 'contract', 'legal_obligation', 'vital_interests',
                                                  'public_task', 'legitimate_interests')),
    classification   text not null default 'internal'
                     check (classification in ('public', 'internal', 'confidential', 'restricted')),
    retention_until  timestamptz,
    constraint observation_offset_unique unique (scope, log_offset)
);
comment on table __tenant__.observation is
    'The append-only log: everything said, written, uploaded or returned by a tool. Offsets are contiguous per scope.';

create index observation_actor on __tenant__.observation (actor_id);
create index observation_subject on __tenant__.observation (data_subject_id) where data_subject_id is not null;
create index observation_session on __tenant__.observation (session_id, log_offset) where session_id is not null;
create index observation_retention on __tenant__.observation (retention_until) where retention_until is not null;

insert into __tenant__.setting (key, value, description) values
    ('max_observation_bytes', '1048576', 'Largest observation body accepted, in UTF-8 bytes'),
    ('max_memory_bytes',      '16384',   'Largest memory body accepted, in UTF-8 bytes');
