-- The worked example behind docs/reference.md, as one psql script.
--
-- Run it against a database in which tenant acme was just created and
-- nothing else happened yet, e.g. with a throwaway embedded server and the
-- project's virtual environment first on PATH (the script runs
-- `pgrecall worker` and `python` through psql's \! in a few places):
--
--   export PATH=/path/to/pgrecall/.venv/bin:$PATH
--   export PGRECALL_HOME=$(mktemp -d)
--   pgrecall tenant create acme
--   SU=$(pgrecall server uri)
--   APP=$(pgrecall server uri --tenant acme)
--   psql -X -v su="$SU" -v app="$APP" -f docs/examples.sql "$SU"
--
-- `su` is a superuser, for the pgrecall.* control plane and for the examples
-- that tamper with tables (inside rolled-back transactions, or refused);
-- `app` is the tenant's application role, which may only call acme's public
-- functions. Errors are expected along the way: each "-- ==" section is one
-- example of docs/reference.md, and the ids used in later sections (sessions
-- 1 to 4, memories 1 to 13, offsets 1 to 14 in scope default, facts 1 to 13) hold only when
-- the sections run in this order on a new tenant. The last sections erase most of the story.

\set VERBOSITY terse

------------------------------------------------------------------------------
-- Control plane, as the superuser
------------------------------------------------------------------------------
\c :su

-- == tenant_name_problem
select n as name, pgrecall.tenant_name_problem(n) as problem
  from unnest(array['acme', 'Acme', 'pg_stats', 'pgrecall_x', 'select', 'team_2']) n;

-- == check_tenant_name
select pgrecall.check_tenant_name('team_2');

-- == check_tenant_name_error
select pgrecall.check_tenant_name('Team-2');

-- == create_tenant
select * from pgrecall.create_tenant('scratch');

-- == create_tenant_error
select * from pgrecall.create_tenant('acme');

-- == list_tenants
select name, owner_role, app_role, schema_version, latest_version
  from pgrecall.list_tenants();

-- == upgrade_tenant
select * from pgrecall.upgrade_tenant('acme');

-- == upgrade_tenant_error
select * from pgrecall.upgrade_tenant('acme_test');

-- == upgrade_tenant_pr007
begin;
insert into scratch.schema_migration (version, name, sha256)
values (99, '0099_from_the_future.sql', repeat('0', 64));
select * from pgrecall.upgrade_tenant('scratch');
rollback;

-- == upgrade_tenant_pr004
begin;
update pgrecall.source set sha256 = repeat('f', 64)
 where kind = 'migration' and name = '0001_settings.sql';
select * from pgrecall.upgrade_tenant('scratch');
rollback;

-- == install_tenant
select * from pgrecall.install_tenant('scratch');
select * from pgrecall.install_tenant('beta');

-- == drop_tenant
select pgrecall.drop_tenant('beta');
select pgrecall.drop_tenant('scratch');
select name from pgrecall.list_tenants();

-- == drop_tenant_error
select pgrecall.drop_tenant('beta');

-- == tenant_settings
select key, value from pgrecall.tenant_settings('acme');

-- == set_tenant_setting
select pgrecall.set_tenant_setting('acme', 'max_memory_bytes', '32768');

-- == set_tenant_setting_errors
select pgrecall.set_tenant_setting('acme', 'max_tokens', '100');
select pgrecall.set_tenant_setting('acme', 'rrf_k', '"60"');
select pgrecall.set_tenant_setting('acme', 'dense_floor', '1.5');
select pgrecall.set_tenant_setting('acme', 'embedding_model', '"bge-small-en"');

------------------------------------------------------------------------------
-- Tenant acme, as its application role
------------------------------------------------------------------------------
\c :app

-- == settings
select key, value, description from acme.settings() where key like 'max%';

-- == schema_info
select * from acme.schema_info();

-- == no_table_access
select count(*) from acme.memory;

-- == add_scope
select acme.add_scope('default', 'Ana''s personal assistant');

-- == add_scope_error
select acme.add_scope('Ana Notes');

