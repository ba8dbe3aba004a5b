-- Argument checks shared by every operation. Each failure raises a PR-class
-- SQLSTATE whose message names the offending value; the codes are listed,
-- with what each means, in sql/errors.sql (pgrecall.error_code).

-- A message quotes the offending value, and the caller chose its size: a 10 MB
-- name would go back to the client, and into the server log, 10 MB long. The
-- start of the value names it well enough.
create or replace function __tenant__._clip(p_text text, p_max_chars integer default 500)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select case when length(p_text) <= p_max_chars then p_text
                else left(p_text, p_max_chars) || format('... (%s characters in all)', length(p_text)) end
$$;
comment on function __tenant__._clip(text, integer) is
    'Internal: text cut to p_max_chars characters, saying how long it was; for error messages that quote input.';

create or replace function __tenant__._fail(p_code text, p_message text, p_hint text default null)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_hint is null then
        raise exception using errcode = p_code, message = _clip(p_message);
    end if;
    raise exception using errcode = p_code, message = _clip(p_message), hint = _clip(p_hint);
end
$$;
comment on function __tenant__._fail(text, text, text) is
    'Internal: raise a pgrecall error with our SQLSTATE; message and hint cut to 500 characters.';

create or replace function __tenant__._peer_id(p_name text, p_role text default 'principal')
returns bigint
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_id bigint;
    v_stored text;
begin
    if p_name is null then
        perform _fail('PR101', format('the %s peer is required', p_role),
                      'Pass the name of a peer created with add_peer().');
    end if;
    -- A peer name has at most 200 characters (peers_scopes.sql): a longer one names no peer, and is not
    -- normalised or looked up.
    perform _check_length(p_name, format('the %s peer''s name', p_role), 800);
    -- Exact after NFC: another case is another (unknown) name, see peers_scopes.sql.
    select p.id into v_id from peer p where p.name = normalize(p_name, NFC);
    if v_id is null then
        select p.name into v_stored from peer p where lower(p.name) = lower(normalize(p_name, NFC)) limit 1;
        perform _fail('PR101', format('unknown %s peer %s', p_role, _shown(p_name)),
                      case when v_stored is null then 'Create it first with add_peer(name, kind).'
                           else format('Peer names are matched exactly: the peer is %s.', _shown(v_stored)) end);
    end if;
    return v_id;
end
$$;
comment on function __tenant__._peer_id(text, text) is 'Internal: the id of a named peer, or PR101.';

