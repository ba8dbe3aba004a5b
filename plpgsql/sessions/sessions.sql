-- Sessions and the peers in them (design section 5).
--
-- A session lives in one scope; its messages are observations of that scope
-- with its id. Each session peer carries two flags: observe the others
-- (default off) and be observed by the others (default on); each peer has
-- one more, be observed globally (default on). Defaults come from the tenant
-- settings observe_others, observed_by_others and observed_globally.
--
-- The database enforces max_peers_in_session: the session_peer trigger counts
-- active peers on the session row, so concurrent joins queue on that row and
-- the one that would exceed the limit fails with PR121.
--
-- SQLSTATEs of this file and work_queue.sql:
--   PR120 unknown session       PR121 session full          PR122 peer not in session
--   PR123 task lease lost       PR124 unknown task

create or replace function __tenant__._session_row(p_session bigint, p_scopes text[])
returns __tenant__.session
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session session;
begin
    perform _check_scopes(p_scopes);
    if p_session is null then
        perform _fail('PR120', 'a session id is required', 'Create a session with create_session().');
    end if;
    select * into v_session from session s where s.id = p_session;
    if v_session.id is null then
        perform _fail('PR120', format('unknown session %s', p_session), 'Create a session with create_session().');
    end if;
    if not (v_session.scope = any (p_scopes)) then
        perform _fail('PR103', format('session %s belongs to scope %s, which is not in the authorised set %s',
                                      p_session, quote_literal(v_session.scope), p_scopes::text));
    end if;
    return v_session;
end
$$;
comment on function __tenant__._session_row(bigint, text[]) is
    'Internal: the session, or PR120 if it does not exist, PR103 if its scope is not authorised.';

-- What every session operation checks first, in this order: the principal
-- is a peer (PR101), then the session exists in an authorised scope.
create or replace function __tenant__._session_of(p_principal text, p_scopes text[], p_session bigint)
returns __tenant__.session
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _peer_id(p_principal);
    return _session_row(p_session, p_scopes);
end
$$;
comment on function __tenant__._session_of(text, text[], bigint) is
    'Internal: the session a principal names (PR101 unknown principal, then as _session_row).';

-- Keeps session.active_peers and enforces the peer limit. The update of the
-- session row serialises concurrent joins (and fails them under REPEATABLE
-- READ rather than letting both pass).
create or replace function __tenant__._session_peer_counted()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_delta integer;
    v_session bigint;
    v_count integer;
    v_max integer;
