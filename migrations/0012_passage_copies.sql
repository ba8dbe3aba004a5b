-- A passage copies its observation's scope and sender (observations never
-- change) and references the observation, whose own foreign keys already
-- vouch for both. Checking them again for every passage took 20 of the ~60 ms
-- that writing 500 passages took (EXPLAIN ANALYZE, make bench's corpus).
alter table __tenant__.passage drop constraint passage_scope_fkey;
alter table __tenant__.passage drop constraint passage_actor_id_fkey;
