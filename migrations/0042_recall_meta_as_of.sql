-- A recall's metadata says which moment it answers for: as_of is the moment
-- given (NULL: now). A saved answer then tells by itself whether it was the
-- memory as it stood then or as it stands; the command line printed this
-- beside the metadata, the Python and SQL callers had to remember it.
alter type __tenant__.recall_meta add attribute as_of timestamptz;
comment on column __tenant__.recall_meta.as_of is
    'The past moment the answer is for (recall''s p_as_of); NULL: as of now.';
