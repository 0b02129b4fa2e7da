#!/usr/bin/env python3
"""Fills brokerd's audit (apps.db, made by brokerd itself with its schema) with ROWS rows as brokerd writes them, for
the bench's `brokerctl log` figure: 50 apps (Flatpaks, snaps, executables), 20 client IDs, 1,000 accounts, one row a
second going back from now, outcomes as a day of use gives them. No secret: the audit never holds one.

    make_audit.py APPS_DB ROWS
"""
import sqlite3
import sys
import time

path, count = sys.argv[1], int(sys.argv[2])
apps = [f"flatpak:org.example.App{i}" for i in range(20)] + [f"snap:app{i}" for i in range(10)] \
    + [f"exe:/usr/bin/tool{i}" for i in range(20)]
outcomes = ["cache"] * 17 + ["refresh", "refused", "interactionRequired"]
now = int(time.time())
db = sqlite3.connect(path)
# A bulk load of a test database: no journal and a large page cache while it fills; WAL again (brokerd's mode) after.
db.execute("PRAGMA journal_mode = OFF")
db.execute("PRAGMA synchronous = OFF")
db.execute("PRAGMA cache_size = -400000")


def rows():
    for i in range(count):
        t = now - count + i
        app = apps[i * 7 % len(apps)]
        account = i * 13 % 1000
        yield (t, t, 1 + i % 5, "socket" if i % 3 else "dbus", app, 1000 + i % 30000,
               "/usr/bin/" + app.split(":")[1].split(".")[-1], f"client-{i % 20}",
               "https://graph.microsoft.com/User.Read", f"uid-{account}.tenant", f"user{account}@contoso.example",
               outcomes[i % len(outcomes)], None)


with db:
    db.executemany("INSERT INTO audit (time, last_time, count, front_end, app, pid, executable, client_id, scopes, account,"
                   " username, outcome, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows())
db.execute("PRAGMA journal_mode = WAL")
print(db.execute("SELECT count(*) FROM audit").fetchone()[0])
