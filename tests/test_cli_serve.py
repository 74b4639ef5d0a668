"""`torchalign serve`: a resident process that keeps the database and runs the searches sent
to it. A command run there prints what it prints alone, its client never imports torch, the
database is read once and again only when its file changes, and a dead or busy server never
costs a result."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import torchalign as ta
from torchalign.cli_serve import Databases

from .conftest import PACKAGE_DATA, REPO

CLIENT = "import sys; from torchalign_client import entry; sys.argv[0] = 'torchalign'; entry()"


def command(env, *args, importtime=False):
    """The console script's process (torchalign_client.entry), as a user runs it."""
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-c", CLIENT, *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def start(env, *args):
    """A server, once it listens (its stderr in a file, read when it stops)."""
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-m", "torchalign", "serve", *map(str, args), "--device", "cpu"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True)
    deadline = time.monotonic() + 120
    while not _said(log, "listening at"):  # (printed once the socket is there)
        assert proc.poll() is None, _said(log, "")
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)
    return proc, log


def stop(proc, log) -> str:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    return _said(log, "")


def _said(log, text):
    log.seek(0)
    said = log.read()
    return said if text in said else ""


@pytest.fixture(scope="module")
def served():
    """A server on a copy of the bundled proteome; (env, database path, process, its log)."""
    folder = tempfile.mkdtemp(prefix="ta-serve-")  # short: a socket path has at most ~100 bytes
    db = os.path.join(folder, "db.fa")
    shutil.copy(PACKAGE_DATA / "proteome_HG003687.fa", db)
    env = dict(os.environ, TORCHALIGN_SERVER=os.path.join(folder, "s.sock"))
    proc, log = start(env, db)
    yield env, db, proc, log
    if proc.poll() is None:
        stop(proc, log)
    shutil.rmtree(folder, ignore_errors=True)


def _reads(err: str) -> int:
    line = [x for x in err.splitlines() if x.startswith("(run by the torchalign server")]
    assert len(line) == 1, err
    return int(line[0].split("; ")[1].split()[0])


def test_a_served_command_prints_what_it_prints_alone(served):
    env, db, _, _ = served
    for args in (["examples/query.fa", db, "--align"], [PACKAGE_DATA / "swissprot_queries20.fa", db, "--top", "3",
                                                         "--outfmt", "6"], ["examples/query.fa", db, "--mode", "global"]):
        there = command(env, "search", *args, "--device", "cpu")
        here = command(env, "search", *args, "--device", "cpu", "--no-server")
        assert there.returncode == here.returncode == 0, there.stderr + here.stderr
        assert there.stdout == here.stdout and len(there.stdout.splitlines()) > 3
        assert "(run by the torchalign server" in there.stderr and "server" not in here.stderr


def test_its_client_does_not_import_torch(served):
    env, db, _, _ = served
    run = command(env, "search", "examples/query.fa", db, "--device", "cpu", "--top", "2", importtime=True)
    assert run.returncode == 0
    modules = {x.split("|")[-1].strip() for x in run.stderr.splitlines() if x.startswith("import time")}
    assert "multiprocessing.connection" in modules and "torch" not in modules and "torchalign" not in modules
    assert len([x for x in run.stdout.splitlines() if not x.startswith("#")]) == 2


def test_relative_paths_and_errors_are_the_callers(served, tmp_path):
    env, db, _, _ = served
    (tmp_path / "q.fa").write_text(">q\nMKVLAAGIWHEAGAWGHEE\n")
    run = subprocess.run([sys.executable, "-c", CLIENT, "search", "q.fa", db, "--device", "cpu"], cwd=tmp_path,
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.splitlines()[1].startswith("q\t")
    bad = command(env, "search", "examples/query.fa", db, "--top", "0", "--device", "cpu")
    assert bad.returncode == 2 and "--top must be >= 1" in bad.stderr
    missing = command(env, "search", "no-such-file.fa", db, "--device", "cpu")
    assert missing.returncode == 2 and "no-such-file.fa" in missing.stderr


def test_the_database_is_read_once_and_again_when_its_file_changes(served):
    env, db, _, _ = served
    first = command(env, "search", "examples/query.fa", db, "--device", "cpu")
    again = command(env, "search", "examples/query.fa", db, "--device", "cpu")
    assert _reads(again.stderr) == _reads(first.stderr)
    query = open(REPO / "examples" / "query.fa").read().split("\n", 1)[1].replace("\n", "")
    with open(db, "a") as f:  # the query itself, which must now be the top hit
        f.write(f">added\n{query}\n")
    changed = command(env, "search", "examples/query.fa", db, "--device", "cpu")
    assert _reads(changed.stderr) == _reads(first.stderr) + 1
    assert changed.stdout.splitlines()[1].split("\t")[1] == "added"
    assert changed.stdout == command(env, "search", "examples/query.fa", db, "--device", "cpu",
                                     "--no-server").stdout


def test_a_closed_output_stops_the_command_not_the_server(served):
    env, db, _, _ = served
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, "search", PACKAGE_DATA / "swissprot_queries20.fa", db,
                             "--device", "cpu"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"#query")
    proc.stdout.close()  # as `| head -1` does
    proc.wait(timeout=120)
    ok = command(env, "search", "examples/query.fa", db, "--device", "cpu")
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 11


