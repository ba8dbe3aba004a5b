-- The one eligibility rule. Every read path filters with these functions, so
-- the rule is written exactly once: who an audience admits
-- (_audience_admits), and from it the memories (_memory_eligible: read,
-- derive's sources, the revision checks of correct/supersede/forget, recall)
-- and the turns of the log (_observation_eligible: provenance quotes,
-- citations, working representations; message search applies the same rule
-- to passages, which copy their turn's audience) a principal may see. Facts
-- (facts.sql) use _audience_admits too.
--
-- They are plain SQL functions without SECURITY DEFINER or SET, and read no
-- table, so that the planner inlines them into the caller's query and uses the
-- caller's indexes; only the tenant's definer functions (whose path is
-- pinned) can call them.

-- The audience rule. An audience is NULL (everyone authorised for the scope)
-- or the peers it names, and it admits a principal it names. A memory or a
-- fact names at most one peer (p_peer), a turn of the log the set of peers
-- who were there (p_peers); the caller passes its audience in one of the two
-- and NULL in the other. Inlined into a WHERE clause, the NULL argument folds
-- away: for a memory the rule becomes "audience_peer_id is null or
-- audience_peer_id = principal" (the btree memory_audience answers both
-- halves), for a turn "audience is null or audience @> {principal}" (a GIN
-- index answers the second). Not strict, or it would not be inlined. Where
-- it does not admit, it may be NULL rather than false (an index condition
-- cannot be wrapped in coalesce): a WHERE clause reads both as "no"; a
-- caller that negates it coalesces first, as _audience_within does.
create or replace function __tenant__._audience_admits(p_principal_id bigint, p_peer bigint, p_peers bigint[])
returns boolean
language sql immutable
as $$
    select (p_peer is null and p_peers is null)
        or p_peer = p_principal_id
        or p_peers operator(pg_catalog.@>) array[p_principal_id]
$$;
comment on function __tenant__._audience_admits(bigint, bigint, bigint[]) is
    'Internal: the audience rule: NULL admits everyone authorised for the scope, else the peer (or peers) named.';

-- Whether an audience of at most one peer (a memory's, a fact's) admits no
-- one a turn's audience does not: what "never more public than its evidence"
-- checks. Everyone in the scope fits only in a scope-wide turn.
create or replace function __tenant__._audience_within(p_peer bigint, p_peers bigint[])
returns boolean
language sql immutable
as $$
    select p_peers is null
        or (p_peer is not null and coalesce(__tenant__._audience_admits(p_peer, null, p_peers), false))
$$;
comment on function __tenant__._audience_within(bigint, bigint[]) is
    'Internal: whether everyone a memory''s audience (one peer or the scope) admits is admitted by a turn''s audience.';

-- An audience as people read it in messages: the peers' names, or the scope.
create or replace function __tenant__._audience_shown(p_peer bigint, p_peers bigint[], p_scope text)
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result text;
begin
    select case when p_peer is null and p_peers is null then format('everyone in scope %s', quote_literal(p_scope))
                else (select string_agg(quote_literal(p.name), ', ' order by p.name)
                        from peer p where p.id = p_peer or p.id = any (p_peers)) end
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._audience_shown(bigint, bigint[], text) is
    'Internal: an audience for a message: the peers'' names, or everyone in the scope.';

-- The peers an audience names, as a JSON array of names (NULL: the scope).
create or replace function __tenant__._audience_names(p_peers bigint[])
returns jsonb
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result jsonb;
begin
    select case when p_peers is not null
                then (select coalesce(jsonb_agg(p.name order by p.name), '[]') from peer p where p.id = any (p_peers)) end
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._audience_names(bigint[]) is
    'Internal: the names of the peers an audience names, as a JSON array; NULL for the scope.';

-- The rule for one memory, from its columns: what every tenant function
-- writes in the WHERE (or ON) clause of a query on memory, as
-- "from memory e where _memory_eligible(e.scope, e.audience_peer_id,
-- e.purposes, e.invalidated_at, e.superseded_by, e.valid, principal, scopes,
-- purpose, include_superseded, at)". An expression on the row's columns, no
-- table read: the planner inlines it into the caller's WHERE clause (as it did
-- the set-returning form below) and uses the caller's indexes, and on Citus the
-- query names the memory table itself, so it is planned as a query on that
-- tenant's shard. Columns, not the row: a shard's row type is not memory's.
create or replace function __tenant__._memory_eligible(
    p_scope               text,
    p_audience_peer_id    bigint,
    p_purposes            text[],
    p_invalidated_at      timestamptz,
    p_superseded_by       bigint,
    p_valid               tstzrange,
    p_principal_id        bigint,
    p_scopes              text[],
    p_purpose             text,        -- NULL: any purpose (provenance and write checks)
    p_include_superseded  boolean,
    p_at                  timestamptz  -- NULL: no time filter
)
returns boolean
language sql stable
as $$
    select p_scope = any (p_scopes)
       and __tenant__._audience_admits(p_principal_id, p_audience_peer_id, null)
       and (p_purpose is null or p_purpose = any (p_purposes))
       and p_invalidated_at is null
       and (p_include_superseded or p_superseded_by is null)
       and (p_at is null or p_valid @> p_at)
