#!/usr/bin/python3
"""A real browser for brokerd's tests (set as $BROWSER): Debian's chromium, headless, driven by selenium through
Debian's chromium-driver.

brokerd runs `$BROWSER URL` with the IdP's authorize URL. Chromium opens it, the script types $IDP_USER /
$IDP_PASSWORD (default alice / alice-password) into the IdP's login form and submits it as a person would, and
chromium follows the IdP's redirects to brokerd's loopback redirect URI (the authorize URL's `redirect_uri`)
by itself. The script then waits for
brokerd's own page there and exits 0 when it says "Signed in". Unlike Tests/idp/fake_browser.py, nothing here
speaks HTTP: the cookies, redirects, form posting and the loopback request are chromium's.

$IDP_CA names the test CA for an https IdP (chromium is told to accept that server's certificate).
$IDP_BROWSER_LOG, if set, gets one line per step, URLs without their query strings (codes never reach the log).
Uses the system python3 with python3-selenium (Debian), not a venv.
"""
import os
import sys
import tempfile
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait


def log(text):
    path = os.environ.get("IDP_BROWSER_LOG")
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def without_query(url):
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def redirect_uri(authorize_url):
    """brokerd's loopback redirect URI, as the authorize request names it (the test IdP is on loopback too)."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(authorize_url).query)
    return query.get("redirect_uri", [""])[0]


def browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                     "--disable-dev-shm-usage", "--user-data-dir=" + profile):
        options.add_argument(argument)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # chromium refuses to run as root with its sandbox
    if os.environ.get("IDP_CA"):
        options.add_argument("--ignore-certificate-errors")  # the test IdP's own CA is not in chromium's store
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def main():
    url = sys.argv[1]
    user = os.environ.get("IDP_USER", "alice")
    password = os.environ.get("IDP_PASSWORD", user + "-password")
    landing = redirect_uri(url)
    if not landing:
        log("no redirect_uri in the authorize URL")
        return 1

    def landed(driver):
        return driver.current_url.startswith(landing)

    with tempfile.TemporaryDirectory(prefix="brokerd-chromium-") as profile:
        driver = browser(profile)
        try:
            wait = WebDriverWait(driver, 30)
            log("chromium GET " + without_query(url))
            driver.get(url)
            wait.until(lambda d: landed(d) or d.find_elements(By.NAME, "username"))
            if not landed(driver):
                log("chromium login form at " + without_query(driver.current_url))
                driver.find_element(By.NAME, "username").send_keys(user)
                driver.find_element(By.NAME, "password").send_keys(password)
                driver.find_element(By.NAME, "password").submit()
                wait.until(landed)
            wait.until(expected_conditions.presence_of_element_located((By.TAG_NAME, "p")))
            page = driver.find_element(By.TAG_NAME, "body").text
            log("chromium landed on " + without_query(driver.current_url) + ": " + page.split(".")[0])
            return 0 if page.startswith("Signed in") else 1
        except (TimeoutException, WebDriverException) as error:
            log("chromium stopped at %s: %s" % (without_query(driver.current_url), type(error).__name__))
            return 1
        finally:
            driver.quit()


if __name__ == "__main__":
    sys.exit(main())
