#!/usr/bin/env python3
"""com.microsoft.identity.broker1 called over one bus connection, as a long-lived client keeps one (Edge,
linux-entra-sso), through libsystemd's sd-bus with ctypes. Run by DBusRepeatedCallTests.

    one_connection.py STEP...

Steps, in order: `call:METHOD:FILE` calls METHOD with the request JSON in FILE (a new correlation id each call) and
prints one JSON line: the answer, with any accessToken and idToken replaced by their sha256 (never a token), and
the correlation id sent as `sentCorrelationId`;
`mark:PATH` creates PATH; `wait:PATH` waits (at most 60 s) for PATH to exist. Exits 1 when a call fails on the bus.
"""
import ctypes
import hashlib
import json
import os
import sys
import time
import uuid


class BusError(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("message", ctypes.c_char_p), ("_need_free", ctypes.c_int)]


def hashed(value):
    if isinstance(value, dict):
        return {key: (hashlib.sha256(item.encode()).hexdigest() if key in ("accessToken", "idToken") and item else hashed(item))
                for key, item in value.items()}
    return value


def main():
    lib = ctypes.CDLL("libsystemd.so.0")
    bus = ctypes.c_void_p()
    if lib.sd_bus_open_user(ctypes.byref(bus)) < 0:  # $DBUS_SESSION_BUS_ADDRESS
        sys.exit("cannot connect to the session bus")
    for step in sys.argv[1:]:
        kind, _, rest = step.partition(":")
        if kind == "mark":
            open(rest, "w").close()
        elif kind == "wait":
            for _ in range(6000):
                if os.path.exists(rest):
                    break
                time.sleep(0.01)
        elif kind == "call":
            method, _, path = rest.partition(":")
            request = open(path, "rb").read()
            error, reply, text = BusError(), ctypes.c_void_p(), ctypes.c_char_p()
            correlation_id = str(uuid.uuid4())
            r = lib.sd_bus_call_method(bus, b"com.microsoft.identity.broker1", b"/com/microsoft/identity/broker1",
                                       b"com.microsoft.identity.Broker1", method.encode(), ctypes.byref(error),
                                       ctypes.byref(reply), b"sss", b"0.0", correlation_id.encode(), request)
            if r < 0 or lib.sd_bus_message_read(reply, b"s", ctypes.byref(text)) < 0:
                sys.exit(f"{method} failed on the bus: {error.name} {error.message}")
            answer = hashed(json.loads(text.value))
            answer["sentCorrelationId"] = correlation_id
            print(json.dumps(answer), flush=True)
            lib.sd_bus_message_unref(reply)
        else:
            sys.exit(f"unknown step {step}")


if __name__ == "__main__":
    main()
