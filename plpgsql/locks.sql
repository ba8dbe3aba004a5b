-- Serialising writers inside a tenant.
--
-- Transaction-scoped advisory locks on keys that mix in the tenant's secret
-- salt (lock_salt): the keys differ per tenant and cannot be computed by any
-- role that cannot read that table, so no login role of this tenant or of
-- another one can hold a key a pgrecall function is about to wait for.

create or replace function __tenant__._lock(p_purpose text, p_keys text[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    -- In key order, so that two transactions locking overlapping sets cannot deadlock.
    perform pg_advisory_xact_lock(k.key)
       from (select distinct hashtextextended(s.salt || ':' || p_purpose || ':' || u.key, 0) as key
               from lock_salt s cross join unnest(p_keys) as u(key)
              where u.key is not null
              order by 1) k;
end
$$;
comment on function __tenant__._lock(text, text[]) is
    'Internal: takes the transaction-scoped advisory locks of p_keys under p_purpose, salted with the tenant''s secret.';
