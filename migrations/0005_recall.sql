-- Recall: memory embeddings (a derived index), the embedding work queue, and
-- the corpus statistics the lexical arm ranks and prunes with.

alter table __tenant__.memory add column pinned boolean not null default false;
create index memory_pinned on __tenant__.memory (scope) where pinned and superseded_by is null and invalidated_at is null;

-- One row per memory whose text has been embedded with the model and input
-- version named on the row. Rows for another model or version are ignored by
-- recall until rebuilt.
create table __tenant__.memory_embedding (
    memory_id      bigint primary key references __tenant__.memory (id) on delete cascade,
    model          text not null,
    input_version  integer not null,
    embedding      __ext__.vector(384) not null,
    embedded_at    timestamptz not null default now()
);
comment on table __tenant__.memory_embedding is
    'Derived index: each memory''s embedding, stamped with the model and input version it was computed with.';
create index memory_embedding_hnsw on __tenant__.memory_embedding
    using hnsw (embedding __ext__.vector_cosine_ops) with (m = 16, ef_construction = 64);

-- Work for the embedding worker. generation changes each time a memory's
-- text changes, so a result computed from older text is never stored.
create table __tenant__.embedding_job (
    memory_id    bigint primary key references __tenant__.memory (id) on delete cascade,
    generation   bigint not null default 1,
    enqueued_at  timestamptz not null default clock_timestamp(),
    leased_by    text,
    lease_until  timestamptz,
    attempts     integer not null default 0
);
comment on table __tenant__.embedding_job is
    'Memories waiting for an embedding. Claimed with SKIP LOCKED under a lease; an expired lease returns the job.';
create index embedding_job_ready on __tenant__.embedding_job (enqueued_at);

-- Document frequencies for BM25 and term pruning, from a periodic snapshot
-- (writers never touch these tables, so a common word is not a hot row).
create table __tenant__.term_stat (
    term  text primary key,
    df    integer not null check (df > 0)
);
comment on table __tenant__.term_stat is 'Lexeme document frequencies over live memories, as of corpus_stat.refreshed_at.';

create table __tenant__.corpus_stat (
    singleton        boolean primary key default true check (singleton),
    documents        bigint not null,
    avg_length       double precision not null,
    max_memory_id    bigint not null,
    refreshed_at     timestamptz not null
);
comment on table __tenant__.corpus_stat is 'Size of the corpus at the last term_stat snapshot.';

insert into __tenant__.projection_kind (kind, table_name, description) values
    ('memory_embedding', 'memory_embedding', 'embeddings of memories (derived index)');

insert into __tenant__.setting (key, value, description) values
    ('embedding_model',          '"all-MiniLM-L6-v2"', 'Embedding model; change with set_embedding_version(), which queues a rebuild'),
    ('embedding_input_version',  '2',       'Which text is embedded (1: title and body; 2: also the turns before and after its evidence, chosen by measurement: make eval)'),
    ('arm_candidates',           '100',     'Candidates each recall arm contributes to the fusion'),
    ('hnsw_ef_search',           '400',     'HNSW search breadth for the dense arm'),
    ('exact_dense_below',        '2000',    'Dense arm: below this many eligible memories, search exactly instead of through HNSW'),
    ('bm25_k1',                  '1.2',     'BM25 term-frequency saturation'),
    ('bm25_b',                   '0.75',    'BM25 length normalisation'),
    ('stats_refresh_ratio',      '0.10',    'Refresh term statistics when memories grew by this share since the last snapshot'),
    ('embedding_lease_seconds',  '300',     'How long a claimed embedding job stays leased');
