-- Conversation history for the OpenAI Agents SDK's Session protocol
-- (pgrecall.integrations.openai_agents): its items are turns of a pgrecall
-- session, in log order. Each item is kept whole in its turn's payload
-- ({"agents_item": ...}) and its text is the turn's body, so message search
-- finds it. The log stays append-only: pop_item and clear_session append a
-- retraction turn (kind event, payload {"agents_retract": [offsets]}) that
-- hides those items from agent_session_items and is itself in the log. No
-- turn is updated or deleted here; only erasure deletes.

-- The text of an item: a message's content (a string, or its parts' texts),
-- a tool call's output or arguments; else its JSON text.
create or replace function __tenant__._agent_item_text(p_item jsonb)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(
        nullif(btrim(case jsonb_typeof(p_item -> 'content')
                         when 'string' then p_item ->> 'content'
                         when 'array' then (select string_agg(c ->> 'text', E'\n')
                                              from jsonb_array_elements(p_item -> 'content') c
                                             where jsonb_typeof(c -> 'text') = 'string') end), ''),
        nullif(btrim(case when jsonb_typeof(p_item -> 'output') = 'string' then p_item ->> 'output' end), ''),
        nullif(btrim(case when jsonb_typeof(p_item -> 'arguments') = 'string' then p_item ->> 'arguments' end), ''),
        p_item::text)
$$;
comment on function __tenant__._agent_item_text(jsonb) is
    'Internal: the searchable text of an Agents SDK item: its content, its output or arguments, else its JSON.';

-- The session of that name in the scope, with the principal and the user in
-- it: made on first use. A session of that name the principal is not in is
-- refused as one it may not see (PR122).
create or replace function __tenant__.agent_session_open(p_principal text, p_scopes text[], p_scope text,
                                                         p_name text, p_user text)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_user bigint := _peer_id(p_user, 'user');
    v_session bigint;
begin
    perform _check_write_scope(p_scope, p_scopes);
    perform _check_text(p_name, 'session id', 800, null, 'a session id may not be blank');
    -- two first uses of one id at once: the second waits here, then finds the first's session
    perform _lock('agent_session', array[p_scope || ':' || p_name]);
    select s.id into v_session from session s where s.scope = p_scope and s.name = p_name;
    if v_session is null then
        v_session := create_session(p_principal, p_scopes, p_scope, p_name);
        perform add_session_peers(p_principal, p_scopes, v_session, jsonb_build_array(p_principal));
    elsif not exists (select 1 from session_peer sp where sp.session_id = v_session and sp.peer_id = v_principal
                                                      and sp.left_at is null) then
        perform _fail('PR122', format('peer %s is not in session %s', quote_literal(p_principal),
                                      quote_literal(_clip(p_name, 200))));
    end if;
    if not exists (select 1 from session_peer sp where sp.session_id = v_session and sp.peer_id = v_user
                                                   and sp.left_at is null) then
        perform add_session_peers(p_principal, p_scopes, v_session, jsonb_build_array(p_user));
    end if;
    return v_session;
end
$$;
comment on function __tenant__.agent_session_open(text, text[], text, text, text) is
    'The session named p_name in the scope (an Agents SDK session id), made with the principal and the user on first '
    'use; PR122 when such a session exists and the principal is not in it.';

-- The session's row, locked, if the principal is in it (PR122 otherwise): a
-- pop, a clear and an add of one session take turns.
create or replace function __tenant__._agent_session_locked(p_principal text, p_scopes text[], p_session bigint)
returns __tenant__.session
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session session;
begin
    perform _session_of(p_principal, p_scopes, p_session);
    select s.* into v_session from session s where s.id = p_session for update;
    -- only a peer of the session changes what its history shows
    if not exists (select 1 from session_peer sp join peer p on p.id = sp.peer_id
                    where sp.session_id = p_session and p.name = normalize(p_principal, NFC) and sp.left_at is null) then
        perform _fail('PR122', format('peer %s is not in session %s', quote_literal(_clip(p_principal, 200)), p_session));
    end if;
    return v_session;
end
$$;
comment on function __tenant__._agent_session_locked(text, text[], bigint) is
    'Internal: the session a principal is in, its row locked to the end of the transaction.';

create or replace function __tenant__.agent_session_add(p_principal text, p_scopes text[], p_session bigint,
                                                        p_items jsonb, p_user text)