def test_a_second_server_at_the_same_address_is_refused(served):
    env, db, _, _ = served
    run = subprocess.run([sys.executable, "-m", "torchalign", "serve", db, "--device", "cpu"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "already listens" in run.stderr


def test_a_dead_servers_socket_is_passed_by_and_replaced(tmp_path):
    folder = tempfile.mkdtemp(prefix="ta-dead-")
    env = dict(os.environ, TORCHALIGN_SERVER=os.path.join(folder, "s.sock"))
    try:
        proc, log = start(env)
        proc.kill()  # no cleanup: the socket and its key stay
        proc.wait()
        assert os.path.exists(env["TORCHALIGN_SERVER"])
        run = command(env, "search", "examples/query.fa", "--device", "cpu")
        assert run.returncode == 0 and len(run.stdout.splitlines()) == 11 and "server" not in run.stderr
        proc, log = start(env)  # a new server takes the address
        served = command(env, "search", "examples/query.fa", "--device", "cpu")
        assert served.stdout == run.stdout and "(run by the torchalign server" in served.stderr
        said = stop(proc, log)
        assert "stopped after 1 command(s), 1 database read(s)" in said
        assert not os.listdir(folder)  # the socket and its key removed
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_databases_keeps_the_named_and_the_last_other(tmp_path):
    files = {}
    for name in ("a", "b", "c"):
        files[name] = tmp_path / f"{name}.fa"
        files[name].write_text(f">{name}\nMKVL\n")
    reads = []

    def read(path, scoring, what):
        reads.append(os.path.basename(path))
        return ta.io.read_named(path, scoring.alphabet, what, scoring)

    kept, sc = Databases([files["a"]], read=read), ta.Scoring()
    for name in "aabbaccb":
        names, batch = kept.get(files[name], sc, "cpu")
        assert names == [name] and batch.codes.numel() == 4
    assert reads == ["a.fa", "b.fa", "c.fa", "b.fa"] and kept.reads == 4
    files["a"].write_text(">a2\nMKVLW\n")
    os.utime(files["a"], ns=(0, 1))  # a new modification time, whatever the clock's resolution
    assert kept.get(files["a"], sc, "cpu")[0] == ["a2"] and reads[-1] == "a.fa"
    assert len(kept.kept) == 2  # the new a, the last other (b)
    files["a"].write_text(">a2\nACGTA\n")
    os.utime(files["a"], ns=(0, 1))
    kept.get(files["a"], ta.Scoring(match=1, mismatch=-1), "cpu")  # another alphabet: read again
    assert reads[-1] == "a.fa" and kept.reads == 6


def test_an_address_others_can_write_to_is_refused():
    # another user could have put a server of their own there: serve refuses, the command runs here
    folder = tempfile.mkdtemp(prefix="ta-open-")
    try:
        os.chmod(folder, 0o777)
        env = dict(os.environ, TORCHALIGN_SERVER=os.path.join(folder, "s.sock"))
        run = subprocess.run([sys.executable, "-m", "torchalign", "serve", "--device", "cpu"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 2 and "not a directory of this user's alone" in run.stderr
        open(env["TORCHALIGN_SERVER"], "w").close()  # something at the address
        here = command(env, "search", "examples/query.fa", "--device", "cpu")
        assert here.returncode == 0 and len(here.stdout.splitlines()) == 11 and "server" not in here.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_requests_it_cannot_run_are_declined_and_it_serves_on(served):
    # another protocol version, another command, a working directory that is gone: the
    # command runs in its own process instead (the client's None), and the server goes on
    from multiprocessing.connection import Client

    import torchalign_client as client

    env, db, _, _ = served
    path = env["TORCHALIGN_SERVER"]
    key = open(client.key_path(path), "rb").read()
    for request in ({"protocol": client.PROTOCOL + 1, "argv": ["search"], "cwd": "/"},
                    {"protocol": client.PROTOCOL, "argv": ["serve"], "cwd": "/"},
                    {"protocol": client.PROTOCOL, "argv": ["search"], "cwd": "/no/such/directory"}):
        with Client(path, family="AF_UNIX", authkey=key) as conn:
            conn.send(request)
            assert conn.recv()[0] == "decline"
    ok = command(env, "search", "examples/query.fa", db, "--device", "cpu")
    assert ok.returncode == 0 and "(run by the torchalign server" in ok.stderr


def test_a_database_starting_with_an_empty_record_warms_up(tmp_path):
    folder = tempfile.mkdtemp(prefix="ta-empty-")
    db = tmp_path / "db.fa"
    db.write_text(">empty\n\n>one\nMKVLAAGIWHEAGAWGHEE\n")
    env = dict(os.environ, TORCHALIGN_SERVER=os.path.join(folder, "s.sock"))
    try:
        proc, log = start(env, db)
        run = command(env, "search", "examples/query.fa", db, "--device", "cpu", "--top", "2")
        assert run.returncode == 0 and "(run by the torchalign server" in run.stderr
        assert [x.split("\t")[1] for x in run.stdout.splitlines()[1:]] == ["one", "empty"]
        stop(proc, log)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_ctrl_c_stops_the_command_quietly_and_the_server_serves_on(served):
    """Ctrl-C in a client waiting for its command's output, then in one waiting for the
    server to take its command (still busy with the first until its next write): exit code
    130 and no traceback either way; the server then serves the next command."""
    env, db, _, _ = served
    for _ in range(2):
        # (Ctrl-C as in a terminal: SIGINT at its default, whatever this process inherited;
        # a shell's background job ignores it)
        proc = subprocess.Popen([sys.executable, "-c", CLIENT, "search", PACKAGE_DATA / "swissprot_queries20.fa",
                                 db, "--device", "cpu", "--threads", "1"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(0.5)  # the server is searching (20 queries: seconds), the client waits
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130 and b"Traceback" not in err, err.decode()[-2000:]
    ok = command(env, "search", "examples/query.fa", db, "--device", "cpu")
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 11
