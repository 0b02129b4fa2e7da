#!/usr/bin/env python3
"""Turns the key=value figures that scripts/bench.sh collected into its one table, printed as text and written as
markdown (for docs/performance.md). Ratios are computed here, always against a baseline measured in the same run.

    table.py RESULTS_FILE MARKDOWN_OUT

Exit status 1 when any figure of the table is missing (it could not be measured; the reason bench.sh recorded is
listed under the table). A target that is missed is only a FAIL in the table, not an error.
"""
import sys

figures, notes = {}, []
for line in open(sys.argv[1], encoding="utf-8"):
    key, sep, value = line.rstrip("\n").partition("=")
    if not sep:
        continue
    if key == "note":
        notes.append(value)
    else:
        figures[key] = value


def num(key):
    try:
        return float(figures[key])
    except (KeyError, ValueError):
        return None


def fmt(value, unit):
    if value is None:
        return "MISSING"
    if unit == "req/s":
        return f"{value:,.0f} req/s"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    if unit == "connections":
        return f"{value:.0f}"
    if unit in ("µs", "ms"):
        return f"{value:.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"
    return f"{value:.2f} {unit}"


g = figures.get
big = f"{int(num('big_accounts') or 0):,} accounts / {int(num('big_tokens') or 0):,} tokens"
quick = g('mode', '').startswith('quick')
msal = f"msal-python {g('msal1_version', '?')}"
# (label, key, unit, baseline label, baseline key, kind, limit): kind "le"/"ge" compare value/baseline with limit,
# "max" compares the value itself with limit, None is a figure without a target (a baseline or for information).
sections = [
    ("1. Raw AF_UNIX echo: C echo server, same load client, same request line (the baseline)", [
        ("echo p50, 1 client, same core (sequential)", "echo1_p50_us", "µs", None, None, None, None),
        ("echo p99, 1 client, same core", "echo1_p99_us", "µs", None, None, None, None),
    ] + ([] if g("cross_core") == "unavailable" else [
        ("echo p50, 1 client, across cores", "echo1x_p50_us", "µs", None, None, None, None),
        ("echo p99, 1 client, across cores", "echo1x_p99_us", "µs", None, None, None, None),
    ]) + [
        ("echo throughput, 64 clients", "echo64_rps", "req/s", None, None, None, None),
        ("echo p50 under 64 clients", "echo64_p50_us", "µs", None, None, None, None),
        (f"for information: echo replying with brokerd's answer ({int(num('answer_bytes') or 0):,} bytes), p50 same core",
         "echoanswer1_p50_us", "µs", None, None, None, None),
        ("for information: echo replying with brokerd's answer, 64 clients", "echoanswer64_rps", "req/s",
         None, None, None, None),
    ]),
]
for size, tag in (("1 account", "one"), (big, "big")):
    rows = [
        ("p50, 1 client, same core", f"{tag}1_p50_us", "µs", "echo p50", "echo1_p50_us", "le", 3),
        ("p99, 1 client, same core", f"{tag}1_p99_us", "µs", "echo p50", "echo1_p50_us", "le", 10),
    ] + ([] if g("cross_core") == "unavailable" else [
        ("p50, 1 client, across cores", f"{tag}1x_p50_us", "µs", "echo p50", "echo1x_p50_us", "le", 3),
        ("p99, 1 client, across cores", f"{tag}1x_p99_us", "µs", "echo p50", "echo1x_p50_us", "le", 10),
    ]) + [
        ("throughput, 64 clients (median of 3 rounds)", f"{tag}64_rps", "req/s",
         "echo 64 clients, a run before each round (median)", f"{tag}64echo_rps", "ge", 0.5),
        (f"for information: the rounds, brokerd / echo: {g(f'{tag}64_rounds') or '?'}; brokerd vs section 1's echo",
         f"{tag}64_rps", "req/s", "echo 64 clients", "echo64_rps", None, None),
        ("p50 under 64 clients", f"{tag}64_p50_us", "µs", "echo p50 under 64", "echo64_p50_us", None, None),
        ("throughput, 64 clients, vs the echo replying with the answer", f"{tag}64_rps", "req/s",
         "echo with the answer, 64 clients", "echoanswer64_rps", None, None),
        ("p50 (same core) vs msal-python in-process on that core (median of 3 alternating rounds)", f"{tag}alt_p50_us",
         "µs", f"{msal} p50, a loop before each round (median)", f"msal{tag}alt_p50_us", "le", 1),
        (f"for information: the rounds, brokerd / msal-python{' / brokerd at 1 account' if tag == 'big' else ''}: "
         f"{g(f'{tag}alt_rounds') or '?'}; brokerd's first row vs section 3", f"{tag}1_p50_us", "µs", f"{msal} p50", "msal1_p50_us" if tag == "one" else "msalbig_p50_us",
         None, None),
    ]
    if tag == "big":
        rows.append(("p50 (same core; median of the 3 rounds above) vs brokerd at 1 account in the same rounds",
                     "bigalt_p50_us", "µs", "brokerd p50, 1 account (median)", "bigone_p50_us", "le", 1.2))
    sections.append((f"2. brokerd acquireTokenSilently, cache hit, {size}", rows))
