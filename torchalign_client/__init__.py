"""The ``torchalign`` command's front door, which imports neither torch nor torchalign.

A ``torchalign search`` first looks for a server started by ``torchalign serve`` (the
database read, packed and kept on the GPU; the kernels loaded). When one listens, the
command is run there and its output relayed, and this process never imports torch. The
command then costs the search and the hits' alignment plus ~0.1 s (20 queries against
570,000 proteins: 2.07-2.12 s against one call's 1.88 s, H100), where a process of its own
first pays seconds for torch, the CUDA context and Triton, and then reads and packs the
database (5.6-8.3 s in all). With no
server, or with ``--no-server``, or under torchrun, the command runs in this process.

The server listens on a Unix socket, ``$TORCHALIGN_SERVER`` if set, else ``server.sock`` in
a directory of the user's own (mode 0700) under ``$XDG_RUNTIME_DIR`` (else ``$TMPDIR`` or
/tmp); ``multiprocessing.connection`` carries the messages and checks the key the server
wrote beside the socket (mode 0600), so only the user who started it can use it.
"""

from __future__ import annotations

import os
import sys

PROTOCOL = 1  # raised when the messages change: a server of another version declines
FORWARDED = ("search",)  # the commands a server runs
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")  # a torchrun rank runs here


def address() -> str:
    """The server's socket path."""
    given = os.environ.get("TORCHALIGN_SERVER")
    if given:
        return given
    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, f"torchalign-{os.getuid()}", "server.sock")


def key_path(socket_path: str) -> str:
    return socket_path + ".key"


def private(folder: str) -> bool:
    """Whether ``folder`` belongs to this user and nobody else can write to it (else another
    user could have put a server of their own at the address)."""
    st = os.stat(folder)
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def entry():
    """The ``torchalign`` command (the console script)."""
    rc = forward(sys.argv[1:])
    if rc is None:
        from torchalign.cli import entry as run_here

        run_here()  # (leaves the process)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        rc = rc or 1
    os._exit(rc)


def forward(argv: list[str]) -> int | None:
    """Run the command in a listening server: its exit code, or None where it is not one a
    server runs, none listens, or the server declines (then it runs here)."""
    if (not argv or argv[0] not in FORWARDED or "--no-server" in argv or not hasattr(os, "getuid")
            or all(v in os.environ for v in TORCHRUN_VARIABLES)):
        return None
    path = address()
    if not os.path.exists(path) or not private(os.path.dirname(os.path.abspath(path))):
        return None
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    try:
        with open(key_path(path), "rb") as f:
            conn = Client(path, family="AF_UNIX", authkey=f.read())
    except (OSError, EOFError, AuthenticationError):  # a socket left by a server that died, or not ours
        return None
    except KeyboardInterrupt:  # Ctrl-C while a busy server has not yet taken the command
        return 130
    with conn:
        try:
            cwd = os.getcwd()
        except OSError:  # (a working directory removed under the process)
            return None
        try:
            conn.send({"protocol": PROTOCOL, "argv": list(argv), "cwd": cwd})
            return _relay(conn, path)
        except KeyboardInterrupt:  # Ctrl-C: the server stops the command at its next write
            return 130


def _relay(conn, path: str) -> int | None:
    """Write the server's output as it comes; the command's exit code."""
    streams = {"out": sys.stdout, "err": sys.stderr}
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            print(f"torchalign {FORWARDED[0]}: error: the server at {path} stopped before the command finished; "
                  "run it again, or with --no-server", file=sys.stderr)
            return 1
        if kind == "exit":
            return payload
        if kind == "decline":  # (before any output)
            return None
        try:
            streams[kind].write(payload)
            streams[kind].flush()
        except BrokenPipeError:  # stdout closed early (| head): the server stops at its next write
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
