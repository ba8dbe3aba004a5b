-- Argument checks shared by every operation: sizes of texts and documents, ids, limits, times,
-- confidences. Each failure raises a PR-class SQLSTATE (fail.sql) naming the value.

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

-- btrim() only strips spaces; text from people and models ends in newlines and tabs too.
-- Inlined by the planner into its callers' queries (tests/test_sources.py INLINED_HELPERS), hence
-- neither definer nor a pinned path, and pg_catalog named: append and remember call it 18 times an item
-- (and _is_only_questions 5), and as a definer each call cost 0.9 us more (its search_path set and reset),
-- about 10 ms a 500-item batch of the two (issue #46).
create or replace function __tenant__._trim(p_text text)
returns text
language sql immutable
as $$
    select pg_catalog.btrim(p_text, E' \t\n\r\f\v\u00a0\u2028\u2029\ufeff')
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

-- The keys a batch element may have: the attributes of its declared input
-- type (memory_item, observation_row: migration 0047), in their order.
create or replace function __tenant__._input_keys(p_type regtype)
returns text[]
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select array_agg(a.attname::text order by a.attnum)
      from pg_attribute a join pg_type t on t.typrelid = a.attrelid
     where t.oid = p_type and a.attnum > 0 and not a.attisdropped
$$;
comment on function __tenant__._input_keys(regtype) is
    'Internal: the keys a batch element of a declared input type may have (its attributes, in order).';

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

-- The values of a batch's elements have the JSON shape their keys take: a
-- single value (string, number, boolean, null), or for p_array_keys an array
-- of single values; p_free_keys (a payload) take any JSON. jsonb's own
-- conversion would store a nested object's JSON text as a memory's body or
-- title, or an entity's name, and read a nested array as a two-dimensional
-- array of purposes or offsets.
create or replace function __tenant__._check_single_values(p_value jsonb, p_array_keys text[], p_what text,
                                                          p_free_keys text[] default '{}')
returns void
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_bad record;
begin
    select e.ord, k.key, jsonb_typeof(k.value) as type, k.key = any (p_array_keys) as is_array into v_bad
      from jsonb_array_elements(p_value) with ordinality as e(item, ord)
      cross join lateral jsonb_each(e.item) as k(key, value)
     where not (k.key = any (p_free_keys))
       and case when k.key = any (p_array_keys)
                then jsonb_typeof(k.value) not in ('array', 'null')
                     or exists (select 1 from jsonb_array_elements(case jsonb_typeof(k.value) when 'array'
                                                                        then k.value else '[]' end) as x(v)
                                 where jsonb_typeof(x.v) in ('object', 'array'))
                else jsonb_typeof(k.value) in ('object', 'array') end
     order by e.ord limit 1;
    if v_bad.ord is not null then
        perform _fail('PR107', format('%s of %s %s is %s', quote_literal(v_bad.key), p_what, v_bad.ord,
                                      case when not v_bad.is_array
                                           then format('a JSON %s, where a single value is expected', v_bad.type)
                                           when v_bad.type = 'array'
                                           then 'an array holding an object or an array, where its elements are single values'
                                           else format('a JSON %s, where an array is expected', v_bad.type) end),
                      format('In a %s, %s take an array of strings or numbers%s; every other key one string, '
                             'number or boolean.', p_what, array_to_string(p_array_keys, ', '),
                             coalesce(', ' || nullif(array_to_string(p_free_keys, ', '), '') || ' any JSON', '')));
    end if;
end
$$;
comment on function __tenant__._check_single_values(jsonb, text[], text, text[]) is
    'Internal: PR107 naming the first key of a batch element whose value is not of the JSON shape it takes (a single value, or an array of them).';
