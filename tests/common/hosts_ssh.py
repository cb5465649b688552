#!/usr/bin/python3
"""ssh's stand-in between namespaced hosts (tests/common/hosts.sh's `agent`), with ssh's
keepalive, so that mpirun learns of a lost host as it would over real ssh.

    hosts_ssh.py client NETNS ADDRESS CORE HOSTNAME COMMAND   (mpirun's launch agent runs this)
    hosts_ssh.py server HOSTNAME COMMAND                      (started by the client inside NETNS)

The client starts the server on the far host (inside its network namespace), which runs
COMMAND there and answers the client's keepalives over TCP, as sshd does. Like
`ssh -o ServerAliveInterval=I -o ServerAliveCountMax=N` the client gives up after N unanswered
keepalives, I seconds apart, says "Timeout, server ... not responding" and exits 255: that is
how mpirun's rsh launcher learns that a daemon's host is gone (a pulled cable, or a host whose
processes, the server among them, are frozen), and ends the job. The server likewise ends
COMMAND when the client has been silent as long (sshd's ClientAliveInterval). I and N come
from HOSTS_SSH_ALIVE_INTERVAL and HOSTS_SSH_ALIVE_COUNT (default 2 s and 4: 8 s, above a
test's STRATA_HEARTBEAT_TIMEOUT, so that Strata's watchdog names the lost host first).
"""
import os
import select
import signal
import socket
import subprocess
import sys
import time

INTERVAL = float(os.environ.get("HOSTS_SSH_ALIVE_INTERVAL", "2"))
COUNT = int(os.environ.get("HOSTS_SSH_ALIVE_COUNT", "4"))


def server(hostname, command):
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen(1)
    # The port goes to the client through a pipe of its own; COMMAND's stdout stays the session's.
    port_fd = int(os.environ.pop("HOSTS_SSH_PORT_FD"))
    os.write(port_fd, f"{listener.getsockname()[1]}\n".encode())
    os.close(port_fd)
    listener.settimeout(30)
    conn, _ = listener.accept()
    child = subprocess.Popen(["sh", "-c", 'hostname "$0" && exec sh -c "$1"', hostname, command],
                             start_new_session=True)
    heard = time.monotonic()
    while child.poll() is None:
        ready, _, _ = select.select([conn], [], [], 0.2)
        if ready:
            data = conn.recv(64)
            if not data:  # the client went away: hang up, as sshd does
                break
            heard = time.monotonic()
            conn.sendall(data)
        elif time.monotonic() - heard > INTERVAL * COUNT:
            break
    if child.poll() is None:
        os.killpg(child.pid, signal.SIGHUP)
        time.sleep(0.5)
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    sys.exit(child.wait() if child.returncode is not None else 255)


def client(netns, address, core, hostname, command):
    port_r, port_w = os.pipe()
    far = subprocess.Popen(["ip", "netns", "exec", netns, "unshare", "--uts", "taskset", "-c", core,
                            sys.executable, os.path.abspath(__file__), "server", hostname, command],
                           pass_fds=(port_w,), env=dict(os.environ, HOSTS_SSH_PORT_FD=str(port_w)))
    os.close(port_w)
    port = int(os.fdopen(port_r).readline() or 0)
    if not port:
        sys.exit(far.wait())
    conn = socket.create_connection((address, port), timeout=10)
    unanswered, sent_at = 0, 0.0
    while far.poll() is None:
        now = time.monotonic()
        if now - sent_at >= INTERVAL:
            if sent_at and unanswered >= COUNT:
                print(f"Timeout, server {address} not responding.", file=sys.stderr, flush=True)
                sys.exit(255)  # ssh's status for a lost connection; the far side is left to its server
            try:
                conn.sendall(b".")
            except OSError:
                pass
            unanswered += 1
            sent_at = now
        ready, _, _ = select.select([conn], [], [], 0.2)
        if ready:
            try:
                if conn.recv(64):
                    unanswered = 0
            except OSError:
                pass
    sys.exit(far.returncode)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], sys.argv[3])
    else:
        client(*sys.argv[2:7])
