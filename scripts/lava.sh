#!/bin/sh
# A local LAVA lab for the harness's integration tests (the `lava` backend
# submits jobs to it through LAVA's REST API v0.2): Debian 12's lava-server,
# lava-dispatcher and lava-coordinator (2023.01) on PostgreSQL 15, every
# daemon started by hand (this machine has no systemd), bound to 127.0.0.1.
#
#   scripts/lava.sh [start]   install, configure and start; safe to re-run
#   scripts/lava.sh stop      stop the daemons this script started
#   scripts/lava.sh status    which of them run (needs no root)
#
# `start` ends by printing, on stdout and nothing else there:
#   LAVA_URL=http://127.0.0.1:<port>/      (the REST API is <url>api/v0.2/)
#   LAVA_TOKEN_FILE=<path>                 (the API token of the superuser
#                                           `harness`, readable only by the
#                                           user who ran the script)
# Run by a user, the script runs itself again through sudo (as bootstrap.sh
# does for the system packages); the token file belongs to that user.
#
# What runs (the commands of Debian's /lib/systemd/system/lava-*.service,
# with pid files and logs under $STATE/run and $STATE/log):
#   postgresql 15/main (pg_ctlcluster; stopped again only if this script
#   started it), gunicorn3 lava_server.wsgi (the web UI and REST API),
#   lava-server manage lava-scheduler, lava-coordinator (MultiNode), and
#   lava-worker (the dispatcher, worker `harness-worker`) with two devices
#   qemu-01 and qemu-02 of device type qemu. lava-publisher is not started:
#   the worker polls the server instead (--ping-interval 5), and the
#   publisher's ZMQ/websocket sockets would listen on every address.
#
# TRAP: /boot is empty here, and libguestfs (which lava-dispatcher uses for
# the qemu "apply-overlay-guest" step: it writes the test overlay into a
# small disk image, lava-guest.qcow2) boots a supermin appliance with the
# host's kernel from /boot: with none there, the step fails ("Unable to start
# libguestfs") and so does every job whose test shell needs that overlay.
# Solved twice over:
#  1. the worker's job environment (/etc/lava-server/dispatcher.d/
#     harness-worker/env.yaml; env.yaml's `purge: true` would drop variables
#     set on the worker's own command line) sets LIBGUESTFS_BACKEND=direct,
#     LIBGUESTFS_BACKEND_SETTINGS=force_tcg (KVM guests hang here) and
#     SUPERMIN_KERNEL / SUPERMIN_MODULES / SUPERMIN_KERNEL_VERSION to the
#     kernel and modules of Debian's linux-image-cloud-amd64, unpacked with
#     dpkg-deb -x into $STATE/kernel (nothing goes to /boot);
#  2. the smoke job (tests/data/lava/smoke-job.yaml) does not need
#     libguestfs at all: its ramdisk is declared `format: cpio.newc` with
#     `overlays: {lava: true}`, so the dispatcher appends the overlay to the
#     initramfs with cpio ("append-overlays") and skips apply-overlay-guest.
# docs/manual/lab-local.md says which was proven by a real job, and timings.
#
# The devices run QEMU under TCG: their device dictionaries set `no_kvm`,
# which drops `-cpu host -enable-kvm` from the qemu.jinja2 device type
# template. No health check is configured for the qemu device type, so the
# devices are set Good by hand and go Idle once the worker pings.
#
# Settings (environment): HARNESS_LAVA_PORT (default 8090),
# HARNESS_LAVA_STATE (default /var/lib/harness-lava).
set -eu
# the daemons are Debian's python3 programs: not a pyenv or venv python
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
# the script's own path, for running itself through sudo (before cd /)
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd /

PORT=${HARNESS_LAVA_PORT:-8090}
STATE=${HARNESS_LAVA_STATE:-/var/lib/harness-lava}
URL="http://127.0.0.1:$PORT/"
WORKER=harness-worker
DEVICES="qemu-01 qemu-02"
TOKEN_FILE=$STATE/harness.token
PG_VERSION=15
PG_CLUSTER=main
LAVA_ETC=/etc/lava-server
# every daemon this script starts, in start order
DAEMONS="gunicorn scheduler coordinator worker"

