-- remember: write what the agent decided to keep, with who may see it, why
-- it may be used, and the observations that stated it. Capture writes only
-- what was explicitly stated: empty or ambiguous input is a no-op that says
-- why, never an error and never a guess.

create or replace function __tenant__.remember(
    p_principal   text,
    p_scopes      text[],
    p_scope       text,
    p_body        text,
    p_evidence    bigint[],               -- log offsets in p_scope that stated it
    p_purposes    text[],
    p_audience    text default null,      -- a peer name; NULL: everyone authorised for the scope
    p_kind        text default 'note',
    p_title       text default null,
    p_confidence  double precision default 1,
    p_about       text[] default '{}'     -- entity names
)
returns table (memory_id bigint, status text, reason text)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint;
    v_audience bigint;
    v_purposes text[];
    v_observations bigint[];
    v_body text;
    v_existing bigint;
    v_id bigint;
    v_link bigint;
    v_obs bigint;
begin
    v_principal := _peer_id(p_principal);
    perform _check_write_scope(p_scope, p_scopes);
    v_purposes := _check_purposes(p_purposes);
    perform _check_one_of(p_kind, 'memory kind', array['note', 'fact', 'decision', 'summary']);
    if p_audience is not null then
        v_audience := _peer_id(p_audience, 'audience');
    end if;
    if p_confidence is null or p_confidence < 0 or p_confidence > 1 then
        perform _fail('PR107', format('confidence must be between 0 and 1, not %s', coalesce(p_confidence::text, 'NULL')));
    end if;
    if p_body is not null then
        perform _check_text(p_body, 'memory body', (_setting_value('max_memory_bytes') #>> '{}')::bigint, 'max_memory_bytes');
    end if;
    if p_title is not null then
        perform _check_text(p_title, 'memory title', 500);
    end if;

    v_body := _trim(coalesce(p_body, ''));
    if v_body = '' then
        return query select null::bigint, 'noop'::text, 'empty: there is nothing to remember'::text;
        return;
    elsif v_body !~ '[[:alnum:]]' then
        return query select null::bigint, 'noop'::text, 'no_content: the text has no words'::text;
        return;
    elsif v_body ~ '\?\s*$' then
        return query select null::bigint, 'noop'::text,
            'question: a question states nothing; remember what was answered'::text;
        return;
    elsif p_evidence is null or cardinality(p_evidence) = 0 then
        return query select null::bigint, 'noop'::text,
            'no_evidence: a told memory cites the observation(s) that stated it'::text;
        return;
    end if;
    v_observations := _observation_ids(p_scope, p_evidence);

    -- Serialise identical texts in a scope so two writers cannot both add it.
    perform pg_advisory_xact_lock(hashtext('pgrecall.remember'),
                                  hashtext(p_scope || ':' || lower(regexp_replace(v_body, '\s+', ' ', 'g'))));
    select m.id into v_existing
      from memory m
     where m.scope = p_scope
       and md5(lower(regexp_replace(btrim(m.body), '\s+', ' ', 'g'))) = md5(lower(regexp_replace(v_body, '\s+', ' ', 'g')))
       and m.superseded_by is null and m.invalidated_at is null
       and m.audience_peer_id is not distinct from v_audience
     limit 1;
    if v_existing is not null then
        return query select v_existing, 'noop'::text, 'duplicate: this is already remembered'::text;
        return;
    end if;

    insert into memory (scope, kind, title, body, confidence, origin, audience_peer_id, purposes, created_by)
    values (p_scope, p_kind, p_title, v_body, p_confidence, 'told', v_audience, v_purposes, v_principal)
    returning id into v_id;
    perform _register('memory', v_id::text, v_observations);

    foreach v_obs in array v_observations loop
        insert into memory_link (memory_id, link_type, target_observation_id)
        values (v_id, 'derived_from', v_obs) returning id into v_link;
        perform _register('memory_link', v_link::text, v_observations);
    end loop;
    perform _link_about(v_id, p_scope, p_about, v_observations);

    return query select v_id, 'created'::text, null::text;
end
$$;
comment on function __tenant__.remember(text, text[], text, text, bigint[], text[], text, text, text, double precision, text[]) is
    'Writes a memory with its audience, purposes and evidence; empty or ambiguous input is a no-op with a reason.';
