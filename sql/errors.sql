-- The one list of pgrecall's error codes. Every install loads it into
-- pgrecall.error_code; tests/test_error_codes.py fails when a SQL source
-- raises a code that is not here, when python/pgrecall/errors.py has no class
-- for a row (or a class for no row, or a class that is not its `builtin`), or
-- when the table in docs/reference.md says otherwise.
--
-- Class PR is pgrecall's: PR0xx the control plane, PR1xx the tenant
-- functions. A code that `refines` another is a precise case of it (PR150 is
-- an invalid argument that is out of range): the Python class is a subclass,
-- so `except InvalidArgument` still catches it, while a SQL client matching
-- on the SQLSTATE sees the precise code. A caller acts differently on each:
-- a limit out of range is clamped, a text too long is split, a time outside
-- years 1-9999 is a bug in the caller's clock or parser, a malformed erasure
-- selector is a form to fix, and a vector of the wrong size means another
-- embedding model.
--
-- builtin: the Python built-in exception the class also derives from, so a
-- caller may catch ValueError (bad input), LookupError (not found),
-- PermissionError (not allowed) or RuntimeError (a conflict with a
-- concurrent writer: pgrecall.errors.ConcurrencyError) without importing ours.

delete from pgrecall.error_code;

insert into pgrecall.error_code (code, name, meaning, python_class, builtin, refines) values
    -- the control plane
    ('PR001', 'invalid_tenant_name',   'invalid tenant name',                                    'InvalidTenantName',     'ValueError',      null),
    ('PR002', 'tenant_exists',         'tenant already exists (or its schema or one of its roles)', 'TenantExists',       'ValueError',      null),
    ('PR003', 'tenant_not_found',      'no such tenant',                                         'TenantNotFound',        'LookupError',     null),
    ('PR004', 'migration_changed',     'a released migration changed after a tenant applied it', 'MigrationChanged',      null,              null),
    ('PR005', 'missing_prerequisite',  'the server lacks a prerequisite (version, encoding, extension)', 'MissingPrerequisite', null,         null),
    ('PR006', 'invalid_setting',       'unknown or invalid setting',                             'InvalidSetting',        'ValueError',      null),
    ('PR007', 'schema_too_new',        'the tenant schema is newer than the installed sources',  'SchemaTooNew',          null,              null),
    ('PR008', 'undeclared_duty',       'a public tenant function has no declared duty (sql/duties.sql)', 'UndeclaredDuty', null,             null),
    ('PR009', 'citus_missing',         'the database is not a Citus coordinator (no citus extension)', 'CitusMissing',     null,              null),
    ('PR010', 'node_not_in_cluster',   'the node is not a worker of this Citus cluster',        'NodeNotInCluster',      'LookupError',     null),
    ('PR011', 'tenant_not_distributed', 'the tenant is not a distributed schema yet (pgrecall.distribute_tenant)', 'TenantNotDistributed', null, null),
    ('PR013', 'flush_not_permitted',   'the role may not flush an erasure to disk (pgrecall.flush_erasure needs a superuser, or pg_maintain, pg_checkpoint and pg_switch_wal)', 'FlushNotPermitted', 'PermissionError', null),
    ('PR014', 'erasure_not_rewritten', 'the tables of the erasure are not rewritten yet (rewrite_erased first)', 'ErasureNotRewritten', null,  null),
    ('PR015', 'erasure_record_refused', 'a role records an erasure in the ledger for a tenant not its own', 'ErasureRecordRefused', 'PermissionError', null),
    ('PR016', 'dump_version_mismatch', 'a tenant dump from another pgrecall release than the server''s (its format or schema version)', 'DumpVersionMismatch', null, null),
    -- PostgreSQL's own, raised when a login role calls outside its duty
    ('42501', 'insufficient_privilege', 'the login role lacks the duty this call needs',         'NotPermitted',          'PermissionError', null),
    -- tenant functions
    ('PR101', 'unknown_peer',          'unknown peer, or none given',                            'UnknownPeer',           'LookupError',     null),
    ('PR102', 'invalid_purpose',       'invalid purpose, or an empty set of purposes',           'InvalidPurpose',        'ValueError',      null),
    ('PR103', 'scope_not_authorised',  'scope unknown, authorised set empty, or a write outside it', 'ScopeNotAuthorised', 'PermissionError', null),
    ('PR104', 'memory_not_found',      'memory not found, or not eligible for this principal',  'MemoryNotFound',        'LookupError',     null),
    ('PR105', 'revision_conflict',     'the memory changed since the caller read it',            'RevisionConflict',      'RuntimeError',    null),
    ('PR106', 'empty_intersection',    'the sources of a derived memory share no scope, audience or purpose', 'EmptyIntersection', 'ValueError', null),
    ('PR107', 'invalid_argument',      'invalid argument: missing or malformed',                 'InvalidArgument',       'ValueError',      null),
    ('PR108', 'memory_not_live',       'memory superseded or forgotten; fact no longer current', 'MemoryNotLive',         'RuntimeError',    null),
    ('PR109', 'observation_not_found', 'unknown observation offset',                             'ObservationNotFound',   'LookupError',     null),
    ('PR110', 'append_only',           'an append-only row was changed',                         'AppendOnly',            null,              null),
    ('PR111', 'unknown_predicate',     'predicate not in the tenant''s ontology',                'UnknownPredicate',      'ValueError',      null),
    ('PR112', 'evidence_mismatch',     'evidence does not match its observation',                'EvidenceMismatch',      'ValueError',      null),
    ('PR113', 'role_policy',           'a human''s fact on an assistant''s word only',           'RolePolicyViolation',   'ValueError',      null),
    ('PR114', 'unknown_entity',        'unknown entity',                                         'UnknownEntity',         'LookupError',     null),
    ('PR115', 'fact_not_found',        'fact not found, or not visible to this principal',       'FactNotFound',          'LookupError',     null),
    ('PR116', 'wider_than_evidence',   'a memory or a fact would reach peers that a turn it cites does not, and no widening reason was given', 'WiderThanEvidence', 'ValueError', null),
    ('PR117', 'audience_outside_session', 'a turn''s audience names a peer who is not in its session', 'AudienceOutsideSession', 'ValueError', null),
    ('PR120', 'unknown_session',       'unknown session, or one of another scope',               'UnknownSession',        'LookupError',     null),
    ('PR121', 'session_full',          'the session already holds max_peers_in_session peers',   'SessionFull',           null,              null),
    ('PR122', 'not_in_session',        'the peer is not in the session',                         'NotInSession',          'LookupError',     null),
    ('PR123', 'lease_lost',            'the task is not leased with this token',                 'LeaseLost',             'RuntimeError',    null),
    ('PR124', 'unknown_task',          'unknown task',                                           'UnknownTask',           'LookupError',     null),
    ('PR130', 'message_search_off',    'every message-search arm asked for is switched off',     'MessageSearchOff',      null,              null),
    ('PR131', 'unknown_scope',         'no scope of that name exists in the tenant',             'UnknownScope',          'LookupError',     'PR103'),
    ('PR140', 'invalid_name',          'a peer, scope or entity name breaks its name rules',      'InvalidName',           'ValueError',      'PR107'),
    ('PR141', 'name_taken',            'a peer whose name differs only in case or Unicode form exists', 'NameTaken',      'ValueError',      null),
    ('PR150', 'out_of_range',          'a number outside its range: a limit, hops, a confidence, an id or offset', 'OutOfRange', 'ValueError', 'PR107'),
    ('PR151', 'text_too_long',         'a text longer than its limit',                           'TextTooLong',           'ValueError',      'PR107'),
    ('PR152', 'invalid_time',          'a time that is infinite or outside years 1 to 9999, or an empty time range', 'InvalidTime', 'ValueError', 'PR107'),
    ('PR153', 'invalid_selector',      'a malformed erasure selector',                           'InvalidSelector',       'ValueError',      'PR107'),
    ('PR154', 'wrong_dimensions',      'an embedding that is not 384 finite numbers, or all zero', 'WrongDimensions',       'ValueError',      'PR107'),
    ('PR155', 'wrong_embedding_stamp', 'a vector stamped with another model or input version than the tenant embeds with', 'WrongEmbeddingStamp', 'ValueError', 'PR107'),
    ('PR160', 'invalid_namespace',     'a store namespace that is not 1 to 16 non-empty labels without a dot', 'InvalidNamespace', 'ValueError', 'PR107'),
    ('PR161', 'value_not_object',      'a store value that is not a JSON object',                'ValueNotObject',        'ValueError',      'PR107'),
    ('PR162', 'store_key_taken',       'a store key held by an item that may not be used for the put''s purposes', 'StoreKeyTaken', 'ValueError', null),
    ('PR180', 'duplicate_decided',     'the duplicate pair was decided first',                   'DuplicateDecided',      'RuntimeError',    null),
    ('PR181', 'narrower_replacement',  'a duplicate''s replacement reaches fewer people or purposes', 'NarrowerReplacement', 'ValueError',    null),
    ('PR182', 'not_a_pair',            'two memories with no purpose in common are no duplicate pair', 'NotAPair',         'ValueError',      null),
    ('PR195', 'unknown_erasure_request', 'no completed erasure request has that id',             'UnknownErasureRequest', 'LookupError',     null);

