#pragma once
// The system SQLite (libsqlite3-dev / sqlite-devel). SQLITE_TRANSIENT and SQLITE_STATIC are function-pointer
// casts that Swift cannot import; BrokerStore defines its own equivalent.
#include <sqlite3.h>
