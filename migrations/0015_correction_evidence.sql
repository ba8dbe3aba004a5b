-- Corrections cite their evidence. Each row says that the correction which
-- produced revision `revision` of a memory was justified by an observation.
-- The memory also gains a derived_from link to it (its provenance), so this
-- table is what tells a correction's evidence from the memory's original
-- evidence: erasing the original deletes the memory, erasing a correction's
-- evidence undoes the correction (plpgsql/erase.sql).
create table __tenant__.memory_correction_evidence (
    id              bigint generated always as identity primary key,
    memory_id       bigint not null references __tenant__.memory (id),
    -- the revision the correction produced (the text it replaced is
    -- memory_revision (memory_id, revision - 1))
    revision        integer not null check (revision >= 2),
    observation_id  bigint not null references __tenant__.observation (id),
    created_at      timestamptz not null default now(),
    constraint memory_correction_evidence_once unique (memory_id, revision, observation_id)
);
comment on table __tenant__.memory_correction_evidence is
    'The observations that justified each correction of a memory, by the revision the correction produced.';
-- Erasure looks up the corrections an erased observation justified.
create index memory_correction_evidence_observation on __tenant__.memory_correction_evidence (observation_id);

insert into __tenant__.projection_kind (kind, table_name, description, key_expression, delete_order) values
    ('memory_correction_evidence', 'memory_correction_evidence', 'observations cited by corrections of memories',
     'id::text', 15);
