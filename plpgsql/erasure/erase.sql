-- Erasure: delete observations and, through the projection registry,
-- everything derived from them; rebuild what depended on them from what
-- survives; and in the same transaction store, per projection kind, how many
-- derived rows remain (the residual, zero when erasure worked).
--
-- What an erasure deletes or strips is decided once, by the erasure plan (erasure_plan.sql), which
-- export() reads too: a data subject's export covers exactly what this removes.
--
-- Rules:
--  * a memory, link, revision or embedding registered against ANY erased
--    observation is deleted: its text may carry the erased content, and
--    pgrecall does not rewrite text;
--  * a memory derived from a deleted memory is deleted too (all the way
--    down the derived_from chain): a derivation that lost a source is
--    removed, never re-derived; its surviving sources can be derived from again;
--  * a row shared by many sources (an entity's name) is deleted when it came
--    from an erased observation and no surviving row needs it (its kind's
--    kept_while condition: an entity named by a surviving memory stays);
--  * a memory superseded by a deleted memory becomes current again: it is
--    what the surviving log says;
--  * a reviewer's duplicate decision about a deleted memory is deleted too
--    (its reason may quote it);
--  * an erased peer's perspective goes with it: memories it observed
--    (observer_peer_id) and tasks that would derive its view; working
--    representations lose every item derived from an erased observation;
--  * facts follow the memory rule: a fact with ANY evidence from an erased
--    observation is deleted with all its evidence, and so are the pieces its
--    assertion split off older facts; the older facts it closed are rebuilt:
--    their valid time that no surviving current value covers becomes a
--    current fact again (a new row, known from now, with the old evidence);
--  * the term statistics lose the deleted memories' terms (a term no surviving
--    memory uses is gone from them), and memories made current again are
--    re-queued for embedding: rebuild, never repair;
--  * a correction justified by an erased observation is undone, and so is
--    every later correction of the same memory: the memory returns to the
--    text it had before the first correction that cited an erased
--    observation, at a new revision (revision numbers never repeat, so a
--    writer holding any revision from before the erasure gets PR105 instead
--    of overwriting the restored text unseen). A later correction is undone
--    too because its author read the text the erased evidence justified (the
--    revision check guarantees it) and may have restated it; pgrecall does
--    not rewrite text, so only the text from before it is known to be free
--    of that evidence. The history of that earlier text stays; the kept texts
--    of the undone revisions, and the evidence and links of the undone
--    corrections, go. The observations those later corrections cited stay in
--    the log and can be cited again. If the memory's own evidence is erased
--    too, the first rule deletes it; should its earlier text be missing for
--    any other reason, it goes as well (the registry never separates the two:
--    the kept text is registered with the correction that replaced it). A
--    superseded or forgotten memory returns to its earlier text all the same;
--    a live one is re-queued for embedding and its terms move in the
--    statistics. What was derived from the corrected text, or built on it,
--    was registered against the correction's evidence and goes by the first
--    rule;
--  * a vector whose embedded text held an erased observation without being
--    derived from it goes too, and its memory is queued again in the same
--    transaction: embedding input version 2 adds the turns before and after a
--    memory's first evidence, so a memory of another subject can have
--    embedded the erased words (_memories_embedding_turns says which). A job
--    already claimed moves to a new generation, so a worker holding the old
--    text stores nothing. Passages embed their own text only, and go with
--    their observation by the first rule;
--  * words that reach pgrecall without an observation carry the data subject
--    of the call that wrote them: a peer's name and metadata (add_peer), a
--    session's name, turn log and metadata (create_session, log_turn), an
--    entity's alias (add_entity_alias). Erasing the subject anonymises such a
--    peer (renamed as an erased peer, metadata emptied), clears such a
--    session's name, turn log and metadata (the session and its messages of
--    other subjects stay; its name is NULL, so no later name collides), and
--    removes such aliases. Erasing a scope clears its sessions' names and
--    metadata the same way;
--  * an entity merged into another that goes takes its name with it: the
--    survivor stops answering to it as an alias;
--  * an erased peer is renamed "erased peer<U+00A0><id>" (peers_scopes.sql:
--    no caller can give a peer that name, so the rename never collides) and
--    loses its metadata; its row stays, because other rows name it as author;
--  * the receipt lists the tables the erasure deleted or changed rows in
--    (tables_touched). Their planner statistics (pg_stats) and their dead
--    rows still hold erased values after the commit, until ANALYZE and VACUUM:
--    refresh_erasure_statistics() analyses them and stamps the receipt
--    (statistics_refreshed_at), and `pgrecall erase` calls it after the
--    commit, then VACUUMs them with --vacuum. Neither can run inside erase():
--    VACUUM cannot run in a transaction, and analysing a large tenant would
--    take seconds inside every erasure.

