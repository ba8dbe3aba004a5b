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
    v_waiting boolean;
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
        -- No notification when work waits already (notifications.sql), asked before this job is queued.
        v_waiting := _embed_work_waiting();
        -- The time is inserted and taken from excluded: Citus refuses a function that is not
        -- immutable in DO UPDATE SET, and evaluates one in the inserted row.
        insert into embedding_job as j (memory_id, enqueued_at) values (new.id, clock_timestamp())
        on conflict (memory_id) do update
            set generation = j.generation + 1, enqueued_at = excluded.enqueued_at, leased_by = null, lease_until = null,
                restamp_only = false;
        if not v_waiting then
            perform _notify('embed');
        end if;
    else
        delete from embedding_job j where j.memory_id = new.id;
    end if;
    return null;
end
$$;
comment on function __tenant__._memory_changed() is
    'Internal trigger: a new or re-worded memory is queued for embedding; a corrected, superseded or forgotten one loses its stale vector.';

-- A new memory whose vector its writer gives in the same transaction is not
-- queued: _remember_batch turns pgrecall.memory_vectors_given on around its
-- insert. Any role may set the setting in its own session, so every other
-- statement that inserts memories turns it off just before (derive, supersede,
-- store_put and _remember_batch's other insert; tests/test_sources.py holds
-- each insert into memory to it): a caller's setting queues nothing less. An
-- update (a re-worded or retired memory) is always seen.
create or replace trigger memory_embedding_queue after update on __tenant__.memory
    for each row execute function __tenant__._memory_changed();
create or replace trigger memory_embedding_queue_new after insert on __tenant__.memory
    for each row when (current_setting('pgrecall.memory_vectors_given', true) is distinct from 'on')
    execute function __tenant__._memory_changed();

-- The model and input version vectors are stamped with now.
create or replace function __tenant__._embedding_stamp(out model text, out input_version integer)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _setting_value('embedding_model') #>> '{}', (_setting_value('embedding_input_version') #>> '{}')::integer
$$;
comment on function __tenant__._embedding_stamp() is
    'Internal: the embedding model and input version in force (what current vectors are stamped with).';

