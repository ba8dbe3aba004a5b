-- A data subject's export (right of access and portability): every row an erasure of the same
-- selector would delete or strip, read from the one erasure plan (erasure_plan.sql), so that what an
-- export covers is exactly what erase() removes. One row per planned row: its kind, its key and the
-- row as stored (docs/reference.md, "The export format"), less what is not the subject's words but
-- an index of them (vectors, tsvectors, text keys); peer ids are named (a "names" object) and
-- observation ids are given with their scope and offset (an "observations" object), so that the
-- export reads without the tenant. `pgrecall export` writes it as JSON lines after a header line.
--
-- Admin duty, like erase(): it reads every principal's rows. An unknown data subject is no error:
-- it has no rows, and its export is empty (a subject nobody wrote is indistinguishable from one
-- already erased, which is the answer the subject is owed). A peer selector names a peer (PR101).

-- The peer, entity and observation ids a row names, resolved: {"names": {column: peer name, "audience":
-- [peer names]}, "entities": {column: entity name}, "observations": {column: {"scope", "offset"}}}.
create or replace function __tenant__._export_record(p_row jsonb)
returns jsonb
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_names jsonb;
    v_entities jsonb;
    v_observations jsonb;
begin
    select coalesce(jsonb_object_agg(c.key, p.name), '{}') into v_names
      from jsonb_each(p_row) c join peer p on p.id = (c.value #>> '{}')::bigint
     where c.key in ('actor_id', 'created_by', 'audience_peer_id', 'observer_peer_id', 'changed_by', 'asserted_by',
                     'sender_id', 'observer_id', 'peer_id', 'decided_by')
       and jsonb_typeof(c.value) = 'number';
    if jsonb_typeof(p_row -> 'audience') = 'array' then  -- a turn's or a passage's peers
        v_names := v_names || jsonb_build_object('audience', (
            select coalesce(jsonb_agg(p.name order by p.name), '[]') from jsonb_array_elements_text(p_row -> 'audience') a
              join peer p on p.id = a::bigint));
    end if;
    select coalesce(jsonb_object_agg(c.key, e.name), '{}') into v_entities
      from jsonb_each(p_row) c join entity e on e.id = (c.value #>> '{}')::bigint
     where c.key in ('subject_id', 'object_id', 'target_entity_id', 'merged_into') and jsonb_typeof(c.value) = 'number';
    select coalesce(jsonb_object_agg(c.key, jsonb_build_object('scope', o.scope, 'offset', o.log_offset)), '{}')
      into v_observations
      from jsonb_each(p_row) c join observation o on o.id = (c.value #>> '{}')::bigint
     where c.key in ('observation_id', 'target_observation_id') and jsonb_typeof(c.value) = 'number';
    return (p_row - array['tsv', 'embedding', 'text_embedding', 'text_key', 'window_tsv', 'window_length'])
           || jsonb_build_object('names', v_names, 'entities', v_entities, 'observations', v_observations);
end
$$;
comment on function __tenant__._export_record(jsonb) is
    'Internal (export): a row as exported: without vectors and search columns, its peers and entities named, its observations placed.';

-- A memory's evidence and subjects, as remember() takes them: the log offsets it was derived from and
-- the names of the entities it is about.
create or replace function __tenant__._export_memory(p_row jsonb)
returns jsonb
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return p_row || jsonb_build_object(
        'evidence', coalesce((select jsonb_agg(o.log_offset order by o.log_offset) from memory_link l
                                join observation o on o.id = l.target_observation_id
                               where l.memory_id = (p_row ->> 'id')::bigint and l.link_type = 'derived_from'), '[]'),
        'about', coalesce((select jsonb_agg(e.name order by e.name) from memory_link l
                             join entity e on e.id = l.target_entity_id
                            where l.memory_id = (p_row ->> 'id')::bigint and l.link_type = 'about'), '[]'),
        'derived_from', coalesce((select jsonb_agg(l.target_memory_id order by l.target_memory_id) from memory_link l
                                   where l.memory_id = (p_row ->> 'id')::bigint and l.target_memory_id is not null), '[]'));
end
$$;
comment on function __tenant__._export_memory(jsonb) is
    'Internal (export): a memory row with the log offsets it was derived from and the entities it is about, by name.';

-- Where each kind of the plan is stored, and how a key finds its row.
create or replace function __tenant__._export_source(p_kind text, out o_table text, out o_key text)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    select k.table_name, k.key_expression into o_table, o_key from projection_kind k where k.kind = p_kind;
    if o_table is null then
        select s.t, s.k into o_table, o_key
          from (values ('observation', 'observation', 'id::text'), ('memory_reverted', 'memory', 'id::text'),
                       ('peer', 'peer', 'id::text'), ('session', 'session', 'id::text'),
                       ('working_representation', 'session_peer', 'session_id || '':'' || peer_id'),
                       ('entity_alias', 'entity', 'id::text')) s(kind, t, k)
         where s.kind = p_kind;
    end if;
end
$$;
comment on function __tenant__._export_source(text) is 'Internal (export): the table of a plan kind and its key expression.';

create or replace function __tenant__.export(p_selector jsonb)
returns table (kind text, row_key text, record jsonb)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_plan record;
    v_table text;
    v_key text;
    v_observations bigint[];
begin
    perform _check_json_size(p_selector, 'an export selector', 4096);
    if jsonb_typeof(p_selector) = 'object' and p_selector ? 'expired_before' then
        perform _fail('PR153', 'expired_before selects for expire(), not for an export',
                      'E.g. {"data_subject": "u-42"} or {"peer": "ana"}.');
    end if;
    for v_plan in
        select p.kind, array_agg(p.row_key) as keys from _erasure_plan(p_selector) p group by p.kind
         order by array_position(array['observation', 'passage', 'memory', 'memory_revision', 'memory_link', 'memory_key',
                                       'memory_correction_evidence', 'memory_embedding', 'memory_reverted', 'entity',
                                       'entity_alias', 'fact', 'fact_evidence', 'duplicate_decision', 'work_task',
                                       'working_representation', 'peer', 'session'], p.kind), p.kind
    loop
        if v_plan.kind = 'observation' then
            v_observations := v_plan.keys::bigint[];
        end if;
        select s.o_table, s.o_key into v_table, v_key from _export_source(v_plan.kind) s;
        if v_plan.kind = 'entity_alias' then
            -- entity_id:alias; the alias, with the entity it names
            return query
            select v_plan.kind, k, jsonb_build_object('entity_id', e.id, 'entity', e.name, 'scope', e.scope,
                                                      'alias', substr(k, strpos(k, ':') + 1))
              from unnest(v_plan.keys) k join entity e on e.id = split_part(k, ':', 1)::bigint
             order by k;
        elsif v_plan.kind = 'working_representation' then
            -- only the items an erasure takes: those from the erased turns (all of an erased peer's own)
            return query
            select v_plan.kind, k, _export_record(to_jsonb(sp) - 'working_representation')
                   || jsonb_build_object('working_representation',
                          case when p_selector ? 'peer' and sp.peer_id = _peer_id(p_selector ->> 'peer', 'erased')
                               then sp.working_representation
                               else _working_items(sp.working_representation, v_observations) end)
              from unnest(v_plan.keys) k
              join session_peer sp on sp.session_id = split_part(k, ':', 1)::bigint
                                  and sp.peer_id = split_part(k, ':', 2)::bigint
             order by k;
        else
            return query execute format(
                'select $1, %1$s, %2$s from %3$I t where %4$s order by 2',
                v_key,
                case when v_plan.kind in ('memory', 'memory_reverted') then '_export_memory(_export_record(to_jsonb(t)))'
                     else '_export_record(to_jsonb(t))' end,
                v_table, _registry_key_match(v_key, '$2', true))
              using v_plan.kind, v_plan.keys;
        end if;
    end loop;
end
$$;
comment on function __tenant__.export(jsonb) is
    'Everything an erasure of the same selector (a data subject or a peer, as erase() takes it) would remove, '
    'one row per stored row: its kind, key and record (vectors left out, peers named); empty for an unknown subject.';

create or replace function __tenant__._working_items(p_document jsonb, p_observation_ids bigint[])
returns jsonb
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(jsonb_object_agg(d.key, d.items), '{}')
      from (select t.key, jsonb_agg(i.item order by i.n) as items
              from jsonb_each(p_document) t
             cross join lateral jsonb_array_elements(t.value) with ordinality as i(item, n)
             where (i.item ->> 'observation_id')::bigint = any (p_observation_ids)
             group by t.key) d
$$;
comment on function __tenant__._working_items(jsonb, bigint[]) is
    'Internal (export): the items of a working representation derived from these observations.';
