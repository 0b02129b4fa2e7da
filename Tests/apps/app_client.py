#!/usr/bin/python3
"""An app of brokerd's app-identity tests: a plain JSON-RPC client of brokerd's socket (standard library only), run on
the host or inside a bubblewrap sandbox. It prints one JSON line per answer with the source or the error, never the
token.

    app_client.py SOCKET silent CLIENT_ID HOME_ACCOUNT_ID SCOPE [COUNT]
        asks COUNT times (default 1) on one connection.
    app_client.py SOCKET alternate CLIENT_ID HOME_ACCOUNT_ID,HOME_ACCOUNT_ID... SCOPE COUNT
        asks COUNT times for each account in turn, on one connection.
    app_client.py SOCKET handover CLIENT_ID HOME_ACCOUNT_ID SCOPE GO_FILE
        connects and asks getBrokerVersion (brokerd has now identified the connection), prints {"parent": PID}, forks and
        exits: the child keeps the connection, waits until GO_FILE exists, then asks once and prints the answer. The
        test meanwhile gives the parent's pid to another process.
"""
import json
import os
import socket
import sys
import time

AUTHORITY = "https://login.microsoftonline.com/72f988bf-0000-0000-0000-000000000001"


def call(connection, reader, request):
    connection.sendall((json.dumps(request) + "\n").encode())
    line = reader.readline()
    if not line:
        return {"closed": True}
    answer = json.loads(line)
    if "result" in answer:
        result = answer["result"]
        return {"source": result.get("source"), "version": result.get("version")}
    error = answer["error"]
    return {"error": error["code"], "reason": (error.get("data") or {}).get("reason"), "message": error["message"]}


def silent(client_id, hid, scope, number):
    return {"jsonrpc": "2.0", "id": number, "method": "acquireTokenSilently",
            "params": {"clientId": client_id, "authority": AUTHORITY, "scopes": [scope], "account": hid}}


def main():
    path, mode = sys.argv[1], sys.argv[2]
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(path)
    reader = connection.makefile("r")
    if mode == "silent":
        client_id, hid, scope = sys.argv[3:6]
        for number in range(int(sys.argv[6]) if len(sys.argv) > 6 else 1):
            print(json.dumps(call(connection, reader, silent(client_id, hid, scope, number))), flush=True)
    elif mode == "alternate":
        client_id, hids, scope, count = sys.argv[3], sys.argv[4].split(","), sys.argv[5], int(sys.argv[6])
        for number in range(count):
            for hid in hids:
                print(json.dumps(call(connection, reader, silent(client_id, hid, scope, number))), flush=True)
    elif mode == "handover":
        client_id, hid, scope, go = sys.argv[3:7]
        print(json.dumps(call(connection, reader, {"jsonrpc": "2.0", "id": 0, "method": "getBrokerVersion"})), flush=True)
        print(json.dumps({"parent": os.getpid()}), flush=True)
        if os.fork() != 0:
            os._exit(0)
        deadline = time.time() + 60
        while not os.path.exists(go) and time.time() < deadline:
            time.sleep(0.02)
        print(json.dumps(call(connection, reader, silent(client_id, hid, scope, 1))), flush=True)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
