#!/usr/bin/env python3
"""Timing helpers of scripts/bench.sh for what the C load client does not do (one key=value line each).

    timing.py answer SOCKET REQUEST_FILE [--since EPOCH] [--timeout S] [--expect STR]...
        Connects (retrying every millisecond while the socket is not there or refuses), sends the request line and
        reads one answer line. Prints ms= from --since (bash's $EPOCHREALTIME just before it started the daemon:
        the daemon's start-up time) or, without it, from the first connection attempt (socket activation: the
        socket is already there and the connection is what starts the daemon).
    timing.py each SOCKET LINES_FILE [--expect STR]...
        Sends each line of LINES_FILE on one connection, one at a time, timing each round trip (removeAccount:
        brokerd answers once the change is on disk, so this is the time of a durable change).
    timing.py procs RUNS [--stdout TEXT | --stdout-lines N] -- COMMAND...
        Runs COMMAND once to warm the page cache, then RUNS times, timing each whole process; with --stdout,
        each run's standard output (stripped) must be TEXT, with --stdout-lines it must be N lines, so a run that
        printed an error is not a figure.
Every answer must contain each --expect string (default "result"); otherwise the exit status is 1.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time


def read_line(sock, deadline):
    data = b""
    while not data.endswith(b"\n"):
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data.decode("utf-8", "replace")


def check(answer, expect):
    missing = [e for e in expect if e not in answer]
    if missing:
        print(f"timing.py: unexpected answer (no {missing[0]}): {answer[:400]}", file=sys.stderr)
        sys.exit(1)


def answer(args):
    with open(args.request, "rb") as f:
        line = f.read().rstrip(b"\r\n") + b"\n"
    deadline = time.monotonic() + args.timeout
    if args.since is None:
        while not os.path.exists(args.socket):
            if time.monotonic() > deadline:
                sys.exit(f"timing.py: {args.socket} did not appear")
            time.sleep(0.001)
    t0 = time.perf_counter()
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(args.socket)
            break
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
            if time.monotonic() > deadline:
                sys.exit(f"timing.py: nothing answered on {args.socket} within {args.timeout} s")
            time.sleep(0.001)
    with s:
        s.sendall(line)
        reply = read_line(s, deadline)
    t1 = time.perf_counter()
    elapsed = (time.time() - args.since) if args.since is not None else (t1 - t0)
    check(reply, args.expect)
    print(f"ms={elapsed * 1000:.1f}")


def each(args):
    with open(args.lines, "rb") as f:
        lines = [l.rstrip(b"\r\n") + b"\n" for l in f if l.strip()]
    times = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(args.socket)
        for line in lines:
            t0 = time.perf_counter()
            s.sendall(line)
            reply = read_line(s, time.monotonic() + 60)
            times.append((time.perf_counter() - t0) * 1000)
            check(reply, args.expect)
    print(f"count={len(times)} median_ms={statistics.median(times):.2f} max_ms={max(times):.2f}")


def procs(args):
    command = args.command
    times = []
    for i in range(args.runs + 1):
        t0 = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        elapsed = (time.perf_counter() - t0) * 1000
        out = done.stdout.decode("utf-8", "replace").strip()
        lines = len(out.splitlines())
        if done.returncode != 0 or (args.stdout is not None and out != args.stdout) or \
                (args.stdout_lines is not None and lines != args.stdout_lines):
            print(f"timing.py: {command[0]} exited {done.returncode}: {(out or done.stderr.decode())[:400]}",
                  file=sys.stderr)
            sys.exit(1)
        if i > 0:
            times.append(elapsed)
    print(f"runs={len(times)} mean_ms={statistics.mean(times):.2f} median_ms={statistics.median(times):.2f} "
          f"min_ms={min(times):.2f}")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    a = sub.add_parser("answer")
    a.add_argument("socket")
    a.add_argument("request")
    a.add_argument("--since", type=float)
    a.add_argument("--timeout", type=float, default=30)
    e = sub.add_parser("each")
    e.add_argument("socket")
    e.add_argument("lines")
    p = sub.add_parser("procs")
    p.add_argument("runs", type=int)
    p.add_argument("--stdout")
    p.add_argument("--stdout-lines", type=int, help="each run must print this many lines")
    for s in (a, e):
        s.add_argument("--expect", action="append")
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1:] if "--" in argv else []   # procs: everything after -- is the command
    args = parser.parse_args(argv[: len(argv) - len(command) - (1 if command else 0)])
    args.command = command
    if args.what == "procs" and not command:
        parser.error("procs needs -- COMMAND...")
    if args.what != "procs":
        args.expect = args.expect or ['"result"']
    {"answer": answer, "each": each, "procs": procs}[args.what](args)


if __name__ == "__main__":
    main()