-- == add_peer
select acme.add_peer('ana', 'human', '{"locale": "pt-PT"}') as ana,
       acme.add_peer('assistant', 'agent') as assistant;

-- == add_peer_error
select acme.add_peer('ana', 'agent');
select acme.add_peer('ana ');
select acme.add_peer('Ana');
select acme.add_peer(E'ana\u202e');
select acme.add_peer('аna');
select acme.append_observation('Ana', array['default'], 'default', 'Hello', 'user');

-- == append_observation
select acme.create_session('assistant', '{default}', 'default') as session_id;
select acme.append_observation(
           p_principal   => 'assistant',
           p_scopes      => array['default'],
           p_scope       => 'default',
           p_body        => 'I''m vegetarian, by the way.',
           p_source_role => 'user',
           p_actor       => 'ana',
           p_session_id  => 1) as log_offset;

-- == append_observation_errors
select acme.append_observation('carol', '{default}', 'default', 'Hello', 'user');
select acme.append_observation('assistant', '{default}', 'travel', 'Hello', 'user');
select acme.append_observation('assistant', '{default,travel}', 'travel', 'Hello', 'user');
select acme.append_observation('assistant', '{default}', 'default', 'Hello', 'human');
select acme.append_observation('assistant', '{default}', 'default', 'Hello', 'user', p_session_id => 7);

-- == append_observations
select * from acme.append_observations('assistant', '{default}', 'default', '[
    {"body": "I live in Lisbon, near Alfama.", "source_role": "user", "actor": "ana", "session_id": 1},
    {"body": "Good to know! Any allergies I should keep in mind?", "source_role": "assistant", "session_id": 1},
    {"body": "Peanuts. Please keep that private.", "source_role": "user", "actor": "ana", "session_id": 1},
    {"body": "And keep your answers short.", "source_role": "user", "actor": "ana", "session_id": 1}]');

-- == append_observations_errors
select * from acme.append_observations('assistant', '{default}', 'default', '[
    {"body": "Hello", "source_role": "user", "actor": "ana"},
    {"body": "Hi", "source_role": "user", "actor": "ben"}]');
select * from acme.append_observations('assistant', '{default}', 'default', '[]');

-- == log_watermark
select acme.log_watermark('assistant', '{default}', 'default');

-- == remember
select * from acme.remember(
    p_principal => 'assistant',
    p_scopes    => '{default}',
    p_scope     => 'default',
    p_body      => 'Ana is vegeterian.',
    p_evidence  => '{1}',
    p_purposes  => '{converse,personalize,act}',
    p_kind      => 'fact',
    p_about     => '{Ana}');

-- == remember_more
select * from acme.remember('assistant', '{default}', 'default', 'Ana lives in Lisbon (Alfama).',
                            '{2}', '{act,personalize}', p_kind => 'fact', p_about => '{Ana,Lisbon}');
select * from acme.remember('assistant', '{default}', 'default', 'Ana is allergic to peanuts.',
                            '{4}', '{act}', p_audience => 'ana', p_kind => 'fact');
select * from acme.remember('assistant', '{default}', 'default', 'Ana prefers short answers.',
                            '{5}', '{converse}');

-- == remember_noop
select * from acme.remember('assistant', '{default}', 'default', '  ana is VEGETERIAN. ', '{1}', '{converse}');
select * from acme.remember('assistant', '{default}', 'default', 'Any allergies?', '{3}', '{converse}');
select * from acme.remember('assistant', '{default}', 'default', 'Ana likes fado.', '{}', '{converse}');
select * from acme.remember('assistant', '{default}', 'default', E' \n\t', '{1}', '{converse}');

-- == remember_errors
select * from acme.remember('assistant', '{default}', 'default', 'Ana likes fado.', '{99}', '{converse}');
select * from acme.remember('assistant', '{default}', 'default', 'Ana likes fado.', '{1}', '{training}');

-- == read
\x on
select * from acme.read('assistant', '{default}', 1, 'converse');
\x off

