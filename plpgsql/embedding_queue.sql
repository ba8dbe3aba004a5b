-- Embeddings are a derived index: the write path queues work here, the
-- worker (pgrecall worker) claims it with SKIP LOCKED under a lease, embeds
-- the text this file chooses, and stores the vector stamped with the model
-- and input version. A result computed from text that has since changed, or
-- by a worker whose lease was taken over, is dropped.

-- Keeps the queue and the index in step with the memory table.
create or replace function __tenant__._memory_changed()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_live boolean := new.superseded_by is null and new.invalidated_at is null;
begin
    if tg_op = 'UPDATE' and new.body is not distinct from old.body and new.title is not distinct from old.title
       and v_live = (old.superseded_by is null and old.invalidated_at is null) then
        return null;
    end if;
    if tg_op = 'UPDATE' then
        delete from memory_embedding me where me.memory_id = new.id;
        delete from projection_dependency d where d.kind = 'memory_embedding' and d.row_key = new.id::text;
    end if;
    if v_live then
        insert into embedding_job as j (memory_id) values (new.id)
        on conflict (memory_id) do update
            set generation = j.generation + 1, enqueued_at = clock_timestamp(), leased_by = null, lease_until = null;
        perform pg_notify('pgrecall_embed___tenant__', '');
    else
        delete from embedding_job j where j.memory_id = new.id;
    end if;
    return null;
end
$$;
comment on function __tenant__._memory_changed() is
    'Internal trigger: a new or re-worded memory is queued for embedding; a corrected, superseded or forgotten one loses its stale vector.';

create or replace trigger memory_embedding_queue after insert or update on __tenant__.memory
    for each row execute function __tenant__._memory_changed();

-- The text embedded for memories under an input version. Version 2 adds the
-- turns before and after each memory's first evidence in its session: short
-- conversational turns are ambiguous alone (measured: make eval).
create or replace function __tenant__._embedding_inputs(p_memory_ids bigint[], p_version integer)
returns table (memory_id bigint, input text)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_version is null or p_version not in (1, 2) then
        perform _fail('PR107', format('unknown embedding input version %s', coalesce(p_version::text, 'NULL')),
                      'Versions are 1 and 2.');
    end if;
    return query
    select m.id, concat_ws(E'\n', m.title, m.body, before.body, after.body)
      from memory m
      left join lateral (
            select o.scope, o.log_offset, o.session_id
              from memory_link l join observation o on o.id = l.target_observation_id
             where p_version = 2 and l.memory_id = m.id and l.link_type = 'derived_from'
             order by o.log_offset limit 1) ev on true
      -- One branch for turns without a session and one for turns in one, so
      -- that each is a single probe of observation_neighbours.
      left join lateral (
            (select o.body from observation o
              where ev.session_id is null and o.scope = ev.scope and o.session_id is null
                and o.log_offset < ev.log_offset
              order by o.log_offset desc limit 1)
            union all
            (select o.body from observation o
              where o.scope = ev.scope and o.session_id = ev.session_id and o.log_offset < ev.log_offset
              order by o.log_offset desc limit 1)) before on true
      left join lateral (
            (select o.body from observation o
              where ev.session_id is null and o.scope = ev.scope and o.session_id is null
                and o.log_offset > ev.log_offset
              order by o.log_offset limit 1)
            union all
            (select o.body from observation o
              where o.scope = ev.scope and o.session_id = ev.session_id and o.log_offset > ev.log_offset
              order by o.log_offset limit 1)) after on true
     where m.id = any (p_memory_ids);
end
$$;
comment on function __tenant__._embedding_inputs(bigint[], integer) is
    'Internal: the text that is embedded for each memory under an input version.';

-- The memories whose embedded text may hold one of these observations
-- although they are not derived from it: input version 2 adds the turn
-- before and the turn after a memory's first evidence (above). Erasure reads
-- this while the observations still exist. Only an erased turn's immediate
-- neighbours can have embedded it: a new turn always comes after every turn
-- of its session (offsets grow), so the turn next to an evidence turn only
-- changes when one is erased, and that erasure queued the memory again. A run
-- of erased turns is covered by its two ends. Any derived_from link to a
-- neighbour counts, not only the first evidence: a memory with several
-- observations of evidence is re-embedded once too often, never missed.
create or replace function __tenant__._memories_embedding_turns(p_observation_ids bigint[])
returns bigint[]
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with erased as (
        select o.scope, o.session_id, o.log_offset from observation o where o.id = any (p_observation_ids)
    ), neighbour as (
        -- one probe of observation_neighbours per direction, with or without a session
        select n.id from erased x
         cross join lateral (
            (select o.id from observation o
              where x.session_id is null and o.scope = x.scope and o.session_id is null
                and o.log_offset < x.log_offset
              order by o.log_offset desc limit 1)
            union all
            (select o.id from observation o
              where o.scope = x.scope and o.session_id = x.session_id and o.log_offset < x.log_offset
              order by o.log_offset desc limit 1)
            union all
            (select o.id from observation o
              where x.session_id is null and o.scope = x.scope and o.session_id is null
                and o.log_offset > x.log_offset
              order by o.log_offset limit 1)
            union all
            (select o.id from observation o
              where o.scope = x.scope and o.session_id = x.session_id and o.log_offset > x.log_offset
              order by o.log_offset limit 1)) n
    )
    select coalesce(array_agg(distinct l.memory_id), '{}')
      from memory_link l
     where l.target_observation_id in (select n.id from neighbour n) and l.link_type = 'derived_from'
