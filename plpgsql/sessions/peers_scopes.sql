-- Creating the peers and scopes that every operation names, and the rules
-- their names follow.
--
-- A scope name is a lowercase ASCII slug (the table's CHECK), so it has one
-- spelling. A peer name is what people read ("Ana", "Émile", "Bolt the
-- innkeeper"), so it may use any script, but it must read as what it is:
--   * stored in Unicode NFC; a name given in another form (NFD "Émile") is
--     normalised on the way in, by add_peer and by every lookup;
--   * no control (Cc) or format (Cf) characters: no ESC or line breaks, no
--     bidi overrides or isolates, no zero-width characters, no soft hyphen;
--   * no other invisible characters (Hangul fillers, variation selectors,
--     combining grapheme joiner), no spaces but single U+0020 between words:
--     leading or trailing spaces, runs of spaces, NBSP, U+3000 and the other
--     spaces are refused, not trimmed, so a name is never silently changed;
--   * no word that mixes Latin, Cyrillic and Greek letters ("Аna" with a
--     Cyrillic А); a name written wholly in one of them is fine;
--   * unique regardless of case or form (peer.name_fold, migration 0013):
--     add_peer('ANA') fails with PR141 when "Ana" exists. A lookup is exact
--     after NFC, so a call naming "ANA" when the peer is "Ana" is an unknown
--     peer (PR101), never Ana: an application whose users "ana" and "Ana" are
--     two people must not have one act as the other.
-- Refusals are PR140 (invalid name) and PR141 (the name is taken).
--
-- An erased peer is renamed "erased peer<U+00A0><id>" (_erased_peer_name):
-- the no-break space is a character no caller's name may hold, and only that
-- character folds to it, so no name a caller can create ever takes, or
-- collides in name_fold with, the name an erasure gives.
--
-- The regular expressions are dollar-quoted: a plain literal's backslashes
-- would change meaning in a session with standard_conforming_strings off.

-- Characters a peer name may not hold: Cc, Cf, spaces other than U+0020, line
-- and paragraph separators, and default-ignorable characters that render as
-- nothing. The Cc and Cf ranges are Unicode 15's (PostgreSQL's regular
-- expressions have no category classes); a test checks every Cc and Cf code
-- point Python knows is refused.
create or replace function __tenant__._invisible_characters()
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select $re$[$re$
        -- Cc
        || $re$\u0001-\u001f\u007f-\u009f$re$
        -- Cf
        || $re$\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e$re$
        || $re$\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f$re$
        || $re$\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f$re$
        -- Zs but U+0020, Zl, Zp
        || $re$\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u2028\u2029$re$
        -- default ignorable, drawn as nothing: CGJ, Hangul fillers, Khmer inherent vowels,
        -- Mongolian and other variation selectors
        || $re$\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef$re$
        || $re$]$re$
$$;
comment on function __tenant__._invisible_characters() is
    'Internal: a regular expression bracket of the characters a peer name may not hold (Cc, Cf, odd spaces, invisibles).';

-- A character as its code point for a message: U+ and at least four hex digits,
-- every one of them (lpad alone cut U+E0041 to U+E004).
create or replace function __tenant__._code_point(p_char text)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select 'U+' || upper(lpad(to_hex(ascii(p_char)), greatest(4, length(to_hex(ascii(p_char)))), '0'))
$$;
comment on function __tenant__._code_point(text) is 'Internal: the first character of the text as U+XXXX (more digits when it needs them).';

-- The text, quoted for an error message, with the characters of
-- _invisible_characters() shown as \uXXXX (\UXXXXXXXX) so that a message neither hides
-- them nor sends an escape sequence to the reader's terminal; at most 60
-- characters of it.
create or replace function __tenant__._shown(p_text text)
returns text
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_invisible text := _invisible_characters();
    v_out text := '';
    v_char text;
begin
    if p_text is null then
        return 'NULL';
    end if;
    foreach v_char in array regexp_split_to_array(left(p_text, 60), '') loop
        v_out := v_out || case when v_char ~ v_invisible
                               then case when ascii(v_char) > 65535
                                         then chr(92) || 'U' || lpad(to_hex(ascii(v_char)), 8, '0')
                                         else chr(92) || 'u' || lpad(to_hex(ascii(v_char)), 4, '0') end
                               else v_char end;
    end loop;
    return '''' || replace(v_out, '''', '''''') || '''' || case when char_length(p_text) > 60 then '...' else '' end;
end
$$;
comment on function __tenant__._shown(text) is
    'Internal: a name quoted for a message, its invisible characters written as escapes, cut at 60 characters.';

-- NULL if p_name may name a peer, else the rule it breaks (see the header).
-- It judges the NFC form, which is what add_peer stores.
create or replace function __tenant__._peer_name_problem(p_name text)
returns text
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_name text;
    v_invisible text;
    v_word text;
begin
    if p_name is null or p_name = '' then
        return 'a peer name must not be empty';
    end if;
    if char_length(p_name) > 1000 then  -- before normalising a text of any size
        return 'a peer name has at most 200 characters';
    end if;
    v_name := normalize(p_name, NFC);
    if char_length(v_name) > 200 then
        return 'a peer name has at most 200 characters';
    end if;
    v_invisible := (regexp_match(v_name, _invisible_characters()))[1];
    if v_invisible is not null then
        return format('it holds %s, a control, format, spacing or invisible character', _code_point(v_invisible));
    end if;
    if v_name ~ $re$^ | $|  $re$ then
        return 'spaces only go singly between words: none leading, trailing or doubled';
    end if;
    foreach v_word in array string_to_array(v_name, ' ') loop
        if (v_word ~ $re$[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02af\u1d00-\u1dbf\u1e00-\u1eff\u2c60-\u2c7f\ua720-\ua7ff\uab30-\uab6f\uff21-\uff3a\uff41-\uff5a]$re$)::int
         + (v_word ~ $re$[\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f]$re$)::int
         + (v_word ~ $re$[\u0370-\u03ff\u1f00-\u1fff]$re$)::int > 1 then
            return format('the word %s mixes Latin, Cyrillic or Greek letters, as look-alike spellings do',
                          _shown(v_word));
        end if;
    end loop;
    return null;
end
$$;
comment on function __tenant__._peer_name_problem(text) is
    'Internal: NULL if the text may name a peer (judged in NFC), else the rule it breaks.';

-- The name an erased peer gets (see the header): readable as "erased peer
-- 17", and outside every name add_peer accepts.
create or replace function __tenant__._erased_peer_name(p_peer_id bigint)
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select 'erased peer' || chr(160) || p_peer_id
$$;
comment on function __tenant__._erased_peer_name(bigint) is
    'Internal: an erased peer''s new name, which no caller can give a peer (it holds U+00A0).';

-- The data subjects a row's words belong to, with one more (none if NULL).
create or replace function __tenant__._with_subject(p_subjects text[], p_subject text)
returns text[]
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select case when p_subject is null or p_subject = any (p_subjects) then p_subjects
                else p_subjects || p_subject end
$$;
comment on function __tenant__._with_subject(text[], text) is
    'Internal: a row''s data subjects with p_subject added (unchanged when NULL or present).';

-- The data subject of what a peer writes, or what is written about it, when
-- the call names none (issue #28): the first one the peer was given. A peer
-- created with a data subject passes it on, so that forgetting to repeat it
-- on a later call cannot leave the subject's words behind an erasure.
create or replace function __tenant__._peer_subject(p_peer_id bigint)
returns text
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result text;
begin
    select p.data_subject_ids[1] from peer p where p.id = p_peer_id
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._peer_subject(bigint) is
    'Internal: the data subject a peer passes on to what is written by or about it (its first), or NULL.';

create or replace function __tenant__.add_scope(p_name text, p_description text default null)
returns text
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_name is null or octet_length(p_name) > 64 or p_name !~ '^[a-z0-9][a-z0-9_.:-]{0,63}$' then
        perform _fail('PR140', format('invalid scope name %s', _shown(p_name)),
                      'A scope name is 1 to 64 of a-z, 0-9 and _ . : - starting with a letter or digit.');
    end if;
    perform _check_length(p_description, 'scope description', 2000);
    perform _ensure_passage_partition(p_name);
    insert into scope (name, description) values (p_name, p_description)
    on conflict (name) do update set description = coalesce(excluded.description, scope.description);
    return p_name;
end
$$;
comment on function __tenant__.add_scope(text, text) is
    'Creates a scope (a project inside the tenant), or updates its description. Idempotent.';

-- The tenant's scopes, for a client that was not told which ones exist: the
-- MCP server and `pgrecall bundle` authorise every scope when started without
-- --scopes. Names and descriptions are the tenant's configuration, not anyone's
-- content (the app role creates them, and PR103 already says whether a name
-- exists), so no principal is needed.
create or replace function __tenant__.scopes()
returns table (name text, description text, created_at timestamptz)
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select s.name, s.description, s.created_at from scope s order by s.name
$$;
comment on function __tenant__.scopes() is
    'The tenant''s scopes with their descriptions, by name.';

-- p_data_subject_id: whose personal data the name and metadata are; erasing
-- that subject anonymises the peer (plpgsql/erasure/erase.sql).
create or replace function __tenant__.add_peer(p_name text, p_kind text default 'human',
                                              p_metadata jsonb default '{}', p_data_subject_id text default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_problem text := _peer_name_problem(p_name);
    v_name text;
    v_peer peer;
begin
    if v_problem is not null then
        perform _fail('PR140', format('invalid peer name %s: %s', _shown(p_name), v_problem),
                      'A peer name has 1 to 200 characters, single spaces between words, no control, format or '
                      'invisible characters, and no word mixing Latin, Cyrillic and Greek letters.');
    end if;
    v_name := normalize(p_name, NFC);
    perform _check_one_of(p_kind, 'peer kind', _closed_set('peer kind'));
    if p_metadata is null or jsonb_typeof(p_metadata) <> 'object' then
        perform _fail('PR107', 'peer metadata must be a JSON object');
    end if;
    perform _check_json_size(p_metadata, 'peer metadata', 65536);
    perform _check_subject(p_data_subject_id);
    select * into v_peer from peer p where p.name = v_name for update;
    if v_peer.id is not null then
        update peer p set metadata = p.metadata || p_metadata,
                          data_subject_ids = _with_subject(p.data_subject_ids, p_data_subject_id)
         where p.id = v_peer.id;
    else
        -- name_fold is the arbiter: the peer found may be this name (added
        -- meanwhile) or one that differs only in case. Either error below
        -- undoes the metadata merge. (An insert that meets a conflict still
        -- draws an id, hence the lookup above for the common repeat call.)
        insert into peer as p (name, kind, metadata, data_subject_ids)
        values (v_name, p_kind, p_metadata, _with_subject('{}', p_data_subject_id))
        on conflict (name_fold) do update
            set metadata = p.metadata || excluded.metadata,
                data_subject_ids = _with_subject(p.data_subject_ids, p_data_subject_id)
        returning * into v_peer;
    end if;
    if v_peer.name <> v_name then
        perform _fail('PR141', format('peer name %s is taken: peer %s exists, and names that differ only in case are one name',
                                      _shown(v_name), _shown(v_peer.name)),
                      format('Name that peer exactly as %s, or choose another name.', _shown(v_peer.name)));
    end if;
    if v_peer.kind <> p_kind then
        perform _fail('PR107', format('peer %s exists with kind %s, not %s', _shown(v_name), v_peer.kind, p_kind));
    end if;
    return v_peer.id;
end
$$;
comment on function __tenant__.add_peer(text, text, jsonb, text) is
    'Creates a peer (human, agent or other), or merges metadata into an existing one of the same kind. Returns its id. '
    'The name is stored in NFC; PR140 if it breaks the name rules, PR141 if a peer of that name in another case exists. '
    'With p_data_subject_id, erasing that subject anonymises the peer.';