-- == read_errors
select id from acme.read('assistant', '{default}', 4, 'act');
select id from acme.read('assistant', '{default}', 3, 'act');
select id from acme.read('assistant', '{default}', 1, 'chat');
select id from acme.read('assistant', '{default,travel}', 1, 'converse');

-- == read_audience
select id, body, audience, purposes from acme.read('ana', '{default}', 3, 'act');

-- == derive
select acme.derive('assistant', '{default}', '{1,2}',
                   'Ana is a vegetarian in Lisbon: suggest meat-free places near Alfama.',
                   p_about => '{Ana}') as memory_id;

-- == derive_read
select origin, purposes, audience, confidence, provenance -> 'memories' as sources
  from acme.read('assistant', '{default}', 5, 'personalize');

-- == derive_audience
select acme.derive('ana', '{default}', '{1,3}', 'Ana eats vegetarian and never peanuts.',
                   p_kind => 'fact') as memory_id;
select audience, purposes from acme.read('ana', '{default}', 6, 'act');

-- == derive_errors
select acme.derive('ana', '{default}', '{3,4}', 'Tell Ana briefly about peanut-free dishes.');
select acme.derive('assistant', '{default}', '{1,3}', 'Ana eats vegetarian and never peanuts.');

-- == correct
select acme.correct('assistant', '{default}', 1, 1, 'Ana is vegetarian.',
                    p_reason => 'typo') as revision;

-- == correct_conflict
select acme.correct('assistant', '{default}', 1, 1, 'Ana is a vegetarian.');

-- == correct_history
select m.body, m.revision, r.revision as old_revision, r.body as old_body, r.reason, r.changed_by
  from acme.read('assistant', '{default}', 1, 'converse') m,
       jsonb_to_recordset(m.revisions) r(revision int, body text, reason text, changed_by text);

-- == supersede
select acme.create_session('assistant', '{default}', 'default') as session_id;
select acme.append_observation('assistant', '{default}', 'default',
                               'Update: I moved to Porto last month.', 'user',
                               p_actor => 'ana', p_session_id => 2) as log_offset;
select acme.supersede('assistant', '{default}', 2, 1, 'Ana lives in Porto.', '{6}',
                      p_about => '{Ana,Porto}') as memory_id;

-- == supersede_after
select id, body, revision, superseded_by, upper(valid) is not null as closed
  from acme.read('assistant', '{default}', 2, 'act', p_include_superseded => true);
select id, body, revision, provenance -> 'about' as about
  from acme.read('assistant', '{default}', 7, 'act');

-- == supersede_errors
select id from acme.read('assistant', '{default}', 2, 'act');
select acme.supersede('assistant', '{default}', 2, 2, 'Ana lives in Braga.', '{6}');
select acme.correct('assistant', '{default}', 2, 2, 'Ana lived in Lisbon.');
select acme.supersede('assistant', '{default}', 7, 1, 'Ana lives in Braga.', '{}');

-- == forget
select acme.forget('assistant', '{default}', 4, 'the user asked', p_expected_revision => 1) as revision;

-- == forget_after
select id from acme.read('assistant', '{default}', 4, 'converse');
select acme.forget('assistant', '{default}', 4, 'the user asked');
select acme.forget('assistant', '{default}', 7, '  ');

-- == derive_cross_scope
select acme.add_scope('work', 'Ana''s job');
select acme.append_observation('assistant', '{work}', 'work', 'I work at a bakery in Graça.', 'user',
                               p_actor => 'ana') as log_offset;
select memory_id from acme.remember('assistant', '{work}', 'work', 'Ana works at a bakery.', '{1}', '{act}');
select acme.derive('assistant', '{default,work}', '{1,8}', 'Ana, a vegetarian, works at a bakery.');

-- == log_watermark_after
select acme.log_watermark('assistant', '{default}', 'default');

-- == append_only
\c :su
update acme.observation set body = 'I eat fish.' where scope = 'default' and log_offset = 1;
\c :app

