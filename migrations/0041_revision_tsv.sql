-- Recall as of a past moment (issue #50) ranks a memory corrected since then
-- by the text it had then, its earliest revision kept after the moment. Its
-- tsvector was parsed on every recall (to_tsvector, ~12 us a text: 2.3 ms of
-- a lexical recall as of a moment 197 corrections ago, bench.as_of at 100k);
-- a revision's text never changes (append-only), so its tsvector is kept
-- with it, made as memory.tsv is made from a memory's current text.
alter table __tenant__.memory_revision
    add column tsv tsvector generated always as
        (to_tsvector('english'::regconfig, coalesce(title, '') || ' ' || body)) stored;
comment on column __tenant__.memory_revision.tsv is
    'The revision''s text as memory.tsv is made (recall as of a moment before the correction ranks it).';
