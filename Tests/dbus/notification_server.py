#!/usr/bin/python3
"""The desktop's notification server, as brokerd's tests need one on a private session bus: owns
org.freedesktop.Notifications and records each Notify and CloseNotification call as one JSON line in LOG.

    notification_server.py LOG

Answers as a server does (Notify returns a new id; CloseNotification emits NotificationClosed with reason 3). It plays
a third-party service (GNOME Shell, KDE Plasma, dunst…); it decides nothing for the test. The user's click on an action
is played by the test through the extra method `Click(u id, s action)` (interface org.brokerd.test.Desktop on the same
object): the server emits ActionInvoked(id, action) as a server does when its user clicks, if that notification was
shown with that action. Needs python3-gi (GLib/Gio).
"""
import json
import sys

from gi.repository import Gio, GLib

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
INTERFACE = """
<node>
  <interface name="org.freedesktop.Notifications">
    <method name="Notify">
      <arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
      <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
      <arg type="a{sv}" direction="in"/><arg type="i" direction="in"/><arg type="u" direction="out"/>
    </method>
    <method name="CloseNotification"><arg type="u" direction="in"/></method>
    <method name="GetCapabilities"><arg type="as" direction="out"/></method>
    <method name="GetServerInformation">
      <arg type="s" direction="out"/><arg type="s" direction="out"/><arg type="s" direction="out"/><arg type="s" direction="out"/>
    </method>
    <signal name="NotificationClosed"><arg type="u"/><arg type="u"/></signal>
    <signal name="ActionInvoked"><arg type="u"/><arg type="s"/></signal>
  </interface>
  <interface name="org.brokerd.test.Desktop">
    <method name="Click"><arg type="u" direction="in"/><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
  </interface>
</node>
"""


def main():
    log = open(sys.argv[1], "a", buffering=1)
    state = {"next": 0, "actions": {}}

    def record(entry):
        log.write(json.dumps(entry) + "\n")

    def on_call(connection, sender, path, interface, method, params, invocation):
        args = params.unpack()
        if method == "Notify":
            app, replaces, icon, summary, body, actions, hints, timeout = args
            state["next"] += 1
            state["actions"][state["next"]] = list(actions[0::2])
            record({"method": "Notify", "id": state["next"], "app": app, "summary": summary, "body": body,
                    "actions": list(actions), "hints": {k: v for k, v in hints.items()}, "expire_timeout": timeout})
            invocation.return_value(GLib.Variant("(u)", (state["next"],)))
        elif method == "Click":
            known = args[1] in state["actions"].get(args[0], [])
            record({"method": "Click", "id": args[0], "action": args[1], "emitted": known})
            if known:
                connection.emit_signal(None, PATH, NAME, "ActionInvoked", GLib.Variant("(us)", (args[0], args[1])))
            invocation.return_value(GLib.Variant("(b)", (known,)))
        elif method == "CloseNotification":
            state["actions"].pop(args[0], None)
            record({"method": "CloseNotification", "id": args[0]})
            connection.emit_signal(None, PATH, NAME, "NotificationClosed", GLib.Variant("(uu)", (args[0], 3)))
            invocation.return_value(None)
        elif method == "GetCapabilities":
            invocation.return_value(GLib.Variant("(as)", (["body"],)))
        else:
            invocation.return_value(GLib.Variant("(ssss)", ("test-notifications", "brokerd tests", "1", "1.2")))

    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    node = Gio.DBusNodeInfo.new_for_xml(INTERFACE)
    bus.register_object(PATH, node.interfaces[0], on_call, None, None)
    bus.register_object(PATH, node.interfaces[1], on_call, None, None)
    loop = GLib.MainLoop()
    Gio.bus_own_name_on_connection(bus, NAME, Gio.BusNameOwnerFlags.NONE, None, lambda *_: loop.quit())
    loop.run()


if __name__ == "__main__":
    main()
