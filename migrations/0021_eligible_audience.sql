-- Eligibility's audience rule, "no audience, or the principal", as index
-- conditions. The partial index of 0003 held only rows with an audience, so
-- the "no audience" half could not be looked up and a principal who may see
-- 200 memories had every row of the tenant read and filtered (recall, the
-- dense arm's exact path, provenance). A btree over every row answers both
-- halves ("is null" and "= principal") and the planner joins them with a
-- bitmap OR; it still answers erasure's "this peer's memories" as before.
drop index __tenant__.memory_audience;
create index memory_audience on __tenant__.memory (audience_peer_id);
