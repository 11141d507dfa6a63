#!/bin/sh
# All set-up on a fresh Debian 12/13 machine: system packages (as root, or
# through sudo for that step only when run by a user), the sandbox's user and
# subordinate ids, then the Python environment in .venv/ with the `harness`
# command, as whoever runs it. Safe to re-run.
set -eu
cd "$(dirname "$0")"

system() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # udev: virtme-ng's guest init (bench/boot.py) uses the host's udevd;
    # bubblewrap: the builds' and guests' sandbox; uidmap: newuidmap for
    # mmdebstrap's unshare mode (the guest image built without root);
    # fakechroot, fakeroot: its fallback for a user without subordinate ids
    apt-get install -y -qq --no-install-recommends \
        qemu-system-x86 qemu-utils mmdebstrap debian-archive-keyring \
        gcc libc6-dev make flex bison bc libelf-dev libssl-dev dwarves cpio xz-utils zstd \
        kmod e2fsprogs openssh-client openssh-server git ccache rsync ca-certificates lz4 \
        python3 python3-venv python3-dev udev bubblewrap uidmap fakechroot fakeroot \
        libvirt-daemon-system libvirt-clients libvirt-dev pkg-config >/dev/null
    # the user sandboxed builds and guests run as when the harness is root
    if ! getent passwd harness-sandbox >/dev/null; then
        useradd --system --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin harness-sandbox
    fi
    # subordinate ids (65536 each) for every login user without any: the
    # guest image is built in a user namespace of the user's own
    touch /etc/subuid /etc/subgid
    getent passwd | awk -F: '$3 >= 1000 && $3 < 60000 {print $1}' | while read -r name; do
        for file in /etc/subuid /etc/subgid; do
            grep -q "^$name:" "$file" && continue
            start=$(awk -F: 'BEGIN {m = 100000} {e = $2 + $3; if (e > m) m = e} END {print m}' "$file")
            echo "$name:$start:65536" >> "$file"
        done
    done
}

if [ "${1:-}" = --system ]; then
    system
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    system
elif command -v sudo >/dev/null; then
    echo "bootstrap.sh: asking sudo for the system packages and subordinate ids only" >&2
    sudo "$0" --system
else
    echo "bootstrap.sh: not root and no sudo: skipping the system packages (see: harness doctor)" >&2
fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[libvirt,test]'
./scripts/services.sh
