#!/bin/sh
# A local public-inbox list for the watcher's tests and for trying a watcher
# by hand: Debian's public-inbox (bootstrap.sh installs it), no systemd, no MTA.
#
#   public-inbox.sh start DIR [PORT] [MBOX...]
#       makes a v2 inbox "linux-rdma" (linux-rdma@lists.harness.invalid) under
#       DIR unless it is there, delivers each MBOX's messages to it (default:
#       tests/data/watch/*.mbox; none when DIR already holds the inbox), starts
#       public-inbox-httpd on 127.0.0.1:PORT (0 or none: a free port) and
#       prints the inbox's URL, e.g. http://127.0.0.1:40123/linux-rdma/
#   public-inbox.sh add DIR MBOX...
#       delivers more messages to the inbox, running or not; a running server
#       is told to reload (SIGHUP), so that its search sees them at once (it
#       would after about 30 s: public-inbox-httpd keeps a Xapian handle open
#       that long)
#   public-inbox.sh stop DIR
#       stops the server (DIR/httpd.pid); the inbox stays
#
# Each message goes through public-inbox-mda as an MTA would hand it over,
# with a Received: header of the delivery's time on top: that is the time
# public-inbox indexes as "received" (searched with rt:), the one a watcher's
# cursor follows. Works as root or as a user; DIR/httpd.log has the server's
# output.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
NAME=linux-rdma
ADDRESS=linux-rdma@lists.harness.invalid

die() { echo "public-inbox.sh: $*" >&2; exit 2; }
usage() { die "usage: public-inbox.sh start DIR [PORT] [MBOX...] | add DIR MBOX... | stop DIR"; }

need() {
    for tool in public-inbox-init public-inbox-mda public-inbox-httpd; do
        command -v "$tool" >/dev/null ||
            die "$tool not found: install Debian's public-inbox (./bootstrap.sh does)"
    done
}

# init DIR: the configuration (PI_CONFIG) and the v2 inbox, once
init() {
    export PI_CONFIG="$1/config"
    [ -f "$1/inbox/inbox.lock" ] && return 0
    mkdir -p "$1"
    public-inbox-init -V2 -L full "$NAME" "$1/inbox" "http://127.0.0.1/$NAME" "$ADDRESS"
    # no spam filter here (the mda asks spamc by default)
    git config --file "$PI_CONFIG" publicinboxmda.spamcheck none
}

# deliver DIR MBOX...: each message through public-inbox-mda
deliver() {
    dir=$1; shift
    export PI_CONFIG="$dir/config"
    for mbox in "$@"; do
        [ -f "$mbox" ] || die "$mbox: no such mbox"
    done
    split=$(mktemp -d "$dir/split.XXXXXX")
    for mbox in "$@"; do
        rm -f "$split"/*
        git mailsplit -b -o"$split" -- "$mbox" >/dev/null || die "$mbox: not an mbox"
        for message in "$split"/*; do
            { printf 'Received: from harness.invalid by lists.harness.invalid (public-inbox.sh);\n\t%s\n' \
                  "$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S +0000')"
              sed '1{/^From /d}' "$message"; } |
                ORIGINAL_RECIPIENT=$ADDRESS public-inbox-mda ||
                die "$mbox: public-inbox-mda refused $(basename "$message") (exit $?)"
        done
    done
    rm -rf "$split"
}

running() {
    [ -f "$1/httpd.pid" ] && kill -0 "$(cat "$1/httpd.pid")" 2>/dev/null
}

start() {
    dir=$1; port=$2; shift 2
    if running "$dir"; then
        cat "$dir/url"
        return 0
    fi
    fresh=yes
    [ -f "$dir/inbox/inbox.lock" ] && fresh=no
    init "$dir"
    if [ $# -gt 0 ]; then
        deliver "$dir" "$@"
    elif [ $fresh = yes ]; then
        deliver "$dir" "$here"/tests/data/watch/*.mbox
    fi
    rm -f "$dir/httpd.port"
    # bind the socket first (port 0: the kernel picks a free one, no race) and
    # hand it to the server as an inherited listener (LISTEN_FDS, as systemd's
    # socket activation does); the pid is the server's own after exec
    PI_CONFIG="$dir/config" setsid python3 -c '
import os, socket, sys
port_file, port = sys.argv[1], int(sys.argv[2])
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)
listener.setblocking(False)
os.dup2(listener.fileno(), 3)
os.set_inheritable(3, True)
with open(port_file + ".tmp", "w") as out:
    out.write(f"{listener.getsockname()[1]}\n")
os.rename(port_file + ".tmp", port_file)
os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
os.execvp("public-inbox-httpd", ["public-inbox-httpd", "-W0"])
' "$dir/httpd.port" "$port" </dev/null >>"$dir/httpd.log" 2>&1 &
    echo $! > "$dir/httpd.pid"
    for _ in $(seq 1 100); do
        if [ -f "$dir/httpd.port" ]; then
            url="http://127.0.0.1:$(cat "$dir/httpd.port")/$NAME/"
            if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
                    "${url}_/text/config/raw" 2>/dev/null; then
                echo "$url" > "$dir/url"
                echo "$url"
                return 0
            fi
        fi
        running "$dir" || break
        sleep 0.1
    done
    stop "$dir"
    echo "public-inbox.sh: public-inbox-httpd did not answer; see $dir/httpd.log:" >&2
    tail -5 "$dir/httpd.log" >&2
    exit 3
}

# reload DIR SINCE: SIGHUP (a new configuration, new handles), then wait
# until the search finds the messages received since SINCE
reload() {
    kill -HUP "$(cat "$1/httpd.pid")"
    for _ in $(seq 1 50); do
        python3 -c '
import sys, urllib.request
request = urllib.request.Request(sys.argv[1] + "?q=rt:" + sys.argv[2] + "..&x=A")
urllib.request.urlopen(request, timeout=2).close()
' "$(cat "$1/url")" "$2" 2>/dev/null && return 0
        sleep 0.1
    done
    die "public-inbox-httpd's search does not show the new messages; see $1/httpd.log"
}

stop() {
    [ -f "$1/httpd.pid" ] || return 0
    pid=$(cat "$1/httpd.pid")
    if kill "$pid" 2>/dev/null; then
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$1/httpd.pid" "$1/httpd.port" "$1/url"
}

[ $# -ge 2 ] || usage
command=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd) || die "$2: cannot make the directory"
shift 2
case $command in
start)
    need
    port=0
    case ${1:-} in
    ''|*[!0-9]*) ;;
    *) port=$1; shift ;;
    esac
    start "$dir" "$port" "$@" ;;
add)
    need
    [ $# -gt 0 ] || usage
    [ -f "$dir/inbox/inbox.lock" ] || die "$dir: no inbox here (public-inbox.sh start makes it)"
    since=$(date +%s)
    deliver "$dir" "$@"
    running "$dir" && reload "$dir" "$since" ;;
stop)
    stop "$dir" ;;
*)
    usage ;;
esac
