-- A result's provenance as declared types (issue #47 item 1): recall's rows,
-- read(), the session-start bundle and the duplicate pairs carried it as jsonb
-- inside their declared types, two shapes in one column of recall_item (a
-- memory's, and a fact's when item = 'fact'), each parsed by hand in Python.
-- Now the catalog says its shape: SQL reads (item).provenance.observations[1].offset,
-- the driver's dataclasses are generated from these types, and to_jsonb() of
-- one gives the JSON it was before (the attributes keep the keys' names).
-- A tenant installed before: the jsonb attributes are dropped and the typed
-- ones added (at the end of each type); the functions that build the rows are
-- made again by the upgrade, after this migration, as for any changed file.

-- A turn a memory came from (its text cut at 500 characters), or that a
-- correction of it cited.
create type __tenant__.observation_ref as (
    scope        text,
    "offset"     bigint,
    withheld     boolean,    -- a turn the principal may not see: only scope, offset and corrections
    source_role  text,
    actor        text,
    occurred_at  timestamptz,
    text         text,
    audience     text[],     -- the peers who may see the turn
    corrections  integer[]   -- the revisions that corrections citing it made
);
comment on type __tenant__.observation_ref is
    'A turn a memory came from, or that a correction of it cited; withheld where the principal may not see it.';
comment on column __tenant__.observation_ref.source_role is 'NULL when withheld.';
comment on column __tenant__.observation_ref.actor is 'NULL when withheld.';
comment on column __tenant__.observation_ref.occurred_at is 'NULL when withheld.';
comment on column __tenant__.observation_ref.text is 'NULL when withheld.';
comment on column __tenant__.observation_ref.audience is 'NULL when withheld, or for a turn the whole scope may see.';

-- A memory another was derived from, that the principal may see.
create type __tenant__.source_memory as (
    id     bigint,
    title  text,
    kind   text
);
comment on type __tenant__.source_memory is 'A memory another was derived from, that the principal may see.';
comment on column __tenant__.source_memory.title is 'NULL for a memory without a title.';

-- An entity a memory is about.
create type __tenant__.about_entity as (
    entity  text,
    type    text
);
comment on type __tenant__.about_entity is 'An entity a memory is about, and its type.';
comment on column __tenant__.about_entity.type is 'NULL for an entity of no declared type.';

-- Where a memory came from.
create type __tenant__.memory_provenance as (
    observations     __tenant__.observation_ref[],
    memories         __tenant__.source_memory[],
    hidden_sources   integer,   -- source memories the principal may not see
    about            __tenant__.about_entity[],
    widening_reason  text,
    offsets          bigint[]   -- the log offsets of its observations, in order
);
comment on type __tenant__.memory_provenance is
    'Where a memory came from: the turns it cites, its visible source memories (and how many are hidden), its entities.';
comment on column __tenant__.memory_provenance.widening_reason is
    'NULL unless the memory may reach more peers than a turn it cites (why it may).';

-- A fact's quote: the UTF-8 byte span [start, end) of the turn at offset.
create type __tenant__.fact_quote as (
    scope        text,
    "offset"     bigint,
    start        integer,
    "end"        integer,
    quote        text,
    source_role  text,
    withheld     boolean     -- a turn the principal may not see: only scope and offset
);
comment on type __tenant__.fact_quote is
    'A fact''s quote: the byte span [start, end) of the turn at offset; withheld where the principal may not see it.';
comment on column __tenant__.fact_quote.start is 'NULL when withheld.';
comment on column __tenant__.fact_quote."end" is 'NULL when withheld.';
comment on column __tenant__.fact_quote.quote is 'NULL when withheld.';
comment on column __tenant__.fact_quote.source_role is 'NULL when withheld.';

-- A fact row's provenance: the fact and the quotes that prove it.
create type __tenant__.fact_provenance as (
    subject     text,
    predicate   text,
    object      text,
    valid       tstzrange,
    confidence  real,
    evidence    __tenant__.fact_quote[],
    offsets     bigint[]    -- the log offsets it cites, in order
);
comment on type __tenant__.fact_provenance is 'A fact row''s provenance: the fact and the quotes that prove it.';

alter type __tenant__.recall_item drop attribute provenance;
alter type __tenant__.recall_item add attribute provenance __tenant__.memory_provenance;
alter type __tenant__.recall_item add attribute fact_provenance __tenant__.fact_provenance;
comment on column __tenant__.recall_item.provenance is 'NULL for a fact row (item = ''fact'').';
comment on column __tenant__.recall_item.fact_provenance is 'NULL for a memory row (item = ''memory'').';

alter type __tenant__.duplicate_pair drop attribute a_provenance;
alter type __tenant__.duplicate_pair drop attribute b_provenance;
alter type __tenant__.duplicate_pair add attribute a_provenance __tenant__.memory_provenance;
alter type __tenant__.duplicate_pair add attribute b_provenance __tenant__.memory_provenance;

alter type __tenant__.bundle_memory drop attribute provenance;
alter type __tenant__.bundle_memory add attribute provenance __tenant__.memory_provenance;
