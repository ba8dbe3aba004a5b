-- Creating the peers and scopes that every operation names.

create or replace function __tenant__.add_scope(p_name text, p_description text default null)
returns text
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_name is null or p_name !~ '^[a-z0-9][a-z0-9_.:-]{0,63}$' then
        perform _fail('PR107', format('invalid scope name %s', coalesce(quote_literal(p_name), 'NULL')),
                      'A scope name is 1 to 64 of a-z, 0-9 and _ . : - starting with a letter or digit.');
    end if;
    insert into scope (name, description) values (p_name, p_description)
    on conflict (name) do update set description = coalesce(excluded.description, scope.description);
    return p_name;
end
$$;
comment on function __tenant__.add_scope(text, text) is
    'Creates a scope (a project inside the tenant), or updates its description. Idempotent.';

create or replace function __tenant__.add_peer(p_name text, p_kind text default 'human',
                                              p_metadata jsonb default '{}')
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_id bigint;
    v_kind text;
begin
    if p_name is null or _trim(p_name) = '' or _trim(p_name) <> p_name or char_length(p_name) > 200 then
        perform _fail('PR107', format('invalid peer name %s', coalesce(quote_literal(p_name), 'NULL')),
                      'A peer name has 1 to 200 characters and no leading or trailing whitespace.');
    end if;
    perform _check_one_of(p_kind, 'peer kind', array['human', 'agent', 'other']);
    if p_metadata is null or jsonb_typeof(p_metadata) <> 'object' then
        perform _fail('PR107', 'peer metadata must be a JSON object');
    end if;
    select p.id, p.kind into v_id, v_kind from peer p where p.name = p_name for update;
    if v_id is not null then
        if v_kind <> p_kind then
            perform _fail('PR107', format('peer %s exists with kind %s, not %s', quote_literal(p_name), v_kind, p_kind));
        end if;
        update peer set metadata = peer.metadata || p_metadata where peer.id = v_id;
        return v_id;
    end if;
    insert into peer (name, kind, metadata) values (p_name, p_kind, p_metadata)
    on conflict (name) do update set metadata = peer.metadata || excluded.metadata
    returning peer.id into v_id;
    return v_id;
end
$$;
comment on function __tenant__.add_peer(text, text, jsonb) is
    'Creates a peer (human, agent or other), or merges metadata into an existing one of the same kind. Returns its id.';
