-- pgrecall control plane: installed once per database, re-runnable.
--
-- It holds the tenant registry, the SQL sources a tenant is built from, and
-- the functions that create, upgrade, list and drop tenants. Every function
-- here runs with the caller's rights (SECURITY INVOKER): installing tenants
-- needs CREATEROLE and CREATE on the database, and this file grants nothing
-- that the caller does not already hold.
--
-- Errors use SQLSTATE class PR (pgrecall); every code, here and in the
-- tenant functions, is listed once, in sql/errors.sql (pgrecall.error_code).
--
-- Roles of a tenant t (all NOSUPERUSER, NOINHERIT, no table privileges):
--   pgrecall_t_owner   NOLOGIN: owns the schema and every object in it
--   pgrecall_t_app     LOGIN: the agent's operations (duty app)
--   pgrecall_t_worker  LOGIN: claims and completes queued work (duty worker)
--   pgrecall_t_admin   LOGIN: erasure, expiry, rebuilds, settings, merges (duty admin)
-- The three login roles may only EXECUTE the functions that
-- pgrecall.function_duty gives their duty; see sql/duties.sql.

do $prereq$
declare
    v_missing text[] := '{}';
    v_vector text;
begin
    if current_setting('server_version_num')::int < 150000 then
        raise exception using errcode = 'PR005',
            message = format('pgrecall needs PostgreSQL 15 or newer; this server is %s',
                             current_setting('server_version')),
            hint = 'Use the embedded server (unset PGRECALL_DSN) or upgrade PostgreSQL.';
    end if;
    -- Peer names are stored in Unicode NFC, and normalize() works in UTF8 only.
    if getdatabaseencoding() <> 'UTF8' then
        raise exception using errcode = 'PR005',
            message = format('pgrecall needs a UTF8 database; %s is %s', current_database(), getdatabaseencoding()),
            hint = 'Create the database with ENCODING ''UTF8'' (e.g. createdb -E UTF8 -T template0 ...).';
    end if;
    if not exists (select 1 from pg_available_extensions where name = 'vector') then
        v_missing := v_missing || 'pgvector (extension "vector") >= 0.8'::text;
    else
        select coalesce(installed_version, default_version) into v_vector
          from pg_available_extensions where name = 'vector';
        if string_to_array(split_part(v_vector, '-', 1), '.')::int[] < array[0, 8] then
            v_missing := v_missing || format('pgvector >= 0.8 (found %s)', v_vector);
        end if;
    end if;
    if not exists (select 1 from pg_available_extensions where name = 'btree_gist') then
        v_missing := v_missing || 'btree_gist (PostgreSQL contrib)'::text;
    end if;
    if cardinality(v_missing) > 0 then
        raise exception using errcode = 'PR005',
            message = format('pgrecall cannot be installed: missing %s', array_to_string(v_missing, ', ')),
            hint = 'Install pgvector 0.8 or newer (https://github.com/pgvector/pgvector#installation) '
                   'and the PostgreSQL contrib package that provides btree_gist, '
                   'or use the embedded server by leaving PGRECALL_DSN unset.';
    end if;
end
$prereq$;

create extension if not exists vector;
create extension if not exists btree_gist;

create schema if not exists pgrecall;
revoke all on schema pgrecall from public;
comment on schema pgrecall is 'pgrecall control plane: tenant registry, SQL sources, install functions';

create table if not exists pgrecall.tenant (
    name        text primary key,
    owner_role  name not null unique,
    app_role    name not null unique,
    created_at  timestamptz not null default now(),
    created_by  name not null default current_user
);
-- Added with the duty split; upgrade_tenant fills them for older tenants.
alter table pgrecall.tenant add column if not exists worker_role name unique;
alter table pgrecall.tenant add column if not exists admin_role name unique;
comment on table pgrecall.tenant is
    'One row per tenant. A tenant is a schema of the same name, owned by owner_role; app_role, worker_role and admin_role may only EXECUTE the functions of their duty.';

-- Which login role may EXECUTE which tenant function: one row per public
-- function name (overloads share it), loaded from sql/duties.sql by every
-- install. upgrade_tenant grants from this table alone, and refuses to
-- finish while a public function of the tenant has no row here.
create table if not exists pgrecall.function_duty (
    function_name  text primary key check (function_name ~ '^[a-z][a-z0-9_]*$'),
    duties         text[] not null
                   check (cardinality(duties) > 0 and duties <@ array['app', 'worker', 'admin']),
    why            text not null check (why <> '')
);
comment on table pgrecall.function_duty is
    'The duty matrix: the login roles (app, worker, admin) that may EXECUTE each public tenant function. Source: sql/duties.sql.';

-- Every SQLSTATE pgrecall raises on purpose (and the PostgreSQL ones its
-- driver maps), loaded from sql/errors.sql by every install: a client in any
-- language reads what a code means, and which Python class stands for it,
-- from here. tests/test_error_codes.py holds the SQL sources, the Python
-- classes and docs/reference.md to this one list.
create table if not exists pgrecall.error_code (
    code          text primary key check (code ~ '^[0-9A-Z]{5}$'),
    name          text not null unique check (name ~ '^[a-z][a-z0-9_]*$'),
    meaning       text not null check (meaning <> ''),
    python_class  text not null unique check (python_class ~ '^[A-Z][A-Za-z]*$'),
    builtin       text check (builtin in ('ValueError', 'LookupError', 'PermissionError', 'RuntimeError')),
    refines       text references pgrecall.error_code (code)
);
-- Added after the table was released: an older control plane gains it here.
alter table pgrecall.error_code add column if not exists explanation text check (explanation <> '');
comment on table pgrecall.error_code is
    'Every SQLSTATE pgrecall raises on purpose: its name, meaning, the Python exception class (and the built-in it also is), the broader code it refines, and what the class''s docstring explains. Source: sql/errors.sql; python/pgrecall/errors.py''s classes are generated from it.';

-- The SQL a tenant is built from, loaded by the installer (Python or the psql
-- script) so that tenants can be created and upgraded from SQL alone.
create table if not exists pgrecall.source (
    kind     text not null check (kind in ('migration', 'function')),
    name     text not null,
    version  integer,
    sha256   text not null check (sha256 ~ '^[0-9a-f]{64}$'),
    body     text not null,
    primary key (kind, name),
    check ((kind = 'migration') = (version is not null))
);
create unique index if not exists source_migration_version
    on pgrecall.source (version) where kind = 'migration';
-- Added after the table was released. A function file's place in plpgsql/install_order: files are applied
-- in that order, not by name.
alter table pgrecall.source add column if not exists apply_order integer check (apply_order > 0);
comment on table pgrecall.source is
    'Migration and function files as shipped; __tenant__ and __ext__ are replaced at apply time.';


-- Returns NULL when p_name may name a tenant, otherwise the rule it breaks.
-- The tenant-name rule, as data: each row one check, in order, and what a
-- name that fails it is told. pgrecall.tenant_name_problem() applies it here;
-- the driver's generated copy (python/pgrecall/_catalog.py, make driver)
-- applies it in Python before any SQL is composed with a name. Kinds:
-- nonempty; max_length (characters and bytes); pattern (an ASCII regular
-- expression the whole name matches); not_prefix; not_one_of (names split by
-- spaces); not_keyword (pg_get_keywords() of those catcodes). In a problem,
-- %s is the name.
create or replace function pgrecall.tenant_name_rules()
returns table (ord integer, kind text, argument text, problem text)
language sql immutable
set search_path = pg_catalog
as $$
    values (1, 'nonempty', null, 'a tenant name must not be empty'),
           -- 47: the longest role name built from it, pgrecall_<name>_worker,
           -- must fit PostgreSQL's 63-byte identifiers.
           (2, 'max_length', '47', 'a tenant name has at most 47 characters'),
           (3, 'pattern', '^[a-z][a-z0-9_]*$',
            'a tenant name starts with a lowercase ASCII letter and holds only lowercase ASCII letters, digits and underscores'),
           (4, 'not_prefix', 'pg_', 'names beginning with pg_ are reserved for PostgreSQL'),
           (5, 'not_prefix', 'pgrecall', 'names beginning with pgrecall are reserved for pgrecall itself'),
           (6, 'not_one_of', 'public information_schema extensions', '%s is a reserved schema name'),
           (7, 'not_keyword', 'R T', '%s is a reserved SQL keyword')
$$;
comment on function pgrecall.tenant_name_rules() is
    'The checks a tenant name must pass, in order, each with what a name that fails it is told.';

create or replace function pgrecall.tenant_name_hint()
returns text
language sql immutable
set search_path = pg_catalog
as $$
    select 'Use 1 to 47 characters: a lowercase letter, then lowercase letters, digits or underscores.'::text
