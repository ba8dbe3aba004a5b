-- The graph: a closed predicate ontology, bitemporal facts between entities,
-- the verbatim evidence behind each fact, and the log of entity merges.

-- An entity absorbed by merge_entities() keeps its row (memories' about-links
-- still point at it) and resolves to the entity it was merged into.
-- If the survivor is erased, what was merged into it stands on its own again.
alter table __tenant__.entity add column merged_into bigint references __tenant__.entity (id) on delete set null;
alter table __tenant__.entity add constraint entity_not_merged_into_itself check (merged_into <> id);
create index entity_merged_into on __tenant__.entity (merged_into) where merged_into is not null;

-- Erasure deletes memories; the foreign key from superseded_by is checked for
-- each of them, which without an index reads the whole memory table each time
-- (1.8 s of a 2.2 s erasure at 100k memories).
create index memory_superseded_by on __tenant__.memory (superseded_by) where superseded_by is not null;

-- One live memory that used each term when the statistics were taken: erasure
-- proves a term survives by re-reading that one row instead of probing the
-- full-text index (2.9 of 3.6 s when erasing one subject among 1M memories).
alter table __tenant__.term_stat add column witness_memory_id bigint;

create table __tenant__.predicate (
    name           text primary key check (name ~ '^[a-z][a-z0-9_]{0,62}$'),
    -- One value at a time (lives_in) or many (likes).
    single_valued  boolean not null,
    -- What the object is: another entity, or a literal value (a date, a number).
    object_type    text not null default 'entity' check (object_type in ('entity', 'literal')),
    description    text not null check (description <> '')
);
comment on table __tenant__.predicate is
    'The closed ontology of fact predicates. Extend it with INSERT; a predicate in use cannot change its cardinality.';

insert into __tenant__.predicate (name, single_valued, object_type, description) values
    ('lives_in',     true,  'entity',  'where the subject lives'),
    ('works_at',     true,  'entity',  'the subject''s employer'),
    ('has_role',     true,  'literal', 'the subject''s job title or role'),
    ('has_name',     true,  'literal', 'the name the subject goes by'),
    ('married_to',   true,  'entity',  'the subject''s spouse'),
    ('born_in',      true,  'entity',  'where the subject was born'),
    ('born_on',      true,  'literal', 'the subject''s date of birth'),
    ('age',          true,  'literal', 'the subject''s age in years'),
    ('studies_at',   true,  'entity',  'where the subject studies'),
    ('located_in',   true,  'entity',  'where a place or organisation is'),
    ('likes',        false, 'entity',  'something the subject likes'),
    ('dislikes',     false, 'entity',  'something the subject dislikes'),
    ('allergic_to',  false, 'entity',  'something the subject is allergic to'),
    ('speaks',       false, 'entity',  'a language the subject speaks'),
    ('knows',        false, 'entity',  'a person the subject knows'),
    ('friend_of',    false, 'entity',  'a friend of the subject'),
    ('parent_of',    false, 'entity',  'a child of the subject'),
    ('has_pet',      false, 'entity',  'an animal the subject keeps'),
    ('owns',         false, 'entity',  'something the subject owns'),
    ('member_of',    false, 'entity',  'a group or organisation the subject belongs to'),
    ('part_of',      false, 'entity',  'a larger whole the subject belongs to'),
    ('prefers',      false, 'literal', 'a stated preference of the subject'),
    ('uses',         false, 'entity',  'a tool, product or service the subject uses');

create table __tenant__.fact (
    id                bigint generated always as identity primary key,
    scope             text not null references __tenant__.scope (name),
    subject_id        bigint not null references __tenant__.entity (id),
    predicate         text not null references __tenant__.predicate (name),
    -- Copied from the predicate because an exclusion constraint can only see
    -- its own row; a trigger keeps predicates in use from changing it.
    single_valued     boolean not null,
    object_id         bigint references __tenant__.entity (id),
    object_value      text check (char_length(object_value) between 1 and 1000),
    statement         text not null check (char_length(statement) between 1 and 2000),
    -- When the world was so, and when we believed it. known ends when a newer
    -- value replaces the fact or it is retracted; nothing else about a fact changes.
    valid             tstzrange not null check (not isempty(valid)),
    known             tstzrange not null check (not isempty(known)),
    confidence        real not null default 1 check (confidence between 0 and 1),
    salience          real not null default 0 check (salience >= 0),
    -- Whose perspective this is (a representation); NULL: the tenant's own view.
    observer_peer_id  bigint references __tenant__.peer (id),
    -- NULL: everyone authorised for the scope; else the one peer who may see it.
    audience_peer_id  bigint references __tenant__.peer (id),
    purposes          text[] not null default array['converse', 'act', 'personalize', 'review'] check (
                          cardinality(purposes) between 1 and 4
                          and purposes <@ array['converse', 'act', 'personalize', 'review']),
    asserted_by       bigint not null references __tenant__.peer (id),
    -- The fact whose assertion ended this one's known range, and, for a row
    -- that is the surviving part of an older fact, that fact and the
    -- assertion that split it. Erasure reads these to rebuild.
    closed_by         bigint references __tenant__.fact (id) on delete set null,
    split_from        bigint references __tenant__.fact (id) on delete set null,
    split_by          bigint references __tenant__.fact (id) on delete set null,
    retraction_reason text,
    created_at        timestamptz not null default now(),
    constraint fact_one_object check (num_nonnulls(object_id, object_value) = 1),
    -- Supersession is the database's invariant: one current value at a time.
    constraint fact_one_current_value exclude using gist (
        subject_id with =, predicate with =, (coalesce(observer_peer_id, 0)) with =, valid with &&)
        where (single_valued and upper_inf(known))
);
comment on table __tenant__.fact is
    'Bitemporal facts: subject, predicate, object, valid (world time) and known (belief time) ranges, with evidence.';