------------------------------------------------------------------------------
-- A third session: more to recall
------------------------------------------------------------------------------

-- == session3
select acme.create_session('assistant', '{default}', 'default') as session_id;
select * from acme.append_observations('assistant', '{default}', 'default', '[
    {"body": "I''ve started cooking Japanese food at home.", "source_role": "user", "actor": "ana", "session_id": 3},
    {"body": "Lovely! What would you like to make first?", "source_role": "assistant", "session_id": 3},
    {"body": "Vegetarian ramen. And remind me to buy miso every Friday.", "source_role": "user", "actor": "ana",
     "session_id": 3}]');

-- == remember_many
select * from acme.remember_many('assistant', '{default}', 'default', '[
    {"body": "Ana is learning to cook Japanese food.", "evidence": [7], "purposes": ["converse", "personalize"],
     "kind": "fact", "about": ["Ana"]},
    {"title": "Friday miso", "body": "Remind Ana to buy miso every Friday.", "evidence": [9],
     "purposes": ["act", "converse"], "kind": "decision", "about": ["Ana"]},
    {"body": "Ana wants to make vegetarian ramen first. Which broth should I suggest?", "evidence": [9],
     "purposes": ["converse", "personalize"]},
    {"body": "What would she like to make first?", "evidence": [8], "purposes": ["converse"]},
    {"body": "Ana is learning to cook  japanese food.", "evidence": [7], "purposes": ["converse", "personalize"]}]');

-- == remember_many_errors
select * from acme.remember_many('assistant', '{default}', 'default', '[
    {"body": "Ana likes fado.", "evidence": [1], "purposes": ["converse"]},
    {"body": "Ana likes Porto.", "evidence": [1], "purposes": ["chat"]}]');
select * from acme.remember_many('assistant', '{default}', 'default', '[
    {"body": "Ana likes fado.", "evidence": [1], "purposes": ["converse"]},
    {"body": "Ana likes Porto.", "evidence": [99], "purposes": ["converse"]}]');
select * from acme.remember_many('assistant', '{default}', 'default', '{"body": "Ana likes fado."}');

-- == session3_derive
select acme.derive('assistant', '{default}', '{1,9}',
                   'Ana is a vegetarian learning Japanese cooking: suggest vegetarian ramen and miso soup.',
                   p_about => '{Ana}') as memory_id;

------------------------------------------------------------------------------
-- Term statistics and embeddings
------------------------------------------------------------------------------

-- == term_stats_stale
select acme.term_stats_stale();

-- == refresh_term_stats
select * from acme.refresh_term_stats();
select acme.term_stats_stale();

-- == embedding_status
select * from acme.embedding_status();

-- == claim_embedding_jobs
\x on
select * from acme.claim_embedding_jobs('psql-demo', 2);
\x off

-- == claim_embedding_jobs_errors
select * from acme.claim_embedding_jobs('', 10);
select * from acme.claim_embedding_jobs('psql-demo', 0);

-- == complete_embedding_jobs
select acme.complete_embedding_jobs('psql-demo', '{3}', '{1}',
                                    array['[' || array_to_string(array_fill(0.05, array[384]), ',') || ']'],
                                    'all-MiniLM-L6-v2', 1) as stored;

-- == complete_embedding_jobs_errors
select acme.complete_embedding_jobs('psql-demo', '{3,5}', '{1}', '{"[1,2,3]"}', 'all-MiniLM-L6-v2', 2);
select acme.complete_embedding_jobs('psql-demo', '{3}', '{1}', '{"[1,2,3]"}', 'all-MiniLM-L6-v2', 2);

-- == release_embedding_jobs
select acme.release_embedding_jobs('psql-demo', '{3,5}') as released;

-- == freshness
select * from acme.freshness('assistant', '{default}', 'default');

-- == wait_for
select acme.wait_for('assistant', '{default}', 'default', 9, p_timeout_ms => 200) as embedded,
       acme.wait_for('assistant', '{default}', 'default', 9, 'log', 0) as logged;

-- == worker
\! pgrecall worker --tenant acme --once

