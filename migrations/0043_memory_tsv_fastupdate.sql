-- Recall's lexical arm searches memory_tsv on every recall. With GIN's fast
-- update each new memory went to the index's pending list, which every search
-- reads whole and which only a vacuum (or 4 MB of it) empties: a tenant that
-- had just written its 10,000 memories held all of them there, so the planner
-- read the whole table instead of the index, and the lexical arm cost 4-5 ms of
-- a 9 ms recall instead of ~1 ms (bench/results/recall10k.md). Each memory now
-- goes straight into the index as it is written (10-16 us more per memory).
alter index __tenant__.memory_tsv set (fastupdate = off);
-- What is pending now moves into the index at once, not at the next vacuum.
select pg_catalog.gin_clean_pending_list('__tenant__.memory_tsv'::pg_catalog.regclass);
