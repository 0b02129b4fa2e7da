#!/usr/bin/env python3
"""A stand-in for a brokerd of another major protocol version, for the client's version check.

Listens on the Unix socket given as argv[1]. Answers getBrokerVersion with protocol version argv[2], 300 ms late
(so that whatever a client sends right behind it arrives, and is answered, before it), and any other request at once
with an empty result. Appends each request's method to argv[3], one per line, as it arrives.
"""
import asyncio
import json
import sys

SOCKET, PROTOCOL, LOG = sys.argv[1], sys.argv[2], sys.argv[3]


async def answer(request, writer):
    if request["method"] == "getBrokerVersion":
        await asyncio.sleep(0.3)
        result = {"version": "9.9.9", "protocolVersion": PROTOCOL, "methods": []}
    else:
        result = {"accounts": []}
    writer.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n")
    await writer.drain()


async def serve(reader, writer):
    # Each request is answered on its own, as brokerd does: a read sent behind the version question is answered
    # before it.
    answering = set()
    while line := await reader.readline():
        request = json.loads(line)
        with open(LOG, "a") as log:
            log.write(request["method"] + "\n")
        task = asyncio.create_task(answer(request, writer))
        answering.add(task)
        task.add_done_callback(answering.discard)


async def main():
    server = await asyncio.start_unix_server(serve, path=SOCKET)
    async with server:
        await server.serve_forever()


asyncio.run(main())
