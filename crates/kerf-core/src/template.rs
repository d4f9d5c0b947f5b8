//! Templates (minijinja), compatible with what TrustGraph's prompts use: `{{ x }}`, `{{ a.b }}`,
//! `{% for k, v in d.items() %}`, `|join(', ')`, `{% if a and b %}`.
//!
//! Undefined variables are errors that name the template, line and variable — never an empty
//! string silently sent to a model. Terms merge in TrustGraph's order: global terms, then the
//! prompt's `terms`, then the run's variables (later wins).

use std::sync::{Arc, Mutex};

use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior, Value as JValue};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::python_str;

/// A compiled template with its name (for errors), source and the variables it reads.
#[derive(Debug, Clone)]
pub struct Template {
    name: String,
    source: String,
    variables: Vec<String>,
}

/// The render's output, refused past `max` bytes (the render then stops with a write failure).
struct CappedOutput {
    text: Vec<u8>,
    max: u64,
    refused: bool,
}

impl std::io::Write for CappedOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if (self.text.len() + buf.len()) as u64 > self.max {
            self.refused = true;
            return Err(std::io::Error::other("the rendered text is too large"));
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Warnings a render collected (a value printed as minijinja prints it, Python having no form
/// for it).
type Warnings = Arc<Mutex<Vec<String>>>;

fn environment(warnings: Option<Warnings>) -> Environment<'static> {
    let mut env = Environment::new();
    // Past the fuel (see `limits::render_fuel`) a render fails, naming the limit.
    env.set_fuel(Some(crate::limits::render_fuel()));
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_keep_trailing_newline(true);
    // Python-style methods (`d.items()`, `s.upper()`) as TrustGraph's templates use them.
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    // `|join` writes each item's Python `str()`, as ibis's and Jinja2's do (`True`, not `true`).
    env.add_filter("join", python_join);
    // `{{ value }}` prints Python's `str(value)`, as TrustGraph (ibis) does.
    env.set_formatter(move |out, state, value| {
        // Only a "silent" undefined reaches here (`{{ a if b }}` with b false): Jinja2 prints ''.
        if value.is_undefined() {
            return Ok(());
        }
        match python_str::str_of(value) {
            Some(text) => out.write_str(&text).map_err(minijinja::Error::from),
            None => {
                if let Some(w) = &warnings
                    && let Ok(mut w) = w.lock()
                {
                    let shown: String = value.to_string().chars().take(60).collect();
                    w.push(format!(
                        "a {} value ({shown}) has no Python form; printed as minijinja prints it",
                        value.kind()
                    ));
                }
                minijinja::escape_formatter(out, state, value)
            }
        }
    });
    env
}

/// ibis's `join(seq, sep='')`: `sep.join(str(item) for item in seq)`.
fn python_join(
    value: &JValue,
    joiner: Option<&str>,
) -> std::result::Result<String, minijinja::Error> {
    let items = value.try_iter().map_err(|e| {
        minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("cannot join a value of type {}", value.kind()),
        )
        .with_source(e)
    })?;
    let mut out = String::new();
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(joiner.unwrap_or_default());
        }
        match python_str::str_of(&item) {
            Some(text) => out.push_str(&text),
            None => out.push_str(&item.to_string()),
        }
    }
    Ok(out)
}

impl Template {
    /// Compile `source`; a syntax error names the template and line. Compiling runs where
    /// renders run (a render worker, see `render_worker`): minijinja folds constant expressions
    /// while it compiles, and `"x" * 100000000` chained with `~` builds gigabytes before a
    /// single step of the template has run.
    pub fn new(name: &str, source: &str) -> Result<Self> {
        let variables = crate::render_worker::compile(name, source)
            .unwrap_or_else(|| compile_here(name, source))?;
        Ok(Template {
            name: name.into(),
            source: source.into(),
            variables,
        })
    }

