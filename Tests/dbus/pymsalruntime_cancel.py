#!/usr/bin/env python3
"""An interactive sign-in through pymsalruntime itself (msal-python keeps no handle to cancel with), cancelled with
MSALRuntimeAsyncHandle.cancel_async_operation() once brokerd has opened its browser. Run by MSALPythonReachTests.

    pymsalruntime_cancel.py CLIENT_ID SCOPE OPENED_FILE

OPENED_FILE appears when brokerd's $BROWSER runs. Prints one JSON line: whether the browser opened, and the
result's status and context (an error's: this sign-in never completes). Never a token.
"""
import json
import os
import sys
import threading
import time
import uuid

import pymsalruntime  # its startup Ping must find a broker on the bus


def main():
    client_id, scope, opened = sys.argv[1:4]
    params = pymsalruntime.MSALRuntimeAuthParameters(client_id, "https://login.microsoftonline.com/common")
    params.set_redirect_uri("https://login.microsoftonline.com/common/oauth2/nativeclient")
    params.set_requested_scopes([scope])
    done, report = threading.Event(), {}

    def callback(result):
        error = result.get_error()
        report["status"] = str(error.get_status()) if error else "token"
        report["context"] = error.get_context() if error else ""
        done.set()

    handle = pymsalruntime.signin_interactively(pymsalruntime.get_console_window(), params, str(uuid.uuid4()), None,
                                                callback)
    for _ in range(3000):
        if os.path.exists(opened):
            break
        time.sleep(0.02)
    report["opened"] = os.path.exists(opened)
    handle.cancel_async_operation()
    report["answered"] = done.wait(600)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
