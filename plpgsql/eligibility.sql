-- The one eligibility rule. Every read path (read, derive's sources, the
-- revision checks of correct/supersede/forget, and recall) selects from this
-- function, so the rule is written exactly once.
--
-- It is a plain SQL function without SECURITY DEFINER or SET so that the
-- planner inlines it into the caller's query and uses the caller's indexes;
-- its tables are qualified, and only the tenant's definer functions (whose
-- path is pinned) can call it.

create or replace function __tenant__._eligible_memories(
    p_principal_id        bigint,
    p_scopes              text[],
    p_purpose             text,        -- NULL: any purpose (provenance and write checks)
    p_include_superseded  boolean,
    p_at                  timestamptz  -- NULL: no time filter
)
returns setof __tenant__.memory
language sql stable
as $$
    select m.*
      from __tenant__.memory m
     where m.scope = any (p_scopes)
       and (m.audience_peer_id is null or m.audience_peer_id = p_principal_id)
       and (p_purpose is null or p_purpose = any (m.purposes))
       and m.invalidated_at is null
       and (p_include_superseded or m.superseded_by is null)
       and (p_at is null or m.valid @> p_at)
$$;
comment on function __tenant__._eligible_memories(bigint, text[], text, boolean, timestamptz) is
    'Internal: the memories a principal may see in the authorised scopes for a purpose. The single eligibility rule.';

-- A memory named by id in a write or a decision: one the principal may not
-- see is reported exactly like one that does not exist.
create or replace function __tenant__._check_memory_visible(p_principal_id bigint, p_scopes text[], p_memory_id bigint)
returns void
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if not exists (select 1 from _eligible_memories(p_principal_id, p_scopes, null, true, null) e
                    where e.id = p_memory_id) then
        perform _fail('PR104', format('memory %s not found', p_memory_id),
                      'It does not exist, or this principal may not see it.');
    end if;
end
$$;
comment on function __tenant__._check_memory_visible(bigint, text[], bigint) is
    'Internal: PR104 unless the principal may see the memory (for some purpose, history included).';
