"""The resident embedder (pgrecall.resident): commands from the shell share one loaded model.

Real model, real processes: each `pgrecall` command here is a process of its own, as from a shell, and
reports on stderr whether it loaded the model itself (sentence_transformers imported in it). The first
command that embeds starts the resident embedder; the later ones only send it their texts. Every test
stops every resident embedder it started (the ``home`` fixture).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import psutil
import pytest

from conftest import wait_until
from pgrecall import cli, resident

# Runs `pgrecall ARGS` as a process and adds, as the last line of stderr, whether that process loaded
# the model (imported a runtime: onnxruntime, or sentence_transformers or torch).
_CLI = """
import json, sys
from pgrecall.cli import main
code = main(sys.argv[1:])
print(json.dumps({"loaded_model": any(m in sys.modules for m in ("onnxruntime", "sentence_transformers", "torch"))}),
      file=sys.stderr)
sys.exit(code)
"""


def run(env: dict[str, str], *args: str, timeout: float = 600) -> tuple[int, str, str, bool]:
    """(exit code, stdout, stderr without the last line, whether the process loaded the model)."""
    proc = subprocess.run([sys.executable, "-c", _CLI, *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    lines = proc.stderr.rstrip("\n").split("\n")
    try:
        loaded = json.loads(lines[-1])["loaded_model"]
    except (ValueError, KeyError):  # the process died before it could say
        raise AssertionError(f"pgrecall {' '.join(args)} exited {proc.returncode}: {proc.stderr}") from None
    return proc.returncode, proc.stdout, "\n".join(lines[:-1]), loaded


def resident_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user's shell that chose the resident embedder (PGRECALL_EMBEDDER=resident: since
    the model runs on ONNX Runtime, a command embeds in its own process by default)."""
    env = {k: v for k, v in os.environ.items() if k != "PGRECALL_EMBEDDER"}
    env["PGRECALL_HOME"] = str(home)
    env["PGRECALL_EMBEDDER"] = "resident"
    return {**env, **extra}


def _daemon_pids(home: Path) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "pgrecall.resident" in cmdline and str(home) in cmdline:
            try:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc.pid)
            except psutil.NoSuchProcess:
                pass
    return found