$$;
comment on function pgrecall.tenant_name_hint() is 'What to do about a name tenant_name_rules() refuses.';

create or replace function pgrecall.tenant_name_problem(p_name text)
returns text
language plpgsql immutable
set search_path = pg_catalog
as $$
declare
    r record;
    v_fails boolean;
begin
    for r in select * from pgrecall.tenant_name_rules() order by ord loop
        v_fails := case r.kind
            when 'nonempty' then coalesce(p_name, '') = ''
            when 'max_length' then char_length(p_name) > r.argument::integer or octet_length(p_name) > r.argument::integer
            when 'pattern' then octet_length(p_name) <> char_length(p_name) or p_name !~ r.argument
            -- left(), not LIKE: a prefix holding _ or % means itself
            when 'not_prefix' then left(p_name, char_length(r.argument)) = r.argument
            when 'not_one_of' then p_name = any (string_to_array(r.argument, ' '))
            when 'not_keyword' then exists (select 1 from pg_get_keywords() k
                                             where k.word = p_name and k.catcode = any (string_to_array(r.argument, ' ')))
        end;
        if v_fails is null then
            raise exception 'tenant_name_rules() names an unknown kind of check: %', r.kind;
        elsif v_fails then
            return format(r.problem, p_name);
        end if;
    end loop;
    return null;
end
$$;
comment on function pgrecall.tenant_name_problem(text) is
    'NULL if the text may name a tenant, else the rule it breaks (tenant_name_rules(), in order).';

create or replace function pgrecall.check_tenant_name(p_name text)
returns text
language plpgsql immutable
set search_path = pg_catalog
as $$
declare
    v_problem text := pgrecall.tenant_name_problem(p_name);
begin
    if v_problem is not null then
        raise exception using errcode = 'PR001',
            -- a name's start names it well enough, and a caller chose its size (this reaches the server log)
            message = format('invalid tenant name %s: %s',
                             coalesce(quote_literal(left(p_name, 100)) || case when length(p_name) > 100
                                      then format(' (%s characters in all)', length(p_name)) else '' end, 'NULL'),
                             v_problem),
            hint = pgrecall.tenant_name_hint();
    end if;
    return p_name;
end
$$;
comment on function pgrecall.check_tenant_name(text) is
    'Raises PR001 naming the broken rule unless the text may name a tenant.';

create or replace function pgrecall._extension_schema(p_extension text)
returns text
language sql stable
set search_path = pg_catalog
as $$
    select n.nspname::text
      from pg_extension e join pg_namespace n on n.oid = e.extnamespace
     where e.extname = p_extension
$$;

-- Substitutes the placeholders of a shipped file for one tenant, in one pass:
-- the file is cut at __tenant__ and __ext__ is replaced inside the pieces only,
-- so a placeholder inside a substituted name (tenant a__ext__) stays text.
create or replace function pgrecall._render(p_body text, p_tenant text)
returns text
language sql stable
set search_path = pg_catalog
as $$
    select coalesce(string_agg(replace(piece, '__ext__', quote_ident(pgrecall._extension_schema('vector'))),
                               quote_ident(pgrecall.check_tenant_name(p_tenant)) order by n), '')
      from unnest(string_to_array(p_body, '__tenant__')) with ordinality as cut(piece, n)
$$;

create or replace function pgrecall._lock_tenant(p_tenant text)
returns void
language sql
set search_path = pg_catalog
as $$
    -- One installer at a time per database (Python and psql alike). A table
    -- lock rather than an advisory key: any role can take any advisory key,
    -- but only a role with rights on pgrecall.tenant can lock it, so a
    -- tenant's login role cannot hold up another tenant's install.
    lock table pgrecall.tenant in share row exclusive mode;
$$;

-- The statements of an SQL script, each without its semicolon: cut at the semicolons that are
-- outside quotes ('...', E'...', "...", dollar quotes) and comments; pieces that hold no code
-- (blank, or comments only) are left out. For Citus: it sends an ALTER TABLE of a distributed
-- table to the shards as the text it was given, the whole script when the script is one string
-- ("cannot insert multiple commands into a prepared statement" on the worker).
create or replace function pgrecall._statements(p_sql text)
returns text[]
language plpgsql immutable
set search_path = pg_catalog
set standard_conforming_strings = on  -- its own body spells a backslash as '\'
as $$
declare
    c text[] := coalesce(string_to_array(p_sql, null), '{}');
    n integer := cardinality(c);
    i integer := 1;
    j integer;
    v_start integer := 1;
    v_code boolean := false;  -- the current piece holds something besides blanks and comments
    v_tag text;
    v_len integer;
    v_out text[] := '{}';
begin
    while i <= n loop
        if c[i] = '-' and i < n and c[i + 1] = '-' then
            while i <= n and c[i] <> E'\n' loop i := i + 1; end loop;
        elsif c[i] = '/' and i < n and c[i + 1] = '*' then
            i := i + 2;
            while i < n and not (c[i] = '*' and c[i + 1] = '/') loop i := i + 1; end loop;
            i := i + 2;
        elsif c[i] = '''' then
            v_code := true;
            -- E'...' (not the end of an identifier such as name'...'): a backslash escapes
            if i > 1 and c[i - 1] in ('E', 'e') and (i = 2 or c[i - 2] !~ '[A-Za-z0-9_$]') then
                i := i + 1;
                while i <= n and not (c[i] = '''' and (i = n or c[i + 1] <> '''')) loop
                    i := i + case when c[i] = '\' or (c[i] = '''' and c[i + 1] = '''') then 2 else 1 end;
                end loop;
            else
                i := i + 1;
                while i <= n and not (c[i] = '''' and (i = n or c[i + 1] <> '''')) loop
                    i := i + case when c[i] = '''' then 2 else 1 end;
                end loop;
            end if;
            i := i + 1;
        elsif c[i] = '"' then
            v_code := true;
            i := i + 1;
            while i <= n and c[i] <> '"' loop i := i + 1; end loop;
            i := i + 1;
        elsif c[i] = '$' and (i = 1 or c[i - 1] !~ '[A-Za-z0-9_]') then
            v_code := true;
            j := i + 1;
            while j <= n and c[j] ~ '[A-Za-z0-9_]' loop j := j + 1; end loop;
            if j <= n and c[j] = '$' and (j = i + 1 or c[i + 1] !~ '[0-9]') then
                v_tag := array_to_string(c[i:j], '');
                v_len := j - i + 1;
                i := j + 1;
                while i <= n and not (c[i] = '$' and array_to_string(c[i:i + v_len - 1], '') = v_tag) loop
                    i := i + 1;
                end loop;
                i := i + v_len;
            else
                i := j;  -- $1, a positional parameter
            end if;
        elsif c[i] = ';' then
            if v_code then
                v_out := v_out || array_to_string(c[v_start:i - 1], '');
            end if;
            v_start := i + 1;
            v_code := false;
            i := i + 1;
        else
            if c[i] !~ '\s' then
                v_code := true;
            end if;
            i := i + 1;
        end if;
    end loop;
    if v_code then
        v_out := v_out || array_to_string(c[v_start:n], '');
    end if;
    return v_out;
end
$$;
comment on function pgrecall._statements(text) is
    'Internal: an SQL script cut into its statements (at semicolons outside quotes and comments).';

-- Whether the tenant's schema is a distributed schema of Citus (false without Citus).
create or replace function pgrecall._distributed(p_tenant text)
returns boolean
language plpgsql stable
set search_path = pg_catalog
as $$
declare
    v_found boolean := false;
begin
    if to_regclass('pg_catalog.pg_dist_schema') is not null then
        execute 'select exists (select 1 from pg_catalog.pg_dist_schema where schemaid = to_regnamespace($1))'
           into v_found using p_tenant;
    end if;
    return v_found;
end
$$;
comment on function pgrecall._distributed(text) is
    'Internal: whether tenant p_tenant is a distributed schema of Citus (false on a server without Citus).';

-- Runs p_sql as role p_role, then restores the caller's role and path.
create or replace function pgrecall._execute_as(p_role name, p_sql text, p_tenant text)
returns void
language plpgsql
set search_path = pg_catalog
-- The shipped files are written for standard strings ('\s+' is a regex class):
-- they must parse the same in a session that turned them off.
set standard_conforming_strings = on
as $$
declare
    v_role text := current_setting('role');
    v_path text := current_setting('search_path');
    -- Only the extensions' schemas: an unqualified table name in a migration
    -- fails here instead of landing in the wrong schema. Computed before the
    -- role switch, since the owner role cannot see the pgrecall schema.
    v_ext_path text := concat_ws(', ', quote_ident(pgrecall._extension_schema('vector')),
                                 quote_ident(pgrecall._extension_schema('btree_gist')), 'pg_catalog');
    v_statement text;
    -- a tenant that is a distributed schema of Citus: its scripts run a statement at a time
    -- (pgrecall._statements says why); cut before the role switch, as above
    v_statements text[] := case when pgrecall._distributed(p_tenant) then pgrecall._statements(p_sql) end;
