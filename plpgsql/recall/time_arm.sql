-- Time in the question (setting recall_question_time, migration 0034;
-- plpgsql/recall/recall.sql composes the steps). A question that names when
-- ("in May 2023", "on 3 June, 2023", "last week", "two years ago") is
-- answered first by what was said then: of the candidates the lexical and
-- dense lists chose, those whose time falls within the named period are a
-- list of their own, fused with the other two by RRF (it chooses the rows),
-- and under fusion rrf_scores each of them adds what an arm's first adds to
-- the evidence that orders the rows (1: every memory of the period is
-- equally "in it", so each scores as a list's best would).
--   _utc_days          a range of whole UTC days
--   _question_day      the day or month a question names by its calendar date
--   _question_relative the period a relative expression names, from the clock
--   _question_period   the period a question names, NULL when it names none
--   _time_arm          of the candidates, in order, the eligible ones said (or
--                      valid from) within the question's period
--   _ordering_evidence what orders RRF's rows under rrf_scores (_evidence_scores),
--                      with the period's memories raised

create or replace function __tenant__._utc_days(p_from date, p_to date)
returns tstzrange
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select tstzrange(p_from::timestamp at time zone 'UTC', p_to::timestamp at time zone 'UTC')
$$;
comment on function __tenant__._utc_days(date, date) is
    'Internal: the time from the start of day p_from to the start of day p_to (exclusive), in UTC.';

-- Calendar dates: "13 October, 2023", "13th of October 2023", "October 13,
-- 2023" name a day; "October 2023" a month; "in 2023" a year (a bare number
-- of four digits is as often a count as a year, so a year needs its
-- preposition). A day that does not exist (31 February) names its month.
-- Years outside 1 to 9999 name nothing (PostgreSQL has no year 0).
create or replace function __tenant__._question_day(p_q text)
returns tstzrange
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    c_months constant text[] := array['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august',
                                      'september', 'october', 'november', 'december'];
    c_month constant text := '(' || array_to_string(c_months, '|') || ')';
    m text[];
    v_year integer;
    v_month integer;
    v_day integer;
    v_first date;
begin
    m := regexp_match(p_q, E'\\m(\\d{1,2})(?:st|nd|rd|th)?(?: of)? ' || c_month || E',? (\\d{4})\\M');
    if m is not null then
        v_day := m[1]::integer; v_month := array_position(c_months, m[2]); v_year := m[3]::integer;
    else
        m := regexp_match(p_q, E'\\m' || c_month || E' (\\d{1,2})(?:st|nd|rd|th)?,? (\\d{4})\\M');
        if m is not null then
            v_day := m[2]::integer; v_month := array_position(c_months, m[1]); v_year := m[3]::integer;
        else
            m := regexp_match(p_q, E'\\m' || c_month || E',? (?:of )?(\\d{4})\\M');
            if m is not null then
                v_month := array_position(c_months, m[1]); v_year := m[2]::integer;
            end if;
        end if;
    end if;
    if v_month is not null and v_year between 1 and 9999 then
        v_first := make_date(v_year, v_month, 1);
        if v_day between 1 and extract(day from v_first + interval '1 month' - interval '1 day') then
            return _utc_days(v_first + v_day - 1, v_first + v_day);
        end if;
        return _utc_days(v_first, (v_first + interval '1 month')::date);
    end if;
    m := regexp_match(p_q, E'\\m(?:in|during|of|from|since|for|throughout) (\\d{4})\\M');
    if m is not null and m[1]::integer between 1 and 9999 then
        v_first := make_date(m[1]::integer, 1, 1);
        return _utc_days(v_first, (v_first + interval '1 year')::date);
    end if;
    return null;
end
$$;
comment on function __tenant__._question_day(text) is
    'Internal: the UTC day, month or year a lower-cased question names by its calendar date; NULL when none.';