@pytest.fixture
def home():
    """A PGRECALL_HOME that others may enter (so that a test can tell the socket's mode from the folder's);
    every resident embedder started in it is stopped afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="pgres-"))
    folder.chmod(0o755)
    yield folder
    resident.stop(folder)
    for pid in _daemon_pids(folder):  # one a test left in an odd state
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def acme_shell(acme, conninfo, home, monkeypatch):
    """The environment of a shell on tenant acme (the test server), with two memories queued for embedding."""
    env = resident_env(home, PGRECALL_DSN=conninfo.dsn(), PGRECALL_APP_DSN=conninfo.dsn(user="pgrecall_acme_app"),
                       PGRECALL_WORKER_DSN=conninfo.dsn(user="pgrecall_acme_worker"), PGRECALL_TENANT="acme")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for about, text in (("Ana", "Ana lives in Lisbon and drinks green tea"), ("Ben", "Ben plays the cello")):
        assert cli.main(["remember", "--as", "ana", "--purpose", "converse", "--about", about, text]) == 0
    return env


def recall_json(env: dict[str, str], query: str) -> tuple[dict, bool, str]:
    code, out, err, loaded = run(env, "recall", "--as", "ana", query, "--json")
    assert code == 0, err
    return json.loads(out), loaded, err


def test_the_second_recall_from_the_shell_uses_the_resident_model_and_does_not_load_it(acme_shell, home):
    code, out, err, loaded = run(acme_shell, "worker", "--once")
    assert code == 0 and "embedded 2 memories" in out, err
    assert not loaded  # the worker's command started the resident embedder and did not load the model itself
    first = resident.status(home)
    assert first["running"] and first["requests"] >= 1

    answer, loaded, err = recall_json(acme_shell, "what does Ana drink")
    assert not loaded and err == ""
    assert answer["meta"]["dense_available"] and answer["items"][0]["body"].startswith("Ana lives in Lisbon")
    second = resident.status(home)
    assert second["pid"] == first["pid"] and second["requests"] == first["requests"] + 1

    # The vectors it answers are the model's own, as this process computes them.
    from pgrecall.embedder import get_embedder

    texts = ["what does Ana drink", "", "Ünïcödé — 東京 🚀", "a longer text " * 200]
    theirs = resident.ResidentEmbedder(home).embed(texts)
    ours = get_embedder().encode_array(texts)
    assert theirs.shape == (4, 384) and theirs.dtype == np.float32
    assert float(np.abs(theirs - ours).max()) <= 1e-6


def test_stop_removes_the_socket_the_pid_file_and_the_process(acme_shell, home):
    assert run(acme_shell, "embedder", "start")[0] == 0
    info = resident.status(home)
    where = resident.paths(home)
    assert info["running"] and where.socket.exists() and where.pid.exists()
    assert stat.S_IMODE(os.lstat(where.socket).st_mode) == 0o600
    code, out, err, _ = run(acme_shell, "embedder", "stop")
    assert code == 0 and "stopped the resident embedder" in out, err
    assert not psutil.pid_exists(info["pid"]) or psutil.Process(info["pid"]).status() == psutil.STATUS_ZOMBIE
    assert not where.socket.exists() and not where.pid.exists()
    code, out, _, _ = run(acme_shell, "embedder", "status")
    assert code == 3 and out.startswith("stopped")
    code, out, _, _ = run(acme_shell, "embedder", "stop")
    assert code == 0 and "was not running" in out


def test_a_killed_embedder_is_replaced_by_the_next_command_that_embeds(acme_shell, home):
    assert run(acme_shell, "worker", "--once")[0] == 0
    killed = resident.status(home)["pid"]
    os.kill(killed, signal.SIGKILL)
    psutil.wait_procs([psutil.Process(killed)], timeout=30)
    where = resident.paths(home)
    assert where.socket.exists() and where.pid.exists()  # what the dead one left

    answer, loaded, err = recall_json(acme_shell, "who plays the cello")
    assert not loaded and err == ""  # the recall started a new one and waited for it, rather than load the model
    assert answer["meta"]["dense_available"] and answer["items"][0]["body"] == "Ben plays the cello"
    now = resident.status(home)
    assert now["running"] and now["pid"] != killed and now["requests"] == 1


def test_another_user_can_neither_connect_nor_be_answered(acme_shell, home):
    if os.geteuid() != 0:
        pytest.skip("needs root, to run a client as another user (nobody)")
    resident.start(home)
    where = resident.paths(home)
    probe = f"""
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect({str(where.socket)!r})
except OSError as exc:
    print("refused:", exc.strerror); sys.exit(0)
body = json.dumps({{"op": "embed", "texts": ["a secret"]}}).encode()
try:
    s.sendall(struct.pack(">I", len(body)) + body)
except BrokenPipeError:  # it refused, and closed, before the request was sent: its answer is still there
    pass