-- == freshness_after
select * from acme.freshness('assistant', '{default}', 'default');
select acme.wait_for('assistant', '{default}', 'default', 9) as embedded;
select * from acme.embedding_status();

-- == wait_for_errors
select acme.wait_for('assistant', '{default}', 'default', 9, 'index');
select acme.wait_for('assistant', '{default}', 'default', 0);
select * from acme.freshness('assistant', '{default}', 'work');

-- == rebuild_embeddings
select acme.rebuild_embeddings() as queued;

-- == set_embedding_version
select acme.set_embedding_version('all-MiniLM-L6-v2', 1) as queued;
select * from acme.embedding_status();
select acme.set_embedding_version('all-MiniLM-L6-v2', 2) as queued;
select * from acme.embedding_status();

-- == set_embedding_version_worker
\! pgrecall worker --tenant acme --once

-- == set_embedding_version_errors
select acme.set_embedding_version('all-MiniLM-L6-v2', 3);
select acme.set_embedding_version('', 2);

------------------------------------------------------------------------------
-- Recall
------------------------------------------------------------------------------

-- == recall
select rank, memory_id, body, round(score::numeric, 4) as score, lexical_rank, dense_rank,
       round(bm25::numeric, 3) as bm25
  from acme.recall('assistant', '{default}', 'What should I cook for Ana?');

-- == recall_meta
select key, value from jsonb_each(acme.last_recall());

-- == recall_pruning
select rank, memory_id, body, lexical_rank
  from acme.recall('assistant', '{default}', 'vegetarian ramen for Ana');
select acme.last_recall() -> 'terms' as terms, acme.last_recall() -> 'dropped_terms' as dropped_terms;

-- == recall_superseded
select rank, memory_id, body from acme.recall('assistant', '{default}', 'Where does Ana live?', 'personalize');
select rank, memory_id, body from acme.recall('assistant', '{default}', 'Where does Ana live?', 'personalize',
                                              p_include_superseded => true);

-- == recall_dense_psql
select count(*) from acme.recall('assistant', '{default}', 'What should I cook for Ana?', p_mode => 'dense');
select acme.last_recall() ->> 'dense_reason' as dense_reason;

-- == recall_python
\! python -c 'import pgrecall; mem = pgrecall.connect(tenant="acme", principal="assistant", scopes=["default"]); answer = mem.recall("What should I cook for Ana?"); [print(i.rank, i.memory_id, i.body, i.lexical_rank, i.dense_rank, None if i.cosine is None else round(i.cosine, 2)) for i in answer.items]; print({k: getattr(answer.meta, k) for k in ("mode", "dense_available", "dense_method", "lexical_count", "dense_count", "fused_count", "missing_embeddings")})'

-- == recall_errors
select count(*) from acme.recall('assistant', '{default}', 'ramen', p_limit => 0);
select count(*) from acme.recall('assistant', '{default}', 'ramen', p_mode => 'semantic');
select count(*) from acme.recall('assistant', '{default}', 'ramen', 'chat');
select count(*) from acme.recall('assistant', '{default}', 'ramen', p_query_embedding => '{0.1,0.2,0.3}');
select count(*) from acme.recall('assistant', '{default}', null);

-- == recall_walk
select acme.forget('assistant', '{default}', 9, 'Ana asked me not to keep track of her hobbies') as revision;
select rank, memory_id, body, lexical_rank from acme.recall('assistant', '{default}', 'ramen');
select id, provenance -> 'hidden_sources' as hidden_sources from acme.read('assistant', '{default}', 12, 'converse');

-- == last_recall
select acme.last_recall() -> 'lexical_count' as lexical_count, acme.last_recall() -> 'fused_count' as fused_count,
       acme.last_recall() -> 'returned' as returned;

------------------------------------------------------------------------------
-- The graph
------------------------------------------------------------------------------

-- == predicates
select * from acme.predicates();

