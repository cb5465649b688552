#!/usr/bin/python3
"""The rate a link gives two hosts that send to each other at once, as an all-reduce's exchange
rounds do (a ping-pong leaves one direction idle, which a shaped link's token bucket spends as
burst: README.md, "The ping-pong ...").

    exchange_rate.py serve PORT BYTES           on one host: accept, then send and receive BYTES at once
    exchange_rate.py connect ADDR PORT BYTES    on the other: the same, and print the rate as JSON

Each side sends BYTES while it receives BYTES (two threads on one TCP connection); the client
prints bytes per second each way over the time both transfers took.
"""
import json
import socket
import sys
import threading
import time

CHUNK = 1 << 20


def exchange(sock, n):
    payload = bytes(CHUNK)
    got = [0]

    def receive():
        while got[0] < n:
            data = sock.recv(min(CHUNK, n - got[0]))
            if not data:
                raise SystemExit(f"the peer closed the connection after {got[0]} of {n} bytes")
            got[0] += len(data)

    t = threading.Thread(target=receive)
    start = time.perf_counter()
    t.start()
    sent = 0
    while sent < n:
        sent += sock.send(payload[: min(CHUNK, n - sent)])
    t.join()
    return time.perf_counter() - start


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        port, n = int(sys.argv[2]), int(sys.argv[3])
        with socket.create_server(("", port)) as srv:
            conn, _ = srv.accept()
            with conn:
                exchange(conn, n)
    elif len(sys.argv) == 5 and sys.argv[1] == "connect":
        addr, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        for _ in range(50):  # the server may not listen yet
            try:
                sock = socket.create_connection((addr, port), timeout=5)
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit(f"cannot connect to {addr}:{port}")
        with sock:
            seconds = exchange(sock, n)
        print(json.dumps({"bytes_each_way": n, "seconds": round(seconds, 6),
                          "gbit_per_s_each_way": round(n * 8 / seconds / 1e9, 4)}))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
