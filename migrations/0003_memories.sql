-- Memories, their links and revision history, and the entities that 'about'
-- links point at.

create table __tenant__.entity (
    id               bigint generated always as identity primary key,
    scope            text not null references __tenant__.scope (name),
    name             text not null check (char_length(name) between 1 and 200),
    normalized_name  text generated always as (lower(regexp_replace(btrim(name), '\s+', ' ', 'g'))) stored,
    entity_type      text,
    aliases          text[] not null default '{}',
    created_at       timestamptz not null default now(),
    constraint entity_identity unique (scope, normalized_name)
);
comment on table __tenant__.entity is 'Things memories and facts are about. Identity is (scope, normalized name); the type is an attribute.';
create index entity_aliases on __tenant__.entity using gin (aliases);

create table __tenant__.memory (
    id                   bigint generated always as identity primary key,
    scope                text not null references __tenant__.scope (name),
    kind                 text not null check (kind in ('note', 'fact', 'decision', 'summary')),
    title                text check (char_length(title) <= 500),
    body                 text not null check (body <> ''),
    tsv                  tsvector generated always as
                         (to_tsvector('english'::regconfig, coalesce(title, '') || ' ' || body)) stored,
    -- The text's identity for duplicate detection: case and spacing do not count.
    text_key             text generated always as (md5(lower(regexp_replace(btrim(body), '\s+', ' ', 'g')))) stored,
    confidence           real not null default 1 check (confidence between 0 and 1),
    origin               text not null check (origin in ('told', 'derived', 'migrated')),
    revision             integer not null default 1 check (revision >= 1),
    superseded_by        bigint references __tenant__.memory (id),
    invalidated_at       timestamptz,
    invalidation_reason  text,
    -- NULL: everyone authorised for the scope; else the one peer who may see it.
    audience_peer_id     bigint references __tenant__.peer (id),
    purposes             text[] not null check (
                             cardinality(purposes) between 1 and 4
                             and purposes <@ array['converse', 'act', 'personalize', 'review']),
    created_by           bigint not null references __tenant__.peer (id),
    valid                tstzrange not null default tstzrange(now(), null),
    created_at           timestamptz not null default now(),
    updated_at           timestamptz not null default now(),
    constraint memory_invalidation_has_reason check ((invalidated_at is null) = (invalidation_reason is null)),
    constraint memory_not_self_superseded check (superseded_by <> id)
);
comment on table __tenant__.memory is
    'Curated memories: each stamped with its audience (scope or one peer) and the purposes it may be used for.';
create index memory_tsv on __tenant__.memory using gin (tsv);
create index memory_audience on __tenant__.memory (audience_peer_id) where audience_peer_id is not null;
-- remember() refuses a second live copy of the same text in a scope; the
-- index also serves eligibility's scope filter on live memories.
create index memory_live_text on __tenant__.memory (scope, text_key)
    where superseded_by is null and invalidated_at is null;

create table __tenant__.memory_link (
    id                     bigint generated always as identity primary key,
    memory_id              bigint not null references __tenant__.memory (id),
    link_type              text not null check (link_type in ('derived_from', 'about')),
    target_memory_id       bigint references __tenant__.memory (id),
    target_observation_id  bigint references __tenant__.observation (id),
    target_entity_id       bigint references __tenant__.entity (id),
    created_at             timestamptz not null default now(),
    constraint memory_link_one_target check (
        num_nonnulls(target_memory_id, target_observation_id, target_entity_id) = 1),
    constraint memory_link_target_fits_type check (
        (link_type = 'about') = (target_entity_id is not null))
);
comment on table __tenant__.memory_link is 'Provenance (derived_from a memory or an observation) and subject (about an entity). Never edited.';
create index memory_link_memory on __tenant__.memory_link (memory_id, link_type);
create index memory_link_target_memory on __tenant__.memory_link (target_memory_id) where target_memory_id is not null;
create index memory_link_target_observation on __tenant__.memory_link (target_observation_id) where target_observation_id is not null;
create index memory_link_target_entity on __tenant__.memory_link (target_entity_id) where target_entity_id is not null;

create table __tenant__.memory_revision (
    memory_id   bigint not null references __tenant__.memory (id),
    revision    integer not null,
    kind        text not null,
    title       text,
    body        text not null,
    confidence  real not null,
    changed_by  bigint not null references __tenant__.peer (id),
    changed_at  timestamptz not null default now(),
    reason      text,
    primary key (memory_id, revision)
);
comment on table __tenant__.memory_revision is 'The text a memory had before each correction.';
