-- Recall's people-and-things arm (plpgsql/recall/recall.sql composes the steps;
-- setting recall_people_arm, migration 0031). When the question names a
-- peer (by its name) or an entity (by name or alias), the memories that peer
-- said (a memory derived from an observation whose actor it is) and the
-- memories about that entity (about-links, to it or to an entity merged into
-- it) are a ranked list of their own, fused with the lexical and dense lists
-- by RRF (_rrf_fuse4, recall/fusion.sql): a candidate that the question's
-- people said, or that is about the things it names, rises above one that
-- only shares its words or meaning.
--   _text_grams    the lower-cased word groups of one to four words of a text
--   _peers_in_text the peers a text names
--   _people_arm    of the fused candidates, in order, the eligible ones said
--                  by the named peers or about the named entities
--   _fused_candidates  the fused list recall walks: _fused_ids, or with this
--                  arm or the time list (recall/time_arm.sql) on and a list to
--                  add, RRF of the lists

-- The same word groups _entities_in_text matches entity names against.
create or replace function __tenant__._text_grams(p_text text)
returns text[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with words as (
        select w, i from unnest(regexp_split_to_array(lower(coalesce(p_text, '')), '[^[:alnum:]''-]+'))
                         with ordinality as t(w, i)
         where w <> ''
    )
    select coalesce(array_agg(distinct array_to_string(array(select w2.w from words w2
                                                              where w2.i between w1.i and w1.i + n - 1
                                                              order by w2.i), ' ')), '{}')
      from words w1, generate_series(1, 4) n
     where exists (select 1 from words w3 where w3.i = w1.i + n - 1)
$$;
comment on function __tenant__._text_grams(text) is
    'Internal: the lower-cased groups of one to four consecutive words of a text.';

-- Peers are matched by their whole name, case aside: a peer is named
-- "Caroline" by the question "What did caroline paint?", not by "Carol".
-- PL/pgSQL: Citus cannot plan an SQL function with parameters that reads a
-- tenant table (tests/scaleout.py).
create or replace function __tenant__._peers_in_text(p_text text)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_result bigint[];
begin
    select coalesce(array_agg(p.id order by p.id), '{}')
      from peer p
     where lower(p.name) = any (_text_grams(p_text))
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._peers_in_text(text) is
    'Internal: the peers a text names by their whole name (case aside).';

-- The arm's list: of the candidates the lexical and dense lists chose (fused,
-- in their order), those a named peer said or that are about a named
-- entity. The list's evidence is who said it or whom it is about; its order
-- is the two arms' agreement. Ordered by either arm's own score instead, the
-- list counted that arm's evidence twice: by the cosine, on the LoCoMo
-- development split, hybrid recall@5 fell by 0.09, in every conversation
-- and category (eval/results/people-arm.md). Reading only the candidates
-- bounds the cost by walk_depth primary-key probes whoever is named, and
-- each is checked against the one eligibility rule again.
create or replace function __tenant__._people_arm(
    p_candidates bigint[], p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean,
    p_at timestamptz, p_query text)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_peers bigint[] := _peers_in_text(p_query);
    v_entities bigint[] := _entities_in_text(p_scopes, p_query);
    v_result bigint[];
begin
    if cardinality(v_peers) + cardinality(v_entities) = 0 or cardinality(p_candidates) = 0 then
        return '{}';
    end if;
    -- about-links keep pointing at an entity later merged into a named one
    v_entities := v_entities || array(select e.id from entity e where e.merged_into = any (v_entities));
    select coalesce(array_agg(c.id order by c.ord), '{}') into v_result
      from unnest(p_candidates) with ordinality as c(id, ord)
      join memory m on m.id = c.id
     where _memory_eligible(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                            p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
       and (exists (select 1 from memory_link l join observation o on o.id = l.target_observation_id
                     where l.memory_id = c.id and l.link_type = 'derived_from' and o.actor_id = any (v_peers))
            or exists (select 1 from memory_link l
                        where l.memory_id = c.id and l.link_type = 'about' and l.target_entity_id = any (v_entities)));
    return v_result;
end
$$;
comment on function __tenant__._people_arm(bigint[], bigint, text[], text, boolean, timestamptz, text) is
    'Internal: recall''s people-and-things arm: of the fused candidates, in order, the eligible ones said by the peers or about the entities the query names.';
