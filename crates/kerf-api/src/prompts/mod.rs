//! Prompt files as the editor sees them: listing the folders, opening a file into a draft,
//! inspecting a draft as the user types (variables, preview, schema errors, union branches,
//! provider lint), and saving it back without losing the keys the editor does not show.

use std::path::{Path, PathBuf};

use kerf_core::prompt::SchemaKey;
use kerf_core::{Prompt, PromptFile};
use serde_json::{Map, Value};

use crate::error::{ApiError, Code, Result};

pub mod author;
pub mod wire;

use wire::{
    DraftPart, Inspection, LintFinding, Preview, Problem, PromptDoc, PromptDraft, PromptEntry,
};

/// A folder of prompt files and what the list calls it (`shipped`, `user`).
#[derive(Debug, Clone, PartialEq)]
pub struct PromptDir {
    pub label: String,
    pub path: PathBuf,
}

/// Every `*.json` prompt file in `dirs`, sorted by id within each folder. A file that does not
/// load is listed with its error, so the user can open and fix it; a folder that does not exist
/// lists nothing.
pub fn list(dirs: &[PromptDir]) -> Vec<PromptEntry> {
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(read) = std::fs::read_dir(&dir.path) else {
            continue;
        };
        let mut entries: Vec<PromptEntry> = read
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
            .map(|p| entry(&p, &dir.label))
            .collect();
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        out.extend(entries);
    }
    out
}

fn entry(path: &Path, folder: &str) -> PromptEntry {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match PromptFile::load(path) {
        Ok(loaded) => PromptEntry {
            id: loaded.file.id().to_string(),
            path: path.display().to_string(),
            folder: folder.into(),
            response_type: Some(loaded.file.response_type),
            description: loaded.file.description.clone(),
            twin: loaded.file.twin.clone(),
            error: None,
        },
        Err(e) => PromptEntry {
            id: stem,
            path: path.display().to_string(),
            folder: folder.into(),
            response_type: None,
            description: None,
            twin: None,
            error: Some(e.to_string()),
        },
    }
}

/// Open a prompt file for editing.
pub fn open(path: &Path) -> Result<PromptDoc> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ApiError::new(Code::Io, format!("{}: {e}", path.display())))?;
    let loaded = PromptFile::from_json_str(&text, &path.display().to_string())?;
    let mut file = loaded.file;
    if file.id.is_none() {
        file.id = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    }
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let sample_input = file.sample_input.as_ref().and_then(|rel| {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::read_to_string(kerf_core::prompt::resolve_sample_input(dir, rel)?).ok()
    });
    Ok(PromptDoc {
        path: path.display().to_string(),
        id: file.id().to_string(),
        text: text.clone(),
        draft: PromptDraft {
            base: text,
            template: file.prompt.clone(),
            system: file.system.clone().unwrap_or_default(),
            schema: file.schema.as_ref().map(pretty).unwrap_or_default(),
            response_type: file.response_type.to_string(),
            post: if file.post.is_empty() {
                String::new()
            } else {
                serde_json::to_value(&file.post)
                    .map(|v| pretty(&v))
                    .unwrap_or_default()
            },
            terms: Some(if file.terms.is_empty() {
                String::new()
            } else {
                pretty(&Value::Object(file.terms.clone()))
            }),
        },
        sample_input,
        input_variable: file.input_variable().to_string(),
        repair_attempts: file.repair.map(|r| r.max_attempts),
    })
}

fn problem(part: DraftPart, code: Code, message: impl Into<String>) -> Problem {
    Problem {
        part,
        code,
        message: message.into(),
        line: None,
        column: None,
        pointer: None,
    }
}

/// A part's JSON text (`""`: absent), or the problem with it, at its line and column.
fn part_json(part: DraftPart, text: &str) -> std::result::Result<Option<Value>, Problem> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(text).map(Some).map_err(|e| Problem {
        line: Some(e.line() as u32),
        column: Some(e.column() as u32),
        ..problem(
            part,
            Code::InvalidJson,
            format!(
                "not valid JSON: {}",
                kerf_core::error::strip_position(&e.to_string())
            ),
        )
    })
}

