-- Entity names: one entity whatever Unicode form its name was sent in.
--
-- An entity's identity, (scope, normalized_name), compared names without
-- Unicode normalisation: "Émile" from a macOS keyboard (NFD: "E", then a
-- combining acute accent) and the same name in NFC made two entities, and the
-- facts, aliases and memories about Émile were split between them.
-- normalized_name now takes the name in NFC first (the rule of
-- _normalize_name, which every lookup applies to the name it is given), and
-- aliases are stored the same way. NFC needs a UTF8 database, which the
-- control plane already requires (migration 0013).
--
-- Entities of one scope whose names become one key are folded, never a failed
-- upgrade: the live entity created first keeps its row and its name, as given;
-- each later one is folded into it as merge_entities() would (its current
-- single-valued facts that contradict the kept entity's, or an earlier folded
-- one's, are closed with merge's reason, the rest move; its aliases, their
-- data subjects, its sources and the entities merged into it move), and its
-- memories' about-links point at the kept entity (a second link of one memory
-- to it is dropped). Its row is then deleted rather than kept as merge keeps an
-- absorbed one: its name, in NFC, is the kept entity's own, so no alias is
-- needed and the unique key leaves no room for it. An entity already merged
-- into another whose name meets a kept one goes the same way: its links point
-- where it was merged. No entity_merge row is logged (it needs the principal
-- who merged); this migration is the record.

-- Which entity each folded one goes into, kept on the entity's own row while the fold runs (a table made
-- for it would not be distributed with the tenant's on Citus, which then refuses to join them).
alter table __tenant__.entity add column nfc_fold_into bigint;

