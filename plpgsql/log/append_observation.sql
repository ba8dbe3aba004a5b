-- Appending to the log. Offsets come from the scope's counter under its row
-- lock, held to commit: concurrent writers queue per scope, a rolled-back
-- append gives its offsets back, and offsets are contiguous with no
-- duplicates. append_observation() appends one row and append_observations()
-- a batch; both run _append_batch (one implementation).
--
-- The counter is taken last (issue #51): the rows are inserted first with
-- provisional offsets, their passages written (chunks, tsvectors, GIN
-- entries, registry rows, embedding jobs), and only then is the counter
-- moved and each row given its real offset, with passage_stat counted in the
-- same tail. Measured on a quiet server, 0.7 ms of a 1.3 ms append ran under
-- the lock before; on 2 cores with 32 busy backends the holder was
-- descheduled in the middle of it, and every append of the scope queued.
-- Held from the tail to commit, the lock still orders writers, so the log's
-- promise is unchanged: a rolled-back append rolls back its counter too.
-- Writers wait for the tail in line, on a lock stripe (_take_log_offsets).
-- A batch of 32 rows or more, a bulk load, takes the counter first instead
-- and writes each row once, at its real offset (_append_batch).

-- A batch's rows read into their declared type (observation_row, migration
-- 0047). The type is in this function's signature so that Citus, which
-- creates a distributed function's types on the workers with it, has it
-- there too.
create or replace function __tenant__._observation_row_array(p_rows jsonb)
returns __tenant__.observation_row[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(array_agg(r), '{}') from jsonb_populate_recordset(null::observation_row, p_rows) r
$$;
comment on function __tenant__._observation_row_array(jsonb) is
    'Internal: append_observations'' rows (a JSON array) as the declared type observation_row, in order.';

create or replace function __tenant__._observation_rows(p_rows jsonb)
returns table (body text, source_role text, kind text, actor text, session_id bigint, occurred_at timestamptz,
               payload jsonb, data_subject_id text, lawful_basis text, classification text,
               retention_until timestamptz, audience text[], ord integer)
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    -- Actors in NFC, the form peer names are stored in.
    select r.body, r.source_role, coalesce(r.kind, 'message'), normalize(r.actor, NFC), r.session_id, r.occurred_at,
           coalesce(r.payload, '{}'), r.data_subject_id, r.lawful_basis, coalesce(r.classification, 'internal'),
           r.retention_until,
           case when r.audience is not null then array(select normalize(a, NFC) from unnest(r.audience) a) end,
           r.ordinality::integer
      from unnest(_observation_row_array(p_rows)) with ordinality as r
$$;
comment on function __tenant__._observation_rows(jsonb) is
    'Internal: observation rows from JSON, numbered from 1, with the defaults of append_observation() (audience names in NFC).';

-- Who may see each appended turn (ids, sorted): what the caller named, or
-- else the peers in the turn's session now (NULL outside a session: the
-- scope's); its sender always. Validated by _append_batch first.
create or replace function __tenant__._turn_audiences(p_principal text, p_rows jsonb)
returns table (ord integer, audience bigint[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select r.ord,
           case when r.audience is null and r.session_id is null then null
                else array(select x.id from (
                         select p.id from peer p where p.name = any (r.audience)
                         union
                         select sp.peer_id from session_peer sp
                          where r.audience is null and sp.session_id = r.session_id and sp.left_at is null
                         union
                         select p.id from peer p where p.name = coalesce(r.actor, normalize(p_principal, NFC))) x
                       order by x.id) end
      from _observation_rows(p_rows) r;
end
$$;
comment on function __tenant__._turn_audiences(text, jsonb) is
    'Internal: the audience each appended turn gets: the peers named, else its session''s peers (NULL outside one), with its sender.';

create or replace function __tenant__._observation_hint(p_body text, p_occurred_at timestamptz,
                                                        p_retention_until timestamptz, p_session_id bigint,
                                                        p_actor text, p_audience text[], p_max_bytes bigint)
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result text;
begin
    -- The hint of an appended row that is refused: what to do about the first of these it shows.
    select case when octet_length(p_body) > p_max_bytes then
                         'Split the text, or raise setting max_observation_bytes with pgrecall.set_tenant_setting().'
                    when not _time_in_range(p_occurred_at) or not _time_in_range(p_retention_until) then
                         'Pass a finite time between 0001-01-01 and 9999-12-31 (UTC), or leave it out for the default.'
                    when p_session_id > 0 and not exists (select 1 from session s where s.id = p_session_id) then
                         'Create it with create_session(); add_messages() appends to a session and queues its derivation.'
                    when p_actor is not null and not exists (select 1 from peer p where p.name = p_actor) then
                         'Create it first with add_peer(name, kind).'
                    when exists (select 1 from unnest(p_audience) a where not exists (select 1 from peer p where p.name = a)) then
                         'Create it first with add_peer(name, kind).'
                    when p_session_id is not null and p_audience is not null then
                         'A turn is seen by at most the peers in its session: add the peer to the session first, '
                         'or leave it out of the audience.'
               end
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._observation_hint(text, timestamptz, timestamptz, bigint, text, text[], bigint) is
    'Internal: the hint for an observation row that append refuses.';

create or replace function __tenant__._check_observation_rows(p_principal text, p_scope text, p_rows jsonb)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_max_bytes bigint := (_setting_value('max_observation_bytes') #>> '{}')::bigint;
    v_many boolean := jsonb_array_length(p_rows) > 1;
    v_bad record;
begin
    select x.* into v_bad from (
        select r.ord,
               case when r.body is null then 'PR107'
                    when octet_length(r.body) > v_max_bytes then 'PR151'
                    when r.source_role is null or not (r.source_role = any (_closed_set('source_role'))) then 'PR107'
                    when not (r.kind = any (_closed_set('observation kind'))) then 'PR107'
                    when not (r.classification = any (_closed_set('classification'))) then 'PR107'
                    when not (r.lawful_basis = any (_closed_set('lawful_basis'))) then 'PR107'
                    when jsonb_typeof(r.payload) <> 'object' then 'PR107'
                    when pg_column_size(r.payload) > v_max_bytes or octet_length(r.data_subject_id) > 200 then 'PR151'
                    when not _time_in_range(r.occurred_at) or not _time_in_range(r.retention_until) then 'PR152'
                    when r.session_id <= 0 then 'PR150'
                    when r.session_id is not null
                         and not exists (select 1 from session s where s.id = r.session_id and s.scope = p_scope) then 'PR120'
                    when not exists (select 1 from peer p where p.name = coalesce(r.actor, normalize(p_principal, NFC))) then 'PR101'
                    when array_position(r.audience, null) is not null then 'PR107'
                    when exists (select 1 from unnest(r.audience) a where not exists (select 1 from peer p where p.name = a)) then 'PR101'
                    when r.session_id is not null
                         and exists (select 1 from unnest(r.audience) a
                                      where a <> coalesce(r.actor, normalize(p_principal, NFC))
                                        and not exists (select 1 from session_peer sp join peer p on p.id = sp.peer_id
                                                         where sp.session_id = r.session_id and p.name = a
                                                           and sp.left_at is null)) then 'PR117'
               end as code,
               case when r.body is null then 'observation body is required'
                    when octet_length(r.body) > v_max_bytes then
                         format('observation body is %s bytes, more than the %s allowed', octet_length(r.body), v_max_bytes)
                    when r.source_role is null then 'source_role is required'
                    when not (r.source_role = any (_closed_set('source_role'))) then
                         _not_one_of('source_role', r.source_role, 'source_role')
                    when not (r.kind = any (_closed_set('observation kind'))) then
                         _not_one_of('observation kind', r.kind, 'observation kind')
                    when not (r.classification = any (_closed_set('classification'))) then
                         _not_one_of('classification', r.classification, 'classification')
                    when not (r.lawful_basis = any (_closed_set('lawful_basis'))) then
                         _not_one_of('lawful_basis', r.lawful_basis, 'lawful_basis')
                    when jsonb_typeof(r.payload) <> 'object' then 'observation payload must be a JSON object'
                    when pg_column_size(r.payload) > v_max_bytes then
                         format('observation payload is %s bytes, more than the %s allowed', pg_column_size(r.payload), v_max_bytes)
                    when octet_length(r.data_subject_id) > 200 then
                         format('data subject id is %s bytes, more than the 200 allowed', octet_length(r.data_subject_id))
                    when not _time_in_range(r.occurred_at) then
                         format('occurred_at %s is outside years 1 to 9999', r.occurred_at)
                    when not _time_in_range(r.retention_until) then
                         format('retention_until %s is outside years 1 to 9999', r.retention_until)
                    when r.session_id <= 0 then format('session id must be a positive id, not %s', r.session_id)
                    when r.session_id is not null and not exists (select 1 from session s where s.id = r.session_id) then
                         format('unknown session %s', r.session_id)
                    when r.session_id is not null
                         and not exists (select 1 from session s where s.id = r.session_id and s.scope = p_scope) then
                         format('session %s belongs to scope %s, not %s', r.session_id,
                                quote_literal((select s.scope from session s where s.id = r.session_id)), quote_literal(p_scope))
                    when not exists (select 1 from peer p where p.name = coalesce(r.actor, normalize(p_principal, NFC))) then
                         format('unknown actor peer %s', quote_literal(coalesce(r.actor, normalize(p_principal, NFC))))
                    when array_position(r.audience, null) is not null then 'a turn''s audience names a peer with no name'
                    when r.session_id is null or exists (select 1 from unnest(r.audience) a
                                                          where not exists (select 1 from peer p where p.name = a)) then
                         format('unknown audience peer %s', (select quote_literal(a) from unnest(r.audience) a
                                                              where not exists (select 1 from peer p where p.name = a) limit 1))
                    else format('peer %s is not in session %s, so it may not be in the audience of its turns',
                                (select quote_literal(a) from unnest(r.audience) a
                                  where a <> coalesce(r.actor, normalize(p_principal, NFC))
                                    and not exists (select 1 from session_peer sp join peer p on p.id = sp.peer_id
                                                     where sp.session_id = r.session_id and p.name = a and sp.left_at is null)
                                  limit 1), r.session_id)
               end as detail,
               r.body, r.occurred_at, r.retention_until, r.session_id, r.actor, r.audience
          from _observation_rows(p_rows) r) x
     where x.code is not null
     order by x.ord limit 1;
    if v_bad.ord is not null then
        perform _fail(v_bad.code, v_bad.detail || case when v_many then format(' (row %s)', v_bad.ord) else '' end,
                      _observation_hint(v_bad.body, v_bad.occurred_at, v_bad.retention_until, v_bad.session_id,
                                        v_bad.actor, v_bad.audience, v_max_bytes));
    end if;

end
$$;
comment on function __tenant__._check_observation_rows(text, text, jsonb) is
    'Internal: PR101/PR107/PR117/PR120/PR150/PR151/PR152 for the first appended row (in order) that is wrong, with a hint.';

-- Where this transaction's provisional offsets start: 2^62 + (its xid mod 2^32) * 2^28, so that
-- row r of a batch (fewer than 2^28 rows: a jsonb array holds no more) is at base + r, below 2^63,
-- above any real offset, and unique among the transactions open at once (their 32-bit xids
-- differ). A row stays at its provisional offset only inside _append_batch, invisible to others.
create or replace function __tenant__._provisional_offset_base()
returns bigint
language sql volatile
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select 4611686018427387904 + (pg_current_xact_id()::text::bigint % 4294967296) * 268435456
$$;
comment on function __tenant__._provisional_offset_base() is
    'Internal: the first provisional log offset of this transaction (2^62 and above): rows get their real offsets last.';

-- The scope's counter moved on by p_count, locked to commit; returns the last offset taken. Appends
-- queue first on the scope's lock stripe (locks.sql), a row only ever locked: a commit wakes the next
-- in line alone. Queued on the scope's row, which each of them updates, every waiter woke at every
-- commit to find it updated again (measured: 32 appenders on 2 cores, 106 appends/s and p99 1.5 s
-- against 172/s and 0.33 s), and they get their offsets in the order they came.
create or replace function __tenant__._take_log_offsets(p_scope text, p_count integer)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_last bigint;
begin
    perform _lock('log offset', array[p_scope]);
    update scope s set log_watermark = s.log_watermark + p_count
     where s.name = p_scope
    returning s.log_watermark into v_last;
    return v_last;
end
$$;
comment on function __tenant__._take_log_offsets(text, integer) is
    'Internal: moves the scope''s log counter on by p_count under its lock stripe, held to commit; returns the last offset taken.';

-- Planned once per session, not per call (plan_cache_mode), as _remember_batch.
create or replace function __tenant__._append_batch(p_principal text, p_scope text, p_rows jsonb)
returns table (ordinal integer, log_offset bigint)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_saved_plan_mode text := current_setting('plan_cache_mode');
    v_count integer := jsonb_array_length(p_rows);
    v_base bigint := _provisional_offset_base();
    v_last bigint;
    v_passages bigint := 0;
    v_lexemes bigint;
    -- A batch this large takes the counter first and inserts its rows at their real offsets: given
    -- provisional ones, each row was written twice (its second version in all seven indexes of the log,
    -- its foreign keys checked again), about a fifth of a bulk append's time. It then holds the counter
    -- for its whole insert, which single appends, the latency-bound case, do not.
    v_counter_first boolean := v_count >= 32;
begin
    perform set_config('plan_cache_mode', _plan_cache_mode(), true);
    perform _check_keys(p_rows, _input_keys('observation_row'), 'row');
    begin
        perform count(*) from _observation_rows(p_rows);
    exception when invalid_datetime_format or datetime_field_overflow then
        perform _fail('PR152', format('a row has a time that is not one: %s', sqlerrm),
                      'occurred_at and retention_until are ISO-8601 timestamps between years 1 and 9999.');
    when invalid_text_representation or datatype_mismatch or numeric_value_out_of_range then
        perform _fail('PR107', format('a row has a value of the wrong type: %s', sqlerrm),
                      'session_id is a number, occurred_at and retention_until ISO-8601 timestamps, payload an object, '
                      'audience an array of peer names.');
    end;
    perform _check_single_values(p_rows, array['audience'], 'row', array['payload']);
    perform _check_observation_rows(p_principal, p_scope, p_rows);

    if v_counter_first then
        v_last := _take_log_offsets(p_scope, v_count);
        v_base := v_last - v_count;  -- the passage trigger counts passages at real offsets (passages.sql)
    end if;
    -- Row r is inserted at offset v_base + r. Unless the counter was taken first, that is a provisional
    -- offset: above every real offset, and unique among the transactions open at once
    -- (_provisional_offset_base). The statement trigger writes its passages now, before the counter,
    -- and leaves them uncounted (passages.sql).
    insert into observation (scope, log_offset, kind, occurred_at, source_role, actor_id, session_id, body,
                             payload, data_subject_id, lawful_basis, classification, retention_until, audience)
    select p_scope, v_base + r.ord, r.kind, coalesce(r.occurred_at, now()), r.source_role,
           (select p.id from peer p where p.name = coalesce(r.actor, normalize(p_principal, NFC))), r.session_id, r.body,
           r.payload,
           -- none named: the speaker's data subject, else the session's (a peer passes its subject on, issue #28)
           coalesce(r.data_subject_id,
                    (select p.data_subject_ids[1] from peer p where p.name = coalesce(r.actor, normalize(p_principal, NFC))),
                    (select s.data_subject_ids[1] from session s where s.id = r.session_id)),
           r.lawful_basis, r.classification, r.retention_until, a.audience
      from _observation_rows(p_rows) r
      join _turn_audiences(p_principal, p_rows) a on a.ord = r.ord
     order by r.ord;
    -- Each turn's passages probed by it, in the order of the passage_observation index: a plan made
    -- while the table was nearly empty otherwise took the scope's passages by another index and
    -- filtered them, reading every passage of the scope on each append (test_plans_stay_probes).
    if not v_counter_first then
        select count(*), coalesce(sum(p.lexemes), 0) into v_passages, v_lexemes
          from observation o
         cross join lateral (select length(p.tsv) as lexemes from passage p
                              where p.scope = o.scope and p.observation_id = o.id
                              order by p.scope, p.observation_id, p.ordinal offset 0) p
         where o.scope = p_scope and o.log_offset > v_base and o.log_offset <= v_base + v_count;
        -- The tail: the scope's row (and its passage_stat row) stay locked from here to commit, so
        -- nothing but these short statements runs under them.
        v_last := _take_log_offsets(p_scope, v_count);
        update observation o set log_offset = o.log_offset - v_base + v_last - v_count
         where o.scope = p_scope and o.log_offset > v_base and o.log_offset <= v_base + v_count;
    end if;
    if v_passages > 0 then
        insert into passage_stat as s (scope, passages, lexemes) values (_unkept_on_citus(p_scope), v_passages, v_lexemes)
        on conflict (scope) do update
            set passages = s.passages + excluded.passages, lexemes = s.lexemes + excluded.lexemes;
    end if;
    perform _queue_turns_before(p_scope, v_last - v_count, v_last);  -- the turn after, for their neighbours' vectors
    -- Row r got offset v_last - v_count + r: told without a RETURNING clause, which Citus does not
    -- carry to the shard with its parameters ("there is no parameter").
    return query select g, v_last - v_count + g from generate_series(1, v_count) g;
    perform set_config('plan_cache_mode', v_saved_plan_mode, true);
end
$$;
comment on function __tenant__._append_batch(text, text, jsonb) is
    'Internal: the set-wise body of append_observation() and append_observations().';

create or replace function __tenant__.append_observation(
    p_principal        text,
    p_scopes           text[],
    p_scope            text,
    p_body             text,
    p_source_role      text,
    p_kind             text default 'message',
    p_actor            text default null,
    p_session_id       bigint default null,
    p_occurred_at      timestamptz default null,
    p_payload          jsonb default '{}',
    p_data_subject_id  text default null,
    p_lawful_basis     text default null,
    p_classification   text default 'internal',
    p_retention_until  timestamptz default null,
    p_audience         text[] default null   -- peers who may see it; NULL: its session's peers, or the scope
)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _peer_id(p_principal);
    perform _check_write_scope(p_scope, p_scopes);
    -- jsonb_build_object keeps SQL NULL apart from the defaults: an explicit
    -- NULL kind or classification is reported, not silently defaulted.
    if p_kind is null or p_classification is null then
        perform _fail('PR107', format('%s is required', case when p_kind is null then 'observation kind'
                                                              else 'classification' end));
    end if;
    return (select b.log_offset from _append_batch(p_principal, p_scope, jsonb_build_array(jsonb_build_object(
        'body', p_body, 'source_role', p_source_role, 'kind', p_kind, 'actor', p_actor, 'session_id', p_session_id,
        'occurred_at', p_occurred_at, 'payload', coalesce(p_payload, 'null'::jsonb),
        'data_subject_id', p_data_subject_id, 'lawful_basis', p_lawful_basis, 'classification', p_classification,
        'retention_until', p_retention_until, 'audience', to_jsonb(p_audience)))) b);
end
$$;
comment on function __tenant__.append_observation(text, text[], text, text, text, text, text, bigint, timestamptz,
                                                  jsonb, text, text, text, timestamptz, text[]) is
    'Appends what was said, written or returned to the scope''s log and returns its offset (contiguous per scope); '
    'it is seen by its session''s peers (the scope outside a session), or the narrower audience named.';

create or replace function __tenant__.append_observations(p_principal text, p_scopes text[], p_scope text,
                                                         p_rows jsonb)
returns table (ordinal integer, log_offset bigint)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _peer_id(p_principal);
    perform _check_write_scope(p_scope, p_scopes);
    perform _check_object_array(p_rows, 'rows',
        'Each row: body, source_role, and optionally kind, actor, session_id, occurred_at, payload, '
        'data_subject_id, lawful_basis, classification, retention_until, audience.');
    if jsonb_array_length(p_rows) = 0 then
        return;
    end if;
    return query select * from _append_batch(p_principal, p_scope, p_rows);
end
$$;
comment on function __tenant__.append_observations(text, text[], text, jsonb) is
    'append_observation() for a batch: rows as a JSON array; all are validated before any is written; offsets in order.';

create or replace function __tenant__.log_watermark(p_principal text, p_scopes text[], p_scope text)
returns bigint
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _peer_id(p_principal);
    perform _check_write_scope(p_scope, p_scopes);
    return (select s.log_watermark from scope s where s.name = p_scope);
end
$$;
comment on function __tenant__.log_watermark(text, text[], text) is
    'The largest offset below which the scope''s log has no hole (committed appends only).';
