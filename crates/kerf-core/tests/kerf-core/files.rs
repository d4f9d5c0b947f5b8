//! Output files: a regular file is replaced whole; a device, a FIFO or a link is not replaced by
//! a regular file (what a rename over it once did); what a killed write left behind is swept.

#![cfg(unix)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

use kerf_core::files::{AtomicFile, TMP_SUFFIX, write_atomically};

fn kind(path: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(path).unwrap().file_type()
}

/// A link to `/dev/null` stays that link, and what is written goes to the device (a rename put
/// a 43 KB regular file in its place).
#[test]
fn a_device_is_written_in_place_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let null = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    write_atomically(&null, &[b'x'; 43 * 1024]).unwrap();
    assert!(kind(&null).is_symlink(), "the link was replaced");
    assert_eq!(std::fs::read_link(&null).unwrap(), Path::new("/dev/null"));
    assert_eq!(std::fs::metadata("/dev/null").unwrap().len(), 0);
    // And named directly: nothing is created in /dev.
    write_atomically(Path::new("/dev/null"), b"report").unwrap();
    use std::os::unix::fs::FileTypeExt;
    assert!(kind(Path::new("/dev/null")).is_char_device());
}

/// A FIFO's reader gets every byte, and the FIFO is still one afterwards.
#[test]
fn a_fifo_is_written_in_place_and_its_reader_gets_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap()
            .success()
    );
    let reader = {
        let pipe = pipe.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            std::fs::File::open(&pipe)
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
            text
        })
    };
    let mut out = AtomicFile::create(&pipe).unwrap();
    for i in 0..1000 {
        writeln!(out, "{{\"run\": {i}}}").unwrap();
    }
    out.commit().unwrap();
    let text = reader.join().unwrap();
    assert_eq!(text.lines().count(), 1000);
    assert!(text.ends_with("{\"run\": 999}\n"));
    use std::os::unix::fs::FileTypeExt;
    assert!(kind(&pipe).is_fifo());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file beside the FIFO");
}

/// A link at the target is replaced, never written through (a planted link must not aim the
/// output at another file); a regular file is replaced by a rename, so a reader holding the old
/// one keeps it.
#[test]
fn a_link_is_replaced_and_what_it_pointed_at_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    let link = dir.path().join("report.json");
    std::fs::write(&victim, "not a report").unwrap();
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    write_atomically(&link, b"new").unwrap();
    assert!(kind(&link).is_file());
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not a report");
    let mut held = std::fs::File::open(&link).unwrap();
    write_atomically(&link, b"newer").unwrap();
    let mut old = String::new();
    held.read_to_string(&mut old).unwrap();
    assert_eq!(old, "new");
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "newer");
}

/// A block device is never written (a report on a disk would destroy it): refused.
#[test]
fn a_block_device_is_refused() {
    let Some(disk) = ["/dev/loop0", "/dev/sda", "/dev/vda", "/dev/nvme0n1"]
        .into_iter()
        .map(Path::new)
        .find(|p| {
            use std::os::unix::fs::FileTypeExt;
            std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device())
        })
    else {
        return; // no block device to point at on this machine
    };
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("out.html");
    std::os::unix::fs::symlink(disk, &link).unwrap();
    let e = AtomicFile::create(&link).err().expect("refused");
    assert!(e.to_string().contains("a block device"), "{e}");
}

/// A temporary file of a process that has ended (a write killed by SIGKILL) is removed by the
/// next write of the same file; one of a running process, and other files, stay.
#[test]
fn a_killed_writes_temporary_file_is_swept_by_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.html");
    let mut child = Command::new("true").spawn().unwrap();
    let ended = child.id();
    child.wait().unwrap();
    let orphan = dir
        .path()
        .join(format!(".report.html.{ended}-0{TMP_SUFFIX}"));
    // Process 1 runs as long as the machine does.
    let running = dir.path().join(format!(".report.html.1-7{TMP_SUFFIX}"));
    let other = dir
        .path()
        .join(format!(".other.html.{ended}-0{TMP_SUFFIX}"));
    for f in [&orphan, &running, &other] {
        std::fs::write(f, "half a report").unwrap();
    }
    write_atomically(&report, b"<html>").unwrap();
    assert!(!orphan.exists(), "the killed write's file was swept");
    assert!(running.exists(), "a running writer's file stays");
    assert!(other.exists(), "another file's temporary stays");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "<html>");
}
