-- Keys from what was said (migrations 0039 and 0040): statements derived from the turns
-- a memory cites, under which recall (with recall_memory_keys on) finds the
-- memory too. A key never widens who may find its memory: recall reaches a
-- key only through its memory's eligibility. Whoever may see the memory may
-- add keys to it; each is registered against the memory's turns, so erasing
-- a turn erases the keys too.

create or replace function __tenant__.remember_keys(
    p_principal  text,
    p_scopes     text[],
    p_memory_id  bigint,
    p_keys       text[],         -- e.g. {"Ana lives in Porto"}: at most 50, each at most 1000 bytes
    p_embeddings text[] default null,       -- the vector of each key's text (NULL for a key without one)
    p_embedding_model text default null     -- the model that made them: the tenant's (PR155 otherwise)
)
returns integer                 -- the keys added (a key the memory already has is not added again)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_observations bigint[];
    v_vectors __ext__.halfvec[];
    v_stamp record;
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
    perform _check_length(p_embedding_model, 'model name', 200);
    if p_embeddings is not null then
        if cardinality(p_embeddings) <> cardinality(p_keys) or p_embedding_model is null then
            perform _fail('PR107', format('%s embeddings for %s keys: one per key (NULL for a key without one), '
                                          'with the model that made them', cardinality(p_embeddings),
                                          cardinality(p_keys)));
        end if;
        v_stamp := _embedding_stamp();
        if p_embedding_model <> v_stamp.model then
            perform _fail('PR155', format('the embeddings are of %s; the tenant embeds with %s', p_embedding_model,
                                          v_stamp.model), 'Embed the keys with the tenant''s model, or leave them out.');
        end if;
        v_vectors := _embedding_vectors(p_embeddings, true);
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
    for i in 1 .. cardinality(p_keys) loop
        v_key := _trim(p_keys[i]);
        v_id := null;
        insert into memory_key (memory_id, body, created_by, embedding, embedding_model)
        values (p_memory_id, v_key, v_principal, v_vectors[i], case when v_vectors[i] is not null then p_embedding_model end)
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
comment on function __tenant__.remember_keys(text, text[], bigint, text[], text[], text) is
    'Search keys for a memory the principal may see: statements derived from its turns, under which recall (settings recall_memory_keys, and recall_memory_keys_dense for keys given with the vector of their text) finds the memory too, never the key; erased with the turns. Returns how many were added.';
