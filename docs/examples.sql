-- The story the examples of docs/reference.md tell, as one psql script: GENERATED from the
-- reference by `python tests/doc_examples.py --write-sql`; edit the reference, not this file.
-- tests/test_reference_examples.py replays the same statements, as the roles named here, and
-- checks that each prints what the reference shows.
--
-- Run it against a database in which tenant acme was just created and nothing else happened
-- yet, e.g. with a throwaway embedded server and the project's virtual environment first on
-- PATH (a few examples run `pgrecall worker` and `python` through psql's \!):
--
--   export PATH=/path/to/pgrecall/.venv/bin:$PATH
--   export PGRECALL_HOME=$(mktemp -d)
--   pgrecall tenant create acme
--   psql -X -v su="$(pgrecall server uri)" -v app="$(pgrecall server uri --tenant acme)" \
--        -v worker="$(pgrecall server uri --tenant acme --role worker)" \
--        -v admin="$(pgrecall server uri --tenant acme --role admin)" \
--        -f docs/examples.sql "$(pgrecall server uri)"
--
-- `su` is a superuser (the pgrecall.* control plane, and the statements that look at or
-- tamper with tables); `app`, `worker` and `admin` are acme's login roles, each of which may
-- only call the functions of its duty. The script reconnects (\c) when the role changes.
-- Errors are expected along the way: each is marked with the SQLSTATE it must have. Ids and
-- offsets used by later statements hold only when everything runs in this order on a new
-- tenant. The examples of sessions and the work queue, and of message search, run in fresh
-- tenants of their own (their lease tokens differ on every run) and are not part of this
-- script; the test replays them too.

\set VERBOSITY terse

-- == Tenants, schemas and roles
\c :app
select count(*) from acme.memory;  -- 42501

-- == Connecting as each role
\c :su
select name, requested_by, done_at is not null as done, rows_written from acme.data_step;

-- == pgrecall.tenant_name_problem
select n as name, pgrecall.tenant_name_problem(n) as problem
  from unnest(array['acme', 'Acme', 'pg_stats', 'pgrecall_x', 'select', 'team_2']) n;

-- == pgrecall.check_tenant_name
select pgrecall.check_tenant_name('team_2');
select pgrecall.check_tenant_name('Team-2');  -- PR001

-- == pgrecall.tenant_name_rules, pgrecall.tenant_name_hint
select kind, argument from pgrecall.tenant_name_rules() order by ord;

-- == pgrecall.create_tenant
select * from pgrecall.create_tenant('scratch');
select * from pgrecall.create_tenant('acme');  -- PR002

-- == pgrecall.upgrade_tenant
select * from pgrecall.upgrade_tenant('acme');
select * from pgrecall.upgrade_tenant('acme_test');  -- PR003
begin;
insert into scratch.schema_migration (version, name, sha256)
values (99, '0099_from_the_future.sql', repeat('0', 64));
select * from pgrecall.upgrade_tenant('scratch');  -- PR007
rollback;
begin;
update pgrecall.source set sha256 = repeat('f', 64)
 where kind = 'migration' and name = '0001_settings.sql';
select * from pgrecall.upgrade_tenant('scratch');  -- PR004
rollback;

-- == pgrecall.install_tenant
select * from pgrecall.install_tenant('scratch');
select * from pgrecall.install_tenant('beta');

-- == pgrecall.drop_tenant
select pgrecall.drop_tenant('beta');
select pgrecall.drop_tenant('scratch');
select name from pgrecall.list_tenants();
select pgrecall.drop_tenant('beta');  -- PR003

-- == pgrecall.list_tenants
select name, owner_role, app_role, schema_version, latest_version
  from pgrecall.list_tenants();

-- == pgrecall.tenant_settings
select key, value from pgrecall.tenant_settings('acme');

-- == pgrecall.set_tenant_setting
select pgrecall.set_tenant_setting('acme', 'max_memory_bytes', '32768');
select pgrecall.set_tenant_setting('acme', 'max_tokens', '100');  -- PR006
select pgrecall.set_tenant_setting('acme', 'rrf_k', '"60"');  -- PR006
select pgrecall.set_tenant_setting('acme', 'dense_floor', '1.5');  -- PR006
select pgrecall.set_tenant_setting('acme', 'embedding_model', '"bge-small-en"');  -- PR006

-- == <tenant>.settings
\c :app
select key, value, description from acme.settings() where key like 'max%';

-- == <tenant>.set_setting
\c :admin
select acme.set_setting('max_memory_bytes', '16384');
select acme.set_setting('turn_gap', '3600');  -- PR006
select acme.set_setting('walk_depth', '0');  -- PR006
select acme.set_setting('embedding_input_version', '1');  -- PR006
\c :app
select acme.set_setting('max_memory_bytes', '65536');  -- 42501

-- == <tenant>.schema_info
select * from acme.schema_info();

-- == <tenant>.add_scope
select acme.add_scope('default', 'Ana''s personal assistant');
select acme.add_scope('Ana Notes');  -- PR140

-- == <tenant>.scopes
select name, description from acme.scopes();

-- == <tenant>.add_peer
select acme.add_peer('ana', 'human', '{"locale": "pt-PT"}') as ana,
       acme.add_peer('assistant', 'agent') as assistant;
select acme.add_peer('ana', 'agent');  -- PR107
select acme.add_peer('ana ');  -- PR140
select acme.add_peer('Ana');  -- PR141
select acme.add_peer(E'ana\u202e');  -- PR140
select acme.add_peer('аna');  -- PR140
select acme.append_observation('Ana', array['default'], 'default', 'Hello', 'user');  -- PR101

-- == <tenant>.append_observation
select acme.append_observation(
           p_principal   => 'assistant',
           p_scopes      => array['default'],
           p_scope       => 'default',
           p_body        => 'I''m vegetarian, by the way.',
           p_source_role => 'user',
           p_actor       => 'ana') as log_offset;
\c :su
update acme.observation set body = 'I eat fish.' where scope = 'default' and log_offset = 1;  -- PR110
\c :app
select acme.append_observation('carol', '{default}', 'default', 'Hello', 'user');  -- PR101
select acme.append_observation('assistant', '{default}', 'travel', 'Hello', 'user');  -- PR103
select acme.append_observation('assistant', '{default,travel}', 'travel', 'Hello', 'user');  -- PR131
select acme.append_observation('assistant', '{default}', 'default', 'Hello', 'human');  -- PR107
select acme.append_observation('assistant', '{default}', 'default', 'Hello', 'user', p_session_id => 7);  -- PR120

-- == <tenant>.append_observations
select * from acme.append_observations('assistant', '{default}', 'default', '[
    {"body": "I live in Lisbon, near Alfama.", "source_role": "user", "actor": "ana"},
    {"body": "Good to know! Any allergies I should keep in mind?", "source_role": "assistant"},
    {"body": "Peanuts. Please keep that private.", "source_role": "user", "actor": "ana",
     "audience": ["ana", "assistant"]},
    {"body": "And keep your answers short.", "source_role": "user", "actor": "ana"}]');
select * from acme.append_observations('assistant', '{default}', 'default', '[
    {"body": "Hello", "source_role": "user", "actor": "ana"},
    {"body": "Hi", "source_role": "user", "actor": "ben"}]');  -- PR101
select * from acme.append_observations('assistant', '{default}', 'default', '[]');

-- == <tenant>.log_watermark
select acme.log_watermark('assistant', '{default}', 'default');

-- == <tenant>.remember
select * from acme.remember(
    p_principal => 'assistant',
    p_scopes    => '{default}',
    p_scope     => 'default',
    p_body      => 'Ana is vegeterian.',
    p_evidence  => '{1}',
    p_purposes  => '{converse,personalize,act}',
    p_kind      => 'fact',
    p_about     => '{Ana}');
select * from acme.remember('assistant', '{default}', 'default', 'Ana lives in Lisbon (Alfama).',
                            '{2}', '{act,personalize}', p_kind => 'fact', p_about => '{Ana,Lisbon}');
select * from acme.remember('assistant', '{default}', 'default', 'Ana is allergic to peanuts.',
                            '{4}', '{act}', p_audience => 'ana', p_kind => 'fact');
select * from acme.remember('assistant', '{default}', 'default', 'Ana prefers short answers.',
                            '{5}', '{converse}');
select * from acme.remember('assistant', '{default}', 'default', '  ana is VEGETERIAN. ', '{1}', '{converse}');
select * from acme.remember('assistant', '{default}', 'default', 'Any allergies?', '{3}', '{converse}');
select * from acme.remember('assistant', '{default}', 'default', 'Ana likes fado.', '{}', '{converse}');
select * from acme.remember('assistant', '{default}', 'default', E' \n\t', '{1}', '{converse}');
select * from acme.remember('assistant', '{default}', 'default', 'Ana likes fado.', '{99}', '{converse}');  -- PR109
select * from acme.remember('assistant', '{default}', 'default', 'Ana likes fado.', '{1}', '{training}');  -- PR102

-- == <tenant>.read
\x on
select * from acme.read('assistant', '{default}', 1, 'converse');
\x off
select jsonb_pretty(to_jsonb(provenance)) from acme.read('assistant', '{default}', 1, 'converse');
select id from acme.read('assistant', '{default}', 4, 'act');  -- PR104
select id from acme.read('assistant', '{default}', 3, 'act');  -- PR104
select id from acme.read('assistant', '{default}', 1, 'chat');  -- PR102
select id from acme.read('assistant', '{default,travel}', 1, 'converse');  -- PR131
select id, body, audience, purposes from acme.read('ana', '{default}', 3, 'act');

-- == <tenant>.memory_count
select acme.memory_count('assistant', '{default}') as converse,
       acme.memory_count('assistant', '{default}', 'act') as act,
       acme.memory_count('ana', '{default}', 'act') as act_for_ana;

-- == <tenant>.derive
select acme.derive('assistant', '{default}', '{1,2}',
                   'Ana is a vegetarian in Lisbon: suggest meat-free places near Alfama.',
                   p_about => '{Ana}') as memory_id;
select origin, purposes, audience, confidence, (provenance).memories as sources
  from acme.read('assistant', '{default}', 5, 'personalize');
select acme.derive('ana', '{default}', '{1,3}', 'Ana eats vegetarian and never peanuts.',
                   p_kind => 'fact') as memory_id;
select audience, purposes from acme.read('ana', '{default}', 6, 'act');
select acme.derive('ana', '{default}', '{3,4}', 'Tell Ana briefly about peanut-free dishes.');  -- PR106
select acme.derive('assistant', '{default}', '{1,3}', 'Ana eats vegetarian and never peanuts.');  -- PR104

-- == <tenant>.remember_keys
select acme.remember_keys('assistant', '{default}', 1, '{"Ana eats no meat"}');
select acme.remember_keys('assistant', '{default}', 3, '{"Ana avoids peanuts"}');  -- PR104
select acme.remember_keys('assistant', '{default}', 1, '{"  "}');  -- PR107

-- == <tenant>.correct
select acme.correct('assistant', '{default}', 1, 1, 'Ana is vegetarian.',
                    p_reason => 'typo', p_evidence => '{1}') as revision;
select acme.correct('assistant', '{default}', 1, 1, 'Ana is a vegetarian.');  -- PR105
select m.body, m.revision, r.revision as old_revision, r.body as old_body, r.reason, r.changed_by, r.evidence
  from acme.read('assistant', '{default}', 1, 'converse') m,
       unnest(m.revisions) r;
select o.offset, o.text, o.corrections
  from acme.read('assistant', '{default}', 1, 'converse') m, unnest((m.provenance).observations) o;
select acme.correct('assistant', '{default}', 1, 2, 'Ana is vegan.', p_evidence => '{3}');  -- PR113
select acme.correct('assistant', '{default}', 1, 2, 'Ana is vegan.', p_evidence => '{99}');  -- PR109

-- == <tenant>.supersede
select acme.append_observation('assistant', '{default}', 'default',
                               'Update: I moved to Porto last month.', 'user',
                               p_actor => 'ana') as log_offset;
select acme.supersede('assistant', '{default}', 2, 1, 'Ana lives in Porto.', '{6}',
                      p_about => '{Ana,Porto}') as memory_id;
select id, body, revision, superseded_by, upper(valid) is not null as closed
  from acme.read('assistant', '{default}', 2, 'act', p_include_superseded => true);
select id, body, revision, (provenance).about
  from acme.read('assistant', '{default}', 7, 'act');
select id from acme.read('assistant', '{default}', 2, 'act');  -- PR104
select acme.supersede('assistant', '{default}', 2, 2, 'Ana lives in Braga.', '{6}');  -- PR108
select acme.correct('assistant', '{default}', 2, 2, 'Ana lived in Lisbon.');  -- PR108
select acme.supersede('assistant', '{default}', 7, 1, 'Ana lives in Braga.', '{}');  -- PR107

-- == <tenant>.forget
select acme.forget('assistant', '{default}', 4, 'the user asked', p_expected_revision => 1) as revision;
select id from acme.read('assistant', '{default}', 4, 'converse');  -- PR104
select acme.forget('assistant', '{default}', 4, 'the user asked');  -- PR104
select acme.forget('assistant', '{default}', 7, '  ');  -- PR107

-- == <tenant>.derive
select acme.add_scope('work', 'Ana''s job');
select acme.append_observation('assistant', '{work}', 'work', 'I work at a bakery in Graça.', 'user',
                               p_actor => 'ana') as log_offset;
select memory_id from acme.remember('assistant', '{work}', 'work', 'Ana works at a bakery.', '{1}', '{act}');
select acme.derive('assistant', '{default,work}', '{1,8}', 'Ana, a vegetarian, works at a bakery.');  -- PR106

-- == <tenant>.log_watermark
select acme.log_watermark('assistant', '{default}', 'default');

-- == A third conversation
select * from acme.append_observations('assistant', '{default}', 'default', '[
    {"body": "I''ve started cooking Japanese food at home.", "source_role": "user", "actor": "ana"},
    {"body": "Lovely! What would you like to make first?", "source_role": "assistant"},
    {"body": "Vegetarian ramen. And remind me to buy miso every Friday.", "source_role": "user", "actor": "ana"}]');

-- == <tenant>.remember_many
select * from acme.remember_many('assistant', '{default}', 'default', '[
    {"body": "Ana is learning to cook Japanese food.", "evidence": [7], "purposes": ["converse", "personalize"],
     "kind": "fact", "about": ["Ana"]},
    {"title": "Friday miso", "body": "Remind Ana to buy miso every Friday.", "evidence": [9],
     "purposes": ["act", "converse"], "kind": "decision", "about": ["Ana"]},
    {"body": "Ana wants to make vegetarian ramen first. Which broth should I suggest?", "evidence": [9],
     "purposes": ["converse", "personalize"]},
    {"body": "What would she like to make first?", "evidence": [8], "purposes": ["converse"]},
    {"body": "Ana is learning to cook  japanese food.", "evidence": [7], "purposes": ["converse", "personalize"]}]');
select * from acme.remember_many('assistant', '{default}', 'default', '[
    {"body": "Ana likes fado.", "evidence": [1], "purposes": ["converse"]},
    {"body": "Ana likes Porto.", "evidence": [1], "purposes": ["chat"]}]');  -- PR102
select * from acme.remember_many('assistant', '{default}', 'default', '[
    {"body": "Ana likes fado.", "evidence": [1], "purposes": ["converse"]},
    {"body": "Ana likes Porto.", "evidence": [99], "purposes": ["converse"]}]');  -- PR109
select * from acme.remember_many('assistant', '{default}', 'default', '{"body": "Ana likes fado."}');  -- PR107

-- == A third conversation
select acme.derive('assistant', '{default}', '{1,9}',
                   'Ana is a vegetarian learning Japanese cooking: suggest vegetarian ramen and miso soup.',
                   p_about => '{Ana}') as memory_id;

-- == <tenant>.term_stats_stale
\c :worker
select acme.term_stats_stale();

-- == <tenant>.refresh_term_stats
select * from acme.refresh_term_stats();
select acme.term_stats_stale();

-- == <tenant>.embedding_status
\c :app
select * from acme.embedding_status();

-- == <tenant>.claim_embedding_jobs
\c :worker
\x on
select * from acme.claim_embedding_jobs('psql-demo', 2);
\x off
select * from acme.claim_embedding_jobs('', 10);  -- PR107
select * from acme.claim_embedding_jobs('psql-demo', 0);  -- PR150

-- == <tenant>.complete_embedding_jobs
select acme.complete_embedding_jobs('psql-demo', '{3}', '{1}', array[array_fill(0.05, array[384])::halfvec],
                                    'all-MiniLM-L6-v2', 1) as stored;
select acme.complete_embedding_jobs('psql-demo', '{3,5}', '{1}', '{"[1,2,3]"}', 'all-MiniLM-L6-v2', 2);  -- PR107
select acme.complete_embedding_jobs('psql-demo', '{3}', '{1}', '{"[1,2,3]"}', 'all-MiniLM-L6-v2', 2);  -- PR154

-- == <tenant>.release_embedding_jobs
select acme.release_embedding_jobs('psql-demo', '{3,5}') as released;

-- == <tenant>.listen_channel
select acme.listen_channel('embed') ~ '^pgrecall_[0-9a-f]{32}$' as secret_name;
select acme.listen_channel('mail');  -- PR107

-- == <tenant>.freshness
\c :app
select * from acme.freshness('assistant', '{default}', 'default');

-- == <tenant>.wait_for
select acme.wait_for('assistant', '{default}', 'default', 9, p_timeout_ms => 200) as embedded,
       acme.wait_for('assistant', '{default}', 'default', 9, 'log', 0) as logged;
\! pgrecall worker --tenant acme --once
select * from acme.freshness('assistant', '{default}', 'default');
select acme.wait_for('assistant', '{default}', 'default', 9) as embedded;
select * from acme.embedding_status();
select acme.wait_for('assistant', '{default}', 'default', 9, 'index');  -- PR107
select acme.wait_for('assistant', '{default}', 'default', 0);  -- PR150
select * from acme.freshness('assistant', '{default}', 'work');  -- PR103

-- == <tenant>.rebuild_embeddings
\c :admin
select acme.rebuild_embeddings() as queued;

-- == <tenant>.set_embedding_version
select acme.set_embedding_version('all-MiniLM-L6-v2', 1) as queued;
select * from acme.embedding_status();
select acme.set_embedding_version('all-MiniLM-L6-v2', 2) as queued;
select * from acme.embedding_status();
select acme.set_embedding_version('all-MiniLM-L6-v2', 3);  -- PR107
select acme.set_embedding_version('', 2);  -- PR107

-- == As of a past moment
\c :app
select rank, memory_id, body, round(score::numeric, 4) as score, lexical_rank, dense_rank,
       round(bm25::numeric, 3) as bm25
  from acme.recall('assistant', '{default}', 'What should I cook for Ana?');
select (meta).mode, (meta).terms, (meta).dropped_terms, (meta).term_stats, (meta).recruited_by,
       (meta).recruited_by_rare_terms, (meta).entities, (meta).watermarks
  from acme.recall_answer('assistant', '{default}', 'What should I cook for Ana?');
select (meta).dense_available, (meta).dense_reason, (meta).lexical_count, (meta).dense_count,
       (meta).fused_count, (meta).fact_count, (meta).returned, (meta).missing_embeddings,
       (meta).embedding_queue
  from acme.recall_answer('assistant', '{default}', 'What should I cook for Ana?');
select rank, memory_id, body, lexical_rank
  from acme.recall('assistant', '{default}', 'vegetarian ramen for Ana');
select (meta).terms, (meta).dropped_terms
  from acme.recall_answer('assistant', '{default}', 'vegetarian ramen for Ana');
select rank, memory_id, body from acme.recall('assistant', '{default}', 'Where does Ana live?', 'personalize');
select rank, memory_id, body from acme.recall('assistant', '{default}', 'Where does Ana live?', 'personalize',
                                              p_include_superseded => true);
select cardinality(items) as rows, (meta).dense_reason
  from acme.recall_answer('assistant', '{default}', 'What should I cook for Ana?', p_mode => 'dense');
\! python -c 'exec("import pgrecall\n\nmem = pgrecall.connect(tenant=\"acme\", principal=\"assistant\", scopes=[\"default\"])\nanswer = mem.recall(\"What should I cook for Ana?\")\nfor i in answer.items:\n    print(i.rank, i.memory_id, i.body, i.lexical_rank, i.dense_rank,\n          None if i.cosine is None else round(i.cosine, 2))\nprint({k: getattr(answer.meta, k) for k in (\"mode\", \"dense_available\", \"dense_method\", \"lexical_count\",\n                                            \"dense_count\", \"fused_count\", \"missing_embeddings\")})")'
select count(*) from acme.recall('assistant', '{default}', 'ramen', p_limit => 0);  -- PR150
select count(*) from acme.recall('assistant', '{default}', 'ramen', p_mode => 'semantic');  -- PR107
select count(*) from acme.recall('assistant', '{default}', 'ramen', 'chat');  -- PR102
select count(*) from acme.recall('assistant', '{default}', 'ramen', p_query_embedding => '{0.1,0.2,0.3}');  -- PR154
select count(*) from acme.recall('assistant', '{default}', null);  -- PR107
select acme.forget('assistant', '{default}', 9, 'Ana asked me not to keep track of her hobbies') as revision;
select rank, memory_id, body, lexical_rank from acme.recall('assistant', '{default}', 'ramen');
select id, (provenance).hidden_sources from acme.read('assistant', '{default}', 12, 'converse');

-- == <tenant>.recall_answer
select cardinality(items) as items, (meta).lexical_count, (meta).fused_count, (meta).returned
  from acme.recall_answer('assistant', '{default}', 'ramen');
select i.rank, i.memory_id, i.body, i.lexical_rank
  from acme.recall_answer('assistant', '{default}', 'ramen') r, unnest(r.items) i;

-- == Entities, facts and evidence
select acme.create_session('assistant', '{default}', 'default') as session_id;
select peer from acme.add_session_peers('assistant', '{default}', 1, '["ana", "assistant"]');
select * from acme.append_observations('assistant', '{default}', 'default', '[
    {"body": "From 1 to 14 December 2036 I''ll live in Tokyo, for a cooking course.", "source_role": "user", "actor": "ana",
     "session_id": 1},
    {"body": "You must love Japanese food!", "source_role": "assistant", "session_id": 1},
    {"body": "I do — miso above all. My friend Kenji teaches the course at Tsukiji Kitchen.", "source_role": "user",
     "actor": "ana", "session_id": 1},
    {"body": "Tsukiji Kitchen is in Tokyo, so you can walk there.", "source_role": "assistant", "session_id": 1},
    {"body": "Yes. Kenji Sato speaks Portuguese, by the way.", "source_role": "user", "actor": "ana", "session_id": 1}]');

-- == <tenant>.predicates
select * from acme.predicates();

-- == <tenant>.assert_fact
select * from acme.assert_fact(
    p_principal => 'assistant',
    p_scopes    => '{default}',
    p_scope     => 'default',
    p_subject   => 'Ana',
    p_predicate => 'lives_in',
    p_object    => 'Lisbon',
    p_evidence  => '[{"offset": 2, "quote": "I live in Lisbon"}]',
    p_audience  => 'assistant');
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'lives_in', 'Porto',
                               '[{"offset": 6, "quote": "I moved to Porto"}]', p_audience => 'assistant');