/// The prompt file a draft stands for, as a JSON object: the base file's keys in their order,
/// with the edited parts put in place. Problems are the parts that are not valid JSON.
fn compose(draft: &PromptDraft) -> (Map<String, Value>, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut map = match part_json(DraftPart::File, &draft.base) {
        Ok(Some(Value::Object(m))) => m,
        Ok(_) => Map::new(),
        Err(p) => {
            problems.push(p);
            Map::new()
        }
    };
    // The schema stays under the key the file used (`object-schema` is TrustGraph's name).
    let schema_key = SchemaKey::of(&map).as_str();
    let mut set = |key: &str, value: Option<Value>| match value {
        Some(v) => {
            map.insert(key.to_string(), v);
        }
        None => {
            map.remove(key);
        }
    };
    set("prompt", Some(Value::String(draft.template.clone())));
    set(
        "system",
        (!draft.system.is_empty()).then(|| Value::String(draft.system.clone())),
    );
    set(
        "response-type",
        Some(Value::String(draft.response_type.clone())),
    );
    match part_json(DraftPart::Schema, &draft.schema) {
        Ok(v) => set(schema_key, v),
        Err(p) => problems.push(p),
    }
    match part_json(DraftPart::Post, &draft.post) {
        Ok(v) => set("post", v),
        Err(p) => problems.push(p),
    }
    if let Some(terms) = &draft.terms {
        match part_json(DraftPart::Terms, terms) {
            Ok(Some(v)) if !v.is_object() => problems.push(problem(
                DraftPart::Terms,
                Code::InvalidJson,
                "the terms must be a JSON object of variable names and values",
            )),
            Ok(v) => set("terms", v),
            Err(p) => problems.push(p),
        }
    }
    (map, problems)
}

/// The draft with its schema key renamed from `object-schema` to `schema` (the Prompts screen's
/// one-click fix for the `trustgraph` finding): the key keeps its place in the file, and nothing
/// is written until the user saves. A draft without `object-schema` comes back unchanged.
pub fn rename_schema_key(draft: &PromptDraft) -> Result<PromptDraft> {
    let map = match part_json(DraftPart::File, &draft.base) {
        Ok(Some(Value::Object(m))) => m,
        Ok(_) => return Ok(draft.clone()),
        Err(p) => return Err(ApiError::new(p.code, p.message)),
    };
    if SchemaKey::of(&map) != SchemaKey::ObjectSchema {
        return Ok(draft.clone());
    }
    let renamed = kerf_core::prompt::rename_key(map, "object-schema", "schema");
    let mut base = serde_json::to_string_pretty(&Value::Object(renamed)).unwrap_or_default();
    base.push('\n');
    Ok(PromptDraft {
        base,
        ..draft.clone()
    })
}

/// The problem a compile error is, in the part it comes from.
fn compile_problem(e: kerf_core::Error) -> Problem {
    let code = Code::from(&e);
    match e {
        kerf_core::Error::Schema {
            pointer, message, ..
        } => Problem {
            pointer: Some(pointer),
            ..problem(DraftPart::Schema, code, message)
        },
        kerf_core::Error::TemplateSyntax { .. }
        | kerf_core::Error::TemplateUndefined { .. }
        | kerf_core::Error::TemplateRender { .. } => {
            let message = e.to_string();
            let part = if message.contains("(system)") {
                DraftPart::System
            } else {
                DraftPart::Template
            };
            Problem {
                line: template_line(&message),
                ..problem(part, code, message)
            }
        }
        other => problem(DraftPart::File, code, other.to_string()),
    }
}

