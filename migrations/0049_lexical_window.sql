-- A turn's words with its neighbours' (issue #48): what input version 2 embeds
-- for a memory (its own text, and the turns just before and after its first
-- evidence that everyone its audience admits may see) is also kept as a text
-- vector, the memory's own words at weight A and the neighbours' at D, so that
-- the lexical arm can find a reply by the words of the question it answers
-- (setting recall_lexical_window). It lives on the memory's version-2 vector
-- row and is written with it (complete_embedding_jobs), so every rule that
-- drops or replaces that vector (erasing a neighbouring turn, re-wording the
-- memory, switching model or input version) drops or replaces it too.
-- window_length is BM25's length of it: its distinct words, a neighbour's
-- counted half; the term statistics' snapshot averages it.

alter table __tenant__.memory_embedding
    add column window_tsv tsvector,
    add column window_length real,
    add constraint memory_embedding_window_whole check ((window_tsv is null) = (window_length is null));
comment on column __tenant__.memory_embedding.window_tsv is
    'The memory''s own words (weight A) with those of the turns around its first evidence (weight D): input version 2''s text as a text vector; NULL under version 1.';
comment on column __tenant__.memory_embedding.window_length is
    'BM25''s length of window_tsv: its distinct words, a word only the neighbours hold counted half.';
create index memory_embedding_window on __tenant__.memory_embedding using gin (window_tsv)
    where window_tsv is not null;

alter table __tenant__.corpus_stat add column window_avg_length double precision;
comment on column __tenant__.corpus_stat.window_avg_length is
    'The mean window_length over the vectors that have one, at the snapshot; NULL when none had.';

alter table __tenant__.setting add constraint setting_recall_lexical_window_boolean check (
    key <> 'recall_lexical_window' or jsonb_typeof(value) = 'boolean'
);

insert into __tenant__.setting (key, value, description) values
    ('recall_lexical_window', 'false',
     'Recall: the lexical arm scores each memory by its words with those of the turns around its evidence (input version 2''s text, the neighbours'' words at half weight); a memory without that text yet by its own');
