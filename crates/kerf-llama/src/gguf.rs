//! A GGUF header reader in plain Rust: what `kerf models list` shows (size, quantisation, context
//! length, chat template), and the checks made before llama.cpp ever opens a file (not a GGUF,
//! truncated, too large for memory), so bad files get a clear error instead of a crash.

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};

use serde::Serialize;

use kerf_llm::Error;

/// What the header says about a model file.
#[derive(Debug, Clone, Serialize)]
pub struct GgufInfo {
    pub path: PathBuf,
    pub size_bytes: u64,
    pub architecture: Option<String>,
    pub name: Option<String>,
    /// e.g. `Q4_1` (from `general.file_type`).
    pub quantisation: Option<String>,
    pub context_length: Option<u64>,
    pub layers: Option<u64>,
    pub chat_template: Option<String>,
    pub tensors: u64,
}

fn model_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Model {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Read and check the header of the GGUF file at `path`.
pub fn inspect(path: &Path) -> Result<GgufInfo, Error> {
    let file = File::open(path).map_err(|e| {
        model_error(
            path,
            if e.kind() == std::io::ErrorKind::NotFound {
                "no such model file".to_string()
            } else {
                format!("cannot open: {e}")
            },
        )
    })?;
    let size_bytes = file
        .metadata()
        .map_err(|e| model_error(path, e.to_string()))?
        .len();
    let mut r = Reader {
        inner: BufReader::with_capacity(1 << 16, file),
        path,
    };
    let mut magic = [0u8; 4];
    r.bytes(&mut magic)
        .map_err(|_| model_error(path, "not a GGUF model (file too short)"))?;
    if &magic != b"GGUF" {
        return Err(model_error(
            path,
            "not a GGUF model (no GGUF magic at the start of the file)",
        ));
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(model_error(
            path,
            format!("GGUF version {version} is not supported (2 or 3)"),
        ));
    }
    let tensors = r.u64()?;
    let kv_count = r.u64()?;
    if tensors > 1_000_000 || kv_count > 1_000_000 {
        return Err(model_error(
            path,
            "damaged GGUF header (implausible counts)",
        ));
    }
    let mut info = GgufInfo {
        path: path.to_path_buf(),
        size_bytes,
        architecture: None,
        name: None,
        quantisation: None,
        context_length: None,
        layers: None,
        chat_template: None,
        tensors,
    };
    let mut alignment = 32u64;
    let mut ints: Vec<(String, u64)> = Vec::new();
    for _ in 0..kv_count {
        let key = r.string()?;
        let ty = r.u32()?;
        match (key.as_str(), ty) {
            ("general.architecture", 8) => info.architecture = Some(r.string()?),
            ("general.name", 8) => info.name = Some(r.string()?),
            ("tokenizer.chat_template", 8) => info.chat_template = Some(r.string()?),
            (_, 4 | 5 | 10 | 11)
                if key.starts_with("general.")
                    || key.ends_with("_length")
                    || key.ends_with("block_count") =>
            {
                let v = r.int(ty)?;
                if key == "general.alignment" {
                    alignment = v.max(1);
                }
                ints.push((key, v));
            }
            _ => r.skip_value(ty, 0)?,
        }
    }
    let int = |k: &str| ints.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
    info.quantisation = int("general.file_type").map(file_type_name);
    if let Some(arch) = &info.architecture {
        info.context_length = int(&format!("{arch}.context_length"));
        info.layers = int(&format!("{arch}.block_count"));
    }
    // Tensor infos: the data must lie within the file, or the file is truncated.
    let mut data_end = 0u64;
    for _ in 0..tensors {
        let _name = r.string()?;
        let dims = r.u32()?;
        if dims > 8 {
            return Err(model_error(path, "damaged GGUF tensor table"));
        }
        let mut elements = 1u64;
        for _ in 0..dims {
            elements = elements.saturating_mul(r.u64()?);
        }
        let ty = r.u32()?;
        let offset = r.u64()?;
        let bytes = tensor_bytes(ty, elements).unwrap_or(0);
        data_end = data_end.max(offset.saturating_add(bytes));
    }
    let header_end = r.position()?;
    // Checked arithmetic wherever the file's integers meet ours: a crafted header must be an
    // error, not an overflow.
    let data_start = header_end
        .div_ceil(alignment)
        .checked_mul(alignment)
        .ok_or_else(|| model_error(path, "damaged GGUF (an impossible alignment)"))?;
    let needed = data_start.saturating_add(data_end);
    if needed > size_bytes {
        return Err(model_error(
            path,
            format!(
                "truncated GGUF: its tensors need {needed} bytes but the file has {size_bytes}"
            ),
        ));
    }
    Ok(info)
}

/// How deep arrays may nest in metadata (llama.cpp's own files use none).
const MAX_ARRAY_DEPTH: usize = 4;

struct Reader<'p> {
    inner: BufReader<File>,
    path: &'p Path,
}