/// The template line a minijinja message names (`… (in name:3)` or `line 3`), if any.
fn template_line(message: &str) -> Option<u32> {
    let after = message
        .rsplit_once(":")
        .map(|(_, l)| l)
        .or_else(|| message.rsplit_once("line ").map(|(_, l)| l))?;
    after
        .trim_matches(|c: char| !c.is_ascii_digit())
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Compile a draft; `place` names it in messages.
pub fn compile(draft: &PromptDraft, place: &str) -> std::result::Result<Prompt, Vec<Problem>> {
    let (map, mut problems) = compose(draft);
    if !problems.is_empty() {
        return Err(problems);
    }
    let loaded = match PromptFile::from_value(Value::Object(map), place, None) {
        Ok(l) => l,
        Err(e) => {
            let mut p = problem(DraftPart::File, Code::from(&e), e.to_string());
            if e.to_string().contains("response-type") {
                p.part = DraftPart::ResponseType;
            }
            return Err(vec![p]);
        }
    };
    let mut file = loaded.file;
    if file.id.is_none() {
        file.id = Path::new(place)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned());
    }
    Prompt::compile(file, place).map_err(|e| {
        problems.push(compile_problem(e));
        problems
    })
}

/// What the editor shows beside a draft: rendered with `input` bound to the prompt's input
/// variable (plus `vars`), the schema checked against its meta-schema, its union branches, and
/// what each provider would make of it.
pub fn inspect(
    draft: &PromptDraft,
    path: Option<&Path>,
    input: &str,
    vars: &Map<String, Value>,
) -> Inspection {
    let place = path.map_or_else(|| "draft".to_string(), |p| p.display().to_string());
    let mut out = Inspection {
        variables: Vec::new(),
        from_terms: Vec::new(),
        preview: None,
        problems: Vec::new(),
        branches: Vec::new(),
        lint: Vec::new(),
    };
    // Lint and the variables need only their own part, so they show even while another part is
    // broken.
    let (composed, _) = compose(draft);
    if let Ok(Some(schema)) = part_json(DraftPart::Schema, &draft.schema) {
        // The file's own shape matters too (`object-schema` is never used by TrustGraph).
        let file = PromptFile {
            schema: Some(schema),
            schema_key: SchemaKey::of(&composed),
            ..PromptFile::default()
        };
        for provider in kerf_core::lint::Provider::ALL {
            for f in kerf_core::lint::prompt_file(&file, provider) {
                out.lint.push(LintFinding {
                    provider: f.provider,
                    severity: f.severity,
                    pointer: f.pointer,
                    keyword: f.keyword,
                    message: f.message,
                });
            }
        }
    }
    for (part, text) in [("template", &draft.template), ("system", &draft.system)] {
        if let Ok(t) = kerf_core::Template::new(part, text) {
            out.variables.extend(t.variables());
        }
    }
    out.variables.sort();
    out.variables.dedup();
    // The prompt's own terms supply theirs (as `Prompt::input_variables` says once it compiles).
    if let Some(Value::Object(terms)) = composed.get("terms") {
        out.from_terms = out
            .variables
            .iter()
            .filter(|v| terms.contains_key(*v))
            .cloned()
            .collect();
        out.variables.retain(|v| !terms.contains_key(v));
    }
    let prompt = match compile(draft, &place) {
        Ok(p) => p,
        Err(problems) => {
            out.problems = problems;
            return out;
        }
    };
    out.variables = prompt.input_variables();
    out.branches = prompt
        .parser
        .schema()
        .map(|s| s.union_tags().into_iter().map(String::from).collect())
        .unwrap_or_default();
    let mut run_vars = Map::new();
    run_vars.insert(
        prompt.file.input_variable().to_string(),
        Value::String(input.to_string()),
    );
    run_vars.extend(vars.clone());
    match prompt.render(&Map::new(), &run_vars) {
        Ok(r) => {
            let tokens = kerf_core::sweep::token_count(r.system.as_deref().unwrap_or(""))
                + kerf_core::sweep::token_count(&r.user);
            out.preview = Some(Preview {
                system: r.system,
                user: r.user,
                tokens: tokens as u32,
            })
        }
        Err(e) => out.problems.push(compile_problem(e)),
    }
    out
}

