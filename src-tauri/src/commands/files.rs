//! Files the user picks: the native dialogs, and saving where the user chose.

use super::*;

pub(super) async fn file_save<R: Runtime>(
    cx: Cx<'_, R>,
    path: String,
    text: Option<String>,
    base64: Option<String>,
) -> Result<()> {
    cx.state.access.check(&path, Use::Write)?;
    let bytes = match (text, base64) {
        (Some(t), None) => t.into_bytes(),
        (None, Some(b)) => decode_base64(&b)
            .ok_or_else(|| ApiError::new(Code::Usage, "file_save: the data is not base64"))?,
        _ => {
            return Err(ApiError::new(
                Code::Usage,
                "file_save takes text or base64, one of them",
            ));
        }
    };
    tracing::info!(%path, bytes = bytes.len(), "saving file");
    blocking(move || kerf_api::prompts::write_atomically_bytes(Path::new(&path), &bytes)).await
}

/// What the user picks becomes readable by the other commands (`FileAccess::choose`).
pub(super) async fn dialog_open<R: Runtime>(
    cx: Cx<'_, R>,
    title: String,
) -> Result<Option<String>> {
    picked_to_read(cx, title, false).await
}

pub(super) async fn dialog_open_folder<R: Runtime>(
    cx: Cx<'_, R>,
    title: String,
) -> Result<Option<String>> {
    picked_to_read(cx, title, true).await
}

/// The open dialog for a file (or a `folder`): what the user picked becomes readable by the
/// other commands (`FileAccess::choose`).
pub(super) async fn picked_to_read<R: Runtime>(
    cx: Cx<'_, R>,
    title: String,
    folder: bool,
) -> Result<Option<String>> {
    let (app, dialogs) = (cx.app, cx.state.dialogs.clone());
    let picked = blocking(move || dialogs.pick_open(&app, &title, folder)).await?;
    picked
        .map(|p| Ok(cx.state.access.choose(&p, Use::Read)?.display().to_string()))
        .transpose()
}

/// Where the user chose becomes writable by `file_save` (`FileAccess::choose`).
pub(super) async fn dialog_save<R: Runtime>(
    cx: Cx<'_, R>,
    title: String,
    suggested: String,
) -> Result<Option<String>> {
    let (app, dialogs) = (cx.app, cx.state.dialogs.clone());
    let picked = blocking(move || dialogs.pick_save(&app, &title, Path::new(&suggested))).await?;
    picked
        .map(|p| {
            Ok(cx
                .state
                .access
                .choose(&p, Use::Write)?
                .display()
                .to_string())
        })
        .transpose()
}

/// Standard base64 (what `canvas.toDataURL` produces after its comma).
pub(super) fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|c| !c.is_ascii_whitespace()) {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        } as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}
