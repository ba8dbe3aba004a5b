-- The projection registry: which tables hold content derived from the log,
-- and for each of their rows, which observations it came from. Erasure walks
-- this registry, so every projection row must be registered.

create table __tenant__.projection_kind (
    kind        text primary key,
    table_name  text not null unique,
    description text not null
);
comment on table __tenant__.projection_kind is 'Every kind of projection row and the table that holds it.';

insert into __tenant__.projection_kind (kind, table_name, description) values
    ('memory',          'memory',          'curated memories'),
    ('memory_link',     'memory_link',     'provenance and about links of memories'),
    ('memory_revision', 'memory_revision', 'earlier text of corrected memories'),
    ('entity',          'entity',          'entities named by memories');

create table __tenant__.projection_dependency (
    kind            text not null references __tenant__.projection_kind (kind),
    row_key         text not null,
    observation_id  bigint not null references __tenant__.observation (id),
    primary key (kind, row_key, observation_id)
);
comment on table __tenant__.projection_dependency is
    'Projection row (kind, row_key) was derived from observation_id. row_key is the row''s primary key as text.';
create index projection_dependency_observation on __tenant__.projection_dependency (observation_id);
