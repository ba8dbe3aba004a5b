-- Reading per-tenant settings from inside the tenant's functions.

-- Returns the setting's value; a missing key is a bug in pgrecall, not user
-- input, so it raises rather than returning a default that hides the bug.
create or replace function __tenant__._setting_value(p_key text)
returns jsonb
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_value jsonb;
begin
    select s.value into v_value from setting s where s.key = p_key;
    if v_value is null then
        raise exception using errcode = 'PR006',
            message = format('setting %s is not defined for this tenant', quote_literal(p_key)),
            hint = 'Apply pending migrations with pgrecall.upgrade_tenant().';
    end if;
    return v_value;
end
$$;
comment on function __tenant__._setting_value(text) is 'Internal: one per-tenant setting as jsonb. (Not named _setting: that is the array type of table setting.)';

-- Lets an application see the constants its tenant runs with, without
-- giving it SELECT on the table.
create or replace function __tenant__.settings()
returns table (key text, value jsonb, description text)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select s.key, s.value, s.description from setting s order by s.key
$$;
comment on function __tenant__.settings() is
    'This tenant''s settings (the design''s constants); change them with pgrecall.set_tenant_setting().';

-- Every setting in one jsonb object: a hot path (recall) reads them once
-- instead of once per key.
create or replace function __tenant__._settings()
returns jsonb
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select jsonb_object_agg(s.key, s.value) from setting s
$$;
comment on function __tenant__._settings() is 'Internal: all per-tenant settings as one jsonb object.';
