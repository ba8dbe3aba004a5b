-- Traversal: from seed entities outwards along facts, in both directions,
-- one hop at a time. Each hop is two index probes (facts whose subject is in
-- the frontier, facts whose object is), never an OR over both columns, and at
-- most traversal_fanout facts per hop, so the cost follows the neighbourhood.

create or replace function __tenant__.neighbourhood(
    p_principal  text,
    p_scopes     text[],
    p_seeds      text[],                   -- entity names or aliases
    p_hops       integer default 2,
    p_valid_at   timestamptz default null,  -- NULL: now
    p_known_at   timestamptz default null,  -- NULL: what is believed now
    p_purpose    text default 'converse'
)
returns table (depth integer, fact_id bigint, subject text, predicate text, object text, statement text,
               valid tstzrange, known tstzrange, from_entity bigint, to_entity bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_max_hops integer := _setting_value('max_hops')::integer;
    v_fanout integer := _setting_value('traversal_fanout')::integer;
    v_valid_at timestamptz := coalesce(p_valid_at, now());
    v_frontier bigint[];
    v_seen bigint[];
    v_facts bigint[] := '{}';
    v_hop integer;
    v_hop_facts bigint[];
    v_hop_from bigint[];
    v_hop_to bigint[];
    v_all_facts bigint[] := '{}';
    v_all_depth integer[] := '{}';
    v_all_from bigint[] := '{}';
    v_all_to bigint[] := '{}';
begin
    perform _check_scopes(p_scopes);
    perform _check_purpose(p_purpose);
    perform _check_time(p_valid_at, 'valid_at');
    perform _check_past_moment(p_known_at, 'known_at',
                               'What will be believed later is not known yet: leave known_at out for what is believed now, '
                               'or give valid_at to ask what holds at a later time.');
    if p_hops is null or p_hops < 1 or p_hops > v_max_hops then
        perform _fail('PR150', format('hops must be 1 to %s, not %s', v_max_hops, coalesce(p_hops::text, 'NULL')));
    end if;
    if p_seeds is null or cardinality(p_seeds) = 0 then
        perform _fail('PR107', 'a traversal needs at least one seed entity');
    end if;
    v_frontier := array(select distinct _entity_required(v_principal, p_scopes, s) from unnest(p_seeds) s);
    v_seen := v_frontier;

    for v_hop in 1 .. p_hops loop
        exit when cardinality(v_frontier) = 0;
        with arms as (
            (select f.id, f.subject_id as src, f.object_id as dst
               from fact f
              where _fact_eligible(f.scope, f.audience_peer_id, f.purposes, f.valid, f.known,
                                   v_principal, p_scopes, p_purpose, v_valid_at, p_known_at) and f.subject_id = any (v_frontier)
              order by f.salience desc, f.id
              limit v_fanout)
            union all
            (select f.id, f.object_id, f.subject_id
               from fact f
              where _fact_eligible(f.scope, f.audience_peer_id, f.purposes, f.valid, f.known,
                                   v_principal, p_scopes, p_purpose, v_valid_at, p_known_at) and f.object_id = any (v_frontier)
              order by f.salience desc, f.id
              limit v_fanout)
        ), unseen as (
            select distinct on (a.id) a.id, a.src, a.dst from arms a
             where not (a.id = any (v_facts))
             order by a.id
             limit v_fanout
        )
        select coalesce(array_agg(x.id order by x.id), '{}'), coalesce(array_agg(x.src order by x.id), '{}'),
               coalesce(array_agg(x.dst order by x.id), '{}')
          into v_hop_facts, v_hop_from, v_hop_to from unseen x;
        v_facts := v_facts || v_hop_facts;
        v_all_facts := v_all_facts || v_hop_facts;
        v_all_depth := v_all_depth || array_fill(v_hop, array[cardinality(v_hop_facts)]);
        v_all_from := v_all_from || v_hop_from;
        v_all_to := v_all_to || v_hop_to;
        -- Entities reached for the first time are the next frontier; literal
        -- objects end a path, and visited entities are not expanded again.
        v_frontier := array(select distinct t from unnest(v_hop_to) t where t is not null and not (t = any (v_seen)));
        v_seen := v_seen || v_frontier;
    end loop;

    return query
    select h.d, f.id, se.name, f.predicate, coalesce(oe.name, f.object_value), f.statement, f.valid, f.known,
           h.src, h.dst
      from unnest(v_all_facts, v_all_depth, v_all_from, v_all_to) as h(fid, d, src, dst)
      join fact f on f.id = h.fid
      join entity se on se.id = f.subject_id
      left join entity oe on oe.id = f.object_id
     order by h.d, f.id;
end
$$;
comment on function __tenant__.neighbourhood(text, text[], text[], integer, timestamptz, timestamptz, text) is
    'Facts within p_hops (1 to max_hops) of the seed entities, both directions, valid and known at the given times; cycle-safe and bounded per hop.';
