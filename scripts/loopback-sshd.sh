#!/bin/sh
# An sshd on 127.0.0.1 only, with its own host key and a client key made here,
# for the remote-hypervisor tests (`qemu+ssh://root@127.0.0.1:PORT/system`):
# the harness reaches "another" libvirt host through it, as it would a lab's.
# A second host on the same machine: the user harness-hv (made here, no
# password, member of kvm), whose own libvirtd `qemu+ssh://harness-hv@127.0.0.1:PORT/session`
# starts (domains, pools and guest count of its own).
# Started when not running; safe to re-run. Prints the directory holding the
# client key (id_ed25519) and the port.
#   LOOPBACK_SSH_PORT   port (default 2222)
#   LOOPBACK_SSH_DIR    state (default ~/.cache/harness/loopback-sshd)
set -eu
[ "$(id -u)" = 0 ] || { echo "loopback-sshd.sh: needs root (sshd)" >&2; exit 1; }
[ -x /usr/sbin/sshd ] || { echo "loopback-sshd.sh: /usr/sbin/sshd missing: apt-get install openssh-server (bootstrap.sh does)" >&2; exit 1; }
port=${LOOPBACK_SSH_PORT:-2222}
dir=${LOOPBACK_SSH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/harness/loopback-sshd}
mkdir -p "$dir" /run/sshd
chmod 700 "$dir"
[ -f "$dir/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C harness-loopback-host -f "$dir/host_ed25519"
[ -f "$dir/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C harness-loopback-client -f "$dir/id_ed25519"
cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
if ! id harness-hv >/dev/null 2>&1; then
    useradd --create-home --shell /bin/sh --groups kvm harness-hv
    usermod --password '*' harness-hv      # no password, but not locked: keys work
fi
hv_home=$(getent passwd harness-hv | cut -d: -f6)
install -d -m 700 -o harness-hv -g harness-hv "$hv_home/.ssh"
install -m 600 -o harness-hv -g harness-hv "$dir/id_ed25519.pub" "$hv_home/.ssh/authorized_keys"
printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$dir/host_ed25519.pub")" > "$dir/known_hosts"
cat > "$dir/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $port
HostKey $dir/host_ed25519
AuthorizedKeysFile $dir/authorized_keys .ssh/authorized_keys
PidFile $dir/sshd.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding yes
# the libvirt client opens one session per connection, plus the guests' tunnels
MaxSessions 64
MaxStartups 64:30:128
Subsystem sftp internal-sftp
EOF
if [ -f "$dir/sshd.pid" ] && kill -0 "$(cat "$dir/sshd.pid")" 2>/dev/null; then
    kill -HUP "$(cat "$dir/sshd.pid")"     # running: it reads the config again
else
    /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
fi
for _ in $(seq 1 50); do
    if ssh -q -p "$port" -i "$dir/id_ed25519" -o BatchMode=yes \
        -o UserKnownHostsFile="$dir/known_hosts" -o StrictHostKeyChecking=yes \
        root@127.0.0.1 true 2>/dev/null \
        && ssh -q -p "$port" -i "$dir/id_ed25519" -o BatchMode=yes \
        -o UserKnownHostsFile="$dir/known_hosts" -o StrictHostKeyChecking=yes \
        harness-hv@127.0.0.1 true 2>/dev/null; then
        echo "$dir $port"
        exit 0
    fi
    sleep 0.2
done
echo "loopback-sshd.sh: sshd on 127.0.0.1:$port does not answer; see $dir/sshd.log" >&2
exit 1
