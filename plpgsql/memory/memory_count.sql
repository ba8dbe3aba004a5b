-- memory_count: how many memories the principal may see in the authorised
-- scopes for a purpose, by the one eligibility rule (_memory_eligible):
-- what recall and read would consider, counted, nothing of it shown.

create or replace function __tenant__.memory_count(
    p_principal           text,
    p_scopes              text[],
    p_purpose             text default 'converse',
    p_include_superseded  boolean default false
)
returns bigint
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
begin
    perform _check_scopes(p_scopes);
    perform _check_purpose(p_purpose);
    return (select count(*)
              from memory e
             where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                    v_principal, p_scopes, p_purpose, coalesce(p_include_superseded, false), null));
end
$$;
comment on function __tenant__.memory_count(text, text[], text, boolean) is
    'How many memories the principal may see in the authorised scopes for a purpose (superseded ones too if asked), eligibility applied.';
