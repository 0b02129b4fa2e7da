#!/usr/bin/env python3
"""A scripted stand-in for the user's browser, for brokerd's tests (set as $BROWSER).

brokerd runs `$BROWSER URL` with the test IdP's authorize URL. This script does what a person would: opens the
URL, signs in on the IdP's login form as $IDP_USER / $IDP_PASSWORD (default alice / alice-password), and follows
the redirects until the IdP sends the browser to brokerd's loopback redirect URI, which it then opens.
Standard library only. $IDP_CA names the test CA for https. $IDP_BROWSER_LOG, if set, gets one line per step
(URLs without their query strings: codes never reach the log).
"""
import http.cookiejar
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def log(text):
    path = os.environ.get("IDP_BROWSER_LOG")
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def main():
    url = sys.argv[1]
    user = os.environ.get("IDP_USER", "alice")
    password = os.environ.get("IDP_PASSWORD", user + "-password")
    context = ssl.create_default_context(cafile=os.environ.get("IDP_CA")) if os.environ.get("IDP_CA") else None
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(jar), NoRedirect(), urllib.request.HTTPSHandler(context=context))

    def request(target, data=None):
        log(("POST " if data else "GET ") + target.split("?")[0])
        try:
            with opener.open(urllib.request.Request(target, data=data), timeout=30) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    for _ in range(10):
        status, headers, _ = request(url)
        if status not in (301, 302, 303, 307):
            log("stopped at HTTP %d" % status)
            return 1
        location = urllib.parse.urljoin(url, headers["Location"])
        parsed = urllib.parse.urlparse(location)
        if parsed.path.rstrip("/").endswith("/accounts/login"):
            next_url = urllib.parse.parse_qs(parsed.query).get("next", ["/"])[0]
            form = urllib.parse.urlencode({"username": user, "password": password, "next": next_url}).encode()
            status, headers, _ = request(urllib.parse.urljoin(location, parsed.path), form)
            if status not in (301, 302, 303):
                log("login refused (HTTP %d)" % status)
                return 1
            location = urllib.parse.urljoin(location, headers["Location"])
            parsed = urllib.parse.urlparse(location)
        if parsed.hostname in ("127.0.0.1", "localhost") and ("code=" in parsed.query or "error=" in parsed.query):
            # The loopback redirect: brokerd's listener answers it.
            status, _, _ = request(location)
            log("redirect delivered (HTTP %d)" % status)
            return 0 if status == 200 else 1
        url = location
    return 1


if __name__ == "__main__":
    sys.exit(main())
