#!/usr/bin/env bash
# The Debian package on this machine, as an operator meets it: builds it with CPack from the
# build tree, checks its computed dependencies and conffiles, `dpkg -i`, `tensorhub --version`,
# the systemd units under `systemd-analyze verify`, the half_plus_two walkthrough from the
# installed files as the package's user (tensorhub serve and tensorhub-serve-lite), the Python
# package under Debian's python3 (a model saved from Python, listed by the CLI), then
# `dpkg -r` (configuration kept) and `dpkg -P` (nothing of the package left, the user gone, the
# data the user made in /var/lib/tensorhub kept). Exits 77 (ctest: skipped) where it cannot
# run: not root, or a tool missing (scripts/setup installs them).
#   usage: deb_package_test.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "dpkg -i needs root (CI runs as root)"
for tool in dpkg dpkg-deb dpkg-shlibdeps file cpack systemd-analyze curl adduser runuser setpriv python3 sqlite3; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/setup installs it)"
done
# Never touch an installation or a user that this test did not make.
if dpkg-query -W -f='${Status}' tensorhub 2>/dev/null | grep -q "ok installed"; then
  fail "a tensorhub package is installed on this machine already; remove it (dpkg -P tensorhub) to run this test"
fi
getent passwd tensorhub >/dev/null && fail "a user named tensorhub exists already; this test creates and removes it"
[ -e /var/lib/tensorhub ] && fail "/var/lib/tensorhub exists already; this test creates and removes it"

WORK=$(mktemp -d)
cd /  # the package's user starts its commands here: a directory it may read (a CI clone can be under /root)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  dpkg -P tensorhub >/dev/null 2>&1 || true
  rm -f /etc/systemd/system/multi-user.target.wants/tensorhub-serve.service
  rm -rf /var/lib/tensorhub "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "== build the package (cpack in $BUILD)"
(cd "$BUILD" && cpack -G DEB -B "$WORK/pkg") >"$WORK/cpack.log" 2>&1 || { cat "$WORK/cpack.log"; fail "cpack"; }
DEB=$(ls "$WORK"/pkg/tensorhub_*_amd64.deb)
[[ $(basename "$DEB") =~ ^tensorhub_[0-9]+\.[0-9]+\.[0-9]+_amd64\.deb$ ]] || fail "package name $(basename "$DEB")"
depends=$(dpkg-deb -f "$DEB" Depends)
echo "Depends: $depends"
for dep in adduser libtorch libpq5 libsqlite3 libprotobuf libgrpc++ libc6 python3-numpy; do
  [[ $depends == *"$dep"* ]] || fail "Depends lacks $dep (dpkg-shlibdeps did not run?)"
done
dpkg-deb -e "$DEB" "$WORK/control"
for f in /etc/tensorhub/serve.env /etc/tensorhub/ui.env; do
  grep -qx "$f" "$WORK/control/conffiles" || fail "$f is not a conffile"
done

echo "== dpkg -i"
dpkg -i "$DEB"
user=$(getent passwd tensorhub) || fail "postinst made no user tensorhub"
IFS=: read -r _ _ uid _ _ home shell <<<"$user"
[ "$uid" -lt 1000 ] && [ "$home" = /var/lib/tensorhub ] && [ "$shell" = /usr/sbin/nologin ] ||
  fail "user tensorhub is not a system user with home /var/lib/tensorhub and no login: $user"
[ "$(stat -c %U /var/lib/tensorhub)" = tensorhub ] || fail "/var/lib/tensorhub is not owned by tensorhub"

echo "== tensorhub --version"
version=$(tensorhub --version)
echo "$version"
[[ $version == "tensorhub "*" (commit "* ]] && [[ $version == *"libtorch "* ]] && [[ $version == *"BLAS: "* ]] ||
  fail "tensorhub --version does not name the version, commit, libtorch and BLAS"
[[ $(tensorhub-serve-lite --version) == "tensorhub-serve-lite "*" (commit "* ]] || fail "tensorhub-serve-lite --version"

echo "== systemd-analyze verify"
units=/lib/systemd/system
[ -f $units/tensorhub-serve.service ] || units=/usr/lib/systemd/system
cp /etc/tensorhub/runner.env.example /etc/tensorhub/runner-mnist.env  # as README's Deployment section does
systemd-analyze verify $units/tensorhub-serve.service $units/tensorhub-ui.service \
  "$units/tensorhub-runner@mnist.service" >"$WORK/verify.log" 2>&1 || { cat "$WORK/verify.log"; fail "systemd-analyze verify"; }
grep tensorhub "$WORK/verify.log" && fail "systemd-analyze verify reports the units"

echo "== half_plus_two from the installed files, as user tensorhub"
base=/usr/share/tensorhub/examples/serving/half_plus_two
for server in "tensorhub serve --port 0" "tensorhub-serve-lite"; do
  port=$(free_port)
  # shellcheck disable=SC2086
  # setpriv execs the server itself (runuser would stay its parent and answer SIGTERM for it).
  setpriv --reuid=tensorhub --regid=tensorhub --init-groups /usr/bin/$server --model_name half_plus_two --model_base_path $base \
    --rest_api_port "$port" >"$WORK/server.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  answer=""
  for _ in $(seq 1 300); do
    answer=$(curl -s -d '{"instances": [1.0, 2.0, 5.0]}' "localhost:$port/v1/models/half_plus_two:predict" || true)
    [ -n "$answer" ] && break
    sleep 0.1
  done
  [ "$answer" = '{"predictions":[2.5,3.0,4.5]}' ] || { cat "$WORK/server.log"; fail "$server answered '$answer'"; }
  kill -TERM "$pid"
  wait "$pid" || fail "$server did not exit 0 on SIGTERM"
  echo "$server: $answer"
