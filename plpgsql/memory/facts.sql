-- Facts: asserting (closing and splitting what it contradicts), retracting,
-- citing, and the bitemporal question "what was true at T1 as we knew it at T2".
-- Errors: PR111 unknown predicate, PR112 evidence does not match its
-- observation, PR113 role policy (a human's fact on an assistant's word only),
-- PR114 unknown entity, PR115 unknown fact, PR108 fact no longer current.

-- Eligibility for facts, like _memory_eligible for memories and with the
-- same audience rule (_audience_admits): an expression on a fact's columns,
-- written in the WHERE clause of a query on fact and inlined there by the
-- planner (so no definer or SET, and no table read).
create or replace function __tenant__._fact_eligible(
    p_scope         text,
    p_audience_peer_id bigint,
    p_purposes      text[],
    p_valid         tstzrange,
    p_known         tstzrange,
    p_principal_id  bigint,
    p_scopes        text[],
    p_purpose       text,         -- NULL: any purpose
    p_valid_at      timestamptz,  -- NULL: any time
    p_known_at      timestamptz   -- NULL: currently known
)
returns boolean
language sql stable
as $$
    select p_scope = any (p_scopes)
       and __tenant__._audience_admits(p_principal_id, p_audience_peer_id, null)
       and (p_purpose is null or p_purpose = any (p_purposes))
       and (p_valid_at is null or p_valid @> p_valid_at)
       and (case when p_known_at is null then upper_inf(p_known) else p_known @> p_known_at end)
$$;
comment on function __tenant__._fact_eligible(text, bigint, text[], tstzrange, tstzrange, bigint, text[], text,
                                              timestamptz, timestamptz) is
    'Internal: whether a fact (its columns) is one the principal may see for a purpose, valid and known at the given times.';

-- The same as a set, for psql and the tests on one server (no tenant function calls it).
create or replace function __tenant__._eligible_facts(
    p_principal_id  bigint,
    p_scopes        text[],
    p_purpose       text,
    p_valid_at      timestamptz,
    p_known_at      timestamptz
)
returns setof __tenant__.fact
language sql stable
as $$
    select f.*
      from __tenant__.fact f
     where __tenant__._fact_eligible(f.scope, f.audience_peer_id, f.purposes, f.valid, f.known,
                                     p_principal_id, p_scopes, p_purpose, p_valid_at, p_known_at)
$$;
comment on function __tenant__._eligible_facts(bigint, text[], text, timestamptz, timestamptz) is
    'Internal: the facts a principal may see (_fact_eligible as a set), for psql and tests on one server.';