begin
    perform set_config('search_path', v_ext_path, true);
    perform set_config('check_function_bodies', 'off', true);
    perform set_config('role', p_role, true);
    if v_statements is not null then
        foreach v_statement in array v_statements loop
            execute v_statement;
        end loop;
    else
        execute p_sql;
    end if;
    perform set_config('role', v_role, true);
    perform set_config('check_function_bodies', 'on', true);
    perform set_config('search_path', v_path, true);
end
$$;

create or replace function pgrecall._require_tenant(p_tenant text)
returns pgrecall.tenant
language plpgsql stable
set search_path = pg_catalog
as $$
declare
    v_row pgrecall.tenant;
begin
    perform pgrecall.check_tenant_name(p_tenant);
    select * into v_row from pgrecall.tenant where name = p_tenant;
    if not found then
        raise exception using errcode = 'PR003',
            message = format('no tenant named %s in database %s', quote_literal(p_tenant), current_database()),
            hint = 'pgrecall.list_tenants() shows the tenants; pgrecall.create_tenant(name) makes one.';
    end if;
    return v_row;
end
$$;

-- Creates a role unless it exists; an existing role is reused only if it
-- cannot be used to escalate (roles are cluster-wide, so the same tenant name
-- in another database shares them).
create or replace function pgrecall._ensure_role(p_role name, p_login boolean)
returns void
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_role pg_roles;
begin
    select * into v_role from pg_roles where rolname = p_role;
    if not found then
        execute format('create role %I %s nosuperuser nocreatedb nocreaterole noinherit',
                       p_role, case when p_login then 'login' else 'nologin' end);
    elsif v_role.rolsuper or v_role.rolcreaterole or v_role.rolcreatedb or v_role.rolbypassrls
          or v_role.rolcanlogin <> p_login then
        raise exception using errcode = 'PR002',
            message = format('role %I exists with attributes pgrecall will not adopt', p_role),
            hint = 'Drop or rename that role, or choose another tenant name.';
    end if;
    -- The installer becomes the owner to create objects owned by it, and reads
    -- the tenant's ledgers with the owner's rights. It could SET ROLE anyway,
    -- so inheriting grants it nothing more.
    if not (pg_has_role(current_user, p_role, 'SET') and pg_has_role(current_user, p_role, 'USAGE')) then
        if current_setting('server_version_num')::int >= 160000 then
            execute format('grant %I to %I with inherit true, set true', p_role, current_user);
        else
            execute format('grant %I to %I', p_role, current_user);
        end if;
    end if;
end
$$;

-- A tenant's owner owns its objects and never logs in, except on a Citus coordinator: Citus
-- carries the owner's DDL to the workers over connections it opens as the owner, which a NOLOGIN
-- role cannot. There the owner has no password: pg_hba.conf (or citus.node_conninfo with
-- certificates) decides that only the coordinator may connect as it (docs/scale-out.md).
create or replace function pgrecall._owner_logs_in()
returns boolean
language sql stable
set search_path = pg_catalog
as $$
    select exists (select 1 from pg_extension where extname = 'citus')
$$;

-- The tenant's three login roles, created if missing (tenants made before
-- the duty split had only an app role), recorded on its registry row, and
-- allowed to look up names in its schema. Returns the updated row.
-- What PostgreSQL gives every role of a database through PUBLIC, a tenant's login roles do not need
-- and should not have: TEMPORARY (temporary tables, and functions of their own in pg_temp, which
-- outlive no session but run as their caller). No role-level grant can narrow what PUBLIC holds, so
-- it is taken from PUBLIC; the database's owner keeps it, and a superuser needs none. Only the owner
-- (or a superuser) may do this: an installer that is neither is told what to run. CONNECT stays, on
-- this database: the login roles need it. On other databases of the server it is their owners' to
-- take (pgrecall server start does, for the embedded server's own; the README's security model).
create or replace function pgrecall._close_database_defaults()
returns boolean
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_may boolean;
begin
    if not has_database_privilege('public', current_database(), 'TEMPORARY') then
        return true;
    end if;
    select pg_has_role(current_user, d.datdba, 'USAGE')
           or coalesce((select r.rolsuper from pg_roles r where r.rolname = current_user), false)
      into v_may
      from pg_database d where d.datname = current_database();
    if not v_may then
        raise notice using
            message = format('every role, the tenants'' login roles among them, may create temporary tables and '
                             'functions in database %I: PUBLIC holds TEMPORARY on it', current_database()),
            hint = format('As the database''s owner: REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC; then GRANT '
                          'TEMPORARY to the roles of other applications that need it.', current_database());
        return false;
    end if;
    execute format('revoke temporary on database %I from public', current_database());
    return true;
end
$$;
comment on function pgrecall._close_database_defaults() is
    'Internal: takes TEMPORARY on the current database from PUBLIC (its owner keeps it), so tenant login roles '
    'have none; false, with a notice saying what to run, when the installer may not.';

create or replace function pgrecall._ensure_login_roles(p_tenant pgrecall.tenant)
returns pgrecall.tenant
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_row pgrecall.tenant;
    v_role name;
begin
    foreach v_role in array array[format('pgrecall_%s_app', p_tenant.name), format('pgrecall_%s_worker', p_tenant.name),
                                  format('pgrecall_%s_admin', p_tenant.name)]::name[] loop
        perform pgrecall._ensure_role(v_role, true);
    end loop;
    perform pgrecall._close_database_defaults();
    update pgrecall.tenant t
       set app_role = format('pgrecall_%s_app', p_tenant.name),
           worker_role = format('pgrecall_%s_worker', p_tenant.name),
           admin_role = format('pgrecall_%s_admin', p_tenant.name)
     where t.name = p_tenant.name
    returning * into v_row;
    -- Not per schema: a schema's default privileges can only add to the global
    -- ones, and globally PUBLIC may execute every new function. The owner
    -- owns nothing but this tenant, so its global defaults are the tenant's.
    perform pgrecall._execute_as(v_row.owner_role, format(
        'alter default privileges for role %I revoke execute on functions from public; '
        'grant usage on schema %I to %I, %I, %I',
        v_row.owner_role, v_row.name, v_row.app_role, v_row.worker_role, v_row.admin_role), v_row.name);
    -- A queue lease is alive while the backend that took it runs, known by
    -- its pid, role and start time in pg_stat_activity (plpgsql/queues/leases.sql),
    -- which shows the start time only to the backend's role and its members.
    -- So the owner, whose functions check leases, is a member of the login
    -- roles: inherit only, no SET ROLE. It gains nothing else: they hold only
    -- EXECUTE on the owner's own functions. (PostgreSQL 15 cannot grant
    -- inherit alone to a NOINHERIT role; there a lease is known by pid and
    -- role, see leases.sql.)
    if current_setting('server_version_num')::int >= 160000 then
        foreach v_role in array array[v_row.app_role, v_row.worker_role, v_row.admin_role] loop
            if not exists (select 1 from pg_auth_members m
                            where m.roleid = v_role::regrole and m.member = v_row.owner_role::regrole) then
                execute format('grant %I to %I with inherit true, set false', v_role, v_row.owner_role);
            end if;
        end loop;
    end if;
    return v_row;
end
$$;

-- Sets every function's EXECUTE grants of a tenant from pgrecall.function_duty:
-- nobody but the owner for helpers (a leading _) and trigger functions; the
-- declared duties' roles for public functions. A public function without a
-- declared duty stops the install (PR008): nothing is callable by accident.
create or replace function pgrecall._grant_duties(p_tenant pgrecall.tenant)
returns void
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_undeclared text[];
    v_sql text;
