-- Rows that are history are never edited: the log, links, revisions, the
-- evidence corrections cited, and the projection registry. (Erasure deletes
-- them; nothing updates them.)

create or replace function __tenant__._refuse_update()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    raise exception using errcode = 'PR110',
        message = format('%s rows are append-only and cannot be updated', tg_table_name),
        hint = 'Append a new row instead; erasure is the only way rows leave.';
end
$$;
comment on function __tenant__._refuse_update() is 'Internal trigger: history tables refuse UPDATE.';

-- One update of the log is the append's own: _append_batch inserts its rows at provisional offsets
-- (2^62 and above) and, holding the scope's counter, gives each its real offset last
-- (append_observation.sql). That, and only that, passes: a provisional offset replaced by a real
-- one, every other column as it was. A row is per row so that it can tell.
create or replace trigger observation_append_only before update on __tenant__.observation
    for each row
    when (not (old.log_offset >= 4611686018427387904 and new.log_offset < 4611686018427387904
               and (to_jsonb(old) - 'log_offset') = (to_jsonb(new) - 'log_offset')))
    execute function __tenant__._refuse_update();
create or replace trigger memory_link_append_only before update on __tenant__.memory_link
    for each statement execute function __tenant__._refuse_update();
create or replace trigger memory_revision_append_only before update on __tenant__.memory_revision
    for each statement execute function __tenant__._refuse_update();
create or replace trigger projection_dependency_append_only before update on __tenant__.projection_dependency
    for each statement execute function __tenant__._refuse_update();
create or replace trigger memory_correction_evidence_append_only before update on __tenant__.memory_correction_evidence
    for each statement execute function __tenant__._refuse_update();