/// Write a draft to `path` (atomically: a temporary file beside it, then a rename, so a crash
/// never leaves half a prompt file). The JSON parts must parse; a template or schema that does
/// not compile is saved as it is (work in progress is the user's), and reported. With `opened`
/// (the file's text when the editor opened it), the file must still hold it: a file changed on
/// disk since (by the CLI, an import, another window) is a `conflict`, and nothing is written —
/// the check and the write happen under the file's lock. Returns the text written.
pub fn save(draft: &PromptDraft, path: &Path, opened: Option<&str>) -> Result<String> {
    let (map, problems) = compose(draft);
    if let Some(p) = problems.into_iter().next() {
        return Err(ApiError {
            details: serde_json::to_value(&p).ok(),
            ..ApiError::new(
                p.code,
                format!(
                    "{}: the {} is not valid JSON, so nothing was saved: {}",
                    path.display(),
                    p.part.as_str(),
                    p.message
                ),
            )
        });
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(map))
        .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?;
    text.push('\n');
    let _lock = kerf_core::files::Lock::exclusive(path)?;
    if let Some(opened) = opened {
        let on_disk = match std::fs::read_to_string(path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(ApiError::new(Code::Io, format!("{}: {e}", path.display()))),
        };
        if on_disk.as_deref() != Some(opened) {
            return Err(ApiError::new(
                Code::Conflict,
                format!(
                    "{} {} since it was opened (by the CLI, an import or another window), so nothing was saved: reopen it to see that version (your draft is kept), then edit and save again",
                    path.display(),
                    if on_disk.is_some() {
                        "changed on disk"
                    } else {
                        "was deleted"
                    }
                ),
            ));
        }
    }
    write_atomically(path, &text)?;
    Ok(text)
}

/// A TrustGraph prompt config — a bundle (`system`, `template-index`, `template.<id>`) or one
/// template object — written into `dir` as Kerf prompt files, `<id>.json` each. `id` names a
/// single template (default: the file's name). Nothing is written unless every template compiles
/// and, without `overwrite`, none of the files exists; each file is written atomically. Returns
/// the files written, in the bundle's order.
pub fn import(file: &Path, dir: &Path, id: Option<&str>, overwrite: bool) -> Result<Vec<PathBuf>> {
    let place = file.display().to_string();
    let text = kerf_core::error::read_text(file)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let value: Value =
        serde_json::from_str(text).map_err(|e| kerf_core::Error::json(&place, &e))?;
    let default_id = id
        .map(str::to_string)
        .or_else(|| file.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "prompt".into());
    let prompts = kerf_core::export::trustgraph::import(&value, &default_id, &place)?;
    let mut targets: Vec<PathBuf> = Vec::new();
    for p in &prompts {
        // The id becomes a file name: one from a config someone sent must not lead out of `dir`,
        // and must mean the same file on every system (a portable set, compared without case).
        let id = p.id();
        if !is_portable_id(id) {
            return Err(ApiError::new(
                Code::Import,
                format!(
                    "{place} template `{id}`: an id must be 1 to 128 of A–Z, a–z, 0–9, `.`, `_`, \
                     `-`, not starting with `.` or `-`, and not a name Windows keeps for a device \
                     (CON, PRN, AUX, NUL, COM0–9, LPT0–9); nothing was written"
                ),
            ));
        }
        if targets.iter().any(|t| {
            t.file_stem()
                .is_some_and(|s| s.to_string_lossy().eq_ignore_ascii_case(id))
        }) {
            return Err(ApiError::new(
                Code::Import,
                format!(
                    "{place}: two templates would be the same file `{id}.json` (ids differ only in case); nothing was written"
                ),
            ));
        }
        Prompt::compile(p.clone(), &format!("{place} template `{id}`"))?;
        targets.push(dir.join(format!("{id}.json")));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| ApiError::new(Code::Io, format!("{}: {e}", dir.display())))?;
    // Each file's lock, as a window saving it takes (see `save`), from the checks below to the
    // renames: a save never lands between them, and an import never replaces a file under a
    // save. Taken in path order, so two imports never wait on each other in a circle.
    let mut order: Vec<&PathBuf> = targets.iter().collect();
    order.sort();
    let _locks = order
        .into_iter()
        .map(|t| kerf_core::files::Lock::exclusive(t))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    for (p, path) in prompts.iter().zip(&targets) {
        let id = p.id();
        if path.exists() && !path.is_file() {
            return Err(ApiError::new(
                Code::Usage,
                format!(
                    "{} exists and is not a file: `{id}` cannot be imported there (nothing was written)",
                    path.display()
                ),
            ));
        }
        if path.exists() && !overwrite {
            return Err(ApiError::new(
                Code::Usage,
                format!(
                    "{} exists: importing `{}` would overwrite it (nothing was written)",
                    path.display(),
                    id
                ),
            ));
        }
    }
    // All or nothing: every file is written to a temporary name first (and synced); only when
    // all are there are they renamed into place. A failure before that removes the temporaries.
    // (An error drops the files staged so far, which removes them.)
    let mut staged: Vec<AtomicFile> = Vec::new();
    for (p, path) in prompts.iter().zip(&targets) {
        use std::io::Write;
        let mut file = AtomicFile::create(path)?;
        file.write_all(p.to_json_string().as_bytes())
            .map_err(|e| ApiError::new(Code::Io, format!("{}: {e}", path.display())))?;
        file.sync()?;
        staged.push(file);
    }
    for file in staged {
        file.commit()?;
    }
    Ok(targets)
}

