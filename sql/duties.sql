-- The duty matrix: which of a tenant's login roles may EXECUTE each public
-- function. This file is the only place grants come from: every install
-- loads it into pgrecall.function_duty and pgrecall.upgrade_tenant grants
-- EXECUTE from it (and revokes everything else). A public function missing
-- here stops the install with PR008, and tests/test_duties.py fails when the
-- catalog's grants differ from this table.
--
-- The duties:
--   app     the agent: the log, the seven memory operations, recall and
--           search, facts, sessions and messages, freshness, reading settings
--   worker  background processes (pgrecall worker, the deriver): claim and
--           complete embedding, passage and derivation jobs, refresh
--           statistics. A worker sees the text it must embed or derive from,
--           and nothing else; the app cannot claim work.
--   admin   the back office: erasure and expiry, re-embedding, embedding
--           versions, settings, entity merges
--
-- Helpers (a leading underscore) and trigger functions are callable by the
-- owner only and are not listed.

delete from pgrecall.function_duty;

insert into pgrecall.function_duty (function_name, duties, why) values
    -- setup
    ('add_scope',                        '{app,admin}',        'a scope exists before anything names it'),
    ('add_peer',                         '{app,admin}',        'an app registers the people and agents it serves'),
    ('scopes',                           '{app,admin}',        'a client lists the scopes it may authorise'),
    ('schema_info',                      '{app,worker,admin}', 'every client checks the schema version at connect'),
    ('settings',                         '{app,worker,admin}', 'reading the tenant''s settings'),
    ('set_setting',                      '{admin}',            'changing a setting changes every principal''s results'),
    ('set_scope_passage_embedding',      '{admin}',            'decides what the embedding worker spends its time on for a whole scope'),
    -- the log
    ('append_observation',               '{app}',              'the agent records what was said'),
    ('append_observations',              '{app}',              'the same, in batches'),
    ('log_watermark',                    '{app}',              'freshness of the log'),
    -- memories: the seven operations
    ('remember',                         '{app}',              'an operation of the agent'),
    ('remember_said',                    '{app}',              'an operation of the agent: the words and the memory in one call'),
    ('remember_many',                    '{app}',              'an operation of the agent, in batches'),
    ('remember_keys',                    '{app}',              'the agent adds the statements a memory is also found under'),
    ('read',                             '{app}',              'an operation of the agent'),
    ('store_put',                        '{app}',              'a key-value store on memories (LangGraph): a put is a memory or its revision'),
    ('store_get',                        '{app}',              'the store: one item, eligibility applied'),
    ('store_delete',                     '{app}',              'the store: a delete forgets the item''s memory'),
    ('store_search',                     '{app}',              'the store: items by prefix and filter, or by recall'),
    ('store_list_namespaces',            '{app}',              'the store: the namespaces of the items the principal may use'),
    ('store_restore',                    '{app}',              'the store: an import makes an export''s item again, without new notes'),
    ('agent_session_open',               '{app}',              'an Agents SDK session: the session of that id, made on first use'),
    ('agent_session_add',                '{app}',              'an Agents SDK session: items appended as turns'),
    ('agent_session_items',              '{app}',              'an Agents SDK session: its items, eligibility and retractions applied'),
    ('agent_session_pop',                '{app}',              'an Agents SDK session: the last item retracted by an appended turn'),
    ('agent_session_clear',              '{app}',              'an Agents SDK session: every item retracted by an appended turn'),
    ('memory_count',                     '{app}',              'how many memories the principal may see, eligibility applied'),
    ('recall',                           '{app}',              'an operation of the agent'),
    ('recall_answer',                    '{app}',              'recall with its metadata, in one call'),
    ('derive',                           '{app}',              'an operation of the agent'),
    ('correct',                          '{app}',              'an operation of the agent'),
    ('supersede',                        '{app}',              'an operation of the agent'),
    ('forget',                           '{app}',              'an operation of the agent: invalidation, not erasure'),
    ('pin',                              '{app}',              'pinned notes start every session bundle'),
    ('session_bundle',                   '{app}',              'what an agent starts a session with'),
    -- duplicates: proposed by the database, decided by a person
    ('duplicate_proposals',              '{app}',              'pairs the principal may see, for a person to review'),
    ('duplicate_proposals_answer',       '{app}',              'the same, with why nothing is proposed, in one call'),
    ('decide_duplicate',                 '{app}',              'a person''s decision: keep both, supersede or forget (through those operations)'),
    -- freshness
    ('freshness',                        '{app}',              'is recall current to what I wrote?'),
    ('wait_for',                         '{app}',              'wait until it is'),
    ('embedding_status',                 '{app,worker,admin}', 'queue and index counts, no content'),
    -- the graph
    ('entities',                         '{app}',              'the entities the principal may see'),
    ('add_entity_alias',                 '{app}',              'the agent learns another name for an entity'),
    ('assert_fact',                      '{app}',              'the agent states a fact with its quote'),
    ('assert_facts',                     '{app}',              'the same, in batches'),
    ('retract_fact',                     '{app}',              'the agent withdraws a fact it asserted'),
    ('resolve_citation',                 '{app}',              'a fact''s quotes back to the log'),
    ('facts_as_of',                      '{app}',              'bitemporal lookup'),
    ('predicates',                       '{app}',              'the ontology'),
    ('neighbourhood',                    '{app}',              'traversal around entities'),
    ('merge_entities',                   '{admin}',            'rewrites the graph for every principal'),
    -- peers, sessions, messages, representations
    ('create_session',                   '{app}',              'sessions are the agent''s'),
    ('add_session_peers',                '{app}',              'sessions are the agent''s'),
    ('remove_session_peers',             '{app}',              'sessions are the agent''s'),
    ('session_peers',                    '{app}',              'sessions are the agent''s'),
    ('session_peer_config',              '{app}',              'sessions are the agent''s'),
    ('set_session_peer_config',          '{app}',              'sessions are the agent''s'),
    ('peer_config',                      '{app}',              'a peer''s own observation flag'),
    ('set_peer_config',                  '{app}',              'a peer may stop being observed'),
    ('add_messages',                     '{app}',              'messages are observations'),
    ('log_turn',                         '{app}',              'the turn log for bots without sessions'),
    ('search_messages',                  '{app}',              'search over what was said'),
    ('search_messages_answer',           '{app}',              'message search with its metadata, in one call'),
    ('representation',                   '{app}',              'what the principal may see about a peer'),
    ('get_representation',               '{app}',              'a working representation in a session'),
    ('queue_status',                     '{app,worker}',       'is a representation current? counts only'),
    ('work_queue_status',                '{app,worker,admin}', 'task counts by type and status'),
    -- the worker: queued work, leased
    ('claim_embedding_jobs',             '{worker}',           'returns memory text of any audience: only the worker embeds it'),
    ('complete_embedding_jobs',          '{worker}',           'stores vectors that recall trusts'),
    ('release_embedding_jobs',           '{worker}',           'gives a lease back'),
    ('claim_passage_embedding_jobs',     '{worker}',           'returns log text of any scope'),
    ('complete_passage_embedding_jobs',  '{worker}',           'stores vectors that message search trusts'),
    ('release_passage_embedding_jobs',   '{worker}',           'gives a lease back'),
    ('claim_tasks',                      '{worker}',           'returns message text of any session'),
    ('task_remember',                    '{worker}',           'writes a leased task''s memories, checked against its messages'),
    ('task_assert_fact',                 '{worker}',           'writes a leased task''s fact, checked against its message'),
    ('complete_task',                    '{worker}',           'completes a leased task'),
    ('fail_task',                        '{worker}',           'gives a leased task back with the error'),
    ('listen_channel',                   '{worker}',           'the secret channel a worker is woken on: whoever knows it can listen and notify'),
    ('refresh_term_stats',               '{worker,admin}',     'recomputes the lexical statistics'),
    ('term_stats_stale',                 '{worker,admin}',     'whether they need it'),
    -- the back office
    ('erase',                            '{admin}',            'deletes a data subject, peer, scope or observation for every principal'),
    ('expire',                           '{admin}',            'erases what passed its retention date'),
    ('erasure_requests',                 '{admin}',            'the receipts name data subjects'),
    ('export',                           '{admin}',            'hands over everything an erasure of the subject would remove, for every principal'),
    ('refresh_erasure_statistics',       '{admin}',            'ANALYZE after an erasure, so pg_stats forgets the erased values'),
    ('rewrite_erased',                   '{admin}',            'rewrites the tables an erasure touched (exclusive locks while each is copied)'),
    ('table_statistics',                 '{admin}',            'row counts and activity of the tenant''s tables, for its operators only'),
    ('rebuild_embeddings',               '{admin}',            'queues every memory''s text for the worker'),
    ('set_embedding_version',            '{admin}',            'switches the model: dense recall is dark until re-embedded');
