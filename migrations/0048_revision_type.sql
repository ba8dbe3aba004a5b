-- read()'s revision history as a declared type (issue #47 item 1): it was a
-- jsonb array built by jsonb_build_object and parsed by hand in Python; now
-- the catalog says its shape, SQL reads (r.revisions[1]).body, the driver's
-- dataclass is generated from it, and to_jsonb() of it gives the JSON it was
-- (the attributes keep the keys' names). read() is made again by the upgrade
-- with its new result type, as for any changed file.

create type __tenant__.memory_text_revision as (
    revision    integer,
    kind        text,
    title       text,
    body        text,
    confidence  real,
    changed_by  text,
    changed_at  timestamptz,
    reason      text,
    evidence    bigint[]    -- the log offsets the correction that replaced this text cited
);
comment on type __tenant__.memory_text_revision is
    'An earlier text of a corrected memory: what it said at that revision, who changed it and why, and the turns the correction that replaced it cited.';
comment on column __tenant__.memory_text_revision.title is 'NULL when it had none.';
comment on column __tenant__.memory_text_revision.reason is 'NULL when none was given.';
