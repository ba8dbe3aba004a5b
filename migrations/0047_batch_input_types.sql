-- The batch inputs as declared types (issue #47 item 1): remember_many's items
-- and append_observations' rows arrive as a JSON array of objects (what a psql
-- caller writes as a literal), whose shape was written out by hand in the
-- functions that read it, in their key checks and in the Python driver. The
-- catalog says it now: the functions read the JSON into these types
-- (jsonb_populate_recordset), a key outside them is refused by name, and the
-- driver's typed dicts (MemoryItem, ObservationRow) are generated from them.
-- Input types: nothing stores them and no function returns them.

create type __tenant__.memory_item as (
    body             text,
    evidence         bigint[],
    purposes         text[],
    audience         text,
    kind             text,
    title            text,
    confidence       double precision,
    about            text[],
    observer         text,
    widening_reason  text
);
comment on type __tenant__.memory_item is
    'Input: one item of remember_many''s p_items (a JSON array of objects with these keys), the arguments of remember() for one memory.';
comment on column __tenant__.memory_item.body is 'Required. The memory''s text.';
comment on column __tenant__.memory_item.evidence is 'Required. The log offsets of the turns it stands on, in the batch''s scope.';
comment on column __tenant__.memory_item.purposes is 'Required. The purposes it may be recalled for (at least one).';
comment on column __tenant__.memory_item.audience is 'The one peer who may see it (absent: everyone the scope admits).';
comment on column __tenant__.memory_item.kind is 'A memory kind (absent: note).';
comment on column __tenant__.memory_item.title is 'A short title.';
comment on column __tenant__.memory_item.confidence is 'Between 0 and 1 (absent: 1).';
comment on column __tenant__.memory_item.about is 'The entities it is about.';
comment on column __tenant__.memory_item.observer is 'The peer whose local view it is (absent: the global view).';
comment on column __tenant__.memory_item.widening_reason is 'Why it may reach more peers than its turns do.';

create type __tenant__.observation_row as (
    body             text,
    source_role      text,
    kind             text,
    actor            text,
    session_id       bigint,
    occurred_at      timestamptz,
    payload          jsonb,
    data_subject_id  text,
    lawful_basis     text,
    classification   text,
    retention_until  timestamptz,
    audience         text[]
);
comment on type __tenant__.observation_row is
    'Input: one row of append_observations'' p_rows (a JSON array of objects with these keys), the arguments of append_observation() for one turn.';
comment on column __tenant__.observation_row.body is 'Required. The turn''s text.';
comment on column __tenant__.observation_row.source_role is 'Required. Who said it: user, assistant, system, tool or document.';
comment on column __tenant__.observation_row.kind is 'An observation kind (absent: message).';
comment on column __tenant__.observation_row.actor is 'The peer who said it.';
comment on column __tenant__.observation_row.session_id is 'The session it was said in.';
comment on column __tenant__.observation_row.occurred_at is 'When it was said (absent: now).';
comment on column __tenant__.observation_row.payload is 'A JSON object kept with it (absent: {}).';
comment on column __tenant__.observation_row.data_subject_id is 'Whose personal data it holds, for erasure.';
comment on column __tenant__.observation_row.lawful_basis is 'The lawful basis for keeping it.';
comment on column __tenant__.observation_row.classification is 'Its classification (absent: internal).';
comment on column __tenant__.observation_row.retention_until is 'When it is to be erased.';
comment on column __tenant__.observation_row.audience is 'The peers who may see it (absent: the session''s peers, or the scope''s).';