select now() as before_tokyo \gset
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'lives_in', 'Tokyo',
                               '[{"offset": 10, "quote": "From 1 to 14 December 2036 I''ll live in Tokyo"}]',
                               p_valid_from => '2036-12-01', p_valid_to => '2036-12-15', p_audience => 'assistant');
\c :su
select f.id, o.name as object, f.valid, upper_inf(f.known) as current, f.closed_by, f.split_from, f.split_by
  from acme.fact f join acme.entity o on o.id = f.object_id order by f.id;
\c :app
select * from acme.assert_fact('assistant', '{default}', 'default', 'ana', 'lives_in', 'tokyo',
                               '[{"offset": 10, "quote": "I''ll live in Tokyo"}]',
                               p_valid_from => '2036-12-01', p_valid_to => '2036-12-15', p_audience => 'assistant');
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'likes', 'Japanese food',
                               '[{"offset": 11, "quote": "You must love Japanese food"}]');  -- PR113
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'moved_to', 'Porto',
                               '[{"offset": 6, "quote": "I moved to Porto"}]');  -- PR111
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'lives_in', 'Porto',
                               '[{"offset": 6, "quote": "I live in Porto"}]');  -- PR112
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'likes', 'miso',
                               '[{"offset": 12, "start": 7, "end": 21, "quote": "miso above all"}]');  -- PR112
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'likes', 'miso', '[]');  -- PR112
select * from acme.assert_fact('assistant', '{default}', 'default', 'Ana', 'knows', 'ana',
                               '[{"offset": 12, "quote": "I do"}]', p_audience => 'assistant');  -- PR107