done
echo "== the default hub, and the dashboard as configured (its port changed to a free one)"
hub=/var/lib/tensorhub/tensorhub.db
[ -f $hub ] && [ "$(stat -c %U $hub)" = tensorhub ] || fail "postinst made no hub $hub owned by tensorhub"
(
  # systemd's EnvironmentFile syntax (KEY=value with spaces, no quotes), not shell's.
  while IFS='=' read -r key value; do
    [[ $key =~ ^[A-Z_]+$ ]] && export "$key=$value"
  done </etc/tensorhub/ui.env
  port=$(free_port)
  # shellcheck disable=SC2086
  setpriv --reuid=tensorhub --regid=tensorhub --init-groups /usr/bin/tensorhub ui ${TENSORHUB_UI_ARGS/--port 6006/--port $port} \
    >"$WORK/ui.log" 2>&1 &
  pid=$!
  code=""
  for _ in $(seq 1 300); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "localhost:$port/api/tasks" || true)
    [ "$code" = 200 ] && break
    sleep 0.1
  done
  kill -TERM "$pid"
  wait "$pid" || true
  [ "$code" = 200 ] || { cat "$WORK/ui.log"; fail "tensorhub ui with /etc/tensorhub/ui.env answered $code"; }
  echo "tensorhub ui: /api/tasks 200"
)
echo "== the Python package under Debian's python3, as user tensorhub"
# A model saved from Python in the services' hub, read back by the command line: both over one
# C++ core.
runuser -u tensorhub -- /usr/bin/python3 - "$hub" <<'PY' || fail "import tensorhub under /usr/bin/python3"
import sys, numpy as np, tensorhub
assert tensorhub.__file__.startswith("/usr/lib/python3/dist-packages/tensorhub/"), tensorhub.__file__
hub = tensorhub.TensorHub("sqlite://" + sys.argv[1], "deb")
hub.save_model({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, "from_python", test_accuracy=0.5)
m = hub.find_top_model("from_python")
assert m.test_accuracy == 0.5 and m.weights["w"].tolist() == [[0, 1, 2], [3, 4, 5]], m
PY
runuser -u tensorhub -- tensorhub model list --hub sqlite://$hub --project deb | grep -q from_python ||
  fail "the model saved from Python is not listed by tensorhub model list"
# Byte code as root's imports write it (dpkg does not know those files; prerm removes them).
/usr/bin/python3 -m compileall -q /usr/lib/python3/dist-packages/tensorhub || fail "compileall"
[ -d /usr/lib/python3/dist-packages/tensorhub/__pycache__ ] || fail "compileall wrote no byte code"
# Data the user makes: a task in the services' hub.
runuser -u tensorhub -- tensorhub task create --hub sqlite://$hub --task-name t --command true >/dev/null
[ "$(sqlite3 $hub 'SELECT count(*) FROM tasks')" = 1 ] || fail "the task was not saved in $hub"

# What `systemctl enable tensorhub-serve` makes (no systemd runs here to make it).
mkdir -p /etc/systemd/system/multi-user.target.wants
ln -sf /lib/systemd/system/tensorhub-serve.service /etc/systemd/system/multi-user.target.wants/tensorhub-serve.service

echo "== dpkg -r: the binaries go, the configuration stays"
dpkg -L tensorhub >"$WORK/files"
dpkg -r tensorhub
[ ! -e /usr/bin/tensorhub ] && [ ! -e /usr/bin/tensorhub-serve-lite ] || fail "dpkg -r left the binaries"
[ -f /etc/tensorhub/serve.env ] || fail "dpkg -r removed the conffile /etc/tensorhub/serve.env"

echo "== dpkg -P: nothing left but the user's data"
dpkg -P tensorhub
dpkg-query -W -f='${Status}' tensorhub 2>/dev/null | grep -q "ok installed" && fail "still installed after purge"
[ ! -e /etc/tensorhub ] || fail "purge left /etc/tensorhub: $(ls -A /etc/tensorhub)"
getent passwd tensorhub >/dev/null && fail "purge left the user tensorhub"
getent group tensorhub >/dev/null && fail "purge left the group tensorhub"
left=0
while read -r f; do
  if [ -f "$f" ] || [ -L "$f" ]; then echo "left behind: $f"; left=1; fi
done <"$WORK/files"
[ $left -eq 0 ] || fail "purge left files of the package"
[ ! -e /usr/lib/python3/dist-packages/tensorhub ] ||
  fail "purge left /usr/lib/python3/dist-packages/tensorhub: $(ls -A /usr/lib/python3/dist-packages/tensorhub)"
[ "$(sqlite3 $hub 'SELECT count(*) FROM tasks')" = 1 ] || fail "purge removed the user's data in $hub"
[ ! -L /etc/systemd/system/multi-user.target.wants/tensorhub-serve.service ] ||
  fail "purge left the link systemctl enable made to tensorhub-serve.service"
[ "$(stat -c %U:%G /var/lib/tensorhub)" = root:root ] && [ "$(stat -c %U $hub)" = root ] ||
  fail "purge left /var/lib/tensorhub owned by the deleted user: $(stat -c %u:%g /var/lib/tensorhub)"
echo "PASSED: built $(basename "$DEB"), installed, served, removed and purged"
