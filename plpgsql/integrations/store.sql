-- A key-value store on memories, for LangGraph's BaseStore
-- (pgrecall.integrations.langgraph; migration 0037). An item is a memory with
-- a namespace, a key and a JSON object as its value. Its partition is a scope
-- and an audience: the one principal (p_shared false, the default) or the
-- whole scope (p_shared true). Within a partition a key is unique per
-- namespace (the index memory_store_key decides): a put of a live key is a
-- revision of that memory, a delete forgets it. Reads apply the one
-- eligibility rule (scope, audience, purpose, live), so another principal's
-- private items answer as nothing, exactly like items that do not exist.
--
-- Every put is also written to the log: a note of the principal's, seen by
-- the item's audience, whose body is the item's text and whose payload names
-- the namespace and key. The memory cites it and is registered against it, so
-- erasing any write of an item erases the item (and its history) whole.

-- The text of a value that recall ranks and the worker embeds: its string
-- leaves, in document order, one a line; the JSON text when it has none.
create or replace function __tenant__._store_text(p_value jsonb)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(nullif(btrim((select string_agg(s #>> '{}', E'\n')
                                    from jsonb_path_query(p_value, 'strict $.**') s
                                   where jsonb_typeof(s) = 'string')), ''),
                    p_value::text)
$$;
comment on function __tenant__._store_text(jsonb) is
    'Internal: a store value''s searchable text: its string leaves one a line, else its JSON text.';

-- PR160 unless a namespace is 1 to 16 labels, each a non-empty text of at
-- most 200 bytes without a dot, the first not "langgraph" (LangGraph's rules,
-- whose "." joins labels and whose "langgraph" root is reserved).
create or replace function __tenant__._check_store_namespace(p_namespace text[], p_what text default 'namespace')
returns text[]
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_label text;
begin
    if p_namespace is null or cardinality(p_namespace) = 0 then
        perform _fail('PR160', format('a %s needs at least one label', p_what),
                      'A namespace is a tuple of non-empty strings, e.g. ("memories", "ana").');
    end if;
    if cardinality(p_namespace) > 16 or array_ndims(p_namespace) <> 1 then
        perform _fail('PR160', format('a %s has at most 16 labels, not %s', p_what, cardinality(p_namespace)));
    end if;
    foreach v_label in array p_namespace loop
        if v_label is null or v_label = '' then
            perform _fail('PR160', format('a %s label must be a non-empty string', p_what),
                          'A namespace is a tuple of non-empty strings, e.g. ("memories", "ana").');
        end if;
        perform _check_length(v_label, p_what || ' label', 200);
        if strpos(v_label, '.') > 0 then
            perform _fail('PR160', format('a %s label may not contain a dot: %s', p_what, quote_literal(_clip(v_label))));
        end if;
    end loop;
    if p_namespace[1] = 'langgraph' then
        perform _fail('PR160', format('a %s may not start with "langgraph", which LangGraph reserves', p_what));
    end if;
    return p_namespace;
end
$$;
comment on function __tenant__._check_store_namespace(text[], text) is
    'Internal: PR160 unless the namespace is 1-16 non-empty labels without a dot, not under "langgraph"; PR151 for a label over 200 bytes.';

-- A path of a namespace listing (a prefix or a suffix, "*" any one label):
-- NULL is no condition; otherwise labels as for a namespace, "*" allowed.
create or replace function __tenant__._check_store_path(p_path text[], p_what text)
returns text[]
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_path is null or cardinality(p_path) = 0 then
        return null;
    end if;
    perform _check_store_namespace(array(select replace(l, '*', 'x') from unnest(p_path) l), p_what);
    return p_path;
end
$$;
comment on function __tenant__._check_store_path(text[], text) is
    'Internal: a listing condition''s labels, checked as a namespace''s ("*" allowed); NULL or empty: none.';

-- Whether a namespace matches a prefix or a suffix path, "*" matching any one label.
create or replace function __tenant__._store_path_matches(p_namespace text[], p_path text[], p_suffix boolean)
returns boolean
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select p_path is null
        or (cardinality(p_namespace) >= cardinality(p_path)
            and not exists (
                select 1 from generate_subscripts(p_path, 1) i
                 where p_path[i] <> '*'
                   and p_path[i] is distinct from p_namespace[case when p_suffix
                                                                   then cardinality(p_namespace) - cardinality(p_path) + i
                                                                   else i end]))
$$;
comment on function __tenant__._store_path_matches(text[], text[], boolean) is
    'Internal: whether a namespace starts (or ends) with the path, "*" matching any one label.';

-- One value against one condition, as LangGraph's stores compare: an object
-- of "$" operators ($eq, $ne, $gt, $gte, $lt, $lte; the ordering ones on
-- numbers), an object of conditions on the fields of an object value, an
-- array equal element by element, anything else by equality. A missing field
-- is JSON null.
create or replace function __tenant__._store_value_matches(p_value jsonb, p_condition jsonb)
returns boolean
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_key text;
    v_operand jsonb;
    v_sign numeric;
    v_value jsonb := coalesce(p_value, 'null');
begin
    if jsonb_typeof(p_condition) = 'object' and exists (select 1 from jsonb_object_keys(p_condition) k where k like '$%') then
        for v_key, v_operand in select * from jsonb_each(p_condition) loop
            if v_key = '$eq' or v_key = '$ne' then
                if (v_value = v_operand) = (v_key = '$ne') then
                    return false;
                end if;
            elsif v_key in ('$gt', '$gte', '$lt', '$lte') then
                if jsonb_typeof(v_value) <> 'number' or jsonb_typeof(v_operand) <> 'number' then
                    perform _fail('PR107', format('filter operator %s compares numbers, not %s and %s', v_key,
                                                  jsonb_typeof(v_value), jsonb_typeof(v_operand)));
                end if;
                v_sign := sign((v_value #>> '{}')::numeric - (v_operand #>> '{}')::numeric);
                if not (v_sign = any (case v_key when '$gt' then array[1] when '$gte' then array[0, 1]
                                                 when '$lt' then array[-1] else array[-1, 0] end)) then
                    return false;
                end if;
            else
                perform _fail('PR107', format('unknown filter operator %s', quote_literal(_clip(v_key, 50))),
                              'The operators are $eq, $ne, $gt, $gte, $lt and $lte.');
            end if;
        end loop;
        return true;
    elsif jsonb_typeof(p_condition) = 'object' then
        if jsonb_typeof(v_value) <> 'object' then
            return false;
        end if;
        return not exists (select 1 from jsonb_each(p_condition) c
                            where not _store_value_matches(v_value -> c.key, c.value));
    elsif jsonb_typeof(p_condition) = 'array' then
        return jsonb_typeof(v_value) = 'array' and jsonb_array_length(v_value) = jsonb_array_length(p_condition)
           and not exists (select 1 from generate_series(0, jsonb_array_length(p_condition) - 1) i
                            where not _store_value_matches(v_value -> i, p_condition -> i));
    end if;
    return v_value = p_condition;
end
$$;
comment on function __tenant__._store_value_matches(jsonb, jsonb) is
    'Internal: whether a value meets a store filter condition (LangGraph''s operators and nested equality).';

-- The arguments every store call shares: the scopes, the partition's scope
-- among them, and the purpose (reads) or purposes (puts).
create or replace function __tenant__._check_store_call(p_scopes text[], p_scope text, p_filter jsonb default null)
returns void
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_scopes(p_scopes);
    perform _check_write_scope(p_scope, p_scopes);
    perform _check_json_size(p_filter, 'filter', 65536);
    if p_filter is not null and jsonb_typeof(p_filter) <> 'object' then
        perform _fail('PR107', format('a filter is a JSON object, not %s', jsonb_typeof(p_filter)));
    end if;
end
$$;
comment on function __tenant__._check_store_call(text[], text, jsonb) is
    'Internal: the scopes and the partition''s scope of a store call (PR103), and its filter (PR107, PR151).';

-- One key of one partition (a scope, and a peer's own or the whole scope's:
-- p_audience NULL) held to the end of the transaction: a put and an import's
-- restore of one key wait for each other, so the second sees what the first wrote.
create or replace function __tenant__._lock_store_key(p_scope text, p_audience bigint, p_namespace text[],
                                                      p_key text)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _lock('store', array[p_scope || ':' || coalesce(p_audience, 0) || ':' || md5(p_namespace::text || p_key)]);
end
$$;
comment on function __tenant__._lock_store_key(text, bigint, text[], text) is
    'Internal: holds a store key of a partition to the end of the transaction (store_put, store_restore).';

-- A put of a live item's key: its old body and value kept as its revision
-- (registered against everything the item came from, and p_observations, the
-- turns of this write), the new value and its text made current.
create or replace function __tenant__._store_revise(p_old __tenant__.memory, p_principal_id bigint, p_value jsonb,
                                                    p_observations bigint[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    insert into memory_revision (memory_id, revision, kind, title, body, confidence, changed_by, reason, store_value)
    values (_unkept_on_citus(p_old.id), p_old.revision, p_old.kind, p_old.title, p_old.body, p_old.confidence,
            p_principal_id, 'put through the store', p_old.store_value);
    perform _register('memory_revision', p_old.id || ':' || p_old.revision,
                      _memory_observations(array[p_old.id]) || coalesce(p_observations, '{}'));
    update memory m
       set body = _trim(_store_text(p_value)), store_value = p_value, revision = m.revision + 1, updated_at = now()
     where m.id = p_old.id;
end
$$;
comment on function __tenant__._store_revise(__tenant__.memory, bigint, jsonb, bigint[]) is
    'Internal: a store item''s next value: its old body and value kept in memory_revision, the new ones current.';

-- The checks of a put's item: PR160 bad namespace, PR151 key over 1024 bytes,
-- PR102 unknown purposes, PR161 a value that is no JSON object;
-- its text, as a memory's body.
create or replace function __tenant__._check_store_item(p_namespace text[], p_key text, p_value jsonb,
                                                        p_purposes text[])
returns void
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_store_namespace(p_namespace);
    perform _check_text(p_key, 'key', 1024);
    perform _check_purposes(p_purposes);
    perform _check_json_size(p_value, 'value', (_setting_value('max_memory_bytes') #>> '{}')::bigint * 4);
    if p_value is null or jsonb_typeof(p_value) <> 'object' then
        perform _fail('PR161', format('a store value is a JSON object, not %s', coalesce(jsonb_typeof(p_value), 'NULL')),
                      'Put a dict, e.g. {"content": "..."}; to delete an item, delete it.');
    end if;
    -- its text measured as what a memory holds, and named as the store's user knows it
    perform _check_text(_store_text(p_value), 'the value''s text (its strings, one a line)',
                        (_setting_value('max_memory_bytes') #>> '{}')::bigint, 'max_memory_bytes');
    perform _check_memory_fields(_store_text(p_value), null, 1);
end
$$;
comment on function __tenant__._check_store_item(text[], text, jsonb, text[]) is
    'Internal: PR160, PR151, PR102, PR161 for a store item''s namespace, key, purposes and value; its text as a body.';

-- A put: the item at (scope, audience, namespace, key) gets this value. A new
-- key is a new memory (kind note, origin told, the given purposes); a live key
-- is a revision of its memory (status 'revised'; 'unchanged', with nothing
-- written, when the value is the same); a key whose live item may not be used
-- for every one of these purposes is refused (PR162) rather than changed.
create or replace function __tenant__.store_put(
    p_principal    text,
    p_scopes       text[],
    p_scope        text,
    p_namespace    text[],
    p_key          text,
    p_value        jsonb,
    p_purposes     text[],
    p_shared       boolean default false,   -- true: the whole scope's item; false: the principal's own
    p_source_role  text default 'assistant' -- the role the write is logged in
)
returns table (memory_id bigint, revision integer, status text)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_audience bigint := case when p_shared then null else v_principal end;
    v_old memory;
    v_text text;
    v_offset bigint;
    v_obs bigint;
    v_id bigint;
    v_row bigint;
begin
    perform _check_store_call(p_scopes, p_scope);
    perform _check_store_item(p_namespace, p_key, p_value, p_purposes);
    v_text := _store_text(p_value);
    -- Two puts of one key wait for each other here, so the second revises what the first wrote.
    perform _lock_store_key(p_scope, v_audience, p_namespace, p_key);
    select m.* into v_old from memory m
     where m.scope = p_scope and coalesce(m.audience_peer_id, 0) = coalesce(v_audience, 0)
       and m.store_namespace = p_namespace and m.store_key = p_key
       and m.invalidated_at is null and m.superseded_by is null
       for update;
    if v_old.id is not null and not (p_purposes <@ v_old.purposes) then
        perform _fail('PR162', format('key %s of namespace %s is held by memory %s, which may be used for %s only',
                                      quote_literal(_clip(p_key, 100)), _clip(p_namespace::text, 200), v_old.id,
                                      array_to_string(v_old.purposes, ', ')),
                      'Put it through a store whose purposes the item allows, or delete the item first.');
    end if;
    if v_old.id is not null and v_old.store_value = p_value then
        return query select v_old.id, v_old.revision, 'unchanged'::text;
        return;
    end if;
    select b.log_offset into v_offset
      from _append_batch(p_principal, p_scope, jsonb_build_array(jsonb_build_object(
               'body', v_text, 'source_role', p_source_role, 'kind', 'note',
               'payload', jsonb_build_object('store', jsonb_build_object('namespace', p_namespace, 'key', p_key)),
               'audience', case when not p_shared then jsonb_build_array(p_principal) end))) b;
    select o.id into v_obs from observation o where o.scope = p_scope and o.log_offset = v_offset;
    if v_old.id is null then
        perform set_config('pgrecall.memory_vectors_given', 'off', true);  -- queued whatever the session set (_memory_changed)
        insert into memory (scope, kind, body, origin, audience_peer_id, purposes, created_by,
                            store_namespace, store_key, store_value)
        values (p_scope, 'note', _trim(v_text), 'told', v_audience, p_purposes, v_principal,
                p_namespace, p_key, p_value)
        returning id into v_id;
    else
        v_id := v_old.id;
        perform _store_revise(v_old, v_principal, p_value, array[v_obs]);
    end if;
    -- The item comes from each write of it: erasing any of them erases the item.
    perform _register('memory', v_id::text, array[v_obs]);
    insert into memory_link (memory_id, link_type, target_observation_id)
    values (v_id, 'derived_from', v_obs) returning id into v_row;
    perform _register('memory_link', v_row::text, array[v_obs]);
    return query select m.id, m.revision, case when v_old.id is null then 'created' else 'revised' end
                   from memory m where m.id = v_id;
end
$$;
comment on function __tenant__.store_put(text, text[], text, text[], text, jsonb, text[], boolean, text) is
    'Puts a store item (LangGraph''s BaseStore): a new key is a new memory, a live key a revision of its memory '
    '(its old value kept); the write is logged as a note and cited. PR160 bad namespace, PR161 value not a JSON '
    'object, PR151 key over 1024 bytes, PR162 key held by an item not usable for these purposes.';

-- An item of an export, made again by its import (pgrecall import --export),
-- which replays the puts that made it without writing their notes again: the
-- export's notes are imported as turns, and the memory written from them cites
-- them. The memory at p_revision (one the principal may see, live, for the
-- principal alone or for the whole scope) becomes the item p_namespace,
-- p_key with the value p_value; once it is that item, each call is a put of
-- its next value (its revision + 1, the old body and value kept as store_put
-- keeps them). The item's partition is the memory's scope and audience.
-- Returns the memory's revision. Refused as a put is: PR160, PR151, PR161;
-- PR162 when another live item of the partition holds the key here (an import
-- never takes over an item it did not write); PR105 a stale revision, PR108 a
-- memory not live, PR107 a memory for another peer or already another item.
create or replace function __tenant__.store_restore(
    p_principal  text,
    p_scopes     text[],
    p_memory_id  bigint,
    p_revision   integer,
    p_namespace  text[],
    p_key        text,
    p_value      jsonb
)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_old memory;
    v_held bigint;
begin
    if p_revision is null then
        perform _fail('PR107', 'store_restore needs the revision of the memory it restores (p_revision)');
    end if;
    v_old := _lock_for_revision(v_principal, p_scopes, p_memory_id, p_revision, true);
    perform _check_store_item(p_namespace, p_key, p_value, v_old.purposes);
    if coalesce(v_old.audience_peer_id, v_principal) <> v_principal then
        perform _fail('PR107', format('memory %s is for another peer alone: a store item is its writer''s own or '
                                      'the whole scope''s', p_memory_id));
    end if;
    if v_old.store_key is not null and (v_old.store_namespace <> p_namespace or v_old.store_key <> p_key) then
        perform _fail('PR107', format('memory %s is the item %s of namespace %s, not %s of %s', p_memory_id,
                                      quote_literal(_clip(v_old.store_key, 100)), _clip(v_old.store_namespace::text, 200),
                                      quote_literal(_clip(p_key, 100)), _clip(p_namespace::text, 200)));
    end if;
    perform _lock_store_key(v_old.scope, v_old.audience_peer_id, p_namespace, p_key);
    if v_old.store_key is not null then
        perform _store_revise(v_old, v_principal, p_value, '{}');
    else
        select m.id into v_held from memory m
         where m.scope = v_old.scope and coalesce(m.audience_peer_id, 0) = coalesce(v_old.audience_peer_id, 0)
           and m.store_namespace = p_namespace and m.store_key = p_key
           and m.invalidated_at is null and m.superseded_by is null;
        if v_held is not null then
            perform _fail('PR162', format('key %s of namespace %s is held by memory %s here already',
                                          quote_literal(_clip(p_key, 100)), _clip(p_namespace::text, 200), v_held),
                          'Delete that item first, or import into another tenant.');
        end if;
        update memory m set store_namespace = p_namespace, store_key = p_key, store_value = p_value
         where m.id = p_memory_id;
    end if;
    return (select m.revision from memory m where m.id = p_memory_id);
end
$$;
comment on function __tenant__.store_restore(text, text[], bigint, integer, text[], text, jsonb) is
    'An export''s store item made again by its import: a memory the principal may see becomes the item (namespace, '
    'key, value), or the item''s next value is put as a revision, without logging a note. PR160, PR151, PR161 as a '
    'put; PR162 the key held here by another live item; PR105 stale revision; PR108 not live.';

-- Whether a memory (its columns) is a live store item of a partition (a
-- scope, and the principal's own or the whole scope's) that the principal may
-- use for the purpose (NULL: any): the store's reads apply eligibility here.
-- An expression on the row's columns, as _memory_eligible, so the planner
-- inlines it and the caller's query names the memory table itself.
create or replace function __tenant__._store_item_usable(
    p_scope text, p_audience_peer_id bigint, p_purposes text[], p_invalidated_at timestamptz,
    p_superseded_by bigint, p_valid tstzrange, p_store_key text,
    p_principal_id bigint, p_scopes text[], p_partition_scope text, p_shared boolean, p_purpose text)
returns boolean
language sql stable
as $$
    select p_store_key is not null
       and p_scope = p_partition_scope
       and coalesce(p_audience_peer_id, 0) = case when p_shared then 0 else p_principal_id end
       and __tenant__._memory_eligible(p_scope, p_audience_peer_id, p_purposes, p_invalidated_at, p_superseded_by,
                                       p_valid, p_principal_id, p_scopes, p_purpose, false, null)
$$;
comment on function __tenant__._store_item_usable(text, bigint, text[], timestamptz, bigint, tstzrange, text, bigint,
                                                  text[], text, boolean, text) is
    'Internal: whether a memory is a live store item of the partition that the principal may use for the purpose.';

create or replace function __tenant__.store_get(
    p_principal  text,
    p_scopes     text[],
    p_scope      text,
    p_namespace  text[],
    p_key        text,
    p_purpose    text default 'converse',
    p_shared     boolean default false
)
returns table (namespace text[], key text, value jsonb, created_at timestamptz, updated_at timestamptz,
               memory_id bigint, revision integer)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
begin
    perform _check_store_call(p_scopes, p_scope);
    perform _check_purpose(p_purpose);
    perform _check_texts(p_namespace, 'namespace label', 200, 16);
    perform _check_length(p_key, 'key', 1024);
    return query
    select m.store_namespace, m.store_key, m.store_value, m.created_at, m.updated_at, m.id, m.revision
      from memory m
     where _store_item_usable(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                              m.store_key, v_principal, p_scopes, p_scope, p_shared, p_purpose)
       and m.store_namespace = p_namespace and m.store_key = p_key;
end
$$;
comment on function __tenant__.store_get(text, text[], text, text[], text, text, boolean) is
    'A store item by namespace and key, if the principal may use it for the purpose; none otherwise (a hidden '
    'item answers exactly as a missing one).';

create or replace function __tenant__.store_delete(
    p_principal  text,
    p_scopes     text[],
    p_scope      text,
    p_namespace  text[],
    p_key        text,
    p_shared     boolean default false,
    p_reason     text default 'deleted through the store'
)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_id bigint;
begin
    perform _check_store_call(p_scopes, p_scope);
    perform _check_texts(p_namespace, 'namespace label', 200, 16);
    perform _check_length(p_key, 'key', 1024);
    perform _check_reason(p_reason, 'a delete needs a reason', null, 2000);
    select m.id into v_id from memory m
     where _store_item_usable(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                              m.store_key, v_principal, p_scopes, p_scope, p_shared, null)
       and m.store_namespace = p_namespace and m.store_key = p_key;
    if v_id is null then
        return null;  -- nothing there (or nothing this principal may see): as LangGraph, not an error
    end if;
    perform forget(p_principal, p_scopes, v_id, p_reason);
    return v_id;
end
$$;
comment on function __tenant__.store_delete(text, text[], text, text[], text, boolean, text) is
    'Deletes a store item: forgets its memory (kept as history, its key free again). Returns the memory id, '
    'NULL when there was no such item the principal may see.';

-- The store's items among recall's answer, in its order (rank), with recall's score.
create or replace function __tenant__._store_recalled(p_items __tenant__.recall_item[], p_principal_id bigint,
                                                      p_scopes text[], p_scope text, p_shared boolean,
                                                      p_purpose text, p_prefix text[], p_filter jsonb)
returns table (namespace text[], key text, value jsonb, created_at timestamptz, updated_at timestamptz,
               score double precision, memory_id bigint, revision integer, rank integer)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    -- PL/pgSQL, not SQL: Citus cannot plan an SQL function with parameters that reads a table
    return query
    select m.store_namespace, m.store_key, m.store_value, m.created_at, m.updated_at, r.score, m.id, m.revision,
           r.rank
      from unnest(p_items) r
      join memory m on m.id = r.memory_id
     where r.item = 'memory'
       and _store_item_usable(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                              m.store_key, p_principal_id, p_scopes, p_scope, p_shared, p_purpose)
       and m.store_namespace[1:cardinality(p_prefix)] = p_prefix
       and (p_filter is null or _store_value_matches(m.store_value, p_filter));
end
$$;
comment on function __tenant__._store_recalled(__tenant__.recall_item[], bigint, text[], text, boolean, text, text[],
                                               jsonb) is
    'Internal: the live store items of a partition among recall''s items, with their rank and score.';

-- The items under a namespace prefix that meet a filter. Without a query, the
-- most recently changed first (as LangGraph's PostgresStore). With one, in
-- the order of recall (hybrid: BM25 and the dense arm fused, the permission
-- walk applied), recall's score as the item's: recall ranks the principal's
-- memories of the partition's scope, and the store keeps its items among
-- them: recall's first max(20, 2 x (offset + limit)) rows, or when other
-- memories crowd the page out, its first walk_depth rows.
create or replace function __tenant__.store_search(
    p_principal         text,
    p_scopes            text[],
    p_scope             text,
    p_namespace_prefix  text[] default '{}',
    p_filter            jsonb default null,
    p_limit             integer default 10,
    p_offset            integer default 0,
    p_query             text default null,
    p_purpose           text default 'converse',
    p_shared            boolean default false,
    p_query_embedding   double precision[] default null,
    p_query_model       text default null
)
returns table (namespace text[], key text, value jsonb, created_at timestamptz, updated_at timestamptz,
               score double precision, memory_id bigint, revision integer)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_prefix text[] := coalesce(p_namespace_prefix, '{}');
    v_walk integer;
    v_depth integer;
    v_items recall_item[];
begin
    perform _check_store_call(p_scopes, p_scope, p_filter);
    perform _check_purpose(p_purpose);
    perform _check_texts(v_prefix, 'namespace label', 200, 16);
    perform _check_limit(p_limit, 1000);
    perform _check_length(p_query_model, 'query model', 800);  -- recall reads it only with an embedding
    if p_offset is null or p_offset < 0 or p_offset > 1000000 then
        perform _fail('PR150', format('offset must be 0 to 1000000, not %s', coalesce(p_offset::text, 'NULL')));
    end if;
    if p_query is null or _trim(p_query) = '' then
        return query
        select m.store_namespace, m.store_key, m.store_value, m.created_at, m.updated_at, null::double precision,
               m.id, m.revision
          from memory m
         where _store_item_usable(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                                  m.store_key, v_principal, p_scopes, p_scope, p_shared, p_purpose)
           and m.store_namespace[1:cardinality(v_prefix)] = v_prefix
           and (p_filter is null or _store_value_matches(m.store_value, p_filter))
         order by m.updated_at desc, m.id desc
         offset p_offset limit p_limit;
        return;
    end if;
    -- Recall first as deep as the page needs (twice it, at least 20): in a scope that holds mostly store
    -- items that is enough, and recall's cost grows with its depth. When recall filled that depth but the
    -- store's items among it do not fill the page, other memories crowded them out: recall again, as deep
    -- as the permission walk goes.
    v_walk := (_setting_value('walk_depth') #>> '{}')::integer;
    v_depth := least(v_walk, greatest(20, 2 * (p_offset + p_limit)));
    v_items := (recall_answer(p_principal, array[p_scope], p_query, p_purpose, p_query_embedding, null, v_depth,
                              false, null, p_query_model)).items;
    if v_depth < v_walk and cardinality(v_items) >= v_depth
       and (select count(*) from _store_recalled(v_items, v_principal, p_scopes, p_scope, p_shared, p_purpose,
                                                 v_prefix, p_filter)) < p_offset + p_limit then
        v_items := (recall_answer(p_principal, array[p_scope], p_query, p_purpose, p_query_embedding, null, v_walk,
                                  false, null, p_query_model)).items;
    end if;
    return query
    select r.namespace, r.key, r.value, r.created_at, r.updated_at, r.score, r.memory_id, r.revision
      from _store_recalled(v_items, v_principal, p_scopes, p_scope, p_shared, p_purpose, v_prefix, p_filter) r
     order by r.rank
     offset p_offset limit p_limit;
end
$$;
comment on function __tenant__.store_search(text, text[], text, text[], jsonb, integer, integer, text, text, boolean,
                                            double precision[], text) is
    'Store items under a namespace prefix that meet a filter (LangGraph''s operators): newest first, or with a '
    'query in the order of hybrid recall over the principal''s memories of the scope.';

-- The namespaces that hold items the principal may use, as LangGraph lists
-- them: each meeting the prefix and suffix conditions ("*" any one label),
-- cut to max_depth labels, distinct, sorted label by label in code-point order.
create or replace function __tenant__.store_list_namespaces(
    p_principal  text,
    p_scopes     text[],
    p_scope      text,
    p_prefix     text[] default null,
    p_suffix     text[] default null,
    p_max_depth  integer default null,
    p_limit      integer default 100,
    p_offset     integer default 0,
    p_purpose    text default 'converse',
    p_shared     boolean default false
)
returns table (namespace text[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_prefix text[] := _check_store_path(p_prefix, 'prefix');
    v_suffix text[] := _check_store_path(p_suffix, 'suffix');
begin
    perform _check_store_call(p_scopes, p_scope);
    perform _check_purpose(p_purpose);
    perform _check_limit(p_limit, 10000);
    if p_max_depth is not null and (p_max_depth < 1 or p_max_depth > 16) then
        perform _fail('PR150', format('max_depth must be 1 to 16, not %s', p_max_depth));
    end if;
    if p_offset is null or p_offset < 0 or p_offset > 1000000 then
        perform _fail('PR150', format('offset must be 0 to 1000000, not %s', coalesce(p_offset::text, 'NULL')));
    end if;
    return query
    select n.ns
      from (select distinct m.store_namespace[1:coalesce(p_max_depth, 16)] collate "C" as ns
              from memory m
             where _store_item_usable(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by,
                                      m.valid, m.store_key, v_principal, p_scopes, p_scope, p_shared, p_purpose)
               and _store_path_matches(m.store_namespace, v_prefix, false)
               and _store_path_matches(m.store_namespace, v_suffix, true)) n
     order by n.ns
     offset p_offset limit p_limit;
end
$$;
comment on function __tenant__.store_list_namespaces(text, text[], text, text[], text[], integer, integer, integer,
                                                     text, boolean) is
    'The namespaces of the store items the principal may use: prefix and suffix conditions ("*" any label), cut to '
    'max_depth labels, distinct, in code-point order.';