log() { echo "lava.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# --- daemons: pid files in $STATE/run, logs in $STATE/log ------------------

# running NAME: the daemon NAME started by this script runs
running() {
    pid=$(cat "$STATE/run/$1.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    # the pid was not reused by something else: the same command line
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF -- "$(daemon_marker "$1")"
}

# daemon_marker NAME: a string of the daemon's command line
daemon_marker() {
    case $1 in
        gunicorn) echo "lava_server.wsgi" ;;
        scheduler) echo "lava-scheduler" ;;
        coordinator) echo "lava-coordinator" ;;
        worker) echo "lava-worker" ;;
    esac
}

# launch NAME COMMAND...: started in the background in a session of its own
launch() {
    name=$1
    shift
    if running "$name"; then
        log "$name already runs (pid $(cat "$STATE/run/$name.pid"))"
        return 0
    fi
    setsid "$@" >> "$STATE/log/$name.out" 2>&1 < /dev/null &
    echo "$!" > "$STATE/run/$name.pid"
    log "started $name (pid $!, log $STATE/log/$name.out)"
}

# halt NAME: TERM, then KILL after 20 s
halt() {
    if ! running "$1"; then
        rm -f "$STATE/run/$1.pid"
        return 0
    fi
    pid=$(cat "$STATE/run/$1.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        [ -d "/proc/$pid" ] || break
        sleep 0.2
    done
    if [ -d "/proc/$pid" ]; then
        log "$1 (pid $pid) did not stop on TERM: KILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$STATE/run/$1.pid"
    log "stopped $1 (pid $pid)"
}

# --- start's steps -------------------------------------------------------

packages() {
    set -- lava-server lava-dispatcher lava-coordinator "postgresql-$PG_VERSION" \
        qemu-system-x86 busybox-static cpio curl
    installed=$(dpkg-query -W -f '${db:Status-Status}\n' "$@" 2>/dev/null | grep -c '^installed$') ||
        true
    [ "$installed" = "$#" ] && return 0
    log "installing Debian's LAVA and PostgreSQL packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=900 update -qq
    # busybox-static, cpio: the smoke job's initramfs; the daemons' start by
    # the packages is refused (no systemd): this script starts them
    apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends postgresql "$@" >&2
}

postgres() {
    if pg_lsclusters -h "$PG_VERSION" "$PG_CLUSTER" 2>/dev/null | grep -q online; then
        return 0
    fi
    pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" start
    # stop stops it again only when this script started it
    touch "$STATE/run/postgresql.started"
    log "started PostgreSQL $PG_VERSION/$PG_CLUSTER"
}

# database: settings.d/00-database.yaml, the role and database, migrations
# (Debian's own postinst step, which skipped them with PostgreSQL down);
# done again only when lava-server's version changes
database() {
    version=$(dpkg-query -W -f '${Version}' lava-server)
    if [ -f "$LAVA_ETC/settings.d/00-database.yaml" ] &&
            [ "$(cat "$STATE/db.version" 2>/dev/null)" = "$version" ]; then
        return 0
    fi
    for _ in $(seq 1 50); do
        pg_isready -q -h localhost && break
        sleep 0.2
    done
    log "creating and migrating the LAVA database"
    /usr/bin/python3 /usr/share/lava-server/postinst.py --config --db --fixup >&2
    echo "$version" > "$STATE/db.version"
}

# manage ARGS...: lava-server's management commands (as root, as Debian's
# postinst runs them; their --csv lines end in CR LF)
manage() {
    lava-server manage "$@"
}

# kernel: Debian's cloud kernel and its modules, unpacked in $STATE/kernel
# (modules.dep made by depmod: supermin reads it), for libguestfs's supermin
# appliance (the trap above) and the smoke job
kernel() {
    if [ -f "$STATE/kernel/version" ] && [ -f "$STATE/kernel/vmlinuz" ] &&
            [ -f "$STATE/kernel/root/lib/modules/$(cat "$STATE/kernel/version")/modules.dep" ]
    then
        return 0
    fi
    pkg=$(apt-cache depends linux-image-cloud-amd64 |
        awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
    [ -n "$pkg" ] || die "no linux-image-cloud-amd64 in apt"
    log "unpacking $pkg into $STATE/kernel (not /boot)"
    rm -rf "$STATE/kernel"
    mkdir -p "$STATE/kernel/deb"
    chown _apt "$STATE/kernel/deb" 2>/dev/null || true
    (cd "$STATE/kernel/deb" && apt-get download -qq "$pkg" >&2)
    dpkg-deb -x "$STATE/kernel/deb/$pkg"_*.deb "$STATE/kernel/root"
    rm -rf "$STATE/kernel/deb"
    version=$(basename "$(ls -d "$STATE/kernel/root/lib/modules/"*)")
    depmod -b "$STATE/kernel/root" "$version"
    ln -sf "root/boot/vmlinuz-$version" "$STATE/kernel/vmlinuz"
    echo "$version" > "$STATE/kernel/version"
}

# smoke_image: $STATE/images/initramfs.cpio.gz, a busybox-static initramfs
# that gives a root shell on ttyS0 (prompt "/ # "), and vmlinuz, for
# tests/data/lava/smoke-job.yaml. Its /init also loads the IDE disk's
# drivers and makes /dev/disk/by-uuid/ links for ext2/3/4 disks (what udev
# would do), so that a job taking the libguestfs way gets its overlay disk
# (lava-guest.qcow2) mounted by LAVA's test shell pre-commands too
smoke_image() {
    images=$STATE/images
    kver=$(cat "$STATE/kernel/version")
    stamp="$kver busybox $(dpkg-query -W -f '${Version}' busybox-static) init 2"
    if [ -f "$images/initramfs.cpio.gz" ] && [ "$(cat "$images/stamp" 2>/dev/null)" = "$stamp" ]
    then
        return 0
    fi
    tree=$(mktemp -d)
    if [ -z "$tree" ] || [ ! -d "$tree" ]; then die "no temporary directory"; fi
    mkdir -p "$tree/bin" "$tree/proc" "$tree/sys" "$tree/dev" "$tree/tmp" "$tree/etc" \
        "$tree/root" "$tree/lib/modules/$kver"
    cp /bin/busybox "$tree/bin/busybox"
    for applet in $(/bin/busybox --list); do
        [ "$applet" = busybox ] || ln -s busybox "$tree/bin/$applet"
    done
    ln -s bin "$tree/sbin"
    # the IDE disk's drivers (modules in Debian's cloud kernel)
    moddir=$STATE/kernel/root/lib/modules/$kver
    for module in scsi_common scsi_mod libata ata_piix sd_mod; do
        file=$(awk -F: -v m="/$module.ko" \
            'substr($1, length($1) - length(m) + 1) == m {print $1}' "$moddir/modules.dep")
        [ -n "$file" ] || continue
        mkdir -p "$tree/lib/modules/$kver/$(dirname "$file")"
        cp "$moddir/$file" "$tree/lib/modules/$kver/$file"
        grep "^$file:" "$moddir/modules.dep" >> "$tree/lib/modules/$kver/modules.dep"
    done
    init_script > "$tree/init"
    chmod 755 "$tree/init"
    echo "root:x:0:0:root:/root:/bin/sh" > "$tree/etc/passwd"
    mkdir -p "$images"
    (cd "$tree" && find . | cpio -o -H newc --quiet) | gzip -9 > "$images/initramfs.cpio.gz.new"
    mv "$images/initramfs.cpio.gz.new" "$images/initramfs.cpio.gz"
    rm -rf "$tree"
    ln -sf "$STATE/kernel/vmlinuz" "$images/vmlinuz"
    echo "$stamp" > "$images/stamp"
    log "built $images/initramfs.cpio.gz"
}

# init_script: the smoke initramfs's /init
init_script() {
    cat <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
export PATH=/bin:/sbin HOME=/root PS1='/ # '
hostname lava-smoke
modprobe ata_piix 2>/dev/null && modprobe sd_mod 2>/dev/null
# what udev would do: /dev/disk/by-uuid/ for ext2/3/4 disks (LAVA's overlay
# disk); the UUID read from the superblock (magic 0xef53 at 1080)
if [ -d /sys/bus/pci/drivers/ata_piix ]; then
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        [ -b /dev/sda ] && break
        sleep 0.3
    done
fi
for dev in /dev/sd? /dev/vd?; do
    [ -b "$dev" ] || continue
    [ "$(od -An -tx1 -j1080 -N2 "$dev" | tr -d ' \n')" = 53ef ] || continue
    uuid=$(od -An -tx1 -j1128 -N16 "$dev" | tr -d ' \n' |
        sed 's/^\(.\{8\}\)\(.\{4\}\)\(.\{4\}\)\(.\{4\}\)/\1-\2-\3-\4-/')
    mkdir -p /dev/disk/by-uuid
    ln -sf "$dev" "/dev/disk/by-uuid/$uuid"
done
echo "harness lava smoke initramfs: shell on the console"
exec setsid cttyhack /bin/sh
INIT
}

# write_file PATH OWNER MODE: stdin written to PATH when it differs
write_file() {
    tmp=$(mktemp)
    cat > "$tmp"
    if cmp -s "$tmp" "$1"; then
        rm -f "$tmp"
        return 0
    fi
    mkdir -p "$(dirname "$1")"
    mv "$tmp" "$1"
    chown "$2" "$1"
    chmod "$3" "$1"
    log "wrote $1"
}

config() {
    kver=$(cat "$STATE/kernel/version")
    # the dispatcher's job environment (trap 1 above)
    write_file "$LAVA_ETC/dispatcher.d/$WORKER/env.yaml" lavaserver:lavaserver 644 <<EOF
# written by the harness's scripts/lava.sh
purge: true
overrides:
  LC_ALL: C.UTF-8
  LANG: C
  PATH: /usr/local/bin:/usr/local/sbin:/bin:/usr/bin:/usr/sbin:/sbin
  LIBGUESTFS_BACKEND: direct
  LIBGUESTFS_BACKEND_SETTINGS: force_tcg
  SUPERMIN_KERNEL: $STATE/kernel/root/boot/vmlinuz-$kver
  SUPERMIN_MODULES: $STATE/kernel/root/lib/modules/$kver
  SUPERMIN_KERNEL_VERSION: $kver
EOF
    chown lavaserver:lavaserver "$LAVA_ETC/dispatcher.d/$WORKER"
    n=0
    for device in $DEVICES; do
        n=$((n + 1))
        write_file "$LAVA_ETC/dispatcher-config/devices/$device.jinja2" lavaserver:lavaserver 644 <<EOF
{# written by the harness's scripts/lava.sh: TCG, no KVM #}
{% extends 'qemu.jinja2' %}
{% set no_kvm = True %}
{% set mac_addr = '52:54:00:12:34:0$n' %}
{% set memory = 1024 %}
{% set netdevice = 'user' %}
EOF
    done
    # MultiNode: the coordinator the dispatcher's jobs reach (port 3079)
    write_file /etc/lava-coordinator/lava-coordinator.conf root:root 644 <<'EOF'
{
    "port": 3079,
    "blocksize": 4096,
    "poll_delay": 3,
    "coordinator_hostname": "127.0.0.1"
}
EOF
}

# wait_http URL: until it answers (60 s)
wait_http() {
    for _ in $(seq 1 300); do
        curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
        sleep 0.2
    done
    die "no answer from $1 (see $STATE/log/gunicorn.out)"
}

daemons_server() {
    # gunicorn drops to lavaserver (-u/-g) as the systemd unit has it
    launch gunicorn /usr/bin/gunicorn3 lava_server.wsgi --log-level INFO --log-file - \
        -u lavaserver -g lavaserver --worker-class eventlet --workers 2 \
        --bind "127.0.0.1:$PORT" --timeout 120
    launch scheduler lava-server manage lava-scheduler --level INFO \
        --log-file "$STATE/log/scheduler.log"
    # lava-coordinator binds 0.0.0.0 whatever its configuration says: its
    # sockets are made to bind 127.0.0.1 instead (its log still says
    # "binding to 0.0.0.0:3079"; ss -ltn shows 127.0.0.1:3079)
    launch coordinator /usr/bin/python3 -c '
import socket, sys
class Local(socket.socket):
    def bind(self, address):
        if isinstance(address, tuple) and address[0] in ("", "0.0.0.0"):
            address = ("127.0.0.1",) + tuple(address[1:])
        return super().bind(address)
socket.socket = Local
sys.argv[0] = "/usr/bin/lava-coordinator"
exec(compile(open(sys.argv[0]).read(), sys.argv[0], "exec"))
' --loglevel INFO --logfile "$STATE/log/coordinator.log"
    wait_http "${URL}api/v0.2/"
}

# objects: the superuser and its token, the worker, the device type and the
# devices (each created only when missing)
objects() {
    if ! manage users list --all --csv 2>/dev/null | cut -d, -f1 | grep -qx harness; then
        manage users add harness --superuser --staff \
            --passwd "$(tr -dc 'a-zA-Z0-9' < /dev/urandom | head -c 24)" >&2
    fi
    owner=${SUDO_USER:-root}
    if [ ! -s "$TOKEN_FILE" ]; then
        tr -dc 'a-z0-9' < /dev/urandom | head -c 40 > "$TOKEN_FILE.new"
        mv "$TOKEN_FILE.new" "$TOKEN_FILE"
    fi
    chown "$owner" "$TOKEN_FILE"
    chmod 600 "$TOKEN_FILE"
    secret=$(cat "$TOKEN_FILE")
    if ! manage tokens list --user harness --csv | grep -qF "$secret"; then
        manage tokens add --user harness --secret "$secret" \
            --description "harness scripts/lava.sh" > /dev/null
        log "API token of harness written to $TOKEN_FILE"
    fi
    if ! manage workers list --csv | cut -d, -f1 | grep -qx "$WORKER"; then
        manage workers add "$WORKER" --description "local worker (scripts/lava.sh)" > /dev/null
    fi
    manage workers details "$WORKER" | awk '$1 == "token" {print $3}' > "$STATE/worker.token"
    chmod 600 "$STATE/worker.token"
    if ! manage device-types list --csv | cut -d, -f1 | grep -qx qemu; then
        manage device-types add qemu >&2
    fi
    # no health check for qemu (none is configured either): Good by hand
    manage shell -c 'from lava_scheduler_app.models import DeviceType
DeviceType.objects.filter(name="qemu").update(disable_health_check=True)' >&2
    for device in $DEVICES; do
        if ! manage devices list --all --csv | cut -d, -f1 | grep -qx "$device"; then
            manage devices add --device-type qemu --worker "$WORKER" \
                --description "TCG qemu (scripts/lava.sh)" "$device" >&2
        fi
        manage devices update --health GOOD "$device" >&2
    done
}

daemons_worker() {
    mkdir -p "$STATE/worker"
    launch worker lava-worker --level INFO --name "$WORKER" --url "$URL" \
        --ws-url "${URL}ws/" --ping-interval 5 --http-timeout 600 \
        --worker-dir "$STATE/worker" --token-file "$STATE/worker.token" \
        --log-file "$STATE/log/worker.log"
}

# wait_idle: the devices Idle (the worker pinged the server)
wait_idle() {
    for _ in $(seq 1 60); do
        n=$(manage devices list --csv | tr -d '\r' | awk -F, '$1 ~ /^qemu-/ && $3 == "Idle" && $4 == "Good"' |
            wc -l)
        [ "$n" -ge 2 ] && return 0
        sleep 1
    done
    log "the devices are not Idle/Good yet:"
    manage devices list >&2
}

start() {
    mkdir -p "$STATE/run" "$STATE/log"
    chmod 755 "$STATE"
    packages
    postgres
    database
    kernel
    smoke_image
    config
    daemons_server
    objects
    daemons_worker
    wait_idle
    echo "LAVA_URL=$URL"
    echo "LAVA_TOKEN_FILE=$TOKEN_FILE"
}

stop() {
    for name in worker coordinator scheduler gunicorn; do
        halt "$name"
    done
    if [ -f "$STATE/run/postgresql.started" ]; then
        pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" stop || true
        rm -f "$STATE/run/postgresql.started"
        log "stopped PostgreSQL $PG_VERSION/$PG_CLUSTER"
    fi
}

status() {
    rc=0
    for name in $DAEMONS; do
        if running "$name"; then
            echo "$name: running (pid $(cat "$STATE/run/$name.pid"))"
        else
            echo "$name: stopped"
            rc=3
        fi
    done
    if curl -fsS -o /dev/null "${URL}api/v0.2/" 2>/dev/null; then
        echo "api: ${URL}api/v0.2/ answers"
    else
        echo "api: ${URL}api/v0.2/ does not answer"
        rc=3
    fi
    return "$rc"
}

command=${1:-start}
case $command in
    start|stop) ;;
    status) status; exit $? ;;
    *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "not root and no sudo: run it as root"
    log "asking sudo: the lab's packages and daemons are the system's"
    exec sudo HARNESS_LAVA_PORT="$PORT" HARNESS_LAVA_STATE="$STATE" "$SELF" "$command"
fi
"$command"
