-- A passage that says exactly what a memory's vector was computed from uses
-- that vector (migration 0033): a turn quoted by the memory that cites it is
-- embedded and indexed once. Lending happens when the worker stores the
-- memory's vector (complete_embedding_jobs) and takes the passage's job off
-- the queue; a trigger on memory_embedding takes the loan back when the
-- vector goes or changes, and queues the passage for a vector of its own.
-- Only input version 1 lends: its input is the memory's own text, while
-- version 2 adds the turns around the evidence.

-- Lends the current vectors of these memories to the passages they quote:
-- the only passage of a turn the memory is derived from, whose text is the
-- memory's version-1 input, and which wants a vector (it is queued, or holds
-- one of its own, which it gives up). Returns how many passages borrowed.
create or replace function __tenant__._lend_memory_vectors(p_memory_ids bigint[])
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_lent bigint[];
begin
    -- The queue rows first, in passage order, then the passages: the order in which a worker storing the
    -- passages' own vectors takes them (_lease_held_passage_embedding, then the passage). The other order
    -- deadlocked with it when both were stored at once (tests/test_embedding_lock_order.py).
    perform 1 from passage_embedding_job j
     where j.passage_id in (select p.id
                              from memory_link l
                              join observation o on o.id = l.target_observation_id
                              join passage p on p.scope = o.scope and p.observation_id = o.id and p.ordinal = 1
                             where l.memory_id = any (p_memory_ids) and l.link_type = 'derived_from')
     order by j.passage_id
       for update of j;
    with lenders as (
        select distinct on (p.id) p.id, p.scope, me.memory_id
          from memory_embedding me
          cross join _embedding_stamp() st
          join _embedding_inputs(p_memory_ids, 1) i on i.memory_id = me.memory_id
          join memory_link l on l.memory_id = me.memory_id and l.link_type = 'derived_from'
          join observation o on o.id = l.target_observation_id
          join passage p on p.scope = o.scope and p.observation_id = o.id and p.ordinal = 1
         where me.memory_id = any (p_memory_ids)
           and me.model = st.model and me.input_version = st.input_version and me.input_version = 1
           and p.start_byte = 0 and p.end_byte = octet_length(o.body) and p.body = i.input
           and p.vector_memory_id is null
           and (p.embedding is not null
                or exists (select 1 from passage_embedding_job j where j.passage_id = p.id and j.scope = p.scope))
         order by p.id, me.memory_id
    ), lent as (
        update passage p
           set vector_memory_id = x.memory_id, embedding = null, embedding_model = null,
               embedding_input_version = null, embedded_at = null
          from lenders x
         where p.id = x.id and p.scope = x.scope
        returning p.id
    )
    select coalesce(array_agg(l.id), '{}') into v_lent from lent l;
    -- Their jobs by key, a statement of its own: as a third CTE the dequeue was planned once per session
    -- for a handful of rows and joined each queue row to every lent passage, 125,000 comparisons for a
    -- batch of 500 (issue #46).
    delete from passage_embedding_job j where j.passage_id = any (v_lent);
    return cardinality(v_lent);
end
$$;
comment on function __tenant__._lend_memory_vectors(bigint[]) is
    'Internal: the passages these memories quote word for word (one-passage turns they derive from) borrow the memories'' current vectors.';

-- Takes back the vectors these memories lent: the passages are queued for
-- their own (when their scope's policy still embeds them). Returns how many.
create or replace function __tenant__._withdraw_lent_vectors(p_memory_ids bigint[])
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_queued bigint;
begin
    with back as (
        update passage p set vector_memory_id = null
         where p.vector_memory_id = any (p_memory_ids)
        returning p.id, p.scope, p.observation_id
    ), queued as (
        insert into passage_embedding_job as j (passage_id, scope, enqueued_at)
        select b.id, b.scope, clock_timestamp()
          from back b
          join _passage_embedding_policies() pol on pol.scope = b.scope
         cross join lateral (select o.kind from observation o where o.id = b.observation_id limit 1) o
         where pol.policy = 'all' or (pol.policy = 'messages' and o.kind = 'message')
        on conflict (passage_id) do update
            set generation = j.generation + 1, enqueued_at = excluded.enqueued_at, leased_by = null, lease_until = null
        returning 1
    )
    select count(*) into v_queued from queued;
    if v_queued > 0 then
        perform _notify('embed');
    end if;
    return v_queued;
end
$$;
comment on function __tenant__._withdraw_lent_vectors(bigint[]) is
    'Internal: passages borrowing these memories'' vectors lose them and are queued for vectors of their own.';

-- A deleted vector, or one replaced by another (another model, input
-- version or text), is no longer the passage's: the loan ends. The worker
-- lends a re-embedded memory's vector again where the text still matches.
create or replace function __tenant__._memory_vectors_changed()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_ids bigint[];
begin
    -- The transition tables are read alone first: on Citus a statement that joins one to a table of
    -- the tenant is sent to the shard, where the transition table does not exist.
    if tg_op = 'DELETE' then
        v_ids := array(select r.memory_id from removed r);
    else
        v_ids := array(select r.memory_id from removed r join added a on a.memory_id = r.memory_id
                        where (a.model, a.input_version) is distinct from (r.model, r.input_version)
                           or a.embedding is distinct from r.embedding);
    end if;
    if cardinality(v_ids) > 0 then
        perform _withdraw_lent_vectors(v_ids);
    end if;
    return null;
end
$$;
comment on function __tenant__._memory_vectors_changed() is
    'Internal trigger: passages borrowing a memory vector that was deleted or replaced are queued for their own.';

create or replace trigger memory_embedding_withdrawn after delete on __tenant__.memory_embedding
    referencing old table as removed
    for each statement execute function __tenant__._memory_vectors_changed();
create or replace trigger memory_embedding_replaced after update on __tenant__.memory_embedding
    referencing old table as removed new table as added
    for each statement execute function __tenant__._memory_vectors_changed();
