"""``torchalign serve DATABASE...``: a process that keeps databases read, packed and on the
GPU, with the kernels loaded, and runs the ``torchalign search`` commands sent to it
(torchalign_client finds it and relays their output). One command at a time, each exactly as
it would run in a process of its own (the same parser, code and output), in its caller's
working directory; the server's environment applies. A database file is read again when its
size or modification time changes; the databases named at start stay, plus the last other
one a command named."""

from __future__ import annotations

import os
import secrets
import signal
import sys
import tempfile
import traceback
from contextlib import ExitStack, redirect_stderr, redirect_stdout
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener

import torchalign_client as client

from . import cli_search


def add_parser(sub, device_help: str):
    s = sub.add_parser("serve", help="keep databases on the GPU for `torchalign search` (a resident server)",
                       description="Read and pack the databases, load the kernels, then run every "
                                   "`torchalign search` this user starts (on this machine) until stopped (Ctrl-C "
                                   "or SIGTERM): a command then costs its search, not the start of a process, "
                                   "the GPU's setup and the database's reading. The scoring options are those of "
                                   "the warm-up search and choose the alphabet the databases are read in; each "
                                   "command brings its own. `torchalign search --no-server` runs without it.")
    s.add_argument("databases", nargs="*", help="FASTA/FASTQ files to keep (default: the bundled proteome)")
    cli_search.add_scoring_options(s)
    s.add_argument("--address", help="socket path (default: $TORCHALIGN_SERVER, else server.sock in "
                                     "$XDG_RUNTIME_DIR/torchalign-UID); commands find it there")
    s.add_argument("--device", choices=("cuda", "cpu"), help=device_help)
    s.set_defaults(command="serve")
    return s


class Databases:
    """Encoded databases on their device, by file (path, size, modification time) and the
    options that decide how it is read; those named at start stay, plus the last other one."""

    def __init__(self, named, read=cli_search._read):
        self.named = {os.path.realpath(p) for p in named}
        self.kept: dict = {}
        self.read = read
        self.reads = 0

    def get(self, path, scoring, device):
        real = os.path.realpath(path)
        st = os.stat(real)
        key = (real, st.st_size, st.st_mtime_ns, scoring.alphabet.name, scoring.table.shape[0],
               scoring.strict_symbols, str(device))
        if key not in self.kept:
            names, batch = self.read(path, scoring, "database")
            other = real not in self.named
            for old in [k for k in self.kept if k[0] == real or (other and k[0] not in self.named)]:
                del self.kept[old]  # an older read of this file, or the last other database
            self.kept[key] = names, batch.to(device)
            self.reads += 1
        return self.kept[key]


def run(args, device: str, usage_error, main) -> int:
    """Warm up on each database, then serve until stopped; ``main(argv, databases=)`` runs a command."""
    if not hasattr(os, "getuid"):
        raise usage_error("serve needs Unix sockets (Linux, macOS)")
    scoring = cli_search.scoring_from(args, usage_error)
    with ExitStack() as stack:
        paths = args.databases or [cli_search.bundled(cli_search.DEFAULT_DATABASE, stack)]
        databases = Databases(paths)
        path = args.address or client.address()
        listener = _listen(path, usage_error)
        stack.callback(os.unlink, client.key_path(path))
        stack.callback(listener.close)  # (removes the socket)
        for db in paths:  # each read and packed, and the kernels loaded, by a search of its first record
            _warm_up(db, scoring, device, databases, main, args)
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # stops as Ctrl-C does
        print(f"torchalign serve: {len(databases.kept)} database(s) on {device}, listening at {path}",
              file=sys.stderr, flush=True)
        served = [0]  # (counted as each command ends: a stop may come before _serve returns)
        try:
            while True:
                try:
                    conn = listener.accept()
                except (AuthenticationError, OSError, EOFError):
                    continue
                with conn:
                    _serve(conn, databases, main, served)
        except KeyboardInterrupt:
            pass
        print(f"torchalign serve: stopped after {served[0]} command(s), {databases.reads} database read(s)",
              file=sys.stderr, flush=True)
    return 0


def _listen(path: str, usage_error) -> Listener:
    """A listener at ``path`` (its directory made private), its key written beside it; an
    error if a server already listens there, a dead server's socket replaced."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if not client.private(folder):
        raise usage_error(f"{folder} is not a directory of this user's alone (mode 0700 or no write for others): "
                          "another user could take the address; give --address in a directory of your own")
    if os.path.exists(path):
        try:
            with open(client.key_path(path), "rb") as f:
                Client(path, family="AF_UNIX", authkey=f.read()).close()
        except (ConnectionRefusedError, FileNotFoundError):
            os.unlink(path)  # a dead server's socket: nobody listens
        except (OSError, EOFError, AuthenticationError) as e:
            raise usage_error(f"something listens at {path} that is not this user's server ({e}); give --address")
        else:
            raise usage_error(f"a server already listens at {path}; stop it, or give --address")
    key = secrets.token_bytes(32)
    fd = os.open(client.key_path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return Listener(path, family="AF_UNIX", authkey=key)


def _warm_up(db, scoring, device, databases, main, args) -> None:
    names, batch = databases.get(db, scoring, device)
    cli_search.require_residues(f"database {db}", names, batch)
    first = int(batch.lengths.nonzero()[0])  # the first record with residues
    with tempfile.NamedTemporaryFile("w", suffix=".fa") as q, open(os.devnull, "w") as null:
        q.write(f">warm-up\n{batch.alphabet.decode(batch[first].cpu())}\n")
        q.flush()
        argv = ["search", q.name, db, "--matrix", args.matrix, "--gap-open", str(args.gap_open),
                "--gap-extend", str(args.gap_extend), "--device", device, "--top", "1", "--align"]
        if args.match is not None:
            argv += ["--match", str(args.match), "--mismatch", str(args.mismatch)]
        if args.strict_symbols:
            argv.append("--strict-symbols")
        with redirect_stdout(null), redirect_stderr(null):
            rc = main(argv, databases=databases)
    if rc:
        raise ValueError(f"the warm-up search of {db} failed (exit code {rc}); run `torchalign {' '.join(argv)}`")


def _serve(conn, databases, main, served: list) -> None:
    """One command: its output sent as it is written, then its exit code (served[0] counts it)."""
    try:
        request = conn.recv()
    except (EOFError, OSError):
        return
    argv = request.get("argv") or [""]
    here = os.getcwd()
    try:
        if request.get("protocol") != client.PROTOCOL or argv[0] not in client.FORWARDED:
            raise ValueError("not a command of this server's protocol")
        os.chdir(request["cwd"])
    except (ValueError, OSError) as e:  # the command then runs in its own process
        conn.send(("decline", str(e)))
        return
    out, err = _Stream(conn, "out"), _Stream(conn, "err")
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = main(argv, databases=databases)
            except Exception:  # a failure of the command, not of the server
                traceback.print_exc()
                rc = 1
            if rc == 0:
                print(f"(run by the torchalign server, pid {os.getpid()}; {databases.reads} database read(s) "
                      "since it started)", file=sys.stderr)
        served[0] += 1
        conn.send(("exit", rc))
    except (BrokenPipeError, ConnectionError, EOFError):
        pass  # the command's process went away
    finally:
        os.chdir(here)


class _Stream:
    """A text stream whose writes go to the command's process as they come."""

    def __init__(self, conn, kind):
        self.conn, self.kind = conn, kind

    def write(self, text: str) -> int:
        if text:
            self.conn.send((self.kind, text))  # BrokenPipeError when the command's process went away
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