-- == <tenant>.assert_facts
select * from acme.assert_facts('assistant', '{default}', 'default', '[
    {"subject": "Ana", "predicate": "likes", "object": "Japanese food",
     "evidence": [{"offset": 11, "quote": "You must love Japanese food"}, {"offset": 12, "quote": "I do"}], "audience": "assistant"},
    {"subject": "Ana", "predicate": "likes", "object": "miso",
     "evidence": [{"offset": 12, "start": 9, "end": 23, "quote": "miso above all"}], "audience": "assistant"},
    {"subject": "Ana", "predicate": "friend_of", "object": "Kenji",
     "evidence": [{"offset": 12, "quote": "My friend Kenji"}], "object_type": "person", "audience": "assistant"},
    {"subject": "Kenji", "predicate": "works_at", "object": "Tsukiji Kitchen",
     "evidence": [{"offset": 12, "quote": "Kenji teaches the course at Tsukiji Kitchen"}],
     "statement": "Kenji teaches the cooking course at Tsukiji Kitchen", "audience": "assistant"},
    {"subject": "Tsukiji Kitchen", "predicate": "located_in", "object": "Tokyo",
     "evidence": [{"offset": 13, "quote": "Tsukiji Kitchen is in Tokyo"}], "audience": "assistant"},
    {"subject": "Kenji Sato", "predicate": "speaks", "object": "Portuguese",
     "evidence": [{"offset": 14, "quote": "Kenji Sato speaks Portuguese"}], "audience": "assistant"},
    {"subject": "Ana", "predicate": "allergic_to", "object": "peanuts",
     "evidence": [{"offset": 4, "quote": "Peanuts"}], "audience": "ana", "purposes": ["act"]}]');
