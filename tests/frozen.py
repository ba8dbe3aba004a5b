"""Released migrations are frozen: their checksums are committed in migrations/SHA256SUMS.

The tenant ledger only catches an edited migration on a tenant that already
applied it; this check catches it in the repository, before anything ships.
It reads the directory and the list the way ``sha256sum -c`` does (the hash of
the file's bytes) and reports every problem with the file it concerns.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from pgrecall.sources import MIGRATION_NAME

SUMS = "SHA256SUMS"
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](\S+)$")
# A comment to sha256sum: numbers handed to branches that are not merged yet.
_RESERVED = re.compile(r"^# reserved:((?: \d{4})+)(?: |$)")


def read_sums(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(sha256, file name) per listed migration in order, and the lines that are neither that nor a comment."""
    listed, malformed = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match:
            listed.append((match.group(1), match.group(2)))
        else:
            malformed.append(f"{SUMS} line {number} is not '<sha256>  <file>': {line!r}")
    return listed, malformed


def reserved_numbers(text: str) -> set[int]:
    return {int(n) for line in text.splitlines() if (m := _RESERVED.match(line)) for n in m.group(1).split()}


def problems(directory: Path) -> list[str]:
    """Everything that breaks the frozen-migration rules in this directory, empty when all is well."""
    sums_path = directory / SUMS
    if not sums_path.exists():
        return [f"{sums_path} is missing: the released migrations' checksums are not recorded"]
    sums_text = sums_path.read_text(encoding="utf-8")
    listed, found = read_sums(sums_text)
    reserved = reserved_numbers(sums_text)
    files = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name != SUMS)

    versions = {}
    for name in files:
        match = MIGRATION_NAME.match(name)
        if not match:
            found.append(f"{name}: a migration is named NNNN_lower_snake.sql")
        elif int(match.group(1)) in versions:
            found.append(f"{name}: number {match.group(1)} is taken by {versions[int(match.group(1))]}")
        elif int(match.group(1)) in reserved:
            found.append(f"{name}: number {match.group(1)} is reserved for a branch not merged yet; if this is "
                         f"that branch's migration, take the number off the reserved line of {SUMS}")
            versions[int(match.group(1))] = name
        else:
            versions[int(match.group(1))] = name
    if versions:
        missing = sorted(set(range(1, max(versions) + 1)) - versions.keys() - reserved)
        if missing:
            found.append(f"migration numbers have a gap: no {', '.join(f'{v:04d}' for v in missing)}")

    names = [name for _, name in listed]
    for name in sorted({n for n in names if names.count(n) > 1}):
        found.append(f"{name} is listed more than once in {SUMS}")
    for sha, name in listed:
        path = directory / name
        if not path.is_file():
            found.append(f"{name} is listed in {SUMS} but the file is gone: a released migration is never removed")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != sha:
            found.append(f"{name} changed after its release ({SUMS} has {sha[:12]}): restore it and put the "
                         "change in a new migration")
    for name in files:
        if MIGRATION_NAME.match(name) and name not in names:
            found.append(f"{name} is not listed in {SUMS}: append its line (see the file's header)")
    if names != sorted(names):
        found.append(f"{SUMS} lists the migrations out of order: one line per migration, in number order")
    return found


# main's first-parent history is the record of releases: every version of SHA256SUMS it held from this
# commit on lists only released migrations, and none of them may change or go. (Before it, numbers of
# migrations not yet released were renumbered on main itself.)
RELEASES_FROM = "90858d986a2fc3fd88515c20a28cdc50cccf8a1e"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def changed_since_release(repo: Path, ref: str, since: str, current: str) -> list[str] | None:
    """Each migration that some version of SHA256SUMS on ``ref``'s first-parent line (from ``since`` on)
    listed with another checksum than ``current`` (the list as it is now), or that ``current`` lacks.
    None when ``since`` is not in this checkout's history (a shallow clone): nothing to compare with."""
    if _git(repo, "cat-file", "-e", f"{since}^{{commit}}").returncode != 0:
        return None
    # Only the history this checkout shares with ref: a branch behind main lacks main's newer releases.
    base = _git(repo, "merge-base", "HEAD", ref)
    if base.returncode == 0 and base.stdout.strip():
        ref = base.stdout.strip()
    revs = _git(repo, "rev-list", "--first-parent", ref)
    if revs.returncode != 0:
        return None
    line = revs.stdout.split()
    if since not in line:
        return None
    now = {name: sha for sha, name in read_sums(current)[0]}
    found: dict[str, str] = {}  # per migration, from newest to oldest: its first release speaks last
    for rev in line[:line.index(since) + 1]:
        shown = _git(repo, "show", f"{rev}:migrations/{SUMS}")
        for sha, name in read_sums(shown.stdout)[0] if shown.returncode == 0 else []:
            if name not in now:
                found[name] = f"{name} was released ({rev[:10]}) and is no longer listed"
            elif now[name] != sha:
                found[name] = f"{name} was released ({rev[:10]}) with checksum {sha[:12]}, now {now[name][:12]}"
    return [found[name] for name in sorted(found)]
