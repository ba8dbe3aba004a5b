-- The turns before and after an observation in its session (embedding input
-- version 2) are found through this index, with or without a session.
create index observation_neighbours on __tenant__.observation (scope, session_id, log_offset);
