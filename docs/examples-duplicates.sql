-- The examples of docs/reference.md's "Duplicates" section, as one psql script.
--
-- Run it against a database in which tenant home was just created and nothing
-- else happened yet, with the project's virtual environment first on PATH
-- (the script runs `pgrecall worker` through psql's \!):
--
--   export PATH=/path/to/pgrecall/.venv/bin:$PATH
--   export PGRECALL_HOME=$(mktemp -d)
--   pgrecall tenant create home
--   psql -X -f docs/examples-duplicates.sql "$(pgrecall server uri --tenant home)"
--
-- It connects as home's application role throughout. Errors are expected
-- where the reference shows them.

\set VERBOSITY terse

-- == setup
select home.add_scope('home');
select home.add_peer('ana'), home.add_peer('ben'), home.add_peer('assistant', 'agent');
select home.append_observation('ben', '{home}', 'home', 'I''m severely allergic to peanuts, keep them away from me.', 'user');
select home.append_observation('ana', '{home}', 'home', 'The weather was lovely today.', 'user');
select home.append_observation('ana', '{home}', 'home', 'Just so you know, Ben has a severe peanut allergy.', 'user');
select home.append_observation('ana', '{home}', 'home', 'I work night shifts as a nurse.', 'user');
select home.append_observation('ana', '{home}', 'home', 'Note to self: my shifts at the hospital are at night.', 'user');
select memory_id from home.remember('assistant', '{home}', 'home', 'Ben is severely allergic to peanuts', '{1}', '{converse,act}');
select memory_id from home.remember('assistant', '{home}', 'home', 'Ben has a severe peanut allergy', '{3}', '{converse,act}');
select memory_id from home.remember('assistant', '{home}', 'home', 'Ana works night shifts as a nurse', '{4}', '{converse}');
select memory_id from home.remember('ana', '{home}', 'home', 'Ana works nights as a hospital nurse', '{5}', '{converse}', p_audience => 'ana');

-- == duplicate_proposals_before_the_worker
select meta ->> 'empty_reason' as empty_reason, meta -> 'missing_embeddings' as missing
  from home.duplicate_proposals_answer('assistant', '{home}');

\! pgrecall worker --tenant home --once

-- == duplicate_proposals
select rank, round(cosine::numeric, 3) as cosine, a_id, a_body, b_id, b_body, b_may_replace_a as b_replaces_a
  from home.duplicate_proposals('assistant', '{home}');
select o ->> 'actor' as speaker, o ->> 'occurred_at' as said_at, o ->> 'text' as text
  from home.duplicate_proposals('assistant', '{home}') p,
       jsonb_array_elements((p.a_provenance -> 'observations') || (p.b_provenance -> 'observations')) o;
-- Ana sees her private memory too: a second pair, which may be superseded only one way
select rank, round(cosine::numeric, 3) as cosine, a_id, b_id, b_audience, b_may_replace_a as b_replaces_a,
       a_may_replace_b as a_replaces_b
  from home.duplicate_proposals('ana', '{home}');

-- == duplicate_proposals_errors
select * from home.duplicate_proposals('assistant', '{home}', 0);
select * from home.duplicate_proposals('assistant', '{garden}');

-- == decide_duplicate
select * from home.decide_duplicate('assistant', '{home}', 1, 2, 'supersede', 'the same allergy, said twice', 1, 1);
select id, revision, superseded_by from home.read('assistant', '{home}', 1, 'converse', true);

-- == decide_duplicate_errors
select * from home.decide_duplicate('assistant', '{home}', 1, 2, 'distinct', 'a second reviewer', 1, 1);
select * from home.decide_duplicate('ana', '{home}', 3, 4, 'supersede', 'one is enough', 1, 1);
select * from home.decide_duplicate('ana', '{home}', 4, 3, 'supersede', 'one is enough', 2, 1);
select * from home.decide_duplicate('assistant', '{home}', 3, 4, 'forget', 'not mine to see');
select * from home.decide_duplicate('assistant', '{home}', 2, 3, 'merge', 'x');
select * from home.decide_duplicate('assistant', '{home}', 2, 3, 'distinct', '  ');

-- == decide_duplicate_distinct
select * from home.decide_duplicate('ana', '{home}', 3, 4, 'distinct', 'my own note stays mine', 1, 1);
select meta ->> 'empty_reason' as empty_reason, meta -> 'decided' as decided
  from home.duplicate_proposals_answer('ana', '{home}');
