-- Keys from what was said (migration 0039): statements derived from the turns
-- a memory cites, under which recall (with recall_memory_keys on) finds the
-- memory too. A key never widens who may find its memory: recall reaches a
-- key only through its memory's eligibility. Whoever may see the memory may
-- add keys to it; each is registered against the memory's turns, so erasing
-- a turn erases the keys too.

create or replace function __tenant__.remember_keys(
    p_principal  text,
    p_scopes     text[],
    p_memory_id  bigint,
    p_keys       text[]          -- e.g. {"Ana lives in Porto"}: at most 50, each at most 1000 bytes
)
returns integer                 -- the keys added (a key the memory already has is not added again)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_observations bigint[];
    v_key text;
    v_id bigint;
    v_added integer := 0;
begin
    perform _check_scopes(p_scopes);
    perform _check_id(p_memory_id, 'memory id');
    if p_keys is null or cardinality(p_keys) = 0 then
        perform _fail('PR107', 'remember_keys needs at least one key');
    end if;
    perform _check_texts(p_keys, 'key', 1000, 50);
    if exists (select 1 from unnest(p_keys) k where k is null or _trim(k) = '') then
        perform _fail('PR107', 'a key is empty', 'Each key is a statement, e.g. ''Ana lives in Porto''.');
    end if;
    -- The memory must be live and visible to the principal (for some purpose).
    if not exists (select 1 from memory e
                    where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by,
                                           e.valid, v_principal, p_scopes, null, false, null)
                      and e.id = p_memory_id) then
        perform _fail('PR104', format('memory %s not found', p_memory_id),
                      'The memory must exist, be live, and be visible to the principal.');
    end if;
    perform 1 from memory m where m.id = p_memory_id for share;
    v_observations := _memory_text_observations(array[p_memory_id]);
    for v_key in select distinct _trim(k) from unnest(p_keys) k order by 1 loop
        v_id := null;
        insert into memory_key (memory_id, body, created_by)
        values (p_memory_id, v_key, v_principal)
        on conflict (memory_id, body) do nothing
        returning id into v_id;
        if v_id is not null then
            perform _register('memory_key', v_id::text, v_observations);
            v_added := v_added + 1;
        end if;
    end loop;
    return v_added;
end
$$;
comment on function __tenant__.remember_keys(text, text[], bigint, text[]) is
    'Search keys for a memory the principal may see: statements derived from its turns, under which recall (setting recall_memory_keys) finds the memory too, never the key; erased with the turns. Returns how many were added.';
