-- Passages: every observation is split into chunks in the transaction that
-- appends it (a statement trigger, so one append and a batch share the path),
-- each chunk registered in the projection registry and queued for the
-- embedding worker.
--
-- The chunking rule:
--   * an observation of at most passage_max_chars characters (a conversation
--     turn) is one passage: its text without surrounding whitespace;
--   * longer text is cut into sentences: after . ! ? or an ellipsis followed
--     by whitespace, and at every line end; a sentence longer than
--     passage_target_chars is cut between words, and a word longer than that
--     in pieces of that length;
--   * sentences are packed in order up to about passage_target_chars, and a
--     passage also ends at a paragraph break (a blank line) once it is half
--     that size;
--   * a passage starts with the previous passage's last sentence when that
--     sentence is at most passage_overlap_chars long and not a paragraph end,
--     so a statement cut at a boundary is still found whole;
--   * each passage records its [start_byte, end_byte) span in the
--     observation's UTF-8 body, so it can be cited: the bytes of the span
--     decode to exactly the passage's text.
-- Changing the sizes applies to observations appended afterwards.
--
-- SQLSTATE of message_search.sql: PR130 message search is switched off for
-- the arms asked for (an unknown session is sessions.sql's PR120).

create or replace function __tenant__._passage_spans(p_body text, p_max integer, p_target integer, p_overlap integer)
returns table (ordinal integer, start_byte integer, end_byte integer, body text)
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_space constant text := E' \t\n\r\f\v\u00a0\u2028\u2029\ufeff';
    v_text text[];
    v_len integer[];
    v_char integer[];
    v_byte integer[];
    v_para boolean[];
    v_whole boolean[];
    v_n integer;
    v_i integer := 1;
    v_j integer;
    v_first_new integer;
    v_size integer;
    v_chunk text;
    v_lead integer;
    v_out integer := 0;
    v_overlapped boolean := false;
begin
    if p_body is null or btrim(p_body, v_space) = '' then
        return;
    end if;
    if char_length(p_body) <= p_max then
        v_lead := char_length(p_body) - char_length(ltrim(p_body, v_space));
        ordinal := 1;
        start_byte := octet_length(left(p_body, v_lead));
        body := btrim(p_body, v_space);
        end_byte := start_byte + octet_length(body);
        return next;
        return;
    end if;
    -- Sentences (each with the whitespace after it), the long ones cut into
    -- pieces; together they are the whole body, in order.
    with sentence as (
        select m[1] as t, n
          from regexp_matches(p_body,
                 $re$(?:[^.!?…\n]|[.!?…](?!\s|$))+[.!?…]*["'’”)\]]*\s*|\s+|[.!?…]+["'’”)\]]*\s*$re$, 'g')
               with ordinality as s(m, n)
    ), piece as (
        select s.n, 0::bigint as k, 0 as i, s.t, true as whole from sentence s where char_length(s.t) <= p_target
        union all
        -- a sentence longer than the target: its words, and a word longer than
        -- the target in pieces of the target's length
        select s.n, w.k, g.i, substr(w.m[1], g.i * p_target + 1, p_target), false
          from sentence s
         cross join lateral regexp_matches(s.t, '[^[:space:]]+[[:space:]]*|[[:space:]]+', 'g') with ordinality as w(m, k)
         cross join lateral generate_series(0, (char_length(w.m[1]) - 1) / p_target) as g(i)
         where char_length(s.t) > p_target
    ), placed as (
        select p.t, char_length(p.t) as len,
               coalesce(sum(char_length(p.t)) over w, 0)::integer as at_char,
               coalesce(sum(octet_length(p.t)) over w, 0)::integer as at_byte,
               p.t ~ E'\\n[ \\t\\r\\f\\v]*\\n' as para, p.whole, p.n, p.k, p.i
          from piece p
        window w as (order by p.n, p.k, p.i rows between unbounded preceding and 1 preceding)
    )
    select array_agg(x.t order by x.n, x.k, x.i), array_agg(x.len order by x.n, x.k, x.i),
           array_agg(x.at_char order by x.n, x.k, x.i), array_agg(x.at_byte order by x.n, x.k, x.i),
           array_agg(x.para order by x.n, x.k, x.i), array_agg(x.whole order by x.n, x.k, x.i)
      into v_text, v_len, v_char, v_byte, v_para, v_whole
      from placed x;
    v_n := coalesce(cardinality(v_text), 0);
    while v_i <= v_n loop
        v_j := v_i;
        v_size := v_len[v_i];
        -- A passage that starts with the overlap takes at least one new sentence.
        v_first_new := case when v_overlapped then v_i + 1 else v_i end;
        loop
            exit when v_j = v_n;
            exit when v_j >= v_first_new and v_para[v_j] and v_size >= p_target / 2;
            exit when v_j >= v_first_new and v_size + v_len[v_j + 1] > p_target;
            v_j := v_j + 1;
            v_size := v_size + v_len[v_j];
        end loop;
        v_chunk := substr(p_body, v_char[v_i] + 1, v_size);
        if btrim(v_chunk, v_space) <> '' then
            v_out := v_out + 1;
            v_lead := char_length(v_chunk) - char_length(ltrim(v_chunk, v_space));
            ordinal := v_out;
            start_byte := v_byte[v_i] + octet_length(left(v_chunk, v_lead));
            body := btrim(v_chunk, v_space);
            end_byte := start_byte + octet_length(body);
            return next;
        end if;
        exit when v_j = v_n;
        -- Overlap: the next passage repeats this one's last sentence if it is
        -- short, is not a paragraph end, and this passage had more than it.
        if v_j > v_i and v_whole[v_j] and v_len[v_j] <= p_overlap and not v_para[v_j]
           and btrim(v_text[v_j], v_space) <> '' then
            v_i := v_j;
            v_overlapped := true;
        else
            v_i := v_j + 1;
            v_overlapped := false;
        end if;
    end loop;
end
$$;
comment on function __tenant__._passage_spans(text, integer, integer, integer) is
    'Internal: the chunking rule. Passages of a text with their UTF-8 byte spans [start_byte, end_byte).';

-- Writes the passages of these observations with their registry rows and
-- embedding jobs, in one statement. Returns how many passages were written.
create or replace function __tenant__._write_passages(p_observation_ids bigint[])
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    -- The three chunk sizes in one read of the setting table.
    v_set jsonb := (select jsonb_object_agg(s.key, s.value) from setting s where left(s.key, 8) = 'passage_');
    v_count bigint;
begin
    with written as (
        insert into passage (scope, observation_id, ordinal, start_byte, end_byte, body, session_id, actor_id,
                             occurred_at)
        select o.scope, o.id, s.ordinal, s.start_byte, s.end_byte, s.body, o.session_id, o.actor_id, o.occurred_at
          from observation o
         cross join lateral _passage_spans(o.body, (v_set ->> 'passage_max_chars')::integer,
                                           (v_set ->> 'passage_target_chars')::integer,
                                           (v_set ->> 'passage_overlap_chars')::integer) s
         where o.id = any (p_observation_ids)
         order by o.id, s.ordinal
        returning passage.id, passage.scope, passage.observation_id
    ), registered as (
        insert into projection_dependency (kind, row_key, observation_id)
        select 'passage', w.id::text, w.observation_id from written w
    ), queued as (
        insert into passage_embedding_job (passage_id, scope)
        select w.id, w.scope from written w
    )
    select count(*) into v_count from written;
    if v_count > 0 then
        perform pg_notify('pgrecall_embed___tenant__', '');
    end if;
    return v_count;
end
$$;
comment on function __tenant__._write_passages(bigint[]) is
    'Internal: chunk observations into passages, register them as projections and queue them for embedding.';

create or replace function __tenant__._observations_appended()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _write_passages(array(select n.id from appended n));
    return null;
end
$$;
comment on function __tenant__._observations_appended() is
    'Internal trigger: the passages of appended observations are written in the same transaction.';

create or replace trigger observation_passages after insert on __tenant__.observation
    referencing new table as appended
    for each statement execute function __tenant__._observations_appended();

-- passage_stat follows inserts and deletes (erasure included).
create or replace function __tenant__._passages_counted()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if tg_op = 'INSERT' then
        insert into passage_stat as s (scope, passages, lexemes)
        select n.scope, count(*), sum(length(n.tsv)) from added n group by n.scope
        on conflict (scope) do update
            set passages = s.passages + excluded.passages, lexemes = s.lexemes + excluded.lexemes;
    else
        update passage_stat s set passages = s.passages - g.n, lexemes = s.lexemes - g.l
          from (select r.scope, count(*) as n, sum(length(r.tsv)) as l from removed r group by r.scope) g
         where s.scope = g.scope;
    end if;
    return null;
end
$$;
comment on function __tenant__._passages_counted() is 'Internal trigger: keeps passage_stat in step with passage.';

create or replace trigger passage_counted_insert after insert on __tenant__.passage
    referencing new table as added
    for each statement execute function __tenant__._passages_counted();
create or replace trigger passage_counted_delete after delete on __tenant__.passage
    referencing old table as removed
    for each statement execute function __tenant__._passages_counted();

-- The name of a scope's passage partition: readable, and unique through a hash.
create or replace function __tenant__._passage_partition_name(p_scope text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select 'passage_' || left(regexp_replace(p_scope, '[^a-z0-9_]', '_', 'g'), 40) || '_' || left(md5(p_scope), 8)
$$;
comment on function __tenant__._passage_partition_name(text) is 'Internal: the table name of a scope''s passage partition.';

-- A new scope gets its own partition. (Creating it briefly locks the passage
-- table and checks the DEFAULT partition for rows of the scope: none can
-- exist, as a passage names an existing scope.)
create or replace function __tenant__._scope_added()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_table text := _passage_partition_name(new.name);
begin
    if to_regclass(format('__tenant__.%I', v_table)) is null then
        execute format('create table __tenant__.%I partition of __tenant__.passage for values in (%L)',
                       v_table, new.name);
        execute format('comment on table __tenant__.%I is %L', v_table, format('Passages of scope %s.', new.name));
    end if;
    return null;
end
$$;
comment on function __tenant__._scope_added() is 'Internal trigger: provisions the passage partition of a new scope.';

create or replace trigger scope_passage_partition after insert on __tenant__.scope
    for each row execute function __tenant__._scope_added();

-- The embedding worker's side for passages; the same queue discipline as
-- claim_embedding_jobs() (SKIP LOCKED, a lease, generations, stamps).
create or replace function __tenant__.claim_passage_embedding_jobs(p_worker text, p_limit integer default 64)
returns table (passage_id bigint, generation bigint, input text, model text, input_version integer)
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
        -- free, expired, or held by a session that has ended (plpgsql/leases.sql)
        select j.passage_id from passage_embedding_job j
         where j.lease_until is null or j.lease_until < clock_timestamp()
            or (v_holders is not null and j.lease_session is not null and not (j.lease_session = any (v_holders)))
         order by j.enqueued_at, j.passage_id
         limit p_limit
         for update skip locked
    ), claimed as (
        update passage_embedding_job j
           set leased_by = p_worker, lease_until = clock_timestamp() + v_lease, lease_session = v_session,
               attempts = j.attempts + 1
          from ready r
         where j.passage_id = r.passage_id
           -- the row as locked: leased meanwhile by a session that lives is not ours (plpgsql/leases.sql)
           and (j.lease_until is null or j.lease_until < clock_timestamp() or j.lease_session is null
                or not _lease_held(j.lease_session))
        returning j.passage_id, j.generation, j.scope
    )
    -- Every input version embeds a passage's own text.
    select c.passage_id, c.generation, p.body, v_model, v_version
      from claimed c join passage p on p.id = c.passage_id and p.scope = c.scope
     order by c.passage_id;
end
$$;
comment on function __tenant__.claim_passage_embedding_jobs(text, integer) is
    'Leases up to p_limit passage embedding jobs to a worker (SKIP LOCKED) and returns each passage''s text; a lease ends at embedding_lease_seconds or with the claiming session.';

create or replace function __tenant__.complete_passage_embedding_jobs(
    p_worker         text,
    p_passage_ids    bigint[],
    p_generations    bigint[],
    p_embeddings     text[],
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
    if not _embedding_results_usable('passage', p_passage_ids, p_generations, p_embeddings, p_model,
                                     p_input_version) then
        return 0;  -- the tenant switched model or version meanwhile; the jobs were re-queued
    end if;
    -- Only jobs this worker still holds at the generation it was given.
    with mine as (
        select j.passage_id, j.scope, x.embedding
          from unnest(p_passage_ids, p_generations, p_embeddings::__ext__.vector[]) as x(passage_id, generation, embedding)
          join passage_embedding_job j on j.passage_id = x.passage_id and j.generation = x.generation
                                      and j.leased_by = p_worker
         order by j.passage_id
           for update of j
    ), stored as (
        update passage p
           set embedding = m.embedding, embedding_model = p_model, embedding_input_version = p_input_version,
               embedded_at = now()
          from mine m
         where p.id = m.passage_id and p.scope = m.scope
        returning p.id
    ), done as (
        delete from passage_embedding_job j using stored st where j.passage_id = st.id
    )
    select count(*) into v_stored from stored;
    return v_stored;
end
$$;
comment on function __tenant__.complete_passage_embedding_jobs(text, bigint[], bigint[], text[], text, integer) is
    'Stores the worker''s passage embeddings for jobs it still holds at the same generation; returns how many.';

create or replace function __tenant__.release_passage_embedding_jobs(p_worker text, p_passage_ids bigint[])
returns integer
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with released as (
        update passage_embedding_job j set leased_by = null, lease_until = null
         where j.passage_id = any (p_passage_ids) and j.leased_by = p_worker
        returning 1)
    select count(*)::integer from released
$$;
comment on function __tenant__.release_passage_embedding_jobs(text, bigint[]) is
    'Gives leased passage jobs back to the queue at once (a worker that failed or is stopping).';

-- Queues passages without a current vector (or all), for rebuild_embeddings().
create or replace function __tenant__._queue_passage_embeddings(p_everything boolean)
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
    insert into passage_embedding_job as j (passage_id, scope)
    select p.id, p.scope from passage p
     where p_everything or p.embedding_model is distinct from v_model
        or p.embedding_input_version is distinct from v_version
    on conflict (passage_id) do update
        set generation = j.generation + 1, enqueued_at = clock_timestamp(), leased_by = null, lease_until = null;
    get diagnostics v_count = row_count;
    -- A job whose passage already has the current stamp is done (version switched back).
    if not p_everything then
        delete from passage_embedding_job j using passage p
         where p.id = j.passage_id and p.scope = j.scope
           and p.embedding_model = v_model and p.embedding_input_version = v_version;
    end if;
    return v_count;
end
$$;
comment on function __tenant__._queue_passage_embeddings(boolean) is
    'Internal: queue every passage without an embedding of the current stamp (or every passage) for the worker.';

-- Observations already in the log when passages arrived (migration 0010)
-- get their passages from this data step, which migration 0017 requests and
-- upgrade_tenant() runs once, after every function file; afterwards the
-- trigger writes them. Only observations without a passage are chunked, so
-- a tenant whose passages were written by an earlier release gets nothing twice.
create or replace function __tenant__._backfill_passages()
returns bigint
language sql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _write_passages(array(
        select o.id from observation o
         where not exists (select 1 from passage p where p.observation_id = o.id and p.scope = o.scope)
         order by o.id))
$$;
comment on function __tenant__._backfill_passages() is
    'Internal data step (migration 0017): writes the passages of observations that have none; returns how many.';