select * from acme.assert_facts('assistant', '{default}', 'default', '[
    {"subject": "Ana", "predicate": "speaks", "object": "Portuguese", "evidence": [{"offset": 14, "quote": "Yes."}], "audience": "assistant"},
    {"subject": "Ana", "predicate": "speaks", "object": "Japanese", "evidence": [{"offset": 11, "quote": "Japanese"}], "audience": "assistant"}]');  -- PR113
select * from acme.assert_facts('assistant', '{default}', 'default', '[
    {"subject": "Ana", "predicate": "likes", "object": "ramen", "evidence": [{"offset": 9, "quote": "Vegetarian ramen"}], "audience": "assistant"},
    {"subject": "Ana", "predicate": "likes", "objekt": "tofu", "evidence": [{"offset": 9, "quote": "Vegetarian ramen"}], "audience": "assistant"}]');  -- PR107
select count(*) from acme.facts_as_of('assistant', '{default}', 'Ana', 'speaks');

-- == <tenant>.facts_as_of
select fact_id, predicate, object, valid, salience from acme.facts_as_of('assistant', '{default}', 'Ana');
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in', p_valid_at => '2036-12-05');
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in', p_valid_at => '2037-01-01');
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in',
                                                 p_known_at => :'before_tokyo');
select fact_id, object, statement from acme.facts_as_of('assistant', '{default}', 'Ana', 'allergic_to', p_purpose => 'act');
select fact_id, object, statement from acme.facts_as_of('ana', '{default}', 'Ana', 'allergic_to', p_purpose => 'act');
select fact_id, jsonb_pretty(to_jsonb(evidence)) from acme.facts_as_of('assistant', '{default}', 'Ana', 'likes') where object = 'Japanese food';
select * from acme.facts_as_of('assistant', '{default}', 'Kenji', 'teaches');  -- PR111
select * from acme.facts_as_of('assistant', '{default}', 'Yuki');  -- PR114