-- == session4
select acme.create_session('assistant', '{default}', 'default') as session_id;
select * from acme.append_observations('assistant', '{default}', 'default', '[
    {"body": "From 1 to 14 December I''ll live in Tokyo, for a cooking course.", "source_role": "user", "actor": "ana",
     "session_id": 4},
    {"body": "You must love Japanese food!", "source_role": "assistant", "session_id": 4},
    {"body": "I do — miso above all. My friend Kenji teaches the course at Tsukiji Kitchen.", "source_role": "user",
     "actor": "ana", "session_id": 4},
    {"body": "Tsukiji Kitchen is in Tokyo, so you can walk there.", "source_role": "assistant", "session_id": 4},
    {"body": "Yes. Kenji Sato speaks Portuguese, by the way.", "source_role": "user", "actor": "ana", "session_id": 4}]');

-- == assert_fact
select * from acme.assert_fact(
    p_principal => 'assistant',
    p_scopes    => '{default}',
    p_scope     => 'default',
    p_subject   => 'Ana',
    p_predicate => 'lives_in',
    p_object    => 'Lisbon',
    p_evidence  => '[{"offset": 2, "quote": "I live in Lisbon"}]');

-- == assert_fact_supersede
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'lives_in', 'Porto',
                               '[{"offset": 6, "quote": "I moved to Porto"}]');
select now() as before_tokyo \gset
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'lives_in', 'Tokyo',
                               '[{"offset": 10, "quote": "From 1 to 14 December I''ll live in Tokyo"}]',
                               p_valid_from => '2026-12-01', p_valid_to => '2026-12-15');

-- == assert_fact_history
\c :su
select f.id, o.name as object, f.valid, upper_inf(f.known) as current, f.closed_by, f.split_from, f.split_by
  from acme.fact f join acme.entity o on o.id = f.object_id order by f.id;
\c :app

-- == assert_fact_confirm
select * from acme.assert_fact('assistant', '{default}', 'default', 'ana', 'lives_in', 'tokyo',
                               '[{"offset": 10, "quote": "I''ll live in Tokyo"}]',
                               p_valid_from => '2026-12-01', p_valid_to => '2026-12-15');

-- == assert_fact_errors
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'likes', 'Japanese food',
                               '[{"offset": 11, "quote": "You must love Japanese food"}]');
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'moved_to', 'Porto',
                               '[{"offset": 6, "quote": "I moved to Porto"}]');
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'lives_in', 'Porto',
                               '[{"offset": 6, "quote": "I live in Porto"}]');
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'likes', 'miso',
                               '[{"offset": 12, "start": 7, "end": 21, "quote": "miso above all"}]');
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'likes', 'miso', '[]');
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'knows', 'ana',
                               '[{"offset": 12, "quote": "I do"}]');

-- == assert_facts
select * from acme.assert_facts('assistant', '{default}', 'default', '[
    {"subject": "Ana", "predicate": "likes", "object": "Japanese food",
     "evidence": [{"offset": 11, "quote": "You must love Japanese food"}, {"offset": 12, "quote": "I do"}]},
    {"subject": "Ana", "predicate": "likes", "object": "miso",
     "evidence": [{"offset": 12, "start": 9, "end": 23, "quote": "miso above all"}]},
    {"subject": "Ana", "predicate": "friend_of", "object": "Kenji",
     "evidence": [{"offset": 12, "quote": "My friend Kenji"}], "object_type": "person"},
    {"subject": "Kenji", "predicate": "works_at", "object": "Tsukiji Kitchen",
     "evidence": [{"offset": 12, "quote": "Kenji teaches the course at Tsukiji Kitchen"}],
     "statement": "Kenji teaches the cooking course at Tsukiji Kitchen"},
    {"subject": "Tsukiji Kitchen", "predicate": "located_in", "object": "Tokyo",
     "evidence": [{"offset": 13, "quote": "Tsukiji Kitchen is in Tokyo"}]},
    {"subject": "Kenji Sato", "predicate": "speaks", "object": "Portuguese",
     "evidence": [{"offset": 14, "quote": "Kenji Sato speaks Portuguese"}]},
    {"subject": "Ana", "predicate": "allergic_to", "object": "peanuts",
     "evidence": [{"offset": 4, "quote": "Peanuts"}], "audience": "ana", "purposes": ["act"]}]');

