-- correct, supersede and forget: the three ways a memory changes after it is
-- written. Each takes the revision the caller read; the loser of a race gets
-- PR105 and nothing it sent is written. correct and supersede cite the
-- observations they stand on, like every other write, and as remember()
-- they may cite only turns the principal may see and that the memory's
-- audience may see (PR116 otherwise, unless a widening reason says why); a
-- correction's evidence is undone by erasure rather than deleting the memory
-- (plpgsql/erasure/erase.sql).

-- Locks a memory the principal may see and checks the caller's revision.
create or replace function __tenant__._lock_for_revision(p_principal_id bigint, p_scopes text[], p_memory_id bigint,
                                                        p_expected_revision integer, p_require_current boolean)
returns __tenant__.memory
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_memory memory;
begin
    perform _check_scopes(p_scopes);
    perform _check_id(p_memory_id, 'memory id');
    perform _check_memory_visible(p_principal_id, p_scopes, p_memory_id);
    -- FOR UPDATE waits for a concurrent writer and then sees its committed row.
    select m.* into v_memory from memory m where m.id = p_memory_id for update;
    if v_memory.invalidated_at is not null then
        perform _fail('PR108', format('memory %s was forgotten: %s', p_memory_id, v_memory.invalidation_reason));
    end if;
    if p_expected_revision is not null and v_memory.revision <> p_expected_revision then
        perform _fail('PR105', format('memory %s is at revision %s, not %s', p_memory_id, v_memory.revision,
                                      p_expected_revision),
                      'Someone changed it since you read it: read it again and retry.');
    end if;
    if p_require_current and v_memory.superseded_by is not null then
        perform _fail('PR108', format('memory %s was superseded by memory %s', p_memory_id, v_memory.superseded_by),
                      'Change the memory that replaced it.');
    end if;
    return v_memory;
end
$$;
comment on function __tenant__._lock_for_revision(bigint, text[], bigint, integer, boolean) is
    'Internal: lock a visible memory and check the caller''s revision (PR104, PR105, PR108).';

-- The role policy of facts (PR113), for corrections: what an assistant said
-- is not evidence for changing a person's memory. A memory is a person's
-- when one of its about-entities is a human peer (by name, alias or merge,
-- as for facts) or when anything its text came from was said in the user
-- role. Such a memory is corrected only on evidence of which at least one
-- observation was not spoken by an assistant.
create or replace function __tenant__._check_correction_roles(p_memory __tenant__.memory, p_evidence bigint[])
returns void
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_human text;
begin
    if exists (select 1 from observation o where o.id = any (p_evidence) and o.source_role <> 'assistant') then
        return;
    end if;
    select en.name into v_human
      from memory_link l join entity en on en.id = l.target_entity_id
     where l.memory_id = p_memory.id and l.link_type = 'about' and _names_human_peer(p_memory.scope, en.name)
     order by en.name limit 1;
    if v_human is not null then
        perform _fail('PR113', format('memory %s is about human peer %s and every observation cited to correct it '
                                      '(offsets %s) was spoken by an assistant', p_memory.id, quote_literal(v_human),
                                      (select array_agg(o.log_offset order by o.log_offset)
                                         from observation o where o.id = any (p_evidence))::text),
                      'A correction of a person''s memory needs evidence that is not only the assistant''s word '
                      '(e.g. what they said).');
    end if;
    if exists (select 1 from observation o
                where o.id = any (_memory_text_observations(array[p_memory.id])) and o.source_role = 'user') then
        perform _fail('PR113', format('memory %s records what a user said and every observation cited to correct it '
                                      '(offsets %s) was spoken by an assistant', p_memory.id,
                                      (select array_agg(o.log_offset order by o.log_offset)
                                         from observation o where o.id = any (p_evidence))::text),
                      'A correction of a person''s memory needs evidence that is not only the assistant''s word '
                      '(e.g. what they said).');
    end if;
end
$$;
comment on function __tenant__._check_correction_roles(__tenant__.memory, bigint[]) is
    'Internal: PR113 when a person''s memory would be corrected on evidence spoken only by an assistant.';

create or replace function __tenant__.correct(
    p_principal          text,
    p_scopes             text[],
    p_memory_id          bigint,
    p_expected_revision  integer,
    p_body               text,
    p_title              text default null,   -- NULL keeps the title
    p_reason             text default null,
    p_evidence           bigint[] default null,  -- log offsets, in the memory's scope, that justify it
    p_widening_reason    text default null       -- why it may reach more peers than that evidence
)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_old memory;
    v_evidence bigint[] := '{}';
    v_sources bigint[];
    v_obs bigint;
    v_row bigint;
    v_widened text;
