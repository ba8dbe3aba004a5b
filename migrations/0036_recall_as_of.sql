-- Recall as of a past moment (issue #50): a memory whose row has not
-- changed since that moment is read as it stands now; one changed since
-- (corrected, superseded, forgotten, given back by an erasure) is read from
-- its history. Those are found through this index: remember() stamps
-- created_at and updated_at with the same now(), so only rows changed by a
-- later transaction are in it, and an as-of recall reads only the changes
-- made after its moment.
create index memory_changed on __tenant__.memory (updated_at) where updated_at > created_at;
