-- The tenant's own view of its tables' statistics, for its admin role.
--
-- PostgreSQL shows every role the row estimates and activity counters of
-- every table in the database (pg_stat_user_tables, pg_class.reltuples):
-- a tenant's counts are visible to its neighbours, and pgrecall cannot hide
-- them (README, "Security model"). This function gives the tenant's own
-- operators the same figures for its tables alone, without a grant of
-- pg_read_all_stats, so that an operator who locks those views down for
-- everyone else (a superuser's REVOKE on them, in this database) keeps a
-- per-tenant view. SECURITY DEFINER: the owner reads its own tables' entries.

create or replace function __tenant__.table_statistics()
returns table (table_name text, live_rows bigint, dead_rows bigint, inserted bigint, updated bigint,
               deleted bigint, seq_scans bigint, index_scans bigint, total_bytes bigint,
               last_vacuum timestamptz, last_analyze timestamptz)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select c.relname::text, pg_stat_get_live_tuples(c.oid), pg_stat_get_dead_tuples(c.oid),
           pg_stat_get_tuples_inserted(c.oid), pg_stat_get_tuples_updated(c.oid), pg_stat_get_tuples_deleted(c.oid),
           pg_stat_get_numscans(c.oid), coalesce((select sum(pg_stat_get_numscans(i.indexrelid))::bigint
                                                    from pg_index i where i.indrelid = c.oid), 0),
           pg_total_relation_size(c.oid),
           greatest(pg_stat_get_last_vacuum_time(c.oid), pg_stat_get_last_autovacuum_time(c.oid)),
           greatest(pg_stat_get_last_analyze_time(c.oid), pg_stat_get_last_autoanalyze_time(c.oid))
      from pg_class c
     where c.relnamespace = '__tenant__'::regnamespace and c.relkind = 'r'
     order by c.relname
$$;
comment on function __tenant__.table_statistics() is
    'Row counts, activity and size of each of the tenant''s tables (partitions each apart), for its admin role.';

-- The planner's statistics of the tenant's tables that have rows and were
-- never analyzed (autovacuum analyzes a table only once its naptime comes
-- round and 50 rows have changed, which leaves a new tenant's first minute
-- of writes without them). Plans made before that are kept for the session
-- (generic plans, and PostgreSQL's own for foreign keys), and on a table
-- without statistics a lookup by key ties with any index on the scope: the
-- passage table's foreign-key check, made so on a new tenant, read every
-- passage of the scope on each append until autovacuum came
-- (test_plans_stay_probes). Analyzing replans them. Skipped on a Citus node,
-- where the tables are shards that Citus analyzes.
create or replace function __tenant__._analyze_unseen_tables()
returns integer
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_table regclass;
    v_count integer := 0;
begin
    if current_setting('citus.version', true) is not null then
        return 0;
    end if;
    for v_table in
        select c.oid::regclass from pg_class c
         where c.relnamespace = '__tenant__'::regnamespace and c.relkind = 'r' and c.reltuples < 0
           and pg_relation_size(c.oid) > 0
         order by c.relname
    loop
        execute format('analyze (skip_locked) %s', v_table);
        v_count := v_count + 1;
    end loop;
    return v_count;
end
$$;
comment on function __tenant__._analyze_unseen_tables() is
    'Internal: ANALYZE of each tenant table that has rows and no planner statistics yet; how many.';
