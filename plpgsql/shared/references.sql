-- Names a call passes that must name something the tenant has: a peer, the scopes the caller is
-- authorised for, observations by offset, a data subject, a worker.

create or replace function __tenant__._peer_id(p_name text, p_role text default 'principal')
returns bigint
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_id bigint;
    v_stored text;
begin
    if p_name is null then
        perform _fail('PR101', format('the %s peer is required', p_role),
                      'Pass the name of a peer created with add_peer().');
    end if;
    -- A peer name has at most 200 characters (peers_scopes.sql): a longer one names no peer, and is not
    -- normalised or looked up.
    perform _check_length(p_name, format('the %s peer''s name', p_role), 800);
    -- Exact after NFC: another case is another (unknown) name, see peers_scopes.sql.
    select p.id into v_id from peer p where p.name = normalize(p_name, NFC);
    if v_id is null then
        select p.name into v_stored from peer p where lower(p.name) = lower(normalize(p_name, NFC)) limit 1;
        -- The peer an erasure or an export names: creating it would not help, and one erased already
        -- is renamed (erase.sql), so its name finds nothing.
        perform _fail('PR101', case when p_role = 'erased' then format('unknown peer %s', _shown(p_name))
                                    else format('unknown %s peer %s', p_role, _shown(p_name)) end,
                      case when v_stored is not null then format('Peer names are matched exactly: the peer is %s.',
                                                                 _shown(v_stored))
                           when p_role = 'erased' then 'Peer names are matched exactly, and a peer erased before '
                                                       'keeps no name: its erasure receipt says it was erased.'
                           else 'Create it first with add_peer(name, kind).' end);
    end if;
    return v_id;
end
$$;
comment on function __tenant__._peer_id(text, text) is 'Internal: the id of a named peer, or PR101.';

-- The authorised set must be non-empty and name existing scopes only: a typo
-- in a scope name is an error, not an empty answer.
create or replace function __tenant__._check_scopes(p_scopes text[])
returns text[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_known text[];
    v_unknown text;
begin
    if p_scopes is null or cardinality(p_scopes) = 0 then
        perform _fail('PR103', 'the set of authorised scopes is empty',
                      'Pass the scopes the principal may read, e.g. array[''default''].');
    end if;
    perform _check_texts(p_scopes, 'scope name', 64);  -- a scope name has at most 64 characters, all ASCII
    -- The table is read alone, then compared: on Citus a one-table statement without a subquery takes
    -- the fast path (planned once, not deparsed and planned again for the shard), ~0.3 ms a call less.
    select coalesce(array_agg(sc.name), '{}') into v_known from scope sc where sc.name = any (p_scopes);
    select s into v_unknown from unnest(p_scopes) s where s is null or not (s = any (v_known)) limit 1;
    if found then
        perform _fail('PR131', format('unknown scope %s', coalesce(quote_literal(v_unknown), 'NULL')),
                      'Create it first with add_scope(name).');
    end if;
    return p_scopes;
end
$$;
comment on function __tenant__._check_scopes(text[]) is 'Internal: PR103 for an empty authorised set, PR131 for a scope that does not exist.';

create or replace function __tenant__._check_write_scope(p_scope text, p_scopes text[])
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_scopes(p_scopes);
    if p_scope is null or not (p_scope = any (p_scopes)) then
        perform _fail('PR103', format('scope %s is not in the authorised set %s',
                                      coalesce(quote_literal(p_scope), 'NULL'), p_scopes::text),
                      'Write only to a scope the principal is authorised for.');
    end if;
    return p_scope;
end
$$;
comment on function __tenant__._check_write_scope(text, text[]) is 'Internal: PR103 unless the scope written is authorised.';

-- A data subject id: whose personal data a row is (NULL: none named).
create or replace function __tenant__._check_subject(p_data_subject_id text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _check_length(p_data_subject_id, 'data subject id', 200)
$$;
comment on function __tenant__._check_subject(text) is 'Internal: PR151 unless a data subject id fits 200 bytes.';

-- Who claims, holds or gives back queued work (recorded as leased_by).
create or replace function __tenant__._check_worker(p_worker text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _check_length(p_worker, 'worker name', 200)
$$;
comment on function __tenant__._check_worker(text) is 'Internal: PR151 unless a worker name fits 200 bytes.';

-- Observation offsets in one scope to observation ids, in the order given.
-- With a principal, a turn it may not see is reported as missing: evidence is
-- cited only by who may read it.
create or replace function __tenant__._observation_ids(p_scope text, p_offsets bigint[],
                                                      p_principal_id bigint default null)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_ids bigint[];
    v_missing bigint;
begin
    select o into v_missing from unnest(p_offsets) o
     where o is null or not exists (select 1 from observation ob where ob.scope = p_scope and ob.log_offset = o
                                       and (p_principal_id is null or _audience_admits(p_principal_id, null, ob.audience)))
     limit 1;
    if found then
        perform _fail('PR109', format('scope %s has no observation at offset %s', quote_literal(p_scope),
                                      coalesce(v_missing::text, 'NULL')),
                      'Evidence is given as log offsets returned by append_observation() in the same scope.');
    end if;
    select array_agg(ob.id order by ob.log_offset) into v_ids
      from observation ob where ob.scope = p_scope and ob.log_offset = any (p_offsets);
    return v_ids;
end
$$;
comment on function __tenant__._observation_ids(text, bigint[], bigint) is
    'Internal: ids of the observations at these offsets of one scope, or PR109 (also for one the principal, if given, may not see).';
