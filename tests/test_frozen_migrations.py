"""Released migrations cannot change unnoticed: migrations/SHA256SUMS records them, these tests hold it."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from frozen import RELEASES_FROM, SUMS, changed_since_release, problems, read_sums
from pgrecall import sources

MIGRATIONS = Path(sources.sql_root()) / "migrations"
NEXT = f"{sources.latest_version() + 1:04d}"
AFTER_NEXT = f"{sources.latest_version() + 2:04d}"
LATEST = f"{sources.latest_version():04d}"


def test_released_migrations_match_their_recorded_checksums():
    assert problems(MIGRATIONS) == []


def test_every_shipped_migration_is_listed():
    listed = [name for _, name in read_sums((MIGRATIONS / SUMS).read_text())[0]]
    assert listed == [m.name for m in sources.migrations()]


def test_migrations_released_on_main_are_unchanged_here():
    """Catches the edit that also rewrote the migration's line: main's lines are the released ones."""
    repo = MIGRATIONS.parent
    for ref in ("main", "origin/main"):
        shown = subprocess.run(["git", "-C", str(repo), "show", f"{ref}:migrations/{SUMS}"],
                               capture_output=True, text=True) if shutil.which("git") else None
        if shown is not None and shown.returncode == 0:
            break
    else:
        pytest.skip(f"no git checkout with a main branch that has migrations/{SUMS}")
    on_main = dict((name, sha) for sha, name in read_sums(shown.stdout)[0])
    here = dict((name, sha) for sha, name in read_sums((MIGRATIONS / SUMS).read_text())[0])
    # A migration released on main that this branch lacks means the branch is behind main, not wrong.
    changed = {name: (sha, here[name]) for name, sha in on_main.items() if name in here and here[name] != sha}
    assert changed == {}, f"released on {ref} with another checksum: {sorted(changed)}"


def test_no_migration_released_on_main_ever_changed():
    """Every version of the list on main's first-parent line since the rule began: a released migration
    whose text and line were both rewritten in a later commit on main fails here, on a clean checkout too."""
    repo = MIGRATIONS.parent
    if not shutil.which("git"):
        pytest.skip("no git")
    for ref in ("main", "origin/main", "HEAD"):
        if subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", ref],
                          capture_output=True).returncode == 0:
            break
    found = changed_since_release(repo, ref, RELEASES_FROM, (MIGRATIONS / SUMS).read_text())
    if found is None:
        pytest.skip(f"commit {RELEASES_FROM[:10]} is not in this checkout's history")
    assert found == []


def test_a_release_rewritten_in_a_later_commit_is_found(tmp_path):
    """The history check on a repository of its own: a line released in one commit and rewritten in the next
    (the migration edited and its checksum with it) is reported, and so is one removed."""
    if not shutil.which("git"):
        pytest.skip("no git")

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, capture_output=True)

    def release(text):
        (tmp_path / "migrations").mkdir(exist_ok=True)
        (tmp_path / "migrations" / SUMS).write_text(text)
        git("add", "-A")
        git("commit", "-q", "-m", "release")

    first, second = "a" * 64, "b" * 64
    git("init", "-q", "-b", "main")
    release(f"{first}  0001_one.sql\n")
    start = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True,
                           text=True).stdout.strip()
    release(f"{first}  0001_one.sql\n{second}  0002_two.sql\n")
    assert changed_since_release(tmp_path, "main", start, (tmp_path / "migrations" / SUMS).read_text()) == []
    release(f"{second}  0001_one.sql\n{second}  0002_two.sql\n")  # 0001 edited after its release
    found = changed_since_release(tmp_path, "main", start, (tmp_path / "migrations" / SUMS).read_text())
    assert len(found) == 1 and "0001_one.sql was released" in found[0], found
    removed = changed_since_release(tmp_path, "main", start, f"{first}  0001_one.sql\n")
    assert any("0002_two.sql" in f and "no longer listed" in f for f in removed), removed


# -- the check itself, on a copy of the directory with one thing broken ------------------------------

@pytest.fixture
def copy(tmp_path):
    shutil.copytree(MIGRATIONS, tmp_path / "migrations")
    return tmp_path / "migrations"


def _one_problem(directory, word):
    found = problems(directory)
    assert len(found) == 1 and word in found[0], found


def test_an_edited_released_migration_is_reported(copy):
    path = copy / "0003_memories.sql"
    path.write_text(path.read_text() + "\n-- an innocent comment\n")
    _one_problem(copy, "0003_memories.sql changed after its release")


def test_a_new_migration_must_be_listed(copy):
    (copy / f"{NEXT}_next.sql").write_text("create table __tenant__.next (id integer);\n")
    _one_problem(copy, f"{NEXT}_next.sql is not listed")
    sha = hashlib.sha256((copy / f"{NEXT}_next.sql").read_bytes()).hexdigest()
    with open(copy / SUMS, "a") as sums:
        sums.write(f"{sha}  {NEXT}_next.sql\n")
    assert problems(copy) == []


def test_a_removed_released_migration_is_reported(copy):
    (copy / "0007_observation_neighbours.sql").unlink()
    found = problems(copy)
    assert any("0007_observation_neighbours.sql is listed" in p and "gone" in p for p in found), found
    assert any("gap: no 0007" in p for p in found), found


@pytest.mark.parametrize("name,word", [
    (f"{AFTER_NEXT}_after_a_gap.sql", f"gap: no {NEXT}"),
    (f"{int(NEXT)}_short_number.sql", "NNNN_lower_snake"),
    (f"{NEXT}_Capitals.sql", "NNNN_lower_snake"),
    (f"{NEXT}-dashes.sql", "NNNN_lower_snake"),
    (f"{LATEST}_same_number.sql", f"number {LATEST} is taken"),
    ("notes.txt", "NNNN_lower_snake"),
])
def test_numbering_and_names_are_checked(copy, name, word):
    (copy / name).write_text("select 1;\n")
    sha = hashlib.sha256(b"select 1;\n").hexdigest()
    with open(copy / SUMS, "a") as sums:
        sums.write(f"{sha}  {name}\n")
    found = problems(copy)
    assert any(word in p for p in found), found


def test_a_garbled_line_is_reported(copy):
    with open(copy / SUMS, "a") as sums:
        sums.write(f"{NEXT}_next.sql\n")
    _one_problem(copy, "is not '<sha256>  <file>'")


def test_a_reserved_number_fills_a_gap_until_its_migration_arrives(copy):
    """Numbers handed to branches in flight: a later one may land first, the reserved one then takes its place."""
    def add(name, text="select 1;\n"):
        (copy / name).write_text(text)
        with open(copy / SUMS, "a") as sums:
            sums.write(f"{hashlib.sha256(text.encode()).hexdigest()}  {name}\n")

    add(f"{AFTER_NEXT}_landed_first.sql")
    assert any(f"gap: no {NEXT}" in p for p in problems(copy))
    with open(copy / SUMS, "a") as sums:
        sums.write(f"# reserved: {NEXT} (a branch in flight)\n")
    assert problems(copy) == []
    (copy / f"{NEXT}_arrives.sql").write_text("select 2;\n")
    found = problems(copy)
    assert any(f"number {NEXT} is reserved" in p for p in found), found


def test_sha256sum_agrees(copy):
    """The list is sha256sum's format, so a DBA can check a release with coreutils alone."""
    if not shutil.which("sha256sum"):
        pytest.skip("no sha256sum here")
    ok = subprocess.run(["sha256sum", "--check", "--strict", "--quiet", SUMS], cwd=copy, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (copy / "0001_settings.sql").write_text("-- changed\n")
    assert subprocess.run(["sha256sum", "--check", "--quiet", SUMS], cwd=copy, capture_output=True).returncode == 1