/// Whether `id` is a template id that is a plain, portable file name: a set of characters
/// every system takes, and not one of the names Windows keeps for devices (`CON`, `NUL`,
/// `COM1`, … with any extension: `nul.json` opens the null device there, so a bundle's prompt
/// would vanish).
fn is_portable_id(id: &str) -> bool {
    const DEVICES: [&str; 4] = ["CON", "PRN", "AUX", "NUL"];
    let stem = id.split('.').next().unwrap_or(id).to_ascii_uppercase();
    let device = DEVICES.contains(&stem.as_str())
        || (stem.len() == 4
            && (stem.starts_with("COM") || stem.starts_with("LPT"))
            && stem.as_bytes()[3].is_ascii_digit());
    (1..=128).contains(&id.len())
        && !device
        && !id.starts_with(['.', '-'])
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Write `text` to `path` by way of a temporary file in the same folder and a rename (see
/// [`kerf_core::files::AtomicFile`]).
pub fn write_atomically(path: &Path, text: &str) -> Result<()> {
    Ok(kerf_core::files::write_atomically(path, text.as_bytes())?)
}

/// [`write_atomically`] for bytes (a PNG chart).
pub fn write_atomically_bytes(path: &Path, text: &[u8]) -> Result<()> {
    Ok(kerf_core::files::write_atomically(path, text)?)
}

use kerf_core::files::AtomicFile;

/// A draft compiled to run, or its first problem as an error the user can act on (every
/// problem in `details`). `path`: where the draft's file lives, if it was ever saved.
pub fn compile_draft(draft: &PromptDraft, path: Option<&str>) -> Result<Prompt> {
    let place = path.unwrap_or("draft");
    let mut prompt = compile(draft, place).map_err(|problems| {
        let first = &problems[0];
        ApiError {
            details: serde_json::to_value(&problems).ok(),
            ..ApiError::new(
                first.code,
                format!("{} ({}): {}", place, first.part.as_str(), first.message),
            )
        }
    })?;
    prompt.path = path.map(PathBuf::from);
    Ok(prompt)
}

/// The constraint a prompt's output can be held to: its schema as one JSON value, or as JSONL
/// lines; none for text and delimited replies (or a prompt without a schema).
pub fn constraint_for(prompt: &Prompt) -> kerf_llm::Constraint {
    use kerf_core::ResponseType;
    use kerf_llm::Constraint;
    let schema = prompt.file.schema.clone();
    match (prompt.file.response_type, schema) {
        (ResponseType::Json, Some(s)) => Constraint::Json(s),
        (ResponseType::Jsonl, Some(s)) => Constraint::Jsonl(s),
        (ResponseType::Jsonl, None) => Constraint::Jsonl(serde_json::json!({"type": "object"})),
        _ => Constraint::None,
    }
}