-- How a registry key (text) finds its row: a key that is one bigint column is
-- compared as a bigint, so the column's index serves the lookup; any other key
-- expression is compared as text. p_keys is SQL for one key or, with p_many,
-- an array of keys.
create or replace function __tenant__._registry_key_match(p_key_expression text, p_keys text, p_many boolean)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select case
        when substring(p_key_expression from '^([[:alnum:]_]+)::text$') is null then
            format(case when p_many then '(%s) = any (%s)' else '(%s) = %s' end, p_key_expression, p_keys)
        else
            format(case when p_many then 't.%I = any ((%s)::bigint[])' else 't.%I = (%s)::bigint' end,
                   substring(p_key_expression from '^([[:alnum:]_]+)::text$'), p_keys)
    end
$$;
comment on function __tenant__._registry_key_match(text, text, boolean) is
    'Internal: SQL matching table alias t''s rows to registry keys, through an index where the key is a bigint column.';

create or replace function __tenant__._selected_observations(p_selector jsonb)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_key text;
begin
    if p_selector is null or jsonb_typeof(p_selector) <> 'object'
       or (select count(*) from jsonb_object_keys(p_selector)) <> 1 then
        perform _fail('PR153', format('an erasure selector names exactly one of observation, data_subject, peer, scope; got %s',
                                      coalesce(p_selector::text, 'NULL')),
                      'E.g. {"data_subject": "u-42"}, {"peer": "ana"}, {"scope": "chat"}, {"observation": {"scope": "chat", "offset": 7}}.');
    end if;
    v_key := (select k from jsonb_object_keys(p_selector) k);
    case v_key
        when 'observation' then
            if not _whole_in_range(p_selector -> 'observation' -> 'offset', 1, 9223372036854775807) then
                perform _fail('PR153', format('an observation selector needs a scope and a positive whole offset, not %s',
                                              coalesce(_clip((p_selector -> 'observation')::text, 200), 'NULL')),
                              'E.g. {"observation": {"scope": "chat", "offset": 7}}.');
            end if;
            perform _observation_ids(p_selector -> 'observation' ->> 'scope',
                                     array[(p_selector -> 'observation' ->> 'offset')::bigint]);
            return array(select o.id from observation o where o.scope = p_selector -> 'observation' ->> 'scope'
                            and o.log_offset = (p_selector -> 'observation' ->> 'offset')::bigint);
        when 'data_subject' then
            if jsonb_typeof(p_selector -> 'data_subject') is distinct from 'string' then
                perform _fail('PR153', 'a data_subject selector is a string');
            end if;
            perform _check_subject(p_selector ->> 'data_subject');
            return array(select o.id from observation o where o.data_subject_id = p_selector ->> 'data_subject');
        when 'peer' then
            return array(select o.id from observation o where o.actor_id = _peer_id(p_selector ->> 'peer', 'erased'));
        when 'scope' then
            perform _check_scopes(array[p_selector ->> 'scope']);
            return array(select o.id from observation o where o.scope = p_selector ->> 'scope');
        when 'expired_before' then
            return array(select o.id from observation o
                          where o.retention_until < (p_selector ->> 'expired_before')::timestamptz);
        else
            perform _fail('PR153', format('unknown erasure selector %s', quote_literal(v_key)),
                          'One of observation, data_subject, peer, scope.');
    end case;
end
$$;
comment on function __tenant__._selected_observations(jsonb) is 'Internal: the observation ids an erasure selector names.';

-- Corrections undone by erasing these observations (the rule above): per
-- memory, the revision whose text it returns to (the one before the first
-- correction that cited an erased observation), and whether that text was
-- kept. Read before anything is deleted.
create or replace function __tenant__._corrections_to_undo(p_observations bigint[])
returns table (memory_id bigint, restore_revision integer, restorable boolean)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select u.memory_id, u.restore_revision,
           exists (select 1 from memory_revision r
                    where r.memory_id = u.memory_id and r.revision = u.restore_revision)
      from (select c.memory_id, min(c.revision) - 1 as restore_revision
              from memory_correction_evidence c
             where c.observation_id = any (p_observations)
             group by c.memory_id) u;
end
$$;
comment on function __tenant__._corrections_to_undo(bigint[]) is
    'Internal: per memory with a correction an erased observation justified, the kept revision it returns to.';

-- Gives each memory back the title and body of a kept revision, at a new
-- revision number. The embedding trigger drops the vector of the old text
-- and queues the memory again; the term statistics follow the text (p_leaving:
-- the memories this erasure deletes, which keep no term alive). Returns the
-- terms the old texts had and the new ones lack (for the residual).
create or replace function __tenant__._undo_corrections(p_memory_ids bigint[], p_restore_revisions integer[],
                                                        p_leaving bigint[])