# 2b. The varied mode: each request a random (account, scope set) line of the document's varied requests, never the
# same line twice in a row, so no memo of the last request answers; the baseline is the echo server driven with the
# same lines (echoVone: the 1-account document's, echoVbig: the big one's).
lines = f"{int(num('varied_lines') or 0):,} lines"
echo_rows = []
for size, tag in (("1 account", "echoVone"), (big, "echoVbig")):
    echo_rows += [
        (f"echo p50, 1 client, same core, the varied lines of {size}", f"{tag}1_p50_us", "µs", None, None, None, None),
        (f"echo p99, 1 client, same core, the varied lines of {size}", f"{tag}1_p99_us", "µs", None, None, None, None),
    ] + ([] if g("cross_core") == "unavailable" else [
        (f"echo p50, 1 client, across cores, the varied lines of {size}", f"{tag}1x_p50_us", "µs",
         None, None, None, None),
        (f"echo p99, 1 client, across cores, the varied lines of {size}", f"{tag}1x_p99_us", "µs",
         None, None, None, None),
    ]) + [
        (f"echo throughput, 64 clients, the varied lines of {size}", f"{tag}64_rps", "req/s", None, None, None, None),
        (f"echo p50 under 64 clients, the varied lines of {size}", f"{tag}64_p50_us", "µs", None, None, None, None),
    ]
sections.append((f"2b. Raw AF_UNIX echo driven with the varied requests (each document's {lines} of random (account, "
                 "scope set) pairs, a random line each time, never the same twice in a row): the varied mode's baseline",
                 echo_rows))
for size, tag, echo in (("1 account", "oneV", "echoVone"), (big, "bigV", "echoVbig")):
    rows = [
        ("p50, 1 client, same core", f"{tag}1_p50_us", "µs", "echo p50, same lines", f"{echo}1_p50_us", "le", 1.5),
        ("p99, 1 client, same core", f"{tag}1_p99_us", "µs", "echo p50, same lines", f"{echo}1_p50_us", "le", 5),
    ] + ([] if g("cross_core") == "unavailable" else [
        ("p50, 1 client, across cores", f"{tag}1x_p50_us", "µs", "echo p50, same lines", f"{echo}1x_p50_us", "le", 1.5),
        ("p99, 1 client, across cores", f"{tag}1x_p99_us", "µs", "echo p50, same lines", f"{echo}1x_p50_us", "le", 5),
    ]) + [
        ("throughput, 64 clients (median of 3 rounds)", f"{tag}64_rps", "req/s",
         "echo 64 clients, same lines, a run before each round (median)", f"{tag}64echo_rps", "ge", 0.5),
        (f"for information: the rounds, brokerd / echo: {g(f'{tag}64_rounds') or '?'}; brokerd vs the echo above",
         f"{tag}64_rps", "req/s", "echo 64 clients, same lines", f"{echo}64_rps", None, None),
        ("p50 under 64 clients", f"{tag}64_p50_us", "µs", "echo p50 under 64, same lines", f"{echo}64_p50_us",
         None, None),
        ("p50 (same core) vs msal-python in-process on that core, same calls (median of 3 alternating rounds)",
         f"{tag}alt_p50_us", "µs", f"{msal} p50, varied, a loop before each round (median)", f"msal{tag}alt_p50_us",
         "le", 1),
        (f"for information: the rounds, brokerd / msal-python: {g(f'{tag}alt_rounds') or '?'}; brokerd's first row vs "
         "the repeated request's (section 2)", f"{tag}1_p50_us", "µs", "brokerd p50, repeated request",
         f"{tag[:-1]}1_p50_us", None, None),
    ]
    sections.append((f"2b. brokerd acquireTokenSilently, cache hit, varied requests, {size}", rows))