head = s.recv(4)
print("answered:", s.recv(struct.unpack(">I", head)[0]).decode() if len(head) == 4 else "nothing")
"""
    nobody = {"user": 65534, "group": 65534, "extra_groups": []}

    def as_nobody() -> str:
        # the system's Python (nobody may not enter this install's folders); the probe needs only its stdlib
        done = subprocess.run(["/usr/bin/python3", "-I", "-c", probe], capture_output=True, text=True, timeout=60,
                              cwd="/", **nobody)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert as_nobody() == "refused: Permission denied"  # the socket's mode, 0600
    before = resident.status(home)
    where.socket.chmod(0o666)  # even with the mode opened up, the process serves its owner only
    assert as_nobody() == 'answered: {"error":"this embedder serves its owner only"}'
    where.socket.chmod(0o600)
    assert resident.status(home)["texts"] == before["texts"]

    # And a client sends nothing to a socket that is not its own user's.
    os.chown(where.socket, 65534, 65534)
    with pytest.raises(resident.ResidentUnavailable, match="not a socket of this user"):
        resident._ask(where, {"op": "hello"}, timeout=5)
    os.chown(where.socket, 0, 0)


def test_an_embedder_that_cannot_start_is_said_and_the_command_embeds_itself(home, capfd):
    from pgrecall.embedder import get_embedder

    where = resident.paths(home)
    where.socket.write_text("not a socket")  # its socket cannot be made: the process says so and exits
    vectors = resident.ResidentEmbedder(home).embed(["where does Ana live"])
    err = capfd.readouterr().err
    assert "the resident embedder is not available (it exited with code 5" in err
    assert f"{where.socket} exists and is not a socket" in err
    assert "loading the model in this process instead" in err and str(where.log) in err
    assert np.array_equal(vectors, get_embedder().encode_array(["where does Ana live"]))
    assert where.socket.read_text() == "not a socket" and not _daemon_pids(home)  # left as it was found

    where.socket.unlink()
    where.pid.mkdir()  # its pid file cannot be written
    resident.ResidentEmbedder(home).embed(["where does Ana live"])
    err = capfd.readouterr().err
    assert f"the resident embedder is not available ([Errno 21] Is a directory: '{where.pid}')" in err
    where.pid.rmdir()


_IMPOSTOR = """
import sys
from pathlib import Path
import pgrecall.resident as r
real = r.identity()
r.identity = lambda: {**real, "weights": "another version"}
sys.exit(r.serve(Path(sys.argv[1])))
"""


def test_an_embedder_of_another_model_version_is_replaced_not_used(home):
    # A resident embedder that says it runs other weights (started by an older install, say) ...
    subprocess.Popen([sys.executable, "-c", _IMPOSTOR, str(home), "pgrecall.resident", "serve"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    where = resident.paths(home)
    impostor = wait_until(lambda: resident.status(home)["running"] and resident.status(home)["pid"], timeout=600,
                          what="the impostor to answer")
    assert resident.status(home)["identity"]["weights"] == "another version"
    # ... refuses this version's texts, and is replaced by one of this version.
    reply = resident._ask(where, {"op": "embed", "texts": ["x"], "identity": resident.identity()}, timeout=30)
    assert reply["error"] == "identity"
    vectors = resident.ResidentEmbedder(home).embed(["where does Ana live"])
    now = resident.status(home)
    assert now["pid"] != impostor and now["identity"] == resident.identity() and now["requests"] == 1
    assert not psutil.pid_exists(impostor) or psutil.Process(impostor).status() == psutil.STATUS_ZOMBIE
    from pgrecall.embedder import get_embedder

    assert float(np.abs(vectors - get_embedder().encode_array(["where does Ana live"])).max()) <= 1e-6


def test_the_socket_of_a_deep_home_goes_to_a_private_folder(home):
    deep = home / ("d" * 60) / ("e" * 60)
    where = resident.paths(deep)
    assert where.socket.parent != deep and len(os.fsencode(where.socket)) <= resident.SOCKET_PATH_MAX
    assert where.pid.parent == deep and where.socket.name == resident.SOCKET_NAME
    assert resident.paths(deep).socket == where.socket != resident.paths(home / "other").socket
    deep.mkdir(parents=True)
    try:
        info = resident.start(deep)
        assert info["running"] and info["socket"] == str(where.socket)
        for folder in (where.socket.parent, where.socket.parent.parent):
            st = os.lstat(folder)
            assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
        assert stat.S_IMODE(os.lstat(where.socket).st_mode) == 0o600
        assert resident.ResidentEmbedder(deep).embed(["bees"]).shape == (1, 384)
    finally:
        assert resident.stop(deep)
    assert not where.socket.exists()
    where.socket.parent.rmdir()  # empty: its socket is gone


def test_server_stop_stops_the_resident_embedder_with_the_embedded_server(home):
    """The whole story on an embedded server of its own: the first recall starts the resident embedder, the
    second reuses it, and `pgrecall server stop` stops both."""
    env = resident_env(home, PGRECALL_TENANT="t1")
    for key in ("PGRECALL_DSN", "PGRECALL_APP_DSN", "PGRECALL_WORKER_DSN", "PGRECALL_ADMIN_DSN"):
        env.pop(key, None)
    try:
        for args in (("server", "start"), ("tenant", "create", "t1"), ("scope", "add", "default"),
                     ("peer", "add", "ana", "--kind", "human"),
                     ("remember", "--as", "ana", "--purpose", "converse", "--about", "Ana", "Ana keeps bees")):
            code, _, err, loaded = run(env, *args)
            assert code == 0 and not loaded, (args, err)
        first, loaded, _ = recall_json(env, "who keeps bees")
        assert not loaded and not first["meta"]["dense_available"]  # nothing embedded yet: lexical, and said
        assert run(env, "worker", "--once")[0] == 0
        second, loaded, _ = recall_json(env, "insects and honey")
        assert not loaded and second["meta"]["dense_available"] and second["items"][0]["body"] == "Ana keeps bees"
        pid = resident.status(home)["pid"]
        code, out, err, _ = run(env, "server", "stop")
        assert code == 0 and "stopped the resident embedder" in out and "pgrecall: stopped" in out, err
        assert not resident.status(home)["running"] and not resident.paths(home).socket.exists()
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        run(env, "server", "stop")


def test_the_resident_embedder_is_chosen_not_the_default(home, monkeypatch):
    """Issue #52: the model loads in a fraction of a second on ONNX Runtime, so no command starts a resident
    process behind the user's back; PGRECALL_EMBEDDER=resident chooses it, for the command and the library."""
    from pgrecall import embedder

    monkeypatch.setenv("PGRECALL_HOME", str(home))
    monkeypatch.delenv("PGRECALL_EMBEDDER", raising=False)
    assert isinstance(embedder.default_embedder(), embedder.Embedder)
    monkeypatch.setenv("PGRECALL_EMBEDDER", "process")
    assert isinstance(embedder.default_embedder(), embedder.Embedder)
    monkeypatch.setenv("PGRECALL_EMBEDDER", "resident")
    assert isinstance(embedder.default_embedder(), resident.ResidentEmbedder)
    monkeypatch.setenv("PGRECALL_EMBEDDER", "sometimes")
    with pytest.raises(Exception, match="PGRECALL_EMBEDDER is 'sometimes'"):
        embedder.default_embedder()
    assert not resident.status(home)["running"]  # choosing one started nothing


