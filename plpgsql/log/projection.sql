-- Registering projection rows against the observations they came from.

create or replace function __tenant__._register(p_kind text, p_row_key text, p_observation_ids bigint[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    insert into projection_dependency (kind, row_key, observation_id)
    select p_kind, p_row_key, o from unnest(p_observation_ids) o
    on conflict do nothing;
end
$$;
comment on function __tenant__._register(text, text, bigint[]) is
    'Internal: record that projection row (kind, key) derives from these observations.';

-- The observations a memory derives from, directly or through its sources.
create or replace function __tenant__._memory_observations(p_memory_ids bigint[])
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    select coalesce(array_agg(distinct d.observation_id), '{}')
      from projection_dependency d
     where d.kind = 'memory' and d.row_key = any (select m::text from unnest(p_memory_ids) m)
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._memory_observations(bigint[]) is
    'Internal: every observation the given memories were derived from.';

-- The observations a memory's current text came from: those it was written
-- from, and those that justified the corrections that made the text what it
-- is. Whatever is built on the text (a derived memory, its kept history, its
-- embedding) is registered against these, so erasing a correction's evidence
-- takes what was built on the corrected text with it.
create or replace function __tenant__._memory_text_observations(p_memory_ids bigint[])
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    select coalesce(array_agg(distinct s.observation_id), '{}')
      from (select unnest(_memory_observations(p_memory_ids))
            union all
            select c.observation_id from memory_correction_evidence c
             where c.memory_id = any (p_memory_ids)) s(observation_id)
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._memory_text_observations(bigint[]) is
    'Internal: every observation the given memories'' current text came from: their evidence and their corrections''.';

-- Links a memory to entities by name, creating the entities in its scope.
-- The names are the caller's, checked before it wrote anything
-- (_check_entity_names), or names stored already (correct and supersede carry
-- the old memory's), which the rule of new names does not judge.
create or replace function __tenant__._link_about(p_memory_id bigint, p_scope text, p_names text[],
                                                 p_observation_ids bigint[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_name text;
    v_entity bigint;
    v_link bigint;
begin
    foreach v_name in array coalesce(p_names, '{}') loop
        v_entity := _entity_for(p_scope, v_name, null);  -- an alias names its entity (see _about_entities)
        perform _register('entity', v_entity::text, p_observation_ids);
        if not exists (select 1 from memory_link l where l.memory_id = p_memory_id
                          and l.link_type = 'about' and l.target_entity_id = v_entity) then
            insert into memory_link (memory_id, link_type, target_entity_id)
            values (p_memory_id, 'about', v_entity) returning id into v_link;
            perform _register('memory_link', v_link::text, p_observation_ids);
        end if;
    end loop;
end
$$;
comment on function __tenant__._link_about(bigint, text, text[], bigint[]) is
    'Internal: about-links from a memory to named entities, registered as projections.';