begin
    if p_expected_revision is null then
        perform _fail('PR107', 'correct needs the revision you read (p_expected_revision)');
    end if;
    perform _check_memory_fields(p_body, p_title, null);
    perform _check_length(p_reason, 'reason', 2000);
    -- checked here too: without new evidence nothing reads it, but an oversized one is still refused
    perform _check_length(p_widening_reason, 'widening reason', 2000);
    if cardinality(p_evidence) > 0 then
        -- An erasure in the memory's scope (which locks the scope row FOR
        -- UPDATE before it plans what to undo) and a correction citing that
        -- scope's observations take turns: the erasure sees this correction
        -- and undoes it, or this correction finds its evidence gone (PR109).
        -- Appends are not held up (KEY SHARE lets the watermark move). The
        -- scope before the memory's row, in the order erasure takes them.
        perform 1 from scope s where s.name = (select m.scope from memory m where m.id = p_memory_id)
           for key share;
    end if;
    v_old := _lock_for_revision(v_principal, p_scopes, p_memory_id, p_expected_revision, true);
    if cardinality(p_evidence) > 0 then
        -- Like remember's evidence: offsets of the memory's own scope, which
        -- the principal is authorised for since it may see the memory.
        v_evidence := _observation_ids(v_old.scope, p_evidence, v_principal);
        perform _check_correction_roles(v_old, v_evidence);
        v_widened := _widening(v_old.audience_peer_id, v_evidence, p_widening_reason);
    end if;
    -- The corrected text comes from what the old text came from and from this
    -- evidence. The kept old text is registered against both as well: its
    -- row also records who replaced it, why and on what evidence.
    v_sources := array(select distinct x from unnest(_memory_text_observations(array[v_old.id]) || v_evidence) x
                        order by x);

    insert into memory_revision (memory_id, revision, kind, title, body, confidence, changed_by, reason)
    values (_unkept_on_citus(v_old.id), v_old.revision, v_old.kind, v_old.title, v_old.body, v_old.confidence,
            v_principal, p_reason);
    perform _register('memory_revision', v_old.id || ':' || v_old.revision, v_sources);

    foreach v_obs in array v_evidence loop
        insert into memory_correction_evidence (memory_id, revision, observation_id)
        values (v_old.id, v_old.revision + 1, v_obs) returning id into v_row;
        perform _register('memory_correction_evidence', v_row::text, v_sources);
        -- The provenance shows the evidence: one derived_from link per observation.
        if not exists (select 1 from memory_link l where l.memory_id = v_old.id and l.link_type = 'derived_from'
                          and l.target_observation_id = v_obs) then
            insert into memory_link (memory_id, link_type, target_observation_id)
            values (v_old.id, 'derived_from', v_obs) returning id into v_row;
            perform _register('memory_link', v_row::text, v_sources);
        end if;
    end loop;

    update memory m
       set body = _trim(p_body), title = coalesce(p_title, m.title), revision = m.revision + 1, updated_at = now(),
           widening_reason = coalesce(v_widened, m.widening_reason)
     where m.id = v_old.id;
    return v_old.revision + 1;
end
$$;
comment on function __tenant__.correct(text, text[], bigint, integer, text, text, text, bigint[], text) is
    'Fixes a wrong memory in place, citing the observations that justify it: revision + 1, the old text kept in its history. '
    'PR105 if the revision moved; PR116 if the evidence is seen by fewer peers than the memory, unless p_widening_reason says why.';

-- The step that makes a memory history: it points to its replacement, moves
-- to the next revision and stops being valid now. supersede() replaces with a
-- new memory; decide_duplicate() with an existing one. The caller has locked
-- the old memory and checked its revision (_lock_for_revision).
create or replace function __tenant__._supersede_by(p_old_id bigint, p_new_id bigint)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result integer;
begin
    update memory m
       set superseded_by = p_new_id, revision = m.revision + 1, updated_at = now(),
           valid = tstzrange(lower(m.valid), greatest(lower(m.valid), now()))
     where m.id = p_old_id
    returning m.revision
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._supersede_by(bigint, bigint) is
    'Internal: marks a locked memory superseded by another; returns its new revision.';

