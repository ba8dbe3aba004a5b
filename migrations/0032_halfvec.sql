-- Vectors at half precision (issue #31). A 384-dimension vector is 1,540
-- bytes as vector and 776 as halfvec, and the HNSW graph over it shrinks by
-- about as much (measured: 38.4 MB against 21.9 MB at 20k). The trial
-- (python -m bench.halfvec, bench/results/latest-halfvec.md) found recall@10
-- of the HNSW search against the exact float top 10 lower by 0.0020 on make
-- bench's synthetic queries and 0.0008 on the LoCoMo development split, and
-- the LoCoMo evidence found by exact dense search unchanged: within the 0.005
-- the issue allows. Queries stay float8[]; they are rounded where compared.
--
-- The stored vectors are converted, not re-embedded. The HNSW indexes are
-- built again over the new type (an operator class belongs to one type).
drop index __tenant__.memory_embedding_hnsw;
alter table __tenant__.memory_embedding
    alter column embedding type __ext__.halfvec(384) using embedding::__ext__.halfvec(384),
    alter column text_embedding type __ext__.halfvec(384) using text_embedding::__ext__.halfvec(384);
-- Both stay in the row, as 0018 decided for the vector type (a TOAST fetch
-- per row slowed the exact dense path twofold).
alter table __tenant__.memory_embedding
    alter column embedding set storage plain,
    alter column text_embedding set storage plain;
create index memory_embedding_hnsw on __tenant__.memory_embedding
    using hnsw (embedding __ext__.halfvec_cosine_ops) with (m = 16, ef_construction = 64);

drop index __tenant__.passage_embedding_hnsw;
alter table __tenant__.passage
    alter column embedding type __ext__.halfvec(384) using embedding::__ext__.halfvec(384);
create index passage_embedding_hnsw on __tenant__.passage
    using hnsw (embedding __ext__.halfvec_cosine_ops) with (m = 16, ef_construction = 64);
