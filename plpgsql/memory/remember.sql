-- remember: write what the agent decided to keep, with who may see it, why
-- it may be used, and the observations that stated it. Capture writes only
-- what was explicitly stated: empty or ambiguous input is a no-op that says
-- why, never an error and never a guess.
--
-- remember() writes one memory and remember_many() a batch; both run
-- _remember_batch, which does the work set-wise (one implementation).
-- remember_said() appends the words a memory stands on and remembers it in
-- one call: a memory that is refused or a no-op leaves no turn behind.
--
-- A memory is never more public than what it cites: everyone its audience
-- admits must be admitted by each turn it cites (_audience_within), unless
-- the call widens it on purpose and says why (widening_reason, kept on the
-- row and shown in its provenance); otherwise PR116, naming the turn and
-- both audiences. A turn the principal may not see cannot be cited: it is
-- reported as missing (PR109).

-- A text that only asks states nothing to remember. "That's great! Where
-- did you go?" states something first, so it is not only questions.
-- Inlined by the planner, as _trim (value_checks.sql): it is asked of each item several times.
create or replace function __tenant__._is_only_questions(p_text text)
returns boolean
language sql immutable
as $$
    select p_text operator(pg_catalog.~) '[?][[:space:]"'')]*$'
       and p_text operator(pg_catalog.!~) '[.!;][[:space:]"'')]+[^[:space:]]'
$$;
comment on function __tenant__._is_only_questions(text) is
    'Internal: true when every sentence of the text is a question (it ends with ? and no sentence before it ends with . ! or ;).';

-- For one memory (correct, supersede, derive): the widening reason to keep,
-- NULL when its audience fits every turn it stands on; PR116 when it does
-- not and no reason is given. (_remember_batch makes the same check set-wise.)
create or replace function __tenant__._widening(p_audience_peer bigint, p_observation_ids bigint[],
                                               p_widening_reason text, p_what text default 'memory')
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_turn observation;
    v_reason text;
begin
    if p_widening_reason is not null then
        v_reason := _check_reason(p_widening_reason, format('a widening reason needs words: say why the %s may reach '
                                  'more peers than its turns', p_what), null, 2000);
    end if;
    select o.* into v_turn from observation o
     where o.id = any (p_observation_ids) and not _audience_within(p_audience_peer, o.audience)
     order by o.scope, o.log_offset limit 1;
    if v_turn.id is null then
        return null;
    end if;
    if p_widening_reason is null then
        perform _fail('PR116', format('a %s for %s would reach more peers than turn %s#%s, which only %s may see',
                                      p_what, _audience_shown(p_audience_peer, null, v_turn.scope), v_turn.scope,
                                      v_turn.log_offset, _audience_shown(null, v_turn.audience, v_turn.scope)),
                      format('Cite turns its audience may see, or widen it on purpose with a widening reason (kept '
                             'with it%s).', case when p_what = 'memory' then ' and shown in its provenance' else '' end));
    end if;
    return v_reason;
end
$$;
comment on function __tenant__._widening(bigint, bigint[], text, text) is
    'Internal: the widening reason to keep for a memory or a fact (NULL when it fits its turns), or PR116.';