$$;
comment on function __tenant__._memory_eligible(text, bigint, text[], timestamptz, bigint, tstzrange, bigint, text[],
                                                text, boolean, timestamptz) is
    'Internal: whether a memory (its columns) is one the principal may see in the authorised scopes for a purpose. The single eligibility rule.';

-- Recall as of a past moment (p_as_of) reads a memory by the rule above
-- only when its row has not changed since that moment: it stands now as it
-- stood then. A memory changed since is read from its history
-- (_memories_as_of, recall/as_of.sql). NULL: now, where every memory is
-- read by the rule. Inlined like the rule.
create or replace function __tenant__._unchanged_since(p_updated_at timestamptz, p_as_of timestamptz)
returns boolean
language sql immutable
as $$
    select p_as_of is null or p_updated_at <= p_as_of
$$;
comment on function __tenant__._unchanged_since(timestamptz, timestamptz) is
    'Internal: whether a memory''s row is as it stood at p_as_of (true when p_as_of is NULL).';

-- The same rule as a set, for psql and the tests on one server. No tenant
-- function calls it: on Citus a query whose table comes from an SQL function
-- cannot be planned (tests/test_citus_helpers_static.py checks it).
create or replace function __tenant__._eligible_memories(
    p_principal_id        bigint,
    p_scopes              text[],
    p_purpose             text,
    p_include_superseded  boolean,
    p_at                  timestamptz
)
returns setof __tenant__.memory
language sql stable
as $$
    select m.*
      from __tenant__.memory m
     where __tenant__._memory_eligible(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by,
                                       m.valid, p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
$$;
comment on function __tenant__._eligible_memories(bigint, text[], text, boolean, timestamptz) is
    'Internal: the memories a principal may see (_memory_eligible as a set), for psql and tests on one server.';

-- A turn of the log a principal may see in the authorised scopes, from its
-- columns (as _memory_eligible). Joined to by id (provenance, citations), it
-- is one primary-key probe per turn.
create or replace function __tenant__._observation_eligible(p_scope text, p_audience bigint[],
                                                            p_principal_id bigint, p_scopes text[])
returns boolean
language sql stable
as $$
    select p_scope = any (p_scopes)
       and __tenant__._audience_admits(p_principal_id, null, p_audience)
$$;
comment on function __tenant__._observation_eligible(text, bigint[], bigint, text[]) is
    'Internal: whether a turn of the log (its columns) is one the principal may see in the authorised scopes.';

create or replace function __tenant__._eligible_observations(p_principal_id bigint, p_scopes text[])
returns setof __tenant__.observation
language sql stable
as $$
    select o.*
      from __tenant__.observation o
     where __tenant__._observation_eligible(o.scope, o.audience, p_principal_id, p_scopes)
$$;
comment on function __tenant__._eligible_observations(bigint, text[]) is
    'Internal: the turns a principal may see (_observation_eligible as a set), for psql and tests on one server.';

-- A memory named by id in a write or a decision: one the principal may not
-- see is reported exactly like one that does not exist.
create or replace function __tenant__._check_memory_visible(p_principal_id bigint, p_scopes text[], p_memory_id bigint)
returns void
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if not exists (select 1 from memory e
                    where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                           p_principal_id, p_scopes, null, true, null) and e.id = p_memory_id) then
        perform _fail('PR104', format('memory %s not found', p_memory_id),
                      'It does not exist, or this principal may not see it.');
    end if;
end
$$;
comment on function __tenant__._check_memory_visible(bigint, text[], bigint) is
    'Internal: PR104 unless the principal may see the memory (for some purpose, history included).';