-- == <tenant>.resolve_citation
select * from acme.resolve_citation('assistant', '{default}', 8);
select * from acme.resolve_citation('assistant', '{default}', 99);  -- PR115
select * from acme.resolve_citation('assistant', '{default}', 13);  -- PR115

-- == <tenant>.neighbourhood
select depth, fact_id, subject, predicate, object from acme.neighbourhood('assistant', '{default}', '{Kenji}');
select depth, fact_id, subject, predicate, object
  from acme.neighbourhood('assistant', '{default}', '{Ana}', 3, p_valid_at => '2036-12-05');
select * from acme.neighbourhood('assistant', '{default}', '{Ana}', 4);  -- PR150
select * from acme.neighbourhood('assistant', '{default}', '{Ana,Yuki}');  -- PR114

-- == <tenant>.retract_fact
select now() as before_retraction \gset
select * from acme.retract_fact('assistant', '{default}', 11, 'my guess: Ana did not say where the school is');
select fact_id, object from acme.facts_as_of('assistant', '{default}', 'Tsukiji Kitchen');
select fact_id, object from acme.facts_as_of('assistant', '{default}', 'Tsukiji Kitchen', p_known_at => :'before_retraction');
select * from acme.retract_fact('assistant', '{default}', 11, 'again');  -- PR108
select * from acme.retract_fact('assistant', '{default}', 13, 'not mine to retract');  -- PR115
select * from acme.retract_fact('assistant', '{default}', 10, ' ');  -- PR107