-- Evidence items ({"offset", "quote", optional "start"/"end" byte offsets})
-- resolved to observations and byte spans. Without a span the quote's first
-- occurrence is used; either way the trigger on fact_evidence checks the bytes.
create or replace function __tenant__._evidence_spans(p_principal_id bigint, p_scope text, p_evidence jsonb)
returns table (observation_id bigint, byte_start integer, byte_end integer, quote text,
               source_role text, occurred_at timestamptz, audience bigint[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_item jsonb;
    v_obs observation;
    v_start integer;
    v_found integer;
begin
    if p_evidence is null or jsonb_typeof(p_evidence) <> 'array' or jsonb_array_length(p_evidence) = 0 then
        perform _fail('PR112', 'a fact needs evidence: a non-empty array of {"offset", "quote"} items',
                      'E.g. [{"offset": 3, "quote": "I live in Lisbon"}], optionally with "start" and "end" UTF-8 byte offsets.');
    end if;
    for v_item in select * from jsonb_array_elements(p_evidence) loop
        if jsonb_typeof(v_item) <> 'object' or jsonb_typeof(v_item -> 'offset') is distinct from 'number'
           or jsonb_typeof(v_item -> 'quote') is distinct from 'string' or v_item ->> 'quote' = '' then
            perform _fail('PR112', format('evidence item %s needs a numeric "offset" and a non-empty "quote"', v_item));
        end if;
        -- Numbers are compared as numeric first: a cast of 1e300 or 2^63 to bigint would fail as 22003.
        if not _whole_in_range(v_item -> 'offset', 1, 9223372036854775807)
           or (v_item ? 'start' and not _whole_in_range(v_item -> 'start', 0, 2147483647))
           or (v_item ? 'end' and not _whole_in_range(v_item -> 'end', 0, 2147483647)) then
            perform _fail('PR150', format('evidence item %s has an offset or span out of range', _clip(v_item::text, 200)),
                          'An offset is a positive whole number below 2^63; "start" and "end" are byte offsets into the observation.');
        end if;
        -- A turn the principal may not see is missing to them: quoting it would
        -- confirm or refute a guess at its words.
        select o.* into v_obs from observation o
         where o.scope = p_scope and o.log_offset = (v_item ->> 'offset')::bigint
           and _audience_admits(p_principal_id, null, o.audience);
        if v_obs.id is null then
            perform _observation_ids(p_scope, array[(v_item ->> 'offset')::bigint], p_principal_id);  -- PR109, naming it
        end if;
        if v_item ? 'start' or v_item ? 'end' then
            if jsonb_typeof(v_item -> 'start') is distinct from 'number' or jsonb_typeof(v_item -> 'end') is distinct from 'number'
               or (v_item ->> 'start')::numeric <> floor((v_item ->> 'start')::numeric)
               or (v_item ->> 'end')::numeric <> floor((v_item ->> 'end')::numeric) then
                perform _fail('PR112', format('evidence item %s: "start" and "end" are whole UTF-8 byte offsets, given together', v_item));
            end if;
            if (v_item ->> 'start')::bigint < 0 or (v_item ->> 'end')::bigint <= (v_item ->> 'start')::bigint
               or (v_item ->> 'end')::bigint > octet_length(convert_to(v_obs.body, 'UTF8')) then
                perform _fail('PR112', format('evidence span %s..%s lies outside observation %s of scope %s, which is %s bytes long',
                                              v_item ->> 'start', v_item ->> 'end', v_obs.log_offset, p_scope,
                                              octet_length(convert_to(v_obs.body, 'UTF8'))),
                              'Spans are UTF-8 byte offsets into the observation body, end exclusive.');
            end if;
            v_start := (v_item ->> 'start')::integer;
            if octet_length(convert_to(v_item ->> 'quote', 'UTF8')) <> (v_item ->> 'end')::integer - v_start then
                perform _fail('PR112', format('the quote %s is %s bytes long but the span %s..%s is %s',
                                              quote_literal(v_item ->> 'quote'),
                                              octet_length(convert_to(v_item ->> 'quote', 'UTF8')), v_start,
                                              v_item ->> 'end', (v_item ->> 'end')::integer - v_start),
                              'Spans are UTF-8 byte offsets, end exclusive: end - start is the quote''s length in bytes.');
            end if;
        else
            v_found := position(convert_to(v_item ->> 'quote', 'UTF8') in convert_to(v_obs.body, 'UTF8'));
            if v_found = 0 then
                perform _fail('PR112', format('the quote %s does not occur in observation %s of scope %s',
                                              quote_literal(v_item ->> 'quote'), v_obs.log_offset, p_scope),
                              'Quote the observation verbatim.');
            end if;
            v_start := v_found - 1;
        end if;
        -- The trigger on fact_evidence enforces this too; checking here first
        -- names the log offset the caller gave and writes nothing.
        declare
            v_bytes bytea := convert_to(v_obs.body, 'UTF8');
            v_len integer := octet_length(convert_to(v_item ->> 'quote', 'UTF8'));
            v_span text;
        begin
            v_span := convert_from(substring(v_bytes from v_start + 1 for v_len), 'UTF8');
            if v_span is distinct from v_item ->> 'quote' then
                perform _fail('PR112', format('evidence quote %s is not the text at bytes %s..%s of observation %s of scope %s, which reads %s',
                                              quote_literal(v_item ->> 'quote'), v_start, v_start + v_len,
                                              v_obs.log_offset, p_scope, quote_literal(v_span)),
                              'The quote must be exactly the bytes of the span (UTF-8 byte offsets, end exclusive).');
            end if;
        exception when character_not_in_repertoire or untranslatable_character then
            perform _fail('PR112', format('evidence span %s..%s of observation %s of scope %s cuts a multi-byte character',
                                          v_start, v_start + v_len, v_obs.log_offset, p_scope),
                          'Spans are UTF-8 byte offsets; start and end must fall between characters.');
        end;
        observation_id := v_obs.id;
        byte_start := v_start;
        byte_end := coalesce((v_item ->> 'end')::integer, v_start + octet_length(convert_to(v_item ->> 'quote', 'UTF8')));
        quote := v_item ->> 'quote';
        source_role := v_obs.source_role;
        occurred_at := v_obs.occurred_at;
        audience := v_obs.audience;
        return next;
    end loop;
end
$$;
comment on function __tenant__._evidence_spans(bigint, text, jsonb) is
    'Internal: evidence items resolved to (observation, byte span, quote, the turn''s audience); PR112 when an item '
    'cannot be, PR109 when it cites a turn the principal may not see.';

-- Is this name (or the entity it denotes) a human peer? Decides the role policy.
create or replace function __tenant__._names_human_peer(p_scope text, p_name text)
returns boolean
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_entity bigint := _entity_named(p_scope, p_name);
    v_names text[] := array[_normalize_name(p_name)];
begin
    if v_entity is not null then
        -- every name the entity answers to: its own, its aliases, the entities merged into it
        v_names := v_names
                   || array(select e.normalized_name from entity e where e.id = v_entity or e.merged_into = v_entity)
                   || (select e.aliases from entity e where e.id = v_entity);
    end if;
    return exists (select 1 from peer p where p.kind = 'human' and _normalize_name(p.name) = any (v_names));
end
$$;
comment on function __tenant__._names_human_peer(text, text) is 'Internal: whether a name denotes a human peer (role policy).';

-- assert_fact() checks who asks and where, then runs _assert_fact();
-- assert_facts() checks them once for its whole batch.
create or replace function __tenant__.assert_fact(
    p_principal     text,
    p_scopes        text[],
    p_scope         text,
    p_subject       text,
    p_predicate     text,
    p_object        text,                        -- an entity name, or the value of a literal predicate
    p_evidence      jsonb,                       -- [{"offset": n, "quote": "...", "start": b, "end": b}]
    p_statement     text default null,           -- NULL: "subject predicate object"
    p_valid_from    timestamptz default null,    -- NULL: when the earliest evidence was said
    p_valid_to      timestamptz default null,    -- NULL: open-ended
    p_confidence    double precision default 1,
    p_observer      text default null,           -- whose perspective; NULL: the tenant's own view
    p_audience      text default null,           -- one peer who may see it; NULL: the scope
    p_purposes      text[] default null,         -- NULL: all four
    p_subject_type  text default null,
    p_object_type   text default null,
    p_widening_reason text default null          -- why it may reach more peers than a turn it cites
)
returns table (fact_id bigint, outcome text, closed_facts bigint[])
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
begin
    perform _check_write_scope(p_scope, p_scopes);
    return query
    select a.fact_id, a.outcome, a.closed_facts
      from _assert_fact(v_principal, p_scope, p_subject, p_predicate, p_object, p_evidence, p_statement,
                        p_valid_from, p_valid_to, p_confidence, p_observer, p_audience, p_purposes,
                        p_subject_type, p_object_type, p_widening_reason) a;
end
$$;
comment on function __tenant__.assert_fact(text, text[], text, text, text, text, jsonb, text, timestamptz, timestamptz,
                                           double precision, text, text, text[], text, text, text) is
    'Asserts a fact with verbatim evidence; a single-valued predicate''s overlapping current value is closed and split, '
    'never overwritten. PR116 when it would reach more peers than a turn it cites, unless p_widening_reason says why.';

create or replace function __tenant__._check_fact_fields(p_predicate text, p_subject text, p_object text,
                                                         p_statement text, p_subject_type text, p_object_type text,
                                                         p_confidence double precision, p_valid_from timestamptz,
                                                         p_valid_to timestamptz)
returns __tenant__.predicate
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_pred predicate;
begin
    select * into v_pred from predicate pr where pr.name = p_predicate;
    if v_pred.name is null then
        perform _fail('PR111', format('unknown predicate %s', coalesce(quote_literal(p_predicate), 'NULL')),
                      'predicates() lists the ontology; extend it with INSERT INTO predicate.');
    end if;
    perform _check_text(p_subject, 'subject', 200, p_blank => 'the subject and the object of a fact must not be empty');
    perform _check_text(p_object, 'object', case when v_pred.object_type = 'entity' then 200 else 1000 end,
                        p_blank => 'the subject and the object of a fact must not be empty');
    perform _check_entity_name(p_subject, 'subject');
    if v_pred.object_type = 'entity' then
        perform _check_entity_name(p_object, 'object');
    end if;
    if p_statement is not null then
        perform _check_text(p_statement, 'statement', 2000);
    end if;
    perform _check_length(p_subject_type, 'subject type', 200);
    perform _check_length(p_object_type, 'object type', 200);
    if p_confidence is null then
        perform _fail('PR107', 'confidence must be between 0 and 1, not NULL');
    end if;
    perform _check_confidence(p_confidence);
    perform _check_time(p_valid_from, 'valid_from');
    perform _check_time(p_valid_to, 'valid_to');
    return v_pred;
end
$$;
comment on function __tenant__._check_fact_fields(text, text, text, text, text, text, double precision, timestamptz,
                                                  timestamptz) is
    'Internal: the predicate of a fact, or PR111/PR107/PR150/PR151/PR152 naming the field of an assertion that is wrong.';

create or replace function __tenant__._fact_evidence(p_principal_id bigint, p_scope text, p_evidence jsonb,
                                                     p_subject text,
                                                     p_valid_from timestamptz, p_valid_to timestamptz,
                                                     p_audience bigint, p_widening_reason text,
                                                     out o_observations bigint[], out o_starts integer[],
                                                     out o_ends integer[], out o_quotes text[], out o_valid tstzrange,
                                                     out o_widening text)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_from timestamptz;
    v_not_only_assistant boolean;
begin
    -- Evidence first: every span checked before anything is written.
    select array_agg(e.observation_id order by e.n), array_agg(e.byte_start order by e.n),
           array_agg(e.byte_end order by e.n), array_agg(e.quote order by e.n),
           bool_or(e.source_role <> 'assistant'), min(e.occurred_at)
      into o_observations, o_starts, o_ends, o_quotes, v_not_only_assistant, v_from
      from _evidence_spans(p_principal_id, p_scope, p_evidence)
           with ordinality as e(observation_id, byte_start, byte_end, quote, source_role, occurred_at, audience, n);
    v_from := coalesce(p_valid_from, v_from);
    if p_valid_to is not null and p_valid_to <= v_from then
        perform _fail('PR152', format('the valid range [%s, %s) is empty', v_from, p_valid_to),
                      'valid_to must be later than valid_from (which defaults to when the evidence was said).');
    end if;
    o_valid := tstzrange(v_from, p_valid_to);

    -- What an assistant said about a person is not that person's fact.
    if not v_not_only_assistant and _names_human_peer(p_scope, p_subject) then
        perform _fail('PR113', format('%s is a human peer and every quote for this fact was spoken by an assistant',
                                      quote_literal(p_subject)),
                      'A fact about a person needs evidence that is not only the assistant''s word (e.g. what they said).');
    end if;
    -- Never more public than the turns it cites, unless widened on purpose (PR116).
    o_widening := _widening(p_audience, o_observations, p_widening_reason, 'fact');
end
$$;
comment on function __tenant__._fact_evidence(bigint, text, jsonb, text, timestamptz, timestamptz, bigint, text) is
    'Internal: an assertion''s evidence spans, checked (PR109/PR112/PR113/PR116), its valid range (PR152 when empty) '
    'and the widening reason to keep.';

create or replace function __tenant__._add_fact_evidence(p_fact bigint, p_subject bigint, p_object bigint,
                                                         p_observations bigint[], p_starts integer[], p_ends integer[],
                                                         p_quotes text[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    -- On a Citus node a few rows are inserted one VALUES row at a time, as _remember_links does: there an
    -- INSERT ... SELECT (and a writing CTE) is planned as subplans whose rows are written out, read back and copied
    -- into the shard, while an INSERT ... VALUES takes the fast path. One server keeps the one statement: per-row
    -- statements were a third of an assertion's time there.
    c_row_by_row constant integer := 16;
    v_cited_obs bigint[];
    v_cited_start integer[];
    v_cited_end integer[];
    v_new integer[];
    v_sources bigint[] := array(select distinct x from unnest(p_observations) x order by x);
    v_evidence bigint;
    v_dependency record;
begin
    if current_setting('citus.version', true) is null
       or cardinality(p_observations) + 3 * cardinality(v_sources) > c_row_by_row then
        -- The spans not already cited (a confirmation adds only those).
        v_new := array(select e.n from unnest(p_observations, p_starts, p_ends) with ordinality e(o, s, e, n)
                        where not exists (select 1 from fact_evidence x where x.fact_id = p_fact
                                             and x.observation_id = e.o and x.byte_start = e.s and x.byte_end = e.e)
                        order by e.n);
        -- The evidence, and what the entities, the fact and each new evidence row derive from, in one statement.
        with added as (
            insert into fact_evidence (fact_id, observation_id, byte_start, byte_end, quote)
            select p_fact, p_observations[n], p_starts[n], p_ends[n], p_quotes[n] from unnest(v_new) n
            returning id, observation_id)
        insert into projection_dependency (kind, row_key, observation_id)
        select 'fact_evidence', a.id::text, a.observation_id from added a
        union all
        select k.kind, k.row_key, o
          from (values ('entity', p_subject::text), ('entity', p_object::text), ('fact', p_fact::text)) k(kind, row_key),
               unnest(v_sources) o
         where k.row_key is not null
        on conflict do nothing;
        return;
    end if;
    -- The spans cited already, read by a statement of that table alone (Citus's fast path), compared as arrays.
    select coalesce(array_agg(x.observation_id), '{}'), coalesce(array_agg(x.byte_start), '{}'),
           coalesce(array_agg(x.byte_end), '{}')
      into v_cited_obs, v_cited_start, v_cited_end
      from fact_evidence x where x.fact_id = p_fact;
    v_new := array(select e.n from unnest(p_observations, p_starts, p_ends) with ordinality e(o, s, e, n)
                    where not exists (select 1 from unnest(v_cited_obs, v_cited_start, v_cited_end) c(o, s, f)
                                       where c.o = e.o and c.s = e.s and c.f = e.e)
                    order by e.n);
    for i in 1 .. cardinality(v_new) loop
        insert into fact_evidence (fact_id, observation_id, byte_start, byte_end, quote)  -- the id's default: unkept
        values (p_fact, p_observations[v_new[i]], p_starts[v_new[i]], p_ends[v_new[i]], p_quotes[v_new[i]])
        returning id into v_evidence;
        insert into projection_dependency (kind, row_key, observation_id)
        values (_unkept_on_citus('fact_evidence'::text), v_evidence::text, p_observations[v_new[i]])
        on conflict do nothing;
    end loop;
    for v_dependency in select k.kind, k.row_key, o
                          from (values ('entity', p_subject::text), ('entity', p_object::text), ('fact', p_fact::text))
                               k(kind, row_key), unnest(v_sources) o
                         where k.row_key is not null
                         order by 1, 2, 3 loop
        insert into projection_dependency (kind, row_key, observation_id)
        values (_unkept_on_citus(v_dependency.kind), v_dependency.row_key, v_dependency.o)
        on conflict do nothing;
    end loop;
end
$$;
comment on function __tenant__._add_fact_evidence(bigint, bigint, bigint, bigint[], integer[], integer[], text[]) is
    'Internal: a fact''s new evidence rows, and what its entities, the fact and that evidence derive from.';

-- One piece of an old fact's valid range, believed again as a new current fact with the old one's
-- evidence: what a closing assertion left outside its range (split_by names it), or what an erased
-- assertion had closed (split_by NULL). Known from p_known_from, or from now when NULL.
create or replace function __tenant__._fact_pieces(p_old __tenant__.fact, p_pieces tstzmultirange,
                                                   p_known_from timestamptz, p_split_by bigint)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_piece tstzrange;
    v_part bigint;
    v_obs bigint[];
    v_start integer[];
    v_end integer[];
    v_quote text[];
begin
    -- The old fact's evidence, read once by a statement of that table alone (on Citus an INSERT ... SELECT of it
    -- is evaluated apart and copied into the shard), then written for each piece as new evidence.
    select array_agg(x.observation_id order by x.id), array_agg(x.byte_start order by x.id),
           array_agg(x.byte_end order by x.id), array_agg(x.quote order by x.id)
      into v_obs, v_start, v_end, v_quote
      from fact_evidence x where x.fact_id = p_old.id;
    for v_piece in select p from unnest(p_pieces) p loop
        insert into fact (scope, subject_id, predicate, single_valued, object_id, object_value, statement, valid,
                          known, confidence, salience, observer_peer_id, audience_peer_id, purposes, asserted_by,
                          split_from, split_by)
        values (p_old.scope, p_old.subject_id, p_old.predicate, p_old.single_valued, p_old.object_id,
                p_old.object_value, p_old.statement, v_piece, tstzrange(coalesce(p_known_from, clock_timestamp()), null),
                p_old.confidence, p_old.salience, p_old.observer_peer_id, p_old.audience_peer_id, p_old.purposes,
                p_old.asserted_by, p_old.id, p_split_by)
        returning id into v_part;
        perform _add_fact_evidence(v_part, null, null, coalesce(v_obs, '{}'), coalesce(v_start, '{}'),
                                   coalesce(v_end, '{}'), coalesce(v_quote, '{}'));
    end loop;
end
$$;
comment on function __tenant__._fact_pieces(__tenant__.fact, tstzmultirange, timestamptz, bigint) is
    'Internal: the given pieces of an old fact''s valid range become current facts again, with its evidence.';

create or replace function __tenant__._split_closed_facts(p_closed bigint[], p_fact bigint, p_valid tstzrange,
                                                          p_now timestamptz)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_old fact;
begin
    -- What the closed facts said outside the new valid range is still believed:
    -- each surviving piece is a new current fact with the old one's evidence.
    for v_old in select * from fact f where f.id = any (p_closed) order by f.id loop
        update fact f set closed_by = p_fact where f.id = v_old.id;
        perform _fact_pieces(v_old, tstzmultirange(v_old.valid) - tstzmultirange(p_valid), p_now, p_fact);
    end loop;
end
$$;
comment on function __tenant__._split_closed_facts(bigint[], bigint, tstzrange, timestamptz) is
    'Internal: what facts closed by a new one said outside its valid range stays believed, as new current facts.';

create or replace function __tenant__._close_overlapping_facts(p_subject bigint, p_predicate text, p_observer bigint,
                                                              p_valid tstzrange, p_now timestamptz)
returns bigint[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result bigint[];
begin
    -- A single value at a time: close every current fact the new one overlaps.
    if current_setting('citus.version', true) is null then
        with closed as (
            update fact f set known = tstzrange(lower(f.known), p_now)
             where f.subject_id = p_subject and f.predicate = p_predicate and f.single_valued
               and upper_inf(f.known) and coalesce(f.observer_peer_id, 0) = coalesce(p_observer, 0)
               and f.valid && p_valid
            returning f.id)
        select coalesce(array_agg(id order by id), '{}') from closed
        into v_result;
        return v_result;
    end if;
    -- On a Citus node found first, then closed by id: there an UPDATE inside a CTE is planned and deparsed again
    -- at every call, while each statement of one table takes the fast path. The caller holds the subject's lock,
    -- which every fact writer takes, so nothing changes between the two.
    select coalesce(array_agg(f.id order by f.id), '{}') into v_result
      from fact f
     where f.subject_id = p_subject and f.predicate = p_predicate and f.single_valued
       and upper_inf(f.known) and coalesce(f.observer_peer_id, 0) = coalesce(p_observer, 0)
       and f.valid && p_valid;
    if cardinality(v_result) > 0 then
        update fact f set known = tstzrange(lower(f.known), p_now) where f.id = any (v_result);
    end if;
    return v_result;
end
$$;
comment on function __tenant__._close_overlapping_facts(bigint, text, bigint, tstzrange, timestamptz) is
    'Internal: a single-valued predicate''s current facts that a new valid range overlaps stop being believed now; their ids.';

-- Its statements (and its helpers') are planned once per session, not per
-- call: re-made custom plans were ~20% of a fact's server time.
create or replace function __tenant__._assert_fact(
    p_principal_id  bigint,                      -- checked by the caller, as is the scope written
    p_scope         text,
    p_subject       text,
    p_predicate     text,
    p_object        text,
    p_evidence      jsonb,
    p_statement     text,
    p_valid_from    timestamptz,
    p_valid_to      timestamptz,
    p_confidence    double precision,
    p_observer      text,
    p_audience      text,
    p_purposes      text[],
    p_subject_type  text,
    p_object_type   text,
    p_widening_reason text
)
returns table (fact_id bigint, outcome text, closed_facts bigint[])
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_widening text;    -- why it may reach more peers than its turns (NULL: it does not)
    v_saved_plan_mode text := current_setting('plan_cache_mode');
    v_observer bigint := case when p_observer is null then null else _peer_id(p_observer, 'observer') end;
    v_audience bigint := case when p_audience is null then null else _peer_id(p_audience, 'audience') end;
    v_purposes text[];
    v_pred predicate;
    v_valid tstzrange;
    v_subject bigint;
    v_object bigint;
    v_object_value text;
    v_now timestamptz;
    v_existing bigint;
    v_fact bigint;      -- the confirmed or the new fact
    v_closed bigint[] := '{}';
    v_ev_obs bigint[];
    v_ev_start integer[];
    v_ev_end integer[];
    v_ev_quote text[];
begin
    perform set_config('plan_cache_mode', _plan_cache_mode(), true);
    v_pred := _check_fact_fields(p_predicate, p_subject, p_object, p_statement, p_subject_type, p_object_type,
                                 p_confidence, p_valid_from, p_valid_to);
    v_purposes := case when p_purposes is null then array(select p from unnest(_purposes()) p order by p)
                       else _check_purposes(p_purposes) end;
    -- Evidence first: every span checked before anything is written.
    select e.o_observations, e.o_starts, e.o_ends, e.o_quotes, e.o_valid, e.o_widening
      into v_ev_obs, v_ev_start, v_ev_end, v_ev_quote, v_valid, v_widening
      from _fact_evidence(p_principal_id, p_scope, p_evidence, p_subject, p_valid_from, p_valid_to, v_audience,
                          p_widening_reason) e;
    -- One assertion per subject at a time, so conflicting writers queue up
    -- and each sees what the previous one asserted.
    v_subject := _entity_for(p_scope, p_subject, p_subject_type);
    perform 1 from entity e where e.id = v_subject for update;
    v_now := clock_timestamp();
    if v_pred.object_type = 'entity' then
        v_object := _entity_for(p_scope, p_object, p_object_type);
        if v_object = v_subject then
            perform _fail('PR107', format('a fact cannot relate %s to itself', quote_literal(p_subject)));
        end if;
    else
        v_object_value := _trim(p_object);
    end if;
    -- The same value, already known for at least this long: the assertion confirms it.
    select f.id into v_existing from fact f
     where f.subject_id = v_subject and f.predicate = v_pred.name and upper_inf(f.known)
       and coalesce(f.observer_peer_id, 0) = coalesce(v_observer, 0)
       and f.object_id is not distinct from v_object and f.object_value is not distinct from v_object_value
       and f.valid @> v_valid
       and f.scope = p_scope
     order by f.id + 0 limit 1;  -- "+ 0": found through the subject's index, not by walking the primary key
    if v_existing is not null then
        v_fact := v_existing;
        update fact f set salience = f.salience + 1 where f.id = v_existing;
    else
        if v_pred.single_valued then
            v_closed := _close_overlapping_facts(v_subject, v_pred.name, v_observer, v_valid, v_now);
        end if;
        insert into fact (scope, subject_id, predicate, single_valued, object_id, object_value, statement, valid,
                          known, confidence, salience, observer_peer_id, audience_peer_id, purposes, asserted_by,
                          widening_reason)
        values (p_scope, v_subject, v_pred.name, v_pred.single_valued, v_object, v_object_value,
                coalesce(_trim(p_statement),
                         format('%s %s %s', _trim(p_subject), replace(v_pred.name, '_', ' '), _trim(p_object))),
                v_valid, tstzrange(v_now, null), p_confidence, 1, v_observer, v_audience, v_purposes, p_principal_id,
                v_widening)
        returning id into v_fact;
    end if;
    perform _add_fact_evidence(v_fact, v_subject, v_object, v_ev_obs, v_ev_start, v_ev_end, v_ev_quote);
    if cardinality(v_closed) > 0 then  -- most assertions close nothing: no statement to run
        perform _split_closed_facts(v_closed, v_fact, v_valid, v_now);
    end if;
    perform set_config('plan_cache_mode', v_saved_plan_mode, true);
    return query select v_fact, case when v_existing is not null then 'confirmed'
                                     when cardinality(v_closed) > 0 then 'superseded' else 'inserted' end, v_closed;
end
$$;
comment on function __tenant__._assert_fact(bigint, text, text, text, text, jsonb, text, timestamptz, timestamptz,
                                            double precision, text, text, text[], text, text, text) is
    'Internal: assert_fact() for a principal and a scope already checked.';

create or replace function __tenant__._visible_fact(p_principal_id bigint, p_scopes text[], p_fact_id bigint)
returns __tenant__.fact
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_fact fact;
begin
    perform _check_id(p_fact_id, 'fact id');
    select f.* into v_fact from fact f where f.id = p_fact_id and f.scope = any (p_scopes)
       and _audience_admits(p_principal_id, f.audience_peer_id, null);
    if v_fact.id is null then
        perform _fail('PR115', format('fact %s not found in scopes %s', p_fact_id, array_to_string(p_scopes, ', ')));
    end if;
    return v_fact;
end
$$;
comment on function __tenant__._visible_fact(bigint, text[], bigint) is 'Internal: a fact the principal may see, or PR115.';

create or replace function __tenant__.retract_fact(p_principal text, p_scopes text[], p_fact_id bigint, p_reason text)
returns table (fact_id bigint, known tstzrange)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_known_until timestamptz;
    v_fact fact;
begin
    perform _check_scopes(p_scopes);
    v_fact := _visible_fact(_peer_id(p_principal), p_scopes, p_fact_id);
    perform _check_reason(p_reason, 'a retraction needs a reason', null, 1000);
    perform 1 from entity e where e.id = v_fact.subject_id for update;
    -- The end is computed here, not in the UPDATE: Citus refuses a volatile function there, and a stable one
    -- (timestamptz + interval) applied to a column. Read under the subject's lock, which fact writers take.
    select greatest(clock_timestamp(), lower(f.known) + interval '1 microsecond') into v_known_until
      from fact f where f.id = p_fact_id and upper_inf(f.known);
    if not found then
        perform _fail('PR108', format('fact %s is no longer current: it was closed or retracted already', p_fact_id));
    end if;
    return query
    update fact f set known = tstzrange(lower(f.known), v_known_until), retraction_reason = _trim(p_reason)
     where f.id = p_fact_id
    returning f.id, f.known;
end
$$;
comment on function __tenant__.retract_fact(text, text[], bigint, text) is
    'Ends a fact''s known range now: we no longer believe it. The row stays, so earlier beliefs can still be asked about.';

-- A quote whose turn the principal may not see is withheld: the row says
-- which turn (its offset) and "withheld", never the words, who said them or
-- when.
create or replace function __tenant__.resolve_citation(p_principal text, p_scopes text[], p_fact_id bigint)
returns table (evidence_id bigint, scope text, log_offset bigint, observation_id bigint, byte_start integer,
               byte_end integer, quote text, actor text, source_role text, occurred_at timestamptz, body text,
               withheld boolean)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
begin
    perform _check_scopes(p_scopes);
    perform _visible_fact(v_principal, p_scopes, p_fact_id);
    return query
    select x.id, o.scope, o.log_offset, o.id,
           case when seen then x.byte_start end, case when seen then x.byte_end end, case when seen then x.quote end,
           case when seen then p.name end, case when seen then o.source_role end,
           case when seen then o.occurred_at end, case when seen then o.body end, not seen
      from fact_evidence x
      join observation o on o.id = x.observation_id
      join peer p on p.id = o.actor_id
     cross join lateral (select exists (select 1 from observation e
                                         where _observation_eligible(e.scope, e.audience,
                                                                     v_principal, p_scopes) and e.id = o.id) as seen) v
     where x.fact_id = p_fact_id
     order by o.log_offset, x.byte_start;
end
$$;
comment on function __tenant__.resolve_citation(text, text[], bigint) is
    'The observations and byte spans that prove a fact: each quote with where it was said, by whom and when '
    '(withheld where the principal may not see the turn).';

-- A fact's evidence, for answers that carry their proof; a quote from a
-- turn the principal may not see is withheld, as in resolve_citation.
create or replace function __tenant__._fact_quotes(p_fact_id bigint, p_principal_id bigint, p_scopes text[])
returns __tenant__.fact_quote[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result fact_quote[];
begin
    select coalesce(array_agg(case when e.id is not null
                                   then row(o.scope, o.log_offset, x.byte_start, x.byte_end, x.quote, o.source_role,
                                            false)::fact_quote
                                   else row(o.scope, o.log_offset, null, null, null, null, true)::fact_quote end
                              order by o.log_offset, x.byte_start), '{}')
      from fact_evidence x join observation o on o.id = x.observation_id
      left join observation e on _observation_eligible(e.scope, e.audience, p_principal_id, p_scopes) and e.id = o.id
     where x.fact_id = p_fact_id
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._fact_quotes(bigint, bigint, text[]) is
    'Internal: a fact''s evidence (quotes and spans), withheld where the principal may not see the turn.';

create or replace function __tenant__.facts_as_of(
    p_principal  text,
    p_scopes     text[],
    p_subject    text,
    p_predicate  text default null,
    p_valid_at   timestamptz default null,   -- NULL: now
    p_known_at   timestamptz default null,   -- NULL: what is believed now
    p_purpose    text default 'converse'
)
returns table (fact_id bigint, subject text, predicate text, object text, statement text, valid tstzrange,
               known tstzrange, confidence real, salience real, observer text, evidence __tenant__.fact_quote[])
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_subjects bigint[];
begin
    perform _check_scopes(p_scopes);
    perform _check_purpose(p_purpose);
    perform _check_time(p_valid_at, 'valid_at');
    perform _check_past_moment(p_known_at, 'known_at',
                               'What will be believed later is not known yet: leave known_at out for what is believed now, '
                               'or give valid_at to ask what holds at a later time.');
    if p_predicate is not null and not exists (select 1 from predicate pr where pr.name = p_predicate) then
        perform _fail('PR111', format('unknown predicate %s', quote_literal(p_predicate)),
                      'predicates() lists the ontology.');
    end if;
    perform _entity_required(v_principal, p_scopes, p_subject);
    v_subjects := array(select x from (select _entity_named(s, p_subject) as x from unnest(p_scopes) s) y where x is not null);
    return query
    select f.id, se.name, f.predicate, coalesce(oe.name, f.object_value), f.statement, f.valid, f.known,
           f.confidence, f.salience, op.name, _fact_quotes(f.id, v_principal, p_scopes)
      from fact f
      join entity se on se.id = f.subject_id
      left join entity oe on oe.id = f.object_id
      left join peer op on op.id = f.observer_peer_id
     where _fact_eligible(f.scope, f.audience_peer_id, f.purposes, f.valid, f.known,
                          v_principal, p_scopes, p_purpose, coalesce(p_valid_at, now()), p_known_at)
       and f.subject_id = any (v_subjects)
       and (p_predicate is null or f.predicate = p_predicate)
     order by f.predicate, lower(f.valid) desc, f.id;
end
$$;
comment on function __tenant__.facts_as_of(text, text[], text, text, timestamptz, timestamptz, text) is
    'What was true of a subject at p_valid_at as we believed it at p_known_at (defaults: now, current belief), with evidence.';

create or replace function __tenant__.predicates()
returns table (name text, single_valued boolean, object_type text, description text)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select p.name, p.single_valued, p.object_type, p.description from predicate p order by p.name
$$;
comment on function __tenant__.predicates() is 'The predicate ontology: each predicate, whether it holds one value at a time, and its object type.';

create or replace function __tenant__.assert_facts(p_principal text, p_scopes text[], p_scope text, p_items jsonb)
returns table (ordinal integer, fact_id bigint, outcome text, closed_facts bigint[])
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_item jsonb;
    v_n integer := 0;
    v_state text;
    v_message text;
    v_hint text;
begin
    perform _check_write_scope(p_scope, p_scopes);
    perform _check_object_array(p_items, 'items',
        'Each item: subject, predicate, object, evidence, and optionally statement, valid_from, valid_to, '
        'confidence, observer, audience, purposes, subject_type, object_type, widening_reason.');
    perform _check_keys(p_items, array['subject', 'predicate', 'object', 'evidence', 'statement', 'valid_from',
                        'valid_to', 'confidence', 'observer', 'audience', 'purposes', 'subject_type', 'object_type',
                        'widening_reason'],
                        'fact item');
    perform _check_single_values(p_items, array['purposes'], 'fact item', array['evidence']);
    -- In order, in one transaction: a later item sees (and may close) an
    -- earlier one, and any failure leaves nothing of the batch behind. One
    -- exception block around the loop (not one per item) names the item.
    begin
        for v_item in select * from jsonb_array_elements(p_items) loop
            v_n := v_n + 1;
            return query
            select v_n, a.fact_id, a.outcome, a.closed_facts
              from _assert_fact(v_principal, p_scope, v_item ->> 'subject', v_item ->> 'predicate',
                               v_item ->> 'object', v_item -> 'evidence', v_item ->> 'statement',
                               (v_item ->> 'valid_from')::timestamptz, (v_item ->> 'valid_to')::timestamptz,
                               coalesce((v_item ->> 'confidence')::double precision, 1), v_item ->> 'observer',
                               v_item ->> 'audience',
                               case when v_item ? 'purposes'
                                    then array(select jsonb_array_elements_text(v_item -> 'purposes')) end,
                               v_item ->> 'subject_type', v_item ->> 'object_type', v_item ->> 'widening_reason') a;
        end loop;
    exception when others then
        get stacked diagnostics v_state = returned_sqlstate, v_message = message_text, v_hint = pg_exception_hint;
        -- A field of the wrong JSON type fails in PostgreSQL's cast (class 22):
        -- the caller's input, so it is reported as ours.
        if v_state like '22%' then
            v_message := format('an item has a value of the wrong type: %s', v_message);
            v_state := case when v_state in ('22007', '22008') then 'PR152'
                            when v_state = '22003' then 'PR150' else 'PR107' end;
        end if;
        raise exception using errcode = v_state, message = format('%s (item %s)', _clip(v_message), v_n),
                              hint = _clip(coalesce(nullif(v_hint, ''), 'The batch was not written.'));
    end;
end
$$;
comment on function __tenant__.assert_facts(text, text[], text, jsonb) is
    'assert_fact() for a batch (a JSON array of items), in order and all-or-nothing; one row per item.';
