-- Declared result types for the session reads (issue #32): the session-start
-- bundle, a working representation and the two configurations return these
-- instead of jsonb objects, so psql prints them as columns and the driver's
-- dataclasses are generated from them. A column that may be NULL says so in
-- its comment ("NULL ..."), which the generated dataclasses read.

-- A memory in the session-start bundle, with its provenance as read() and
-- recall give it.
create type __tenant__.bundle_memory as (
    id          bigint,
    kind        text,
    title       text,
    body        text,
    scope       text,
    provenance  jsonb,
    updated_at  timestamptz
);
comment on type __tenant__.bundle_memory is 'A memory of the session-start bundle: a recent one or a pinned note.';

-- An entity the principal's visible memories are most often about.
create type __tenant__.bundle_entity as (
    entity    text,
    type      text,
    scope     text,
    memories  bigint    -- how many of the principal's visible memories are about it
);
comment on type __tenant__.bundle_entity is 'An entity of the session-start bundle and how many visible memories are about it.';

-- A peer's working representation in a session, per observed peer, without
-- the items derived from turns the reader may not see.
create type __tenant__.working_representation as (
    session         bigint,
    peer            text,
    updated_at      timestamptz,
    representation  jsonb     -- {observed peer: [{text, offset, observation_id, at, ...}, ...]}
);
comment on type __tenant__.working_representation is
    'get_representation(): a peer''s working representation in a session, per observed peer.';

create type __tenant__.session_bundle as (
    recent                  __tenant__.bundle_memory[],
    pinned                  __tenant__.bundle_memory[],
    entities                __tenant__.bundle_entity[],
    working_representation  __tenant__.working_representation
);
comment on type __tenant__.session_bundle is
    'session_bundle(): recent memories, pinned notes, top entities and, with a session, the working representation.';

create type __tenant__.session_peer_config as (
    session             bigint,
    peer                text,
    observe_others      boolean,
    observed_by_others  boolean,
    joined_at           timestamptz,
    left_at             timestamptz,
    active              boolean
);
comment on type __tenant__.session_peer_config is 'One peer''s flags in one session, and when it joined and left.';

create type __tenant__.peer_config as (
    peer                    text,
    kind                    text,
    observed_globally       boolean,  -- a global representation of the peer is derived
    follows_tenant_default  boolean   -- observed_globally comes from the tenant setting
);
comment on type __tenant__.peer_config is 'A peer''s own flags.';

comment on column __tenant__.bundle_memory.title is 'NULL for a memory without a title.';
comment on column __tenant__.bundle_memory.updated_at is 'NULL for a pinned note (pinning is not an edit).';
comment on column __tenant__.bundle_entity.type is 'NULL for an entity of no declared type.';
comment on column __tenant__.working_representation.updated_at is 'NULL until something was derived for the peer.';
comment on column __tenant__.session_bundle.working_representation is 'NULL unless a session was named.';
comment on column __tenant__.session_peer_config.left_at is 'NULL while the peer is in the session.';
