-- Recall's people-and-things arm (plpgsql/recall.sql composes the steps;
-- setting recall_people_arm, migration 0031). When the question names a
-- peer (by its name) or an entity (by name or alias), the memories that peer
-- said (a memory derived from an observation whose actor it is) and the
-- memories about that entity (about-links, to it or to an entity merged into
-- it) are a ranked list of their own, fused with the lexical and dense lists
-- by RRF (_rrf_fuse3, recall_fusion.sql). A question about what one person
-- did or said often shares few words with the turn that tells it; among that
-- person's turns, the one nearest the question in meaning is a better guess
-- than the nearest among everyone's.
--   _text_grams    the lower-cased word groups of one to four words of a text
--   _peers_in_text the peers a text names
--   _people_arm    the eligible memories of the named peers and entities,
--                  nearest the question first, above dense_floor
--   _fused_candidates  the fused list recall walks: _fused_ids, or with the
--                  arm on and a list to add, RRF of the three lists

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
create or replace function __tenant__._peers_in_text(p_text text)
returns bigint[]
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(array_agg(p.id order by p.id), '{}')
      from peer p
     where lower(p.name) = any (_text_grams(p_text))
$$;
comment on function __tenant__._peers_in_text(text) is
    'Internal: the peers a text names by their whole name (case aside).';

-- The arm's list. It has no order of its own without the question's vector
-- (age says nothing about the question), so it is empty then. Its cost is
-- bounded the way the dense arm's exact search is: at most
-- _exact_dense_limit(p_depth) eligible memories (the newest) are scored, the
-- count below which recall already prefers exact distances to the index.
create or replace function __tenant__._people_arm(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_query text, p_query_embedding double precision[], p_depth integer, p_settings jsonb)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_peers bigint[];
    v_entities bigint[];
    v_bound integer := greatest(_exact_dense_limit(p_depth, p_settings), p_depth);
    v_result bigint[];
begin
    if p_query_embedding is null then
        return '{}';
    end if;
    v_peers := _peers_in_text(p_query);
    v_entities := _entities_in_text(p_scopes, p_query);
    if cardinality(v_peers) + cardinality(v_entities) = 0 then
        return '{}';
    end if;
    -- about-links keep pointing at an entity later merged into a named one
    v_entities := v_entities || array(select e.id from entity e where e.merged_into = any (v_entities));
    with linked as (
        select l.memory_id
          from observation o
          join memory_link l on l.target_observation_id = o.id and l.link_type = 'derived_from'
         where o.actor_id = any (v_peers) and o.scope = any (p_scopes)
        union
        select l.memory_id from memory_link l
         where l.target_entity_id = any (v_entities) and l.link_type = 'about'
    ), eligible as (
        select m.id from linked k join memory m on m.id = k.memory_id
         where _memory_eligible(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                                p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
         order by m.id desc
         limit v_bound
    ), scored as (
        select e.id, 1 - (me.embedding operator(__ext__.<=>) p_query_embedding::__ext__.vector) as c
          from eligible e
          join memory_embedding me on me.memory_id = e.id and me.model = p_settings ->> 'embedding_model'
                                  and me.input_version = (p_settings ->> 'embedding_input_version')::integer
    )
    select coalesce(array_agg(s.id order by s.c desc, s.id), '{}') into v_result
      from (select * from scored
             where c >= (p_settings ->> 'dense_floor')::double precision
             order by c desc, id limit p_depth) s;
    return v_result;
end
$$;
comment on function __tenant__._people_arm(bigint, text[], text, boolean, timestamptz, text, double precision[],
                                           integer, jsonb) is
    'Internal: recall''s people-and-things arm: eligible memories said by the peers or about the entities the query names, nearest the question first, above dense_floor.';

-- The fused list recall's permission walk reads. With recall_people_arm on,
-- a query vector and an RRF fusion (rrf, rrf_scores), the arm's list is
-- fused with the other two; score fusion has no scale for it (the arm's
-- cosines are the dense arm's own evidence again), so there it is not added.
create or replace function __tenant__._fused_candidates(
    p_lexical_ids bigint[], p_bm25 double precision[], p_dense_ids bigint[], p_cosines double precision[],
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_query text, p_query_embedding double precision[], p_depth integer, p_settings jsonb)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_people bigint[] := '{}';
begin
    if (p_settings -> 'recall_people_arm')::boolean and p_settings ->> 'fusion' in ('rrf', 'rrf_scores')
       and cardinality(p_dense_ids) > 0 then
        v_people := _people_arm(p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_query,
                                p_query_embedding, p_depth, p_settings);
    end if;
    if cardinality(v_people) = 0 then
        return _fused_ids(p_lexical_ids, p_bm25, p_dense_ids, p_cosines, p_settings);
    end if;
    return _rrf_fuse3(p_lexical_ids, p_dense_ids, v_people, (p_settings ->> 'rrf_k')::double precision,
                      (p_settings ->> 'walk_depth')::integer);
end
$$;
comment on function __tenant__._fused_candidates(bigint[], double precision[], bigint[], double precision[], bigint,
                                                 text[], text, boolean, timestamptz, text, double precision[], integer,
                                                 jsonb) is
    'Internal: recall''s fused candidate ids: _fused_ids, or with recall_people_arm on, RRF of the lexical, dense and people lists.';