-- A batch's items read into their declared type (memory_item, migration 0047).
-- The type is in this function's signature so that Citus, which creates a
-- distributed function's types on the workers with it, has it there too.
create or replace function __tenant__._memory_item_array(p_items jsonb)
returns __tenant__.memory_item[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(array_agg(i), '{}') from jsonb_populate_recordset(null::memory_item, p_items) i
$$;
comment on function __tenant__._memory_item_array(jsonb) is
    'Internal: remember_many''s items (a JSON array) as the declared type memory_item, in order.';

-- The items of a batch as rows, numbered from 1.
create or replace function __tenant__._memory_items(p_items jsonb)
returns table (body text, evidence bigint[], purposes text[], audience text, kind text, title text,
               confidence double precision, about text[], observer text, widening_reason text, ord integer)
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    -- Peer names in NFC, the form they are stored in.
    select i.body, i.evidence, i.purposes, normalize(i.audience, NFC), coalesce(i.kind, 'note'), i.title,
           coalesce(i.confidence, 1), i.about, normalize(i.observer, NFC), i.widening_reason, i.ordinality::integer
      from unnest(_memory_item_array(p_items)) with ordinality as i
$$;
comment on function __tenant__._memory_items(jsonb) is
    'Internal: remember items from JSON, numbered from 1; kind defaults to note and confidence to 1.';

-- Returns the peers the items name that exist (in NFC), read once for the batch: _remember_batch places
-- the items with their ids.
create or replace function __tenant__._check_memory_items(p_items jsonb, out peer_names text[], out peer_ids bigint[])
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_max_bytes bigint := (_setting_value('max_memory_bytes') #>> '{}')::bigint;
    v_many boolean := jsonb_array_length(p_items) > 1;
    v_bad record;
    v_where text;
    v_named text[];
    v_peers text[] := '{}';
    v_peer_ids bigint[] := '{}';
begin
    perform _check_keys(p_items, _input_keys('memory_item'), 'item');
    begin
        perform count(*) from _memory_items(p_items);
    exception when invalid_text_representation or datatype_mismatch or invalid_parameter_value then
        perform _fail('PR107', format('an item has a value of the wrong type: %s', sqlerrm),
                      'evidence is an array of offsets, purposes and about arrays of strings, confidence a number.');
    when numeric_value_out_of_range then
        perform _fail('PR150', format('an item has a number out of range: %s', sqlerrm),
                      'Evidence offsets are positive integers below 2^63.');
    end;
    perform _check_single_values(p_items, array['evidence', 'purposes', 'about'], 'item');
    -- the peers the items name (in NFC, as _memory_items gives them) that exist; none read when none named
    select coalesce(array_agg(distinct n.name), '{}') into v_named
      from _memory_items(p_items) i cross join lateral unnest(array[i.audience, i.observer]) as n(name)
     where n.name is not null;
    if cardinality(v_named) > 0 then
        select coalesce(array_agg(p.name), '{}'), coalesce(array_agg(p.id), '{}') into v_peers, v_peer_ids
          from peer p where p.name = any (v_named);
    end if;

    -- Validate every item before anything is written; the first problem wins.
    select x.ord, x.problem, x.detail into v_bad
      from (
        select i.ord,
               case
                 when i.purposes is null or cardinality(i.purposes) = 0 then 'PR102'
                 when not (i.purposes <@ _purposes()) then 'PR102'
                 when i.kind is null or not (i.kind = any (_closed_set('memory kind'))) then 'PR107'
                 when i.confidence is null or not _confidence_ok(i.confidence) then 'PR150'
                 when octet_length(i.body) > v_max_bytes then 'PR151'
                 when octet_length(i.title) > 500 then 'PR151'
                 when i.audience is not null and not (i.audience = any (v_peers)) then 'PR101'
                 when i.observer is not null and not (i.observer = any (v_peers)) then 'PR101'
                 when exists (select 1 from unnest(i.about) a where char_length(a) > 200) then 'PR151'
                 when exists (select 1 from unnest(i.about) a where _entity_name_problem(a) is not null) then 'PR140'
                 when i.widening_reason is not null and _trim(i.widening_reason) = '' then 'PR107'
                 when char_length(i.widening_reason) > 2000 then 'PR151'
               end as problem,
               case
                 when i.purposes is null or cardinality(i.purposes) = 0 then 'the set of purposes is empty'
                 when not (i.purposes <@ _purposes()) then
                      format('unknown purpose %s', (select quote_nullable(p) from unnest(i.purposes) p
                                                     where p is null or not (p = any (_purposes())) limit 1))
                 when i.kind is null or not (i.kind = any (_closed_set('memory kind'))) then
                      _not_one_of('memory kind', i.kind, 'memory kind')
                 when i.confidence is null or not _confidence_ok(i.confidence) then
                      format('confidence must be between 0 and 1, not %s', coalesce(i.confidence::text, 'NULL'))
                 when octet_length(i.body) > v_max_bytes then
                      format('memory body is %s bytes, more than the %s allowed', octet_length(i.body), v_max_bytes)
                 when octet_length(i.title) > 500 then
                      format('memory title is %s bytes, more than the 500 allowed', octet_length(i.title))
                 when i.audience is not null and not (i.audience = any (v_peers)) then
                      format('unknown audience peer %s', quote_literal(i.audience))
                 when i.observer is not null and not (i.observer = any (v_peers)) then
                      format('unknown observer peer %s', quote_literal(i.observer))
                 when exists (select 1 from unnest(i.about) a where char_length(a) > 200) then
                      'an entity name is longer than 200 characters'
                 when exists (select 1 from unnest(i.about) a where _entity_name_problem(a) is not null) then
                      (select format('invalid entity name %s in about: %s', _shown(a), _entity_name_problem(a))
                         from unnest(i.about) a where _entity_name_problem(a) is not null limit 1)
                 when char_length(i.widening_reason) > 2000 then
                      format('widening reason is %s characters, more than the 2000 allowed', char_length(i.widening_reason))
                 else 'a widening reason needs words: say why the memory may reach more peers than its turns'
               end as detail
          from _memory_items(p_items) i
      ) x
     where x.problem is not null
     order by x.ord limit 1;
    if v_bad.ord is not null then
        v_where := case when v_many then format(' (item %s)', v_bad.ord) else '' end;
        perform _fail(v_bad.problem, v_bad.detail || v_where,
                      case v_bad.problem
                          when 'PR102' then format('A purpose is one of %s.', array_to_string(_purposes(), ', '))
                          when 'PR101' then 'Create it first with add_peer(name, kind).'
                          when 'PR140' then 'An entity name is the words a reader sees: give it without control, '
                                            'format or invisible characters, and not blank.'
                          else null end);
    end if;
    peer_names := v_peers;
    peer_ids := v_peer_ids;
end
$$;
comment on function __tenant__._check_memory_items(jsonb) is
    'Internal: PR101/PR102/PR107/PR150/PR151 for the first remember item (in order) whose fields are wrong; '
    'else the peers the items name (names and ids).';

-- What a remember batch reads before it writes (the peers the items name, the turns they cite, the live
-- memories of the same texts) is read by key, each table by a statement of its own that reads nothing
-- else: on Citus such a statement takes the fast path (planned once, not deparsed and planned again for
-- the shard), where a statement with a subquery, a CTE or a join pays both. The checks and the placing
-- then read arrays, no table.
create or replace function __tenant__._check_memory_evidence(p_principal_id bigint, p_scope text, p_items jsonb,
                                                           p_offsets bigint[], p_audiences text[],
                                                           p_peer_names text[], p_peer_ids bigint[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_many boolean := jsonb_array_length(p_items) > 1;
    v_bad record;
begin
    -- Evidence must exist in the scope, and the principal must be able to see
    -- it (for items that are not no-ops): a turn it may not see is reported
    -- like one that does not exist. The cited turns were read by key
    -- (_remember_batch: p_offsets, p_audiences); nothing here reads a table.
    -- The cited turns are joined by offset (hashed once: searched item by item, a batch of 500 read
    -- 125,000 array rows), at most one per offset: offsets are unique in a scope.
    select i.ord, e.off into v_bad
      from _memory_items(p_items) i
      cross join lateral unnest(i.evidence) with ordinality as e(off, n)
      left join unnest(p_offsets, p_audiences) t(off, audience) on t.off = e.off
     where _trim(coalesce(i.body, '')) ~ '[[:alnum:]]' and not _is_only_questions(_trim(i.body))
       and (t.off is null or not coalesce(_audience_admits(p_principal_id, null, t.audience::bigint[]), false))
     order by i.ord, e.n limit 1;
    if v_bad.ord is not null then
        perform _fail('PR109', format('scope %s has no observation at offset %s%s', quote_literal(p_scope),
                                      coalesce(v_bad.off::text, 'NULL'),
                                      case when v_many then format(' (item %s)', v_bad.ord) else '' end),
                      'Evidence is given as log offsets returned by append_observation() in the same scope.');
    end if;

    -- Never more public than its evidence, unless widened on purpose.
    -- The cited turn's audience by its place in the arrays: joined, the plan (the items estimated at one
    -- row once filtered) hashed the arrays again for each item, 18 ms a 500-item batch against 3 under analyze.
    select i.ord, e.off, o.audience as turn_audience, a.id as audience_id into v_bad
      from _memory_items(p_items) i
      cross join lateral unnest(i.evidence) as e(off)
      cross join lateral (select p_audiences[array_position(p_offsets, e.off)]::bigint[] as audience,
                                 array_position(p_offsets, e.off) as place) o
      cross join lateral (select p_peer_ids[array_position(p_peer_names, i.audience)] as id) a
     where _trim(coalesce(i.body, '')) ~ '[[:alnum:]]' and not _is_only_questions(_trim(i.body))
       and i.widening_reason is null and o.place is not null
       and not _audience_within(a.id, o.audience)
     order by i.ord, e.off limit 1;
    if v_bad.ord is not null then
        perform _fail('PR116', format('a memory for %s would reach more peers than turn %s#%s, which only %s may see%s',
                                      _audience_shown(v_bad.audience_id, null, p_scope), p_scope, v_bad.off,
                                      _audience_shown(null, v_bad.turn_audience, p_scope),
                                      case when v_many then format(' (item %s)', v_bad.ord) else '' end),
                      'Give the memory one of those peers as its audience, cite turns its audience may see, or '
                      'widen it on purpose with a widening reason (kept with it and shown in its provenance).');
    end if;

end
$$;
comment on function __tenant__._check_memory_evidence(bigint, text, jsonb, bigint[], text[], text[], bigint[]) is
    'Internal: PR109 unless each remember item cites turns of the scope the principal may see (the turns '
    'cited, as _remember_batch reads them); PR116 if it would reach more peers than they, unwidened.';

create or replace function __tenant__._remember_placed(p_scope text, p_items jsonb, p_peer_names text[],
                                                      p_peer_ids bigint[], p_text_keys text[])
returns table (ord integer, body text, evidence bigint[], purposes text[], audience_id bigint, kind text, title text,
               confidence double precision, about text[], observer_id bigint, widening_reason text, text_key text,
               noop text, existing_id bigint, first_ord integer)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
rows 10
as $$
#variable_conflict use_column
declare
    v_keys text[];
    v_live record;  -- the scope's live memories with those texts (ids, keys, audiences, observers)
begin
    -- Read by key, the table alone (see _check_memory_evidence); the peers were read the same way.
    select coalesce(array_agg(distinct k.key), '{}') into v_keys from unnest(p_text_keys) k(key);
    select coalesce(array_agg(m.id order by m.id), '{}') as ids,
           coalesce(array_agg(m.text_key order by m.id), '{}') as keys,
           coalesce(array_agg(m.audience_peer_id order by m.id), '{}') as audiences,
           coalesce(array_agg(m.observer_peer_id order by m.id), '{}') as observers
      into v_live
      from memory m
     where m.scope = p_scope and m.text_key = any (v_keys) and m.superseded_by is null and m.invalidated_at is null;
    return query
    -- Each item as it will be written: cleaned, why it is a no-op (if it is), the live memory of the
    -- same text and audience it duplicates, and the first item of the batch with that text.
    with items as (
        select i.ord, _trim(coalesce(i.body, '')) as body, i.evidence,
               array(select distinct p from unnest(i.purposes) p order by p) as purposes,
               p_peer_ids[array_position(p_peer_names, i.audience)] as audience_id,
               i.kind, i.title, i.confidence, coalesce(i.about, '{}') as about,
               p_peer_ids[array_position(p_peer_names, i.observer)] as observer_id,
               _trim(i.widening_reason) as widening_reason, p_text_keys[i.ord] as text_key
          from _memory_items(p_items) i
    ), judged as (
        select it.*,
               case
                 when it.body = '' then 'empty: there is nothing to remember'
                 when it.body !~ '[[:alnum:]]' then 'no_content: the text has no words'
                 when _is_only_questions(it.body) then 'question: a question states nothing; remember what was answered'
                 when it.evidence is null or cardinality(it.evidence) = 0 then
                      'no_evidence: a told memory cites the observation(s) that stated it'
               end as noop
          from items it
    ), placed as (
        select j.*,
               (select l.id from unnest(v_live.ids, v_live.keys, v_live.audiences, v_live.observers)
                                 as l(id, key, audience, observer)
                 where j.noop is null and l.key = j.text_key
                   and l.audience is not distinct from j.audience_id
                   and l.observer is not distinct from j.observer_id
                 order by l.id limit 1) as existing_id,
               min(j.ord) filter (where j.noop is null)
                   over (partition by j.text_key, j.audience_id, j.observer_id) as first_ord
          from judged j
    )
    select * from placed;
end
$$;
comment on function __tenant__._remember_placed(text, jsonb, text[], bigint[], text[]) is
    'Internal: remember items judged (no-op or not) and placed against the scope''s live memories and each other.';

-- The items of a batch as they will be written, one array of remember_row
-- that the writes read in turn (migration 0046): each placed item with the
-- id it takes (NULL for a no-op or a duplicate, ids in the items' order) and
-- its widening reason where it widens (a reason for nothing would read as if
-- it did). Apart from the function, the first statement reads no table, so
-- on Citus it is planned as on one server; the check of the cited turns'
-- audiences runs only for an item that gives a reason.
create or replace function __tenant__._remember_numbered(p_scope text, p_items jsonb, p_peer_names text[],
                                                        p_peer_ids bigint[], p_text_keys text[])
returns __tenant__.remember_row[]
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_rows remember_row[];
    v_widened integer[];
begin
    select coalesce(array_agg(row(n.ord, n.body, n.evidence, n.purposes, n.audience_id, n.kind, n.title, n.confidence,
                                  n.about, n.observer_id, n.widening_reason, n.text_key, n.noop, n.existing_id,
                                  n.first_ord, n.new_id)::remember_row order by n.ord), '{}') into v_rows
      from (select pl.*,
                   case when pl.noop is null and pl.existing_id is null and pl.first_ord = pl.ord
                        then nextval(pg_get_serial_sequence('__tenant__.memory', 'id')) end as new_id
              from (select * from _remember_placed(p_scope, p_items, p_peer_names, p_peer_ids, p_text_keys) order by ord) pl) n;
    if not exists (select 1 from unnest(v_rows) r where r.widening_reason is not null and r.new_id is not null) then
        return v_rows;
    end if;
    v_widened := array(
        select r.ord from unnest(v_rows) r
         where r.new_id is not null and r.widening_reason is not null
           and exists (select 1 from unnest(r.evidence) e(off)
                         cross join lateral (select ob.audience from observation ob
                                              where ob.scope = p_scope and ob.log_offset = e.off limit 1) o
                        where not _audience_within(r.audience_id, o.audience)));
    return array(select row(r.ord, r.body, r.evidence, r.purposes, r.audience_id, r.kind, r.title, r.confidence, r.about,
                            r.observer_id, case when r.ord = any (v_widened) then r.widening_reason end, r.text_key,
                            r.noop, r.existing_id, r.first_ord, r.new_id)::remember_row
                   from unnest(v_rows) r order by r.ord);
end
$$;
comment on function __tenant__._remember_numbered(text, jsonb, text[], bigint[], text[]) is
    'Internal: remember items placed, with the memory id each takes (NULL: a no-op or a duplicate) and the widening reason kept.';

-- The links of new memories: to the turns they cite (p_memory[i] cites
-- p_observation[i]) and to the entities they are about (created if new),
-- with their projection dependencies. Each write is a statement of its own
-- that reads no table (the ids are taken first), not a chain of CTEs: on
-- Citus a chain of writing CTEs is planned as subplans whose results are
-- written out and read back (~25 ms a remember, measured), a plain INSERT
-- ... SELECT from arrays is one local step.
-- What the new memories and their links depend on (the turns they cite), as the projection registry
-- keeps it: the rows _remember_links inserts, computed from its arrays alone (no table read).
create or replace function __tenant__._remember_dependencies(
    p_memory bigint[], p_observation bigint[], p_link bigint[], p_link_memory bigint[], p_about bigint[],
    p_about_memory bigint[], p_about_entity bigint[])
returns table (kind text, row_key text, observation_id bigint)
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select 'memory', ev.m::text, ev.o from unnest(p_memory, p_observation) ev(m, o)
    union
    select 'memory_link', l.id::text, ev.o from unnest(p_link, p_link_memory) l(id, m)
      join unnest(p_memory, p_observation) ev(m, o) on ev.m = l.m
    union
    select 'memory_link', ab.id::text, ev.o from unnest(p_about, p_about_memory) ab(id, m)
      join unnest(p_memory, p_observation) ev(m, o) on ev.m = ab.m
    union
    select 'entity', ab.e::text, ev.o from unnest(p_about_entity, p_about_memory) ab(e, m)
      join unnest(p_memory, p_observation) ev(m, o) on ev.m = ab.m
$$;
comment on function __tenant__._remember_dependencies(bigint[], bigint[], bigint[], bigint[], bigint[], bigint[],
                                                      bigint[]) is
    'Internal: the projection dependencies of new memories and their links (kind, row key, the turn cited).';

-- The entities the about names of new memories denote, as (memory, entity) pairs: a name means the entity
-- it already names (_entity_for: its own row, followed to where it was merged, else the entity holding the
-- name as an alias), and a new entity where it names none. Matched by entity_identity's key alone, an alias
-- made a second entity of that name, which from then on took the alias's lookups from the entity it named.
-- One name at a time in the keys' order: remembers creating the same names take their keys in one order.
create or replace function __tenant__._about_entities(p_scope text, p_rows __tenant__.remember_row[],
                                                      out memory_ids bigint[], out entity_ids bigint[])
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_keys text[] := '{}';
    v_ids bigint[] := '{}';
    v_name text;
begin
    for v_name in
        select distinct on (_normalize_name(_trim(a.name))) _trim(a.name)
          from unnest(p_rows) r cross join lateral unnest(r.about) as a(name)
         where r.new_id is not null and _trim(a.name) <> ''
         order by _normalize_name(_trim(a.name)), _trim(a.name)
    loop
        v_keys := v_keys || _normalize_name(v_name);
        v_ids := v_ids || _entity_for(p_scope, v_name, null);
    end loop;
    select coalesce(array_agg(d.m order by d.m, d.e), '{}'), coalesce(array_agg(d.e order by d.m, d.e), '{}')
      into memory_ids, entity_ids
      from (select distinct r.new_id as m, k.e
              from unnest(p_rows) r
              cross join lateral unnest(r.about) as a(name)
              join unnest(v_keys, v_ids) as k(key, e) on k.key = _normalize_name(_trim(a.name))
             where r.new_id is not null) d;
end
$$;
comment on function __tenant__._about_entities(text, __tenant__.remember_row[]) is
    'Internal: the entity each about name of the new memories denotes (an alias''s entity included), created where none does.';

create or replace function __tenant__._remember_links(p_scope text, p_rows __tenant__.remember_row[],
                                                     p_memory bigint[], p_observation bigint[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_link bigint[];
    v_link_memory bigint[];
    v_link_target bigint[];
    v_about bigint[] := '{}';
    v_about_memory bigint[] := '{}';
    v_about_entity bigint[] := '{}';
    -- A few rows are inserted one VALUES row at a time: on Citus an INSERT ... SELECT from arrays is
    -- evaluated apart and copied into the shard (intermediate results), while an INSERT ... VALUES is a
    -- fast-path statement planned once; on one server a few single-row inserts cost what one set does.
    c_row_by_row constant integer := 16;
    v_dependency record;
begin
    select coalesce(array_agg(d.m order by d.m, d.o), '{}'), coalesce(array_agg(d.o order by d.m, d.o), '{}')
      into v_link_memory, v_link_target
      from (select distinct u.m, u.o from unnest(p_memory, p_observation) u(m, o)) d;
    v_link := array(select nextval(pg_get_serial_sequence('__tenant__.memory_link', 'id')) from unnest(v_link_memory));
    if cardinality(v_link) <= c_row_by_row then
        for i in 1 .. cardinality(v_link) loop
            insert into memory_link (id, memory_id, link_type, target_observation_id)
            overriding system value values (_unkept_on_citus(v_link[i]), v_link_memory[i], 'derived_from', v_link_target[i]);
        end loop;
    else
        insert into memory_link (id, memory_id, link_type, target_observation_id)
        overriding system value
        select u.id, u.m, 'derived_from', u.o from unnest(v_link, v_link_memory, v_link_target) u(id, m, o);
    end if;
    if exists (select 1 from unnest(p_rows) r where r.new_id is not null and cardinality(r.about) > 0) then
        select a.memory_ids, a.entity_ids into v_about_memory, v_about_entity from _about_entities(p_scope, p_rows) a;
        v_about := array(select nextval(pg_get_serial_sequence('__tenant__.memory_link', 'id')) from unnest(v_about_memory));
        insert into memory_link (id, memory_id, link_type, target_entity_id)
        overriding system value
        select u.id, u.m, 'about', u.e from unnest(v_about, v_about_memory, v_about_entity) u(id, m, e);
    end if;
    if cardinality(v_link) + cardinality(v_about) <= c_row_by_row then
        for v_dependency in select d.* from _remember_dependencies(p_memory, p_observation, v_link, v_link_memory,
                                                                 v_about, v_about_memory, v_about_entity) d
                                order by d.kind, d.row_key, d.observation_id loop
            insert into projection_dependency (kind, row_key, observation_id)
            values (_unkept_on_citus(v_dependency.kind), v_dependency.row_key, v_dependency.observation_id)
            on conflict do nothing;
        end loop;
    elsif cardinality(v_about) = 0 then
        -- Only the new memories and their new links (ids just taken, each row once): nothing to conflict
        -- with, so no speculative insertion a row.
        insert into projection_dependency (kind, row_key, observation_id)
        select d.kind, d.row_key, d.observation_id
          from _remember_dependencies(p_memory, p_observation, v_link, v_link_memory, v_about, v_about_memory,
                                      v_about_entity) d;
    else
        insert into projection_dependency (kind, row_key, observation_id)
        select d.kind, d.row_key, d.observation_id
          from _remember_dependencies(p_memory, p_observation, v_link, v_link_memory, v_about, v_about_memory,
                                      v_about_entity) d
        on conflict do nothing;
    end if;
end
$$;
comment on function __tenant__._remember_links(text, __tenant__.remember_row[], bigint[], bigint[]) is
    'Internal: the derived_from and about links of new memories, their entities and projection dependencies.';

-- A caller who has the vectors gives them (issue #46): the driver whose
-- model is loaded in its process, or an application that embeds elsewhere.
-- They are written with the memories, in the same statement's transaction,
-- and never queued: no worker round trip. What they are is the caller's
-- word, stamped with the model and the input version that made them, and
-- that stamp must be the tenant's (PR155 otherwise): a vector of another
-- model is of another space, one of another input version of another text.
-- Under input version 1 the text is the memory's own (title and body, as
-- stored: trimmed). A NULL element is an item without one (queued as usual).
-- Returns the vectors parsed, or NULL when none were given.
create or replace function __tenant__._given_vectors(p_items jsonb, p_embeddings __ext__.halfvec[], p_model text,
                                                    p_input_version integer)
returns __ext__.halfvec[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_stamp record;
begin
    perform _check_length(p_model, 'model name', 200);  -- given alone too: no argument reaches the log whole
    if p_embeddings is null then
        return null;
    end if;
    if cardinality(p_embeddings) is distinct from jsonb_array_length(p_items) then
        perform _fail('PR107', format('%s embeddings for %s items: one per item, NULL for an item without one',
                                      cardinality(p_embeddings), jsonb_array_length(p_items)));
    end if;
    if p_model is null or p_input_version is null then
        perform _fail('PR107', 'embeddings are given with the model and the input version that made them',
                      'embedding_status() names the tenant''s.');
    end if;
    v_stamp := _embedding_stamp();
    if p_model <> v_stamp.model or p_input_version <> v_stamp.input_version then
        perform _fail('PR155', format('the embeddings are of %s, input version %s; the tenant embeds with %s, '
                                      'input version %s', p_model, p_input_version, v_stamp.model,
                                      v_stamp.input_version),
                      'Embed with the tenant''s model and input version, or leave the embeddings out: '
                      'the worker embeds what is queued.');
    end if;
    return _checked_vectors(p_embeddings, true);
end
$$;
comment on function __tenant__._given_vectors(jsonb, __ext__.halfvec[], text, integer) is
    'Internal: a caller''s vectors for a remember batch, checked; PR107/PR154 if malformed, PR155 unless stamped with the tenant''s model and input version.';

-- The new memories of a batch (p_rows as _remember_numbered numbers them):
-- those the caller gave a vector for (p_given), or the others.
create or replace function __tenant__._remember_insert(p_principal_id bigint, p_scope text,
                                                      p_rows __tenant__.remember_row[], p_vectors __ext__.halfvec[],
                                                      p_given boolean)
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    -- As in _remember_links: a few rows one VALUES row at a time, a fast-path statement on Citus, where an
    -- INSERT ... SELECT is evaluated apart and its rows copied into the shard.
    c_row_by_row constant integer := 16;
    v_row record;
begin
    if cardinality(p_rows) <= c_row_by_row then
        for v_row in select x.* from unnest(p_rows) x
                  where x.new_id is not null and (p_vectors[x.ord] is not null) = p_given
                  order by x.new_id loop
            insert into memory (id, scope, kind, title, body, confidence, origin, audience_peer_id, purposes,
                                created_by, observer_peer_id, widening_reason)
            overriding system value
            values (_unkept_on_citus(v_row.new_id), p_scope, v_row.kind, v_row.title, v_row.body, v_row.confidence, 'told',
                    v_row.audience_id, v_row.purposes, p_principal_id, v_row.observer_id, v_row.widening_reason);
        end loop;
        return;
    end if;
    insert into memory (id, scope, kind, title, body, confidence, origin, audience_peer_id, purposes, created_by,
                        observer_peer_id, widening_reason)
    overriding system value
    select r.new_id, p_scope, r.kind, r.title, r.body, r.confidence, 'told', r.audience_id, r.purposes,
           p_principal_id, r.observer_id, r.widening_reason
      from unnest(p_rows) r
     where r.new_id is not null and (p_vectors[r.ord] is not null) = p_given
     order by r.new_id;
end
$$;
comment on function __tenant__._remember_insert(bigint, text, __tenant__.remember_row[], __ext__.halfvec[], boolean) is
    'Internal: inserts a remember batch''s new memories, those with a given vector or those without.';

-- The given vectors of the memories a batch created (p_rows as
-- _remember_numbered numbers them; p_memory/p_observation the turns they
-- cite): stored, registered against those turns, and any job of theirs
-- settled (the insert queued none, but on Citus the trigger runs on the
-- shard, where the setting that skips them is not seen). Under input version 1 the turns
-- they quote word for word borrow them, as from the worker's
-- (passage_vectors.sql). A duplicate or a no-op takes no vector. Each write
-- is a statement of its own, as in _remember_links.
create or replace function __tenant__._remember_vectors(p_rows __tenant__.remember_row[], p_vectors __ext__.halfvec[],
                                                       p_model text,
                                                       p_input_version integer, p_memory bigint[],
                                                       p_observation bigint[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_stored bigint[];
begin
    with stored as (
        insert into memory_embedding (memory_id, model, input_version, embedding, text_embedding, embedded_at)
        select r.new_id, p_model, p_input_version, v.embedding, null, now()
          from unnest(p_rows) r
          join unnest(p_vectors) with ordinality as v(embedding, ord) on v.ord = r.ord
         where r.new_id is not null and v.embedding is not null
         order by r.new_id
        returning memory_embedding.memory_id
    )
    select coalesce(array_agg(st.memory_id), '{}') into v_stored from stored st;
    if cardinality(v_stored) = 0 then
        return;
    end if;
    -- The vectors of memories just created: nothing registered yet to conflict with.
    insert into projection_dependency (kind, row_key, observation_id)
    select distinct 'memory_embedding', ev.m::text, ev.o from unnest(p_memory, p_observation) ev(m, o)
     where ev.m = any (v_stored);
    delete from embedding_job j where j.memory_id = any (v_stored);
    if p_input_version = 1 then
        perform _lend_memory_vectors(v_stored);
    end if;
end
$$;
comment on function __tenant__._remember_vectors(__tenant__.remember_row[], __ext__.halfvec[], text, integer, bigint[],
                                                bigint[]) is
    'Internal: stores the caller''s vectors of a batch''s new memories, registered and unqueued (passages borrow them under input version 1).';

-- Its statements are planned once per session, not per call: the custom plan
-- of the statement that wrote a batch was re-made on every remember(), ~15% of
-- its server time. Each step is a statement of its own (see _remember_links).
create or replace function __tenant__._remember_batch(p_principal_id bigint, p_scope text, p_items jsonb,
                                                     p_embeddings __ext__.halfvec[] default null,
                                                     p_embedding_model text default null,
                                                     p_embedding_input_version integer default null)
returns table (ordinal integer, memory_id bigint, status text, reason text)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_saved_plan_mode text := current_setting('plan_cache_mode');
    v_write_plan_mode text := _plan_cache_mode();
    v_rows remember_row[];
    v_memory bigint[];       -- each new memory once per turn it cites ...
    v_observation bigint[];  -- ... and that turn's id
    v_vectors __ext__.halfvec[];  -- the caller's vector of each item (NULL: none given)
    v_peer_names text[];     -- the peers the items name that exist ...
    v_peer_ids bigint[];     -- ... and their ids
    v_text_keys text[];      -- each item's text key (memory.text_key of its body), in the items' order
    v_lock_keys text[];
    v_cited bigint[];        -- the offsets the items cite, and of the turns there ...
    v_turn_offsets bigint[];
    v_turn_ids bigint[];
    v_turn_audiences text[];  -- ... their audiences (as text: arrays of unlike lengths do not aggregate)
begin
    -- The checks and reads below plan generically on Citus too (they read no table or one, by key); the writes
    -- plan as _plan_cache_mode() says, Citus cannot plan an INSERT ... SELECT generically.
    perform set_config('plan_cache_mode', 'force_generic_plan', true);
    -- Validate every item before anything is written; the first problem wins.
    -- Read by key, each table alone (see above): the check reads the peers the items name.
    select c.peer_names, c.peer_ids into v_peer_names, v_peer_ids from _check_memory_items(p_items) c;
    select coalesce(array_agg(distinct e.off), '{}') into v_cited
      from jsonb_to_recordset(p_items) as i(evidence bigint[]) cross join lateral unnest(i.evidence) as e(off)
     where e.off is not null;
    select coalesce(array_agg(o.log_offset), '{}'), coalesce(array_agg(o.id), '{}'),
           coalesce(array_agg(o.audience::text), '{}')
      into v_turn_offsets, v_turn_ids, v_turn_audiences
      from observation o where o.scope = p_scope and o.log_offset = any (v_cited);
    perform _check_memory_evidence(p_principal_id, p_scope, p_items, v_turn_offsets, v_turn_audiences,
                                   v_peer_names, v_peer_ids);
    v_vectors := _given_vectors(p_items, p_embeddings, p_embedding_model, p_embedding_input_version);
    -- Each text's key once for the batch (md5 of the normalised text: the lock and the placing read it), the
    -- same expression as memory.text_key ([[:space:]] is \s, written so that no backslash changes meaning in
    -- a session with standard_conforming_strings off).
    select coalesce(array_agg(k.key order by k.ord), '{}'),
           coalesce(array_agg(p_scope || ':' || k.key) filter (where k.body is not null), '{}')
      into v_text_keys, v_lock_keys
      from (select i.ord, i.body, md5(lower(regexp_replace(btrim(_trim(coalesce(i.body, ''))), '[[:space:]]+', ' ',
                                                           'g'))) as key
              from rows from (jsonb_to_recordset(p_items) as (body text)) with ordinality as i(body, ord)) k;
    -- Two writers must not both add the same text to a scope: lock each text.
    perform _lock('remember', v_lock_keys);
    v_rows := _remember_numbered(p_scope, p_items, v_peer_names, v_peer_ids, v_text_keys);
    perform set_config('plan_cache_mode', v_write_plan_mode, true);
    if exists (select 1 from unnest(v_rows) r where r.new_id is not null) then
        -- each new memory once per turn it cites, from the turns read above (joined by offset, as in
        -- _check_memory_evidence)
        select coalesce(array_agg(r.new_id order by r.new_id, e.i), '{}'), coalesce(array_agg(t.id order by r.new_id, e.i), '{}')
          into v_memory, v_observation
          from unnest(v_rows) r
          cross join lateral unnest(r.evidence) with ordinality as e(off, i)
          join unnest(v_turn_offsets, v_turn_ids) t(off, id) on t.off = e.off
         where r.new_id is not null;
        -- The memories whose vectors the caller gave are written first and not queued for the worker: the
        -- trigger that queues a new memory passes over them while the setting is on (_memory_changed), and
        -- _remember_vectors stores their vectors below. Each was queued and unqueued at once (issue #46).
        -- Off for the others whatever the session says: set by a caller, it would leave them unqueued.
        if v_vectors is not null then
            perform set_config('pgrecall.memory_vectors_given', 'on', true);
            perform _remember_insert(p_principal_id, p_scope, v_rows, v_vectors, true);
        end if;
        perform set_config('pgrecall.memory_vectors_given', 'off', true);
        if v_vectors is null or exists (select 1 from unnest(v_vectors) v where v is null) then
            perform _remember_insert(p_principal_id, p_scope, v_rows, v_vectors, false);
        end if;
        perform _remember_links(p_scope, v_rows, v_memory, v_observation);
        if v_vectors is not null then
            perform _remember_vectors(v_rows, v_vectors, p_embedding_model, p_embedding_input_version, v_memory,
                                      v_observation);
        end if;
    end if;
    return query
    with r as (select x.ord, x.new_id, x.existing_id, x.first_ord, x.noop from unnest(v_rows) x)
    select n.ord, coalesce(n.new_id, n.existing_id, f.new_id),
           case when n.new_id is not null then 'created' else 'noop' end,
           case when n.new_id is not null then null
                when n.noop is not null then n.noop
                else 'duplicate: this is already remembered' end
      from r n left join r f on f.ord = n.first_ord
     order by n.ord;
    perform set_config('plan_cache_mode', v_saved_plan_mode, true);
end
$$;
comment on function __tenant__._remember_batch(bigint, text, jsonb, __ext__.halfvec[], text, integer) is
    'Internal: the set-wise body of remember() and remember_many().';

create or replace function __tenant__.remember(
    p_principal        text,
    p_scopes           text[],
    p_scope            text,
    p_body             text,
    p_evidence         bigint[],               -- log offsets in p_scope that stated it
    p_purposes         text[],
    p_audience         text default null,      -- a peer name; NULL: everyone authorised for the scope
    p_kind             text default 'note',
    p_title            text default null,
    p_confidence       double precision default 1,
    p_about            text[] default '{}',    -- entity names
    p_observer         text default null,      -- whose view it is (a peer name); NULL: the global view
    p_widening_reason  text default null,      -- why it may reach more peers than a turn it cites
    p_embedding        __ext__.halfvec default null,  -- the caller's vector of it (NULL: queued)
    p_embedding_model  text default null,      -- ... the model that made it
    p_embedding_input_version integer default null  -- ... and the input version of the text it embedded
)
returns table (memory_id bigint, status text, reason text)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
begin
    perform _check_write_scope(p_scope, p_scopes);
    return query
    select b.memory_id, b.status, b.reason
      from _remember_batch(v_principal, p_scope, jsonb_build_array(jsonb_build_object(
               'body', p_body, 'evidence', p_evidence, 'purposes', p_purposes, 'audience', p_audience,
               'kind', p_kind, 'title', p_title, 'confidence', p_confidence, 'about', p_about,
               'observer', p_observer, 'widening_reason', p_widening_reason)),
               case when p_embedding is not null then array[p_embedding] end, p_embedding_model,
               p_embedding_input_version) b;
end
$$;
comment on function __tenant__.remember(text, text[], text, text, bigint[], text[], text, text, text, double precision,
                                        text[], text, text, __ext__.halfvec, text, integer) is
    'Writes a memory with its audience, purposes and evidence; empty or ambiguous input is a no-op with a reason; '
    'PR116 when it would reach more peers than a turn it cites, unless p_widening_reason says why. With '
    'p_embedding (stamped with the tenant''s model and input version, PR155 otherwise) its vector is written too.';

create or replace function __tenant__.remember_many(p_principal text, p_scopes text[], p_scope text, p_items jsonb,
                                                   p_embeddings __ext__.halfvec[] default null,
                                                   p_embedding_model text default null,
                                                   p_embedding_input_version integer default null)
returns table (ordinal integer, memory_id bigint, status text, reason text)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
begin
    perform _check_write_scope(p_scope, p_scopes);
    perform _check_object_array(p_items, 'items',
        'Each item: body, evidence, purposes, and optionally audience, kind, title, confidence, about, observer, '
        'widening_reason.');
    return query select * from _remember_batch(v_principal, p_scope, p_items, p_embeddings, p_embedding_model,
                                               p_embedding_input_version);
end
$$;
comment on function __tenant__.remember_many(text, text[], text, jsonb, __ext__.halfvec[], text, integer) is
    'remember() for a batch: items as a JSON array; all are validated before any is written. One row per item. '
    'p_embeddings: the caller''s vector of each item (NULL for one without), stamped with the tenant''s model and '
    'input version (PR155 otherwise), written with the memories.';

-- What a person said and the memory it states, in one call: the words are
-- appended as a note of the principal's (kind note, outside any session)
-- and cited, with any other offsets in p_evidence. The turn is seen by the
-- memory's audience and the principal (who wrote it down); everyone in the
-- scope when the memory is the scope's. A memory that is a no-op (empty, a
-- question, no words, a duplicate) or refused takes its turn with it: the
-- append runs in a subtransaction that is rolled back, so log_offset is then
-- NULL and nothing was written. (The offset the rolled-back turn took is
-- given back: offsets stay contiguous.)
create or replace function __tenant__.remember_said(
    p_principal        text,
    p_scopes           text[],
    p_scope            text,
    p_said             text,                   -- the words, verbatim: appended and cited
    p_purposes         text[],
    p_body             text default null,      -- the memory; NULL: the words themselves
    p_audience         text default null,
    p_kind             text default 'note',
    p_title            text default null,
    p_confidence       double precision default 1,
    p_about            text[] default '{}',
    p_evidence         bigint[] default '{}',  -- further offsets in p_scope it stands on
    p_source_role      text default 'user',    -- the role the words were said in
    p_payload          jsonb default '{}',
    p_widening_reason  text default null
)
returns table (memory_id bigint, status text, reason text, log_offset bigint)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_offset bigint;
    v_result record;
begin
    perform _check_write_scope(p_scope, p_scopes);
    begin
        select b.log_offset into v_offset
          from _append_batch(p_principal, p_scope, jsonb_build_array(jsonb_build_object(
                   'body', p_said, 'source_role', p_source_role, 'kind', 'note',
                   'payload', coalesce(p_payload, 'null'::jsonb),
                   'audience', case when p_audience is not null then jsonb_build_array(p_audience) end))) b;
        select b.memory_id, b.status, b.reason into v_result
          from _remember_batch(v_principal, p_scope, jsonb_build_array(jsonb_build_object(
                   'body', coalesce(p_body, p_said), 'evidence', coalesce(p_evidence, '{}') || v_offset,
                   'purposes', p_purposes, 'audience', p_audience, 'kind', p_kind, 'title', p_title,
                   'confidence', p_confidence, 'about', p_about, 'widening_reason', p_widening_reason))) b;
        if v_result.status <> 'created' then
            raise exception 'remember_said: nothing remembered, so the turn goes too';
        end if;
    exception when raise_exception then
        if sqlerrm <> 'remember_said: nothing remembered, so the turn goes too' then
            raise;
        end if;
        v_offset := null;  -- the subtransaction's append is undone
    end;
    return query select v_result.memory_id, v_result.status, v_result.reason, v_offset;
end
$$;
comment on function __tenant__.remember_said(text, text[], text, text, text[], text, text, text, text, double precision,
                                             text[], bigint[], text, jsonb, text) is
    'Appends what was said (as the principal''s note) and remembers it, citing it, in one call; a memory that is a '
    'no-op or refused leaves no turn (log_offset NULL).';
