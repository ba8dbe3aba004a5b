-- Per-tenant settings: the design's constants, one row each, readable by the
-- tenant's own functions without reaching outside the schema.

create table __tenant__.setting (
    key          text primary key check (key ~ '^[a-z][a-z0-9_]*$'),
    value        jsonb not null,
    description  text not null,
    -- Keys are added by later migrations; their ranges are checked here, so a
    -- key unknown to this list is unchecked.
    constraint setting_value_in_range check (
        case key
            when 'rrf_k'                    then (value #>> '{}')::numeric > 0
            when 'dense_floor'              then (value #>> '{}')::numeric between -1 and 1
            when 'prune_min_terms'          then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric >= 1
            when 'prune_df_ratio'           then (value #>> '{}')::numeric > 0 and (value #>> '{}')::numeric <= 1
            when 'walk_depth'               then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 1 and 100000
            when 'duplicate_cosine'         then (value #>> '{}')::numeric between -1 and 1
            when 'duplicate_window'         then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric >= 1
            when 'max_peers_in_session'     then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 1 and 10000
            when 'turn_gap_seconds'         then (value #>> '{}')::numeric > 0
            when 'default_mode'             then value #>> '{}' in ('hybrid', 'lexical', 'dense')
            when 'max_observation_bytes'    then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 1024 and 104857600
            when 'max_memory_bytes'         then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 256 and 1048576
            when 'embedding_input_version'  then value #>> '{}' in ('1', '2')
            when 'arm_candidates'           then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 1 and 1000
            when 'hnsw_ef_search'           then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 1 and 1000
            when 'exact_dense_below'        then (value #>> '{}') ~ '^[0-9]+$'
            when 'bm25_k1'                  then (value #>> '{}')::numeric >= 0
            when 'bm25_b'                   then (value #>> '{}')::numeric between 0 and 1
            when 'stats_refresh_ratio'      then (value #>> '{}')::numeric > 0 and (value #>> '{}')::numeric <= 1
            when 'embedding_lease_seconds'  then (value #>> '{}')::numeric > 0
            else true
        end
    )
);
comment on table __tenant__.setting is 'Per-tenant settings; change them with pgrecall.set_tenant_setting().';

insert into __tenant__.setting (key, value, description) values
    ('rrf_k',                 '60',       'Reciprocal Rank Fusion constant: score = sum of 1 / (rrf_k + rank)'),
    ('dense_floor',           '0.30',     'Dense arm: cosine similarity below this is not a match'),
    ('prune_min_terms',       '3',        'Lexical pruning applies from this many query terms'),
    ('prune_df_ratio',        '0.15',     'Lexical pruning drops terms found in at least this share of memories'),
    ('walk_depth',            '500',      'Permission walk: how many fused candidates are checked'),
    ('duplicate_cosine',      '0.80',     'Duplicate proposals: cosine at or above this'),
    ('duplicate_window',      '500',      'Duplicate proposals: among this many newest visible memories'),
    ('max_peers_in_session',  '10',       'Most peers one session may hold'),
    ('observe_others',        'false',    'Default for a session peer: forms views of the others'),
    ('observed_by_others',    'true',     'Default for a session peer: others form views of it'),
    ('observed_globally',     'true',     'Default for a peer: a global representation is kept'),
    ('turn_gap_seconds',      '7200',     'Turn log: a gap longer than this opens a new session'),
    ('expiry_gate',           'false',    'When true, expire() erases rows past their retention date'),
    ('default_mode',          '"hybrid"', 'Recall mode when the caller names none: hybrid, lexical or dense');
