#!/usr/bin/env bash
# Installs the Debian packages the tests need, only those missing: chromium (the viewer's
# end-to-end tests), postgresql, redis-server and nginx (the scale-out topology tests),
# bubblewrap and libseccomp (the jail of POST /run: without them the service refuses programs).
set -euo pipefail
need=()
command -v chromium >/dev/null || need+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v node >/dev/null || need+=(nodejs npm)
command -v bwrap >/dev/null || need+=(bubblewrap)
ls /usr/lib/*/libseccomp.so.2 /lib/*/libseccomp.so.2 >/dev/null 2>&1 || need+=(libseccomp2)
if [ ${#need[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "system packages: installing ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
