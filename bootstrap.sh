#!/bin/sh
# All set-up on a fresh Debian 12/13 machine: system packages (as root, or
# through sudo for that step only when run by a user), the sandbox's user and
# subordinate ids, then the Python environment in .venv/ with the `harness`
# command, as whoever runs it; a user who may not open /dev/kvm is added to
# the kvm group; `man harness` and bash's completion of harness installed
# (root: under /usr/local/share; a user: under ~/.local/share). Safe to
# re-run: what is up to date is left alone.
set -eu
cd "$(dirname "$0")"

# the man page's tools, as tox.ini's docs env pins them (a unit test checks)
DOCS_PINS="sphinx==8.2.3 myst-parser==4.0.1"

system() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # udev: virtme-ng's guest init (bench/boot.py) uses the host's udevd;
    # bubblewrap: the builds' and guests' sandbox; uidmap: newuidmap for
    # mmdebstrap's unshare mode (the guest image built without root);
    # fakechroot, fakeroot: its fallback for a user without subordinate ids;
    # public-inbox: the local list the watcher's tests follow (scripts/public-inbox.sh)
    apt-get install -y -qq --no-install-recommends \
        qemu-system-x86 qemu-utils mmdebstrap debian-archive-keyring \
        gcc libc6-dev make flex bison bc libelf-dev libssl-dev dwarves cpio xz-utils zstd \
        kmod e2fsprogs openssh-client openssh-server git ccache rsync ca-certificates lz4 \
        python3 python3-venv python3-dev udev bubblewrap uidmap fakechroot fakeroot \
        libvirt-daemon-system libvirt-clients libvirt-dev pkg-config bash-completion \
        public-inbox >/dev/null
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

# /dev/kvm for a user: without it guests run under TCG, many times slower
kvm_group() {
    [ -e /dev/kvm ] && [ "$(id -u)" != 0 ] || return 0
    user=${USER:-$(id -un)}
    if id -nG "$user" | tr ' ' '\n' | grep -qx kvm; then
        id -nG | tr ' ' '\n' | grep -qx kvm ||
            echo "bootstrap.sh: $user is in the kvm group but this login began before:" \
                "log in again for KVM (until then guests run under TCG)" >&2
        return 0
    fi
    if ! getent group kvm >/dev/null; then
        echo "bootstrap.sh: no kvm group here: guests run under TCG (see harness doctor)" >&2
    elif command -v sudo >/dev/null && sudo usermod -aG kvm "$user"; then
        echo "bootstrap.sh: added $user to the kvm group (for /dev/kvm): log in again" \
            "for it to count; until then guests run under TCG, much slower" >&2
    else
        echo "bootstrap.sh: $user may not open /dev/kvm: as root, usermod -aG kvm $user," \
            "then log in again (until then guests run under TCG)" >&2
    fi
}

# where `man harness` and bash's completion look
if [ "$(id -u)" = 0 ]; then
    man_dir=/usr/local/share/man/man1
    completion_dir=/usr/local/share/bash-completion/completions
else
    man_dir=$HOME/.local/share/man/man1
    completion_dir=${BASH_COMPLETION_USER_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/bash-completion}/completions
fi

# install_file SOURCE TARGET: copied when different
install_file() {
    cmp -s "$1" "$2" 2>/dev/null && return 0
    mkdir -p "$(dirname "$2")" && cp "$1" "$2" && chmod 644 "$2" &&
        echo "bootstrap.sh: installed $2" >&2
}

completion() {
    .venv/bin/harness completion bash > .venv/harness.bash &&
        install_file .venv/harness.bash "$completion_dir/harness"
}

# harness.1 from docs/harness.md as tox's docs env builds it (Sphinx with
# MyST, in a venv of its own: .venv/docs); built again only when the page's
# source or the pins changed
man_page() {
    page=docs/_build/man/harness.1
    if [ "$(cat .venv/docs/pins 2>/dev/null)" != "$DOCS_PINS" ]; then
        rm -rf .venv/docs
        { python3 -m venv .venv/docs &&
            # shellcheck disable=SC2086 # one word per pin
            .venv/docs/bin/pip install -q $DOCS_PINS >/dev/null &&
            echo "$DOCS_PINS" > .venv/docs/pins; } || return 1
    fi
    if [ ! -f "$page" ] || [ docs/harness.md -nt "$page" ] || [ docs/conf.py -nt "$page" ] ||
            [ .venv/docs/pins -nt "$page" ]; then
        .venv/docs/bin/sphinx-build -q -b man docs docs/_build/man || return 1
    fi
    install_file "$page" "$man_dir/harness.1" || return 1
    if [ "$(id -u)" != 0 ] && command -v man >/dev/null && ! man -w harness >/dev/null 2>&1
    then
        echo "bootstrap.sh: \`man harness\` finds $man_dir once ~/.local/bin is on PATH" \
            "(Debian's ~/.profile adds it at login when it exists); now: man $man_dir/harness.1" >&2
    fi
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
kvm_group
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[libvirt,test]'
completion || echo "bootstrap.sh: no bash completion installed (see above)" >&2
man_page || echo "bootstrap.sh: no man page installed (see above); harness --help says it too" >&2
./scripts/services.sh