-- What the Python class of each code says beyond its meaning (its docstring, generated into
-- python/pgrecall/errors.py by make generate): when the code is raised, and what a caller does about it.
update pgrecall.error_code e set explanation = x.explanation from (values
    ('42501', 'The login role lacks the duty this call needs (e.g. erase is the admin''s, claiming work the worker''s).'),
    ('PR001', 'The text may not name a tenant (the message names the rule it breaks: names.py).'),
    ('PR002', 'The tenant already exists (or its schema, or one of its roles).'),
    ('PR003', 'No such tenant.'),
    ('PR004', 'A released migration changed after a tenant applied it.'),
    ('PR005', 'The server lacks a prerequisite (version, encoding, extension).'),
    ('PR006', 'An unknown setting, or a value it does not take.'),
    ('PR007', 'The tenant''s schema is newer than the installed sources.'),
    ('PR008', 'A tenant function has no row in the duty matrix (sql/duties.sql): the install stops.'),
    ('PR009', 'A Citus operation (distribute_tenant, tenant_node, move_tenant) on a database without the citus extension.'),
    ('PR010', 'pgrecall.move_tenant(): the node named is not an active worker of this Citus cluster; nothing moved.'),
    ('PR011', 'The tenant is not a distributed schema yet (pgrecall.distribute_tenant).'),
    ('PR013', 'pgrecall.flush_erasure(): the role lacks what it needs (superuser, or pg_maintain, pg_checkpoint and EXECUTE on pg_switch_wal(), with the rights of the tenant''s installer); the message names what is missing.'),
    ('PR014', 'pgrecall.flush_erasure(): the tenant''s admin has not rewritten the erasure''s tables yet (rewrite_erased).'),
    ('PR015', 'pgrecall.record_erasure(): the calling role is not one of the tenant''s own.'),
    ('PR016', 'pgrecall tenant restore: the dump comes from another pgrecall release (format or schema version) than the server''s; nothing was restored.'),
    ('PR101', 'An unknown peer, or none given.'),
    ('PR102', 'A purpose that is not one of the tenant''s, or an empty set of purposes.'),
    ('PR103', 'The scope is unknown, or not in the caller''s authorised set.'),
    ('PR104', 'The memory does not exist, or the principal may not see it: the two are not told apart.'),
    ('PR105', 'Someone changed the memory after the caller read it.'),
    ('PR106', 'derive: the sources share no scope, audience or purpose.'),
    ('PR107', 'An argument that is missing or malformed (the precise cases below refine it).'),
    ('PR108', 'The memory was superseded or forgotten (or the fact is no longer current).'),
    ('PR109', 'No observation at that offset.'),
    ('PR110', 'An append-only row was to be changed.'),
    ('PR111', 'The predicate is not in the tenant''s ontology.'),
    ('PR112', 'The quote is not exactly the bytes of its span, or the span is not in the observation.'),
    ('PR113', 'A fact about a human peer whose only evidence is what an assistant said.'),
    ('PR114', 'No entity has that name or alias, or the principal may see none that has: the two are not told apart.'),
    ('PR115', 'The fact does not exist, or the principal may not see it.'),
    ('PR116', 'A memory or a fact would reach peers that a turn it cites does not: narrow its audience, or widen it on purpose with a widening reason.'),
    ('PR117', 'A turn''s audience names a peer who is not in its session (a turn is seen by at most who is there).'),
    ('PR120', 'No such session, or an observation names a session of another scope.'),
    ('PR121', 'The session already holds max_peers_in_session peers.'),
    ('PR122', 'The peer is not (or no longer) in the session.'),
    ('PR123', 'The task is not leased with this token (the lease expired and it was claimed again, or it is finished).'),
    ('PR124', 'No queued task has that id.'),
    ('PR130', 'search_messages: the tenant switched off every arm the call asked for.'),
    ('PR131', 'No scope of that name exists in the tenant: a precise case of ScopeNotAuthorised (``except ScopeNotAuthorised`` still catches it), and a LookupError, so the command line exits 4 (not found).'),
    ('PR140', 'A peer or scope name breaks the name rules (control, format or invisible characters, odd spacing, mixed Latin/Cyrillic/Greek letters in a word, length), or an entity name or alias (remember''s about, a fact''s subject or object, add_entity_alias) is blank or holds a control, format or invisible character. An InvalidArgument, as it was before it had a code.'),
    ('PR141', 'add_peer: a peer whose name differs only in case (or Unicode form) exists; names are unique regardless.'),
    ('PR150', 'A number outside its range: a limit, hops, a confidence, an id or an offset (bigger than a bigint too).'),
    ('PR151', 'A text longer than its limit (some limits are tenant settings, named in the hint).'),
    ('PR152', 'A time that is infinite or outside years 1 to 9999 (what ISO 8601 and Python''s datetime hold), or an empty time range.'),
    ('PR153', 'erase: the selector is not one of the four shapes (observation, data_subject, peer, scope).'),
    ('PR154', 'An embedding that is not 384 finite numbers, or all zero: the vectors come from another model, or were never filled.'),
    ('PR155', 'remember() was given vectors stamped with another model or input version than the tenant embeds with: they would be of another text or another space than the tenant''s other vectors.'),
    ('PR160', 'A store namespace that is not 1 to 16 non-empty labels without a dot (or one under "langgraph").'),
    ('PR161', 'A store value that is not a JSON object.'),
    ('PR162', 'The store key is held by an item that may not be used for every purpose of the put.'),
    ('PR180', 'decide_duplicate: someone decided this pair, at the revisions the caller saw, first.'),
    ('PR181', 'decide_duplicate: the replacement does not reach everyone (scope, audience, purposes, perspective) the superseded memory reaches.'),
    ('PR182', 'decide_duplicate: the two memories share no purpose, so they are never proposed as duplicates.'),
    ('PR195', 'refresh_erasure_statistics: no completed erasure request has that id.')
) x(code, explanation)
 where e.code = x.code;
