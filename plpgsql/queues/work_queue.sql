-- The derivation work queue (design section 5).
--
-- Each message queues, as the flags say, one task per lane, where a lane is
-- (session, task type, sender, observer):
--   * representation, observer NULL: the sender's global representation, when
--     the sender is observed globally;
--   * representation, observer P: P's local view of the sender, for every
--     other active peer P of the session that observes others and may see
--     the message (its audience admits P), when the sender is observed by
--     others;
--   * summary (no sender, no observer): every summary_every_messages messages.
-- Tasks of one lane are handed out strictly in message order: a task is
-- claimable only when every earlier task of its lane is done or dead.
-- Different lanes proceed in parallel. Tasks are leased, finished and given
-- back through the lease queue of plpgsql/queues/leases.sql, as the embedding jobs
-- are: SKIP LOCKED, a lease that ends when it expires or its session ends,
-- retries after exponential backoff, dead-lettered after task_max_attempts.
-- This file chooses which tasks may be claimed (the lanes' heads). A task is
-- complete only through complete_task(), in the transaction that wrote its
-- results.
--
-- Tasks carry a message reference and results: they are a projection
-- (kind work_task) registered against their message, so erasure deletes them.

-- The tasks and their registry rows are written by statements of their own,
-- not by data-modifying CTEs: Citus plans those as subplans and sends their
-- results to every worker, so that a session message of a tenant on one
-- worker failed while another worker was down.
create or replace function __tenant__._enqueue_messages(p_session_id bigint, p_offsets bigint[])
returns table (ordinal integer, log_offset bigint, tasks integer)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_session session;
    v_every bigint := (_setting_value('summary_every_messages') #>> '{}')::bigint;
    v_global_default boolean := (_setting_value('observed_globally') #>> '{}')::boolean;
    v_messages bigint[];
begin
    select * into v_session from session s where s.id = p_session_id;
    update session s set messages = s.messages + cardinality(p_offsets) where s.id = p_session_id;
    perform _notify('derive');
    -- the messages' observations, in the order given (each probed by its offset)
    v_messages := array(select o.id from unnest(p_offsets) with ordinality as m(off, n)
                          cross join lateral (select o.id from observation o
                                               where o.scope = v_session.scope and o.log_offset = m.off limit 1) o
                         order by m.n);
    insert into work_task (task_type, session_id, sender_id, observer_id, observation_id, message_offset)
    select w.task_type, p_session_id, w.sender_id, w.observer_id, w.id, w.log_offset
      from (select 'representation' as task_type, m.actor_id as sender_id, null::bigint as observer_id, m.id,
                   m.log_offset
              from observation m join peer p on p.id = m.actor_id
             where m.id = any (v_messages) and coalesce(p.observed_globally, v_global_default)
            union all
            select 'representation', m.actor_id, o.peer_id, m.id, m.log_offset
              from observation m
              join session_peer me on me.session_id = p_session_id and me.peer_id = m.actor_id
              join session_peer o on o.session_id = p_session_id and o.peer_id <> m.actor_id
             where m.id = any (v_messages) and me.observed_by_others and o.observe_others and o.left_at is null
               and _audience_admits(o.peer_id, null, m.audience)
            union all
            select 'summary', null, null, m.id, m.log_offset
              from unnest(v_messages) with ordinality as k(id, ord)
              join observation m on m.id = k.id
             where v_every > 0 and (v_session.messages + k.ord) % v_every = 0) w
     order by w.log_offset, w.task_type, w.observer_id nulls first;
    -- the tasks of these messages are the ones just written: the messages are new
    insert into projection_dependency (kind, row_key, observation_id)
    select 'work_task', t.id::text, t.observation_id from work_task t where t.observation_id = any (v_messages);
    return query
    select k.ord::integer, m.log_offset, (select count(*)::integer from work_task t where t.observation_id = m.id)
      from unnest(v_messages) with ordinality as k(id, ord)
      join observation m on m.id = k.id
     order by k.ord;
end
$$;
comment on function __tenant__._enqueue_messages(bigint, bigint[]) is
    'Internal: queues the derivation tasks of new session messages (offsets in the session''s scope), as the flags say.';

create or replace function __tenant__.claim_tasks(p_worker text, p_limit integer default 10,
                                                 p_task_types text[] default null)
returns table (task_id bigint, lease_token uuid, task_type text, session_id bigint, scope text, sender text,
               observer text, message_offset bigint, messages jsonb, attempts integer, lease_until timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_every integer := greatest((_setting_value('summary_every_messages') #>> '{}')::integer, 1);
    v_heads bigint[];
    v_claimed bigint[];
begin
    perform _check_claim(p_worker, p_limit);
    if p_task_types is not null and not (p_task_types <@ array['representation', 'summary']) then
        perform _fail('PR107', format('task types %s are not a subset of representation, summary', p_task_types::text));
    end if;
    -- First, so that a dead-lettered head no longer holds up its lane.
    perform _lease_dead_letter_task();

    -- The head of every lane that has open tasks: one index probe per lane
    -- (a skip scan over work_task_open_lane), whatever the backlog. A head
    -- that another claimer holds is skipped by the claim, and what follows it
    -- in its lane is no head.
    with recursive lanes (session_id, task_type, sender_key, observer_key, message_offset) as (
        (select t.session_id, t.task_type, coalesce(t.sender_id, 0), coalesce(t.observer_id, 0), t.message_offset
           from work_task t
          where t.status in ('pending', 'leased')
          order by t.session_id, t.task_type, coalesce(t.sender_id, 0), coalesce(t.observer_id, 0), t.message_offset
          limit 1)
        union all
        select n.* from lanes l
         cross join lateral (
            select t.session_id, t.task_type, coalesce(t.sender_id, 0), coalesce(t.observer_id, 0), t.message_offset
              from work_task t
             where t.status in ('pending', 'leased')
               and (t.session_id, t.task_type, coalesce(t.sender_id, 0), coalesce(t.observer_id, 0))
                   > (l.session_id, l.task_type, l.sender_key, l.observer_key)
             order by t.session_id, t.task_type, coalesce(t.sender_id, 0), coalesce(t.observer_id, 0), t.message_offset
             limit 1) n
    )
    select coalesce(array_agg(h.id), '{}') into v_heads
      from lanes l
      join work_task h on h.session_id = l.session_id and h.task_type = l.task_type
                      and coalesce(h.sender_id, 0) = l.sender_key and coalesce(h.observer_id, 0) = l.observer_key
                      and h.message_offset = l.message_offset
     where p_task_types is null or h.task_type = any (p_task_types);
    -- Ready heads (pending and due, or under a lease that is over) are leased
    -- as every queue's items are (leases.sql).
    v_claimed := array(select _lease_claim_task(p_worker, p_limit, v_heads));

    return query
    select c.id, c.lease_token, c.task_type, c.session_id, s.scope, sp.name, op.name, c.message_offset,
           (select jsonb_agg(jsonb_build_object('offset', o.log_offset, 'actor', a.name, 'source_role', o.source_role,
                                                'occurred_at', o.occurred_at, 'body', o.body) order by o.log_offset)
              from (select o2.* from observation o2
                     where o2.scope = s.scope and o2.session_id = c.session_id and o2.log_offset <= c.message_offset
                       and (c.task_type = 'summary' or o2.log_offset = c.message_offset)
                     order by o2.log_offset desc
                     limit case when c.task_type = 'summary' then v_every else 1 end) o
              join peer a on a.id = o.actor_id),
           c.attempts, c.lease_until
      from work_task c
      join session s on s.id = c.session_id
      left join peer sp on sp.id = c.sender_id
      left join peer op on op.id = c.observer_id
     where c.id = any (v_claimed)
     order by c.id;
end
$$;
comment on function __tenant__.claim_tasks(text, integer, text[]) is
    'Leases up to p_limit derivation tasks (SKIP LOCKED), at most one per lane and only a lane''s head; returns each with its message(s).';

-- The task, locked, if it is leased with this token; PR124 or PR123 otherwise.
create or replace function __tenant__._leased_task(p_task_id bigint, p_lease_token uuid)
returns __tenant__.work_task
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_task work_task;
begin
    select * into v_task from work_task t where t.id = p_task_id for update;
    if v_task.id is null then
        perform _fail('PR124', format('unknown task %s', coalesce(p_task_id::text, 'NULL')),
                      'It may have been erased with the message it came from.');
    end if;
    if v_task.status <> 'leased' or v_task.lease_token is distinct from p_lease_token then
        perform _fail('PR123', format('task %s is not leased with this token: it is %s', p_task_id,
                                      case when v_task.status = 'leased' then 'leased again (the earlier lease expired)'
                                           else v_task.status end),
                      'Claim it again with claim_tasks(); nothing you wrote in this transaction should be kept.');
    end if;
    return v_task;
end
$$;
comment on function __tenant__._leased_task(bigint, uuid) is 'Internal: a task leased with this token, locked; PR124 or PR123.';

-- The log offsets a leased task may cite: the message it was queued for, and
-- for a summary task the window of messages claim_tasks() handed out with it.
create or replace function __tenant__._task_offsets(p_task __tenant__.work_task)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    select array(
        select o.log_offset from observation o
          join session s on s.id = p_task.session_id
         where o.scope = s.scope and o.session_id = p_task.session_id and o.log_offset <= p_task.message_offset
           and (p_task.task_type = 'summary' or o.log_offset = p_task.message_offset)
         order by o.log_offset desc
         limit case when p_task.task_type = 'summary'
                    then greatest((_setting_value('summary_every_messages') #>> '{}')::integer, 1) else 1 end)
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._task_offsets(__tenant__.work_task) is
    'Internal: the offsets of the messages a task was handed out with (what its results may cite).';

-- The deriver writes through these two functions, not through remember() and
-- assert_fact(): the worker role may write only what a task it holds lets
-- it, and the database fills in everything that is not the deriver's to
-- choose. A representation task writes memories of its perspective (the
-- global view of its sender, or its observer's local view, visible to that
-- observer only), acting as the observer or else the sender, citing the
-- task's message; a summary task writes summaries of its window for the scope.
-- What is derived is never more public than the turns it cites, and the
-- worker cannot widen it: where those turns are not the scope's (a session's
-- messages never are), a global view or a summary is seen by the peer it
-- acts as (the sender; for a summary the sender of the message that queued
-- it), who must be in each turn's audience (PR116 otherwise).
create or replace function __tenant__.task_remember(p_worker text, p_task_id bigint, p_lease_token uuid,
                                                   p_items jsonb)
returns table (ordinal integer, memory_id bigint, status text, reason text)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_task work_task := _leased_task(p_task_id, p_lease_token);
    v_scope text := (select s.scope from session s where s.id = v_task.session_id);
    v_allowed bigint[] := _task_offsets(v_task);
    v_observer text := (select p.name from peer p where p.id = v_task.observer_id);
    v_acting bigint := coalesce(v_task.observer_id, v_task.sender_id,
                                (select o.actor_id from observation o where o.id = v_task.observation_id));
    v_bad record;
begin
    perform _check_worker(p_worker);
    perform _check_object_array(p_items, 'items',
        'Each item: body, evidence (offsets of the task''s messages), purposes, and optionally kind, title, confidence, about.');
    perform _check_keys(p_items, array['body', 'evidence', 'purposes', 'kind', 'title', 'confidence', 'about'],
                        'task item');
    select x.n, x.off into v_bad
      from jsonb_array_elements(p_items) with ordinality as i(e, n)
      cross join lateral (select i.n, v.off
                            from jsonb_array_elements_text(case when jsonb_typeof(i.e -> 'evidence') = 'array'
                                                                then i.e -> 'evidence' else '[]' end) as v(off)) x
     where not (x.off ~ '^[0-9]{1,18}$' and x.off::bigint = any (v_allowed))
     limit 1;
    if v_bad.n is not null then
        perform _fail('PR107', format('item %s cites offset %s, which is not a message of task %s (its messages: %s)',
                                      v_bad.n, v_bad.off, v_task.id, v_allowed::text),
                      'A task''s results cite only the messages claim_tasks() returned with it.');
    end if;
    return query
    select b.ordinal, b.memory_id, b.status, b.reason
      from _remember_batch(v_acting, v_scope,
               (select coalesce(jsonb_agg(i.e || jsonb_build_object(
                           'audience', coalesce(v_observer,
                                                case when exists (
                                                         select 1 from observation o
                                                          where o.scope = v_scope and o.audience is not null
                                                            and o.log_offset = any (v_allowed)
                                                            and o.log_offset in (
                                                                select v.off::bigint
                                                                  from jsonb_array_elements_text(
                                                                           case when jsonb_typeof(i.e -> 'evidence') = 'array'
                                                                                then i.e -> 'evidence' else '[]' end) v(off)))
                                                     then (select p.name from peer p where p.id = v_acting) end),
                           'observer', v_observer)
                                          order by i.n), '[]')
                  from jsonb_array_elements(p_items) with ordinality as i(e, n))) b;
end
$$;
comment on function __tenant__.task_remember(text, bigint, uuid, jsonb) is
    'Writes memories for a leased derivation task, in its perspective and scope, citing only its messages (worker duty).';

create or replace function __tenant__.task_assert_fact(
    p_worker       text,
    p_task_id      bigint,
    p_lease_token  uuid,
    p_predicate    text,
    p_object       text,
    p_evidence     jsonb,                    -- [{"offset": the task's message, "quote": "...", "start": b, "end": b}]
    p_statement    text default null,
    p_confidence   double precision default 1,
    p_purposes     text[] default null
)
returns table (fact_id bigint, outcome text, closed_facts bigint[])
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_task work_task := _leased_task(p_task_id, p_lease_token);
    v_scope text;
    v_sender text;
    v_observer text;
    v_message_audience bigint[];
begin
    -- Each read by a statement of its table alone (SELECT ... INTO, not an assignment of a subquery, which is a
    -- statement with a sublink): on Citus those take the fast path, the others are planned and deparsed again.
    select s.scope into v_scope from session s where s.id = v_task.session_id;
    select p.name into v_sender from peer p where p.id = v_task.sender_id;
    select p.name into v_observer from peer p where p.id = v_task.observer_id;
    if v_observer is null then  -- a global view: whether the message is the scope's decides who sees the fact
        select o.audience into v_message_audience from observation o where o.id = v_task.observation_id;
    end if;
    perform _check_worker(p_worker);
    if v_task.task_type <> 'representation' then
        perform _fail('PR107', format('task %s is a %s task: only representation tasks assert facts about their sender',
                                      v_task.id, v_task.task_type));
    end if;
    perform _check_object_array(p_evidence, 'evidence', 'E.g. [{"offset": 12, "quote": "I live in Lisbon"}].');
    if exists (select 1 from jsonb_array_elements(p_evidence) e
                where jsonb_typeof(e -> 'offset') is distinct from 'number'
                   or (e ->> 'offset') !~ '^[0-9]{1,18}$'
                   or (e ->> 'offset')::bigint <> v_task.message_offset) then
        perform _fail('PR107', format('the evidence of a fact for task %s quotes its message, offset %s',
                                      v_task.id, v_task.message_offset),
                      'A task''s results cite only the message claim_tasks() returned with it.');
    end if;
    -- The fact is seen by the observer (a local view); a global view's by the
    -- sender when the message is not the scope's, as task_remember() decides.
    return query
    select * from assert_fact(coalesce(v_observer, v_sender), array[v_scope], v_scope, v_sender, p_predicate,
                              p_object, p_evidence, p_statement, null, null, p_confidence, v_observer,
                              coalesce(v_observer, case when v_message_audience is not null then v_sender end),
                              p_purposes);
end
$$;
comment on function __tenant__.task_assert_fact(text, bigint, uuid, text, text, jsonb, text, double precision, text[]) is
    'Asserts a fact about a leased representation task''s sender, in its perspective and scope, quoting its message (worker duty).';

-- Completes a task with its result: for a representation task the result's
-- observations are added to the observer's working representation in the
-- session (to the sender's own row for its global representation). A
-- memory_id (fact_id) in an observation must be a memory (fact) of the
-- task's perspective that cites the task's message: the database checks what
-- the deriver says.
create or replace function __tenant__.complete_task(p_worker text, p_task_id bigint, p_lease_token uuid,
                                                   p_result jsonb default '{}')
returns text
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_task work_task;
    v_obs observation;
    v_items jsonb;
    v_keep integer := (_setting_value('working_representation_items') #>> '{}')::integer;
    v_sender text;
    v_bad record;
begin
    perform _check_worker(p_worker);
    perform _check_json_size(p_result, 'a task result', 1048576);
    v_task := _leased_task(p_task_id, p_lease_token);
    if p_result is null or jsonb_typeof(p_result) <> 'object' then
        perform _fail('PR107', 'a task result is a JSON object', 'E.g. {"observations": [{"text": "...", "memory_id": 7}]}.');
    end if;
    if p_result ? 'observations' then
        if jsonb_typeof(p_result -> 'observations') <> 'array'
           or exists (select 1 from jsonb_array_elements(p_result -> 'observations') e
                       where jsonb_typeof(e) <> 'object' or jsonb_typeof(e -> 'text') is distinct from 'string'
                          or _trim(e ->> 'text') = ''
                          or (e ? 'memory_id' and jsonb_typeof(e -> 'memory_id') <> 'number')
                          or (e ? 'fact_id' and jsonb_typeof(e -> 'fact_id') <> 'number')) then
            perform _fail('PR107', 'result observations must be an array of objects, each with a non-empty text',
                          'Optionally with the numeric memory_id and fact_id written for it.');
        end if;
        select (e ->> 'memory_id')::bigint as memory_id into v_bad
          from jsonb_array_elements(p_result -> 'observations') e
         where e ? 'memory_id'
           and not exists (select 1 from memory m join memory_link l on l.memory_id = m.id
                            where m.id = (e ->> 'memory_id')::bigint
                              and m.observer_peer_id is not distinct from v_task.observer_id
                              and l.link_type = 'derived_from' and l.target_observation_id = v_task.observation_id)
         limit 1;
        if v_bad.memory_id is not null then
            perform _fail('PR107', format('memory %s is not a memory of this task''s perspective citing its message (offset %s)',
                                          v_bad.memory_id, v_task.message_offset),
                          'Write it with remember(..., evidence => the message offset, observer => the task''s observer).');
        end if;
        select (e ->> 'fact_id')::bigint as fact_id into v_bad
          from jsonb_array_elements(p_result -> 'observations') e
         where e ? 'fact_id'
           and not exists (select 1 from fact f join fact_evidence x on x.fact_id = f.id
                            where f.id = (e ->> 'fact_id')::bigint
                              and f.observer_peer_id is not distinct from v_task.observer_id
                              and x.observation_id = v_task.observation_id)
         limit 1;
        if v_bad.fact_id is not null then
            perform _fail('PR107', format('fact %s is not a fact of this task''s perspective with evidence from its message (offset %s)',
                                          v_bad.fact_id, v_task.message_offset),
                          'Assert it with assert_fact(..., evidence => a quote of the message, observer => the task''s observer).');
        end if;
    end if;

    if v_task.task_type = 'representation' and jsonb_array_length(coalesce(p_result -> 'observations', '[]')) > 0 then
        select * into v_obs from observation o where o.id = v_task.observation_id;
        v_sender := (select p.name from peer p where p.id = v_task.sender_id);
        v_items := (select jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                               'text', _trim(e ->> 'text'), 'memory_id', e -> 'memory_id', 'fact_id', e -> 'fact_id',
                               'offset', v_obs.log_offset,
                               'observation_id', v_obs.id, 'at', v_obs.occurred_at)) order by n)
                      from jsonb_array_elements(p_result -> 'observations') with ordinality as x(e, n));
        update session_peer sp
           set working_representation = jsonb_set(sp.working_representation, array[v_sender],
                   (select coalesce(jsonb_agg(k.e order by k.n), '[]')
                      from (select a.e, a.n, count(*) over () as total
                              from jsonb_array_elements(coalesce(sp.working_representation -> v_sender, '[]') || v_items)
                                   with ordinality as a(e, n)) k
                     where k.n > k.total - v_keep)),
               working_updated_at = now()
         where sp.session_id = v_task.session_id and sp.peer_id = coalesce(v_task.observer_id, v_task.sender_id);
    end if;

    update work_task t set result = p_result, leased_by = coalesce(p_worker, t.leased_by) where t.id = v_task.id;
    perform _lease_done_task(array[v_task.id]);
    return 'done';
end
$$;
comment on function __tenant__.complete_task(text, bigint, uuid, jsonb) is
    'Completes a leased task with its result (checked; a representation result updates the working representation).';

create or replace function __tenant__.fail_task(p_worker text, p_task_id bigint, p_lease_token uuid, p_error text)
returns table (status text, attempts integer, available_at timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_task work_task;
begin
    perform _check_worker(p_worker);
    perform _check_length(p_error, 'a task''s error', 65536);  -- kept cut to 2000 characters
    v_task := _leased_task(p_task_id, p_lease_token);
    -- the token proved the lease: released whoever the worker says it is
    perform _lease_release_task(null, array[v_task.id], p_error);
    return query select t.status, t.attempts, t.available_at from work_task t where t.id = v_task.id;
end
$$;
comment on function __tenant__.fail_task(text, bigint, uuid, text) is
    'Gives a leased task back after a failure: retried after task_backoff_seconds * 2^(attempts-1), dead after task_max_attempts.';

-- Is a representation current? With no target: the peer's global
-- representation; with a target: the peer's local view of the target.
create or replace function __tenant__.queue_status(p_peer text, p_target text default null,
                                                  p_session bigint default null)
returns table (status text, remaining bigint, in_progress bigint, done bigint, dead bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_peer bigint := _peer_id(p_peer, 'status');
    v_target bigint := case when p_target is null then null else _peer_id(p_target, 'target') end;
begin
    return query
    select case when count(*) filter (where t.status in ('pending', 'leased')) = 0 then 'current' else 'pending' end,
           count(*) filter (where t.status in ('pending', 'leased')),
           count(*) filter (where t.status = 'leased' and t.lease_until >= clock_timestamp()),
           count(*) filter (where t.status = 'done'),
           count(*) filter (where t.status = 'dead')
      from work_task t
     where t.task_type = 'representation'
       and (p_session is null or t.session_id = p_session)
       and case when v_target is null then t.sender_id = v_peer and t.observer_id is null
                else t.sender_id = v_target and t.observer_id = v_peer end;
end
$$;
comment on function __tenant__.queue_status(text, text, bigint) is
    'Whether a representation is current: pending/current, tasks remaining, in progress, done and dead (global without a target, local with one).';

create or replace function __tenant__.work_queue_status()
returns table (task_type text, status text, tasks bigint)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select t.task_type, t.status, count(*) from work_task t group by 1, 2 order by 1, 2
$$;
comment on function __tenant__.work_queue_status() is 'Derivation tasks by type and status.';