-- The turn just before and just after each of these observations in its
-- conversation (its session, or its scope's turns without one). Input
-- version 2 embeds them with a memory's first evidence, and erasure asks
-- which memories embedded an erased turn that way; both read them here. Each
-- direction is one branch for turns without a session and one for turns in
-- one, so that each is a single probe of observation_neighbours.
create or replace function __tenant__._turns_around(p_observation_ids bigint[])
returns table (observation_id bigint, before_id bigint, before_body text, before_audience bigint[],
               after_id bigint, after_body text, after_audience bigint[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select x.id, b.id, b.body, b.audience, a.id, a.body, a.audience
      from observation x
      left join lateral (
            (select o.id, o.body, o.audience from observation o
              where x.session_id is null and o.scope = x.scope and o.session_id is null
                and o.log_offset < x.log_offset
              order by o.log_offset desc limit 1)
            union all
            (select o.id, o.body, o.audience from observation o
              where o.scope = x.scope and o.session_id = x.session_id and o.log_offset < x.log_offset
              order by o.log_offset desc limit 1)) b on true
      left join lateral (
            (select o.id, o.body, o.audience from observation o
              where x.session_id is null and o.scope = x.scope and o.session_id is null
                and o.log_offset > x.log_offset
              order by o.log_offset limit 1)
            union all
            (select o.id, o.body, o.audience from observation o
              where o.scope = x.scope and o.session_id = x.session_id and o.log_offset > x.log_offset
              order by o.log_offset limit 1)) a on true
     where x.id = any (p_observation_ids);
end
$$;
comment on function __tenant__._turns_around(bigint[]) is
    'Internal: the turns just before and after each observation in its conversation (session, or sessionless turns of its scope), with their audiences.';

-- What is embedded for memories under an input version, in its parts: the
-- memory's own text (title and body), and under version 2 the turns before
-- and after its first evidence in its session: short conversational turns are
-- ambiguous alone (measured: make eval). A neighbour is given only when
-- everyone the memory's audience admits may see it (_audience_within): a
-- vector is read by whoever may recall the memory, so the text it is computed
-- from holds no turn they may not see. A neighbour left out is not replaced
-- by the next turn, so the memories whose input may hold a turn stay that
-- turn's neighbours' (erasure's question, below). _embedding_inputs joins the
-- parts into the text embedded; _embedding_windows makes them the text vector
-- the lexical arm may search (migration 0049).
create or replace function __tenant__._embedding_parts(p_memory_ids bigint[], p_version integer)
returns table (memory_id bigint, own text, before_body text, after_body text)
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
    with ev as (
        select m.id, (select l.target_observation_id
                        from memory_link l join observation o on o.id = l.target_observation_id
                       where p_version = 2 and l.memory_id = m.id and l.link_type = 'derived_from'
                       order by o.log_offset limit 1) as evidence_id
          from memory m
         where m.id = any (p_memory_ids)
    )
    select m.id, concat_ws(E'\n', m.title, m.body),
           case when _audience_within(m.audience_peer_id, t.before_audience) then t.before_body end,
           case when _audience_within(m.audience_peer_id, t.after_audience) then t.after_body end
      from ev
      join memory m on m.id = ev.id
      left join _turns_around(array(select e.evidence_id from ev e where e.evidence_id is not null)) t
             on t.observation_id = ev.evidence_id;
end
$$;
comment on function __tenant__._embedding_parts(bigint[], integer) is
    'Internal: the parts of what is embedded for each memory under an input version: its own text, and the turns around its evidence that its audience may see.';

create or replace function __tenant__._embedding_inputs(p_memory_ids bigint[], p_version integer)
returns table (memory_id bigint, input text)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return query
    select p.memory_id, concat_ws(E'\n', p.own, p.before_body, p.after_body)
      from _embedding_parts(p_memory_ids, p_version) p;
end
$$;
comment on function __tenant__._embedding_inputs(bigint[], integer) is
    'Internal: the text that is embedded for each memory under an input version.';

-- Input version 2's text as a text vector: the memory's own words at weight
-- A, its neighbours' at the default D (the lexical arm counts a D position
-- half), and BM25's length of it: its distinct words, a word only the
-- neighbours hold counted half (the arm's own length is length(tsv), the
-- distinct words). Written with the version-2 vector (complete_embedding_jobs).
create or replace function __tenant__._embedding_windows(p_memory_ids bigint[])
returns table (memory_id bigint, window_tsv tsvector, window_length real)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return query
    select w.memory_id, w.tsv,
           (select coalesce(sum(case when 'A' = any (u.weights) then 1.0 else 0.5 end), 0) from unnest(w.tsv) u)::real
      from (select p.memory_id,
                   setweight(to_tsvector('english', p.own), 'A')
                   || to_tsvector('english', concat_ws(E'\n', p.before_body, p.after_body)) as tsv
              from _embedding_parts(p_memory_ids, 2) p) w;
end
$$;
comment on function __tenant__._embedding_windows(bigint[]) is
    'Internal: each memory''s input-version-2 text as a text vector (own words A, neighbours'' D) and its BM25 length.';

-- The memories whose embedded text may hold one of these observations
-- although they are not derived from it: input version 2 adds the turn
-- before and the turn after a memory's first evidence (above). Erasure reads
-- this while the observations still exist. Only an erased turn's immediate
-- neighbours can have embedded it: a new turn always comes after every turn
-- of its session (offsets grow), so the turn next to an evidence turn only
-- changes when one is erased, and that erasure queued the memory again, or
-- when the first turn after it comes (_queue_turns_before queues it then). A run
-- of erased turns is covered by its two ends. Any derived_from link to a
-- neighbour counts, not only the first evidence: a memory with several
-- observations of evidence is re-embedded once too often, never missed.
create or replace function __tenant__._memories_embedding_turns(p_observation_ids bigint[])
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    select coalesce(array_agg(distinct l.memory_id), '{}')
      from memory_link l
     where l.target_observation_id in (select n.id from _turns_around(p_observation_ids) t
                                        cross join lateral (values (t.before_id), (t.after_id)) n(id))
       and l.link_type = 'derived_from'
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._memories_embedding_turns(bigint[]) is
    'Internal: memories whose version-2 embedding input may include these observations as neighbouring turns.';

-- The turn after: input version 2 embeds a memory with the turns before and
-- after its first evidence, and a memory embedded while its evidence was the
-- latest turn of its conversation had no turn after it. The turn that comes
-- next is that one, so appending turns queues again, at a new generation (a
-- worker holding the old one stores nothing), the memories derived from the
-- turn just before the first new turn of each conversation the new turns are
-- in, when their audience fits within the new turn's (else their text does
-- not change). A memory that cites that turn but not first is queued once too
-- often, never missed: finding its first evidence would join the log on every
-- append. Under version 2, a memory queued and not yet claimed is queued
-- again too: its job row, locked by this until the new turns commit, is one
-- a worker's claim (SKIP LOCKED) passes over; left alone, a claim in that
-- time read its turns without the new one, and nothing queued it again.
-- Under version 1 its job embeds its own title and body, which no turn
-- changes. A memory neither queued nor embedded under version 2 is left
-- alone. Each statement probes (the
-- log backwards from the new turn, the links by their target): an append's
-- cost does not grow with its conversation (test_plans_stay_probes).
-- p_from, p_to: the new turns' offsets in p_scope, p_from excluded.
create or replace function __tenant__._queue_turns_before(p_scope text, p_from bigint, p_to bigint)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_first record;
    v_before bigint;
    v_memories bigint[];
    v_queued_counts boolean;
begin
    -- The first new turn of each conversation, by the new turns' offsets ("offset 0" keeps them apart: a
    -- plan made on a short log otherwise walked the scope's whole log in (session, offset) order to find them).
    for v_first in
        select distinct on (n.session_id) n.session_id, n.log_offset, n.audience
          from (select o.session_id, o.log_offset, o.audience from observation o
                 where o.scope = p_scope and o.log_offset > p_from and o.log_offset <= p_to offset 0) n
         order by n.session_id, n.log_offset
    loop
        -- The turn before it in its conversation, in the order of observation_neighbours, read backwards
        -- from it (as _turns_around finds it, without reading the rest of the log).
        if v_first.session_id is null then
            select o.id into v_before from observation o
             where o.scope = p_scope and o.session_id is null and o.log_offset < v_first.log_offset
             order by o.scope desc, o.session_id desc, o.log_offset desc limit 1;
        else
            select o.id into v_before from observation o
             where o.scope = p_scope and o.session_id = v_first.session_id and o.log_offset < v_first.log_offset
             order by o.scope desc, o.session_id desc, o.log_offset desc limit 1;
        end if;
        continue when v_before is null;
        -- its memories by the links' target index, read alone (joined, a plan made on few links read them all)
        v_memories := array(select l.memory_id from memory_link l
                             where l.target_observation_id = v_before and l.link_type = 'derived_from'
                             order by l.target_observation_id offset 0);
        continue when cardinality(v_memories) = 0;
        -- under version 1 a job embeds a memory's own title and body, which a new turn does not change
        v_queued_counts := coalesce(v_queued_counts, (select st.input_version from _embedding_stamp() st) = 2);
        insert into embedding_job as j (memory_id, enqueued_at)
        select _unkept_on_citus(m.id), clock_timestamp()
          from memory m
         where m.id = any (v_memories)
           and m.superseded_by is null and m.invalidated_at is null
           and _audience_within(m.audience_peer_id, v_first.audience)
           and ((v_queued_counts and exists (select 1 from embedding_job q where q.memory_id = m.id))
                or exists (select 1 from memory_embedding me where me.memory_id = m.id and me.input_version = 2))
         order by m.id  -- the jobs locked in the worker's order (_lease_held_embedding): no deadlock with its store
        on conflict (memory_id) do update
            set generation = j.generation + 1, enqueued_at = excluded.enqueued_at, leased_by = null, lease_until = null,
                restamp_only = false;
        if found then
            perform _notify('embed');
        end if;
    end loop;
end
$$;
comment on function __tenant__._queue_turns_before(text, bigint, bigint) is
    'Internal: queues again the memories embedded under input version 2 before the turn after their evidence came (the first of the new turns p_from < offset <= p_to in p_scope).';


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

-- Each job carries two texts: the input of the tenant's version (for recall)
-- and the memory's own text alone (text_input, version 1's input), whose
-- vector duplicate proposals compare: under version 2 the turns around two
-- memories stated one after the other make them look alike (measured on the
-- demo conversation: cosine 0.85 for a licence and a vet, 0.10 on their own
-- texts) and hide a real restatement made weeks apart (0.72 against 0.81).
create or replace function __tenant__.claim_embedding_jobs(p_worker text, p_limit integer default 64)
returns table (memory_id bigint, generation bigint, input text, model text, input_version integer, text_input text)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_stamp record;
    v_claimed bigint[];
begin
    -- An empty queue answers at once (checked as the claim checks): a worker that drains after each
    -- batch of writes, on a connection of its own, otherwise plans the lease machinery to find nothing.
    perform _check_claim(p_worker, p_limit);
    if not exists (select 1 from embedding_job) then
        return;
    end if;
    v_stamp := _embedding_stamp();
    v_claimed := array(select _lease_claim_embedding(p_worker, p_limit));
    return query
    select j.memory_id, j.generation, i.input, v_stamp.model, v_stamp.input_version, t.input
      from embedding_job j
      join _embedding_inputs(v_claimed, v_stamp.input_version) i on i.memory_id = j.memory_id
      join _embedding_inputs(v_claimed, 1) t on t.memory_id = j.memory_id
     where j.memory_id = any (v_claimed)
     order by j.memory_id;
end
$$;
comment on function __tenant__.claim_embedding_jobs(text, integer) is
    'Leases up to p_limit embedding jobs to a worker (SKIP LOCKED) and returns the texts to embed for each: the input of the tenant''s version, and the memory''s own text; a lease ends at embedding_lease_seconds or with the claiming session.';

create or replace function __tenant__.complete_embedding_jobs(
    p_worker         text,
    p_memory_ids     bigint[],
    p_generations    bigint[],
    p_embeddings     __ext__.halfvec[],
    p_model          text,
    p_input_version  integer,
    p_text_embeddings __ext__.halfvec[] default null  -- of each job's text_input; NULL (an older worker): none
)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_vectors __ext__.halfvec[];
    v_text_vectors __ext__.halfvec[];
    v_held bigint[];
    v_stored bigint[];
begin
    perform _check_worker(p_worker);
    perform _hold_embedding_stamp();
    if p_text_embeddings is not null then
        if cardinality(p_text_embeddings) is distinct from cardinality(p_memory_ids) then
            perform _fail('PR107', 'memory ids and text embeddings must be arrays of one length');
        end if;
        perform _embedding_results_usable('memory text', p_memory_ids, p_generations, p_text_embeddings, p_model,
                                          p_input_version);
        v_text_vectors := _checked_vectors(p_text_embeddings);
    end if;
    if not _embedding_results_usable('memory', p_memory_ids, p_generations, p_embeddings, p_model,
                                     p_input_version) then
        -- The tenant moved to another model or input version meanwhile: the
        -- jobs were re-queued by set_embedding_version(); drop these results.
        return 0;
    end if;
    v_vectors := _checked_vectors(p_embeddings);
    -- Only jobs this worker still holds at the generation it was given, locked
    -- until the transaction ends: a re-worded memory, a lease taken over by
    -- another worker, or a caller who wrote the vector with the memory
    -- (remember's p_embeddings, which settles the job) drops the result.
    v_held := array(select _lease_held_embedding(p_worker, p_memory_ids, p_generations));
    -- One statement stores the batch, registers what the vectors came from and
    -- settles the jobs (issue #46: a statement per step cost a plan and a pass
    -- over the batch each).
    with stored as (
        insert into memory_embedding as me (memory_id, model, input_version, embedding, text_embedding, embedded_at,
                                            window_tsv, window_length)
        -- One vector where one serves: version 1's input is the memory's own
        -- text, so its recall vector is the text vector too (not stored twice).
        -- Version 2's text is kept as a text vector too, read from the memory
        -- as it is now (the generation held says it is the text embedded).
        select x.memory_id, p_model, p_input_version, x.embedding,
               case when p_input_version <> 1 then x.text_embedding end, now(), w.window_tsv, w.window_length
          from unnest(p_memory_ids, v_vectors,
                      coalesce(v_text_vectors, array_fill(null::__ext__.halfvec, array[cardinality(p_memory_ids)])))
                 as x(memory_id, embedding, text_embedding)
          left join _embedding_windows(case when p_input_version = 2 then v_held else '{}' end) w
                 on w.memory_id = x.memory_id
         where x.memory_id = any (v_held)
        on conflict (memory_id) do update
            set model = excluded.model, input_version = excluded.input_version,
                embedding = excluded.embedding, text_embedding = excluded.text_embedding, embedded_at = excluded.embedded_at,
                window_tsv = excluded.window_tsv, window_length = excluded.window_length
        returning me.memory_id
    ), registered as (
        -- a vector of the text: from what the text came from, corrections' evidence included. A probe per
        -- memory: as a join the plan read every memory's registrations for each batch (O(memories)).
        insert into projection_dependency (kind, row_key, observation_id)
        select 'memory_embedding', d.row_key, d.observation_id
          from stored st
          cross join lateral (select d.row_key, d.observation_id from projection_dependency d
                               where d.kind = 'memory' and d.row_key = st.memory_id::text) d
        union
        select 'memory_embedding', st.memory_id::text, c.observation_id
          from stored st join memory_correction_evidence c on c.memory_id = st.memory_id
        on conflict do nothing
    ), settled as (
        delete from embedding_job j where j.memory_id in (select st.memory_id from stored st)
    )
    select coalesce(array_agg(st.memory_id), '{}') into v_stored from stored st;
    if p_input_version = 1 then
        -- the turns these memories quote word for word use these vectors (passage_vectors.sql)
        perform _lend_memory_vectors(v_stored);
    end if;
    return cardinality(v_stored);
end
$$;
comment on function __tenant__.complete_embedding_jobs(text, bigint[], bigint[], __ext__.halfvec[], text, integer,
                                                        __ext__.halfvec[]) is
    'Stores the worker''s embeddings (and those of the memories'' own texts) for jobs it still holds at the same generation; returns how many were stored.';

create or replace function __tenant__.release_embedding_jobs(p_worker text, p_memory_ids bigint[])
returns integer
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _lease_release_embedding(coalesce(p_worker, ''), p_memory_ids)
$$;
comment on function __tenant__.release_embedding_jobs(text, bigint[]) is
    'Gives leased jobs back to the queue at once (a worker that failed or is stopping).';

-- The embedding worker's side for passages: the same lease queue
-- (leases.sql), generations and stamps as memories; a passage's vector lives
-- on its row.
create or replace function __tenant__.claim_passage_embedding_jobs(p_worker text, p_limit integer default 64)
returns table (passage_id bigint, generation bigint, input text, model text, input_version integer)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_stamp record;
    v_claimed bigint[];
begin
    perform _check_claim(p_worker, p_limit);
    if not exists (select 1 from passage_embedding_job) then  -- as claim_embedding_jobs
        return;
    end if;
    v_stamp := _embedding_stamp();
    v_claimed := array(select _lease_claim_passage_embedding(p_worker, p_limit));
    return query
    -- Every input version embeds a passage's own text.
    select j.passage_id, j.generation, p.body, v_stamp.model, v_stamp.input_version
      from passage_embedding_job j join passage p on p.id = j.passage_id and p.scope = j.scope
     where j.passage_id = any (v_claimed)
     order by j.passage_id;
end
$$;
comment on function __tenant__.claim_passage_embedding_jobs(text, integer) is
    'Leases up to p_limit passage embedding jobs to a worker (SKIP LOCKED) and returns each passage''s text; a lease ends at embedding_lease_seconds or with the claiming session.';

create or replace function __tenant__.complete_passage_embedding_jobs(
    p_worker         text,
    p_passage_ids    bigint[],
    p_generations    bigint[],
    p_embeddings     __ext__.halfvec[],
    p_model          text,
    p_input_version  integer
)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_vectors __ext__.halfvec[];
    v_held bigint[];
    v_stored bigint[];
begin
    perform _check_worker(p_worker);
    perform _hold_embedding_stamp();
    if not _embedding_results_usable('passage', p_passage_ids, p_generations, p_embeddings, p_model,
                                     p_input_version) then
        return 0;  -- the tenant switched model or version meanwhile; the jobs were re-queued
    end if;
    v_vectors := _checked_vectors(p_embeddings);
    -- Only jobs this worker still holds at the generation it was given.
    v_held := array(select _lease_held_passage_embedding(p_worker, p_passage_ids, p_generations));
    with stored as (
        update passage p
           set embedding = x.embedding, embedding_model = p_model, embedding_input_version = p_input_version,
               embedded_at = now()
          from unnest(p_passage_ids, v_vectors) as x(passage_id, embedding)
          join passage_embedding_job j on j.passage_id = x.passage_id
         where x.passage_id = any (v_held) and p.id = j.passage_id and p.scope = j.scope
        returning p.id
    )
    select coalesce(array_agg(st.id), '{}') into v_stored from stored st;
    return _lease_done_passage_embedding(v_stored);
end
$$;
comment on function __tenant__.complete_passage_embedding_jobs(text, bigint[], bigint[], __ext__.halfvec[], text, integer) is
    'Stores the worker''s passage embeddings for jobs it still holds at the same generation; returns how many.';

create or replace function __tenant__.release_passage_embedding_jobs(p_worker text, p_passage_ids bigint[])
returns integer
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _lease_release_passage_embedding(coalesce(p_worker, ''), p_passage_ids)
$$;
comment on function __tenant__.release_passage_embedding_jobs(text, bigint[]) is
    'Gives leased passage jobs back to the queue at once (a worker that failed or is stopping).';

-- Queues passages without a current vector (or all), for rebuild_embeddings();
-- only those their scope's passage_embedding policy embeds (passages.sql).
create or replace function __tenant__._queue_passage_embeddings(p_everything boolean)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count bigint;
    -- Read into a variable, not joined as a function in the delete's USING: Citus cannot send a function's
    -- anonymous record to the worker ("input of anonymous composite types is not implemented").
    v_stamp record := _embedding_stamp();
begin
    insert into passage_embedding_job as j (passage_id, scope, enqueued_at)
    select w.passage_id, w.scope, clock_timestamp() from _passages_wanting_vectors(null, p_everything) w
    on conflict (passage_id) do update
        set generation = j.generation + 1, enqueued_at = excluded.enqueued_at, leased_by = null, lease_until = null;
    get diagnostics v_count = row_count;
    -- A job whose passage already has a vector of the current stamp is done (version switched back).
    if not p_everything then
        delete from passage_embedding_job j using passage p
         where p.id = j.passage_id and p.scope = j.scope
           and ((p.embedding_model = v_stamp.model and p.embedding_input_version = v_stamp.input_version)
                or exists (select 1 from memory_embedding me where me.memory_id = p.vector_memory_id
                              and me.model = v_stamp.model and me.input_version = v_stamp.input_version));
    end if;
    return v_count;
end
$$;
comment on function __tenant__._queue_passage_embeddings(boolean) is
    'Internal: queue every passage its scope''s policy embeds without an embedding of the current stamp (or all of them) for the worker.';

create or replace function __tenant__.embedding_status()
returns table (queued bigint, leased bigint, current bigint, stale bigint, model text, input_version integer,
               passages_queued bigint, passages_current bigint, passages_stale bigint)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select mj.open, mj.leased + pj.leased,
           (select count(*) from memory_embedding me where me.model = st.model and me.input_version = st.input_version),
           (select count(*) from memory_embedding me where me.model <> st.model or me.input_version <> st.input_version),
           st.model, st.input_version,
           -- passages: vectors live on the passage row, or are a memory's (passage_vectors.sql)
           pj.open,
           (select count(*) from passage p
             where p.embedding_model = st.model and p.embedding_input_version = st.input_version)
             + (select count(*) from passage p join memory_embedding me on me.memory_id = p.vector_memory_id
                 where me.model = st.model and me.input_version = st.input_version),
           (select count(*) from passage p
             where p.embedding_model <> st.model or p.embedding_input_version <> st.input_version)
      from _embedding_stamp() st, _lease_counts_embedding() mj, _lease_counts_passage_embedding() pj
$$;
comment on function __tenant__.embedding_status() is
    'Queue length, leased jobs, current and stale embeddings, and the model and input version in force; the same for passages.';

-- A version-2 vector lacks what later migrations keep with it when it was
-- stored before them: its text's own vector (duplicates compare it) and its
-- window (0049, recall_lexical_window); without them it is stale, or an
-- upgraded tenant's plain rebuild would leave the window arm without windows.
create or replace function __tenant__.rebuild_embeddings(p_everything boolean default false)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_count bigint;
begin
    -- Without p_everything a job is the stamp's alone (restamp_only) unless the memory waited already.
    insert into embedding_job as j (memory_id, enqueued_at, restamp_only)
    select m.id, clock_timestamp(), not coalesce(p_everything, false) from memory m cross join _embedding_stamp() st
     where m.superseded_by is null and m.invalidated_at is null
       and (p_everything or not exists (select 1 from memory_embedding me where me.memory_id = m.id
                                           and me.model = st.model and me.input_version = st.input_version
                                           and (me.input_version = 1
                                                or (me.text_embedding is not null and me.window_tsv is not null))))
     order by m.id  -- in the order a storing worker locks jobs
    on conflict (memory_id) do update
        set generation = j.generation + 1, enqueued_at = excluded.enqueued_at, leased_by = null, lease_until = null,
            restamp_only = j.restamp_only and excluded.restamp_only;
    get diagnostics v_count = row_count;
    v_count := v_count + _queue_passage_embeddings(coalesce(p_everything, false));
    perform _notify('embed');
    return v_count;
end
$$;
comment on function __tenant__.rebuild_embeddings(boolean) is
    'Queues every live memory and passage without a current embedding (or all of them) for the worker. Returns how many.';

-- Vectors of zeros (or of numbers too small for half precision) stored before
-- _checked_vectors refused them (shared/embedding_input.sql): their cosine to
-- any query is NaN, which PostgreSQL orders above every number, so such a
-- memory passed every floor and ranked first for every question. This data
-- step (migration 0050) deletes those memory vectors, as a changed text's are,
-- and queues their live memories for the worker to embed again; a key's
-- vector of zeros goes (the key stays, found by its words). Returns how many.
create or replace function __tenant__._clear_zero_vectors()
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_memories bigint[];
    v_keys bigint;
begin
    select coalesce(array_agg(me.memory_id), '{}') into v_memories
      from memory_embedding me
     where __ext__.l2_norm(me.embedding) = 0 or __ext__.l2_norm(me.text_embedding) = 0;
    if cardinality(v_memories) > 0 then
        delete from memory_embedding me where me.memory_id = any (v_memories);
        delete from projection_dependency d
         where d.kind = 'memory_embedding' and d.row_key = any (v_memories::text[]);
        insert into embedding_job as j (memory_id, enqueued_at)
        select m.id, clock_timestamp() from memory m
         where m.id = any (v_memories) and m.superseded_by is null and m.invalidated_at is null
         order by m.id  -- in the order a storing worker locks jobs
        on conflict (memory_id) do update
            set generation = j.generation + 1, enqueued_at = excluded.enqueued_at, leased_by = null, lease_until = null,
                restamp_only = false;
        perform _notify('embed');
    end if;
    update memory_key k set embedding = null, embedding_model = null where __ext__.l2_norm(k.embedding) = 0;
    get diagnostics v_keys = row_count;
    return cardinality(v_memories) + v_keys;
end
$$;
comment on function __tenant__._clear_zero_vectors() is
    'Internal data step (migration 0050): deletes memory vectors of zeros (their cosine is NaN) and queues their memories again; clears key vectors of zeros. Returns how many.';

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
    perform _check_length(p_model, 'model name', 200);
    if p_input_version is null or p_input_version not in (1, 2) then
        perform _fail('PR107', format('unknown embedding input version %s', coalesce(p_input_version::text, 'NULL')),
                      'Versions are 1 (title and body) and 2 (body with neighbouring turns).');
    end if;
    -- the model's row first: a worker storing results holds it (_hold_embedding_stamp), and this waits
    update setting s set value = to_jsonb(p_model) where s.key = 'embedding_model';
    update setting s set value = to_jsonb(p_input_version) where s.key = 'embedding_input_version';
    -- Jobs queued only for a stamp are done where the memory's vector has the new one; a job queued
    -- for another reason (a reply came after the vector was made) still is not. They are locked first
    -- in memory id order, the order an append and a storing worker take jobs in: deleted in the order
    -- they were read, two of them could each be held by a switch and an append waiting on the other.
    perform 1 from embedding_job j
       join memory_embedding me on me.memory_id = j.memory_id
      where j.restamp_only and me.model = p_model and me.input_version = p_input_version
        and (me.input_version = 1 or me.text_embedding is not null)
      order by j.memory_id
        for update of j;
    delete from embedding_job j
     using memory_embedding me
     where me.memory_id = j.memory_id and j.restamp_only
       and me.model = p_model and me.input_version = p_input_version
       and (me.input_version = 1 or me.text_embedding is not null);
    -- Vectors of the old stamp stay but are ignored by recall until replaced.
    return rebuild_embeddings(false);
end
$$;
comment on function __tenant__.set_embedding_version(text, integer) is
    'Switches the embedding model or input version and queues every live memory; stale vectors are ignored until rebuilt.';