    /// A template not compiled yet, for a render worker: `render_here` compiles it and reports
    /// its syntax errors.
    pub(crate) fn uncompiled(name: &str, source: &str) -> Self {
        Template {
            name: name.into(),
            source: source.into(),
            variables: Vec::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The top-level variables the template reads, sorted (what an input form must offer).
    pub fn variables(&self) -> Vec<String> {
        self.variables.clone()
    }

    /// Render with `ctx`. An undefined variable is an error naming it.
    pub fn render(&self, ctx: &Map<String, Value>) -> Result<String> {
        self.render_with_warnings(ctx).map(|(text, _)| text)
    }

    /// Render with `ctx`, with the warnings of the render (a value Python could not print): in a
    /// render worker when the executable set them up (see `render_worker`), else here.
    pub fn render_with_warnings(&self, ctx: &Map<String, Value>) -> Result<(String, Vec<String>)> {
        crate::render_worker::render(&self.name, &self.source, ctx)
            .unwrap_or_else(|| self.render_here(ctx))
    }

    /// Render with `ctx` in this process: what a render worker does, and what the library does
    /// when no worker was set up.
    pub(crate) fn render_here(&self, ctx: &Map<String, Value>) -> Result<(String, Vec<String>)> {
        let warnings: Warnings = Arc::default();
        let env = environment(Some(warnings.clone()));
        let t = env
            .template_from_named_str(&self.name, &self.source)
            .map_err(|e| syntax_error(&self.name, &e))?;
        let max_bytes = crate::limits::max_render_bytes();
        let mut out = CappedOutput {
            text: Vec::new(),
            max: max_bytes,
            refused: false,
        };
        let rendered = t.render_captured_to(JValue::from_serialize(ctx), &mut out);
        rendered.map_err(|e| {
            if e.kind() == ErrorKind::UndefinedError {
                let nested: Vec<String> = t.undeclared_variables(true).into_iter().collect();
                let variable = self.missing_variable(&nested, ctx, e.line());
                Error::TemplateUndefined {
                    name: self.name.clone(),
                    line: e.line(),
                    variable,
                }
            } else if e.kind() == ErrorKind::OutOfFuel {
                Error::TemplateRender {
                    name: self.name.clone(),
                    line: e.line(),
                    message: format!(
                        "the template took more than {} steps (a loop that does not end?) and was stopped (KERF_RENDER_FUEL)",
                        crate::limits::render_fuel()
                    ),
                }
            } else if out.refused {
                Error::TemplateRender {
                    name: self.name.clone(),
                    line: e.line(),
                    message: format!(
                        "the rendered text passed {} MiB and was stopped (KERF_MAX_RENDER_MIB)",
                        max_bytes >> 20
                    ),
                }
            } else {
                Error::TemplateRender {
                    name: self.name.clone(),
                    line: e.line(),
                    message: e
                        .detail()
                        .map(str::to_string)
                        .unwrap_or_else(|| e.kind().to_string()),
                }
            }
        })?;
        // Only `str`s were written, whole: the bytes are UTF-8.
        let text = String::from_utf8(out.text).map_err(|e| Error::TemplateRender {
            name: self.name.clone(),
            line: None,
            message: format!("the rendered text is not UTF-8: {e}"),
        })?;
        let warnings = std::mem::take(&mut *warnings.lock().unwrap_or_else(|p| p.into_inner()));
        Ok((text, warnings))
    }

    /// Which variable was undefined: of those the template reads that `ctx` cannot supply, prefer
    /// one that appears on the failing line.
    fn missing_variable(
        &self,
        nested: &[String],
        ctx: &Map<String, Value>,
        line: Option<usize>,
    ) -> String {
        let mut missing: Vec<&String> = nested
            .iter()
            .filter(|path| !resolvable(ctx, path))
            .collect();
        missing.sort();
        let line_text = line
            .and_then(|l| self.source.lines().nth(l.saturating_sub(1)))
            .unwrap_or("");
        missing
            .iter()
            .find(|m| line_text.contains(m.as_str()))
            .or(missing.first())
            .map(|m| m.to_string())
            .unwrap_or_else(|| "(unknown)".into())
    }
}

/// Compile in this process: what a render worker does for [`Template::new`], and what the
/// library does when no worker was set up. The template's top-level variables, sorted.
/// The template engine a render worker runs (`render_worker::set_up`): compile and render by
/// name and source, in the worker's own process.
pub const ENGINE: crate::render_worker::Engine = crate::render_worker::Engine {
    compile: compile_here,
    render: |name, source, ctx| Template::uncompiled(name, source).render_here(ctx),
};

pub(crate) fn compile_here(name: &str, source: &str) -> Result<Vec<String>> {
    let env = environment(None);
    let t = env
        .template_from_named_str(name, source)
        .map_err(|e| syntax_error(name, &e))?;
    let mut vars: Vec<String> = t.undeclared_variables(false).into_iter().collect();
    vars.sort();
    Ok(vars)
}

/// A template that does not compile: name, line and minijinja's own description.
fn syntax_error(name: &str, e: &minijinja::Error) -> Error {
    Error::TemplateSyntax {
        name: name.into(),
        line: e.line(),
        message: e
            .detail()
            .map(str::to_string)
            .unwrap_or_else(|| e.kind().to_string()),
    }
}

/// Whether a dotted path (`a.b.c`) resolves in `ctx`. Method calls (`d.items`) count as
/// resolvable once their receiver is.
fn resolvable(ctx: &Map<String, Value>, path: &str) -> bool {
    let mut parts = path.split('.');
    let Some(first) = parts.next() else {
        return true;
    };
    let Some(mut cur) = ctx.get(first) else {
        return false;
    };
    for p in parts {
        match cur {
            Value::Object(m) => match m.get(p) {
                Some(v) => cur = v,
                None => return is_method(p),
            },
            _ => return true,
        }
    }
    true
}

fn is_method(name: &str) -> bool {
    matches!(
        name,
        "items" | "keys" | "values" | "get" | "upper" | "lower" | "strip" | "split" | "join"
    )
}

/// Merge terms in TrustGraph's order: `global`, then the prompt's `terms`, then the run's `vars`.
pub fn merge_terms(
    global: &Map<String, Value>,
    prompt: &Map<String, Value>,
    vars: &Map<String, Value>,
) -> Map<String, Value> {
    let mut out = global.clone();
    for (k, v) in prompt.iter().chain(vars.iter()) {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// Parse `k=v` run variables. A value that is valid JSON (object, array, number, boolean) is
/// taken as JSON; anything else is a string.
pub fn parse_var(spec: &str) -> Result<(String, Value)> {
    let (k, v) = spec
        .split_once('=')
        .ok_or_else(|| Error::Usage(format!("--var `{spec}`: expected NAME=VALUE")))?;
    if k.is_empty() {
        return Err(Error::Usage(format!("--var `{spec}`: the name is empty")));
    }
    Ok((k.to_string(), var_value(v)))
}

/// A run variable's value as typed: valid JSON that is an object, array, number or boolean is
/// taken as JSON; anything else is the text itself (the window's variable form reads values so
/// too).
pub fn var_value(v: &str) -> Value {
    match serde_json::from_str::<Value>(v) {
        Ok(j @ (Value::Object(_) | Value::Array(_) | Value::Number(_) | Value::Bool(_))) => j,
        _ => Value::String(v.to_string()),
    }
}
