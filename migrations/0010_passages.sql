-- Passages: observations split into chunks that can be cited by byte span,
-- searched (message search) and embedded. A projection of the log, written
-- in the append's transaction by a trigger (plpgsql/passages.sql).
--
-- The table is partitioned by scope: add_scope provisions a partition per
-- scope (a trigger on scope), and the DEFAULT partition holds the passages of
-- scopes without one, such as scopes created before this migration. The
-- passages of observations already in the log are written when
-- plpgsql/passages.sql is applied (a migration carries no function body).

create table __tenant__.passage (
    id                       bigserial,
    scope                    text not null references __tenant__.scope (name),
    observation_id           bigint not null references __tenant__.observation (id),
    ordinal                  integer not null check (ordinal >= 1),
    -- UTF-8 byte span [start_byte, end_byte) of the text in its observation's body.
    start_byte               integer not null check (start_byte >= 0),
    end_byte                 integer not null,
    body                     text not null,
    tsv                      tsvector generated always as (to_tsvector('english'::regconfig, body)) stored,
    -- Copied from the observation (which never changes) so that session and
    -- peer level search filter inside the partition.
    session_id               bigint,
    actor_id                 bigint not null references __tenant__.peer (id),
    occurred_at              timestamptz not null,
    embedding                __ext__.vector(384),
    embedding_model          text,
    embedding_input_version  integer,
    embedded_at              timestamptz,
    constraint passage_pkey primary key (id, scope),
    constraint passage_span check (end_byte > start_byte and octet_length(body) = end_byte - start_byte),
    constraint passage_embedding_stamped check (
        (embedding is null) = (embedding_model is null) and (embedding is null) = (embedding_input_version is null))
) partition by list (scope);
comment on table __tenant__.passage is
    'Chunks of observations with their UTF-8 byte span; partitioned by scope (DEFAULT: scopes without a partition).';

create table __tenant__.passage_unprovisioned partition of __tenant__.passage default;
comment on table __tenant__.passage_unprovisioned is 'Passages of scopes that have no partition of their own.';

create unique index passage_observation on __tenant__.passage (scope, observation_id, ordinal);
create index passage_tsv on __tenant__.passage using gin (tsv);
create index passage_session on __tenant__.passage (scope, session_id) where session_id is not null;
create index passage_actor on __tenant__.passage (scope, actor_id);
-- Erasure finds projection rows by their registry key (id as text).
create index passage_key on __tenant__.passage ((id::text));
create index passage_embedding_hnsw on __tenant__.passage
    using hnsw (embedding __ext__.vector_cosine_ops) with (m = 16, ef_construction = 64);

-- Passages waiting for an embedding, like embedding_job for memories.
create table __tenant__.passage_embedding_job (
    passage_id   bigint primary key,
    scope        text not null,
    generation   bigint not null default 1,
    enqueued_at  timestamptz not null default clock_timestamp(),
    leased_by    text,
    lease_until  timestamptz,
    attempts     integer not null default 0,
    constraint passage_embedding_job_passage foreign key (passage_id, scope)
        references __tenant__.passage (id, scope) on delete cascade
);
comment on table __tenant__.passage_embedding_job is
    'Passages waiting for an embedding. Claimed with SKIP LOCKED under a lease; an expired lease returns the job.';
create index passage_embedding_job_ready on __tenant__.passage_embedding_job (enqueued_at, passage_id);

-- Size of each scope's passage corpus for BM25 (kept by triggers on passage;
-- appends and erasures of a scope already serialise on its scope row).
create table __tenant__.passage_stat (
    scope     text primary key references __tenant__.scope (name),
    passages  bigint not null default 0 check (passages >= 0),
    lexemes   bigint not null default 0 check (lexemes >= 0)
);
comment on table __tenant__.passage_stat is 'Per scope: how many passages, and their total tsvector length (BM25).';

insert into __tenant__.projection_kind (kind, table_name, description, key_expression, delete_order) values
    ('passage', 'passage', 'chunks of observations (message search, citations) with their embeddings', 'id::text', 5);

alter table __tenant__.setting add constraint setting_passage_value_in_range check (
    case key
        when 'passage_max_chars'     then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 100 and 100000
        when 'passage_target_chars'  then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 50 and 100000
        when 'passage_overlap_chars' then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 0 and 10000
        else true
    end
);

insert into __tenant__.setting (key, value, description) values
    ('message_search_lexical',  'true',  'Message search runs its lexical (full text, BM25) arm'),
    ('message_search_semantic', 'true',  'Message search runs its semantic (passage embedding) arm'),
    ('passage_max_chars',       '1000',  'An observation up to this many characters is one passage'),
    ('passage_target_chars',    '700',   'Longer text is split on sentence and paragraph ends into passages of about this size'),
    ('passage_overlap_chars',   '200',   'A passage repeats the previous one''s last sentence when it is at most this long');
