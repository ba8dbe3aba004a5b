-- What the database itself guarantees about the graph, whoever writes to it:
--  * evidence quotes are exactly the bytes they claim to be;
--  * a fact's history is not rewritten: only its known range may end (once),
--    the closing and splitting references be set, its salience change, and
--    merge_entities() move it to the surviving entity;
--  * a predicate in use keeps its cardinality (facts copy it for the
--    exclusion constraint);
--  * evidence rows are never edited.
-- Errors: PR112 evidence does not match its observation.

create or replace function __tenant__._check_evidence_bytes()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_body bytea;
    v_span text;
begin
    select convert_to(o.body, 'UTF8') into v_body from observation o where o.id = new.observation_id;
    if new.byte_end > octet_length(v_body) then
        raise exception using errcode = 'PR112',
            message = format('evidence span %s..%s lies outside observation %s, which is %s bytes long',
                             new.byte_start, new.byte_end, new.observation_id, octet_length(v_body)),
            hint = 'Spans are UTF-8 byte offsets into the observation body, end exclusive.';
    end if;
    begin
        v_span := convert_from(substring(v_body from new.byte_start + 1 for new.byte_end - new.byte_start), 'UTF8');
    exception when character_not_in_repertoire or untranslatable_character then
        raise exception using errcode = 'PR112',
            message = format('evidence span %s..%s of observation %s cuts a multi-byte character',
                             new.byte_start, new.byte_end, new.observation_id),
            hint = 'Spans are UTF-8 byte offsets; start and end must fall between characters.';
    end;
    if v_span is distinct from new.quote then
        raise exception using errcode = 'PR112',
            message = format('evidence quote %s is not the text at bytes %s..%s of observation %s, which reads %s',
                             quote_literal(_clip(new.quote, 200)), new.byte_start, new.byte_end, new.observation_id,
                             quote_literal(_clip(v_span, 200))),
            hint = 'The quote must be exactly the bytes of the span (UTF-8 byte offsets, end exclusive).';
    end if;
    return new;
end
$$;
comment on function __tenant__._check_evidence_bytes() is
    'Internal trigger: refuses evidence whose quote is not exactly its byte span of the observation.';

create or replace trigger fact_evidence_matches_source before insert on __tenant__.fact_evidence
    for each row execute function __tenant__._check_evidence_bytes();
create or replace trigger fact_evidence_append_only before update on __tenant__.fact_evidence
    for each statement execute function __tenant__._refuse_update();

create or replace function __tenant__._guard_fact_history()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if (new.scope, new.predicate, new.single_valued, new.object_value, new.statement, new.valid,
        lower(new.known), new.confidence, new.observer_peer_id, new.audience_peer_id, new.purposes,
        new.asserted_by, new.created_at)
       is distinct from
       (old.scope, old.predicate, old.single_valued, old.object_value, old.statement, old.valid,
        lower(old.known), old.confidence, old.observer_peer_id, old.audience_peer_id, old.purposes,
        old.asserted_by, old.created_at)
       or (upper(new.known) is distinct from upper(old.known) and not upper_inf(old.known)) then
        raise exception using errcode = 'PR110',
            message = format('fact %s is history: only the end of its known range may be set', old.id),
            hint = 'Assert a new fact (assert_fact) or retract this one (retract_fact).';
    end if;
    return new;
end
$$;
comment on function __tenant__._guard_fact_history() is
    'Internal trigger: a fact''s content and valid range never change; its known range may end once.';

create or replace trigger fact_history_guard before update on __tenant__.fact
    for each row execute function __tenant__._guard_fact_history();

create or replace function __tenant__._guard_predicate_cardinality()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if (new.name, new.single_valued, new.object_type) is distinct from (old.name, old.single_valued, old.object_type)
       and exists (select 1 from fact f where f.predicate = old.name) then
        raise exception using errcode = 'PR110',
            message = format('predicate %s is used by facts; its name, cardinality and object type cannot change', old.name),
            hint = 'Add a new predicate instead.';
    end if;
    return new;
end
$$;
comment on function __tenant__._guard_predicate_cardinality() is
    'Internal trigger: a predicate in use keeps its name, cardinality and object type.';

create or replace trigger predicate_in_use_guard before update on __tenant__.predicate
    for each row execute function __tenant__._guard_predicate_cardinality();
