#!/bin/sh
# All set-up on a fresh Debian 12/13 machine, as root: system packages, the
# Python environment in .venv/ with the `harness` command. Safe to re-run.
set -eu
cd "$(dirname "$0")"
if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # udev: virtme-ng's guest init (bench/boot.py) uses the host's udevd
    apt-get install -y -qq --no-install-recommends \
        qemu-system-x86 qemu-utils mmdebstrap debian-archive-keyring \
        gcc libc6-dev make flex bison bc libelf-dev libssl-dev dwarves cpio xz-utils zstd \
        kmod e2fsprogs openssh-client openssh-server git ccache rsync ca-certificates lz4 \
        python3 python3-venv python3-dev udev \
        libvirt-daemon-system libvirt-clients libvirt-dev pkg-config >/dev/null
else
    echo "bootstrap.sh: not root, skipping apt packages (see: harness doctor)" >&2
fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[test]'
./scripts/services.sh
