-- Keys from what was said (issue #48 item 1): a memory is also found under
-- statements derived from the turn it cites (the deriver's first-person
-- statements, the speaker's name in place of "I"), each a row of its own that
-- points at the memory. A key has no eligibility of its own: recall reaches
-- it only through its memory's (_memory_eligible on the memory it points
-- at), and returns the memory, never the key. A key is a projection of the
-- memory's turns: registered against them, erased with them (and with its
-- memory). Recall searches keys only with recall_memory_keys on (off: each
-- setting becomes a default only when make eval's per-cell check passes on
-- every development conversation and category).

create table __tenant__.memory_key (
    id          bigint generated always as identity primary key,
    memory_id   bigint not null references __tenant__.memory (id) on delete cascade,
    body        text not null check (body <> ''),
    tsv         tsvector generated always as (to_tsvector('english'::regconfig, body)) stored,
    created_by  bigint not null references __tenant__.peer (id),
    created_at  timestamptz not null default now(),
    unique (memory_id, body)
);
comment on table __tenant__.memory_key is
    'Search keys of memories: statements derived from the turns a memory cites; recall maps a key''s hit to its memory.';
create index memory_key_tsv on __tenant__.memory_key using gin (tsv);

-- A key goes before its memory (delete_order 40) and with the turns it was derived from.
insert into __tenant__.projection_kind (kind, table_name, description, key_expression, delete_order) values
    ('memory_key', 'memory_key', 'search keys of memories, derived from their turns', 'id::text', 36);

alter table __tenant__.setting add constraint setting_recall_memory_keys_boolean check (
    key <> 'recall_memory_keys' or jsonb_typeof(value) = 'boolean'
);

insert into __tenant__.setting (key, value, description) values
    ('recall_memory_keys', 'false',
     'Recall: the lexical arm also searches the memories'' keys (remember_keys); a key''s hit counts for its memory, which comes once, with the better of its own score and its keys''');
