#!/bin/sh
# The services the libvirt backend and its tests need, started when they are
# not running (this machine has no systemd): virtlogd and libvirtd. Run as
# root by bootstrap.sh; safe to re-run.
set -eu
[ "$(id -u)" = 0 ] || { echo "services.sh: not root, nothing started" >&2; exit 0; }
# what udev does on a normal system: /dev/kvm for the kvm group. Left root-only,
# libvirtd sees KVM in its QEMU probe but not for the libvirt-qemu user, and
# probes QEMU again on every domain start (about 80 s each, measured)
if [ -c /dev/kvm ] && getent group kvm >/dev/null; then
    chgrp kvm /dev/kvm && chmod 660 /dev/kvm
fi
pgrep -x virtlogd >/dev/null || virtlogd -d
pgrep -x libvirtd >/dev/null || libvirtd -d
# libvirtd answers once its socket is up
for _ in $(seq 1 50); do
    [ -S /var/run/libvirt/libvirt-sock ] && exit 0
    sleep 0.2
done
echo "services.sh: libvirtd did not open /var/run/libvirt/libvirt-sock" >&2
exit 1
