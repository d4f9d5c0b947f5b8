//! Limits on what input may cost: each has a default that no honest prompt, reply or file comes
//! near, and an environment variable to move it (README, "Security and limits").

/// A positive number from the environment variable `name`, else `default` (unset, unparsable
/// or zero all mean the default: a limit cannot be switched off by accident).
pub fn from_env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// The most engine steps one template render may take (`KERF_RENDER_FUEL`, default 20 million).
/// TrustGraph's prompts take thousands; nested loops over `range(…)` in a template someone sent
/// would otherwise run, and hold the window, for ever.
pub fn render_fuel() -> u64 {
    from_env("KERF_RENDER_FUEL", 20_000_000)
}

/// The most bytes one rendered template may produce (`KERF_MAX_RENDER_MIB`, default 32 MiB,
/// several times the largest context window): a loop printing a 100 MB string would otherwise
/// fill memory before any model saw it.
pub fn max_render_bytes() -> u64 {
    from_env("KERF_MAX_RENDER_MIB", 32).saturating_mul(1 << 20)
}

/// The most memory one render may build in its worker (`KERF_RENDER_MEMORY_MIB`, default 512
/// MiB, over what the worker holds on starting): the context (a document is at most
/// `KERF_MAX_ROW_MIB`), the strings the template builds and the output. A template that builds more is stopped with an error instead of exhausting memory.
pub fn render_memory_bytes() -> u64 {
    from_env("KERF_RENDER_MEMORY_MIB", 512).saturating_mul(1 << 20)
}

/// The most bytes one dataset row may hold (`KERF_MAX_ROW_MIB`, default 16 MiB): a document far
/// beyond any context window is a mistake, and is refused before it is read into memory.
pub fn max_row_bytes() -> u64 {
    from_env("KERF_MAX_ROW_MIB", 16).saturating_mul(1 << 20)
}