create index fact_subject on __tenant__.fact (subject_id, predicate);
-- Deleting a fact (erasure) must find the rows that point at it.
create index fact_closed_by on __tenant__.fact (closed_by) where closed_by is not null;
create index fact_split_from on __tenant__.fact (split_from) where split_from is not null;
create index fact_split_by on __tenant__.fact (split_by) where split_by is not null;
create index fact_object on __tenant__.fact (object_id) where object_id is not null;
create index fact_subject_time on __tenant__.fact using gist (subject_id, valid, known);

create table __tenant__.fact_evidence (
    id              bigint generated always as identity primary key,
    fact_id         bigint not null references __tenant__.fact (id),
    observation_id  bigint not null references __tenant__.observation (id),
    -- UTF-8 byte offsets into the observation's body, end exclusive.
    byte_start      integer not null check (byte_start >= 0),
    byte_end        integer not null,
    quote           text not null,
    created_at      timestamptz not null default now(),
    constraint fact_evidence_span check (byte_end > byte_start),
    constraint fact_evidence_quote_length check (octet_length(quote) = byte_end - byte_start)
);
comment on table __tenant__.fact_evidence is
    'The verbatim quote behind a fact and its UTF-8 byte span in the observation; checked on insert.';
create index fact_evidence_fact on __tenant__.fact_evidence (fact_id);
create index fact_evidence_observation on __tenant__.fact_evidence (observation_id);

-- Ids and counts only (no names or text): a merge's receipt.
create table __tenant__.entity_merge (
    id              bigint generated always as identity primary key,
    scope           text not null references __tenant__.scope (name),
    kept_id         bigint not null,
    absorbed_id     bigint not null,
    facts_moved     bigint[] not null,
    facts_closed    bigint[] not null,
    merged_by       bigint not null references __tenant__.peer (id),
    merged_at       timestamptz not null default now()
);
comment on table __tenant__.entity_merge is 'Log of merge_entities(): which entity absorbed which, and the facts moved or closed.';

insert into __tenant__.projection_kind (kind, table_name, description, key_expression, delete_order) values
    ('fact_evidence', 'fact_evidence', 'quotes and byte spans behind facts', 'id::text', 32),
    ('fact',          'fact',          'bitemporal facts between entities', 'id::text', 36);

-- An entity stays while a surviving memory or fact names it.
update __tenant__.projection_kind
   set kept_while = 'exists (select 1 from __tenant__.memory_link l where l.target_entity_id = t.id)'
                 || ' or exists (select 1 from __tenant__.fact f where f.subject_id = t.id)'
                 || ' or exists (select 1 from __tenant__.fact f where f.object_id = t.id)'
 where kind = 'entity';

alter table __tenant__.setting add constraint setting_graph_value_in_range check (
    case key
        when 'max_hops'             then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 1 and 3
        when 'traversal_fanout'     then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 1 and 10000
        when 'recall_fact_limit'    then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric between 0 and 500
        when 'lexical_match_budget' then (value #>> '{}') ~ '^[0-9]+$' and (value #>> '{}')::numeric >= 1
        else true
    end);

insert into __tenant__.setting (key, value, description) values
    ('max_hops',            '3',   'Largest number of hops neighbourhood() expands'),
    ('traversal_fanout',    '200', 'At most this many facts are followed per hop of a traversal'),
    ('recall_fact_limit',   '20',  'Facts about entities named in the query that recall fuses with memories'),
    ('lexical_match_budget', '3000', 'Lexical arm: candidates are recruited by the rarest query terms whose document frequencies add up to at most this (the rarest always); the other terms only score. Every term recruits when that finds fewer than arm_candidates');
