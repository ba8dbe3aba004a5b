-- Words that reach pgrecall without an observation, and what erasure must
-- know to take them with their data subject; and the receipt's account of
-- the planner statistics.
--
-- A peer's name and metadata, a session's name, turn log and metadata, and an
-- entity's aliases are written by calls that cite no observation, so the
-- projection registry cannot find them. The calls that write them take a data
-- subject; the rows record every subject whose call wrote their words, and an
-- erasure of any of those subjects removes the words (plpgsql/erase.sql).
-- An array, not one column: add_peer and create_session merge metadata from
-- several calls into one row.

alter table __tenant__.peer add column data_subject_ids text[] not null default '{}';
comment on column __tenant__.peer.data_subject_ids is
    'The data subjects whose calls wrote this peer''s name or metadata; erasing one anonymises the peer.';
create index peer_data_subjects on __tenant__.peer using gin (data_subject_ids);

alter table __tenant__.session add column data_subject_ids text[] not null default '{}';
comment on column __tenant__.session.data_subject_ids is
    'The data subjects whose calls wrote this session''s name, turn log or metadata; erasing one clears them.';
create index session_data_subjects on __tenant__.session using gin (data_subject_ids);
-- A session whose name was erased has none: NULL cannot meet any name a
-- caller gives (session_name_unique treats NULLs as distinct), so clearing
-- never collides.
alter table __tenant__.session alter column name drop not null;

-- Which data subject gave which alias of an entity. entity.aliases stays the
-- list lookups use (its GIN index); this table only says whose words each
-- alias is. An alias added without a subject has no row and stays.
create table __tenant__.entity_alias_subject (
    entity_id        bigint not null references __tenant__.entity (id) on delete cascade,
    alias            text not null,
    data_subject_id  text not null,
    created_at       timestamptz not null default now(),
    primary key (entity_id, alias, data_subject_id)
);
comment on table __tenant__.entity_alias_subject is
    'The data subject whose call added each alias (add_entity_alias); erasing the subject removes the alias.';
create index entity_alias_subject_subject on __tenant__.entity_alias_subject (data_subject_id);

-- ANALYZE after an erasure (refresh_erasure_statistics) and VACUUM (pgrecall
-- erase --vacuum) visit the tables the erasure changed; the receipt says
-- which, and when the statistics were taken again.
alter table __tenant__.erasure_request
    add column tables_touched text[],
    add column statistics_refreshed_at timestamptz,
    add column statistics_stale text[];
comment on column __tenant__.erasure_request.tables_touched is
    'The tables this erasure deleted or changed rows in: where planner statistics and dead rows may still hold the erased values.';
comment on column __tenant__.erasure_request.statistics_refreshed_at is
    'When refresh_erasure_statistics() took tables_touched''s statistics again after the erasure committed; NULL: pg_stats may still hold erased values.';
comment on column __tenant__.erasure_request.statistics_stale is
    'Tables whose statistics refresh_erasure_statistics() could not take again (left empty, before PostgreSQL 18): a superuser must clear them.';