returns text[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_statistics boolean := exists (select 1 from corpus_stat);
    v_before jsonb;
begin
    if cardinality(p_memory_ids) = 0 then
        return '{}';
    end if;
    if v_statistics then
        v_before := _term_uses(p_memory_ids);
    end if;
    update memory m
       set title = r.title, body = r.body, revision = m.revision + 1, updated_at = now()
      from unnest(p_memory_ids, p_restore_revisions) u(memory_id, revision)
      join memory_revision r on r.memory_id = u.memory_id and r.revision = u.revision
     where m.id = u.memory_id;
    if v_statistics then
        return _retext_terms(p_memory_ids, v_before, p_leaving);
    end if;
    return '{}';
end
$$;
comment on function __tenant__._undo_corrections(bigint[], integer[], bigint[]) is
    'Internal: erasure gives memories back the text of a kept revision (new revision number, re-embedded, statistics moved).';

-- _erase and its steps. _erase reads as the order of the work: check, select what goes, let the
-- survivors forget it (vectors, term statistics, corrections), delete each projection kind, rebuild
-- what the deleted rows had closed, count the residual, forget the words, write the receipt.

create or replace function __tenant__._check_erasure_request(p_actor text, p_selector jsonb, p_reason text,
                                                             p_requested_by text)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_actor is null or _trim(p_actor) = '' or char_length(p_actor) > 200 then
        perform _fail('PR107', format('an erasure names who runs it (1 to 200 characters), not %s',
                                      coalesce(quote_literal(left(p_actor, 40)), 'NULL')),
                      'Pass the administrator or process, e.g. erase(''dpo@example.org'', ...).');
    end if;
    perform _check_reason(p_reason, 'an erasure needs a reason', 'Say why, e.g. ''data subject request #123''.', 2000);
    perform _check_length(p_requested_by, 'requested_by', 500);
    perform _check_json_size(p_selector, 'an erasure selector', 4096);
end
$$;
comment on function __tenant__._check_erasure_request(text, jsonb, text, text) is
    'Internal: PR107 and its kin unless an erasure names its actor, a reason, and a selector of bounded size.';

create or replace function __tenant__._doomed_memories(p_observations bigint[], p_selector jsonb,
                                                       p_earlier_text_lost bigint[])
returns bigint[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    -- Registered against an erased observation, private to an erased peer, whose text from before a
    -- correction is gone, or derived (at any depth) from one of those.
    with recursive doomed (id) as (
        select d.row_key::bigint from projection_dependency d
         where d.kind = 'memory' and d.observation_id = any (p_observations)
        union
        select x from unnest(p_earlier_text_lost) x
        union
        select m.id from memory m
         where p_selector ? 'peer' and m.audience_peer_id = _peer_id(p_selector ->> 'peer', 'erased')
        union
        select m.id from memory m
         where p_selector ? 'peer' and m.observer_peer_id = _peer_id(p_selector ->> 'peer', 'erased')
        union
        select l.memory_id from memory_link l join doomed x on l.target_memory_id = x.id
         where l.link_type = 'derived_from'
    )
    select coalesce(array_agg(distinct id), '{}') from doomed
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._doomed_memories(bigint[], jsonb, bigint[]) is
    'Internal: the memories an erasure deletes.';

create or replace function __tenant__._unembed_neighbours(p_observations bigint[], p_memories bigint[],
                                                          out o_neighbours bigint[], out o_unembedded integer)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_unembedded bigint[];
begin
    -- Vectors of surviving memories whose embedded text held an erased turn (the neighbours rule):
    -- deleted, and queued again at a new generation. Read while the erased observations still exist.
    -- Queued first: the upsert waits for a worker storing a vector for one of them to commit, so the
    -- delete after it sees that vector; a worker that stores later holds a stale generation and
    -- stores nothing.
    o_neighbours := array(select x from unnest(_memories_embedding_turns(p_observations)) x
                           where not (x = any (p_memories)) order by x);
    insert into embedding_job as j (memory_id, enqueued_at)
    select m.id, clock_timestamp() from memory m
     where m.id = any (o_neighbours) and m.superseded_by is null and m.invalidated_at is null
       and (exists (select 1 from embedding_job q where q.memory_id = m.id)
            -- input version 1 is title and body alone
            or exists (select 1 from memory_embedding me where me.memory_id = m.id and me.input_version <> 1))
     order by m.id
    on conflict (memory_id) do update
        set generation = j.generation + 1, enqueued_at = excluded.enqueued_at, leased_by = null, lease_until = null,
            restamp_only = false;
    if found then
        perform _notify('embed');
    end if;
    with gone as (
        delete from memory_embedding me where me.memory_id = any (o_neighbours) and me.input_version <> 1
        returning me.memory_id)
    select coalesce(array_agg(g.memory_id order by g.memory_id), '{}') into v_unembedded from gone g;
    delete from projection_dependency d
     where d.kind = 'memory_embedding' and d.row_key = any (array(select x::text from unnest(v_unembedded) x));
    o_unembedded := cardinality(v_unembedded);
end
$$;
comment on function __tenant__._unembed_neighbours(bigint[], bigint[]) is
    'Internal: erasure drops the vectors of surviving memories whose embedded text held an erased turn, and queues them again.';

create or replace function __tenant__._registered(p_observations bigint[], p_kind text)
returns table (row_key text)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select distinct d.row_key from projection_dependency d
     where d.kind = p_kind and d.observation_id = any (p_observations);
end
$$;
comment on function __tenant__._registered(bigint[], text) is
    'Internal: the row keys of one projection kind registered against any of the observations.';

create or replace function __tenant__._release_doomed_memories(p_observations bigint[], p_memories bigint[],
                                                             p_undo_memories bigint[], p_undo_revisions integer[])
returns text[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_terms text[] := '{}';
begin
    -- What the doomed memories superseded is current again (unless it is being erased too).
    update memory m set superseded_by = null, valid = tstzrange(lower(m.valid), null), updated_at = now()
     where m.superseded_by = any (p_memories) and not (m.id = any (p_memories));
    -- Term statistics: take the doomed memories out before their text goes.
    if exists (select 1 from corpus_stat) then
        v_terms := _forget_terms(p_memories || array(select k.row_key::bigint from _registered(p_observations, 'memory') k));
    end if;
    -- Corrections an erased observation justified: the surviving memories return to their earlier
    -- text. What the undone corrections wrote (kept texts, evidence, links) is registered against
    -- that observation and goes with the projections.
    return v_terms || _undo_corrections(
        array(select u.m from unnest(p_undo_memories) u(m) where not (u.m = any (p_memories)) order by u.m),
        array(select u.r from unnest(p_undo_memories, p_undo_revisions) u(m, r)
               where not (u.m = any (p_memories)) order by u.m),
        p_memories);
end
$$;
comment on function __tenant__._release_doomed_memories(bigint[], bigint[], bigint[], integer[]) is
    'Internal: before erased memories go, what they superseded is current again, their terms leave the statistics, and corrections they justified are undone; the terms to check.';

create or replace function __tenant__._doomed_facts(p_observations bigint[], p_selector jsonb)
returns bigint[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    -- Registered against an erased observation, pieces that a doomed assertion split off an older
    -- fact (rebuilt by _reinstate_facts), facts only an erased peer could see (like their private
    -- memories), and facts from their perspective.
    with recursive doomed (id) as (
        select d.row_key::bigint from projection_dependency d
         where d.kind = 'fact' and d.observation_id = any (p_observations)
        union
        select f.id from fact f
         where p_selector ? 'peer' and _peer_id(p_selector ->> 'peer', 'erased') in (f.audience_peer_id, f.observer_peer_id)
        union
        select f.id from fact f join doomed x on f.split_by = x.id
    )
    select coalesce(array_agg(distinct id), '{}') from doomed
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._doomed_facts(bigint[], jsonb) is 'Internal: the facts an erasure deletes.';

create or replace function __tenant__._erasure_keys(p_kind text, p_registered text[], p_selector jsonb,
                                                    p_memories bigint[], p_facts bigint[])
returns text[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result text[];
begin
    -- Beside the rows registered against an erased observation, the rows of a kind that go with a
    -- doomed memory or fact, or with an erased peer.
    select case p_kind
        when 'memory' then
            array(select distinct k from unnest(p_registered || array(select x::text from unnest(p_memories) x)) k)
        when 'memory_link' then
            -- links of doomed memories, and links into them from memories that are doomed too
            array(select distinct k from unnest(p_registered || array(
                    select l.id::text from memory_link l
                     where l.memory_id = any (p_memories) or l.target_memory_id = any (p_memories))) k)
        when 'memory_revision' then
            p_registered || array(select r.memory_id || ':' || r.revision from memory_revision r
                                   where r.memory_id = any (p_memories))
        when 'memory_correction_evidence' then
            p_registered || array(select c.id::text from memory_correction_evidence c
                                   where c.memory_id = any (p_memories))
        when 'memory_embedding' then
            p_registered || array(select x::text from unnest(p_memories) x)
        when 'memory_key' then
            -- the keys of doomed memories
            array(select distinct k from unnest(p_registered || array(
                    select x.id::text from memory_key x where x.memory_id = any (p_memories))) k)
        when 'duplicate_decision' then
            -- decisions about a doomed memory (their reason may speak of it)
            p_registered || array(select d.id::text from duplicate_decision d
                                   where d.memory_low = any (p_memories) or d.memory_high = any (p_memories))
        when 'work_task' then
            p_registered || array(select t.id::text from work_task t
                                   where p_selector ? 'peer'
                                     and t.observer_id = _peer_id(p_selector ->> 'peer', 'erased'))
        when 'fact_evidence' then
            array(select distinct k from unnest(p_registered || array(
                    select x.id::text from fact_evidence x where x.fact_id = any (p_facts))) k)
        when 'fact' then
            array(select distinct k from unnest(p_registered || array(select x::text from unnest(p_facts) x)) k)
        else p_registered
    end
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._erasure_keys(text, text[], jsonb, bigint[], bigint[]) is
    'Internal: the row keys of one projection kind that an erasure deletes.';

create or replace function __tenant__._erase_projections(p_plan jsonb)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_kind projection_kind;
    v_keys text[];
    v_count bigint;
    v_erased jsonb := '{}';
begin
    for v_kind in select * from projection_kind order by delete_order, kind loop
        -- The rows of the kind the erasure plan names (erasure_plan.sql).
        v_keys := _planned(p_plan, v_kind.kind);
        if v_kind.kept_while is not null then
            execute format('select array(select k from unnest($1) k where not exists '
                           '(select 1 from %I t where %s and (%s)))',
                           v_kind.table_name, _registry_key_match(v_kind.key_expression, 'k', false),
                           v_kind.kept_while)
              into v_keys using v_keys;
        end if;
        execute format('delete from %I t where %s', v_kind.table_name,
                       _registry_key_match(v_kind.key_expression, '$1', true)) using v_keys;
        get diagnostics v_count = row_count;
        v_erased := v_erased || jsonb_build_object(v_kind.kind, v_count);
        -- Only rows that are gone leave the registry: one that a delete missed
        -- stays registered, so the residual counts it.
        execute format('delete from projection_dependency d where d.kind = $1 and d.row_key = any ($2) '
                       'and not exists (select 1 from %I t where %s)', v_kind.table_name,
                       _registry_key_match(v_kind.key_expression, 'd.row_key', false))
          using v_kind.kind, v_keys;
    end loop;
    return v_erased;
end
$$;
comment on function __tenant__._erase_projections(jsonb) is
    'Internal: erasure deletes the rows of each projection kind its plan names, in the registry''s order; the rows deleted, per kind.';

create or replace function __tenant__._reinstate_facts(p_facts bigint[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_fact fact;
begin
    -- Each reinstated fact's surviving valid time (what no current value now covers) becomes a
    -- current fact again, with its evidence.
    for v_fact in select * from fact f where f.id = any (p_facts) order by f.id loop
        perform _fact_pieces(v_fact, tstzmultirange(v_fact.valid) - coalesce(
            (select range_agg(c.valid) from fact c
              where c.subject_id = v_fact.subject_id and c.predicate = v_fact.predicate and c.single_valued
                and upper_inf(c.known) and coalesce(c.observer_peer_id, 0) = coalesce(v_fact.observer_peer_id, 0)),
            '{}'::tstzmultirange), null, null);
    end loop;
end
$$;
comment on function __tenant__._reinstate_facts(bigint[]) is
    'Internal: older facts that an erased assertion closed are believed again, for the valid time nothing current covers.';

create or replace function __tenant__._drop_absorbed_aliases(p_absorbed bigint[], p_absorbed_into bigint[],
                                                           p_absorbed_names text[])
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count bigint;
begin
    -- Entities merged into another that the erasure deleted: the survivor answered to their names
    -- as aliases, which go with them.
    with gone as (
        select u.keep, u.name from unnest(p_absorbed, p_absorbed_into, p_absorbed_names) u(id, keep, name)
         where not exists (select 1 from entity e where e.id = u.id))
    update entity k
       set aliases = array(select a from unnest(k.aliases) a
                            where not (a = any (array(select g.name from gone g where g.keep = k.id))) order by a)
     where k.id in (select g.keep from gone g)
       and k.aliases && array(select g.name from gone g where g.keep = k.id);
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function __tenant__._drop_absorbed_aliases(bigint[], bigint[], text[]) is
    'Internal: erasure takes the names of deleted merged entities off the aliases of the entities they merged into.';

create or replace function __tenant__._erasure_residual(p_observations bigint[])
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_kind projection_kind;
    v_count bigint;
    v_residual jsonb := '{}';
begin
    -- Before the registry forgets the erased observations: rows of each kind registered against an
    -- erased observation that still stand although nothing surviving needs them.
    for v_kind in select * from projection_kind order by kind loop
        execute format($q$
            select count(distinct d.row_key) from projection_dependency d
             where d.kind = $1 and d.observation_id = any ($2)
               and exists (select 1 from %I t where %s and not (%s))$q$,
            v_kind.table_name, _registry_key_match(v_kind.key_expression, 'd.row_key', false),
            coalesce(v_kind.kept_while, 'false'))
          into v_count using v_kind.kind, p_observations;
        v_residual := v_residual || jsonb_build_object(v_kind.kind, v_count);
    end loop;
    return v_residual;
end
$$;
comment on function __tenant__._erasure_residual(bigint[]) is
    'Internal: per projection kind, the rows an erasure should have deleted that still stand.';

create or replace function __tenant__._term_residual(p_terms text[])
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint;
begin
    -- A term of an erased memory that no surviving live memory uses. Checked afresh: the witness row
    -- is re-read, and only a term without a valid witness costs an index probe.
    select count(*) from term_stat t
     where t.term = any (p_terms)
       and not exists (select 1 from memory w
                        where w.id = t.witness_memory_id
                          and w.superseded_by is null and w.invalidated_at is null
                          and w.tsv @@ quote_literal(t.term)::tsquery)
       and not exists (select 1 from memory m where m.tsv @@ quote_literal(t.term)::tsquery
                         and m.superseded_by is null and m.invalidated_at is null)
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._term_residual(text[]) is
    'Internal: the term statistics an erasure left behind that no surviving memory justifies.';

create or replace function __tenant__._erase_words(p_selector jsonb, p_plan jsonb, p_absorbed bigint[],
                                                   p_absorbed_into bigint[], p_absorbed_names text[],
                                                   out o_erased jsonb, out o_residual jsonb)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_subject text := case when p_selector ? 'data_subject' then p_selector ->> 'data_subject' end;
    v_scope text := case when p_selector ? 'scope' then p_selector ->> 'scope' end;
    v_peer bigint;
    v_count bigint;
begin
    -- Words written without an observation: names, metadata, aliases, as the erasure plan names them
    -- (erasure_plan.sql). The peer row stays (other rows name it as author) but loses its name and metadata.
    if p_selector ? 'peer' then
        v_peer := _peer_id(p_selector ->> 'peer', 'erased');
    end if;
    update peer p set name = _erased_peer_name(p.id), metadata = '{}', data_subject_ids = '{}'
     where p.id = any (_planned(p_plan, 'peer')::bigint[]);
    get diagnostics v_count = row_count;
    o_erased := jsonb_build_object('peer', v_count);
    update session s set name = null, turn_log = null, metadata = '{}', data_subject_ids = '{}'
     where s.id = any (_planned(p_plan, 'session')::bigint[]);
    get diagnostics v_count = row_count;
    o_erased := o_erased || jsonb_build_object('session', v_count);
    with said as (
        select split_part(k, ':', 1)::bigint as entity_id, substr(k, strpos(k, ':') + 1) as alias
          from unnest(_planned(p_plan, 'entity_alias')) k
         -- the names of absorbed entities are taken off their survivors by _drop_absorbed_aliases
         where not exists (select 1 from unnest(p_absorbed_into, p_absorbed_names) u(keep, name)
                            where k = u.keep || ':' || u.name)
    ), stripped as (
        update entity e
           set aliases = array(select a from unnest(e.aliases) a
                                where not exists (select 1 from said w where w.entity_id = e.id and w.alias = a)
                                order by a)
         where e.id in (select w.entity_id from said w)
    ), forgotten as (
        -- the same alias from other subjects goes too: the words are gone
        delete from entity_alias_subject x using said w where x.entity_id = w.entity_id and x.alias = w.alias
    )
    select count(*) into v_count from said;
    o_erased := o_erased || jsonb_build_object('entity_alias', v_count);
    o_residual := jsonb_build_object(
        'peer', (select count(*) from peer p where p.data_subject_ids @> array[v_subject])
              + (select count(*) from peer p
                  where p.id = v_peer and (p.name <> _erased_peer_name(p.id) or p.metadata <> '{}')),
        'session', (select count(*) from session s where s.data_subject_ids @> array[v_subject])
                 + (select count(*) from session s
                     where s.scope = v_scope and (s.name is not null or s.turn_log is not null or s.metadata <> '{}')),
        'entity_alias', (select count(*) from entity_alias_subject x where x.data_subject_id = v_subject)
                      + (select count(*) from unnest(p_absorbed, p_absorbed_into, p_absorbed_names) u(id, keep, name)
                          join entity k on k.id = u.keep
                         where u.name = any (k.aliases) and not exists (select 1 from entity e where e.id = u.id)));
end
$$;
comment on function __tenant__._erase_words(jsonb, jsonb, bigint[], bigint[], text[]) is
    'Internal: erasure strips the words kept outside observations (peer and session names, metadata, aliases); the counts erased and left.';

create or replace function __tenant__._erasure_tables_touched()
returns text[]
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    -- Where erased values may linger in planner statistics and dead rows: the tables this
    -- transaction deleted or updated rows in (a partition counts as its partitioned table, whose
    -- statistics cover it). Without track_counts there is no such count, and every table is listed.
    select coalesce(array_agg(distinct c.relname::text order by c.relname::text), '{}')
      from pg_class t
      join pg_stat_xact_all_tables s on s.relid = t.oid
      join pg_class c on c.oid = coalesce(pg_partition_root(t.oid), t.oid)
     where t.relnamespace = '__tenant__'::regnamespace and t.relkind = 'r'
       and c.relname not in ('erasure_request', 'schema_migration', 'function_ledger')
       and (s.n_tup_upd + s.n_tup_del > 0 or not current_setting('track_counts')::boolean)
$$;
comment on function __tenant__._erasure_tables_touched() is
    'Internal: the tables this transaction changed rows in, for the erasure receipt.';

-- The receipt, once everything is deleted: what went, what is left, which tables were touched.
create or replace function __tenant__._complete_erasure(p_request_id bigint, p_observations_erased bigint,
                                                       p_erased jsonb, p_residual jsonb)
returns __tenant__.erasure_request
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    -- Volatile values are taken first: Citus refuses a volatile function in an UPDATE.
    v_tables_touched text[] := _erasure_tables_touched();
    v_completed timestamptz := clock_timestamp();
    v_request erasure_request;
begin
    update erasure_request r
       set completed_at = v_completed, observations_erased = p_observations_erased,
           rows_erased = p_erased, residual = p_residual, tables_touched = v_tables_touched
     where r.id = p_request_id
    returning * into v_request;
    -- The server's erasure ledger keeps that it happened (a keyed hash of what it named, never the
    -- content), so that a restore of a dump taken before it runs it again (pgrecall.replay_erasures).
    -- Where the control plane is not installed (a Citus worker running a delegated call), there is none.
    if to_regprocedure('pgrecall.record_erasure(text, bigint, jsonb, timestamptz)') is not null then
        perform pgrecall.record_erasure('__tenant__', v_request.id, v_request.selector, v_request.completed_at);
    end if;
    return v_request;
end
$$;
comment on function __tenant__._complete_erasure(bigint, bigint, jsonb, jsonb) is
    'Internal (erasure): the request''s receipt, written once everything is deleted, and its entry in the server''s erasure ledger.';

create or replace function __tenant__._erase(p_actor text, p_selector jsonb, p_reason text, p_requested_by text)
returns __tenant__.erasure_request
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_request erasure_request;
    v_observations bigint[];
    v_memories bigint[];
    v_facts bigint[];
    v_reinstate bigint[];
    v_erased jsonb;
    v_residual jsonb;
    v_terms text[];
    v_undo_memories bigint[];
    v_undo_revisions integer[];
    v_plan jsonb;
    v_neighbours bigint[];
    v_unembedded integer;
    v_absorbed bigint[];
    v_absorbed_into bigint[];
    v_absorbed_names text[];
    v_words_erased jsonb;
    v_words_left jsonb;
    v_aliases bigint;
    v_count_observations bigint;
begin
    perform _check_erasure_request(p_actor, p_selector, p_reason, p_requested_by);
    v_observations := _selected_observations(p_selector);
    insert into erasure_request (selector, reason, requested_by, actor, actor_role)
    values (p_selector, _trim(p_reason), p_requested_by, _trim(p_actor), session_user)
    returning * into v_request;
    -- Appends to the affected scopes wait until the erasure commits.
    perform 1 from scope s
     where s.name in (select o.scope from observation o where o.id = any (v_observations))
     order by s.name for update;

    -- What goes, decided once (erasure_plan.sql, which export() reads too), now that no append can add to it.
    v_plan := _erasure_plan_document(p_selector);
    v_observations := _planned(v_plan, 'observation')::bigint[];
    v_memories := _planned(v_plan, 'memory')::bigint[];
    v_facts := _planned(v_plan, 'fact')::bigint[];
    -- Corrections to undo (applied below; the plan lets a memory whose earlier text is gone go).
    select coalesce(array_agg(u.memory_id order by u.memory_id) filter (where u.restorable), '{}'),
           coalesce(array_agg(u.restore_revision order by u.memory_id) filter (where u.restorable), '{}')
      into v_undo_memories, v_undo_revisions
      from _corrections_to_undo(v_observations) u;
    select n.o_neighbours, n.o_unembedded into v_neighbours, v_unembedded
      from _unembed_neighbours(v_observations, v_memories) n;

    v_terms := _release_doomed_memories(v_observations, v_memories, v_undo_memories, v_undo_revisions);

    -- Older facts that a doomed assertion closed: what they said is believed again.
    v_reinstate := array(select f.id from fact f where f.closed_by = any (v_facts) and not (f.id = any (v_facts)));
    -- Entities merged into another that the projections may delete (their names are aliases).
    select coalesce(array_agg(e.id order by e.id), '{}'), coalesce(array_agg(e.merged_into order by e.id), '{}'),
           coalesce(array_agg(e.normalized_name order by e.id), '{}')
      into v_absorbed, v_absorbed_into, v_absorbed_names
      from entity e
     where e.id = any (_planned(v_plan, 'entity')::bigint[]) and e.merged_into is not null;

    v_erased := jsonb_build_object('embedding_input', v_unembedded, 'memories_reverted',
                    (select count(*) from unnest(v_undo_memories) u(m) where not (u.m = any (v_memories))))
                || _erase_projections(v_plan);
    perform _reinstate_facts(v_reinstate);
    v_aliases := _drop_absorbed_aliases(v_absorbed, v_absorbed_into, v_absorbed_names);
    v_erased := v_erased || jsonb_build_object('facts_reinstated', cardinality(v_reinstate));

    v_residual := _erasure_residual(v_observations);
    -- Working representations: no item derived from an erased observation stays.
    v_erased := v_erased || jsonb_build_object('working_representation', _scrub_working_representations(
        v_observations, case when p_selector ? 'peer' then _peer_id(p_selector ->> 'peer', 'erased') end));
    v_residual := v_residual || jsonb_build_object(
        'working_representation',
        (select count(*) from session_peer sp where _working_cites(sp.working_representation, v_observations)),
        'embedding_input',
        (select count(*) from memory_embedding me where me.memory_id = any (v_neighbours) and me.input_version <> 1),
        'term_stat', _term_residual(v_terms));

    -- Entities kept because surviving memories still name them lose only
    -- their registry rows for the erased observations.
    delete from projection_dependency d where d.observation_id = any (v_observations);
    delete from observation o where o.id = any (v_observations);
    get diagnostics v_count_observations = row_count;
    v_residual := v_residual || jsonb_build_object('observation',
        (select count(*) from observation o where o.id = any (v_observations)));
    select w.o_erased || jsonb_build_object('entity_alias', v_aliases + (w.o_erased ->> 'entity_alias')::bigint),
           w.o_residual into v_words_erased, v_words_left
      from _erase_words(p_selector, v_plan, v_absorbed, v_absorbed_into, v_absorbed_names) w;

    return _complete_erasure(v_request.id, v_count_observations, v_erased || v_words_erased,
                             v_residual || v_words_left);
end
$$;
comment on function __tenant__._erase(text, jsonb, text, text) is 'Internal: the erasure path shared by erase() and expire().';

-- Erasure is the admin duty's: it removes content for every principal, and
-- the receipt records who ran it (p_actor, and the login role) and for whom
-- (p_requested_by).
create or replace function __tenant__.erase(p_actor text, p_selector jsonb, p_reason text,
                                           p_requested_by text default null)
returns __tenant__.erasure_request
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_selector ? 'expired_before' then
        perform _fail('PR153', 'expired_before is for expire(), which the expiry gate controls');
    end if;
    return _erase(p_actor, p_selector, p_reason, p_requested_by);
end
$$;
comment on function __tenant__.erase(text, jsonb, text, text) is
    'Erases an observation, a data subject, a peer or a scope and everything derived; returns the receipt (with who ran it) and its residual.';

create or replace function __tenant__.expire(p_actor text default 'expiry gate')
returns setof __tenant__.erasure_request
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_length(p_actor, 'the actor of an expiry', 800);
    if not (_setting_value('expiry_gate'))::boolean then
        return;  -- retention dates are honoured only where the tenant turned the gate on
    end if;
    if exists (select 1 from observation o where o.retention_until < now()) then
        return next _erase(p_actor, jsonb_build_object('expired_before', now()), 'retention period ended', 'expire()');
    end if;
end
$$;
comment on function __tenant__.expire(text) is
    'With the tenant''s expiry gate on, erases observations past retention_until (and what derives from them); off by default.';

create or replace function __tenant__.erasure_requests(p_limit integer default 20)
returns setof __tenant__.erasure_request
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select * from erasure_request r order by r.id desc limit greatest(coalesce(p_limit, 20), 1);
end
$$;
comment on function __tenant__.erasure_requests(integer) is 'The newest erasure receipts.';

-- Planner statistics after an erasure (the rule above): ANALYZE the tables
-- the erasure touched, in a transaction after its own, so that no sample can
-- hold an erased row. ANALYZE leaves the statistics of a table (or partition)
-- without rows as they were, since it samples nothing: those are cleared
-- (pg_clear_attribute_stats, PostgreSQL 18+), or, on an older server, listed
-- in statistics_stale and the receipt is not stamped. SECURITY DEFINER:
-- both need the tables' owner (or MAINTAIN), which the admin role is not.
-- Receipts from before tables_touched was recorded have every table done.
--
-- SQLSTATE: PR195 unknown (or unfinished) erasure request.
create or replace function __tenant__.refresh_erasure_statistics(p_request_id bigint)
returns __tenant__.erasure_request
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_refreshed timestamptz;
    v_request erasure_request;
    v_schema text := (select n.nspname::text from pg_namespace n where n.oid = '__tenant__'::regnamespace);
    v_can_clear boolean := current_setting('server_version_num')::integer >= 180000;
    v_table text;
    v_stats record;
    v_empty boolean;
    v_stale text[] := '{}';
begin
    select * into v_request from erasure_request r where r.id = p_request_id;
    if v_request.id is null or v_request.completed_at is null then
        perform _fail('PR195', format('unknown erasure request %s', coalesce(p_request_id::text, 'NULL')),
                      'erasure_requests() lists the receipts; erase() returns the id of a new one.');
    end if;
    for v_table in
        select c.relname::text from pg_class c
         where c.relnamespace = '__tenant__'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
           and (c.relname::text = any (v_request.tables_touched)
                or (v_request.tables_touched is null
                    and c.relname not in ('erasure_request', 'schema_migration', 'function_ledger')))
         order by 1
    loop
        execute format('analyze __tenant__.%I', v_table);
        -- the table, or any of its partitions, left without rows
        for v_stats in
            select s.tablename::text as tablename, s.inherited, array_agg(s.attname::text order by s.attname) as columns
              from pg_stats s
             where s.schemaname = v_schema
               and (s.tablename = v_table
                    or s.tablename in (select c.relname from pg_partition_tree(format('__tenant__.%I', v_table)::regclass) t
                                         join pg_class c on c.oid = t.relid))
             group by s.tablename, s.inherited
        loop
            execute format('select not exists (select 1 from __tenant__.%I)', v_stats.tablename) into v_empty;
            continue when not v_empty;
            if v_can_clear then
                perform pg_clear_attribute_stats(v_schema, v_stats.tablename, c, v_stats.inherited)
                   from unnest(v_stats.columns) c;
            else
                v_stale := v_stale || v_stats.tablename;
            end if;
        end loop;
    end loop;
    v_refreshed := clock_timestamp();  -- taken first: Citus refuses a volatile function in an UPDATE
    update erasure_request r
       set statistics_refreshed_at = case when cardinality(v_stale) = 0 then v_refreshed end,
           statistics_stale = v_stale
     where r.id = v_request.id
    returning * into v_request;
    return v_request;
end
$$;
comment on function __tenant__.refresh_erasure_statistics(bigint) is
    'Takes the planner statistics of the tables an erasure touched again, so pg_stats holds none of the erased values, '
    'and stamps the receipt; run it after the erasure commits (pgrecall erase does).';