-- Of each group of one scope and one new key, the keeper: the first live row created, else the first row
-- (by created_at: on Citus ids are not in the order rows were made, a worker's sequence counts apart). A live
-- row folds into its keeper; an absorbed row into the keeper of the entity it was merged into (merges leave
-- no chains: merged_into always names a live row).
update __tenant__.entity e set nfc_fold_into = x.kept_id
  from (select k.id, case when k.merged_into is null then k.keeper else s.keeper end as kept_id
          from (select e2.id, e2.merged_into,
                       first_value(e2.id) over (
                           partition by e2.scope,
                                        lower(regexp_replace(btrim(normalize(e2.name, NFC)), '[[:space:]]+', ' ', 'g'))
                           order by e2.merged_into is not null, e2.created_at, e2.id) as keeper
                  from __tenant__.entity e2) k
          left join (select e3.id,
                            first_value(e3.id) over (
                                partition by e3.scope,
                                             lower(regexp_replace(btrim(normalize(e3.name, NFC)), '[[:space:]]+', ' ', 'g'))
                                order by e3.merged_into is not null, e3.created_at, e3.id) as keeper
                       from __tenant__.entity e3) s on s.id = k.merged_into
         where k.id <> k.keeper) x
 where e.id = x.id;

-- Contradictions between current single-valued facts: the kept entity's win, then the earlier folded one's.
update __tenant__.fact f
   set known = tstzrange(lower(f.known), now()), retraction_reason = 'merged: contradicted the kept entity'
  from __tenant__.entity m
 where m.nfc_fold_into is not null and f.subject_id = m.id and f.single_valued and upper_inf(f.known)
   and exists (select 1 from __tenant__.fact k
                where (k.subject_id = m.nfc_fold_into
                       or k.subject_id in (select m2.id from __tenant__.entity m2
                                            where m2.nfc_fold_into = m.nfc_fold_into
                                              and (m2.created_at, m2.id) < (m.created_at, m.id)))
                  and k.predicate = f.predicate and k.single_valued and upper_inf(k.known)
                  and coalesce(k.observer_peer_id, 0) = coalesce(f.observer_peer_id, 0) and k.valid && f.valid);

update __tenant__.fact f set subject_id = m.nfc_fold_into
  from __tenant__.entity m where m.nfc_fold_into is not null and f.subject_id = m.id;
update __tenant__.fact f set object_id = m.nfc_fold_into
  from __tenant__.entity m where m.nfc_fold_into is not null and f.object_id = m.id;

update __tenant__.entity e
   set aliases = array(select distinct a from unnest(e.aliases || x.aliases) a order by a),
       entity_type = coalesce(e.entity_type, x.entity_type)
  from (select r.nfc_fold_into as kept_id,
               array_agg(a.alias order by r.id) filter (where a.alias is not null) as aliases,
               (array_agg(r.entity_type order by r.id) filter (where r.entity_type is not null))[1] as entity_type
          from __tenant__.entity r
          left join lateral unnest(r.aliases) a(alias) on true
         where r.nfc_fold_into is not null
         group by r.nfc_fold_into) x
 where e.id = x.kept_id;

-- The aliases keep the data subjects that gave them (the absorbed rows' go with them, by cascade).
insert into __tenant__.entity_alias_subject (entity_id, alias, data_subject_id, created_at)
select m.nfc_fold_into, x.alias, x.data_subject_id, x.created_at
  from __tenant__.entity_alias_subject x join __tenant__.entity m on m.id = x.entity_id
 where m.nfc_fold_into is not null
on conflict do nothing;

-- The kept entity answers to the absorbed one's sources (erasure keeps it while any stays).
insert into __tenant__.projection_dependency (kind, row_key, observation_id)
select 'entity', m.nfc_fold_into::text, d.observation_id
  from __tenant__.projection_dependency d join __tenant__.entity m on d.row_key = m.id::text
 where d.kind = 'entity' and m.nfc_fold_into is not null
on conflict do nothing;
delete from __tenant__.projection_dependency d
 using __tenant__.entity m
 where d.kind = 'entity' and d.row_key = m.id::text and m.nfc_fold_into is not null;

-- About-links are never edited otherwise (memory_link_append_only); this one-off change goes around the
-- table's triggers, as 0035 does for facts.
alter table __tenant__.memory_link disable trigger user;
update __tenant__.memory_link l set target_entity_id = m.nfc_fold_into
  from __tenant__.entity m where m.nfc_fold_into is not null and l.target_entity_id = m.id;
alter table __tenant__.memory_link enable trigger user;
-- A memory that was about two of the folded spellings is about the kept entity once: the later link goes,
-- with its sources (the kept link has its own).
delete from __tenant__.projection_dependency d
 using __tenant__.memory_link l
 where d.kind = 'memory_link' and d.row_key = l.id::text
   and l.target_entity_id in (select m.nfc_fold_into from __tenant__.entity m where m.nfc_fold_into is not null)
   and exists (select 1 from __tenant__.memory_link k
                where k.memory_id = l.memory_id and k.target_entity_id = l.target_entity_id and k.id < l.id);
delete from __tenant__.memory_link l
 where l.target_entity_id in (select m.nfc_fold_into from __tenant__.entity m where m.nfc_fold_into is not null)
   and exists (select 1 from __tenant__.memory_link k
                where k.memory_id = l.memory_id and k.target_entity_id = l.target_entity_id and k.id < l.id);

update __tenant__.entity e set merged_into = m.nfc_fold_into
  from __tenant__.entity m where m.nfc_fold_into is not null and e.merged_into = m.id;
delete from __tenant__.entity e where e.nfc_fold_into is not null;
alter table __tenant__.entity drop column nfc_fold_into;

-- The new key. SET EXPRESSION needs PostgreSQL 17; dropping the column drops the unique key with it.
alter table __tenant__.entity drop column normalized_name;
alter table __tenant__.entity add column normalized_name text generated always as (
    lower(regexp_replace(btrim(normalize(name, NFC)), '[[:space:]]+', ' ', 'g'))) stored;
alter table __tenant__.entity add constraint entity_identity unique (scope, normalized_name);
comment on column __tenant__.entity.normalized_name is
    'The name in NFC, trimmed, runs of white space as one space, lowercased: with scope, the entity''s identity.';

-- Aliases that are not in NFC, re-keyed as _normalize_name would key them now.
update __tenant__.entity e
   set aliases = array(select distinct lower(regexp_replace(btrim(normalize(a, NFC)), '[[:space:]]+', ' ', 'g'))
                         from unnest(e.aliases) a order by 1)
 where exists (select 1 from unnest(e.aliases) a where a <> normalize(a, NFC));
insert into __tenant__.entity_alias_subject (entity_id, alias, data_subject_id, created_at)
select x.entity_id, lower(regexp_replace(btrim(normalize(x.alias, NFC)), '[[:space:]]+', ' ', 'g')),
       x.data_subject_id, x.created_at
  from __tenant__.entity_alias_subject x
 where x.alias <> normalize(x.alias, NFC)
on conflict do nothing;
delete from __tenant__.entity_alias_subject x where x.alias <> normalize(x.alias, NFC);
