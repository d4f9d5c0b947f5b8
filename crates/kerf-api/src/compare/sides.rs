//! Two stored replies side by side, ready to be cut anywhere: each reply with where every
//! accepted object sits in it, the cuts after each of its tokens, and the sweep's curve — so a
//! front end that moves a cut point through both reads each count off the sweep itself
//! (`ByteCurve::at`), never a count of its own. The Compare screen shows a compare's two formats
//! this way, and History any two runs.

use std::path::Path;

use kerf_core::sweep::{ByteCurve, Sweep, Unit, byte_curve};
use kerf_core::{ParseReport, ResponseType};
use kerf_llm::{CancelToken, FinishReason};
use kerf_store::Store;
use serde_json::{Map, Value};

use crate::error::Result;
use crate::experiments::sweep::token_unit;
use crate::recovery::compile_version;
use crate::runs::{RunParams, RunSettings};
use crate::workbench::Workbench;

/// The tokenizer a cloud model's replies are cut with (its own is not public): the one
/// `kerf compare` sweeps them with.
pub const CLOUD_TOKENIZER: &str = "o200k_base";

/// One accepted object, where it sits in its reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    /// The byte range of its own text (`Parser::spans`).
    pub span: (usize, usize),
    /// A few of its values, to name it in a list.
    pub label: String,
}

/// One stored reply, ready to be cut at any token.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    pub run: i64,
    /// The prompt's name.
    pub prompt: String,
    pub response_type: ResponseType,
    pub max_tokens: u32,
    pub constrained: bool,
    pub finish_reason: Option<FinishReason>,
    /// The reply as the model wrote it.
    pub text: String,
    /// Where a cut after each token falls: `cuts[k]` is the byte offset after the first `k`
    /// tokens (a token that ends inside a character counts as the boundary before it, as the
    /// sweep counts it); `cuts[0]` is 0.
    pub cuts: Vec<usize>,
    /// Objects recovered by a cut at every byte (`curve.at(cuts[k])` is the count after `k`
    /// tokens).
    pub curve: ByteCurve,
    /// The same curve in tokens: what `kerf sweep --unit token` prints for this reply.
    pub sweep: Sweep,
    /// The reply's accepted objects, in order, each where it sits.
    pub objects: Vec<Placed>,
    /// Where a local run ran (see [`crate::history::ran_on`]).
    pub ran_on: Option<String>,
}

/// The tokenizer run `settings`' replies are cut with: the local model's own (its GGUF path,
/// as `kerf compare` sweeps with it), else [`CLOUD_TOKENIZER`]. A local model no longer in the
/// models folder falls back to [`CLOUD_TOKENIZER`] too; the sweep's `unit` names which was used.
pub fn tokenizer_for(settings: &RunSettings, models: &Path) -> String {
    if settings.provider == "local"
        && let Ok(path) =
            kerf_llama::models::resolve(models, settings.model.as_deref().map(Path::new))
    {
        return path.display().to_string();
    }
    CLOUD_TOKENIZER.to_string()
}

/// Stored run `id`, cut with the tokenizer [`tokenizer_for`] picks (local models from
/// `models`). Parsed again from its raw reply with the prompt version it ran and its variables,
/// as `kerf compare` sweeps a reply; `cancel` stops the sweep between the prefixes it evaluates.
pub fn side(store: &Store, models: &Path, id: i64, cancel: &CancelToken) -> Result<Side> {
    let record = store.run(id)?;
    let version = store.prompt_version(&record.summary.prompt_version)?;
    let prompt = compile_version(&version, id)?;
    let params = RunParams::from_stored(
        &record.params,
        &record.summary.provider,
        &record.summary.model,
    )?;
    let vars = record.input.vars.as_object().cloned().unwrap_or_default();
    let tokenizer = tokenizer_for(&params.settings, models);
    let ran_on = crate::history::ran_on(&record.details);
    Ok(Side {
        run: id,
        prompt: version.name,
        max_tokens: params.max_tokens,
        constrained: params.constrain,
        finish_reason: record.summary.finish_reason,
        ran_on,
        ..of_text(&prompt.parser, record.raw, &vars, &tokenizer, cancel)?
    })
}

