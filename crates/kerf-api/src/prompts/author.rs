//! Writing prompt files on the user's behalf: a new prompt from a schema, and the other format's
//! twin of one (kerf-core's [`kerf_core::twin`] makes them; this writes them where they belong,
//! with their sample input, and names the twin in its source).

use std::path::{Path, PathBuf};

use kerf_core::ResponseType;
use serde::Serialize;
use serde_json::{Map, Value, json};
use ts_rs::TS;

use crate::error::{ApiError, Code, Result};

/// A prompt file Kerf wrote.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    pub path: String,
    pub id: String,
    pub response_type: ResponseType,
    /// What was done, in words (for a twin: what changed from its source).
    pub changes: Vec<String>,
    /// The file that now names this one as its twin (`None`: the source was left as it was:
    /// it names a twin already, or cannot be written).
    pub source_updated: Option<String>,
}

fn io(path: &Path, e: impl std::fmt::Display) -> ApiError {
    ApiError::new(Code::Io, format!("{}: {e}", path.display()))
}

fn pretty(map: &Map<String, Value>) -> Result<String> {
    let mut text = serde_json::to_string_pretty(map)
        .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?;
    text.push('\n');
    Ok(text)
}

/// Refuse to write over `path` (unless `overwrite`), or where it is not a file.
fn free(path: &Path, overwrite: bool) -> Result<()> {
    if path.exists() && (!overwrite || !path.is_file()) {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "{} exists: nothing was written (choose another name{})",
                path.display(),
                if path.is_file() {
                    ", or overwrite it"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(())
}

/// The file prompt `id` has in `dir`, once `id` is a portable id (so it names a file in `dir`,
/// never one elsewhere).
pub fn file_for(dir: &Path, id: &str) -> Result<PathBuf> {
    let path = dir.join(format!("{id}.json"));
    if !super::is_portable_id(id) {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "`{id}`: a prompt id is 1 to 128 of A–Z, a–z, 0–9, `.`, `_`, `-`, not starting with `.` or `-`"
            ),
        ));
    }
    Ok(path)
}

fn id_of(path: &Path) -> Result<String> {
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !super::is_portable_id(&id) || path.extension().is_none_or(|x| x != "json") {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "{}: a prompt file is named ID.json, the id 1 to 128 of A–Z, a–z, 0–9, `.`, `_`, `-`, not starting with `.` or `-`",
                path.display()
            ),
        ));
    }
    Ok(id)
}

/// The twin of the prompt file `source`, written to `out` (default: `<twin id>.json` beside the
/// source). Its id is the file's name. When the twin lives in another folder, its sample input
/// is copied to `inputs/` there. With `update_source`, a source that names no twin yet names this
/// one in `twin` (one that names another is left as it is, and so is one that cannot be written:
/// a shipped prompt).
pub fn write_twin(
    source: &Path,
    out: Option<&Path>,
    overwrite: bool,
    update_source: bool,
) -> Result<Written> {
    let place = source.display().to_string();
    let text = kerf_core::error::read_text(source)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut map: Map<String, Value> =
        serde_json::from_str(text).map_err(|e| kerf_core::Error::json(&place, &e))?;
    let source_id = map
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .map_or_else(|| id_of(source), Ok)?;
    let mut twin = kerf_core::twin::twin(&map, &source_id, &place)?;
    let dir = source.parent().unwrap_or(Path::new("."));
    let out = match out {
        Some(o) => o.to_path_buf(),
        None => dir.join(format!("{}.json", twin.id)),
    };
    let id = id_of(&out)?;
    if id != twin.id {
        twin.file.insert("id".into(), json!(id));
    }
    free(&out, overwrite)?;
    let out_dir = out.parent().unwrap_or(Path::new("."));
    if let Some(Value::String(rel)) = twin.file.get("sample-input").cloned()
        && !same_dir(dir, out_dir)
        && let Some(found) = kerf_core::prompt::resolve_sample_input(dir, &rel)
    {
        let moved = copy_sample(&found, out_dir)?;
        twin.changes.push(format!(
            "sample input copied to {}",
            out_dir.join(&moved).display()
        ));
        twin.file.insert("sample-input".into(), json!(moved));
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    }
    super::write_atomically(&out, &pretty(&twin.file)?)?;
    let mut source_updated = None;
    let writable = std::fs::metadata(source).is_ok_and(|m| !m.permissions().readonly());
    match map.get("twin").and_then(Value::as_str) {
        Some(theirs) if theirs != id => twin.changes.push(format!(
            "{} keeps `{theirs}` as its twin (its `twin` key was left as it was)",
            source.display()
        )),
        _ => {}
    }
    if update_source && !map.contains_key("twin") && writable {
        let _lock = kerf_core::files::Lock::exclusive(source)?;
        // Re-read under the lock: what is written is what was there, plus `twin`.
        let now = kerf_core::error::read_text(source)?;
        if now.strip_prefix('\u{feff}').unwrap_or(&now) == text {
            map.insert("twin".into(), json!(id));
            super::write_atomically(source, &pretty(&map)?)?;
            source_updated = Some(source.display().to_string());
        }
    }
    Ok(Written {
        path: out.display().to_string(),
        id,
        response_type: twin.response_type,
        changes: twin.changes,
        source_updated,
    })
}

