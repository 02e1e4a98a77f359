"""Offline stand-in for the pip bootstrap script that ansible-test downloads.

ansible-test fetches ``get-pip-<version>.py`` from its own file server to put pip into the
virtual environments of some sanity tests (import, changelog). That server is not
reachable from our CI, so ``scripts/test`` saves this file under the name ansible-test
looks for in its cache. It bootstraps pip from the interpreter's bundled wheel
(``ensurepip``) and then installs what ansible-test asked for from the package index.
"""
from __future__ import annotations

import ensurepip
import os
import subprocess
import sys

# ansible-test runs this with a trimmed environment; keep the system's CA bundle so that a
# package index behind a TLS-inspecting proxy still verifies.
_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def main() -> None:
    ensurepip.bootstrap(upgrade=True)
    wanted = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
    if not wanted:
        return
    env = dict(os.environ)
    if "PIP_CERT" not in env:
        bundle = next((path for path in _CA_BUNDLES if os.path.exists(path)), None)
        if bundle:
            env["PIP_CERT"] = bundle
    subprocess.check_call([sys.executable, "-m", "pip", "install", *wanted], env=env)


if __name__ == "__main__":
    main()