returns bigint[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session session := _agent_session_locked(p_principal, p_scopes, p_session);
begin
    perform _check_json_size(p_items, 'items', 16 * 1048576);
    perform _check_object_array(p_items, 'items', 'Each item is an Agents SDK input item: a JSON object.');
    perform _check_text(p_user, 'user', 800);
    -- A user's message is the user's turn; everything else the principal's (the agent's), as the role it was
    -- in: system and developer messages 'system', a tool's output 'tool', the rest 'assistant'.
    return array(
        select b.log_offset
          from _append_batch(p_principal, v_session.scope, (
                   select coalesce(jsonb_agg(jsonb_build_object(
                              'body', _agent_item_text(i.item),
                              'source_role', case when i.item ->> 'role' = 'user' then 'user'
                                                  when i.item ->> 'role' in ('system', 'developer') then 'system'
                                                  when i.item ->> 'type' = 'function_call_output' then 'tool'
                                                  else 'assistant' end,
                              'actor', case when i.item ->> 'role' = 'user' then p_user else p_principal end,
                              'kind', 'message', 'session_id', p_session,
                              'payload', jsonb_build_object('agents_item', i.item)) order by i.n), '[]')
                     from jsonb_array_elements(p_items) with ordinality i(item, n))) b
         order by b.ordinal);
end
$$;
comment on function __tenant__.agent_session_add(text, text[], bigint, jsonb, text) is
    'Appends Agents SDK items to a session as its turns, each kept whole (payload agents_item) with its text as the '
    'body; a user message is p_user''s turn, the rest the principal''s. Returns their log offsets, in order.';

-- The session's items the principal may see and no retraction hides, in log
-- order; with p_limit, the last p_limit of them, still in log order (0: none,
-- as the Agents SDK's sessions read a limit of 0: no history).
create or replace function __tenant__.agent_session_items(p_principal text, p_scopes text[], p_session bigint,
                                                          p_limit integer default null)
returns table (log_offset bigint, item jsonb)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_scope text := (_session_of(p_principal, p_scopes, p_session)).scope;
begin
    if p_limit < 0 or p_limit > 1000000 then
        perform _fail('PR150', format('limit must be 0 to 1000000, not %s', p_limit),
                      'The last N items; 0 for none, NULL for all.');
    end if;
    return query
    select v.log_offset, v.item from (
        select o.log_offset, o.payload -> 'agents_item' as item
          from observation o
         where o.scope = v_scope and o.session_id = p_session and o.payload ? 'agents_item'
           and _observation_eligible(o.scope, o.audience, v_principal, p_scopes)
           and not exists (select 1 from observation r
                            where r.scope = v_scope and r.session_id = p_session and r.log_offset > o.log_offset
                              and r.payload -> 'agents_retract' @> to_jsonb(o.log_offset))
         order by o.log_offset desc
         limit p_limit) v
     order by v.log_offset;
end
$$;
comment on function __tenant__.agent_session_items(text, text[], bigint, integer) is
    'The Agents SDK items of a session the principal may see, less those a retraction hides, in log order (with '
    'p_limit, the last p_limit, in order; 0: none).';

-- Retracts items: appends one turn that hides them (they stay in the log).
create or replace function __tenant__._agent_session_retract(p_principal text, p_session __tenant__.session,
                                                             p_offsets bigint[], p_why text)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _append_batch(p_principal, p_session.scope, jsonb_build_array(jsonb_build_object(
        'body', format('%s: turn%s %s retracted', p_why, case when cardinality(p_offsets) > 1 then 's' else '' end,
                       array_to_string(p_offsets, ', ')),
        'source_role', 'system', 'kind', 'event', 'session_id', p_session.id,
        'payload', jsonb_build_object('agents_retract', to_jsonb(p_offsets), 'why', p_why))));
end
$$;
comment on function __tenant__._agent_session_retract(text, __tenant__.session, bigint[], text) is
    'Internal: appends the retraction turn that hides a session''s items from agent_session_items.';

create or replace function __tenant__.agent_session_pop(p_principal text, p_scopes text[], p_session bigint)
returns table (log_offset bigint, item jsonb)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session session := _agent_session_locked(p_principal, p_scopes, p_session);
    v_last record;
begin
    select i.log_offset, i.item into v_last from agent_session_items(p_principal, p_scopes, p_session, 1) i;
    if v_last.log_offset is null then
        return;
    end if;
    perform _agent_session_retract(p_principal, v_session, array[v_last.log_offset], 'pop_item');
    return query select v_last.log_offset, v_last.item;
end
$$;
comment on function __tenant__.agent_session_pop(text, text[], bigint) is
    'Hides the session''s last visible item by appending a retraction turn, and returns it (no row when none is left).';

create or replace function __tenant__.agent_session_clear(p_principal text, p_scopes text[], p_session bigint)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session session := _agent_session_locked(p_principal, p_scopes, p_session);
    v_offsets bigint[];
begin
    v_offsets := array(select i.log_offset from agent_session_items(p_principal, p_scopes, p_session) i);
    if cardinality(v_offsets) > 0 then
        perform _agent_session_retract(p_principal, v_session, v_offsets, 'clear_session');
    end if;
    return cardinality(v_offsets);
end
$$;
comment on function __tenant__.agent_session_clear(text, text[], bigint) is
    'Hides every visible item of the session by appending one retraction turn; returns how many it hid.';
