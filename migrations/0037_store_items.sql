-- Items of a key-value store (LangGraph's BaseStore, pgrecall.integrations.langgraph) kept as memories:
-- a memory may carry a namespace, a key and the JSON object it holds. The text recall ranks and the
-- worker embeds is the body, made from the value; the value itself is kept whole beside it. A key
-- is unique per namespace within its scope and audience (the whole scope, or one peer): a put of an
-- existing key revises that memory (revision + 1, the old value kept in memory_revision), never a
-- second memory. A forgotten or superseded item frees its key; its row stays as history.
alter table __tenant__.memory
    add column store_namespace text[],
    add column store_key text,
    add column store_value jsonb,
    add constraint memory_store_item_whole check (
        (store_key is null and store_namespace is null and store_value is null)
        or (store_key is not null and cardinality(store_namespace) >= 1
            and jsonb_typeof(store_value) = 'object'));
comment on column __tenant__.memory.store_value is
    'A store item''s value, whole (NULL: the memory is no store item); store_namespace and store_key name it.';

alter table __tenant__.memory_revision add column store_value jsonb;
comment on column __tenant__.memory_revision.store_value is 'A store item''s value at that revision.';

-- The database decides uniqueness: one live item per (scope, audience, namespace, key). The
-- index also serves get (all four given) and namespace listing within one scope and audience.
create unique index memory_store_key on __tenant__.memory
    (scope, coalesce(audience_peer_id, 0), store_namespace, store_key)
    where store_key is not null and invalidated_at is null and superseded_by is null;
