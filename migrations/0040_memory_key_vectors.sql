-- Keys from what was said, by meaning too (issue #48 item 1): a key may
-- carry the vector of its own text, made by the tenant's embedding model (the
-- caller's, given to remember_keys, stamped with the model that made it).
-- With recall_memory_keys_dense on, the dense arm also compares the question
-- with the keys of the memories the principal may see; a key's cosine counts
-- for its memory, which comes once. A vector of another model than the
-- tenant's is not compared (it is of another space). Off by default, as
-- every recall step until make eval's per-cell check passes.

alter table __tenant__.memory_key
    add column embedding __ext__.halfvec(384),
    add column embedding_model text,
    add constraint memory_key_embedding_stamped check ((embedding is null) = (embedding_model is null));
alter table __tenant__.memory_key alter column embedding set storage plain;
comment on column __tenant__.memory_key.embedding is
    'NULL or the vector of the key''s own text, by embedding_model (remember_keys'' caller).';
create index memory_key_hnsw on __tenant__.memory_key
    using hnsw (embedding __ext__.halfvec_cosine_ops) with (m = 16, ef_construction = 64);

alter table __tenant__.setting add constraint setting_recall_memory_keys_dense_boolean check (
    key <> 'recall_memory_keys_dense' or jsonb_typeof(value) = 'boolean'
);

insert into __tenant__.setting (key, value, description) values
    ('recall_memory_keys_dense', 'false',
     'Recall: the dense arm also compares the question with the vectors of the memories'' keys (remember_keys with embeddings, the tenant''s model); a key''s cosine counts for its memory, which comes once, with the better of its own cosine and its keys''');