impl Reader<'_> {
    fn bytes(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        self.inner
            .read_exact(buf)
            .map_err(|_| model_error(self.path, "truncated GGUF (the header ends early)"))
    }
    fn u32(&mut self) -> Result<u32, Error> {
        let mut b = [0u8; 4];
        self.bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn u64(&mut self) -> Result<u64, Error> {
        let mut b = [0u8; 8];
        self.bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn string(&mut self) -> Result<String, Error> {
        let len = self.u64()?;
        if len > 64 << 20 {
            return Err(model_error(
                self.path,
                "damaged GGUF (a string longer than 64 MiB)",
            ));
        }
        let mut buf = vec![0u8; len as usize];
        self.bytes(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
    fn int(&mut self, ty: u32) -> Result<u64, Error> {
        Ok(match ty {
            4 => u64::from(self.u32()?),
            5 => self.u32()? as i32 as u64,
            _ => self.u64()?,
        })
    }
    fn skip(&mut self, n: u64) -> Result<(), Error> {
        let n = i64::try_from(n).map_err(|_| model_error(self.path, "damaged GGUF"))?;
        self.inner
            .seek_relative(n)
            .map_err(|e| model_error(self.path, e.to_string()))
    }
    /// Skip one value of type `ty`; `depth` counts the arrays it is inside (nested arrays are
    /// refused past `MAX_ARRAY_DEPTH`, so a crafted header cannot exhaust the stack).
    fn skip_value(&mut self, ty: u32, depth: usize) -> Result<(), Error> {
        match ty {
            0 | 1 | 7 => self.skip(1),
            2 | 3 => self.skip(2),
            4..=6 => self.skip(4),
            10..=12 => self.skip(8),
            8 => {
                let n = self.u64()?;
                self.skip(n)
            }
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(model_error(
                        self.path,
                        format!("damaged GGUF (arrays nested more than {MAX_ARRAY_DEPTH} deep)"),
                    ));
                }
                let item = self.u32()?;
                let n = self.u64()?;
                match item {
                    0 | 1 | 7 => self.skip(n),
                    2 | 3 => self.skip(n.saturating_mul(2)),
                    4..=6 => self.skip(n.saturating_mul(4)),
                    10..=12 => self.skip(n.saturating_mul(8)),
                    _ => {
                        for _ in 0..n {
                            self.skip_value(item, depth + 1)?;
                        }
                        Ok(())
                    }
                }
            }
            _ => Err(model_error(
                self.path,
                format!("damaged GGUF (unknown value type {ty})"),
            )),
        }
    }
    fn position(&mut self) -> Result<u64, Error> {
        self.inner
            .stream_position()
            .map_err(|e| model_error(self.path, e.to_string()))
    }
}

/// Bytes of a tensor of `elements` elements of ggml type `ty`, for the types models ship in.
fn tensor_bytes(ty: u32, elements: u64) -> Option<u64> {
    let (block_bytes, block) = match ty {
        0 => (4, 1),       // F32
        1 | 30 => (2, 1),  // F16, BF16
        2 => (18, 32),     // Q4_0
        3 => (20, 32),     // Q4_1
        6 => (22, 32),     // Q5_0
        7 => (24, 32),     // Q5_1
        8 => (34, 32),     // Q8_0
        9 => (36, 32),     // Q8_1
        10 => (84, 256),   // Q2_K
        11 => (110, 256),  // Q3_K
        12 => (144, 256),  // Q4_K
        13 => (176, 256),  // Q5_K
        14 => (210, 256),  // Q6_K
        15 => (292, 256),  // Q8_K
        24 => (1, 1),      // I8
        25 => (2, 1),      // I16
        26 => (4, 1),      // I32
        27 | 28 => (8, 1), // I64, F64
        _ => return None,
    };
    Some(elements.div_ceil(block).saturating_mul(block_bytes))
}

fn file_type_name(t: u64) -> String {
    match t {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        32 => "BF16",
        other => return format!("type {other}"),
    }
    .to_string()
}

/// Fail before loading when the model cannot fit in the memory that is free now.
pub fn check_memory(info: &GgufInfo) -> Result<(), Error> {
    let Some(available) = available_memory() else {
        return Ok(());
    };
    // Weights plus a margin for the context and compute buffers.
    let needed = info
        .size_bytes
        .saturating_add(info.size_bytes / 10)
        .saturating_add(64 << 20);
    if needed > available {
        return Err(model_error(
            &info.path,
            format!(
                "too large for this machine: it needs about {} MiB and {} MiB of memory is available",
                needed >> 20,
                available >> 20
            ),
        ));
    }
    Ok(())
}

/// `MemAvailable` from /proc/meminfo (Linux); elsewhere unknown.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
