//! Providers: list, add, remove, keys and probes (the Providers screen).

use kerf_api::{prompts, providers};

use super::*;

pub(super) async fn providers_list<R: Runtime>(cx: Cx<'_, R>) -> Result<ProvidersView> {
    let path = cx.state.workbench.providers.clone();
    blocking(move || providers::list(&path)).await
}

/// Whether a spec sends a key somewhere new is `providers::key_consent`'s to say.
pub(super) async fn provider_add<R: Runtime>(
    cx: Cx<'_, R>,
    spec: ProviderSpec,
) -> Result<ProviderInfo> {
    tracing::info!(name = %spec.name, kind = spec.kind.as_str(), "provider add");
    let path = cx.state.workbench.providers.clone();
    let (app, dialogs) = (cx.app, cx.state.dialogs.clone());
    blocking(move || {
        if let Some(message) = providers::key_consent(&spec)? {
            let q = Question {
                title: "Send a key to this provider?",
                message: &message,
                yes: "Add provider",
            };
            if !dialogs.ask(&app, &q)? {
                return Err(ApiError::new(
                    Code::Cancelled,
                    format!(
                        "{} was not added: you declined where it would send a key",
                        spec.name
                    ),
                ));
            }
        }
        providers::add(&path, &spec).map(|added| providers::info(&added.def))
    })
    .await
}

pub(super) async fn provider_remove<R: Runtime>(cx: Cx<'_, R>, name: String) -> Result<bool> {
    tracing::info!(%name, "provider remove");
    let path = cx.state.workbench.providers.clone();
    blocking(move || providers::remove(&path, &name)).await
}

/// The key is never logged.
pub(super) async fn provider_set_key<R: Runtime>(
    cx: Cx<'_, R>,
    name: String,
    key: String,
) -> Result<ProviderInfo> {
    tracing::info!(%name, "provider key set");
    let path = cx.state.workbench.providers.clone();
    blocking(move || {
        providers::set_key(&path, &name, &key)?;
        providers::one(&path, &name)
    })
    .await
}

pub(super) async fn provider_delete_key<R: Runtime>(_: Cx<'_, R>, name: String) -> Result<bool> {
    blocking(move || providers::delete_key(&name)).await
}

pub(super) async fn provider_probe<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    name: String,
    draft: Option<PromptDraft>,
) -> Result<ProviderInfo> {
    let running = Running::start(cx.state, &id);
    let (path, token) = (cx.state.workbench.providers.clone(), running.token.clone());
    blocking(move || {
        let prompt = draft
            .map(|d| prompts::compile_draft(&d, None))
            .transpose()?;
        providers::probe(&path, &name, prompt.as_ref(), &token)?;
        providers::one(&path, &name)
    })
    .await
}