def test_a_command_without_a_choice_embeds_in_its_own_process_and_starts_no_resident(acme_shell, home):
    env = {k: v for k, v in resident_env(home).items() if k != "PGRECALL_EMBEDDER"}
    code, out, _, loaded = run(env, "recall", "--as", "ana", "what does ana like")
    assert code == 0, out
    assert loaded, "the command did not load the model itself"
    assert _daemon_pids(home) == [] and not resident.status(home)["running"]


def test_the_worker_as_a_service_keeps_embeddings_current_and_stops_on_sigterm(acme_shell, home, db):
    """`pgrecall worker` beside the server: it embeds what is queued, then what comes, with a model of its own
    (it runs for hours; a resident embedder that `server stop` ends is not its to depend on), and SIGTERM
    (systemd's stop, `kill`) ends it cleanly."""
    embedded = lambda: db.execute("select count(*) from acme.memory_embedding").fetchone()[0]
    proc = subprocess.Popen([sys.executable, "-m", "pgrecall.cli", "worker"], env=acme_shell,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def alive_and(count: int):
            assert proc.poll() is None, proc.stderr.read()
            return embedded() == count

        wait_until(lambda: alive_and(2), timeout=600, what="the two queued memories embedded")
        assert cli.main(["remember", "--as", "ana", "--purpose", "converse", "Ana keeps bees on the roof"]) == 0
        wait_until(lambda: alive_and(3), timeout=60, what="the new memory embedded")
        assert not resident.status(home)["running"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert "stopped (SIGTERM)" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_two_commands_at_once_start_one_embedder(home):
    from concurrent.futures import ThreadPoolExecutor

    env = resident_env(home)
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda _: run(env, "embedder", "start", "--json"), range(2)))
    assert [(code, loaded) for code, _, _, loaded in done] == [(0, False), (0, False)], done
    pids = {json.loads(out)["pid"] for _, out, _, _ in done}
    assert len(pids) == 1 and _daemon_pids(home) == list(pids)