begin
    if tg_op = 'INSERT' then
        v_delta := (new.left_at is null)::integer;
        v_session := new.session_id;
    elsif tg_op = 'DELETE' then
        v_delta := -(old.left_at is null)::integer;
        v_session := old.session_id;
    else
        v_delta := (new.left_at is null)::integer - (old.left_at is null)::integer;
        v_session := new.session_id;
    end if;
    if v_delta = 0 then
        return null;
    end if;
    update session s set active_peers = s.active_peers + v_delta where s.id = v_session
    returning s.active_peers into v_count;
    v_max := (_setting_value('max_peers_in_session') #>> '{}')::integer;
    if v_delta > 0 and v_count > v_max then
        perform _fail('PR121', format('session %s is full: it holds at most %s peers', v_session, v_max),
                      'Remove a peer first, or raise setting max_peers_in_session with pgrecall.set_tenant_setting().');
    end if;
    return null;
end
$$;
comment on function __tenant__._session_peer_counted() is
    'Internal trigger: counts active peers on the session row and refuses more than max_peers_in_session (PR121).';

create or replace trigger session_peer_counted after insert or update of left_at or delete on __tenant__.session_peer
    for each row execute function __tenant__._session_peer_counted();

-- p_data_subject_id: whose personal data the name and metadata are; erasing
-- that subject clears them (plpgsql/erasure/erase.sql). Without it, the principal's
-- data subject (a peer created with one passes it on), and every peer that
-- joins adds its own (add_session_peers): a session's name may speak of
-- anyone in it.
create or replace function __tenant__.create_session(p_principal text, p_scopes text[], p_scope text,
                                                    p_name text default null, p_metadata jsonb default '{}',
                                                    p_data_subject_id text default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_id bigint;
    v_subject text;
begin
    v_subject := coalesce(_check_subject(p_data_subject_id), _peer_subject(_peer_id(p_principal)));
    perform _check_write_scope(p_scope, p_scopes);
    if p_metadata is null or jsonb_typeof(p_metadata) <> 'object' then
        perform _fail('PR107', 'session metadata must be a JSON object');
    end if;
    perform _check_json_size(p_metadata, 'session metadata', 65536);
    if p_name is not null and (char_length(p_name) > 200 or _trim(p_name) = '') then
        perform _fail('PR107', format('invalid session name %s', quote_literal(_clip(p_name, 200))),
                      'A session name has 1 to 200 characters, or is NULL for a generated one.');
    end if;
    if p_name is null then
        v_id := nextval(pg_get_serial_sequence('__tenant__.session', 'id'));
        insert into session (id, scope, name, metadata, data_subject_ids)
        values (_unkept_on_citus(v_id), p_scope, 'session ' || v_id, p_metadata, _with_subject('{}', v_subject));
        return v_id;
    end if;
    insert into session as s (scope, name, metadata, data_subject_ids)
    values (p_scope, p_name, p_metadata, _with_subject('{}', v_subject))
    on conflict on constraint session_name_unique do update
        set metadata = s.metadata || excluded.metadata,
            data_subject_ids = _with_subject(s.data_subject_ids, v_subject)
    returning s.id into v_id;
    return v_id;
end
$$;
comment on function __tenant__.create_session(text, text[], text, text, jsonb, text) is
    'Creates a session in a scope (or, for an existing name, merges metadata into it) and returns its id; '
    'erasing its data subject (p_data_subject_id, else the principal''s, and those of the peers who join) clears the name and metadata.';

-- A boolean flag from a JSON object: absent or null gives NULL; anything but
-- a boolean is PR107.
create or replace function __tenant__._flag(p_object jsonb, p_key text, p_what text)
returns boolean
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_object is null or not (p_object ? p_key) or jsonb_typeof(p_object -> p_key) = 'null' then
        return null;
    end if;
    if jsonb_typeof(p_object -> p_key) <> 'boolean' then
        perform _fail('PR107', format('%s %s must be true or false, not %s', p_what, p_key, p_object -> p_key));
    end if;
    return (p_object ->> p_key)::boolean;
end
$$;
comment on function __tenant__._flag(jsonb, text, text) is 'Internal: a boolean flag of a JSON object (NULL when absent), or PR107.';

-- add_session_peers' step for the peers not in the session yet: they join with their flags, else
-- the call's defaults, else the tenant's (those already in it conflict and keep their row). Read
-- first, inserted from arrays: Citus 14 sends an INSERT ... SELECT that reads a table of a
-- distributed schema to the shard with a filter it cannot spell (`WHERE ( IS NOT NULL)`).
create or replace function __tenant__._session_peers_join(p_session_id bigint, p_items jsonb, p_observe boolean,
                                                          p_observed boolean)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_observe boolean := coalesce(p_observe, (_setting_value('observe_others') #>> '{}')::boolean);
    v_observed boolean := coalesce(p_observed, (_setting_value('observed_by_others') #>> '{}')::boolean);
    v_peer_ids bigint[];
    v_observes boolean[];
    v_observeds boolean[];
begin
    select coalesce(array_agg(p.id order by p.id), '{}'),
           array_agg(coalesce(_flag(e, 'observe_others', ''), v_observe) order by p.id),
           array_agg(coalesce(_flag(e, 'observed_by_others', ''), v_observed) order by p.id)
      into v_peer_ids, v_observes, v_observeds
      from jsonb_array_elements(p_items) e join peer p on p.name = e ->> 'peer'
     where not exists (select 1 from session_peer sp where sp.session_id = p_session_id and sp.peer_id = p.id);
    insert into session_peer (session_id, peer_id, observe_others, observed_by_others)
    select p_session_id, x.peer_id, x.observe_others, x.observed_by_others
      from unnest(v_peer_ids, v_observes, v_observeds) as x(peer_id, observe_others, observed_by_others)
     order by x.peer_id
    on conflict (session_id, peer_id) do nothing;
end
$$;
comment on function __tenant__._session_peers_join(bigint, jsonb, boolean, boolean) is
    'Internal: the peers of a list not yet in a session join it, with their flags or the defaults.';

create or replace function __tenant__.add_session_peers(p_principal text, p_scopes text[], p_session bigint,
                                                       p_peers jsonb, p_defaults jsonb default '{}')
returns table (peer text, observe_others boolean, observed_by_others boolean, joined_at timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_session session;
    v_items jsonb;
    v_bad record;
    v_default_observe boolean;
    v_default_observed boolean;
    v_now timestamptz := now();  -- taken first: Citus refuses a function that is not immutable in an UPDATE's CASE
begin
    v_session := _session_of(p_principal, p_scopes, p_session);
    if p_peers is null or jsonb_typeof(p_peers) <> 'array' then
        perform _fail('PR107', 'peers must be a JSON array of peer names or objects',
                      'E.g. ["ana", {"peer": "bob", "observe_others": true}].');
    end if;
    if p_defaults is null or jsonb_typeof(p_defaults) <> 'object' then
        perform _fail('PR107', 'the defaults must be a JSON object', 'Keys: observe_others, observed_by_others.');
    end if;
    perform _check_keys(jsonb_build_array(p_defaults), array['observe_others', 'observed_by_others'], 'defaults');
    v_default_observe := _flag(p_defaults, 'observe_others', 'default');
    v_default_observed := _flag(p_defaults, 'observed_by_others', 'default');
    -- Peer names in NFC, the form they are stored in.
    v_items := (select coalesce(jsonb_agg(case when jsonb_typeof(e) = 'string'
                                               then jsonb_build_object('peer', normalize(e #>> '{}', NFC))
                                               when jsonb_typeof(e -> 'peer') = 'string'
                                               then jsonb_set(e, '{peer}', to_jsonb(normalize(e ->> 'peer', NFC)))
                                               else e end order by n), '[]')
                  from jsonb_array_elements(p_peers) with ordinality as x(e, n));
    perform _check_object_array(v_items, 'peers', 'Each peer: a name, or {"peer": name, "observe_others": bool, "observed_by_others": bool}.');
    perform _check_keys(v_items, array['peer', 'observe_others', 'observed_by_others'], 'peer');
    select x.n, x.e into v_bad from jsonb_array_elements(v_items) with ordinality as x(e, n)
     where jsonb_typeof(x.e -> 'peer') is distinct from 'string'
        or not exists (select 1 from peer p where p.name = x.e ->> 'peer')
     order by x.n limit 1;
    if v_bad.n is not null then
        if jsonb_typeof(v_bad.e -> 'peer') is distinct from 'string' then
            perform _fail('PR107', format('peer %s has no name', v_bad.n));
        end if;
        perform _fail('PR101', format('unknown peer %s', quote_literal(v_bad.e ->> 'peer')),
                      'Create it first with add_peer(name, kind).');
    end if;
    select x.e ->> 'peer' as name into v_bad from jsonb_array_elements(v_items) x(e)
     group by x.e ->> 'peer' having count(*) > 1 limit 1;
    if v_bad.name is not null then
        perform _fail('PR107', format('peer %s is listed twice', quote_literal(v_bad.name)));
    end if;
    perform _flag(e, 'observe_others', 'peer ' || (e ->> 'peer')), _flag(e, 'observed_by_others', 'peer ' || (e ->> 'peer'))
       from jsonb_array_elements(v_items) e;

    -- Peers already in the session: explicit flags change, others stay; a
    -- peer who had left joins again.
    update session_peer sp
       set observe_others = coalesce(_flag(e, 'observe_others', ''), v_default_observe, sp.observe_others),
           observed_by_others = coalesce(_flag(e, 'observed_by_others', ''), v_default_observed, sp.observed_by_others),
           joined_at = case when sp.left_at is null then sp.joined_at else v_now end,
           left_at = null
      from jsonb_array_elements(v_items) e join peer p on p.name = e ->> 'peer'
     where sp.session_id = v_session.id and sp.peer_id = p.id;

    perform _session_peers_join(v_session.id, v_items, v_default_observe, v_default_observed);

    -- The session's name and metadata may speak of anyone in it: each peer's
    -- data subjects join the session's (erasing one clears them, erase.sql).
    update session s
       set data_subject_ids = s.data_subject_ids || array(
               select u.subject from jsonb_array_elements(v_items) with ordinality as x(e, n)
                 join peer p on p.name = x.e ->> 'peer'
                cross join lateral unnest(p.data_subject_ids) with ordinality as u(subject, k)
                where not (u.subject = any (s.data_subject_ids))
                group by u.subject order by min(x.n), min(u.k))
     where s.id = v_session.id
       and exists (select 1 from jsonb_array_elements(v_items) e join peer p on p.name = e ->> 'peer'
                    where not (p.data_subject_ids <@ s.data_subject_ids));

    return query
    select p.name, sp.observe_others, sp.observed_by_others, sp.joined_at
      from jsonb_array_elements(v_items) with ordinality as x(e, n)
      join peer p on p.name = x.e ->> 'peer'
      join session_peer sp on sp.session_id = v_session.id and sp.peer_id = p.id
     order by x.n;
end
$$;
comment on function __tenant__.add_session_peers(text, text[], bigint, jsonb, jsonb) is
    'Adds peers to a session (names, or objects with per-peer flags), with defaults for flags not given; at most max_peers_in_session.';

create or replace function __tenant__.remove_session_peers(p_principal text, p_scopes text[], p_session bigint,
                                                          p_peers text[])
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session session;
    v_name text;
    v_count integer;
begin
    v_session := _session_of(p_principal, p_scopes, p_session);
    foreach v_name in array coalesce(p_peers, '{}') loop
        if not exists (select 1 from session_peer sp where sp.session_id = v_session.id
                          and sp.peer_id = _peer_id(v_name, 'leaving')) then
            perform _fail('PR122', format('peer %s is not in session %s', quote_literal(v_name), v_session.id));
        end if;
    end loop;
    update session_peer sp set left_at = now()
      from peer p
     where sp.session_id = v_session.id and sp.peer_id = p.id and sp.left_at is null
       and p.name = any (array(select normalize(n, NFC) from unnest(p_peers) n));
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__.remove_session_peers(text, text[], bigint, text[]) is
    'Peers leave a session (their rows stay, with left_at); returns how many left.';

create or replace function __tenant__.session_peers(p_principal text, p_scopes text[], p_session bigint,
                                                   p_include_left boolean default false)
returns table (peer text, kind text, joined_at timestamptz, left_at timestamptz, observe_others boolean,
               observed_by_others boolean)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session session;
begin
    v_session := _session_of(p_principal, p_scopes, p_session);
    return query
    select p.name, p.kind, sp.joined_at, sp.left_at, sp.observe_others, sp.observed_by_others
      from session_peer sp join peer p on p.id = sp.peer_id
     where sp.session_id = v_session.id and (coalesce(p_include_left, false) or sp.left_at is null)
     order by sp.joined_at, p.name;
end
$$;
comment on function __tenant__.session_peers(text, text[], bigint, boolean) is
    'The peers in a session with their flags (and, if asked, those who left).';

-- One peer's row in the session a principal names: the checks of
-- _session_of, then PR122 if the peer is not in it.
create or replace function __tenant__._session_peer_row(p_principal text, p_scopes text[], p_session bigint,
                                                       p_peer text)
returns __tenant__.session_peer
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_session_id bigint := (_session_of(p_principal, p_scopes, p_session)).id;
    v_row session_peer;
begin
    select * into v_row from session_peer sp where sp.session_id = v_session_id and sp.peer_id = _peer_id(p_peer, 'session');
    if v_row.peer_id is null then
        perform _fail('PR122', format('peer %s is not in session %s', quote_literal(p_peer), v_session_id),
                      'Add it with add_session_peers().');
    end if;
    return v_row;
end
$$;
comment on function __tenant__._session_peer_row(text, text[], bigint, text) is
    'Internal: a peer''s row in the session a principal names (as _session_of), or PR122.';

create or replace function __tenant__._session_peer_config(p_row __tenant__.session_peer)
returns __tenant__.session_peer_config
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return row(p_row.session_id, (select p.name from peer p where p.id = p_row.peer_id),
               p_row.observe_others, p_row.observed_by_others, p_row.joined_at, p_row.left_at,
               p_row.left_at is null)::session_peer_config;
end
$$;
comment on function __tenant__._session_peer_config(__tenant__.session_peer) is 'Internal: a session peer''s row as its configuration.';

create or replace function __tenant__.session_peer_config(p_principal text, p_scopes text[], p_session bigint,
                                                         p_peer text)
returns __tenant__.session_peer_config
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return _session_peer_config(_session_peer_row(p_principal, p_scopes, p_session, p_peer));
end
$$;
comment on function __tenant__.session_peer_config(text, text[], bigint, text) is
    'One peer''s configuration in a session: observe_others, observed_by_others, joined_at, left_at.';

create or replace function __tenant__.set_session_peer_config(p_principal text, p_scopes text[], p_session bigint,
                                                             p_peer text, p_config jsonb)
returns __tenant__.session_peer_config
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_row session_peer := _session_peer_row(p_principal, p_scopes, p_session, p_peer);
begin
    if p_config is null or jsonb_typeof(p_config) <> 'object' then
        perform _fail('PR107', 'a session peer config is a JSON object', 'Keys: observe_others, observed_by_others.');
    end if;
    perform _check_keys(jsonb_build_array(p_config), array['observe_others', 'observed_by_others'], 'config');
    update session_peer sp
       set observe_others = coalesce(_flag(p_config, 'observe_others', 'config'), sp.observe_others),
           observed_by_others = coalesce(_flag(p_config, 'observed_by_others', 'config'), sp.observed_by_others)
     where sp.session_id = v_row.session_id and sp.peer_id = v_row.peer_id
    returning * into v_row;
    return _session_peer_config(v_row);
end
$$;
comment on function __tenant__.set_session_peer_config(text, text[], bigint, text, jsonb) is
    'Changes one peer''s flags in a session (keys given change, others stay); returns the new configuration.';

create or replace function __tenant__.peer_config(p_peer text)
returns __tenant__.peer_config
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_id bigint := _peer_id(p_peer, 'configured');
begin
    return (select row(p.name, p.kind,
                       coalesce(p.observed_globally, (_setting_value('observed_globally') #>> '{}')::boolean),
                       p.observed_globally is null)::peer_config
              from peer p where p.id = v_id);
end
$$;
comment on function __tenant__.peer_config(text) is
    'A peer''s own flags: observed_globally (and whether it follows the tenant default).';

create or replace function __tenant__.set_peer_config(p_peer text, p_config jsonb)
returns __tenant__.peer_config
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_id bigint := _peer_id(p_peer, 'configured');
begin
    if p_config is null or jsonb_typeof(p_config) <> 'object' then
        perform _fail('PR107', 'a peer config is a JSON object', 'Key: observed_globally (true, false, or null for the tenant default).');
    end if;
    perform _check_keys(jsonb_build_array(p_config), array['observed_globally'], 'config');
    if p_config ? 'observed_globally' then
        update peer p set observed_globally = _flag(p_config, 'observed_globally', 'config') where p.id = v_id;
    end if;
    return peer_config(p_peer);
end
$$;
comment on function __tenant__.set_peer_config(text, jsonb) is
    'Sets a peer''s observed_globally flag (null: follow the tenant setting); returns the peer''s config.';

-- Messages: observations of the session's scope, each by a peer in the
-- session, queued for derivation as the flags say (work_queue.sql). Each is
-- seen by the session's peers at that moment, or by the narrower audience
-- (peer names) the message names; its sender always.
create or replace function __tenant__.add_messages(p_principal text, p_scopes text[], p_session bigint,
                                                  p_messages jsonb)
returns table (ordinal integer, log_offset bigint, tasks integer)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_session session;
    v_bad record;
    v_rows jsonb;
    v_offsets bigint[];
    v_many boolean;
begin
    v_session := _session_of(p_principal, p_scopes, p_session);
    perform _check_write_scope(v_session.scope, p_scopes);
    perform _check_object_array(p_messages, 'messages',
        'Each message: actor and body, and optionally source_role, occurred_at, payload, data_subject_id, '
        'lawful_basis, classification, retention_until, audience.');
    if jsonb_array_length(p_messages) = 0 then
        return;
    end if;
    v_many := jsonb_array_length(p_messages) > 1;
    -- Actors in NFC, the form peer names are stored in.
    p_messages := (select jsonb_agg(case when jsonb_typeof(x.e -> 'actor') = 'string'
                                         then jsonb_set(x.e, '{actor}', to_jsonb(normalize(x.e ->> 'actor', NFC)))
                                         else x.e end order by x.n)
                     from jsonb_array_elements(p_messages) with ordinality as x(e, n));
    perform _check_keys(p_messages, array['actor', 'body', 'source_role', 'occurred_at', 'payload', 'data_subject_id',
                                          'lawful_basis', 'classification', 'retention_until', 'audience'], 'message');
    perform _check_single_values(p_messages, array['audience'], 'message', array['payload']);
    -- Messages of one session are numbered (and summarised) in order.
    perform 1 from session s where s.id = v_session.id for update;

    select x.n, x.e ->> 'actor' as actor, jsonb_typeof(x.e -> 'actor') as t into v_bad
      from jsonb_array_elements(p_messages) with ordinality as x(e, n)
     where jsonb_typeof(x.e -> 'actor') is distinct from 'string'
        or not exists (select 1 from session_peer sp join peer p on p.id = sp.peer_id
                        where sp.session_id = v_session.id and p.name = x.e ->> 'actor' and sp.left_at is null)
     order by x.n limit 1;
    if v_bad.n is not null then
        if v_bad.t is distinct from 'string' then
            perform _fail('PR107', 'a message needs an actor (the peer who sent it)'
                          || case when v_many then format(' (row %s)', v_bad.n) else '' end);
        end if;
        perform _peer_id(v_bad.actor, 'actor');
        perform _fail('PR122', format('peer %s is not in session %s', quote_literal(v_bad.actor), v_session.id)
                      || case when v_many then format(' (row %s)', v_bad.n) else '' end,
                      'Add it with add_session_peers() first.');
    end if;

    -- The sender's role follows its kind unless given: agents speak as assistant.
    v_rows := (select jsonb_agg(x.e || jsonb_build_object(
                        'kind', 'message', 'session_id', v_session.id,
                        'source_role', coalesce(x.e -> 'source_role',
                                                to_jsonb(case p.kind when 'agent' then 'assistant' else 'user' end)))
                      order by x.n)
                 from jsonb_array_elements(p_messages) with ordinality as x(e, n)
                 join peer p on p.name = x.e ->> 'actor');
    v_offsets := array(select b.log_offset from _append_batch(p_principal, v_session.scope, v_rows) b order by b.ordinal);

    return query
    select q.ordinal, q.log_offset, q.tasks from _enqueue_messages(v_session.id, v_offsets) q order by q.ordinal;
end
$$;
comment on function __tenant__.add_messages(text, text[], bigint, jsonb) is
    'Appends messages to a session (each by a peer in it) and queues their derivation work as the flags say.';

-- The turn log: for bots that do not manage sessions. Turns of one log go
-- to its newest session unless more than turn_gap_seconds passed since that
-- session's last message; then a new session opens. The actor and the
-- principal (the bot that logs the conversation: it hears every turn) join
-- the session if they are not in it, so each turn is seen by both and by
-- whoever joined before it, or by the narrower p_audience.
-- p_data_subject_id is the turn's, and also the session's when the turn
-- opens one: the log's name is written into it then. Without it, the actor's
-- data subject is (a peer created with one passes it on); a turn of an actor
-- without one, such as the assistant's reply, is the session's first
-- subject's (_append_batch).
create or replace function __tenant__.log_turn(p_principal text, p_scopes text[], p_scope text, p_log text,
                                              p_actor text, p_body text, p_source_role text default null,
                                              p_occurred_at timestamptz default null,
                                              p_data_subject_id text default null,
                                              p_audience text[] default null)
returns table (session_id bigint, log_offset bigint, opened boolean)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_at timestamptz := coalesce(p_occurred_at, now());
    v_gap interval := make_interval(secs => (_setting_value('turn_gap_seconds') #>> '{}')::double precision);
    v_session bigint;
    v_last timestamptz;
    v_opened boolean := false;
    v_offset bigint;
    v_subject text;
begin
    perform _peer_id(p_principal);
    perform _check_write_scope(p_scope, p_scopes);
    perform _check_time(p_occurred_at, 'occurred_at');
    perform _check_subject(p_data_subject_id);
    if p_log is null or char_length(p_log) > 200 or _trim(p_log) = '' then
        perform _fail('PR107', format('invalid turn log name %s', coalesce(quote_literal(_clip(p_log, 200)), 'NULL')),
                      'A turn log is named by 1 to 200 characters, e.g. the user the bot talks to.');
    end if;
    -- the turn is its actor's words, and the session it opens is named for the log: the actor's subject
    -- unless the call names one
    v_subject := coalesce(p_data_subject_id, _peer_subject(_peer_id(p_actor, 'actor')));
    -- Turns of one log take their session one at a time.
    perform _lock('turn_log', array[p_scope || ':' || p_log]);
    select s.id into v_session from session s
     where s.scope = p_scope and s.turn_log = p_log order by s.id desc limit 1;
    if v_session is not null then
        select o.occurred_at into v_last from observation o
         where o.session_id = v_session order by o.log_offset desc limit 1;
    end if;
    if v_session is null or (v_last is not null and v_at - v_last > v_gap) then
        v_session := nextval(pg_get_serial_sequence('__tenant__.session', 'id'));
        insert into session (id, scope, name, turn_log, data_subject_ids)
        values (_unkept_on_citus(v_session), p_scope, format('%s #%s', p_log, v_session), p_log,
                _with_subject('{}', v_subject));
        v_opened := true;
    end if;
    if exists (select 1 from unnest(array[normalize(p_actor, NFC), normalize(p_principal, NFC)]) n(name)
                where not exists (select 1 from session_peer sp join peer p on p.id = sp.peer_id
                                   where sp.session_id = v_session and p.name = n.name and sp.left_at is null)) then
        perform add_session_peers(p_principal, p_scopes, v_session,
                                  to_jsonb(array(select distinct n from unnest(array[normalize(p_actor, NFC),
                                                                                     normalize(p_principal, NFC)]) n
                                                  where not exists (select 1 from session_peer sp join peer p on p.id = sp.peer_id
                                                                     where sp.session_id = v_session and p.name = n
                                                                       and sp.left_at is null))));
    end if;
    select m.log_offset into v_offset
      from add_messages(p_principal, p_scopes, v_session, jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
               'actor', p_actor, 'body', p_body, 'source_role', p_source_role, 'occurred_at', v_at,
               'data_subject_id', p_data_subject_id, 'audience', to_jsonb(p_audience))))) m;
    return query select v_session, v_offset, v_opened;
end
$$;
comment on function __tenant__.log_turn(text, text[], text, text, text, text, text, timestamptz, text, text[]) is
    'Appends a turn to a turn log: to its newest session, or to a new one after a gap of more than turn_gap_seconds; '
    'p_data_subject_id (else the actor''s, else the session''s) tags the turn, and the session it opens; '
    'p_audience narrows who may see it.';
