-- Recall, step 5b, with the setting recall_neighbour_turns on: the turn next
-- to a hit. A question often matches the turn that asked ("what did you
-- paint?") while the answer is the reply, or the other way round. So each of
-- the first half of the rows brings the memories derived from the turn just
-- before and just after its own turn (in its session, or, outside any
-- session, in its scope's log), when the principal may see them.
--
-- Scored so that it never passes a row that outscores it: a neighbour counts
-- nine tenths of its source's RRF score, 1 / (rrf_k + rank), and takes its
-- place after every row of the list that scores more. With rrf_k 60 the
-- neighbours of the first three rows of ten come in at ranks 8 to 10, after
-- the rows the arms ranked higher; a neighbour already in the list keeps the
-- better of its two places. Not as of a past moment: the turns and memories
-- next to a hit then are not asked for (the list is left as it was).
create or replace function __tenant__._neighbour_turns(
    p_ids bigint[], p_limit integer, p_rrf_k double precision, p_principal_id bigint, p_scopes text[],
    p_purpose text, p_include_superseded boolean, p_at timestamptz)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    c_share constant double precision := 0.9;
    v_result bigint[];
begin
    with source as (
        select s.ord, o.scope, o.session_id, o.log_offset
          from unnest(p_ids[1:greatest(1, p_limit / 2)]) with ordinality s(id, ord)
          cross join lateral (select o.scope, o.session_id, o.log_offset
                                from memory_link l join observation o on o.id = l.target_observation_id
                               where l.memory_id = s.id and l.link_type = 'derived_from'
                               order by o.log_offset limit 1) o
    ), adjacent as (
        select s.ord, n.id as observation_id
          from source s
          cross join lateral (
              (select o.id from observation o
                where o.scope = s.scope and o.log_offset < s.log_offset
                  and (o.session_id = s.session_id or (s.session_id is null and o.session_id is null))
                order by o.log_offset desc limit 1)
              union all
              (select o.id from observation o
                where o.scope = s.scope and o.log_offset > s.log_offset
                  and (o.session_id = s.session_id or (s.session_id is null and o.session_id is null))
                order by o.log_offset limit 1)) n
    ), placed as (
        select k.id, k.ord::double precision as place from unnest(p_ids) with ordinality k(id, ord)
        union all
        select e.id, (p_rrf_k + a.ord) / c_share - p_rrf_k + 0.5
          from adjacent a
          join memory_link l on l.target_observation_id = a.observation_id and l.link_type = 'derived_from'
          join memory e on e.id = l.memory_id
         where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
    )
    select coalesce(array_agg(b.id order by b.place, b.id), '{}') into v_result
      from (select p.id, min(p.place) as place from placed p group by p.id) b;
    return v_result;
end
$$;
comment on function __tenant__._neighbour_turns(bigint[], integer, double precision, bigint, text[], text, boolean,
                                               timestamptz) is
    'Internal: recall''s rows with the memories of the turns next to the first half''s turns, each placed where nine tenths of its source''s RRF score ranks (setting recall_neighbour_turns).';