begin
    select array_agg(distinct p.proname::text order by p.proname::text) into v_undeclared
      from pg_proc p
     where p.pronamespace = p_tenant.name::regnamespace and left(p.proname, 1) <> '_'
       and not exists (select 1 from pgrecall.function_duty d where d.function_name = p.proname);
    if v_undeclared is not null then
        raise exception using errcode = 'PR008',
            message = format('tenant %s has functions with no declared duty: %s', quote_literal(p_tenant.name),
                             array_to_string(v_undeclared, ', ')),
            hint = 'Declare each public function''s duties (app, worker, admin) in sql/duties.sql, or name a helper with a leading underscore.';
    end if;
    select string_agg(
               format('revoke all on function %s from public, %I, %I, %I;', p.oid::regprocedure,
                      p_tenant.app_role, p_tenant.worker_role, p_tenant.admin_role)
               || coalesce((select format(' grant execute on function %s to %s;', p.oid::regprocedure,
                                          string_agg(quote_ident(case u.duty when 'app' then p_tenant.app_role
                                                                             when 'worker' then p_tenant.worker_role
                                                                             else p_tenant.admin_role end), ', '
                                                     order by u.duty))
                              from pgrecall.function_duty d cross join unnest(d.duties) u(duty)
                             where d.function_name = p.proname and left(p.proname, 1) <> '_'
                            having count(*) > 0), ''),
               chr(10) order by p.oid)
      into v_sql
      from pg_proc p
     where p.pronamespace = p_tenant.name::regnamespace;
    if v_sql is not null then
        perform pgrecall._execute_as(p_tenant.owner_role, v_sql, p_tenant.name);
    end if;
    -- The tenant's erasures record themselves in the server's ledger (the owner runs its definer functions).
    execute format('grant usage on schema pgrecall to %I', p_tenant.owner_role);
    execute format('grant execute on function pgrecall.record_erasure(text, bigint, jsonb, timestamptz) to %I',
                   p_tenant.owner_role);
    -- The admin's one table privilege: MAINTAIN (PostgreSQL 17+), so that
    -- `pgrecall erase --vacuum` can VACUUM what an erasure left as dead rows.
    -- VACUUM cannot run inside a function, so no SECURITY DEFINER function
    -- can do it for the admin; MAINTAIN reads and writes no row. Partitions
    -- created later (one per scope) get it through the default privileges.
    -- Older servers: the owner or a superuser vacuums (the CLI says so).
    if current_setting('server_version_num')::int >= 170000 then
        perform pgrecall._execute_as(p_tenant.owner_role, format(
            'grant maintain on all tables in schema %1$I to %2$I; '
            'alter default privileges for role %3$I in schema %1$I grant maintain on tables to %2$I',
            p_tenant.name, p_tenant.admin_role, p_tenant.owner_role), p_tenant.name);
    end if;
end
$$;

-- A tenant's four roles, created and committed before its schema. On Citus the installer's DDL
-- reaches the workers over connections opened as the tenant's owner, and a worker accepts such a
-- connection only for a role whose creation it has seen committed; on one server calling this
-- first changes nothing (create_tenant reuses the roles).
create or replace function pgrecall.create_tenant_roles(p_name text)
returns void
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_role name;
begin
    perform pgrecall.check_tenant_name(p_name);
    perform pgrecall._ensure_role(format('pgrecall_%s_owner', p_name)::name, pgrecall._owner_logs_in());
    foreach v_role in array array[format('pgrecall_%s_app', p_name), format('pgrecall_%s_worker', p_name),
                                  format('pgrecall_%s_admin', p_name)]::name[] loop
        perform pgrecall._ensure_role(v_role, true);
    end loop;
end
$$;
comment on function pgrecall.create_tenant_roles(text) is
    'Creates the owner and login roles of tenant p_name (idempotent); on Citus, commit this before create_tenant.';

create or replace function pgrecall.create_tenant(p_name text, p_target_version integer default null)
returns pgrecall.tenant
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_owner name;
    v_row pgrecall.tenant;
begin
    perform pgrecall.check_tenant_name(p_name);
    perform pgrecall._lock_tenant(p_name);
    if exists (select 1 from pgrecall.tenant where name = p_name) then
        raise exception using errcode = 'PR002',
            message = format('tenant %s already exists', quote_literal(p_name)),
            hint = 'pgrecall.upgrade_tenant(name) brings an existing tenant up to date.';
    end if;
    if exists (select 1 from pg_namespace where nspname = p_name) then
        raise exception using errcode = 'PR002',
            message = format('schema %I already exists and is not a pgrecall tenant', p_name),
            hint = 'Choose another tenant name; pgrecall never adopts an existing schema.';
    end if;

    v_owner := format('pgrecall_%s_owner', p_name);
    perform pgrecall._ensure_role(v_owner, pgrecall._owner_logs_in());

    execute format('create schema %I authorization %I', p_name, v_owner);
    if not has_schema_privilege(v_owner, pgrecall._extension_schema('vector'), 'USAGE') then
        execute format('grant usage on schema %I to %I', pgrecall._extension_schema('vector'), v_owner);
    end if;

    perform pgrecall._execute_as(v_owner, format($ddl$
        revoke all on schema %1$I from public;
        create table %1$I.schema_migration (
            version     integer primary key,
            name        text not null,
            sha256      text not null,
            applied_at  timestamptz not null default clock_timestamp()
        );
        comment on table %1$I.schema_migration is 'Ledger of applied migrations; a changed sha256 is an error.';
        create table %1$I.function_ledger (
            file        text primary key,
            sha256      text not null,
            functions   text[] not null default '{}',
            applied_at  timestamptz not null default clock_timestamp()
        );
        comment on table %1$I.function_ledger is
            'Function files applied, re-applied when their sha256 changes; functions lists what each file defined.';
        $ddl$, p_name, v_owner), p_name);

    insert into pgrecall.tenant (name, owner_role, app_role)
    values (p_name, v_owner, format('pgrecall_%s_app', p_name))
    returning * into v_row;

    perform pgrecall.upgrade_tenant(p_name, p_target_version);
    select * into v_row from pgrecall.tenant where name = p_name;
    return v_row;
end
$$;
comment on function pgrecall.create_tenant(text, integer) is
    'Creates tenant p_name: its schema, NOLOGIN owner role, LOGIN app, worker and admin roles, and its migrations (up to p_target_version if given) and functions.';

-- Applies pending migrations (up to p_target_version when given) and, when
-- the tenant is at the latest version, every function file whose checksum
-- changed, then the data steps that migrations requested and that have not
-- run yet. Returns what it applied, in order.
-- upgrade_tenant's step for the function files: those whose checksum changed are applied, after
-- what each defined last time is dropped. Returns the files applied, in order. The tenant's ledger
-- is read as its owner, who writes it (upgrade_tenant says why).
create or replace function pgrecall._upgrade_function_files(p_tenant pgrecall.tenant)
returns setof text
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_name text := p_tenant.name;
    v_caller text := current_setting('role');
    v_src pgrecall.source;
    v_sha text;
    v_defined text[];
    v_stale text;
    v_shipped text[] := array(select s.name from pgrecall.source s where s.kind = 'function');
begin
    -- What every changed file defined last time is dropped first, so a
    -- function it renamed or re-typed does not linger as a stale overload.
    -- First for all of them, then the files are applied: a function that
    -- moved to a file applied earlier than its old one would otherwise be
    -- dropped by the old file right after the new one created it.
    -- A file no longer shipped (removed, or renamed: plpgsql/ moved into folders) takes what it defined
    -- with it, and its ledger row goes: left, the row would claim functions a shipped file now defines.
    perform set_config('role', p_tenant.owner_role, true);
    execute format($q$
        select concat_ws(E';\n', string_agg(format('drop function if exists %%s cascade', f), E';\n')
                                      filter (where f is not null),
                         format('delete from %I.function_ledger where file <> all (%%L)', $1))
          from %I.function_ledger l left join unnest(l.functions) f on true
         where l.file <> all ($1)
        having count(*) > 0
        $q$, v_name, v_name) into v_stale using v_shipped;
    perform set_config('role', v_caller, true);
    if v_stale is not null then
        perform pgrecall._execute_as(p_tenant.owner_role, v_stale, v_name);
    end if;
    for v_src in select * from pgrecall.source s where s.kind = 'function' order by s.apply_order, s.name loop
        perform set_config('role', p_tenant.owner_role, true);
        execute format('select sha256, functions from %I.function_ledger where file = $1', v_name)
            into v_sha, v_defined using v_src.name;
        perform set_config('role', v_caller, true);
        continue when v_sha = v_src.sha256 or coalesce(cardinality(v_defined), 0) = 0;
        perform pgrecall._execute_as(p_tenant.owner_role,
            (select string_agg(format('drop function if exists %s cascade', f), E';\n') from unnest(v_defined) f)
            || format(E';\nupdate %I.function_ledger set functions = %L where file = %L', v_name, '{}', v_src.name),
            v_name);
    end loop;
    for v_src in select * from pgrecall.source s where s.kind = 'function' order by s.apply_order, s.name loop
        perform set_config('role', p_tenant.owner_role, true);
        execute format('select sha256 from %I.function_ledger where file = $1', v_name)
            into v_sha using v_src.name;
        perform set_config('role', v_caller, true);
        continue when v_sha = v_src.sha256;
        perform pgrecall._execute_as(p_tenant.owner_role, pgrecall._render(v_src.body, v_name), v_name);
        perform set_config('role', p_tenant.owner_role, true);
        execute format($q$
            select coalesce(array_agg(f order by f), '{}') from (
                select p.oid::regprocedure::text as f from pg_proc p where p.pronamespace = %L::regnamespace
                except
                select unnest(l.functions) from %I.function_ledger l where l.file <> $1) defined
            $q$, v_name, v_name) into v_defined using v_src.name;
        perform set_config('role', v_caller, true);
        perform pgrecall._execute_as(p_tenant.owner_role, format(
            -- the time in the inserted row, taken from excluded: Citus refuses a function that is not
            -- immutable in DO UPDATE SET
            'insert into %I.function_ledger (file, sha256, functions, applied_at) values (%L, %L, %L, clock_timestamp()) '
            'on conflict (file) do update set sha256 = excluded.sha256, functions = excluded.functions, '
            'applied_at = excluded.applied_at', v_name, v_src.name, v_src.sha256, v_defined), v_name);
        return next v_src.name;
    end loop;

