-- What an application role may learn about its tenant's installation: enough
-- for the driver to refuse to run against a schema older than itself.

create or replace function __tenant__.schema_info()
returns table (tenant text, schema_version integer, migrations integer, function_files integer)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select '__tenant__'::text,
           (select max(version) from schema_migration),
           (select count(*)::int from schema_migration),
           (select count(*)::int from function_ledger)
$$;
comment on function __tenant__.schema_info() is
    'The tenant name and its applied migration version; the driver checks it at connect.';
