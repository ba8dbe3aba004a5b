-- Entities: identity is (scope, normalized name); names resolve through
-- aliases and through merges to the surviving entity. A name is content too:
-- a principal sees an entity (its name, its aliases, its facts) only through
-- a memory or a fact it is eligible for that names it (_entity_visible), and
-- every function that looks an entity up by name for a principal
-- (_entity_required) answers for one it may not see exactly as for one that
-- does not exist.
-- Errors: PR114 unknown entity.

-- Plain SQL without SECURITY DEFINER or SET, so the planner inlines it and
-- folds it to a constant instead of calling it once per row; it touches no
-- table and qualifies what it calls.
create or replace function __tenant__._normalize_name(p_name text)
returns text
language sql immutable
as $$
    -- The same rule as entity.normalized_name (migration 0053). NFC first, so that the NFD "Émile" a
    -- macOS keyboard sends is the NFC one, and before lower(): under the C collation lower() leaves "É" but
    -- lowers the "E" of "E" + U+0301, so lowering first would split the two forms again. ([[:space:]] is
    -- \s, without a backslash that standard_conforming_strings = off would eat.)
    select pg_catalog.lower(pg_catalog.regexp_replace(pg_catalog.btrim(pg_catalog.normalize(p_name, 'NFC')),
                                                      '[[:space:]]+', ' ', 'g'))
$$;
comment on function __tenant__._normalize_name(text) is 'Internal: the form of a name that entity identity compares.';

-- The entity a name means in a scope: its own row (followed to where it was
-- merged), else the entity carrying the name as an alias; NULL if none.
create or replace function __tenant__._entity_named(p_scope text, p_name text)
returns bigint
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_key text := _normalize_name(p_name);
    v_id bigint;
begin
    select coalesce(e.merged_into, e.id) into v_id from entity e
     where e.scope = p_scope and e.normalized_name = v_key;
    if v_id is null then
        -- The alias index alone, the scope tested in the aggregate's filter: a generic plan (assert_fact forces
        -- one) would otherwise read every entity of the scope through entity_identity, 0.6 ms at 3k entities,
        -- for a name that is, most often, no alias at all. One table and no subquery: on Citus such a statement
        -- takes the fast path; a subquery is planned and deparsed again at every call.
        select min(e.id) filter (where e.scope = p_scope and e.merged_into is null) into v_id
          from entity e where e.aliases @> array[v_key];
    end if;
    return v_id;
end
$$;
comment on function __tenant__._entity_named(text, text) is
    'Internal: the surviving entity a name or alias denotes in a scope, or NULL.';

