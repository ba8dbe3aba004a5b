-- Recall, step 5b, between the permission walk (step 5) and the rows' order
-- (step 6): an answer spread over a conversation ("what has she painted?",
-- "how did Jon and Gina each lose their jobs?") is found in pieces, each in
-- a session of its own, and the first piece that matches well can fill the
-- list. Two optional steps, each a tenant setting (issue #48).
--
-- recall_session_spread: the rows a recall returns are not all taken from
-- one conversation session when others score close. An answer spread over several sessions ("what has she painted?") is lost
-- when the first session that matches well fills the whole list with its
-- neighbouring turns. So of the fused list, in order, a session gives at most
-- greatest(2, 30% of p_limit) rows (3 of 10) while another session's row
-- waits within the first 2 x p_limit: "close" is that window, which is what
-- the arms read for a recall of p_limit rows (_arm_depth). A row over its
-- session's share moves after the window's other rows, not out: when the
-- window holds too few others, it still fills the list. A memory's session
-- is the one of the turn it was derived from (the earliest); a memory that
-- cites no turn in a session (a note, a document) has no share to exceed.
create or replace function __tenant__._session_spread(p_ids bigint[], p_limit integer)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_window integer := 2 * p_limit;
    v_share integer := greatest(2, (3 * p_limit) / 10);
    v_result bigint[];
begin
    if cardinality(p_ids) <= p_limit then
        return p_ids;  -- every row is returned anyway
    end if;
    with heads as (
        select c.id, c.ord,
               (select o.session_id from memory_link l join observation o on o.id = l.target_observation_id
                 where l.memory_id = c.id and l.link_type = 'derived_from' and o.session_id is not null
                 order by o.log_offset limit 1) as session_id
          from unnest(p_ids[1:v_window]) with ordinality c(id, ord)
    ), numbered as (
        select h.id, h.ord,
               h.session_id is not null
               and row_number() over (partition by h.session_id order by h.ord) > v_share as over_share
          from heads h
    )
    select array_agg(n.id order by n.over_share, n.ord) into v_result from numbered n;
    return v_result || coalesce(p_ids[v_window + 1:], '{}');
end
$$;
comment on function __tenant__._session_spread(bigint[], integer) is
    'Internal: recall''s fused rows, in order, a session giving at most 30% of p_limit (at least 2) while another session''s row waits within the first 2 x p_limit (setting recall_session_spread).';

-- The query's kept terms that none of p_ids' memories holds (by their text
-- now; as of a past moment a changed memory's text of then is not asked).
create or replace function __tenant__._uncovered_terms(p_ids bigint[], p_terms text[])
returns text[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return array(select t.term from unnest(p_terms) with ordinality t(term, ord)
                  where not exists (select 1 from memory m
                                     where m.id = any (p_ids) and m.tsv @@ quote_literal(t.term)::tsquery)
                  order by t.ord);
end
$$;
comment on function __tenant__._uncovered_terms(bigint[], text[]) is
    'Internal: of p_terms (lexemes), those that none of the memories p_ids holds.';

-- The first p_head ids of p_first, then the rest of p_first and the ids of
-- p_second taking turns (p_second first), each id once, at its first place.
create or replace function __tenant__._interleave_rounds(p_first bigint[], p_second bigint[], p_head integer)
returns bigint[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(array_agg(p.id order by p.place), '{}')
      from (select distinct on (m.id) m.id, m.place
              from (select f.id, case when f.ord <= p_head then f.ord else p_head + 2 * (f.ord - p_head) end as place
                      from unnest(p_first) with ordinality f(id, ord)
                    union all
                    select s.id, p_head + 2 * s.ord - 1 from unnest(p_second) with ordinality s(id, ord)) m
             order by m.id, m.place) p
$$;
comment on function __tenant__._interleave_rounds(bigint[], bigint[], integer) is
    'Internal: p_first''s first p_head ids, then the rest of p_first and p_second taking turns (p_second first), each id once.';

-- recall_second_round: when the first half of the rows holds some of the
-- query's kept terms and not others, those others are searched for alone
-- (the lexical arm, as eligible as the first round); the first half stays,
-- and after it the second round's rows and the first round's rest take turns
-- (_interleave_rounds), then the list is walked: a piece of the answer that
-- shares only the words the first hits lack comes next to them. Not by RRF:
-- the second round's rows are in the first round's list too, further down,
-- and counted twice they pushed out every first-round row. A query whose
-- every kept term is held, or none, is left as it was.
-- Then recall_neighbour_turns (_neighbour_turns, recall/neighbour_turns.sql), and
-- recall_session_spread (_session_spread above).
create or replace function __tenant__._spread_over_answer(
    p_kept_ids bigint[], p_limit integer, p_terms text[], p_dropped text[], p_principal_id bigint, p_scopes text[],
    p_purpose text, p_include_superseded boolean, p_at timestamptz, p_depth integer, p_settings jsonb,
    p_few bigint[], p_as_of timestamptz, p_as_of_ids bigint[], p_as_of_tsv tsvector[])
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_kept text[];
    v_uncovered text[];
    v_second bigint[];
    v_ids bigint[] := p_kept_ids;
begin
    if (p_settings -> 'recall_second_round')::boolean then  -- off (the default), every recall skips all of it
        v_kept := array(select t from unnest(p_terms) t where not t = any (p_dropped));
        v_uncovered := case when cardinality(v_kept) > 1
                            then _uncovered_terms(p_kept_ids[1:greatest(1, p_limit / 2)], v_kept) end;
        if cardinality(v_uncovered) between 1 and cardinality(v_kept) - 1 then
            select a.ids into v_second
              from _lexical_arm(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at,
                                array_to_string(v_uncovered, ' '), p_depth, p_settings, p_few, p_as_of, p_as_of_ids,
                                p_as_of_tsv) a;
            if cardinality(v_second) > 0 then
                v_ids := _walk_provenance(_interleave_rounds(p_kept_ids, v_second, greatest(1, p_limit / 2)),
                                          p_principal_id, p_scopes, p_as_of);
            end if;
        end if;
    end if;
    if (p_settings -> 'recall_neighbour_turns')::boolean and p_as_of is null then
        v_ids := _walk_provenance(_neighbour_turns(v_ids, p_limit, (p_settings ->> 'rrf_k')::double precision,
                                                   p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at),
                                  p_principal_id, p_scopes);
    end if;
    if (p_settings -> 'recall_session_spread')::boolean then
        v_ids := _session_spread(v_ids, p_limit);
    end if;
    return v_ids;
end
$$;
comment on function __tenant__._spread_over_answer(bigint[], integer, text[], text[], bigint, text[], text, boolean,
                                                   timestamptz, integer, jsonb, bigint[], timestamptz, bigint[],
                                                   tsvector[]) is
    'Internal: recall step 5b: with recall_second_round, the query''s terms the first rows lack searched for again and taking turns with the first round''s rows; with recall_neighbour_turns, the turns next to the first hits; with recall_session_spread, a session''s share of the rows bounded.';