sections += [
    (f"3. {msal} in-process acquire_token_silent, same documents (0 HTTP calls, every token checked)", [
        ("p50, 1 account", "msal1_p50_us", "µs", None, None, None, None),
        ("p99, 1 account", "msal1_p99_us", "µs", None, None, None, None),
        (f"p50, {big}", "msalbig_p50_us", "µs", None, None, None, None),
        (f"p99, {big}", "msalbig_p99_us", "µs", None, None, None, None),
    ]),
    (f"4. Whole processes, median of {g('procs_runs', '?')} runs, daemon running, cache hit", [
        ("brokerctl --help", "help_median_ms", "ms", None, None, None, None),
        ("brokerctl token --client-id … --authority … --scope …", "token_median_ms", "ms", "brokerctl --help",
         "help_median_ms", "le", 2),
        (f"python3: import msal, load the cache file, one acquire_token_silent ({g('py_runs', '?')} runs)",
         "msalproc_median_ms", "ms",
         "brokerctl token", "token_median_ms", None, None),
    ]),
    (f"5. Cold start under systemd-socket-activate, 1,000-account cache (median of {g('cold_runs', '?')})", [
        ("connection → first silent answer", "cold_median_ms", "ms", None, None, "max", 30),
    ]),
    (f"6. Scale: {big}", [
        ("document size (msal-python's JSON, indent 4)", "doc_mib", "MiB", None, None, None, None),
        ("database on disk after brokerd stopped (cache.db, checkpointed, plus any -wal)", "db_mib", "MiB",
         "the document", "doc_mib", "le", 1.5),
        # Issue #27's targets at 100,000 tokens (the full run); a quick run's 10,000 keep the older, looser ones, since a
        # small cache's RSS is mostly the process's own.
        (f"import: {g('import_how', 'brokerctl import FILE')}", "import_s", "s", None, None, "max", 15 if quick else 5),
        ("brokerd RSS idle (fresh daemon, empty state)", "rss_idle_mib", "MiB", None, None, "max", 15),
        ("brokerd RSS loaded (after restart and the load runs)", "rss_big_mib", "MiB", None, None, "max",
         2 * num("doc_mib") + 20 if num("doc_mib") else None) if quick else
        ("brokerd RSS loaded (after restart and the load runs)", "rss_big_mib", "MiB", "the document", "doc_mib", "le",
         1.2),
        ("for information: brokerd RSS after the varied requests too (2b)", "rss_bigV_mib", "MiB", "the row above",
         "rss_big_mib", None, None),
        ("start with the cache: spawn → whole cache loaded (getStatus answered)", "load_ms", "ms", None, None, "max",
         3000 if quick else 1000),
        (f"removeAccount, one app of one account (median of {g('remove_count', '?')})", "remove_median_ms", "ms",
         None, None, "max", 20),
    ]),
    (f"7. The audit: {int(num('audit_rows') or 0):,} rows of 50 apps (median of {g('procs_runs', '?')} runs)", [
        ("brokerctl log --app APP (its newest 100 rows), whole process", "auditlog_median_ms", "ms", "brokerctl --help",
         "help_median_ms", "max", 200),
    ]),
    (f"8. D-Bus: broker1 acquireTokenSilently as pymsalruntime calls it, private dbus-daemon, sd-bus client; "
     f"median of 3 alternating rounds ({g('dbus_pin', '?')})", [
        (f"sd-bus echo of the same method shape, replying with brokerd's answer ({int(num('dbus_answer_bytes') or 0):,} bytes), p50",
         "dbusecho_p50_us", "µs", None, None, None, None),
        ("brokerd p50, repeated request, 1 account", "dbus_p50_us", "µs", "sd-bus echo p50 (median)", "dbusecho_p50_us", "le", 1.3),
        (f"for information: brokerd p99; the rounds, brokerd / echo: {g('dbus_rounds') or '?'}", "dbus_p99_us", "µs",
         "sd-bus echo p99", "dbusecho_p99_us", None, None),
        ("sd-bus echo p50, varied requests (same lines)", "dbusechoV_p50_us", "µs", None, None, None, None),
        (f"brokerd p50, varied requests ({int(num('dbusV_lines') or 0):,} lines, {int(num('dbusV_accounts') or 0):,} accounts)",
         "dbusV_p50_us", "µs", "sd-bus echo p50, same lines (median)", "dbusechoV_p50_us", "le", 1.3),
        (f"for information: brokerd p99, varied; the rounds: {g('dbusV_rounds') or '?'}", "dbusV_p99_us", "µs",
         "sd-bus echo p99, varied", "dbusechoV_p99_us", None, None),
    ]),
]

