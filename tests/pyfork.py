"""tests/pyfork.py: one Python that imports PyTorch once, and runs each
script a test gives it in a child forked from itself, as `python ARG...`
would run it: a test file's dozens of `"$TORCH2" script.py` then pay
PyTorch's import (seconds each: torch, torch._dynamo, which torch.optim
imports on first use, op_db) once (tests/cli/helper.bash: torch2_serve,
torch2).

    PY pyfork.py serve SOCKET [MODULE...]
        imports the MODULEs, then listens on the Unix socket SOCKET (and
        writes its own interpreter's path to SOCKET.python); each client's
        run goes to a child of its own, forked from this process. Ends when
        its parent ends.
    PY pyfork.py run SOCKET [-u] [-W OPTION]... (SCRIPT | -c CODE | -) [ARG...]
        runs that in a child of the server, with this process's standard
        input, output and error (passed over the socket), working folder
        and environment; exits with its exit status (128 + N for signal N).
"""
import json
import os
import select
import signal
import socket
import struct
import sys

LEN = struct.Struct("!I")


def recv_exact(conn, n):
    b = b""
    while len(b) < n:
        c = conn.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def run_child(conn, req):
    """In the forked child: become `python ARGV...` and exit."""
    import runpy
    import traceback
    import warnings
    signal.signal(signal.SIGINT, signal.default_int_handler)
    conn.close()
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", closefd=False, buffering=1 if req["unbuffered"] else -1)
    sys.stderr = open(2, "w", closefd=False, buffering=1, errors="backslashreplace")
    for w in req["warnoptions"]:
        sys.warnoptions.append(w)
        warnings._processoptions([w])
    argv = req["argv"]
    code = 0
    try:
        if argv[0] in ("-c", "-"):
            src = argv[1] if argv[0] == "-c" else sys.stdin.read()
            sys.argv = ["-c" if argv[0] == "-c" else "-"] + argv[2 if argv[0] == "-c" else 1:]
            sys.path[0] = ""
            exec(compile(src, "<string>" if argv[0] == "-c" else "<stdin>", "exec"),
                 {"__name__": "__main__", "__builtins__": __builtins__})
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: B036: as python prints it, without this frame
        t, v, tb = sys.exc_info()
        traceback.print_exception(t, v, tb.tb_next)
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code & 0xFF)


def handle(conn):
    """In a child of the server: run the request in a grandchild, send its status."""
    msg, fds, _, _ = socket.recv_fds(conn, LEN.size, 3)
    n, = LEN.unpack(msg)
    req = json.loads(recv_exact(conn, n))
    pid = os.fork()
    if pid == 0:
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        run_child(conn, req)
    for fd in fds:
        os.close(fd)
    _, st = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(st)
    conn.sendall(LEN.pack(rc if rc >= 0 else 128 - rc))
    os._exit(0)


def serve(path, modules):
    import importlib
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    for m in modules:
        importlib.import_module(m)
    parent = os.getppid()
    with open(path + ".python.tmp", "w") as f:
        f.write(sys.executable + "\n")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path + ".tmp")
    os.rename(path + ".tmp", path)
    os.rename(path + ".python.tmp", path + ".python")
    s.listen(8)
    try:
        while os.getppid() == parent:
            reap()
            if not select.select([s], [], [], 1.0)[0]:
                continue
            conn, _ = s.accept()
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                s.close()
                try:
                    handle(conn)
                finally:
                    os._exit(1)
            conn.close()
    finally:
        reap()
        os.unlink(path)


def reap():
    """Waits for the handlers that ended (so that their times count as the server's)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def client(path, args):
    req = {"unbuffered": False, "warnoptions": [], "cwd": os.getcwd(), "env": dict(os.environ)}
    while args and args[0] in ("-u", "-W"):
        if args[0] == "-u":
            req["unbuffered"] = True
            args = args[1:]
        else:
            req["warnoptions"].append(args[1])
            args = args[2:]
    if not args:
        sys.exit("pyfork.py run: give SCRIPT, -c CODE or -")
    req["argv"] = args
    body = json.dumps(req).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    socket.send_fds(conn, [LEN.pack(len(body))], [0, 1, 2])
    conn.sendall(body)
    try:
        rc, = LEN.unpack(recv_exact(conn, LEN.size))
    except EOFError:
        sys.exit("pyfork.py run: the server ended before the run's exit status")
    sys.exit(rc)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "run":
        client(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
