-- Serialising writers inside a tenant.
--
-- Row locks on the tenant's own lock_stripe rows, held to the end of the
-- transaction. Advisory locks would not do: they are one namespace for the
-- whole server, and any role can read the keys held from pg_locks and take
-- them, so another tenant could make these writers wait as long as it liked.
-- A row of this schema can be locked only by the tenant's functions. A row
-- lock also holds across a Citus cluster, where the node holding the tenant's
-- schema decides it, while an advisory lock is one node's.
--
-- A key hashes to one of the 4096 stripes: two writers wait for each other
-- when their keys share a stripe, which for single keys happens rarely and
-- costs only the wait; batches of hundreds of keys nearly always share one, so
-- two such batches take turns. The table never grows, and it records nothing
-- of the keys (a text's hash is a stripe number, not a row).

create or replace function __tenant__._lock(p_purpose text, p_keys text[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_stripes integer[];
begin
    -- The stripes first, then the table alone: on Citus a one-table statement without a subquery takes
    -- the fast path. In stripe order (the rows are locked as the sort returns them), so that two
    -- transactions locking overlapping sets cannot deadlock.
    select coalesce(array_agg(distinct (hashtextextended(p_purpose || ':' || u.key, 0) & 4095)::integer), '{}')
      into v_stripes
      from unnest(p_keys) as u(key)
     where u.key is not null;
    perform 1 from lock_stripe s
     where s.stripe = any (v_stripes)
     order by s.stripe
       for no key update;
end
$$;
comment on function __tenant__._lock(text, text[]) is
    'Internal: locks, to the end of the transaction, the stripes (rows of lock_stripe) that p_keys hash to under p_purpose.';
