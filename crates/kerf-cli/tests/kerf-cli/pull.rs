//! `kerf models pull` against a loopback hub (`tests/hub/hub.py`: the Hugging Face Hub's file
//! endpoints, redirects, ETags and ranges) serving the bundled GGUF: a cut download goes on from
//! where it stopped, a checksum that does not match, a file or repository that is not there, a
//! gated repository, a file that is not GGUF and a full disk each end with their own error, and
//! nothing half-written is left where models are found.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use crate::{kerf_cmd, repo, stderr, stdout_json};

struct Hub {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hub(args: &[&str]) -> Hub {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let mut child = Command::new("python3")
        .arg(repo().join("tests/hub/hub.py"))
        .args(args)
        .arg("--log")
        .arg(&log)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().strip_prefix("port ").unwrap().parse().unwrap();
    Hub {
        child,
        port,
        log,
        _dir: dir,
    }
}

fn bundled() -> PathBuf {
    kerf_llama::models::default_model_path(&kerf_core::dirs::models_dir())
}

fn pull(hub: &Hub, models: &Path, args: &[&str], token: Option<&str>) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = kerf_cmd(home.path());
    cmd.env("KERF_MODELS_DIR", models)
        .env("HF_ENDPOINT", format!("http://127.0.0.1:{}", hub.port))
        .env_remove("HF_TOKEN")
        .args(["models", "pull"])
        .args(args);
    if let Some(t) = token {
        cmd.env("HF_TOKEN", t);
    }
    cmd.output().unwrap()
}

