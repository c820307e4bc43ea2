//! Stores by URL without a server: what `push`, `pull` and the read
//! commands say when the URL is not one, the server does not answer, or the
//! option cannot apply. (Against a live server: tests/remote/run.sh.)

mod common;

use std::process::Output;

use common::*;

/// `loaderx ARGS` against an endpoint where nothing listens (port 1 on
/// loopback: the connection is refused at once), no retries.
fn unreachable(args: &[&str]) -> Output {
    spawning(|| {
        assert_cmd::cargo::cargo_bin_cmd!("loaderx")
            .args(args)
            .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "k")
            .env("AWS_SECRET_ACCESS_KEY", "s")
            .env("LOADERX_REMOTE_RETRIES", "0")
            .env("LOADERX_REMOTE_TIMEOUT_MS", "2000")
            .output()
            .expect("run loaderx")
    })
}

#[test]
fn an_unreachable_server_is_an_error_naming_the_manifest() {
    for command in ["stats", "verify", "cat"] {
        let out = unreachable(&[command, "s3://bucket/some/store"]);
        assert_fails(&out, "s3://bucket/some/store/manifest.json");
    }
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 3, loaderx::Codec::Raw);
    assert_fails(&unreachable(&["push", path_str(dir.path()), "s3://bucket/p"]), "s3://bucket/p/manifest.json");
    let into = dir.path().join("pulled");
    assert_fails(&unreachable(&["pull", "s3://bucket/p", path_str(&into)]), "s3://bucket/p/manifest.json");
    assert!(!into.exists(), "a failed pull creates nothing");
}

#[test]
fn what_is_not_a_url_or_cannot_apply_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 3, loaderx::Codec::Raw);
    assert_fails(&loaderx(&["push", path_str(dir.path()), "/not/a/url"]), "not an s3://bucket/prefix URL");
    assert_fails(&loaderx(&["pull", "bucket/p", path_str(dir.path())]), "not an s3://bucket/prefix URL");
    assert_fails(&unreachable(&["bench", "s3://bucket/p", "--cold"]), "--cold");
}