end
$$;
comment on function pgrecall._upgrade_function_files(pgrecall.tenant) is
    'Internal: upgrade_tenant''s step that applies the changed function files; returns them in order.';

-- upgrade_tenant's last step: the data steps that migrations requested and that have not run.
-- Returns their names, in the order they ran.
create or replace function pgrecall._upgrade_data_steps(p_tenant pgrecall.tenant)
returns setof text
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_name text := p_tenant.name;
    v_caller text := current_setting('role');
    v_step text;
    v_steps text[];
    v_rows bigint;
begin
    -- Data steps (migration 0017 made the ledger): work on the tenant's rows
    -- that a migration asked for but could not do, since it needs functions
    -- that exist only now. Each runs once, in the order it was requested.
    perform set_config('role', p_tenant.owner_role, true);
    execute format('select coalesce(array_agg(d.name order by d.requested_by, d.name), ''{}'') '
                   'from %I.data_step d where d.done_at is null', v_name) into v_steps;
    perform set_config('role', v_caller, true);
    foreach v_step in array v_steps loop
        -- run first, then recorded with the values: Citus refuses a volatile function in an UPDATE
        perform set_config('role', p_tenant.owner_role, true);
        execute format('select %I.%I()', v_name, v_step) into v_rows;
        perform set_config('role', v_caller, true);
        perform pgrecall._execute_as(p_tenant.owner_role, format(
            'update %1$I.data_step set done_at = %2$L, rows_written = %3$L where name = %4$L',
            v_name, clock_timestamp(), v_rows, v_step), v_name);
        return next v_step;
    end loop;
end
$$;
comment on function pgrecall._upgrade_data_steps(pgrecall.tenant) is
    'Internal: upgrade_tenant''s step that runs the pending data steps; returns their names in order.';

create or replace function pgrecall.upgrade_tenant(p_name text, p_target_version integer default null)
returns table (kind text, name text)
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_tenant pgrecall.tenant := pgrecall._require_tenant(p_name);
    v_src pgrecall.source;
    v_sha text;
    v_latest integer;
    v_newest_applied integer;
    v_caller text := current_setting('role');
begin
    perform pgrecall._lock_tenant(p_name);
    v_tenant := pgrecall._ensure_login_roles(v_tenant);
    select max(version) into v_latest from pgrecall.source where source.kind = 'migration';
    -- The tenant's ledgers are read as its owner, who writes them below: on Citus a transaction may
    -- not touch a placement as one user after another user modified it ("modified in this
    -- transaction by a different user"), and a distributed tenant's ledgers are such placements.
    perform set_config('role', v_tenant.owner_role, true);
    execute format('select max(version) from %I.schema_migration', p_name) into v_newest_applied;
    perform set_config('role', v_caller, true);
    if v_newest_applied > coalesce(v_latest, 0) then
        raise exception using errcode = 'PR007',
            message = format('tenant %s is at migration %s but the installed sources stop at %s',
                             quote_literal(p_name), v_newest_applied, coalesce(v_latest, 0)),
            hint = 'Install the newer pgrecall release before upgrading this tenant.';
    end if;

    for v_src in select * from pgrecall.source s where s.kind = 'migration' order by s.version loop
        exit when p_target_version is not null and v_src.version > p_target_version;
        perform set_config('role', v_tenant.owner_role, true);
        execute format('select sha256 from %I.schema_migration where version = $1', p_name)
            into v_sha using v_src.version;
        perform set_config('role', v_caller, true);
        if v_sha is not null then
            if v_sha <> v_src.sha256 then
                raise exception using errcode = 'PR004',
                    message = format('migration %s was changed after tenant %s applied it (applied sha256 %s, shipped %s)',
                                     v_src.name, quote_literal(p_name), left(v_sha, 12), left(v_src.sha256, 12)),
                    hint = 'Released migrations are frozen: restore the file and put the change in a new migration.';
            end if;
            continue;
        end if;
        perform pgrecall._execute_as(v_tenant.owner_role, pgrecall._render(v_src.body, p_name), p_name);
        perform pgrecall._execute_as(v_tenant.owner_role, format(
            'insert into %I.schema_migration (version, name, sha256) values (%s, %L, %L)',
            p_name, v_src.version, v_src.name, v_src.sha256), p_name);
        kind := 'migration'; name := v_src.name;
        return next;
    end loop;

    if p_target_version is not null and p_target_version < coalesce(v_latest, 0) then
        return;  -- functions are written against the latest schema only
    end if;

    -- Function files, then grants, then data steps: each a step of its own below.
    for name in select f from pgrecall._upgrade_function_files(v_tenant) f loop
        kind := 'function';
        return next;
    end loop;

    perform pgrecall._grant_duties(v_tenant);

    for name in select d from pgrecall._upgrade_data_steps(v_tenant) d loop
        kind := 'data_step';
        return next;
    end loop;
end
$$;
comment on function pgrecall.upgrade_tenant(text, integer) is
    'Applies pending migrations (up to p_target_version if given), changed function files and pending data steps; serialised per tenant.';

create or replace function pgrecall.install_tenant(p_name text)
returns table (kind text, name text)
language plpgsql
set search_path = pg_catalog
as $$
begin
    perform pgrecall.check_tenant_name(p_name);
    perform pgrecall._lock_tenant(p_name);
    if not exists (select 1 from pgrecall.tenant t where t.name = p_name) then
        perform pgrecall.create_tenant(p_name);
        kind := 'tenant'; name := p_name;
        return next;
        return;
    end if;
    return query select * from pgrecall.upgrade_tenant(p_name);
end
$$;
comment on function pgrecall.install_tenant(text) is
    'Creates the tenant if it is missing, else upgrades it. Idempotent.';

create or replace function pgrecall.drop_tenant(p_name text)
returns void
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_tenant pgrecall.tenant;
    v_role name;
begin
    v_tenant := pgrecall._require_tenant(p_name);
    perform pgrecall._lock_tenant(p_name);
    execute format('drop schema %I cascade', p_name);
    delete from pgrecall.tenant where name = p_name;
    foreach v_role in array array_remove(array[v_tenant.app_role, v_tenant.worker_role, v_tenant.admin_role,
                                                v_tenant.owner_role], null) loop
        execute format('drop owned by %I', v_role);
        begin
            execute format('drop role %I', v_role);
        exception when dependent_objects_still_exist then
            -- Roles are cluster-wide: the same tenant lives on in another database.
            raise notice 'role % kept: it still holds objects or grants in another database', v_role;
        end;
    end loop;
end
$$;
comment on function pgrecall.drop_tenant(text) is
    'Drops tenant p_name: its schema with all data, its registry row, and its roles unless another database uses them.';

-- What the caller lacks to flush an erasure (nothing for a superuser).
create or replace function pgrecall._flush_rights_missing(p_tenant text)
returns text[]
language plpgsql stable
set search_path = pg_catalog
as $$
declare
    v_missing text[] := '{}';
begin
    if not (select r.rolsuper from pg_roles r where r.rolname = current_user) then
        if current_setting('server_version_num')::int < 170000 then
            v_missing := v_missing || 'superuser (PostgreSQL 17 adds pg_maintain, which would do)'::text;
        elsif not has_table_privilege('pg_catalog.pg_statistic', 'MAINTAIN') then
            v_missing := v_missing || 'MAINTAIN on pg_statistic (the pg_maintain role)'::text;
        end if;
        if not pg_has_role('pg_checkpoint', 'USAGE') then
            v_missing := v_missing || 'the pg_checkpoint role'::text;
        end if;
        if not has_function_privilege('pg_catalog.pg_switch_wal()', 'EXECUTE') then
            v_missing := v_missing || 'EXECUTE on pg_switch_wal()'::text;
        end if;
        if not has_table_privilege(format('%I.erasure_request', p_tenant), 'UPDATE') then
            v_missing := v_missing || format('UPDATE on %I.erasure_request (the tenant''s installer)', p_tenant);
        end if;
    end if;
    return v_missing;
end
$$;
comment on function pgrecall._flush_rights_missing(text) is
    'Internal: the rights the current role lacks to run flush_erasure() for the tenant, each named.';

-- The operator's part of forgetting down to the bytes, after the tenant's
-- admin rewrote the tables an erasure touched (<tenant>.rewrite_erased):
--   1. pg_statistic is rewritten (CLUSTER): ANALYZE replaced the statistics
--      that held erased values, but their old rows stay in its pages, and
--      the catalog is the database's, not the tenant's;
--   2. the WAL is switched to a new segment and a CHECKPOINT is taken: the
--      segments before its redo point, which recorded the erased rows being
--      written, are no longer needed, and are deleted (or, with wal_recycle
--      on, renamed for reuse and overwritten as new WAL fills them) unless
--      something still needs them, which the receipt names.
-- These need what no tenant role holds: MAINTAIN on pg_statistic (a
-- superuser, or pg_maintain on PostgreSQL 17+), CHECKPOINT (a superuser or
-- pg_checkpoint) and EXECUTE on pg_switch_wal() (a superuser unless granted),
-- and the rights to update the tenant's receipt (its installer, or a
-- superuser). Runs with the caller's rights, like every function here.
-- Returns the receipt's new columns.
create or replace function pgrecall.flush_erasure(p_tenant text, p_request_id bigint)
returns table (flushed_at timestamptz, flush_redo_lsn pg_lsn, wal_segment text, still_held_by jsonb)
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_tenant pgrecall.tenant := pgrecall._require_tenant(p_tenant);
    v_missing text[];
    v_receipt record;
    v_redo pg_lsn;
    v_segment text;
    v_held jsonb;
    v_slots text;
    v_replicas text;