-- == assert_facts_errors
select * from acme.assert_facts('assistant', '{default}', 'default', '[
    {"subject": "Ana", "predicate": "speaks", "object": "Portuguese", "evidence": [{"offset": 14, "quote": "Yes."}]},
    {"subject": "Ana", "predicate": "speaks", "object": "Japanese", "evidence": [{"offset": 11, "quote": "Japanese"}]}]');
select * from acme.assert_facts('assistant', '{default}', 'default', '[
    {"subject": "Ana", "predicate": "likes", "object": "ramen", "evidence": [{"offset": 9, "quote": "Vegetarian ramen"}]},
    {"subject": "Ana", "predicate": "likes", "objekt": "tofu", "evidence": [{"offset": 9, "quote": "Vegetarian ramen"}]}]');
select count(*) from acme.facts_as_of('assistant', '{default}', 'Ana', 'speaks');

-- == facts_as_of
select fact_id, predicate, object, valid, salience from acme.facts_as_of('assistant', '{default}', 'Ana');
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in', p_valid_at => '2026-12-05');
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in', p_valid_at => '2027-01-01');

-- == facts_as_of_known
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in',
                                                 p_known_at => :'before_tokyo');

-- == facts_as_of_audience
select fact_id, object, statement from acme.facts_as_of('assistant', '{default}', 'Ana', 'allergic_to', p_purpose => 'act');
select fact_id, object, statement from acme.facts_as_of('ana', '{default}', 'Ana', 'allergic_to', p_purpose => 'act');

-- == facts_as_of_evidence
select fact_id, jsonb_pretty(evidence) from acme.facts_as_of('assistant', '{default}', 'Ana', 'likes') where object = 'Japanese food';

-- == facts_as_of_errors
select * from acme.facts_as_of('assistant', '{default}', 'Kenji', 'teaches');
select * from acme.facts_as_of('assistant', '{default}', 'Yuki');

-- == resolve_citation
select * from acme.resolve_citation('assistant', '{default}', 8);

-- == resolve_citation_errors
select * from acme.resolve_citation('assistant', '{default}', 99);
select * from acme.resolve_citation('assistant', '{default}', 13);

-- == neighbourhood
select depth, fact_id, subject, predicate, object from acme.neighbourhood('assistant', '{default}', '{Kenji}');
select depth, fact_id, subject, predicate, object
  from acme.neighbourhood('assistant', '{default}', '{Ana}', 3, p_valid_at => '2026-12-05');

-- == neighbourhood_errors
select * from acme.neighbourhood('assistant', '{default}', '{Ana}', 4);
select * from acme.neighbourhood('assistant', '{default}', '{Ana,Yuki}');

-- == retract_fact
select now() as before_retraction \gset
select * from acme.retract_fact('assistant', '{default}', 11, 'my guess: Ana did not say where the school is');
select fact_id, object from acme.facts_as_of('assistant', '{default}', 'Tsukiji Kitchen');
select fact_id, object from acme.facts_as_of('assistant', '{default}', 'Tsukiji Kitchen', p_known_at => :'before_retraction');

-- == retract_fact_errors
select * from acme.retract_fact('assistant', '{default}', 11, 'again');
select * from acme.retract_fact('assistant', '{default}', 13, 'not mine to retract');
select * from acme.retract_fact('assistant', '{default}', 10, ' ');

-- == add_entity_alias
select * from acme.add_entity_alias('assistant', '{default}', 'default', 'Tsukiji Kitchen', 'the cooking school');
select depth, fact_id, subject, predicate, object from acme.neighbourhood('assistant', '{default}', '{The Cooking School}', 1);

-- == add_entity_alias_errors
select * from acme.add_entity_alias('assistant', '{default}', 'default', 'Tsukiji Kitchen', 'Tokyo');
select * from acme.add_entity_alias('assistant', '{default}', 'default', 'Yuki', 'Yuki-chan');