/// The file name `source`'s twin gets: `<twin id>.json`.
pub fn twin_file_name(source: &Path) -> Result<String> {
    let loaded = kerf_core::PromptFile::load(source)?;
    let to = match loaded.file.response_type {
        ResponseType::Json => ResponseType::Jsonl,
        _ => ResponseType::Json,
    };
    Ok(format!(
        "{}.json",
        kerf_core::twin::twin_id(loaded.file.id(), to)
    ))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| {
        let p = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
    };
    canon(a) == canon(b)
}

/// `file` copied into `dir/inputs/` (unless the same text is there already); its path relative
/// to `dir`.
fn copy_sample(file: &Path, dir: &Path) -> Result<String> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sample.txt".into());
    let target = dir.join("inputs").join(&name);
    let text = std::fs::read(file).map_err(|e| io(file, e))?;
    if std::fs::read(&target).ok().as_deref() != Some(&text[..]) {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        kerf_core::files::write_atomically(&target, &text)?;
    }
    Ok(format!("inputs/{name}"))
}

/// A new prompt file `path` answering in `format`, for the items of the JSON Schema `schema`
/// (`None`: a name and a description per item), with Kerf's sample text as its sample input
/// (`inputs/ID.txt` beside it, unless that exists). With `twin`, its twin is written too and
/// each names the other. Returns the files written: the prompt, then its twin.
pub fn write_new(
    path: &Path,
    format: ResponseType,
    schema: Option<&Path>,
    twin: bool,
    overwrite: bool,
) -> Result<Vec<Written>> {
    let id = id_of(path)?;
    free(path, overwrite)?;
    if twin && !matches!(format, ResponseType::Jsonl | ResponseType::Json) {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "a {} prompt has no twin: twins are JSONL and JSON-array prompts (nothing was written)",
                format.as_str()
            ),
        ));
    }
    let schema = schema
        .map(|s| {
            let place = s.display().to_string();
            let text = kerf_core::error::read_text(s)?;
            serde_json::from_str::<Value>(&text)
                .map_err(|e| ApiError::from(kerf_core::Error::json(&place, &e)))
        })
        .transpose()?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let sample = format!("inputs/{id}.txt");
    let mut file = kerf_core::twin::new_prompt(&id, format, schema, Some(&sample))?;
    let sample_path = dir.join(&sample);
    let mut changes = vec![format!(
        "a {} prompt over {}",
        format.as_str(),
        if file.get("schema").is_some() {
            "its schema's items"
        } else {
            "no schema"
        }
    )];
    if !sample_path.exists() {
        if let Some(parent) = sample_path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        kerf_core::files::write_atomically(&sample_path, kerf_core::twin::SAMPLE_INPUT.as_bytes())?;
        changes.push(format!(
            "sample input {} (replace it with a text of your own)",
            sample_path.display()
        ));
    }
    let twin_path: Option<PathBuf> = twin.then(|| {
        dir.join(format!(
            "{}.json",
            kerf_core::twin::twin_id(&id, other(format))
        ))
    });
    if let Some(t) = &twin_path {
        free(t, overwrite)?;
        let twin_id = id_of(t)?;
        file.insert("twin".into(), json!(twin_id));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    }
    super::write_atomically(path, &pretty(&file)?)?;
    let mut out = vec![Written {
        path: path.display().to_string(),
        id,
        response_type: format,
        changes,
        source_updated: None,
    }];
    if let Some(t) = twin_path {
        out.push(write_twin(path, Some(&t), overwrite, false)?);
    }
    Ok(out)
}

fn other(format: ResponseType) -> ResponseType {
    match format {
        ResponseType::Json => ResponseType::Jsonl,
        _ => ResponseType::Json,
    }
}

/// The draft `draft` (opened from `from`, if it was) written as a new prompt `id` in `dir` (the
/// user's prompt folder): its `id` set, its sample input copied to `inputs/` there when it lived
/// elsewhere. Nothing is written over an existing file unless `overwrite`. Returns the file.
pub fn save_as(
    draft: &super::wire::PromptDraft,
    from: Option<&Path>,
    dir: &Path,
    id: &str,
    overwrite: bool,
) -> Result<PathBuf> {
    let path = file_for(dir, id)?;
    free(&path, overwrite)?;
    let (mut map, problems) = super::compose(draft);
    if let Some(p) = problems.into_iter().next() {
        return Err(ApiError::new(
            p.code,
            format!(
                "the {} is not valid JSON, so nothing was saved: {}",
                p.part.as_str(),
                p.message
            ),
        ));
    }
    map.insert("id".into(), json!(id));
    if let (Some(Value::String(rel)), Some(from_dir)) = (
        map.get("sample-input").cloned(),
        from.and_then(Path::parent),
    ) && !same_dir(from_dir, dir)
        && let Some(found) = kerf_core::prompt::resolve_sample_input(from_dir, &rel)
    {
        let moved = copy_sample(&found, dir)?;
        map.insert("sample-input".into(), json!(moved));
    }
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    super::write_atomically(&path, &pretty(&map)?)?;
    Ok(path)
}