begin
    v_missing := pgrecall._flush_rights_missing(p_tenant);
    if cardinality(v_missing) > 0 then
        raise exception using errcode = 'PR013',
            message = format('role %s may not flush an erasure to disk: it lacks %s', current_user,
                             array_to_string(v_missing, ', ')),
            hint = 'Run it as a superuser, or grant those to the operator''s role; '
                   'pgrecall erase --rewrite runs it on the PGRECALL_DSN connection.';
    end if;
    execute format('select r.completed_at, r.rewritten_at, r.rewrite_lsn from %I.erasure_request r where r.id = $1',
                   p_tenant)
       into v_receipt using p_request_id;
    if v_receipt.completed_at is null then
        raise exception using errcode = 'PR195',
            message = format('unknown erasure request %s of tenant %s', coalesce(p_request_id::text, 'NULL'),
                             quote_literal(p_tenant)),
            hint = 'The tenant''s admin lists the receipts with erasure_requests().';
    end if;
    if v_receipt.rewritten_at is null then
        raise exception using errcode = 'PR014',
            message = format('erasure request %s of tenant %s is not rewritten yet', p_request_id,
                             quote_literal(p_tenant)),
            hint = format('The tenant''s admin runs %I.rewrite_erased(%s) first (pgrecall erase --rewrite does both).',
                          p_tenant, p_request_id);
    end if;

    -- 1. the statistics catalog's dead rows (this database's). CLUSTER, since
    -- VACUUM FULL cannot run in a function; it leaves the index marked as the
    -- one pg_statistic was clustered on, which only a database-wide CLUSTER
    -- without arguments would read (a catalog cannot be ALTERed back).
    cluster pg_catalog.pg_statistic using pg_statistic_relid_att_inh_index;
    -- 2. past the WAL that recorded the erased rows
    perform pg_switch_wal();
    checkpoint;
    select c.redo_lsn, c.redo_wal_file into v_redo, v_segment from pg_control_checkpoint() c;

    select string_agg(format('%s (restart %s)', s.slot_name, s.restart_lsn), ', ' order by s.slot_name) into v_slots
      from pg_replication_slots s where s.restart_lsn < v_redo;
    select string_agg(format('%s (replayed %s)', coalesce(nullif(r.application_name, ''), r.client_addr::text, 'local'),
                             r.replay_lsn), ', ' order by r.application_name) into v_replicas
      from pg_stat_replication r;
    v_held := jsonb_build_object(
        'wal', format('segments before %s (redo %s): %s', v_segment, v_redo,
                      concat_ws('; ',
                          case when current_setting('wal_recycle')::boolean
                               then 'removed by this checkpoint or kept for reuse with their old bytes until new WAL overwrites them '
                                    '(wal_recycle is on; with it off they are deleted at once)'
                               else 'deleted by this checkpoint' end,
                          case when pg_size_bytes(current_setting('wal_keep_size')) > 0
                               then format('wal_keep_size keeps the newest %s of them', current_setting('wal_keep_size')) end,
                          case when v_slots is not null then format('replication slots hold them until they pass %s: %s',
                                                                      v_redo, v_slots) end)),
        'wal_archive', case when current_setting('archive_mode') = 'off' then 'none: archive_mode is off'
                            else format('archived segments before %s hold the words until the archive''s retention '
                                        'deletes them (last archived: %s)', v_segment,
                                        coalesce((select a.last_archived_wal from pg_stat_archiver a), 'none')) end,
        'backups', format('every base backup taken before %s holds them until it is deleted', v_receipt.rewritten_at),
        'replicas', case when v_replicas is null
                         then 'no streaming replica is connected now; one that was, or a logical subscriber, has its own copy'
                         else format('streaming replicas rewrite their files when they replay %s and drop their WAL '
                                     'at their next restartpoint: %s', v_receipt.rewrite_lsn, v_replicas) end,
        'server_log', 'a call that failed on the words quotes at most 500 characters of them in the server log, '
                      'until the log file is removed',
        'filesystem', 'blocks of the deleted and truncated files keep the bytes until the filesystem reuses them; '
                      'only disk encryption or wiping free space reaches below the files');
    execute format('update %I.erasure_request r set flushed_at = clock_timestamp(), flushed_by = current_user, '
                   'flush_redo_lsn = $2, still_held_by = $3 where r.id = $1 '
                   'returning r.flushed_at, r.flush_redo_lsn, r.still_held_by', p_tenant)
       into flushed_at, flush_redo_lsn, still_held_by using p_request_id, v_redo, v_held;
    wal_segment := v_segment;
    return next;
end
$$;
comment on function pgrecall.flush_erasure(text, bigint) is
    'After <tenant>.rewrite_erased(): rewrites pg_statistic, switches the WAL segment and checkpoints, so no relation '
    'file and no needed WAL holds the erased words; records on the receipt what still may. Superuser, or pg_maintain '
    '+ pg_checkpoint + EXECUTE on pg_switch_wal() + the tenant''s installer.';