# 9. Offline (issue #28). A cache hit with the network unreachable against the same form online, in alternating
# rounds (median of each side). The ratio judged is the median of the rounds' own ratios (ratio_of): the two runs of a
# round are a fraction of a second apart, so the machine moves both alike, while from one round to the next either
# p50 can move by a third when something else runs on this 2-core VM. A pair that close differs by a few per cent;
# anything that waited on the network even once per call would cost a connection attempt or a time limit,
# milliseconds to seconds against tens of µs. Hence a noise allowance of 1.25×; the dead host's connection count
# (0) is the exact check that no cache hit went to the network.
ratio_of = {}
offline_rows = []
for form, name in (("tid", "tenant id"), ("name", "tenant name (contoso.example)"), ("common", "/common"),
                   ("orgs", "/organizations")):
    ratio_of[f"offline_{form}_p50_us"] = f"offline_{form}_ratio"
    ratio_of[f"offlineV_{form}_p50_us"] = f"offlineV_{form}_ratio"
    offline_rows += [
        (f"{name}: cache hit p50 offline, repeated request (ratio: median of the rounds' ratios)",
         f"offline_{form}_p50_us", "µs", "online p50, same form, same rounds (median)", f"online_{form}_p50_us",
         "le", 1.25),
        (f"{name}: cache hit p50 offline, a different line each time (no remembered answer; ratio as above)",
         f"offlineV_{form}_p50_us", "µs", "online p50, same form and lines, same rounds (median)",
         f"onlineV_{form}_p50_us", "le", 1.25),
        (f"for information: {name}, the rounds offline / online: repeated {g(f'offline_{form}_rounds') or '?'}; "
         f"different lines {g(f'offlineV_{form}_rounds') or '?'}", f"online_{form}_p50_us", "µs",
         None, None, None, None),
    ]
