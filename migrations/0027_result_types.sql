-- Declared result types (issue #32): recall, message search and duplicate
-- proposals return rows of these types, and their metadata as a type of its
-- own, instead of jsonb objects and a trailing row of NULLs that carried the
-- metadata. psql prints them as tables; the driver's dataclasses are
-- generated from them (python/pgrecall/driver/_generated.py, make driver).

-- One ranked item of recall: a memory, or a current fact about an entity the
-- query names (item = 'fact', memory_id NULL).
create type __tenant__.recall_item as (
    rank          integer,
    memory_id     bigint,
    scope         text,
    kind          text,
    title         text,
    body          text,
    score         double precision,
    lexical_rank  integer,
    dense_rank    integer,
    cosine        double precision,
    bm25          double precision,
    provenance    jsonb,
    item          text,
    fact_id       bigint,
    fact_rank     integer
);
comment on type __tenant__.recall_item is 'One row of recall(): a memory or a fact, its rank, score and evidence.';

-- What one recall did: counts after the permission walk, the query's terms
-- and those dropped, whether the dense arm ran and why not, how current.
create type __tenant__.recall_meta as (
    query                    text,
    mode                     text,
    purpose                  text,
    terms                    text[],
    dropped_terms            text[],
    term_stats               text,
    recruited_by_rare_terms  boolean,
    recruited_by             text,
    dense_available          boolean,
    dense_reason             text,
    dense_method             text,
    lexical_count            integer,
    dense_count              integer,
    fused_count              integer,
    fact_count               integer,
    entities                 text[],
    returned                 integer,
    missing_embeddings       integer,
    missing_embeddings_more  boolean,
    watermarks               jsonb,    -- {scope: log watermark} of each authorised scope
    embedding_queue          bigint
);
comment on type __tenant__.recall_meta is 'The metadata of one recall() call.';

create type __tenant__.recall_answer as (
    items  __tenant__.recall_item[],
    meta   __tenant__.recall_meta
);
comment on type __tenant__.recall_answer is 'recall_answer(): the items of one recall and its metadata.';

-- One passage found by message search.
create type __tenant__.message_hit as (
    rank           integer,
    scope          text,
    log_offset     bigint,
    session_id     bigint,
    actor          text,
    source_role    text,
    kind           text,
    occurred_at    timestamptz,
    passage_id     bigint,
    ordinal        integer,
    start_byte     integer,
    end_byte       integer,
    body           text,
    score          double precision,
    lexical_rank   integer,
    semantic_rank  integer,
    bm25           double precision,
    cosine         double precision
);
comment on type __tenant__.message_hit is 'One row of search_messages(): a passage, where it is in the log, its ranks.';

create type __tenant__.message_search_meta as (
    query               text,
    mode                text,
    level               text,     -- tenant, session or peer
    session_id          bigint,
    peer                text,
    scopes              text[],
    lexical             boolean,
    semantic            boolean,
    semantic_available  boolean,
    semantic_reason     text,
    semantic_method     text,
    terms               text[],
    dropped_terms       text[],
    lexical_count       integer,
    semantic_count      integer,
    returned            integer,
    missing_embeddings  bigint
);
comment on type __tenant__.message_search_meta is 'The metadata of one search_messages() call.';

create type __tenant__.search_messages_answer as (
    items  __tenant__.message_hit[],
    meta   __tenant__.message_search_meta
);
comment on type __tenant__.search_messages_answer is
    'search_messages_answer(): the hits of one message search and its metadata.';

-- A proposed pair of similar memories (a the older), both as shown to a reviewer.
create type __tenant__.duplicate_pair as (
    rank             integer,
    cosine           double precision,
    a_id             bigint,
    a_scope          text,
    a_kind           text,
    a_title          text,
    a_body           text,
    a_revision       integer,
    a_created_at     timestamptz,
    a_audience       text,
    a_purposes       text[],
    a_provenance     jsonb,
    b_id             bigint,
    b_scope          text,
    b_kind           text,
    b_title          text,
    b_body           text,
    b_revision       integer,
    b_created_at     timestamptz,
    b_audience       text,
    b_purposes       text[],
    b_provenance     jsonb,
    b_may_replace_a  boolean,
    a_may_replace_b  boolean
);
comment on type __tenant__.duplicate_pair is 'One row of duplicate_proposals(): two similar memories and which may replace which.';

create type __tenant__.duplicate_meta as (
    "window"            integer,  -- the principal's newest visible memories compared
    threshold           double precision,
    model               text,
    in_window           integer,
    embedded            integer,
    missing_embeddings  integer,
    pairs               integer,  -- above the threshold and undecided, before the limit
    decided             integer,
    returned            integer,
    closest             double precision,
    empty_reason        text      -- no_memories, one_memory, no_embeddings, below_threshold, all_decided
);
comment on type __tenant__.duplicate_meta is 'The metadata of one duplicate_proposals() call: what was compared, why nothing is proposed.';

create type __tenant__.duplicate_proposals_answer as (
    items  __tenant__.duplicate_pair[],
    meta   __tenant__.duplicate_meta
);
comment on type __tenant__.duplicate_proposals_answer is
    'duplicate_proposals_answer(): the pairs of one call and its metadata.';

-- The columns that may be NULL say so: their comment starts with "NULL"
-- (the driver's generated dataclasses read this: T | None, else T).
comment on column __tenant__.recall_meta.term_stats is 'NULL when the lexical arm did not run; else where its document frequencies came from.';
comment on column __tenant__.recall_meta.recruited_by is 'NULL when no lexical candidate was recruited; else the tsquery that recruited them.';
comment on column __tenant__.recall_meta.dense_reason is 'NULL when the dense arm ran; else why not.';
comment on column __tenant__.recall_meta.dense_method is 'NULL when the dense arm did not run; else exact or hnsw.';
comment on column __tenant__.message_hit.session_id is 'NULL for a passage logged outside a session.';
comment on column __tenant__.message_hit.lexical_rank is 'NULL when the lexical arm did not find it.';
comment on column __tenant__.message_hit.semantic_rank is 'NULL when the semantic arm did not find it.';
comment on column __tenant__.message_hit.bm25 is 'NULL when the lexical arm did not find it.';
comment on column __tenant__.message_hit.cosine is 'NULL when the semantic arm did not find it.';
comment on column __tenant__.message_search_meta.session_id is 'NULL unless the search was of one session.';
comment on column __tenant__.message_search_meta.peer is 'NULL unless the search was of what one peer sent.';
comment on column __tenant__.message_search_meta.semantic_reason is 'NULL when the semantic arm ran; else why not.';
comment on column __tenant__.message_search_meta.semantic_method is 'NULL when the semantic arm did not run; else exact or hnsw.';
comment on column __tenant__.duplicate_meta.closest is 'NULL unless nothing reached the threshold: then the closest pair''s cosine.';
comment on column __tenant__.duplicate_meta.empty_reason is 'NULL when pairs are proposed; else why none is.';
comment on column __tenant__.recall_item.memory_id is 'NULL for a fact row.';
comment on column __tenant__.recall_item.title is 'NULL for a memory without a title.';
comment on column __tenant__.recall_item.lexical_rank is 'NULL when the lexical arm did not find it.';
comment on column __tenant__.recall_item.dense_rank is 'NULL when the dense arm did not find it.';
comment on column __tenant__.recall_item.cosine is 'NULL when the dense arm did not find it.';
comment on column __tenant__.recall_item.bm25 is 'NULL when the lexical arm did not find it.';
comment on column __tenant__.recall_item.fact_id is 'NULL for a memory row.';
comment on column __tenant__.recall_item.fact_rank is 'NULL for a memory row.';
comment on column __tenant__.duplicate_pair.a_title is 'NULL for a memory without a title.';
comment on column __tenant__.duplicate_pair.a_audience is 'NULL unless the memory is for one peer only.';
comment on column __tenant__.duplicate_pair.b_title is 'NULL for a memory without a title.';
comment on column __tenant__.duplicate_pair.b_audience is 'NULL unless the memory is for one peer only.';