-- == merge_entities
select * from acme.merge_entities('assistant', '{default}', 'default', 'Kenji', 'Kenji Sato');
select fact_id, subject, predicate, object from acme.facts_as_of('assistant', '{default}', 'Kenji Sato');

-- == merge_entities_errors
select * from acme.merge_entities('assistant', '{default}', 'default', 'Kenji', 'kenji sato');
select * from acme.merge_entities('assistant', '{default}', 'default', 'Kenji', 'Yuki');

-- == entities
select * from acme.entities('assistant', '{default}');
select entity_id, name, aliases, facts from acme.entities('assistant', '{default}', 'kenji sato');

-- == recall_facts
select rank, item, memory_id, fact_id, fact_rank, body, round(score::numeric, 4) as score
  from acme.recall('assistant', '{default}', 'Where does Ana live?', 'personalize', p_limit => 6);
select acme.last_recall() -> 'entities' as entities, acme.last_recall() -> 'fact_count' as fact_count,
       acme.last_recall() -> 'fused_count' as fused_count, acme.last_recall() -> 'returned' as returned;
select rank, fact_id, jsonb_pretty(provenance) as provenance
  from acme.recall('assistant', '{default}', 'Where is the cooking school?') where item = 'fact';

------------------------------------------------------------------------------
-- Session start
------------------------------------------------------------------------------

-- == pin
select acme.pin('assistant', '{default}', 10) as pinned;

-- == pin_errors
select acme.pin('assistant', '{default}', 2);
select acme.pin('assistant', '{default}', 3);

-- == session_bundle
select jsonb_pretty(acme.session_bundle('assistant', '{default}', p_recent => 3, p_entities => 3));

-- == session_bundle_errors
select acme.session_bundle('assistant', '{default}', p_recent => 500);

------------------------------------------------------------------------------
-- Erasure
------------------------------------------------------------------------------

-- == erase
\x on
select * from acme.erase('{"observation": {"scope": "default", "offset": 6}}',
                         'Ana asked to delete her message about moving', 'ana');
\x off

-- == erase_after
select id, body, superseded_by, upper(valid) is null as current from acme.read('assistant', '{default}', 2, 'act');
select acme.log_watermark('assistant', '{default}', 'default');

-- == erase_facts
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in');
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in', p_valid_at => '2027-01-01');

-- == erase_errors
select acme.erase('{"scope": "default"}', '  ');
select acme.erase('{"peer": "ana", "scope": "default"}', 'account closed');
select acme.erase('{"expired_before": "2027-01-01"}', 'clean up');
select acme.erase('{"peer": "carol"}', 'account closed');
select acme.erase('{"observation": {"scope": "default", "offset": 6}}', 'again');
select acme.erase('{"scope": "travel"}', 'trip cancelled');

-- == expire
select acme.append_observation('assistant', '{work}', 'work', 'Can you cover my Saturday shift?', 'user',
                               p_actor => 'ana', p_retention_until => now() - interval '1 day') as log_offset;
select memory_id, status from acme.remember('assistant', '{work}', 'work', 'Ana asked for cover on Saturday.', '{2}', '{act}');
select * from acme.expire();
\c :su
select pgrecall.set_tenant_setting('acme', 'expiry_gate', 'true');
\c :app
select id, selector, reason, requested_by, observations_erased, rows_erased, residual from acme.expire();

-- == erase_peer
\x on
select * from acme.erase('{"peer": "ana"}', 'Ana closed her account');
\x off
select count(*) as recalled from acme.recall('assistant', '{default,work}', 'Ana');
select acme.add_peer('ana') as new_peer_id;
select entity_id, name, facts from acme.entities('assistant', '{default}');
select log_offset, quote, actor, source_role from acme.resolve_citation('assistant', '{default}', 11);

-- == erasure_requests
select id, selector, reason, requested_by, observations_erased, residual from acme.erasure_requests();