-- Relative expressions, counted from p_today (the clock's UTC day): today,
-- yesterday; this or last week (Monday to Sunday), weekend, month or year;
-- "N days/weeks/months/years ago" (the whole day, week, month or year that
-- holds the day N units back); "last Saturday" (the latest Saturday before
-- today); a month named alone ("in June": the latest June that has begun;
-- "last June": the latest before this month).
create or replace function __tenant__._question_relative(p_q text, p_today date)
returns tstzrange
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    c_months constant text[] := array['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august',
                                      'september', 'october', 'november', 'december'];
    c_weekdays constant text[] := array['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'];
    c_numbers constant text[] := array['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten',
                                       'eleven', 'twelve'];
    v_week date := date_trunc('week', p_today)::date;     -- this week's Monday
    v_month date := date_trunc('month', p_today)::date;
    v_year date := date_trunc('year', p_today)::date;
    v_n integer;
    v_back date;
    m text[];
begin
    if p_q ~ E'\\myesterday\\M' then
        return _utc_days(p_today - 1, p_today);
    elsif p_q ~ E'\\m(today|tonight|this morning|this evening)\\M' then
        return _utc_days(p_today, p_today + 1);
    end if;
    m := regexp_match(p_q, E'\\m(last|this|past) (week|weekend|month|year)\\M');
    if m is not null then
        v_n := case when m[1] = 'this' then 0 else 1 end;
        return case m[2]
            when 'week' then _utc_days(v_week - 7 * v_n, v_week - 7 * v_n + 7)
            when 'weekend' then _utc_days(v_week - 7 * v_n + 5, v_week - 7 * v_n + 7)
            when 'month' then _utc_days((v_month - make_interval(months => v_n))::date,
                                        (v_month - make_interval(months => v_n - 1))::date)
            else _utc_days((v_year - make_interval(years => v_n))::date, (v_year - make_interval(years => v_n - 1))::date)
        end;
    end if;
    m := regexp_match(p_q, E'\\m(\\d{1,3}|an?|' || array_to_string(c_numbers, '|') || E') (day|week|month|year)s? ago\\M');
    if m is not null then
        v_n := coalesce(array_position(c_numbers, m[1]), case when m[1] ~ E'^\\d+$' then m[1]::integer else 1 end);
        v_back := (p_today - make_interval(days => case m[2] when 'day' then v_n when 'week' then 7 * v_n else 0 end,
                                           months => case when m[2] = 'month' then v_n else 0 end,
                                           years => case when m[2] = 'year' then v_n else 0 end))::date;
        return case m[2]
            when 'day' then _utc_days(v_back, v_back + 1)
            when 'week' then _utc_days(date_trunc('week', v_back)::date, date_trunc('week', v_back)::date + 7)
            when 'month' then _utc_days(date_trunc('month', v_back)::date,
                                        (date_trunc('month', v_back) + interval '1 month')::date)
            else _utc_days(date_trunc('year', v_back)::date, (date_trunc('year', v_back) + interval '1 year')::date)
        end;
    end if;
    m := regexp_match(p_q, E'\\mlast (' || array_to_string(c_weekdays, '|') || E')\\M');
    if m is not null then
        v_n := (extract(isodow from p_today)::integer - array_position(c_weekdays, m[1]) + 6) % 7 + 1;
        return _utc_days(p_today - v_n, p_today - v_n + 1);
    end if;
    m := regexp_match(p_q, E'\\m(in|during|last|this|early|late|mid|since|until|by|of) ('
                           || array_to_string(c_months, '|') || E')\\M');
    if m is not null then
        v_n := (extract(month from p_today)::integer - array_position(c_months, m[2]) + 12) % 12;
        if m[1] = 'last' and v_n = 0 then
            v_n := 12;
        end if;
        return _utc_days((v_month - make_interval(months => v_n))::date,
                         (v_month - make_interval(months => v_n - 1))::date);
    end if;
    return null;
end
$$;
comment on function __tenant__._question_relative(text, date) is
    'Internal: the UTC period a lower-cased question names relative to the day p_today (last week, two years ago, in June...); NULL when none.';

-- The period a question names: a calendar date first (it says exactly
-- when), else a relative expression counted from p_clock, the recall's
-- clock (its p_at, or now()). Days are UTC days: the tenant keeps no time
-- zone. NULL when the question names no time (or is NULL).
create or replace function __tenant__._question_period(p_query text, p_clock timestamptz)
returns tstzrange
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_q text;
begin
    if p_clock is null then
        perform _fail('PR107', 'the clock (the time a relative expression such as "last week" counts from) is required',
                      'Pass the recall''s p_at, or now().');
    end if;
    perform _check_time(p_clock, 'the clock');
    perform _check_length(p_query, 'query', 10000);
    if p_query is null then
        return null;
    end if;
    v_q := regexp_replace(lower(p_query), '[[:space:]]+', ' ', 'g');
    -- Most questions name no time: one test spares them every form's. Each
    -- form has a digit, a month's name or one of these words.
    if v_q !~ (E'[0-9]|\\m(yesterday|today|tonight|this|last|past|ago|january|february|march|april|may|june|july'
               || E'|august|september|october|november|december)\\M') then
        return null;
    end if;
    return coalesce(_question_day(v_q), _question_relative(v_q, (p_clock at time zone 'UTC')::date));
end
$$;
comment on function __tenant__._question_period(text, timestamptz) is
    'Internal: the UTC period (a day, week, month or year) a question names by date or relative to p_clock; NULL when none.';

-- The list: of the candidates (the fused list, in its order), the eligible
-- ones said within the period (an observation they are derived from occurred
-- in it) or valid from within it. Reading only the candidates bounds the cost
-- by walk_depth primary-key probes, and each is checked against the one
-- eligibility rule again.
create or replace function __tenant__._time_arm(
    p_candidates bigint[], p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean,
    p_at timestamptz, p_query text)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_period tstzrange := _question_period(p_query, coalesce(p_at, now()));
    v_result bigint[];
begin
    if v_period is null or coalesce(cardinality(p_candidates), 0) = 0 then
        return '{}';
    end if;
    select coalesce(array_agg(c.id order by c.ord), '{}') into v_result
      from unnest(p_candidates) with ordinality as c(id, ord)
      join memory m on m.id = c.id
     where _memory_eligible(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                            p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
       and (lower(m.valid) <@ v_period
            or exists (select 1 from memory_link l join observation o on o.id = l.target_observation_id
                        where l.memory_id = c.id and l.link_type = 'derived_from' and o.occurred_at <@ v_period));
    return v_result;
end
$$;
comment on function __tenant__._time_arm(bigint[], bigint, text[], text, boolean, timestamptz, text) is
    'Internal: recall''s time list: of the candidates, in order, the eligible ones said (or valid from) within the period the query names.';