$$;
comment on function __tenant__._memories_embedding_turns(bigint[]) is
    'Internal: memories whose version-2 embedding input may include these observations as neighbouring turns.';

create or replace function __tenant__._embedding_input(p_memory_id bigint, p_version integer)
returns text
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select i.input from _embedding_inputs(array[p_memory_id], p_version) i
$$;
comment on function __tenant__._embedding_input(bigint, integer) is
    'Internal: the text that is embedded for one memory under an input version.';

create or replace function __tenant__.claim_embedding_jobs(p_worker text, p_limit integer default 64)
returns table (memory_id bigint, generation bigint, input text, model text, input_version integer)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_model text := _setting_value('embedding_model') #>> '{}';
    v_version integer := (_setting_value('embedding_input_version') #>> '{}')::integer;
    v_lease interval := make_interval(secs => (_setting_value('embedding_lease_seconds') #>> '{}')::double precision);
    v_session integer;
    v_holders integer[];
begin
    perform _check_claim(p_worker, p_limit);
    v_session := _lease_session();
    v_holders := _lease_holders();
    return query
    with ready as (
        -- free, expired, or held by a session that has ended (plpgsql/leases.sql);
        -- spelled out, not a helper: a function call per leased row tripled the
        -- time of a claim past 2000 leased jobs (2.7 -> 7-10 ms)
        select j.memory_id from embedding_job j
         where j.lease_until is null or j.lease_until < clock_timestamp()
            or (v_holders is not null and j.lease_session is not null and not (j.lease_session = any (v_holders)))
         order by j.enqueued_at, j.memory_id
         limit p_limit
         for update skip locked
    ), claimed as (
        update embedding_job j
           set leased_by = p_worker, lease_until = clock_timestamp() + v_lease, lease_session = v_session,
               attempts = j.attempts + 1
          from ready r where j.memory_id = r.memory_id
        returning j.memory_id, j.generation
    )
    select c.memory_id, c.generation, i.input, v_model, v_version
      from claimed c
      join _embedding_inputs(array(select c2.memory_id from claimed c2), v_version) i on i.memory_id = c.memory_id
     order by c.memory_id;
end
$$;
comment on function __tenant__.claim_embedding_jobs(text, integer) is
    'Leases up to p_limit embedding jobs to a worker (SKIP LOCKED) and returns the text to embed for each; a lease ends at embedding_lease_seconds or with the claiming session.';

create or replace function __tenant__.complete_embedding_jobs(
    p_worker         text,
    p_memory_ids     bigint[],
    p_generations    bigint[],
    p_embeddings     text[],          -- vector literals, '[0.1,0.2,...]'
    p_model          text,
    p_input_version  integer
)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_stored integer;
begin
    if not _embedding_results_usable('memory', p_memory_ids, p_generations, p_embeddings, p_model,
                                     p_input_version) then
        -- The tenant moved to another model or input version meanwhile: the
        -- jobs were re-queued by set_embedding_version(); drop these results.
        return 0;
    end if;
    -- Only jobs this worker still holds at the generation it was given: a
    -- re-worded memory or a lease taken over by another worker drops the result.
    with mine as (
        select j.memory_id, x.embedding
          from unnest(p_memory_ids, p_generations, p_embeddings::__ext__.vector[]) as x(memory_id, generation, embedding)
          join embedding_job j on j.memory_id = x.memory_id and j.generation = x.generation and j.leased_by = p_worker
         order by j.memory_id
           for update of j
    ), stored as (
        insert into memory_embedding as me (memory_id, model, input_version, embedding)
        select m.memory_id, p_model, p_input_version, m.embedding from mine m
        on conflict (memory_id) do update
            set model = excluded.model, input_version = excluded.input_version,
                embedding = excluded.embedding, embedded_at = now()
        returning me.memory_id
    ), registered as (
        -- a vector of the text: from what the text came from, corrections' evidence included
        insert into projection_dependency (kind, row_key, observation_id)
        select 'memory_embedding', d.row_key, d.observation_id
          from stored st join projection_dependency d on d.kind = 'memory' and d.row_key = st.memory_id::text
        union
        select 'memory_embedding', st.memory_id::text, c.observation_id
          from stored st join memory_correction_evidence c on c.memory_id = st.memory_id
        on conflict do nothing
    ), done as (
        delete from embedding_job j using stored st where j.memory_id = st.memory_id
    )
    select count(*) into v_stored from stored;
    return v_stored;
end
$$;
comment on function __tenant__.complete_embedding_jobs(text, bigint[], bigint[], text[], text, integer) is
    'Stores the worker''s embeddings for jobs it still holds at the same generation; returns how many were stored.';

create or replace function __tenant__.release_embedding_jobs(p_worker text, p_memory_ids bigint[])
returns integer
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with released as (
        update embedding_job j set leased_by = null, lease_until = null
         where j.memory_id = any (p_memory_ids) and j.leased_by = p_worker
        returning 1)
    select count(*)::integer from released
$$;
comment on function __tenant__.release_embedding_jobs(text, bigint[]) is
    'Gives leased jobs back to the queue at once (a worker that failed or is stopping).';

create or replace function __tenant__.embedding_status()
returns table (queued bigint, leased bigint, current bigint, stale bigint, model text, input_version integer,
               passages_queued bigint, passages_current bigint, passages_stale bigint)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select (select count(*) from embedding_job),
           (select count(*) from embedding_job j where j.lease_until >= clock_timestamp())
             + (select count(*) from passage_embedding_job j where j.lease_until >= clock_timestamp()),
           (select count(*) from memory_embedding me
             where me.model = _setting_value('embedding_model') #>> '{}'
               and me.input_version = (_setting_value('embedding_input_version') #>> '{}')::integer),
           (select count(*) from memory_embedding me
             where me.model <> _setting_value('embedding_model') #>> '{}'
                or me.input_version <> (_setting_value('embedding_input_version') #>> '{}')::integer),
           _setting_value('embedding_model') #>> '{}',
           (_setting_value('embedding_input_version') #>> '{}')::integer,
           -- passages (plpgsql/passages.sql): vectors live on the passage row
           (select count(*) from passage_embedding_job),
           (select count(*) from passage p
             where p.embedding_model = _setting_value('embedding_model') #>> '{}'
               and p.embedding_input_version = (_setting_value('embedding_input_version') #>> '{}')::integer),
           (select count(*) from passage p
             where p.embedding_model <> _setting_value('embedding_model') #>> '{}'
                or p.embedding_input_version <> (_setting_value('embedding_input_version') #>> '{}')::integer)
$$;
comment on function __tenant__.embedding_status() is
    'Queue length, leased jobs, current and stale embeddings, and the model and input version in force; the same for passages.';

create or replace function __tenant__.rebuild_embeddings(p_everything boolean default false)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_model text := _setting_value('embedding_model') #>> '{}';
    v_version integer := (_setting_value('embedding_input_version') #>> '{}')::integer;
    v_count bigint;
begin
    insert into embedding_job as j (memory_id)
    select m.id from memory m
     where m.superseded_by is null and m.invalidated_at is null
       and (p_everything or not exists (select 1 from memory_embedding me where me.memory_id = m.id
                                           and me.model = v_model and me.input_version = v_version))
    on conflict (memory_id) do update
        set generation = j.generation + 1, enqueued_at = clock_timestamp(), leased_by = null, lease_until = null;
    get diagnostics v_count = row_count;
    v_count := v_count + _queue_passage_embeddings(coalesce(p_everything, false));
    perform pg_notify('pgrecall_embed___tenant__', '');
    return v_count;
end
$$;
comment on function __tenant__.rebuild_embeddings(boolean) is
    'Queues every live memory and passage without a current embedding (or all of them) for the worker. Returns how many.';

create or replace function __tenant__.set_embedding_version(p_model text, p_input_version integer)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_model is null or p_model = '' then
        perform _fail('PR107', 'an embedding model name is required');
    end if;
    if p_input_version is null or p_input_version not in (1, 2) then
        perform _fail('PR107', format('unknown embedding input version %s', coalesce(p_input_version::text, 'NULL')),
                      'Versions are 1 (title and body) and 2 (body with neighbouring turns).');
    end if;
    update setting s set value = to_jsonb(p_model) where s.key = 'embedding_model';
    update setting s set value = to_jsonb(p_input_version) where s.key = 'embedding_input_version';
    -- Jobs for memories whose vector already has the new stamp are done.
    delete from embedding_job j
     using memory_embedding me
     where me.memory_id = j.memory_id and me.model = p_model and me.input_version = p_input_version;
    -- Vectors of the old stamp stay but are ignored by recall until replaced.
    return rebuild_embeddings(false);
end
$$;
comment on function __tenant__.set_embedding_version(text, integer) is
    'Switches the embedding model or input version and queues every live memory; stale vectors are ignored until rebuilt.';
