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
--   * no word that starts with a combining mark (_combining_marks), which
--     would have no letter to sit on;
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

-- Combining marks (Mn, Mc, Me: accents, vowel signs, enclosing circles): a mark
-- belongs on the letter before it, so a name whose word starts with one has
-- nothing to draw it on (a name of only U+0301 shows as a stray accent, or
-- lands on whatever text a screen puts before it). The ranges are Unicode
-- 14's, as Python's unicodedata lists them; a test checks every one.
create or replace function __tenant__._combining_marks()
returns text
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select $re$[$re$
        || $re$\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a$re$
        || $re$\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8\u06ea-\u06ed\u0711\u0730-\u074a$re$
        || $re$\u07a6-\u07b0\u07eb-\u07f3\u07fd\u0816-\u0819\u081b-\u0823\u0825-\u0827\u0829-\u082d$re$
        || $re$\u0859-\u085b\u0898-\u089f\u08ca-\u08e1\u08e3-\u0903\u093a-\u093c\u093e-\u094f$re$
        || $re$\u0951-\u0957\u0962\u0963\u0981-\u0983\u09bc\u09be-\u09c4\u09c7\u09c8\u09cb-\u09cd\u09d7$re$
        || $re$\u09e2\u09e3\u09fe\u0a01-\u0a03\u0a3c\u0a3e-\u0a42\u0a47\u0a48\u0a4b-\u0a4d\u0a51\u0a70$re$
        || $re$\u0a71\u0a75\u0a81-\u0a83\u0abc\u0abe-\u0ac5\u0ac7-\u0ac9\u0acb-\u0acd\u0ae2\u0ae3$re$
        || $re$\u0afa-\u0aff\u0b01-\u0b03\u0b3c\u0b3e-\u0b44\u0b47\u0b48\u0b4b-\u0b4d\u0b55-\u0b57\u0b62$re$
        || $re$\u0b63\u0b82\u0bbe-\u0bc2\u0bc6-\u0bc8\u0bca-\u0bcd\u0bd7\u0c00-\u0c04\u0c3c\u0c3e-\u0c44$re$
        || $re$\u0c46-\u0c48\u0c4a-\u0c4d\u0c55\u0c56\u0c62\u0c63\u0c81-\u0c83\u0cbc\u0cbe-\u0cc4$re$
        || $re$\u0cc6-\u0cc8\u0cca-\u0ccd\u0cd5\u0cd6\u0ce2\u0ce3\u0d00-\u0d03\u0d3b\u0d3c\u0d3e-\u0d44$re$
        || $re$\u0d46-\u0d48\u0d4a-\u0d4d\u0d57\u0d62\u0d63\u0d81-\u0d83\u0dca\u0dcf-\u0dd4\u0dd6$re$
        || $re$\u0dd8-\u0ddf\u0df2\u0df3\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ecd$re$
        || $re$\u0f18\u0f19\u0f35\u0f37\u0f39\u0f3e\u0f3f\u0f71-\u0f84\u0f86\u0f87\u0f8d-\u0f97$re$
        || $re$\u0f99-\u0fbc\u0fc6\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d$re$
        || $re$\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u135d-\u135f\u1712-\u1715\u1732-\u1734\u1752$re$
        || $re$\u1753\u1772\u1773\u17b4-\u17d3\u17dd\u180b-\u180d\u180f\u1885\u1886\u18a9\u1920-\u192b$re$
        || $re$\u1930-\u193b\u1a17-\u1a1b\u1a55-\u1a5e\u1a60-\u1a7c\u1a7f\u1ab0-\u1ace\u1b00-\u1b04$re$
        || $re$\u1b34-\u1b44\u1b6b-\u1b73\u1b80-\u1b82\u1ba1-\u1bad\u1be6-\u1bf3\u1c24-\u1c37$re$
        || $re$\u1cd0-\u1cd2\u1cd4-\u1ce8\u1ced\u1cf4\u1cf7-\u1cf9\u1dc0-\u1dff\u20d0-\u20f0\u2cef-\u2cf1$re$
        || $re$\u2d7f\u2de0-\u2dff\u302a-\u302f\u3099\u309a\ua66f-\ua672\ua674-\ua67d\ua69e\ua69f\ua6f0$re$
        || $re$\ua6f1\ua802\ua806\ua80b\ua823-\ua827\ua82c\ua880\ua881\ua8b4-\ua8c5\ua8e0-\ua8f1\ua8ff$re$
        || $re$\ua926-\ua92d\ua947-\ua953\ua980-\ua983\ua9b3-\ua9c0\ua9e5\uaa29-\uaa36\uaa43\uaa4c\uaa4d$re$
        || $re$\uaa7b-\uaa7d\uaab0\uaab2-\uaab4\uaab7\uaab8\uaabe\uaabf\uaac1\uaaeb-\uaaef\uaaf5\uaaf6$re$
        || $re$\uabe3-\uabea\uabec\uabed\ufb1e\ufe00-\ufe0f\ufe20-\ufe2f\U000101fd\U000102e0$re$
        || $re$\U00010376-\U0001037a\U00010a01-\U00010a03\U00010a05\U00010a06\U00010a0c-\U00010a0f$re$
        || $re$\U00010a38-\U00010a3a\U00010a3f\U00010ae5\U00010ae6\U00010d24-\U00010d27\U00010eab$re$
        || $re$\U00010eac\U00010f46-\U00010f50\U00010f82-\U00010f85\U00011000-\U00011002$re$
        || $re$\U00011038-\U00011046\U00011070\U00011073\U00011074\U0001107f-\U00011082$re$
        || $re$\U000110b0-\U000110ba\U000110c2\U00011100-\U00011102\U00011127-\U00011134\U00011145$re$
        || $re$\U00011146\U00011173\U00011180-\U00011182\U000111b3-\U000111c0\U000111c9-\U000111cc$re$
        || $re$\U000111ce\U000111cf\U0001122c-\U00011237\U0001123e\U000112df-\U000112ea$re$
        || $re$\U00011300-\U00011303\U0001133b\U0001133c\U0001133e-\U00011344\U00011347\U00011348$re$
        || $re$\U0001134b-\U0001134d\U00011357\U00011362\U00011363\U00011366-\U0001136c$re$
        || $re$\U00011370-\U00011374\U00011435-\U00011446\U0001145e\U000114b0-\U000114c3$re$
        || $re$\U000115af-\U000115b5\U000115b8-\U000115c0\U000115dc\U000115dd\U00011630-\U00011640$re$
        || $re$\U000116ab-\U000116b7\U0001171d-\U0001172b\U0001182c-\U0001183a\U00011930-\U00011935$re$
        || $re$\U00011937\U00011938\U0001193b-\U0001193e\U00011940\U00011942\U00011943$re$
        || $re$\U000119d1-\U000119d7\U000119da-\U000119e0\U000119e4\U00011a01-\U00011a0a$re$
        || $re$\U00011a33-\U00011a39\U00011a3b-\U00011a3e\U00011a47\U00011a51-\U00011a5b$re$
        || $re$\U00011a8a-\U00011a99\U00011c2f-\U00011c36\U00011c38-\U00011c3f\U00011c92-\U00011ca7$re$
        || $re$\U00011ca9-\U00011cb6\U00011d31-\U00011d36\U00011d3a\U00011d3c\U00011d3d$re$
        || $re$\U00011d3f-\U00011d45\U00011d47\U00011d8a-\U00011d8e\U00011d90\U00011d91$re$
        || $re$\U00011d93-\U00011d97\U00011ef3-\U00011ef6\U00016af0-\U00016af4\U00016b30-\U00016b36$re$
        || $re$\U00016f4f\U00016f51-\U00016f87\U00016f8f-\U00016f92\U00016fe4\U00016ff0\U00016ff1$re$
        || $re$\U0001bc9d\U0001bc9e\U0001cf00-\U0001cf2d\U0001cf30-\U0001cf46\U0001d165-\U0001d169$re$
        || $re$\U0001d16d-\U0001d172\U0001d17b-\U0001d182\U0001d185-\U0001d18b\U0001d1aa-\U0001d1ad$re$
        || $re$\U0001d242-\U0001d244\U0001da00-\U0001da36\U0001da3b-\U0001da6c\U0001da75\U0001da84$re$
        || $re$\U0001da9b-\U0001da9f\U0001daa1-\U0001daaf\U0001e000-\U0001e006\U0001e008-\U0001e018$re$
        || $re$\U0001e01b-\U0001e021\U0001e023\U0001e024\U0001e026-\U0001e02a\U0001e130-\U0001e136$re$
        || $re$\U0001e2ae\U0001e2ec-\U0001e2ef\U0001e8d0-\U0001e8d6\U0001e944-\U0001e94a$re$
        || $re$\U000e0100-\U000e01ef$re$
        || $re$]$re$
$$;
comment on function __tenant__._combining_marks() is
    'Internal: a regular expression bracket of the combining marks (Mn, Mc, Me), none of which may start a word of a name.';

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
    v_mark text;
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
    v_mark := (regexp_match(v_name, '(?:^| )(' || _combining_marks() || ')'))[1];
    if v_mark is not null then
        return format('a word starts with %s, a combining mark, which has no letter to go on', _code_point(v_mark));
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
