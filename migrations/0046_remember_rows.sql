-- A remember batch's items as its statements hand them on (issue #46 item 1):
-- each placed item with the memory id it takes, as _remember_numbered makes
-- them and the writes read them. They were a JSON array that each of five
-- statements parsed again, built by to_jsonb of every row: about 7 ms of a
-- 500-item batch, 8% of what remember_many does besides the graph insert.
create type __tenant__.remember_row as (
    ord              integer,
    body             text,
    evidence         bigint[],
    purposes         text[],
    audience_id      bigint,
    kind             text,
    title            text,
    confidence       double precision,
    about            text[],
    observer_id      bigint,
    widening_reason  text,
    text_key         text,
    noop             text,
    existing_id      bigint,
    first_ord        integer,
    new_id           bigint
);
comment on type __tenant__.remember_row is
    'Internal: one item of a remember batch, placed and numbered (new_id NULL: a no-op or a duplicate).';
