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
            message = format('setting %s is not defined for this tenant', quote_literal(_clip(p_key, 100))),
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
    'This tenant''s settings (the design''s constants); the admin role changes them with set_setting().';

-- Changing a setting changes every principal's results, so it is the admin
-- duty's. pgrecall.set_tenant_setting() (the installer's) calls this one.
create or replace function __tenant__.set_setting(p_key text, p_value jsonb)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_old jsonb;
begin
    -- bounded first: an unknown key is quoted in the message (and so in the server log)
    perform _check_length(p_key, 'setting key', 100);
    perform _check_json_size(p_value, 'setting value', 4096);
    select s.value into v_old from setting s where s.key = p_key for update;
    if v_old is null then
        raise exception using errcode = 'PR006',
            message = format('this tenant has no setting %s', coalesce(quote_literal(p_key), 'NULL')),
            hint = 'settings() lists the settings.';
    end if;
    if p_key in ('embedding_model', 'embedding_input_version') then
        raise exception using errcode = 'PR006',
            message = format('setting %s is changed together with a re-embedding, not alone', quote_literal(p_key)),
            hint = 'Call set_embedding_version(model, input_version), or run: pgrecall embeddings rebuild --model ... --input-version ...';
    end if;
    if p_value is null or jsonb_typeof(p_value) <> jsonb_typeof(v_old) then
        raise exception using errcode = 'PR006',
            message = format('setting %s takes a %s value, not %s', quote_literal(p_key), jsonb_typeof(v_old),
                             coalesce(left(p_value::text, 100), 'NULL')),
            hint = 'Pass a JSON value of the same type as the current one.';
    end if;
    begin
        update setting s set value = p_value where s.key = p_key;
    exception when check_violation then
        raise exception using errcode = 'PR006',
            message = format('value %s is out of range for setting %s', left(p_value::text, 100), quote_literal(p_key)),
            hint = 'See the setting''s description in settings().';
    end;
    if p_key = 'passage_embedding' then
        -- The scopes that follow the tenant's value: queue or drop their passages' jobs to match.
        perform _requeue_passages(array(select s.name from scope s where s.passage_embedding is null));
    end if;
    return p_value;
end
$$;
comment on function __tenant__.set_setting(text, jsonb) is
    'Sets one setting; the value must have the JSON type of the current one and pass its range check (admin duty).';

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

-- The plan_cache_mode a writer or recall sets while its statements run:
-- force_generic_plan plans them once per session (re-planning cost ~1 ms a
-- recall, ~15-20% of a remember or a fact), except on a Citus node, whose
-- planner needs each statement's parameter values to route it to the shard
-- ("could not create distributed plan" for a generic plan of an INSERT ...
-- SELECT): there the mode stays as it is.
create or replace function __tenant__._plan_cache_mode()
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if current_setting('citus.version', true) is null then
        return 'force_generic_plan';
    end if;
    return current_setting('plan_cache_mode');
end
$$;
comment on function __tenant__._plan_cache_mode() is
    'Internal: force_generic_plan on one server; the session''s own plan_cache_mode on a Citus node (which routes by parameter values).';

-- Its argument, from a function declared volatile: an INSERT that passes a value through it is one Citus keeps
-- no local plan for. On a Citus node, from the second execution of a PL/pgSQL INSERT whose plan is kept
-- (plan_cache_mode auto keeps it from the sixth), Citus 14.0.1 plans the shard's INSERT again at every
-- execution and keeps every copy in the kept plan's memory until the session ends (its lookup of the copy
-- kept misses for an INSERT: citusdata/citus#8824, fixed after 14.0.1): ~135 KB a remember on the tenant's
-- worker, in a session of the coordinator's that lives as long as the client's, and ~50 us an INSERT more
-- than one Citus keeps no plan for (a volatile function in it), which is parsed and planned again but copies
-- nothing. On one server it is one function call (~2 us). Every single-row INSERT ... VALUES of a tenant
-- function needs it unless one of its values already comes from a volatile function (a sequence's default,
-- clock_timestamp()): such an INSERT is planned anew each time too, so it keeps nothing. UPDATEs, DELETEs
-- and INSERT ... SELECT are not kept this way (bench/results/citus-write-paths-20261207.md).
create or replace function __tenant__._unkept_on_citus(p_value anyelement)
returns anyelement
language plpgsql volatile
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return p_value;
end
$$;
comment on function __tenant__._unkept_on_citus(anyelement) is
    'Internal: its argument, volatile so that Citus keeps no local plan of an INSERT that passes a value through it (a plan kept there grows at each execution).';
