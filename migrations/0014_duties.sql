-- The duty split (app / worker / admin login roles).
--
-- Advisory locks are database-wide: any role can take any key. Keys derived
-- from this tenant's secret cannot be computed, so neither another tenant's
-- roles nor this tenant's own login roles (which cannot read this table) can
-- hold a key that one of this tenant's functions waits for.
create table __tenant__.lock_salt (
    singleton  boolean primary key default true check (singleton),
    salt       text not null check (length(salt) >= 32)
);
insert into __tenant__.lock_salt (salt) values (gen_random_uuid()::text || gen_random_uuid()::text);
comment on table __tenant__.lock_salt is
    'A per-tenant secret mixed into advisory lock keys, so that no other role can compute (and hold) them.';

-- Who ran an erasure: the admin's stated identity and the login role used.
alter table __tenant__.erasure_request
    add column actor       text,
    add column actor_role  name;
comment on column __tenant__.erasure_request.actor is 'The person or process (admin duty) who ran the erasure.';
comment on column __tenant__.erasure_request.actor_role is 'The database role the erasure was run as (session_user).';
