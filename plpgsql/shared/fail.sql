-- Raising pgrecall's errors: a PR-class SQLSTATE whose message names the offending value (the codes,
-- with what each means, are in sql/errors.sql: pgrecall.error_code).

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