-- The rule an entity name (or alias) given by a caller follows: it is shown to
-- people (recall's entities and facts, the duplicate-review screen), so like a
-- peer name it may hold no character of _invisible_characters() (controls,
-- format characters such as bidi overrides and zero-width ones, odd spaces,
-- invisibles), no word of it may start with a combining mark (_combining_marks),
-- and it must have words: an empty or blank name is refused, never dropped. Leading and trailing whitespace is trimmed, as before: an entity's
-- identity (normalized_name) ignores it and models end names with newlines.
-- Unlike a peer name, an entity name may mix Latin, Cyrillic and Greek letters
-- and hold runs of spaces: it is content quoted from what people said
-- ("ΑΒ Testing", a transliteration), not an identity that acts or is
-- authorised, and a look-alike spelling makes at worst a second entity, which
-- merge_entities() folds into the first. It is stored as given, not put in
-- NFC: identity (_normalize_name) compares it in NFC, so the NFD and NFC
-- spellings of a name are one entity whichever came first.
-- The rule applies to new input only: names stored before it are left as they
-- are (no upgrade checks them against it), still found by lookups, carried by
-- correct/supersede, and mergeable into a clean name; merge_entities() takes
-- no new name, so it checks none.
create or replace function __tenant__._entity_name_problem(p_name text)
returns text
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_invisible text;
    v_mark text;
begin
    if p_name is null then
        return 'an entity name must not be NULL';
    end if;
    if _trim(p_name) = '' then
        return 'an entity name must not be empty or only whitespace';
    end if;
    v_invisible := (regexp_match(_trim(p_name), _invisible_characters()))[1];
    if v_invisible is not null then
        return format('it holds %s, a control, format, spacing or invisible character', _code_point(v_invisible));
    end if;
    v_mark := (regexp_match(_trim(p_name), '(?:^|[[:space:]])(' || _combining_marks() || ')'))[1];
    if v_mark is not null then
        return format('a word starts with %s, a combining mark, which has no letter to go on', _code_point(v_mark));
    end if;
    return null;
end
$$;
comment on function __tenant__._entity_name_problem(text) is
    'Internal: NULL if the text may name an entity or be an alias (judged trimmed), else the rule it breaks.';

-- PR140 unless p_name may name an entity (_entity_name_problem); the name, trimmed.
-- p_what: what the caller calls it ('entity name', 'alias', 'subject', 'object').
create or replace function __tenant__._check_entity_name(p_name text, p_what text)
returns text
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_problem text := _entity_name_problem(p_name);
begin
    if v_problem is not null then
        perform _fail('PR140', format('invalid %s %s: %s', p_what, _shown(p_name), v_problem),
                      'An entity name is the words a reader sees: give it without control, format or '
                      'invisible characters, and not blank.');
    end if;
    return _trim(p_name);
end
$$;
comment on function __tenant__._check_entity_name(text, text) is
    'Internal: PR140 unless the text may name an entity or be an alias; returns it trimmed.';

-- Every name of an about list, checked before anything is written (derive, correct, supersede).
create or replace function __tenant__._check_entity_names(p_names text[])
returns void
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_name text;
begin
    foreach v_name in array coalesce(p_names, '{}') loop
        perform _check_length(v_name, 'entity name', 200);
        perform _check_entity_name(v_name, 'entity name');
    end loop;
end
$$;
comment on function __tenant__._check_entity_names(text[]) is
    'Internal: PR140 unless every name of an about list may name an entity, PR151 if one is too long.';

-- Get or create: the entity a name denotes, creating it when nothing does.
-- The caller checks the name and registers what the entity derives from (so
-- assert_fact registers an entity, its fact and the evidence in one statement).
create or replace function __tenant__._entity_for(p_scope text, p_name text, p_type text)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_id bigint := _entity_named(p_scope, p_name);
begin
    if v_id is null then
        insert into entity as e (scope, name, entity_type) values (p_scope, _trim(p_name), p_type)
        on conflict on constraint entity_identity do update set name = e.name
        returning coalesce(e.merged_into, e.id) into v_id;
    end if;
    if p_type is not null then
        update entity e set entity_type = p_type where e.id = v_id and e.entity_type is null;
    end if;
    return v_id;
end
$$;
comment on function __tenant__._entity_for(text, text, text) is
    'Internal: the entity a name denotes in a scope, created if none does (the caller registers its sources).';

-- Entities whose name or alias occurs in a text, as whole words (one to four
-- words long): how recall finds what a query is about.
create or replace function __tenant__._entities_in_text(p_scopes text[], p_text text)
returns bigint[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_grams text[];
begin
    with words as (
        -- in NFC, as names are compared: an NFD letter's combining mark is no [[:alnum:]] and would cut the word
        select w, i from unnest(regexp_split_to_array(lower(normalize(coalesce(p_text, ''), NFC)), '[^[:alnum:]''-]+'))
                         with ordinality as t(w, i)
         where w <> ''
    )
    select array_agg(distinct array_to_string(array(select w2.w from words w2
                                                     where w2.i between w1.i and w1.i + n - 1 order by w2.i), ' '))
      into v_grams
      from words w1, generate_series(1, 4) n
     where exists (select 1 from words w3 where w3.i = w1.i + n - 1);
    if v_grams is null then
        return '{}';
    end if;
    -- Two probes, one per index (identity and aliases), rather than an OR
    -- that would read every entity.
    return (select coalesce(array_agg(distinct coalesce(x.merged_into, x.id)), '{}')
              from (select e.id, e.merged_into from entity e
                     where e.scope = any (p_scopes) and e.normalized_name = any (v_grams)
                    union all
                    -- one containment probe per word group: an overlap with the
                    -- whole list is estimated to match so much that the planner
                    -- would read the table instead of the index
                    select e.id, e.merged_into from unnest(v_grams) g
                      cross join lateral (select e2.id, e2.merged_into from entity e2
                                           where e2.aliases @> array[g] and e2.scope = any (p_scopes)) e) x);
end
$$;
comment on function __tenant__._entities_in_text(text[], text) is
    'Internal: surviving entities in the authorised scopes named (by name or alias) in a text.';

-- Whether a principal may see an entity: a fact whose audience admits it
-- (any purpose, any valid time, believed now or once: the history of what
-- was believed is the principal's to ask about) has it as subject or
-- object, or a memory it is eligible for (history included) is about it or
-- about an entity merged into it (about-links keep pointing at the absorbed
-- entity). Two index probes for facts (subject, object), one for links.
create or replace function __tenant__._entity_visible(p_principal_id bigint, p_scopes text[], p_entity_id bigint)
returns boolean
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result boolean;
begin
    select exists (select 1 from fact f
                    where f.subject_id = p_entity_id and f.scope = any (p_scopes)
                      and _audience_admits(p_principal_id, f.audience_peer_id, null))
        or exists (select 1 from fact f
                    where f.object_id = p_entity_id and f.scope = any (p_scopes)
                      and _audience_admits(p_principal_id, f.audience_peer_id, null))
        or exists (select 1 from memory_link l
                     join memory m on _memory_eligible(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                                                       p_principal_id, p_scopes, null, true, null) and m.id = l.memory_id
                    where l.link_type = 'about'
                      and l.target_entity_id in (select e.id from entity e
                                                  where e.id = p_entity_id or e.merged_into = p_entity_id))
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._entity_visible(bigint, text[], bigint) is
    'Internal: whether a memory or fact the principal is eligible for names the entity (or one merged into it).';

-- The entity a name denotes in the authorised scopes that the principal may
-- see, or PR114: the same error, word for word, whether nothing has that
-- name or only entities the principal may not see do. And the same work: one
-- statement that runs both name probes (the name, the aliases) and the
-- visibility probes for every scope whatever they find (a missing name is
-- checked as entity 0, which no row has), so that how long the answer takes
-- does not tell a hidden entity from a missing one (issue #51). The "offset
-- 0"s keep each probe an output of its own, computed for every row, rather
-- than folded into an expression that would skip it.
create or replace function __tenant__._entity_required(p_principal_id bigint, p_scopes text[], p_name text)
returns bigint
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_key text := _normalize_name(p_name);
    v_id bigint;
begin
    select min(v.id) filter (where v.seen) into v_id
      from (select n.id, _entity_visible(p_principal_id, p_scopes, coalesce(n.id, 0)) as seen
              from (select coalesce(p.by_name, p.by_alias) as id
                      from unnest(p_scopes) s
                     cross join lateral (
                           select (select coalesce(e.merged_into, e.id) from entity e
                                    where e.scope = s and e.normalized_name = v_key) as by_name,
                                  (select a.id
                                     from (select e.id, e.scope, e.merged_into from entity e
                                            where e.aliases @> array[v_key] offset 0) a
                                    where a.scope = s and a.merged_into is null
                                    order by a.id limit 1) as by_alias
                           offset 0) p
                    offset 0) n
            offset 0) v;
    if v_id is null then
        perform _fail('PR114', format('no entity named %s in scopes %s', coalesce(quote_literal(p_name), 'NULL'),
                                      array_to_string(p_scopes, ', ')),
                      'Entities are created by assert_fact() and remember(about => ...); aliases by add_entity_alias(). '
                      'An entity is found only by a principal who may see a memory or fact that names it.');
    end if;
    return v_id;
end
$$;
comment on function __tenant__._entity_required(bigint, text[], text) is
    'Internal: the entity a name denotes in the authorised scopes that the principal may see, or PR114 (hidden or missing alike).';

-- p_data_subject_id: whose personal data the alias is (a nickname, a
-- maiden name); erasing that subject removes the alias (plpgsql/erasure/erase.sql).
-- Without it, the alias is the data of the peers it is about (a peer named
-- like the entity, or like one of its names) and of the principal who gave
-- it: each passes its data subjects on (issue #28).
create or replace function __tenant__.add_entity_alias(p_principal text, p_scopes text[], p_scope text,
                                                       p_entity text, p_alias text,
                                                       p_data_subject_id text default null)
returns table (entity_id bigint, name text, aliases text[])
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint;
    v_id bigint;
    v_other bigint;
    v_alias text;
    v_subjects text[];
begin
    v_principal := _peer_id(p_principal);
    perform _check_write_scope(p_scope, p_scopes);
    perform _check_text(p_alias, 'alias', 200, p_blank => 'an alias is empty');
    v_alias := _check_entity_name(p_alias, 'alias');
    perform _check_subject(p_data_subject_id);
    v_id := _entity_required(v_principal, array[p_scope], p_entity);
    v_other := _entity_named(p_scope, v_alias);
    if v_other is not null and v_other <> v_id then
        -- the other entity's id only to a principal who may see it
        perform _fail('PR107', format('%s already denotes another entity%s in scope %s', _shown(v_alias),
                                      case when _entity_visible(v_principal, array[p_scope], v_other)
                                           then format(' (%s)', v_other) else '' end, p_scope),
                      'Merge the two with merge_entities() if they are the same thing.');
    end if;
    update entity e set aliases = array(select distinct a from unnest(e.aliases || _normalize_name(v_alias)) a order by a)
     where e.id = v_id;
    -- The subjects read first, then inserted from the array: Citus 14.0.1 sends an INSERT ... SELECT of these
    -- tables with a filter it cannot name (`WHERE ( IS NOT NULL)`, a syntax error), or nothing at all.
    v_subjects := array(select p_data_subject_id where p_data_subject_id is not null
                        union
                        select u.subject
                          from entity e, peer p, unnest(p.data_subject_ids) u(subject)
                         where p_data_subject_id is null and e.id = v_id
                           and (p.id = v_principal or _normalize_name(p.name) = e.normalized_name
                                or _normalize_name(p.name) = any (e.aliases)));
    insert into entity_alias_subject (entity_id, alias, data_subject_id)
    select v_id, _normalize_name(v_alias), x.subject from unnest(v_subjects) x(subject)
    on conflict do nothing;
    return query select e.id, e.name, e.aliases from entity e where e.id = v_id;
end
$$;
comment on function __tenant__.add_entity_alias(text, text[], text, text, text, text) is
    'Adds an alias under which an entity the principal may see is found (by recall, traversal and fact lookups); '
    'erasing its data subject (p_data_subject_id, else those of the peers it is about and of the principal) removes it.';

-- Merge: the absorbed entity's facts move to the kept one (a current
-- single-valued fact that would contradict one of the kept entity's is
-- closed instead, keeping the kept entity's value), its names become aliases,
-- and its row stays behind pointing at the survivor. Logged in entity_merge.
create or replace function __tenant__.merge_entities(p_principal text, p_scopes text[], p_scope text,
                                                     p_keep text, p_absorb text)
returns table (merge_id bigint, kept_id bigint, absorbed_id bigint, facts_moved integer, facts_closed integer)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_keep bigint;
    v_absorb bigint;
    v_now timestamptz;
    v_closed bigint[];
    v_moved bigint[];
    v_merge bigint;
begin
    perform _check_write_scope(p_scope, p_scopes);
    -- The admin's operation: it rewrites the graph for every principal, so it
    -- names entities whoever may see them.
    v_keep := _entity_named(p_scope, p_keep);
    v_absorb := _entity_named(p_scope, p_absorb);
    if v_keep is null or v_absorb is null then
        perform _fail('PR114', format('no entity named %s in scopes %s',
                                      coalesce(quote_literal(case when v_keep is null then p_keep else p_absorb end),
                                               'NULL'), p_scope),
                      'Entities are created by assert_fact() and remember(about => ...); aliases by add_entity_alias().');
    end if;
    if v_keep = v_absorb then
        perform _fail('PR107', format('%s and %s are already the same entity (%s)',
                                      quote_literal(p_keep), quote_literal(p_absorb), v_keep));
    end if;
    perform 1 from entity e where e.id in (v_keep, v_absorb) order by e.id for update;
    v_now := clock_timestamp();

    -- Contradictions between current single-valued facts: the kept entity's win.
    with closed as (
        update fact f set known = tstzrange(lower(f.known), v_now), retraction_reason = 'merged: contradicted the kept entity'
         where f.subject_id = v_absorb and f.single_valued and upper_inf(f.known)
           and exists (select 1 from fact k
                        where k.subject_id = v_keep and k.predicate = f.predicate and k.single_valued
                          and upper_inf(k.known) and coalesce(k.observer_peer_id, 0) = coalesce(f.observer_peer_id, 0)
                          and k.valid && f.valid)
        returning f.id)
    select coalesce(array_agg(id order by id), '{}') into v_closed from closed;

    with moved as (
        update fact f set subject_id = case when f.subject_id = v_absorb then v_keep else f.subject_id end,
                          object_id = case when f.object_id = v_absorb then v_keep else f.object_id end
         where f.subject_id = v_absorb or f.object_id = v_absorb
        returning f.id)
    select coalesce(array_agg(id order by id), '{}') into v_moved from moved;

    update entity e
       set aliases = array(select distinct a from unnest(e.aliases || a2.aliases || a2.normalized_name) a order by a)
      from entity a2
     where e.id = v_keep and a2.id = v_absorb;
    update entity e set merged_into = v_keep, aliases = '{}' where e.id = v_absorb or e.merged_into = v_absorb;
    -- The aliases keep the data subjects that gave them.
    insert into entity_alias_subject (entity_id, alias, data_subject_id, created_at)
    select v_keep, x.alias, x.data_subject_id, x.created_at from entity_alias_subject x where x.entity_id = v_absorb
    on conflict do nothing;
    delete from entity_alias_subject x where x.entity_id = v_absorb;
    -- The kept entity now carries the absorbed one's names: it answers to the same sources.
    insert into projection_dependency (kind, row_key, observation_id)
    select 'entity', v_keep::text, d.observation_id from projection_dependency d
     where d.kind = 'entity' and d.row_key = v_absorb::text
    on conflict do nothing;

    insert into entity_merge (scope, kept_id, absorbed_id, facts_moved, facts_closed, merged_by)
    values (p_scope, v_keep, v_absorb, v_moved, v_closed, v_principal)
    returning id into v_merge;
    return query select v_merge, v_keep, v_absorb, cardinality(v_moved), cardinality(v_closed);
end
$$;
comment on function __tenant__.merge_entities(text, text[], text, text, text) is
    'Merges p_absorb into p_keep: facts move, names become aliases, contradictions are closed; logged in entity_merge.';

create or replace function __tenant__.entities(p_principal text, p_scopes text[], p_name text default null)
returns table (entity_id bigint, scope text, name text, entity_type text, aliases text[], merged_into bigint,
               facts bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
begin
    perform _check_scopes(p_scopes);
    perform _check_length(p_name, 'entity name', 800);
    -- An entity is listed only when something the principal may see names it:
    -- a name is content too.
    return query
    with visible_facts as (
        select f.id, f.subject_id, f.object_id from fact f where _fact_eligible(f.scope, f.audience_peer_id, f.purposes, f.valid, f.known,
                                                                                v_principal, p_scopes, null, null, null)
    ), named as (
        select x.subject_id as id from visible_facts x
        union
        select x.object_id from visible_facts x where x.object_id is not null
        union
        select l.target_entity_id from memory_link l
          join memory m on _memory_eligible(m.scope, m.audience_peer_id, m.purposes, m.invalidated_at, m.superseded_by, m.valid,
                                            v_principal, p_scopes, null, true, null) and m.id = l.memory_id
         where l.link_type = 'about'
    )
    select e.id, e.scope, e.name, e.entity_type, e.aliases, e.merged_into,
           (select count(*) from visible_facts x where x.subject_id = e.id or x.object_id = e.id)
      from entity e
     where e.scope = any (p_scopes)
       and (e.id in (select n.id from named n)
            or exists (select 1 from entity m2 where m2.merged_into = e.id and m2.id in (select n.id from named n)))
       and (p_name is null or e.normalized_name = _normalize_name(p_name) or e.aliases @> array[_normalize_name(p_name)])
     order by e.scope, e.normalized_name;
end
$$;
comment on function __tenant__.entities(text, text[], text) is
    'Entities in the authorised scopes that a memory or fact the principal may see names (optionally those a name or alias denotes), with their count of visible current facts.';