create or replace function __tenant__.supersede(
    p_principal          text,
    p_scopes             text[],
    p_memory_id          bigint,
    p_expected_revision  integer,
    p_body               text,
    p_evidence           bigint[],            -- log offsets that say what changed
    p_title              text default null,   -- NULL keeps the title
    p_confidence         double precision default null,   -- NULL keeps the confidence
    p_about              text[] default null, -- entity names; NULL keeps the old memory's
    p_widening_reason    text default null    -- why it may reach more peers than that evidence
)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_old memory;
    v_observations bigint[];
    v_id bigint;
    v_link bigint;
    v_obs bigint;
begin
    if p_expected_revision is null then
        perform _fail('PR107', 'supersede needs the revision you read (p_expected_revision)');
    end if;
    perform _check_memory_fields(p_body, p_title, p_confidence);
    perform _check_entity_names(p_about);
    if p_evidence is null or cardinality(p_evidence) = 0 then
        perform _fail('PR107', 'supersede needs the observation(s) that say what changed',
                      'Append what was said with append_observation() and pass its offset.');
    end if;
    v_old := _lock_for_revision(v_principal, p_scopes, p_memory_id, p_expected_revision, true);
    v_observations := _observation_ids(v_old.scope, p_evidence, v_principal);

    -- The replacement keeps the old audience: it must fit the new evidence.
    perform set_config('pgrecall.memory_vectors_given', 'off', true);  -- queued whatever the session set (_memory_changed)
    insert into memory (scope, kind, title, body, confidence, origin, audience_peer_id, purposes, created_by,
                        widening_reason)
    values (v_old.scope, v_old.kind, coalesce(p_title, v_old.title), _trim(p_body),
            coalesce(p_confidence, v_old.confidence), 'told', v_old.audience_peer_id, v_old.purposes, v_principal,
            _widening(v_old.audience_peer_id, v_observations, p_widening_reason))
    returning id into v_id;
    perform _register('memory', v_id::text, v_observations);
    foreach v_obs in array v_observations loop
        insert into memory_link (memory_id, link_type, target_observation_id)
        values (v_id, 'derived_from', v_obs) returning id into v_link;
        perform _register('memory_link', v_link::text, v_observations);
    end loop;
    if p_about is not null then
        perform _link_about(v_id, v_old.scope, p_about, v_observations);
    else
        -- The subjects are carried over from the old memory, so they derive
        -- from the observations its about-links came from (which, after a
        -- chain of supersessions, reach back to the words that first named
        -- them) as well as from the new evidence.
        perform _link_about(v_id, v_old.scope,
                            array(select en.name from memory_link l join entity en on en.id = l.target_entity_id
                                   where l.memory_id = v_old.id and l.link_type = 'about'),
                            array(select distinct x from unnest(v_observations || _memory_observations(array[v_old.id])
                                                                || array(select d.observation_id
                                                                           from memory_link l
                                                                           join projection_dependency d
                                                                             on d.kind = 'memory_link' and d.row_key = l.id::text
                                                                          where l.memory_id = v_old.id
                                                                            and l.link_type = 'about')) x));
    end if;

    perform _supersede_by(v_old.id, v_id);
    return v_id;
end
$$;
comment on function __tenant__.supersede(text, text[], bigint, integer, text, bigint[], text, double precision, text[],
                                         text) is
    'The world changed: a new memory replaces the old one, which points to it and stops being valid now '
    '(PR116 if the new evidence is seen by fewer peers than the memory, unless p_widening_reason says why).';

create or replace function __tenant__.forget(
    p_principal          text,
    p_scopes             text[],
    p_memory_id          bigint,
    p_reason             text,
    p_expected_revision  integer default null
)
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_old memory;
begin
    perform _check_reason(p_reason, 'forget needs a reason', 'Say why, e.g. ''the user asked''.', 2000);
    v_old := _lock_for_revision(v_principal, p_scopes, p_memory_id, p_expected_revision, false);
    update memory m
       set invalidated_at = now(), invalidation_reason = _trim(p_reason), revision = m.revision + 1, updated_at = now()
     where m.id = v_old.id;
    return v_old.revision + 1;
end
$$;
comment on function __tenant__.forget(text, text[], bigint, text, integer) is
    'Invalidates a memory with a reason; it is no longer read or recalled. Nothing is forgotten unless asked.';
