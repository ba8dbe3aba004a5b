-- Duplicate review: duplicate_proposals() puts pairs of similar memories in
-- front of a person, and each decision that person takes is a row here (who,
-- when, why, and the revisions they saw). Nothing merges on a pair's
-- similarity alone.
--
-- A pair is stored as (memory_low, memory_high), lowest id first, with the
-- revision of each that the reviewer saw: a pair decided at those revisions is
-- not proposed again, and if either memory changes revision the pair is new
-- evidence and may be proposed again. The unique index makes a second
-- decision about the same pair at the same revisions impossible, whatever the
-- functions above it do.
create table __tenant__.duplicate_decision (
    id              bigint generated always as identity primary key,
    memory_low      bigint not null references __tenant__.memory (id),
    memory_high     bigint not null references __tenant__.memory (id),
    revision_low    integer not null check (revision_low >= 1),
    revision_high   integer not null check (revision_high >= 1),
    decision        text not null check (decision in ('distinct', 'supersede', 'forget')),
    -- supersede: the memory that was replaced (by the other one);
    -- forget: the memory that was forgotten; distinct: none.
    retired_memory  bigint,
    cosine          real,           -- what the reviewer was shown; NULL when either had no current embedding
    reason          text not null check (reason <> ''),
    decided_by      bigint not null references __tenant__.peer (id),
    decided_role    name not null default session_user,
    decided_at      timestamptz not null default now(),
    constraint duplicate_decision_ordered_pair check (memory_low < memory_high),
    constraint duplicate_decision_retires_one_of_the_pair check (
        (decision = 'distinct') = (retired_memory is null)
        and (retired_memory is null or retired_memory in (memory_low, memory_high)))
);
comment on table __tenant__.duplicate_decision is
    'A person''s decision about a proposed duplicate pair: keep both (distinct), supersede one by the other, or forget one; who, when, why.';
create unique index duplicate_decision_pair
    on __tenant__.duplicate_decision (memory_low, memory_high, revision_low, revision_high);
create index duplicate_decision_high on __tenant__.duplicate_decision (memory_high);

-- A decision's reason is a person's words about two memories and may quote
-- them: it is a projection of their observations, erased with them. It goes
-- before memory (delete_order 40), which it references.
insert into __tenant__.projection_kind (kind, table_name, description, key_expression, delete_order) values
    ('duplicate_decision', 'duplicate_decision', 'reviewers'' decisions about duplicate pairs', 'id::text', 35);

-- Duplicate proposals compare what two memories say, not where they were
-- said: the vector of each memory's own title and body, stored beside the
-- recall vector (which, under input version 2, also embeds the turns around
-- the memory's evidence). Rows embedded before this migration have none until
-- re-embedded (rebuild_embeddings() queues them).
alter table __tenant__.memory_embedding add column text_embedding __ext__.vector(384);
comment on column __tenant__.memory_embedding.text_embedding is
    'The memory''s own text (title and body) embedded alone with the same model: what duplicate proposals compare.';
-- Two 384-dimension vectors make a row of ~3.1 kB, past the 2 kB at which
-- PostgreSQL moves a value out of line (vector's storage is EXTERNAL): every
-- row recall's exact dense path reads would then fetch its vector from the
-- TOAST table (measured: an exact scan of 4,000 such rows took 51-62 ms
-- against 26 ms with both vectors in the row). Both stay in the row, as the
-- one vector did before; the row fits a page twice over.
alter table __tenant__.memory_embedding
    alter column embedding set storage plain,
    alter column text_embedding set storage plain;