-- Citus: a tenant becomes a distributed schema on one worker. The control plane stays an
-- ordinary schema on the coordinator (no tenant function reads it; installs and upgrades run
-- there). Every tenant function is created on every node, and all but the ones that must run on
-- the coordinator are colocated with the tenant's tables, so that Citus runs a call on the
-- coordinator where the tenant lives, as one round trip (function call delegation). Not
-- delegated: add_scope (creates a passage partition: DDL, which a worker may not run in a
-- distributed schema), erase (refreshes planner statistics with ANALYZE, which the coordinator
-- carries to the shards) and rewrite_erased (CLUSTER). Run after create_tenant, in its own
-- transaction: Citus moves the schema's tables with connections of their own.
-- The tenant's roles run with citus.allow_nested_distributed_execution: a statement on a tenant
-- table that calls a tenant function reading another (a fact's evidence beside the fact, a
-- turn's audience in the insert of the turn) runs that function inside the statement's task on
-- the worker, which Citus refuses by default because a nested query could go over another
-- connection and miss the outer one's writes. Here it cannot: every table of the tenant is on
-- one node, in one colocation group, so the nested query runs locally, in the same transaction.
create or replace function pgrecall.distribute_tenant(p_name text)
returns table (schema_name text, node text)
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_tenant pgrecall.tenant := pgrecall._require_tenant(p_name);
    v_fn record;
    v_role name;
    v_anchor text := format('%I.memory', p_name);
begin
    perform pgrecall._require_citus();
    if not exists (select 1 from pg_catalog.pg_dist_schema where schemaid = p_name::regnamespace) then
        execute 'select pg_catalog.citus_schema_distribute($1::regnamespace)' using p_name;
    end if;
    foreach v_role in array array[v_tenant.owner_role, v_tenant.app_role, v_tenant.worker_role, v_tenant.admin_role] loop
        if v_role is not null then
            execute format('alter role %I set citus.allow_nested_distributed_execution = on', v_role);
        end if;
    end loop;
    -- Functions reach the workers one by one, in no order their bodies could follow: the
    -- workers check no body (an SQL function naming one not created yet is not an error).
    set local citus.propagate_set_commands = 'local';
    set local check_function_bodies = off;
    for v_fn in
        select p.oid::regprocedure as fn, p.proname
          from pg_proc p
         where p.pronamespace = p_name::regnamespace
           and not exists (select 1 from pg_catalog.pg_dist_object o
                            where o.classid = 'pg_proc'::regclass and o.objid = p.oid
                              and o.colocationid is not null)
         order by p.proname
    loop
        if v_fn.proname in ('add_scope', 'erase', 'rewrite_erased') or v_fn.proname like '\_%' then
            execute 'select pg_catalog.create_distributed_function($1::regprocedure)' using v_fn.fn::text;
        else
            execute 'select pg_catalog.create_distributed_function($1::regprocedure, colocate_with := $2)'
                using v_fn.fn::text, v_anchor;
        end if;
    end loop;
    return query select p_name, pgrecall.tenant_node(p_name);
end
$$;
comment on function pgrecall.distribute_tenant(text) is
    'Citus: makes tenant p_name a distributed schema on one worker and creates its functions on every node, delegating calls to its node. Idempotent.';

create or replace function pgrecall._require_citus()
returns void
language plpgsql stable
set search_path = pg_catalog
as $$
begin
    if not exists (select 1 from pg_extension where extname = 'citus') then
        raise exception using errcode = 'PR009',
            message = format('database %s is not a Citus coordinator: the citus extension is not installed',
                             current_database()),
            hint = 'Connect to the coordinator of a Citus cluster (shared_preload_libraries = citus, '
                   'CREATE EXTENSION citus, workers added with citus_add_node).';
    end if;
end
$$;

-- host:port of the worker holding the tenant's tables.
create or replace function pgrecall.tenant_node(p_name text)
returns text
language plpgsql stable
set search_path = pg_catalog
as $$
declare
    v_node text;
begin
    perform pgrecall._require_tenant(p_name);
    perform pgrecall._require_citus();
    execute $q$
        select s.nodename || ':' || s.nodeport
          from pg_catalog.citus_shards s
         where s.table_name = (quote_ident($1) || '.memory')::regclass
         limit 1 $q$ into v_node using p_name;
    if v_node is null then
        raise exception using errcode = 'PR011',
            message = format('tenant %s is not a distributed schema', quote_literal(p_name)),
            hint = format('select pgrecall.distribute_tenant(%L) makes it one.', p_name);
    end if;
    return v_node;
end
$$;
comment on function pgrecall.tenant_node(text) is 'Citus: host:port of the worker that holds tenant p_name.';

-- Moves a tenant to another worker, online (citus_schema_move copies it with logical
-- replication and blocks writes only for the final switch).
create or replace function pgrecall.move_tenant(p_name text, p_host text, p_port integer)
returns text
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_node integer;
begin
    perform pgrecall.tenant_node(p_name);
    execute 'select nodeid from pg_catalog.pg_dist_node where nodename = $1 and nodeport = $2
                and noderole = ''primary'' and isactive and shouldhaveshards'
        into v_node using p_host, p_port;
    if v_node is null then
        raise exception using errcode = 'PR010',
            message = format('%s:%s is not a worker of this Citus cluster that may hold tenants', p_host, p_port),
            hint = 'select * from citus_get_active_worker_nodes() lists them; citus_add_node adds one.';
    end if;
    if pgrecall.tenant_node(p_name) = p_host || ':' || p_port then
        return p_host || ':' || p_port;
    end if;
    execute 'select pg_catalog.citus_schema_move($1::regnamespace, $2, $3)' using p_name, p_host, p_port;
    return pgrecall.tenant_node(p_name);
end
$$;
comment on function pgrecall.move_tenant(text, text, integer) is
    'Citus: moves tenant p_name to worker p_host:p_port while it stays in use; returns where it is now.';

-- Spreads the tenants over the workers (after citus_add_node, say): Citus's rebalancer pools
-- the colocation groups that have fewer shards than there are workers (each distributed schema
-- is one, a shard per table) and moves whole groups, so a tenant moves as a unit, never split,
-- online as citus_schema_move is. Waits for the moves; returns each tenant's node after.
create or replace function pgrecall.rebalance_tenants()
returns table (tenant text, node text)
language plpgsql
set search_path = pg_catalog
as $$
begin
    perform pgrecall._require_citus();
    execute 'select pg_catalog.rebalance_table_shards()';
    return query select t.name::text, pgrecall.tenant_node(t.name::text) from pgrecall.tenant t order by t.name;
end
$$;
comment on function pgrecall.rebalance_tenants() is
    'Citus: spreads the tenants over the workers (Citus''s rebalancer, each tenant moved whole); returns where each is.';

create or replace function pgrecall.list_tenants()
returns table (name text, owner_role name, app_role name, created_at timestamptz,
               schema_version integer, latest_version integer)
language plpgsql stable
set search_path = pg_catalog
as $$
declare
    v_tenant pgrecall.tenant;
    v_latest integer := (select max(version) from pgrecall.source s where s.kind = 'migration');
begin
    for v_tenant in select * from pgrecall.tenant t order by t.name loop
        name := v_tenant.name; owner_role := v_tenant.owner_role; app_role := v_tenant.app_role;
        created_at := v_tenant.created_at; latest_version := v_latest;
        execute format('select max(version) from %I.schema_migration', v_tenant.name) into schema_version;
        return next;
    end loop;
end
$$;
comment on function pgrecall.list_tenants() is
    'Every tenant in this database with its applied and latest migration version.';

create or replace function pgrecall.tenant_settings(p_tenant text)
returns table (key text, value jsonb, description text)
language plpgsql stable
set search_path = pg_catalog
as $$
begin
    perform pgrecall._require_tenant(p_tenant);
    return query execute format('select key, value, description from %I.setting order by key', p_tenant);
end
$$;
comment on function pgrecall.tenant_settings(text) is
    'The per-tenant settings (constants of the design) with their current values.';

create or replace function pgrecall.set_tenant_setting(p_tenant text, p_key text, p_value jsonb)
returns jsonb
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_value jsonb;
begin
    perform pgrecall._require_tenant(p_tenant);
    -- One implementation of the checks: the tenant's own (admin duty) function.
    execute format('select %I.set_setting($1, $2)', p_tenant) into v_value using p_key, p_value;
    return v_value;
end
$$;
comment on function pgrecall.set_tenant_setting(text, text, jsonb) is
    'Sets one per-tenant setting; the value must have the JSON type of the current one and pass its range check.';

-- The erasure ledger. A tenant's erasure receipts live in its own schema, so a
-- dump taken before an erasure, restored later, would bring the erased person
-- back. The control plane therefore keeps, per erasure, what it named as a
-- keyed hash (never the name, the subject id or any content) and when it
-- completed; a restore replays every erasure of the dumped tenant whose
-- receipt the dump does not hold (pgrecall.replay_erasures) before the
-- restored tenant answers a call. The key never leaves this database: only
-- record_erasure and replay_erasures use it.
create table if not exists pgrecall.erasure_ledger (
    id              bigint generated always as identity primary key,
    tenant          text not null,         -- the tenant's name when it erased; kept after a drop
    request_id      bigint not null,       -- its erasure_request id there
    kind            text not null check (kind in ('observation', 'data_subject', 'peer', 'scope', 'expired_before')),
    subject_hash    text check (subject_hash ~ '^[0-9a-f]{64}$'),  -- keyed sha256 of what the selector named
    expired_before  timestamptz,           -- an expiry names a time, not a person: kept as it is
    erased_at       timestamptz not null,  -- the receipt's completed_at
    recorded_at     timestamptz not null default now(),
    check ((kind = 'expired_before') = (subject_hash is null) and (kind = 'expired_before') = (expired_before is not null))
);
create index if not exists erasure_ledger_tenant on pgrecall.erasure_ledger (tenant, erased_at);
comment on table pgrecall.erasure_ledger is
    'Every erasure of every tenant: a keyed hash of what it named and when; replayed by a restore of an older dump.';

create table if not exists pgrecall.ledger_key (
    only_row  boolean primary key default true check (only_row),
    key       bytea not null check (octet_length(key) = 32)
);
comment on table pgrecall.ledger_key is 'The key of the erasure ledger''s hashes (one row; never leaves the database).';
insert into pgrecall.ledger_key (key)
select sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || clock_timestamp()::text, 'UTF8'))
on conflict (only_row) do nothing;
revoke all on pgrecall.erasure_ledger, pgrecall.ledger_key from public;