failfast = g("failfast_count", "?")
offline_rows += [
    ("connections offered to the unreachable host by the offline cache hits above", "offline_dead_connections",
     "connections", None, None, "max", 0),
    ("forceRefresh offline: the first call (waits for request_timeout = 2 s), until its network error",
     "failfast_first_ms", "ms", None, None, None, None),
    (f"forceRefresh offline: the next {failfast} calls, one by one, median", "failfast_median_ms", "ms",
     None, None, None, None),
    (f"forceRefresh offline: the next {failfast} calls, max", "failfast_max_ms", "ms", None, None, "max", 100),
    (f"connections offered to the unreachable host by those {failfast} calls", "failfast_dead_connections",
     "connections", None, None, "max", 0),
    ("background refresh after the network's return: `ip link set lo up` → the emulator's next successful token "
     "request (network namespace; scheduled checks an hour apart)", "refresh_return_ms", "ms", None, None, "max", 5000),
]
sections.append((f"9. Offline: brokerd restarted with every Microsoft host unreachable (a listener that never answers) "
                 f"vs restarted with the Entra emulator, signed in as one account; median of "
                 f"{g('offline_round_count', '?')} alternating rounds ({g('offline_pin', '?')})", offline_rows))

means = {"help_median_ms": "help_mean_ms", "token_median_ms": "token_mean_ms", "auditlog_median_ms": "auditlog_mean_ms",
         "msalproc_median_ms": "msalproc_mean_ms"}
header = ["#", "measurement", "value", "baseline (same run)", "ratio", "target", "result"]
table, missing, n = [], 0, 0
for title, rows in sections:
    table.append(("section", title))
    for label, key, unit, base_label, base_key, kind, limit in rows:
        n += 1
        value, base = num(key), num(base_key) if base_key else None
        shown = fmt(value, unit)
        if key in means and num(means[key]) is not None:
            shown += f" (mean {num(means[key]):.1f})"
        if key == "rss_big_mib" and num("rss_big_peak_mib") is not None:
            shown += f" (peak {num('rss_big_peak_mib'):.0f})"
        ratio = value / base if value is not None and base else None
        if key in ratio_of and num(ratio_of[key]) is not None:
            ratio = num(ratio_of[key])
        baseline = f"{base_label}: {fmt(base, unit)}" if base_key else "—"
        if kind == "le":
            target = f"≤ {limit:g}×"
        elif kind == "ge":
            target = f"≥ {limit * 100:g} %"
        elif kind == "max":
            target = f"≤ {limit:,.4g} {unit}" if limit is not None else "MISSING"
        else:
            target = "—"
        if value is None or (kind in ("le", "ge") and ratio is None) or (kind == "max" and limit is None):
            result, missing = "MISSING", missing + 1
        elif kind == "le":
            result = "PASS" if ratio <= limit else "FAIL"
        elif kind == "ge":
            result = "PASS" if ratio >= limit else "FAIL"
        elif kind == "max":
            result = "PASS" if value <= limit else "FAIL"
        else:
            result = "—"
        ratio_text = (f"{ratio * 100:.0f} %" if kind == "ge" or unit == "req/s" else f"{ratio:.2f}×") if ratio is not None else "—"
        table.append((str(n), label, shown, baseline, ratio_text, target, result))

machine = [f"{k}: {figures[k]}" for k in ("machine", "cpu", "memory", "kernel", "date", "binaries", "mode")
           if k in figures]
passed = sum(1 for r in table if r[0] != "section" and r[-1] == "PASS")
failed = sum(1 for r in table if r[0] != "section" and r[-1] == "FAIL")
summary = f"{passed} PASS, {failed} FAIL, {missing} MISSING"

# text: fixed-width columns
widths = [max(len(r[i]) for r in table + [tuple(header)] if r[0] != "section") for i in range(len(header))]
line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
out = machine + [""] + [line(header), line(["-" * w for w in widths])]
for r in table:
    out.append(f"\n{r[1]}" if r[0] == "section" else line(r))
out += ["", summary] + [f"note: {x}" for x in notes]
print("\n".join(out))

md = [f"brokerd benchmark (`scripts/bench.sh{' --quick' if g('mode', '').startswith('quick') else ''}`)", ""]
md += [f"- {m}" for m in machine] + ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
for r in table:
    md.append(f"| | **{r[1]}** | | | | | |" if r[0] == "section" else "| " + " | ".join(r) + " |")
md += ["", summary] + [f"- note: {x}" for x in notes]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write("\n".join(md) + "\n")
sys.exit(1 if missing else 0)