-- The authorised set must be non-empty and name existing scopes only: a typo
-- in a scope name is an error, not an empty answer.
create or replace function __tenant__._check_scopes(p_scopes text[])
returns text[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_unknown text;
begin
    if p_scopes is null or cardinality(p_scopes) = 0 then
        perform _fail('PR103', 'the set of authorised scopes is empty',
                      'Pass the scopes the principal may read, e.g. array[''default''].');
    end if;
    perform _check_texts(p_scopes, 'scope name', 64);  -- a scope name has at most 64 characters, all ASCII
    select s into v_unknown from unnest(p_scopes) s
     where s is null or not exists (select 1 from scope sc where sc.name = s) limit 1;
    if found then
        perform _fail('PR131', format('unknown scope %s', coalesce(quote_literal(v_unknown), 'NULL')),
                      'Create it first with add_scope(name).');
    end if;
    return p_scopes;
end
$$;
comment on function __tenant__._check_scopes(text[]) is 'Internal: PR103 for an empty authorised set, PR131 for a scope that does not exist.';

create or replace function __tenant__._check_write_scope(p_scope text, p_scopes text[])
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_scopes(p_scopes);
    if p_scope is null or not (p_scope = any (p_scopes)) then
        perform _fail('PR103', format('scope %s is not in the authorised set %s',
                                      coalesce(quote_literal(p_scope), 'NULL'), p_scopes::text),
                      'Write only to a scope the principal is authorised for.');
    end if;
    return p_scope;
end
$$;
comment on function __tenant__._check_write_scope(text, text[]) is 'Internal: PR103 unless the scope written is authorised.';

-- The four purposes a memory or fact may be used for: the one definition of the closed set. The
-- memory and fact tables' CHECK constraints (migrations 0003, 0008) spell the same four, and
-- tests/test_purposes.py holds them, and Python's pgrecall.purposes.PURPOSES, to this function.
-- Every closed set of words a caller may pass, defined here once: the
-- functions that check input read them, so do the error messages, and Python
-- reads its copy back from here in a test (tests/test_vocabulary.py holds it
-- to this function and to the tables' CHECK constraints, which migrations froze).
create or replace function __tenant__._closed_set(p_name text)
returns text[]
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return case p_name
        when 'purpose' then array['converse', 'act', 'personalize', 'review']
        when 'memory kind' then array['note', 'fact', 'decision', 'summary']
        when 'observation kind' then array['message', 'document', 'tool_result', 'event', 'note']
        when 'source_role' then array['user', 'assistant', 'system', 'tool', 'document']
        when 'peer kind' then array['human', 'agent', 'other']
        when 'classification' then array['public', 'internal', 'confidential', 'restricted']
        when 'lawful_basis' then array['consent', 'contract', 'legal_obligation', 'vital_interests',
                                       'public_task', 'legitimate_interests']
    end;
end
$$;
comment on function __tenant__._closed_set(text) is
    'Internal: the words allowed for a purpose, memory kind, observation kind, source_role, peer kind, classification or lawful_basis.';

-- "x 'y' is not one of a, b, c": the message for a value outside a closed set.
create or replace function __tenant__._not_one_of(p_what text, p_value text, p_set text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select format('%s %s is not one of %s', p_what, quote_nullable(p_value), array_to_string(_closed_set(p_set), ', '))
$$;
comment on function __tenant__._not_one_of(text, text, text) is 'Internal: the message for a value outside a closed set.';

create or replace function __tenant__._purposes()
returns text[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _closed_set('purpose')
$$;
comment on function __tenant__._purposes() is
    'Internal: the four purposes (converse, act, personalize, review), in the order help texts list them.';

create or replace function __tenant__._check_purpose(p_purpose text)
returns text
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_purpose is null or not (p_purpose = any (_purposes())) then
        perform _fail('PR102', format('unknown purpose %s', coalesce(quote_literal(p_purpose), 'NULL')),
                      format('A purpose is one of %s.', array_to_string(_purposes(), ', ')));
    end if;
    return p_purpose;
end
$$;
comment on function __tenant__._check_purpose(text) is 'Internal: PR102 unless the purpose is one of the four.';

create or replace function __tenant__._check_purposes(p_purposes text[])
returns text[]
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_purpose text;
begin
    if p_purposes is null or cardinality(p_purposes) = 0 then
        perform _fail('PR102', 'the set of purposes is empty',
                      format('Say what the memory may be used for: %s and/or %s.',
                             array_to_string(trim_array(_purposes(), 1), ', '), (_purposes())[cardinality(_purposes())]));
    end if;
    foreach v_purpose in array p_purposes loop
        perform _check_purpose(v_purpose);
    end loop;
    return array(select distinct p from unnest(p_purposes) p order by p);
end
$$;
comment on function __tenant__._check_purposes(text[]) is 'Internal: PR102 unless every purpose is known; returns them sorted and distinct.';

-- p_blank: for a name or a fact's end, whitespace alone is no value either:
-- the PR107 message to raise then.
create or replace function __tenant__._check_text(p_value text, p_what text, p_max_bytes bigint,
                                                  p_setting text default null, p_blank text default null)
returns text
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_value is null then
        perform _fail('PR107', format('%s is required', p_what));
    elsif octet_length(p_value) > p_max_bytes then
        perform _fail('PR151', format('%s is %s bytes, more than the %s allowed', p_what,
                                      octet_length(p_value), p_max_bytes),
                      case when p_setting is null then 'Shorten it.'
                           else format('Split the text, or raise setting %s with pgrecall.set_tenant_setting().', p_setting) end);
    elsif p_blank is not null and _trim(p_value) = '' then
        perform _fail('PR107', p_blank);
    end if;
    return p_value;
end
$$;
comment on function __tenant__._check_text(text, text, bigint, text, text) is
    'Internal: PR107 if the text is missing (or blank, given p_blank), PR151 if it is too large.';

-- The bounds of arguments that have no rule of their own (names have theirs,
-- bodies their settings): checked before the value is used, so a 10 MB value
-- is refused with PR151 instead of reaching an index (54000) or a message.
-- 200 characters is a name's bound (a peer, a worker, a data subject id, a
-- model), so these take bytes: 200 characters of any script fit 800.

-- A text that may be NULL, at most p_max_bytes long.
create or replace function __tenant__._check_length(p_value text, p_what text, p_max_bytes bigint)
returns text
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if octet_length(p_value) > p_max_bytes then
        perform _fail('PR151', format('%s is %s bytes, more than the %s allowed', p_what, octet_length(p_value),
                                      p_max_bytes), 'Shorten it.');
    end if;
    return p_value;
end
$$;
comment on function __tenant__._check_length(text, text, bigint) is
    'Internal: PR151 if the text (NULL allowed) is longer than p_max_bytes.';

-- An array of texts (NULL allowed): at most p_max_count of them, each at most
-- p_max_bytes.
create or replace function __tenant__._check_texts(p_values text[], p_what text, p_max_bytes bigint,
                                                   p_max_count integer default 1000)
returns text[]
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_long bigint;
begin
    if cardinality(p_values) > p_max_count then
        perform _fail('PR150', format('%s: %s of them, more than the %s allowed', p_what, cardinality(p_values),
                                      p_max_count));
    end if;
    select max(octet_length(v)) into v_long from unnest(p_values) v;
    if v_long > p_max_bytes then
        perform _fail('PR151', format('a %s is %s bytes, more than the %s allowed', p_what, v_long, p_max_bytes),
                      'Shorten it.');
    end if;
    return p_values;
end
$$;
comment on function __tenant__._check_texts(text[], text, bigint, integer) is
    'Internal: PR150 if the array has more than p_max_count texts, PR151 if one is longer than p_max_bytes.';

-- A JSON argument (NULL allowed), at most p_max_bytes as stored.
create or replace function __tenant__._check_json_size(p_value jsonb, p_what text, p_max_bytes bigint)
returns jsonb
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if pg_column_size(p_value) > p_max_bytes then
        perform _fail('PR151', format('%s is %s bytes, more than the %s allowed', p_what, pg_column_size(p_value),
                                      p_max_bytes), 'Send less, or split it.');
    end if;
    return p_value;
end
$$;
comment on function __tenant__._check_json_size(jsonb, text, bigint) is
    'Internal: PR151 if the JSON value (NULL allowed) takes more than p_max_bytes.';

-- A data subject id: whose personal data a row is (NULL: none named).
create or replace function __tenant__._check_subject(p_data_subject_id text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _check_length(p_data_subject_id, 'data subject id', 200)
$$;
comment on function __tenant__._check_subject(text) is 'Internal: PR151 unless a data subject id fits 200 bytes.';

-- Who claims, holds or gives back queued work (recorded as leased_by).
create or replace function __tenant__._check_worker(p_worker text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select _check_length(p_worker, 'worker name', 200)
$$;
comment on function __tenant__._check_worker(text) is 'Internal: PR151 unless a worker name fits 200 bytes.';

create or replace function __tenant__._check_id(p_id bigint, p_what text)
returns bigint
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_id is null or p_id <= 0 then
        perform _fail(case when p_id is null then 'PR107' else 'PR150' end,
                      format('%s must be a positive id, not %s', p_what, coalesce(p_id::text, 'NULL')));
    end if;
    return p_id;
end
$$;
comment on function __tenant__._check_id(bigint, text) is 'Internal: PR107 if the id is missing, PR150 unless it is positive.';

create or replace function __tenant__._check_one_of(p_value text, p_what text, p_allowed text[])
returns text
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_value is null then
        perform _fail('PR107', format('%s is required', p_what),
                      format('One of: %s.', array_to_string(p_allowed, ', ')));
    elsif not (p_value = any (p_allowed)) then
        perform _fail('PR107', format('%s %s is not one of %s', p_what, quote_literal(p_value),
                                      array_to_string(p_allowed, ', ')));
    end if;
    return p_value;
end
$$;
comment on function __tenant__._check_one_of(text, text, text[]) is 'Internal: PR107 unless the value is one of the allowed.';

-- Every change that cannot be taken back by its author (forget, a duplicate
-- decision, a retraction, an erasure) records why, in words a person reads
-- later: whitespace alone is no reason.
create or replace function __tenant__._check_reason(p_reason text, p_missing text, p_hint text default null,
                                                    p_max_bytes bigint default null)
returns text
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_reason is null or _trim(p_reason) = '' then
        perform _fail('PR107', p_missing, p_hint);
    end if;
    if p_max_bytes is not null then
        perform _check_text(p_reason, 'reason', p_max_bytes);
    end if;
    return _trim(p_reason);
end
$$;
comment on function __tenant__._check_reason(text, text, text, bigint) is
    'Internal: PR107 (message p_missing) unless a reason has words, PR151 when longer than p_max_bytes; returns it trimmed.';

-- Observation offsets in one scope to observation ids, in the order given.
-- With a principal, a turn it may not see is reported as missing: evidence is
-- cited only by who may read it.
create or replace function __tenant__._observation_ids(p_scope text, p_offsets bigint[],
                                                      p_principal_id bigint default null)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_ids bigint[];
    v_missing bigint;
begin
    select o into v_missing from unnest(p_offsets) o
     where o is null or not exists (select 1 from observation ob where ob.scope = p_scope and ob.log_offset = o
                                       and (p_principal_id is null or _audience_admits(p_principal_id, null, ob.audience)))
     limit 1;
    if found then
        perform _fail('PR109', format('scope %s has no observation at offset %s', quote_literal(p_scope),
                                      coalesce(v_missing::text, 'NULL')),
                      'Evidence is given as log offsets returned by append_observation() in the same scope.');
    end if;
    select array_agg(ob.id order by ob.log_offset) into v_ids
      from observation ob where ob.scope = p_scope and ob.log_offset = any (p_offsets);
    return v_ids;
end
$$;
comment on function __tenant__._observation_ids(text, bigint[], bigint) is
    'Internal: ids of the observations at these offsets of one scope, or PR109 (also for one the principal, if given, may not see).';

-- btrim() only strips spaces; text from people and models ends in newlines and tabs too.
create or replace function __tenant__._trim(p_text text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select btrim(p_text, E' \t\n\r\f\v\u00a0\u2028\u2029\ufeff')
$$;
comment on function __tenant__._trim(text) is 'Internal: the text without leading or trailing whitespace of any kind.';

-- The text fields of a memory written by derive, correct or supersede
-- (remember validates its batch set-wise in _remember_batch).
create or replace function __tenant__._check_memory_fields(p_body text, p_title text, p_confidence double precision)
returns void
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform _check_text(p_body, 'memory body', (_setting_value('max_memory_bytes') #>> '{}')::bigint, 'max_memory_bytes');
    if _trim(p_body) = '' then
        perform _fail('PR107', 'a memory needs a body', 'To remove a memory, forget it.');
    end if;
    if p_title is not null then
        perform _check_text(p_title, 'memory title', 500);
    end if;
    perform _check_confidence(p_confidence);
end
$$;
comment on function __tenant__._check_memory_fields(text, text, double precision) is
    'Internal: PR107/PR151 unless the body is present and fits, the title fits; PR150 unless confidence is storable in [0, 1].';

-- A batch argument: a JSON array whose every element is an object.
create or replace function __tenant__._check_object_array(p_value jsonb, p_what text, p_hint text)
returns void
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_value is null or jsonb_typeof(p_value) <> 'array' then
        perform _fail('PR107', format('%s must be a JSON array of objects', p_what), p_hint);
    end if;
    if exists (select 1 from jsonb_array_elements(p_value) e where jsonb_typeof(e) <> 'object') then
        perform _fail('PR107', format('every one of the %s must be a JSON object', p_what), p_hint);
    end if;
end
$$;
comment on function __tenant__._check_object_array(jsonb, text, text) is
    'Internal: PR107 unless the value is a JSON array of objects (an empty array is a batch of nothing).';

-- A misspelt key in a batch must not pass silently: "audiance" would make a
-- private memory visible to the whole scope.
create or replace function __tenant__._check_keys(p_value jsonb, p_allowed text[], p_what text)
returns void
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_bad record;
begin
    select e.ord, k.key into v_bad
      from jsonb_array_elements(p_value) with ordinality as e(item, ord)
      cross join lateral jsonb_object_keys(e.item) as k(key)
     where not (k.key = any (p_allowed))
     order by e.ord limit 1;
    if v_bad.ord is not null then
        perform _fail('PR107', format('unknown key %s in %s %s', quote_literal(v_bad.key), p_what, v_bad.ord),
                      format('Keys of a %s: %s.', p_what, array_to_string(p_allowed, ', ')));
    end if;
end
$$;
comment on function __tenant__._check_keys(jsonb, text[], text) is
    'Internal: PR107 naming the first key of a batch element that is not allowed.';

-- How many rows a caller asks for: at least one, at most what the operation
-- allows (a recall's walk_depth, a claim's 10000).
create or replace function __tenant__._check_limit(p_limit integer, p_max integer, p_what text default 'limit',
                                                   p_hint text default null)
returns integer
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_limit is null or p_limit < 1 or p_limit > p_max then
        perform _fail('PR150', format('%s must be 1 to %s, not %s', p_what, p_max, coalesce(p_limit::text, 'NULL')),
                      p_hint);
    end if;
    return p_limit;
end
$$;
comment on function __tenant__._check_limit(integer, integer, text, text) is
    'Internal: PR150 unless the limit is from 1 to p_max.';

-- The arguments every queue's claim takes: who claims, and how many at most.
create or replace function __tenant__._check_claim(p_worker text, p_limit integer)
returns void
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_worker is null or _trim(p_worker) = '' then
        perform _fail('PR107', 'a worker name is required');
    end if;
    perform _check_worker(p_worker);
    perform _check_limit(p_limit, 10000, 'claim limit');
end
$$;
comment on function __tenant__._check_claim(text, integer) is 'Internal: PR107 unless a claim names its worker, PR150 unless it asks for 1 to 10000 jobs.';

-- What both embedding queues check before storing a worker's results: one
-- array length, and that the tenant still embeds with this model and input
-- version. False when it has switched meanwhile (the jobs were re-queued,
-- so these results are dropped, not an error). The vectors themselves are
-- checked as they are parsed (_embedding_vectors).
create or replace function __tenant__._embedding_results_usable(
    p_what text, p_ids bigint[], p_generations bigint[], p_embeddings text[], p_model text, p_input_version integer)
returns boolean
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_ids is null or cardinality(p_ids) is distinct from cardinality(p_generations)
       or cardinality(p_ids) is distinct from cardinality(p_embeddings) then
        perform _fail('PR107', format('%s ids, generations and embeddings must be arrays of one length', p_what));
    end if;
    perform _check_length(p_model, 'model name', 200);
    return p_model is not distinct from (_setting_value('embedding_model') #>> '{}')
       and p_input_version is not distinct from (_setting_value('embedding_input_version') #>> '{}')::integer;
end
$$;
comment on function __tenant__._embedding_results_usable(text, bigint[], bigint[], text[], text, integer) is
    'Internal: PR107 unless a worker''s results are arrays of one length; false when the tenant switched model or input version.';

-- How many numbers every vector of the tenant holds: the type of its vector
-- columns (halfvec(384) since migration 0032), named once here for the
-- checks that refuse a vector of another size before pgvector would. A test
-- holds it to the columns' types, and the driver's generated module copies
-- it (python/pgrecall/_catalog.py). Inlined: a constant in every plan.
create or replace function __tenant__._embedding_dimensions()
returns integer
language sql immutable
as $$
    select 384
$$;
comment on function __tenant__._embedding_dimensions() is
    'Internal: the number of dimensions of every vector the tenant stores (its vector columns'' type).';

-- Vector literals as the halfvecs they are stored as, parsed once: the
-- worker's results and a caller's vectors are read here and nowhere else
-- (each parse of 500 literals of 384 numbers is some 20 ms). PR154 for a
-- literal pgvector refuses (not a vector, NaN or infinity, beyond halfvec's
-- range) and for any other count of dimensions than _embedding_dimensions().
-- A NULL element is refused too, unless p_nulls_allowed (remember_many: an
-- item without one).
create or replace function __tenant__._embedding_vectors(p_embeddings text[], p_nulls_allowed boolean default false)
returns __ext__.halfvec[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_vectors __ext__.halfvec[];
    v_bad integer;
begin
    begin
        v_vectors := p_embeddings::__ext__.halfvec[];
    exception when data_exception then
        -- pgvector's own refusals: not a vector literal, NaN or infinity, too many dimensions
        perform _fail('PR154', format('an embedding is not a vector of %s finite numbers: %s',
                                      _embedding_dimensions(), sqlerrm));
    end;
    select min(__ext__.vector_dims(e)) into v_bad
      from unnest(v_vectors) e where __ext__.vector_dims(e) <> _embedding_dimensions();
    if v_bad is not null or (not p_nulls_allowed and array_position(v_vectors, null) is not null) then
        perform _fail('PR154', format('an embedding has %s dimensions, not %s', coalesce(v_bad::text, 'no'),
                                      _embedding_dimensions()));
    end if;
    return v_vectors;
end
$$;
comment on function __tenant__._embedding_vectors(text[], boolean) is
    'Internal: vector literals as halfvecs, parsed once; PR154 unless each is _embedding_dimensions() finite numbers (or NULL, where allowed).';

-- PostgreSQL stores times from 4713 BC to 294276 AD, and infinity; Python's
-- datetime, ISO 8601 and most clients hold years 1 to 9999 only. A time
-- outside those is refused on the way in, so that every stored time can be
-- read back by every client and interval arithmetic on it cannot overflow.
create or replace function __tenant__._time_in_range(p_value timestamptz)
returns boolean
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select p_value is null
           or (p_value >= '0001-01-01 00:00:00+00'::timestamptz and p_value < '10000-01-01 00:00:00+00'::timestamptz)
$$;
comment on function __tenant__._time_in_range(timestamptz) is
    'Internal: true when the time is NULL or finite within years 1 to 9999 (UTC).';

create or replace function __tenant__._check_time(p_value timestamptz, p_what text)
returns timestamptz
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if not _time_in_range(p_value) then
        perform _fail('PR152', format('%s %s is outside years 1 to 9999', p_what, p_value),
                      'Pass a finite time between 0001-01-01 and 9999-12-31 (UTC), or NULL for the default.');
    end if;
    return p_value;
end
$$;
comment on function __tenant__._check_time(timestamptz, text) is
    'Internal: PR152 unless the time is NULL or finite within years 1 to 9999.';

-- Confidence is stored as a real: a double below real's smallest normal
-- value (about 1.2e-38) would underflow on the way in, so it is refused with
-- the other values outside [0, 1] rather than failing as PostgreSQL's 22003.
create or replace function __tenant__._confidence_ok(p_confidence double precision)
returns boolean
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select p_confidence >= 0 and p_confidence <= 1 and (p_confidence = 0 or p_confidence >= 1e-37)
$$;
comment on function __tenant__._confidence_ok(double precision) is
    'Internal: true when the confidence is in [0, 1] and a real can hold it (0, or at least 1e-37).';

create or replace function __tenant__._check_confidence(p_confidence double precision)
returns void
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_confidence is not null and not _confidence_ok(p_confidence) then
        perform _fail('PR150', format('confidence must be between 0 and 1, not %s', p_confidence),
                      'A confidence is 0, or a number from 1e-37 to 1.');
    end if;
end
$$;
comment on function __tenant__._check_confidence(double precision) is
    'Internal: PR150 unless the confidence is NULL or storable in [0, 1].';

-- A JSON number that a caller means as an integer (an offset, a byte span):
-- checked as numeric, so 1e300 or 2^63 is refused as ours, not as 22003.
create or replace function __tenant__._whole_in_range(p_value jsonb, p_min numeric, p_max numeric)
returns boolean
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select jsonb_typeof(p_value) = 'number'
           and (p_value #>> '{}')::numeric between p_min and p_max
           and (p_value #>> '{}')::numeric = trunc((p_value #>> '{}')::numeric)
$$;
comment on function __tenant__._whole_in_range(jsonb, numeric, numeric) is
    'Internal: true when the JSON value is a whole number from p_min to p_max.';
