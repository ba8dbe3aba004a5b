-- Appending to the log. Offsets come from the scope's counter under its row
-- lock, held to commit: concurrent writers queue per scope, a rolled-back
-- append gives its offset back, and offsets are contiguous with no duplicates.

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
    p_retention_until  timestamptz default null
)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_actor bigint;
    v_offset bigint;
begin
    perform _peer_id(p_principal);
    perform _check_write_scope(p_scope, p_scopes);
    v_actor := _peer_id(coalesce(p_actor, p_principal), 'actor');
    perform _check_text(p_body, 'observation body', (_setting_value('max_observation_bytes') #>> '{}')::bigint, 'max_observation_bytes');
    perform _check_one_of(p_source_role, 'source_role', array['user', 'assistant', 'system', 'tool', 'document']);
    perform _check_one_of(p_kind, 'observation kind', array['message', 'document', 'tool_result', 'event', 'note']);
    perform _check_one_of(p_classification, 'classification', array['public', 'internal', 'confidential', 'restricted']);
    if p_lawful_basis is not null then
        perform _check_one_of(p_lawful_basis, 'lawful_basis', array['consent', 'contract', 'legal_obligation',
                              'vital_interests', 'public_task', 'legitimate_interests']);
    end if;
    if p_payload is null or jsonb_typeof(p_payload) <> 'object' then
        perform _fail('PR107', 'observation payload must be a JSON object');
    end if;
    if p_session_id is not null then
        perform _check_id(p_session_id, 'session id');
    end if;

    update scope s set log_watermark = s.log_watermark + 1
     where s.name = p_scope
    returning s.log_watermark into v_offset;

    insert into observation (scope, log_offset, kind, occurred_at, source_role, actor_id, session_id, body,
                             payload, data_subject_id, lawful_basis, classification, retention_until)
    values (p_scope, v_offset, p_kind, coalesce(p_occurred_at, now()), p_source_role, v_actor, p_session_id,
            p_body, p_payload, p_data_subject_id, p_lawful_basis, p_classification, p_retention_until);
    return v_offset;
end
$$;
comment on function __tenant__.append_observation(text, text[], text, text, text, text, text, bigint, timestamptz,
                                                  jsonb, text, text, text, timestamptz) is
    'Appends what was said, written or returned to the scope''s log and returns its offset (contiguous per scope).';

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
