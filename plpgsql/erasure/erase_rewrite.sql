-- Erasure down to the bytes: the tables an erasure touched are rewritten,
-- so that no page of theirs keeps the erased words.
--
-- erase() deletes rows; VACUUM then marks their space free, but PostgreSQL
-- does not overwrite it until new rows need it, so the words stay in the
-- table's and its indexes' files (measured: 10 files, 77 times, after
-- erase, VACUUM and CHECKPOINT). A rewrite copies the live rows of a table
-- into new files, rebuilds its TOAST table and every index, and truncates the
-- old files at commit (deleted at the next checkpoint). What is left is the
-- operator's part (pgrecall.flush_erasure(), sql/control.sql): pg_statistic's
-- own dead rows, and the WAL that recorded the rows being written.
--
-- The rewrite is CLUSTER on the table's primary key: VACUUM FULL cannot run
-- inside a function, CLUSTER of one table can, and both build the same new
-- files (CLUSTER also orders the rows by the key, which costs a sort). Each
-- table is locked ACCESS EXCLUSIVE from its rewrite to the commit: nothing
-- reads or writes it meanwhile. Rewriting one table per call (p_tables), as
-- `pgrecall erase --rewrite` does, holds each lock for that table's copy only.
-- SECURITY DEFINER: CLUSTER needs the tables' owner (or MAINTAIN).

-- The tables of a receipt to rewrite: those it touched, or every table for a
-- receipt from before tables_touched was recorded (as for the statistics).
create or replace function __tenant__._erasure_tables(p_request __tenant__.erasure_request)
returns text[]
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(array_agg(c.relname::text order by c.relname), '{}')
      from pg_class c
     where c.relnamespace = '__tenant__'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
       and (c.relname::text = any (p_request.tables_touched)
            or (p_request.tables_touched is null
                and c.relname not in ('erasure_request', 'schema_migration', 'function_ledger')))
$$;
comment on function __tenant__._erasure_tables(__tenant__.erasure_request) is
    'Internal: the tables an erasure touched (every table for a receipt without tables_touched).';

-- SQLSTATE: PR195 unknown (or unfinished) erasure request; PR107 a table the
-- erasure did not touch.
create or replace function __tenant__.rewrite_erased(p_request_id bigint, p_tables text[] default null)
returns __tenant__.erasure_request
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_rewritten timestamptz;
    v_request erasure_request;
    v_touched text[];
    v_table text;
    v_relation regclass;
    v_index regclass;
    v_done text[];
begin
    select * into v_request from erasure_request r where r.id = p_request_id;
    if v_request.id is null or v_request.completed_at is null then
        perform _fail('PR195', format('unknown erasure request %s', coalesce(p_request_id::text, 'NULL')),
                      'erasure_requests() lists the receipts; erase() returns the id of a new one.');
    end if;
    v_touched := _erasure_tables(v_request);
    if p_tables is not null then
        perform _check_texts(p_tables, 'table name', 64);
        select t into v_table from unnest(p_tables) t where t is null or not (t = any (v_touched)) limit 1;
        if found then
            perform _fail('PR107', format('erasure request %s did not touch table %s', p_request_id,
                                          coalesce(quote_literal(v_table), 'NULL')),
                          format('It touched: %s.', array_to_string(v_touched, ', ')));
        end if;
    end if;
    v_done := coalesce(p_tables, v_touched);
    foreach v_table in array v_done loop
        -- a partitioned table is its partitions (one per scope): each is a table of its own
        -- (pg_partition_tree lists nothing for a table that is not partitioned)
        for v_relation in
            select c.oid from pg_class c where c.oid = format('__tenant__.%I', v_table)::regclass and c.relkind = 'r'
            union all
            select t.relid from pg_partition_tree(format('__tenant__.%I', v_table)::regclass) t where t.isleaf
        loop
            select i.indexrelid into v_index from pg_index i where i.indrelid = v_relation and i.indisprimary;
            execute format('cluster %s using %I', v_relation, (select c.relname from pg_class c where c.oid = v_index));
            -- CLUSTER remembers the index it used; this rewrite is not a request to keep the order
            execute format('alter table %s set without cluster', v_relation);
        end loop;
    end loop;
    update erasure_request r
       set rewritten_tables = array(select distinct t from unnest(coalesce(r.rewritten_tables, '{}') || v_done) t
                                     order by t),
           rewrite_lsn = pg_current_wal_lsn()
     where r.id = p_request_id
    returning * into v_request;
    if v_touched <@ v_request.rewritten_tables then
        -- every table is rewritten: its statistics are taken again from the rows that are left
        v_request := refresh_erasure_statistics(p_request_id);
        v_rewritten := clock_timestamp();  -- taken first: Citus refuses a volatile function in an UPDATE
        update erasure_request r set rewritten_at = v_rewritten where r.id = p_request_id
        returning * into v_request;
    end if;
    return v_request;
end
$$;
comment on function __tenant__.rewrite_erased(bigint, text[]) is
    'Rewrites the tables an erasure touched (or p_tables of them): new files, TOAST and indexes rebuilt, so no page keeps '
    'the erased rows; once all are done, takes their statistics again and stamps rewritten_at. Each table is locked '
    'exclusively until the transaction ends. The operator finishes with pgrecall.flush_erasure().';
