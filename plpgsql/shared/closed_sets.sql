-- The closed sets of words (purposes, kinds, roles...): the catalog defines each once, every check
-- reads it from here, and the driver reads the same list (python/pgrecall/vocabulary.py).

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
