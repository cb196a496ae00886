#!/usr/bin/env bash
# The /runs pages in a real browser: headless Chromium and chromedriver from Debian's packages,
# driven over WebDriver by scripts/browser/check.py (Selenium; tokens from PyJWT and an RSA key
# from `cryptography`), against a real `switchboard serve`. Screenshots land in
# target/browser-check/. .ci/run calls this; it fails, never skips, when anything is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "browser-check: installing chromium and chromium-driver"
  apt-get install -y -q chromium chromium-driver >/dev/null \
    || { apt-get update -q && apt-get install -y -q chromium chromium-driver >/dev/null; }
fi
venv="$root/target/browser-venv"
want="selenium==4.27.1 pyjwt[crypto]==2.10.1"
if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('selenium') == '4.27.1' and m.version('pyjwt') == '2.10.1'; import cryptography" 2>/dev/null; then
  echo "browser-check: installing Selenium and PyJWT into $venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $want
fi
[ -x "$root/target/debug/switchboard" ] || cargo build --locked -p cli
"$venv/bin/python" "$root/scripts/browser/check.py"
