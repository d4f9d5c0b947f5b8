//! What runs point at, kept once per distinct content: prompt versions (by the SHA-256 of the
//! prompt file's text) and inputs (by the SHA-256 of their canonical JSON). An edited prompt is a
//! new version; old runs keep pointing at what they ran.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::json_col;

/// A prompt file as it was run, addressed by the SHA-256 of its text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptVersion {
    pub id: String,
    /// The prompt's id (its `id` key, else its file stem).
    pub name: String,
    /// Where it was first run from.
    pub path: Option<String>,
    pub response_type: String,
    pub text: String,
}

/// What a prompt was rendered with, addressed by the SHA-256 of its JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Input {
    pub id: String,
    /// The run's variables: the document under the prompt's input variable, and every --var.
    pub vars: Value,
    /// Global terms (TrustGraph's), `{}` when none.
    pub terms: Value,
}

fn sha256_parts(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    format!("{:x}", h.finalize())
}

/// SHA-256 of some bytes, hex (how the history names a reply it does not keep).
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// JSON with object keys sorted, so equal values hash alike whatever order they were built in.
fn canonical(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

impl Store {
    /// Keep a prompt file's text (once per distinct text); returns its version id.
    pub fn put_prompt_version(
        &self,
        name: &str,
        path: Option<&str>,
        response_type: &str,
        text: &str,
    ) -> Result<String> {
        let id = sha256_hex(text.as_bytes());
        let tx = self.write()?;
        tx.execute(
            "INSERT OR IGNORE INTO prompt_versions (id, name, path, response_type, text, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id, name, path, response_type, text, self.now()],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(id)
    }

    /// A stored prompt version by its full id or a unique prefix of it.
    pub fn prompt_version(&self, id: &str) -> Result<PromptVersion> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, name, path, response_type, text FROM prompt_versions
                 WHERE id >= ?1 AND id < ?1 || 'g' LIMIT 2",
            )
            .map_err(|e| self.err(e))?;
        let found: Vec<PromptVersion> = stmt
            .query_map([id.to_ascii_lowercase()], |r| {
                Ok(PromptVersion {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    path: r.get(2)?,
                    response_type: r.get(3)?,
                    text: r.get(4)?,
                })
            })
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))?;
        match found.len() {
            1 => Ok(found.into_iter().next().expect("one")),
            _ => Err(Error::NotFound {
                what: if found.is_empty() {
                    "prompt version"
                } else {
                    "a single prompt version (the prefix is ambiguous)"
                },
                id: id.into(),
            }),
        }
    }

    /// Keep a run's input (once per distinct input); returns its id.
    pub fn put_input(&self, vars: &Value, terms: &Value) -> Result<String> {
        let (v, t) = (canonical(vars), canonical(terms));
        let id = sha256_parts(&[v.as_bytes(), t.as_bytes()]);
        let tx = self.write()?;
        tx.execute(
            "INSERT OR IGNORE INTO inputs (id, vars, terms, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![id, vars.to_string(), terms.to_string(), self.now()],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(id)
    }

    pub fn input(&self, id: &str) -> Result<Input> {
        self.conn
            .query_row(
                "SELECT id, vars, terms FROM inputs WHERE id = ?1",
                [id],
                |r| {
                    Ok(Input {
                        id: r.get(0)?,
                        vars: json_col(r.get(1)?),
                        terms: json_col(r.get(2)?),
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or_else(|| Error::NotFound {
                what: "input",
                id: id.into(),
            })
    }
}