-- What an erasure selector names, as the ledger keeps it: its kind and the
-- value the keyed hash is taken of (an observation: its scope and offset).
create or replace function pgrecall._erasure_subject(p_selector jsonb, out kind text, out subject text)
language sql immutable
set search_path = pg_catalog
as $$
    select k, case k when 'observation' then (p_selector -> 'observation' ->> 'scope') || ':'
                                              || (p_selector -> 'observation' ->> 'offset')
                     else p_selector ->> k end
      from (select min(j) as k from jsonb_object_keys(p_selector) j) s
$$;
comment on function pgrecall._erasure_subject(jsonb) is
    'Internal: the kind of an erasure selector and the value the ledger hashes (observation: scope:offset).';

create or replace function pgrecall._erasure_hash(p_kind text, p_subject text)
returns text
language sql stable
set search_path = pg_catalog
as $$
    select encode(sha256(k.key || convert_to(p_kind || ':' || p_subject, 'UTF8')), 'hex') from pgrecall.ledger_key k
$$;
comment on function pgrecall._erasure_hash(text, text) is 'Internal: the ledger''s keyed hash of what an erasure named.';
revoke all on function pgrecall._erasure_hash(text, text) from public;

-- Called by a tenant's erasure when it completes. SECURITY DEFINER, unlike the
-- rest of this file: the tenant's roles may not read the key or write the
-- ledger, only record their own tenant's erasures through this function
-- (granted to each tenant's owner role by _grant_duties).
create or replace function pgrecall.record_erasure(p_tenant text, p_request_id bigint, p_selector jsonb,
                                                   p_erased_at timestamptz)
returns void
language plpgsql
security definer
set search_path = pg_catalog
as $$
declare
    v_kind text;
    v_subject text;
begin
    -- The tenant's own login roles, or whoever may act as its owner (the installer, a superuser).
    if not exists (select 1 from pgrecall.tenant t
                    where t.name = p_tenant
                      and (session_user in (t.app_role, t.worker_role, t.admin_role)
                           or pg_has_role(session_user, t.owner_role, 'MEMBER'))) then
        raise exception using errcode = 'PR015',
            message = format('role %s may not record an erasure of tenant %s', session_user, quote_literal(p_tenant));
    end if;
    select s.kind, s.subject into v_kind, v_subject from pgrecall._erasure_subject(p_selector) s;
    insert into pgrecall.erasure_ledger (tenant, request_id, kind, subject_hash, expired_before, erased_at)
    values (p_tenant, p_request_id, v_kind,
            case when v_kind <> 'expired_before' then pgrecall._erasure_hash(v_kind, v_subject) end,
            case when v_kind = 'expired_before' then v_subject::timestamptz end, p_erased_at);
end
$$;
comment on function pgrecall.record_erasure(text, bigint, jsonb, timestamptz) is
    'Records a completed erasure of tenant p_tenant in the ledger (a keyed hash of what it named); called by the tenant''s erasure.';
revoke all on function pgrecall.record_erasure(text, bigint, jsonb, timestamptz) from public;

-- After a restore of a dump of p_source into p_tenant: every erasure the
-- ledger holds for p_source whose receipt the restored data does not hold
-- (same request id, same completion time) is run again on p_tenant, for what
-- in the restored data hashes to what it named. In order of completion.
-- One row per erasure in the ledger that was considered: replayed (with the
-- new receipt's id and the rows it erased) or already in the dump, named by
-- the receipt id the erasure had in p_source (what its user was shown).
-- Dropped first: source_request_id was added to its result (a changed result
-- type is not something create or replace can do).
drop function if exists pgrecall.replay_erasures(text, text);
create or replace function pgrecall.replay_erasures(p_tenant text, p_source text)
returns table (ledger_id bigint, kind text, erased_at timestamptz, outcome text, request_id bigint,
               observations_erased bigint, source_request_id bigint)
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_tenant pgrecall.tenant := pgrecall._require_tenant(p_tenant);
    v_entries pgrecall.erasure_ledger[];
    v_entry pgrecall.erasure_ledger;
    v_selector jsonb;
    v_receipt record;
    v_in_dump boolean;
    v_caller text := current_setting('role');
begin
    v_entries := array(select l from pgrecall.erasure_ledger l where l.tenant = p_source order by l.erased_at, l.id);
    foreach v_entry in array v_entries loop
        ledger_id := v_entry.id; kind := v_entry.kind; erased_at := v_entry.erased_at;
        source_request_id := v_entry.request_id;
        request_id := null; observations_erased := null;
        -- The tenant's tables and functions are read and run as its owner (as upgrade_tenant does).
        perform set_config('role', v_tenant.owner_role, true);
        execute format('select exists (select 1 from %I.erasure_request r where r.id = $1 and r.completed_at = $2)',
                       p_tenant) into v_in_dump using v_entry.request_id, v_entry.erased_at;
        perform set_config('role', v_caller, true);
        if v_in_dump then
            outcome := 'in the dump';
            return next;
            continue;
        end if;
        v_selector := pgrecall._replay_selector(v_tenant, v_entry);
        if v_selector is null then
            outcome := 'nothing it named is in the dump';
        else
            perform set_config('role', v_tenant.owner_role, true);
            execute format('select r.id, r.observations_erased from %I._erase($1, $2, $3, $4) r', p_tenant)
               into v_receipt
              using 'pgrecall restore', v_selector,
                    format('replayed erasure %s of tenant %s, completed %s', v_entry.id, p_source, v_entry.erased_at),
                    'pgrecall.replay_erasures';
            perform set_config('role', v_caller, true);
            -- Under the dumped tenant's own name the ledger already holds this erasure: the replay's
            -- record (made by _erase) would be a second entry for it, replayed again by the next restore.
            if p_tenant = p_source then
                delete from pgrecall.erasure_ledger l
                 where l.tenant = p_tenant and l.request_id = v_receipt.id
                   and l.id <> all (array(select (e).id from unnest(v_entries) e));
            end if;
            outcome := 'replayed';
            request_id := v_receipt.id;
            observations_erased := v_receipt.observations_erased;
        end if;
        return next;
    end loop;
end
$$;
comment on function pgrecall.replay_erasures(text, text) is
    'After a restore of a dump of p_source as p_tenant: runs again every erasure the ledger holds for p_source that the dump does not hold.';

-- The selector that erases, in tenant p_tenant, what a ledger entry named:
-- found by hashing the candidates the restored data holds (NULL: none). The
-- candidates are read as the tenant's owner, hashed as the caller (who may
-- read the key).
create or replace function pgrecall._replay_selector(p_tenant pgrecall.tenant, p_entry pgrecall.erasure_ledger)
returns jsonb
language plpgsql
set search_path = pg_catalog
as $$
declare
    v_candidates text[];
    v_found text;
    v_caller text := current_setting('role');
begin
    if p_entry.kind = 'expired_before' then
        return jsonb_build_object('expired_before', p_entry.expired_before);
    end if;
    perform set_config('role', p_tenant.owner_role, true);
    execute format(case p_entry.kind
                       when 'data_subject' then 'select array_agg(distinct o.data_subject_id) from %1$I.observation o'
                       when 'peer' then 'select array_agg(p.name) from %1$I.peer p'
                       when 'scope' then 'select array_agg(s.name) from %1$I.scope s'
                       else 'select array_agg(o.scope || '':'' || o.log_offset) from %1$I.observation o' end,
                   p_tenant.name)
       into v_candidates;
    perform set_config('role', v_caller, true);
    select c into v_found from unnest(v_candidates) c
     where c is not null and pgrecall._erasure_hash(p_entry.kind, c) = p_entry.subject_hash
     limit 1;
    if v_found is null then
        return null;
    end if;
    if p_entry.kind = 'observation' then
        return jsonb_build_object('observation', jsonb_build_object(
            'scope', left(v_found, length(v_found) - strpos(reverse(v_found), ':')),
            'offset', split_part(v_found, ':', -1)::bigint));
    end if;
    return jsonb_build_object(p_entry.kind, v_found);
end
$$;
comment on function pgrecall._replay_selector(pgrecall.tenant, pgrecall.erasure_ledger) is
    'Internal: the erasure selector that names, in a restored tenant, what a ledger entry named (NULL: nothing there).';