-- == <tenant>.add_entity_alias
select * from acme.add_entity_alias('assistant', '{default}', 'default', 'Tsukiji Kitchen', 'the cooking school');
select depth, fact_id, subject, predicate, object from acme.neighbourhood('assistant', '{default}', '{The Cooking School}', 1);
select * from acme.add_entity_alias('assistant', '{default}', 'default', 'Tsukiji Kitchen', 'Tokyo');  -- PR107
select * from acme.add_entity_alias('assistant', '{default}', 'default', 'Yuki', 'Yuki-chan');  -- PR114

-- == <tenant>.merge_entities
\c :admin
select * from acme.merge_entities('assistant', '{default}', 'default', 'Kenji', 'Kenji Sato');
\c :app
select fact_id, subject, predicate, object from acme.facts_as_of('assistant', '{default}', 'Kenji Sato');
\c :admin
select * from acme.merge_entities('assistant', '{default}', 'default', 'Kenji', 'kenji sato');  -- PR107
select * from acme.merge_entities('assistant', '{default}', 'default', 'Kenji', 'Yuki');  -- PR114

-- == <tenant>.entities
\c :app
select * from acme.entities('assistant', '{default}');
select entity_id, name, aliases, facts from acme.entities('assistant', '{default}', 'kenji sato');

