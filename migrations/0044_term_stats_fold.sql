-- The term statistics' refresh folds in what changed since the last one
-- instead of recounting every memory's terms (plpgsql/recall/term_stats.sql,
-- refresh_term_stats): it remembers which memories the snapshot counted (up to
-- max_memory_id, but for pending_ids), how many those were and the sum of
-- their revisions (an edit, a supersession or a forget raises a revision, so
-- a sum that moved says one of them changed), and the sum of the counted
-- memories' lengths (the mean length without a recount). An erasure bumps
-- erased; a refresh recounts whole when it differs from recounted_erased.
alter table __tenant__.corpus_stat
    add column memories            bigint not null default 0,
    add column revisions           bigint not null default 0,
    add column total_length        bigint not null default 0,
    add column pending_ids         bigint[] not null default '{}',
    add column pending_since       timestamptz[] not null default '{}',
    add column recounted_documents bigint not null default 0,
    add column erased              bigint not null default 0,
    add column recounted_erased    bigint not null default -1;
comment on column __tenant__.corpus_stat.memories is
    'Memories (live or not) the snapshot saw up to max_memory_id, pending_ids aside.';
comment on column __tenant__.corpus_stat.revisions is
    'The sum of those memories'' revisions when the snapshot saw them.';
comment on column __tenant__.corpus_stat.total_length is
    'The sum of the counted (live) memories'' lexeme counts: avg_length times documents.';
comment on column __tenant__.corpus_stat.pending_ids is
    'Memory ids below max_memory_id the snapshot did not see (a transaction then in flight may still write them): counted when they appear.';
comment on column __tenant__.corpus_stat.pending_since is
    'When each of pending_ids was first missed; one missing for an hour is given up (the next recount counts it).';
comment on column __tenant__.corpus_stat.recounted_documents is
    'documents at the last whole recount: one comes again when the corpus has doubled since.';
comment on column __tenant__.corpus_stat.erased is
    'Bumped by each erasure that changed the statistics directly.';
comment on column __tenant__.corpus_stat.recounted_erased is
    'erased as the last whole recount read it: the next refresh recounts whole when they differ.';