fn ggufs(models: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(models)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".gguf"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_cut_download_goes_on_from_where_it_stopped_and_is_checked() {
    let model = bundled();
    assert!(
        model.is_file(),
        "the bundled model (kerf models fetch) is needed"
    );
    let serve = format!("acme/smol-GGUF:smol.Q4_1.gguf={}", model.display());
    let hub = hub(&["--serve", &serve, "--cut-after", "10000000"]);
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");

    let o = pull(&hub, &models, &["acme/smol-GGUF"], None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("error[network]") && stderr(&o).contains("pull it again"),
        "{}",
        stderr(&o)
    );
    assert!(
        ggufs(&models).is_empty(),
        "no half file where models are found"
    );

    let o = pull(&hub, &models, &["acme/smol-GGUF", "--json"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("going on from 10 MB of 98 MB"),
        "{}",
        stderr(&o)
    );
    let v = stdout_json(&o);
    assert_eq!(v["sha256"], kerf_llama::models::DEFAULT_MODEL_SHA256);
    assert_eq!(v["sizeBytes"], std::fs::metadata(&model).unwrap().len());
    assert_eq!(v["already"], false);
    let log = std::fs::read_to_string(&hub.log).unwrap();
    assert!(
        log.contains("range=bytes=10000000-"),
        "the second pull asked for the rest only:\n{log}"
    );
    assert_eq!(ggufs(&models), vec!["smol.Q4_1.gguf"]);
    assert!(
        !models.join(".hub/models--acme--smol-GGUF").exists(),
        "the staging copy goes"
    );

    // It is a model Kerf lists and runs.
    let home = tempfile::tempdir().unwrap();
    let o = kerf_cmd(home.path())
        .env("KERF_MODELS_DIR", &models)
        .args(["models", "list", "--json"])
        .output()
        .unwrap();
    let listed = stdout_json(&o);
    assert!(
        listed["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["path"].as_str().unwrap().ends_with("smol.Q4_1.gguf")
                && m["quantisation"].is_string()),
        "{listed}"
    );

    // Pulled again: already here, nothing downloaded.
    let before = std::fs::read_to_string(&hub.log).unwrap().lines().count();
    let o = pull(&hub, &models, &["acme/smol-GGUF:smol.Q4_1.gguf"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("already here:"));
    let after = std::fs::read_to_string(&hub.log).unwrap();
    assert!(
        !after.lines().skip(before).any(|l| l.contains("/cdn/")),
        "{after}"
    );
}

#[test]
fn what_the_hub_refuses_or_gets_wrong_is_said_and_nothing_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.gguf");
    let mut bytes = b"GGUF".to_vec();
    bytes.extend((0..200_000u32).map(|i| (i % 251) as u8));
    std::fs::write(&small, &bytes).unwrap();
    let text = dir.path().join("weights.gguf");
    std::fs::write(&text, "<html>this is a login page, not a model</html>").unwrap();
    let hub = hub(&[
        "--serve",
        &format!("acme/tiny-GGUF:tiny.gguf={}", small.display()),
        "--serve",
        &format!("acme/tiny-GGUF:twisted.gguf={}", small.display()),
        "--serve",
        &format!("acme/fake-GGUF:weights.gguf={}", text.display()),
        "--serve",
        &format!("corp/gated-GGUF:g.gguf={}", small.display()),
        "--gated",
        "corp/gated-GGUF",
        "--token",
        "hf_right",
        "--wrong-sha",
        "acme/tiny-GGUF:twisted.gguf",
    ]);
    let models = dir.path().join("models");

    let o = pull(&hub, &models, &["acme/tiny-GGUF:twisted.gguf"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("error[model]") && stderr(&o).contains("checksum mismatch"),
        "{}",
        stderr(&o)
    );

    let o = pull(
        &hub,
        &models,
        &["acme/tiny-GGUF:missing.gguf", "--json"],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    let e = &stdout_json(&o)["error"];
    assert_eq!(e["code"], "not_found");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("its GGUF files: tiny.gguf, twisted.gguf"),
        "{e}"
    );

    let o = pull(&hub, &models, &["nobody/nothing"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not on the hub (404)"),
        "{}",
        stderr(&o)
    );

    let o = pull(&hub, &models, &["acme/tiny-GGUF"], None);
    assert_eq!(
        o.status.code(),
        Some(2),
        "two GGUF files: the user names one"
    );
    assert!(
        stderr(&o).contains("name one: acme/tiny-GGUF:tiny.gguf"),
        "{}",
        stderr(&o)
    );

    let o = pull(&hub, &models, &["corp/gated-GGUF:g.gguf"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("error[auth]")
            && stderr(&o).contains("(401)")
            && stderr(&o).contains("set HF_TOKEN"),
        "{}",
        stderr(&o)
    );
    let o = pull(&hub, &models, &["corp/gated-GGUF:g.gguf"], Some("hf_wrong"));
    assert!(
        stderr(&o).contains("the HF_TOKEN given may not"),
        "{}",
        stderr(&o)
    );

    let o = pull(&hub, &models, &["acme/fake-GGUF:weights.gguf"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not a GGUF file"), "{}", stderr(&o));

    assert!(
        ggufs(&models).is_empty(),
        "nothing refused is kept: {:?}",
        ggufs(&models)
    );

    let o = pull(
        &hub,
        &models,
        &["corp/gated-GGUF:g.gguf", "--json"],
        Some("hf_right"),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "HF_TOKEN opens a gated repository: {}",
        stderr(&o)
    );
    assert_eq!(ggufs(&models), vec!["g.gguf"]);

    let o = pull(&hub, &models, &["not a name"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("OWNER/REPO"), "{}", stderr(&o));
}

/// A full disk, as the kernel reports one (ENOSPC): the partial download's place is Linux's
/// `/dev/full`, which takes no byte. (No mount: the test needs no privileges and leaves the
/// machine's mounts alone.)
#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_named_and_nothing_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    let sha = kerf_llama::models::DEFAULT_MODEL_SHA256;
    let blobs = models.join(".hub/models--acme--smol-GGUF/blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    std::os::unix::fs::symlink("/dev/full", blobs.join(format!("{sha}.part"))).unwrap();
    let serve = format!("acme/smol-GGUF:smol.gguf={}", bundled().display());
    let hub = hub(&["--serve", &serve]);
    let o = pull(&hub, &models, &["acme/smol-GGUF", "--json"], None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = &stdout_json(&o)["error"];
    assert_eq!(e["code"], "disk_full", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("the disk is full"),
        "{e}"
    );
    assert!(ggufs(&models).is_empty());
}
