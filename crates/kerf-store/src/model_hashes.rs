//! Local model files' SHA-256, cached by path, size and modification time: a run names the exact
//! model it ran without hashing gigabytes each time.

use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::store::Store;

impl Store {
    /// SHA-256 of a local model file, hashed once per (path, size, modification time).
    pub fn model_sha256(&self, path: &std::path::Path) -> Result<String> {
        let io = |e: std::io::Error| Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        let size = meta.len() as i64;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64);
        let key = path.display().to_string();
        let known: Option<String> = self
            .conn
            .query_row(
                "SELECT sha256 FROM model_hashes WHERE path = ?1 AND size = ?2 AND mtime_ns = ?3",
                params![key, size, mtime],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        if let Some(h) = known {
            return Ok(h);
        }
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut h = Sha256::new();
        std::io::copy(&mut file, &mut h).map_err(io)?;
        let hex = format!("{:x}", h.finalize());
        self.exec(
            "INSERT OR REPLACE INTO model_hashes (path, size, mtime_ns, sha256) VALUES (?1, ?2, ?3, ?4)",
            params![key, size, mtime, hex],
        )?;
        Ok(hex)
    }
}
