-- The alias index answers a lookup on every assert_fact (is this new name
-- someone's alias?) and on every recall (which entities does the query
-- name?). With GIN's fast update every new entity went to the index's
-- pending list, which each lookup reads whole: 0.13 ms per lookup at 3k
-- entities, growing until a vacuum. Entities are written far less often
-- than names are looked up, so each insert now goes straight into the index.
alter index __tenant__.entity_aliases set (fastupdate = off);
-- What is pending now moves into the index at once, not at the next vacuum.
select pg_catalog.gin_clean_pending_list('__tenant__.entity_aliases'::pg_catalog.regclass);
