#!/usr/bin/python3
"""One call of com.microsoft.identity.Broker1 (the Microsoft broker's interface, which brokerd serves) through libdbus
(Debian python3-dbus), as an app inside a Flatpak sandbox makes it: to the session bus it was given, which is the
xdg-dbus-proxy's socket. Prints the answer's JSON text; on a D-Bus error prints {"dbusError": NAME}.

    dbus_call.py ADDRESS METHOD REQUEST_JSON
"""
import json
import sys

import dbus


def main():
    address, method, request = sys.argv[1:4]
    bus = dbus.bus.BusConnection(address)
    broker = bus.get_object("com.microsoft.identity.broker1", "/com/microsoft/identity/broker1")
    try:
        answer = broker.get_dbus_method(method, "com.microsoft.identity.Broker1")(
            "0.0", "c0ffee00-0000-0000-0000-000000000000", request, timeout=120)
    except dbus.DBusException as error:
        print(json.dumps({"dbusError": error.get_dbus_name()}))
        return
    print(str(answer))


if __name__ == "__main__":
    main()