-- == Facts in recall
select rank, item, memory_id, fact_id, fact_rank, body, round(score::numeric, 4) as score
  from acme.recall('assistant', '{default}', 'Where does Ana live?', 'personalize', p_limit => 6);
select (meta).entities, (meta).fact_count, (meta).fused_count, (meta).returned
  from acme.recall_answer('assistant', '{default}', 'Where does Ana live?', 'personalize', p_limit => 6);
select rank, fact_id, jsonb_pretty(to_jsonb(fact_provenance)) as fact_provenance
  from acme.recall('assistant', '{default}', 'Where is the cooking school?') where item = 'fact';

-- == <tenant>.pin
select acme.pin('assistant', '{default}', 10) as pinned;
select acme.pin('assistant', '{default}', 2);  -- PR108
select acme.pin('assistant', '{default}', 3);  -- PR104

-- == <tenant>.session_bundle
select p.id, p.kind, p.title, p.body from acme.session_bundle('assistant', '{default}', p_recent => 3) b, unnest(b.pinned) p;
select r.id, r.kind, r.body, (r.provenance).hidden_sources as hidden, r.updated_at is not null as dated
  from acme.session_bundle('assistant', '{default}', p_recent => 3) b, unnest(b.recent) r;
select e.* from acme.session_bundle('assistant', '{default}', p_entities => 3) b, unnest(b.entities) e;
select o.offset, o.withheld, o.corrections, o.text
  from acme.session_bundle('assistant', '{default}', p_recent => 3) b, unnest(b.recent) r,
       unnest((r.provenance).observations) o
 where r.id = 1;
select acme.session_bundle('assistant', '{default}', p_recent => 500);  -- PR150

-- == <tenant>.erase
\c :admin
\x on
select * from acme.erase('dpo', '{"observation": {"scope": "default", "offset": 6}}',
                         'Ana asked to delete her message about moving', 'ana');
\x off
\c :app
select id, body, superseded_by, upper(valid) is null as current from acme.read('assistant', '{default}', 2, 'act');
select acme.log_watermark('assistant', '{default}', 'default');
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in');
select fact_id, object, valid from acme.facts_as_of('assistant', '{default}', 'Ana', 'lives_in', p_valid_at => '2037-01-01');
\c :admin
select acme.erase('dpo', '{"scope": "default"}', '  ');  -- PR107
select acme.erase(' ', '{"scope": "default"}', 'account closed');  -- PR107
select acme.erase('dpo', '{"peer": "ana", "scope": "default"}', 'account closed');  -- PR153
select acme.erase('dpo', '{"expired_before": "2027-01-01"}', 'clean up');  -- PR153
select acme.erase('dpo', '{"peer": "carol"}', 'account closed');  -- PR101
select acme.erase('dpo', '{"observation": {"scope": "default", "offset": 6}}', 'again');  -- PR109
select acme.erase('dpo', '{"scope": "travel"}', 'trip cancelled');  -- PR131
select acme.erase('', '{"scope": "default"}', 'who?');  -- PR107
\c :app
select acme.erase('assistant', '{"scope": "default"}', 'the assistant tidies up');  -- 42501
select acme.append_observation('assistant', '{default}', 'default',
                               'Make that Thursdays: the market is closed on Fridays.', 'user',
                               p_actor => 'ana') as log_offset;