/// The prompt files in `dir` (beside `except`) whose `twin` names `id`.
fn twins_naming(dir: &Path, id: &str, except: &Path) -> Vec<(PathBuf, Map<String, Value>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != except && p.extension().is_some_and(|x| x == "json") && p.is_file())
        .filter_map(|p| {
            let map: Map<String, Value> =
                serde_json::from_str(&std::fs::read_to_string(&p).ok()?).ok()?;
            (map.get("twin").and_then(Value::as_str) == Some(id)).then_some((p, map))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Prompt file `path` renamed to `id` in its folder: its `id` key (when it has one) is the new
/// id, and a prompt beside it that names it as its twin names the new id. Nothing is written
/// over an existing file. Returns the new file and the twins that now name it.
pub fn rename(path: &Path, id: &str) -> Result<(PathBuf, Vec<PathBuf>)> {
    let old = id_of(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let to = file_for(dir, id)?;
    if to == path {
        return Ok((to, Vec::new()));
    }
    free(&to, false)?;
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    let mut map: Map<String, Value> = serde_json::from_str(&text).map_err(|e| {
        ApiError::new(
            Code::Usage,
            format!("{}: not a prompt file (JSON object): {e}", path.display()),
        )
    })?;
    if map.contains_key("id") {
        map.insert("id".into(), json!(id));
    }
    // The new file first, then the old one goes: a failure between leaves both, never neither.
    super::write_atomically(&to, &pretty(&map)?)?;
    std::fs::remove_file(path).map_err(|e| io(path, e))?;
    let mut updated = Vec::new();
    for (p, mut twin) in twins_naming(dir, &old, &to) {
        twin.insert("twin".into(), json!(id));
        super::write_atomically(&p, &pretty(&twin)?)?;
        updated.push(p);
    }
    Ok((to, updated))
}

/// Prompt file `path` deleted from its folder: moved to `.deleted/` there (out of every list,
/// where it can be taken back by hand; an older copy of the same name is replaced), and a prompt
/// beside it that named it as its twin names none. Returns where it went.
pub fn delete(path: &Path) -> Result<PathBuf> {
    let id = id_of(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let bin = dir.join(".deleted");
    std::fs::create_dir_all(&bin).map_err(|e| io(&bin, e))?;
    let to = bin.join(format!("{id}.json"));
    std::fs::rename(path, &to).map_err(|e| io(path, e))?;
    for (p, mut twin) in twins_naming(dir, &id, path) {
        twin.shift_remove("twin");
        super::write_atomically(&p, &pretty(&twin)?)?;
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(dir: &Path, name: &str, v: Value) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        p
    }
    fn read(p: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    #[test]
    fn a_rename_moves_the_file_sets_its_id_and_keeps_its_twin_pointing_at_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(
            dir.path(),
            "facts.json",
            json!({"id": "facts", "prompt": "p", "response-type": "jsonl", "twin": "facts-array"}),
        );
        let b = write(
            dir.path(),
            "facts-array.json",
            json!({"id": "facts-array", "prompt": "p", "response-type": "json", "twin": "facts"}),
        );
        let (to, updated) = rename(&a, "claims").unwrap();
        assert_eq!(to, dir.path().join("claims.json"));
        assert!(!a.exists());
        assert_eq!(read(&to)["id"], "claims");
        assert_eq!(
            read(&to)["twin"],
            "facts-array",
            "its own twin is unchanged"
        );
        assert_eq!(updated, vec![b.clone()]);
        assert_eq!(read(&b)["twin"], "claims");
        // Nothing is written over a file there already, and a bad id is refused.
        let e = rename(&to, "facts-array").unwrap_err();
        assert_eq!(e.code, Code::Usage);
        assert!(e.message.contains("exists"), "{}", e.message);
        assert!(to.exists());
        assert_eq!(rename(&to, "../x").unwrap_err().code, Code::Usage);
    }

    #[test]
    fn a_delete_moves_the_file_aside_and_its_twin_names_none() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(
            dir.path(),
            "facts.json",
            json!({"prompt": "p", "response-type": "jsonl", "twin": "facts-array"}),
        );
        let b = write(
            dir.path(),
            "facts-array.json",
            json!({"prompt": "p", "response-type": "json", "twin": "facts", "description": "d"}),
        );
        let kept = delete(&a).unwrap();
        assert!(!a.exists());
        assert_eq!(kept, dir.path().join(".deleted/facts.json"));
        assert_eq!(read(&kept)["twin"], "facts-array", "kept as it was");
        let twin = read(&b);
        assert!(twin.get("twin").is_none(), "{twin}");
        assert_eq!(twin["description"], "d");
    }
}
