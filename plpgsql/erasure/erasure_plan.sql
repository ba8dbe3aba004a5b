-- The erasure plan: every row an erasure of a selector deletes or strips, as (kind, row_key). One
-- registry decides both what erase() removes and what export() hands a data subject, so an export
-- covers exactly what an erasure of the same selector would remove (tests/test_export.py holds the
-- two to each other: the rows exported, per kind, are the rows the receipt says were erased).
--
-- The kinds and their row keys:
--   observation                   the turns themselves: observation.id
--   each projection kind          (projection_kind: memory, memory_revision, memory_link, fact, passage,
--                                  ...) its key_expression; the rules are erase.sql's
--   memory_reverted               a surviving memory whose current text a correction justified by an
--                                  erased observation wrote: it returns to its earlier text (memory.id)
--   peer                          a peer whose name and metadata the subject's calls wrote, or the
--                                  erased peer itself: anonymised (peer.id)
--   session                       a session whose name, turn log or metadata goes (session.id)
--   entity_alias                  an alias the subject gave an entity that stays (entity_id:alias)
--   working_representation        a working representation holding an item from an erased turn, or the
--                                  erased peer's own (session_id:peer_id)
--
-- A key may name a row that is already gone (a memory without a vector yet): erase deletes nothing
-- for it and export writes nothing. The plan is read before anything changes.

-- The entities an erasure deletes: registered ones that no surviving memory link or fact names. This
-- is projection_kind.kept_while for 'entity' with the planned links and facts already gone (erase
-- still applies kept_while when it deletes; a difference would show as a receipt that disagrees with
-- the export).
create or replace function __tenant__._entities_not_kept(p_entities text[], p_links text[], p_facts text[])
returns text[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return array(
        select k from unnest(p_entities) k
         where not exists (select 1 from memory_link l
                            where l.target_entity_id = k::bigint and not (l.id::text = any (p_links)))
           and not exists (select 1 from fact f
                            where k::bigint in (f.subject_id, f.object_id) and not (f.id::text = any (p_facts)))
         order by k::bigint);
end
$$;
comment on function __tenant__._entities_not_kept(text[], text[], text[]) is
    'Internal (erasure plan): of these entities, those no surviving memory link or fact names.';

create or replace function __tenant__._erasure_plan_words(p_selector jsonb, p_observations bigint[],
                                                          p_entities text[])
returns table (kind text, row_key text)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_subject text := case when p_selector ? 'data_subject' then p_selector ->> 'data_subject' end;
    v_scope text := case when p_selector ? 'scope' then p_selector ->> 'scope' end;
    v_peer bigint := case when p_selector ? 'peer' then _peer_id(p_selector ->> 'peer', 'erased') end;
begin
    -- Words written without an observation (erase.sql's _erase_words), and working representations.
    return query
    select 'peer', p.id::text from peer p
     where p.id = v_peer or (v_peer is null and p.data_subject_ids @> array[v_subject])
    union all
    select 'session', s.id::text from session s
     where (v_scope is null and s.data_subject_ids @> array[v_subject])
        or (s.scope = v_scope and (s.name is not null or s.turn_log is not null or s.metadata <> '{}'))
    union all
    -- an alias of an entity the erasure deletes goes with its entity
    select distinct 'entity_alias', x.entity_id || ':' || x.alias from entity_alias_subject x
     where x.data_subject_id = v_subject and not (x.entity_id::text = any (p_entities))
    union all
    -- the name of a deleted entity merged into another: the survivor stops answering to it
    select 'entity_alias', e.merged_into || ':' || e.normalized_name from entity e
     where e.id::text = any (p_entities) and e.merged_into is not null
       and exists (select 1 from entity k where k.id = e.merged_into and e.normalized_name = any (k.aliases))
    union all
    select 'working_representation', sp.session_id || ':' || sp.peer_id from session_peer sp
     where sp.working_representation <> '{}'
       and (sp.peer_id = v_peer or _working_cites(sp.working_representation, p_observations));
end
$$;
comment on function __tenant__._erasure_plan_words(jsonb, bigint[], text[]) is
    'Internal (erasure plan): the peers, sessions, aliases and working representations an erasure strips.';

create or replace function __tenant__._erasure_plan(p_selector jsonb)
returns table (kind text, row_key text)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_observations bigint[] := _selected_observations(p_selector);
    v_reverted bigint[];
    v_lost bigint[];
    v_memories bigint[];
    v_facts bigint[];
    v_kind projection_kind;
    v_keys text[];
    v_planned jsonb := '{}';
begin
    -- Corrections an erased observation justified: the memory returns to its earlier text, or goes
    -- when that text is lost (erase.sql's rules).
    select coalesce(array_agg(u.memory_id) filter (where u.restorable), '{}'),
           coalesce(array_agg(u.memory_id) filter (where not u.restorable), '{}')
      into v_reverted, v_lost
      from _corrections_to_undo(v_observations) u;
    v_memories := _doomed_memories(v_observations, p_selector, v_lost);
    v_facts := _doomed_facts(v_observations, p_selector);
    return query select 'observation', x::text from unnest(v_observations) x order by x;
    for v_kind in select * from projection_kind order by delete_order, kind loop
        v_keys := _erasure_keys(v_kind.kind, array(select r.row_key from _registered(v_observations, v_kind.kind) r),
                                p_selector, v_memories, v_facts);
        if v_kind.kind = 'entity' then
            v_keys := _entities_not_kept(v_keys, array(select jsonb_array_elements_text(v_planned -> 'memory_link')),
                                         array(select jsonb_array_elements_text(v_planned -> 'fact')));
        elsif v_kind.kind = 'memory_embedding' then
            -- a reverted memory's vector goes with its text (the embedding trigger), not as a row of its own
            v_keys := array(select k from unnest(v_keys) k
                             where not (k = any (array(select x::text from unnest(v_reverted) x
                                                        where not (x = any (v_memories))))));
        end if;
        v_keys := array(select distinct k from unnest(v_keys) k order by k);
        v_planned := v_planned || jsonb_build_object(v_kind.kind, to_jsonb(v_keys));
        return query select v_kind.kind, k from unnest(v_keys) k;
    end loop;
    return query select 'memory_reverted', x::text from unnest(v_reverted) x where not (x = any (v_memories)) order by x;
    return query select * from _erasure_plan_words(p_selector, v_observations,
                                                   array(select jsonb_array_elements_text(v_planned -> 'entity')));
end
$$;
comment on function __tenant__._erasure_plan(jsonb) is
    'Internal: every row an erasure of the selector deletes or strips, as (kind, row_key); erase() and export() both read it.';

-- The plan as one document, {kind: [row_key, ...]}, for erase() to carry through its steps.
create or replace function __tenant__._erasure_plan_document(p_selector jsonb)
returns jsonb
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_result jsonb;
begin
    select coalesce(jsonb_object_agg(g.kind, g.keys), '{}')
      from (select p.kind, jsonb_agg(p.row_key) as keys from _erasure_plan(p_selector) p group by p.kind) g
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._erasure_plan_document(jsonb) is
    'Internal: the erasure plan as {kind: [row_key, ...]}.';

create or replace function __tenant__._planned(p_plan jsonb, p_kind text)
returns text[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(array(select jsonb_array_elements_text(p_plan -> p_kind)), '{}')
$$;
comment on function __tenant__._planned(jsonb, text) is 'Internal: the row keys of one kind in an erasure plan.';