select acme.correct('assistant', '{default}', 10, 1, 'Remind Ana to buy miso every Thursday.',
                    p_title => 'Thursday miso', p_reason => 'Ana moved it', p_evidence => '{15}') as revision;
\c :admin
select rows_erased -> 'memories_reverted' as reverted, rows_erased -> 'memory_correction_evidence' as evidence,
       rows_erased -> 'memory_revision' as revisions, rows_erased -> 'memory_link' as links,
       (select count(*) from jsonb_each(residual) r where r.value <> '0') as nonzero_residuals
  from acme.erase('dpo', '{"observation": {"scope": "default", "offset": 15}}', 'Ana asked to delete that message');
\c :app
select id, title, body, revision, revisions, (provenance).offsets
  from acme.read('assistant', '{default}', 10, 'act');
select acme.add_peer('carol', 'human', '{"email": "carol@example.org"}', p_data_subject_id => 'u-7') as carol;
select session_id, opened from acme.log_turn('assistant', '{default}', 'default', 'support:carol', 'carol',
                                             'Hi, my order never arrived', p_data_subject_id => 'u-7');
select * from acme.add_entity_alias('assistant', '{default}', 'default', 'Kenji', 'Kenji-kun',
                                    p_data_subject_id => 'u-7');

-- == <tenant>.export
\c :admin
select kind, row_key, coalesce(record ->> 'body', record ->> 'name', record ->> 'alias') as words
  from acme.export('{"data_subject": "u-7"}');

-- == <tenant>.erase
select observations_erased, rows_erased -> 'peer' as peers, rows_erased -> 'session' as sessions,
       rows_erased -> 'entity_alias' as aliases,
       (select count(*) from jsonb_each(residual) r where r.value <> '0') as nonzero_residuals
  from acme.erase('dpo@example.org', '{"data_subject": "u-7"}', 'erasure request #81');
\c :app
select peer, kind from acme.session_peers('assistant', '{default}', 2);
select session_id, opened from acme.log_turn('assistant', '{default}', 'default', 'support:carol', 'assistant',
                                             'Hello?');

-- == <tenant>.export
\c :admin
select count(*) from acme.export('{"data_subject": "u-7"}');

-- == <tenant>.expire
\c :app
select acme.append_observation('assistant', '{work}', 'work', 'Can you cover my Saturday shift?', 'user',
                               p_actor => 'ana', p_retention_until => now() - interval '1 day') as log_offset;
select memory_id, status from acme.remember('assistant', '{work}', 'work', 'Ana asked for cover on Saturday.', '{2}', '{act}');
\c :admin
select * from acme.expire();
select acme.set_setting('expiry_gate', 'true');
select id, selector, reason, requested_by, actor, actor_role, observations_erased, rows_erased, residual
  from acme.expire('nightly cron');

-- == <tenant>.erasure_requests
\c :su
analyze;
\c :admin
\x on
select * from acme.erase('dpo', '{"peer": "ana"}', 'Ana closed her account');
\x off
\c :app
select count(*) as recalled from acme.recall('assistant', '{default,work}', 'Ana');
select acme.add_peer('ana') as new_peer_id;
select entity_id, name, facts from acme.entities('assistant', '{default}');
select log_offset, quote, actor, source_role from acme.resolve_citation('assistant', '{default}', 11);
\c :admin
select id, selector, reason, actor, observations_erased,
          (select count(*) from jsonb_each(residual) r where r.value <> '0') as nonzero_residuals,
          statistics_refreshed_at is not null as statistics_refreshed
     from acme.erasure_requests();

-- == <tenant>.refresh_erasure_statistics
\c :su
select tablename, attname from pg_stats s where schemaname = 'acme' and s::text like '%Alfama%' order by 1, 2;
\c :admin
select id, statistics_refreshed_at is not null as refreshed, statistics_stale, tables_touched
  from acme.refresh_erasure_statistics(5);
\c :su
select tablename, attname from pg_stats s where schemaname = 'acme' and s::text like '%Alfama%' order by 1, 2;
\c :admin
select acme.refresh_erasure_statistics(99);  -- PR195

-- == <tenant>.rewrite_erased
select id, rewritten_at is not null as rewritten, rewritten_tables = tables_touched as every_table
  from acme.rewrite_erased(5, array['memory']);
select id, rewritten_at is not null as rewritten, rewritten_tables = tables_touched as every_table
  from acme.rewrite_erased(5);
select acme.rewrite_erased(5, array['setting']);  -- PR107

-- == pgrecall.flush_erasure
\c :su
select flushed_at is not null as flushed, wal_segment ~ '^[0-9A-F]{24}$' as segment,
       array(select jsonb_object_keys(still_held_by) order by 1) as still_held_by
  from pgrecall.flush_erasure('acme', 5);
select * from pgrecall.flush_erasure('acme', 4);  -- PR014

-- == <tenant>.table_statistics
\c :admin
select table_name from acme.table_statistics() where table_name like 'memory%' order by 1;
