-- The worked example behind docs/reference.md, as one psql script.
--
-- Run it against a database in which tenant acme was just created and
-- nothing else happened yet, e.g. with a throwaway embedded server:
--
--   export PGRECALL_HOME=$(mktemp -d)
--   pgrecall tenant create acme
--   SU=$(pgrecall server uri)
--   APP="postgresql://pgrecall_acme_app@/pgrecall?host=$PGRECALL_HOME/pgdata&port=5432"
--   psql -X -v su="$SU" -v app="$APP" -f docs/examples.sql "$SU"
--
-- `su` is a superuser, for the pgrecall.* control plane and for the examples
-- that tamper with tables (inside rolled-back transactions, or refused);
-- `app` is the tenant's application role, which may only call acme's public
-- functions (check host and port against `pgrecall server uri`). Errors
-- are expected along the way: each "-- ==" section is one example of
-- docs/reference.md, and the ids used in later sections (memories 1 to 8,
-- offsets 1 to 6 in scope default) hold only when the sections run in this
-- order on a new tenant.

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

-- == append_observation
select acme.append_observation(
           p_principal   => 'assistant',
           p_scopes      => array['default'],
           p_scope       => 'default',
           p_body        => 'I''m vegetarian, by the way.',
           p_source_role => 'user',
           p_actor       => 'ana',
           p_session_id  => 1) as log_offset;

-- == append_observation_more
select acme.append_observation('assistant', '{default}', 'default', body, role,
                               p_actor => actor, p_session_id => 1) as log_offset, body
  from (values ('I live in Lisbon, near Alfama.', 'user', 'ana'),
               ('Good to know! Any allergies I should keep in mind?', 'assistant', 'assistant'),
               ('Peanuts. Please keep that private.', 'user', 'ana'),
               ('And keep your answers short.', 'user', 'ana')) v(body, role, actor);

-- == append_observation_errors
select acme.append_observation('carol', '{default}', 'default', 'Hello', 'user');
select acme.append_observation('assistant', '{default}', 'travel', 'Hello', 'user');
select acme.append_observation('assistant', '{default,travel}', 'travel', 'Hello', 'user');
select acme.append_observation('assistant', '{default}', 'default', 'Hello', 'human');

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
select acme.append_observation('assistant', '{default}', 'default',
                               'Update: I moved to Porto last month.', 'user',
                               p_actor => 'ana', p_session_id => 2) as log_offset;
select acme.supersede('assistant', '{default}', 2, 1, 'Ana lives in Porto.', '{6}') as memory_id;

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

------------------------------------------------------------------------------
-- Append-only history, as the superuser
------------------------------------------------------------------------------
\c :su

-- == append_only
update acme.observation set body = 'I eat fish.' where scope = 'default' and log_offset = 1;
