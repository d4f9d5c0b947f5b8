//! What keeps tests that touch the user's keyring apart from the user and from each other;
//! shared by the kerf-api, kerf-cli and desktop tests (each includes it by path).
#![allow(dead_code)] // each test binary uses part of it

/// A name no other run of these tests uses, now or before (a key left in the kernel keyring by a
/// run that died lasts until reboot): `prefix`, the process id and the clock's nanoseconds.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// Tests that write to the keyring run in a child process of this test binary, started with
/// `KERF_KEYRING=kernel` (as the CLI tests start `kerf`), so they never touch the desktop's
/// Secret Service: kerf-llm reads the variable once per process, and setting it here would race
/// the other tests' threads (and `set_var` is `unsafe`). `true` in that child: run the body
/// there. In this process: run `test` (its full name) alone in the child, which must pass, and
/// `false`: the body has run.
pub fn in_kernel_keyring(test: &str) -> bool {
    const CHILD: &str = "KERF_TEST_KERNEL_KEYRING_CHILD";
    if !cfg!(target_os = "linux") {
        return true; // the variable only chooses between Linux's keyrings
    }
    if std::env::var_os(CHILD).is_some() {
        assert_eq!(std::env::var("KERF_KEYRING").as_deref(), Ok("kernel"));
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--test-threads=1"])
        .env("KERF_KEYRING", "kernel")
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{test}, run with KERF_KEYRING=kernel:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    false
}