/// A reply `text` read with `parser`, cut at each token of `tokenizer`: the part of a [`Side`]
/// its text decides (the rest is the run's, left empty).
fn of_text(
    parser: &kerf_core::Parser,
    text: String,
    vars: &Map<String, Value>,
    tokenizer: &str,
    cancel: &CancelToken,
) -> Result<Side> {
    let unit = token_unit(tokenizer, &text)?;
    let curve = byte_curve(parser, &text, vars, cancel)?;
    let sweep = Sweep::new(&curve, &text, &unit);
    let Unit::Token { boundaries, .. } = &unit else {
        unreachable!("token_unit gives token cuts")
    };
    let cuts = std::iter::once(0)
        .chain(boundaries.iter().map(|&b| floor_char_boundary(&text, b)))
        .collect();
    let report = parser.parse(&text, vars);
    let objects = placed(parser, &text, vars, &report);
    Ok(Side {
        run: 0,
        prompt: String::new(),
        response_type: parser.response_type(),
        max_tokens: 0,
        constrained: false,
        finish_reason: None,
        text,
        cuts,
        curve,
        sweep,
        objects,
        ran_on: None,
    })
}

/// Where Kerf's example replies live, beside the shipped prompts: a complete reply of each
/// format to the prompt's sample input, as a capable model writes it.
pub const EXAMPLE_REPLIES: &str = "replies";

/// The JSONL prompt the first view compares with its JSON-array twin.
pub const EXAMPLE_PROMPT: &str = "agent-kg-extract";

/// Kerf's example pair: the shipped `agent-kg-extract` and its JSON-array twin, each with its
/// example reply (`replies/ID.jsonl.txt`, `replies/TWIN.json.txt` in the shipped prompt folder),
/// cut by [`CLOUD_TOKENIZER`]'s tokens — what the Compare screen shows before it has run
/// anything, and the sentence that says what it shows. `None` when the workbench has no shipped
/// prompts, or they lack the pair or its replies.
pub fn example(wb: &Workbench, cancel: &CancelToken) -> Result<Option<Example>> {
    let Some(dir) = wb.prompt_dirs.iter().find(|d| d.label == "shipped") else {
        return Ok(None);
    };
    let jsonl_path = dir.path.join(format!("{EXAMPLE_PROMPT}.json"));
    let Ok(jsonl) = kerf_core::Prompt::load(&jsonl_path) else {
        return Ok(None);
    };
    let Some(twin) = jsonl.file.twin.clone() else {
        return Ok(None);
    };
    let array_path = dir.path.join(format!("{twin}.json"));
    let replies = dir.path.join(EXAMPLE_REPLIES);
    let (Ok(array), Ok(a_text), Ok(b_text)) = (
        kerf_core::Prompt::load(&array_path),
        std::fs::read_to_string(replies.join(format!("{EXAMPLE_PROMPT}.jsonl.txt"))),
        std::fs::read_to_string(replies.join(format!("{twin}.json.txt"))),
    ) else {
        return Ok(None);
    };
    let side = |p: &kerf_core::Prompt, text: String| -> Result<Side> {
        Ok(Side {
            prompt: p.id().to_string(),
            finish_reason: Some(FinishReason::Stop),
            ..of_text(&p.parser, text, &Map::new(), CLOUD_TOKENIZER, cancel)?
        })
    };
    let a = side(&jsonl, a_text)?;
    let b = side(&array, b_text)?;
    let headline =
        kerf_core::sweep::Headline::of(&a.sweep, &b.sweep, kerf_core::sweep::HEADLINE_FRACTION);
    Ok(Some(Example {
        jsonl: jsonl_path,
        array: array_path,
        sides: (a, b),
        headline,
    }))
}

/// Kerf's example pair, side by side (see [`example`]).
#[derive(Debug, Clone)]
pub struct Example {
    pub jsonl: std::path::PathBuf,
    pub array: std::path::PathBuf,
    pub sides: (Side, Side),
    pub headline: kerf_core::sweep::Headline,
}

/// Runs `a` and `b` of the workbench's history, side by side.
pub fn sides(wb: &Workbench, a: i64, b: i64, cancel: &CancelToken) -> Result<(Side, Side)> {
    let store = wb.store_required()?;
    Ok((
        side(&store, &wb.models, a, cancel)?,
        side(&store, &wb.models, b, cancel)?,
    ))
}

fn placed(
    parser: &kerf_core::Parser,
    text: &str,
    vars: &Map<String, Value>,
    report: &ParseReport,
) -> Vec<Placed> {
    parser
        .spans(text, vars, report)
        .into_iter()
        .zip(report.objects.iter())
        .map(|(span, value)| Placed {
            span,
            label: label(&value),
        })
        .collect()
}

/// Longest label, in characters.
const LABEL_CHARS: usize = 60;

/// An object named by its first few scalar values (`definition · DNA · a molecule…`); other
/// values as their compact JSON.
pub fn label(value: &Value) -> String {
    let text = match value {
        Value::Object(map) => {
            let scalars: Vec<String> = map
                .values()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    Value::Bool(b) => Some(b.to_string()),
                    _ => None,
                })
                .take(3)
                .collect();
            if scalars.is_empty() {
                value.to_string()
            } else {
                scalars.join(" · ")
            }
        }
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(LABEL_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}
