//! The constraint as the generation loop runs it: llguidance's matcher over the model's
//! tokenizer, or llama.cpp's GBNF sampler.

use super::*;

/// The constraint as it runs.
pub(super) enum Active {
    None,
    Guidance(Box<Matcher>),
    Grammar(LlamaSampler),
}

pub(super) fn guidance(
    loaded: &Loaded,
    grammar: TopLevelGrammar,
) -> std::result::Result<Matcher, String> {
    let factory = loaded
        .factory
        .get_or_init(|| {
            let env = LlamaSampler::llguidance_tok_env(&loaded.model);
            let mut f = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
            f.quiet();
            Ok(f)
        })
        .as_ref()
        .map_err(Clone::clone)?;
    let parser = factory.create_parser(grammar).map_err(|e| e.to_string())?;
    let m = Matcher::new(Ok(parser));
    match m.get_error() {
        Some(e) => Err(e),
        None => Ok(m),
    }
}

/// Build the constraint: llguidance first; llama.cpp's GBNF where llguidance cannot compile a
/// schema (and say why). Returns what ran, for the run's details.
pub(super) fn build_constraint(
    loaded: &Loaded,
    constraint: &Constraint,
    prefer_gbnf: bool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<(Active, ConstraintRun)> {
    let gbnf = |g: &str| {
        LlamaSampler::grammar(&loaded.model, g, "root")
            .map_err(|e| Error::Constraint(format!("llama.cpp rejected the GBNF grammar: {e}")))
    };
    let schema_gbnf = |schema: &Value, jsonl: bool| -> Result<LlamaSampler> {
        gbnf(&crate::grammar::gbnf(schema, jsonl)?)
    };
    let run = |kind: &str, engine, why| ConstraintRun {
        kind: kind.to_string(),
        engine,
        why,
    };
    Ok(match constraint {
        Constraint::None => (Active::None, run("none", ConstraintEngine::None, None)),
        Constraint::Json(schema) | Constraint::Jsonl(schema) => {
            let jsonl = matches!(constraint, Constraint::Jsonl(_));
            let kind = constraint.name();
            if prefer_gbnf {
                (
                    Active::Grammar(schema_gbnf(schema, jsonl)?),
                    run(kind, ConstraintEngine::Gbnf, Some("asked for".into())),
                )
            } else {
                let grammar = if jsonl {
                    TopLevelGrammar::from_lark(crate::grammar::lark(schema, true))
                } else {
                    TopLevelGrammar::from_json_schema(schema.clone())
                };
                match guidance(loaded, grammar) {
                    Ok(m) => (
                        Active::Guidance(Box::new(m)),
                        run(kind, ConstraintEngine::Llguidance, None),
                    ),
                    Err(why) => {
                        let note = format!(
                            "llguidance cannot compile this schema ({why}); falling back to llama.cpp's GBNF sampler (about 2x slower generation)"
                        );
                        on_event(Event::Warning(&note));
                        (
                            Active::Grammar(schema_gbnf(schema, jsonl)?),
                            run(kind, ConstraintEngine::Gbnf, Some(why)),
                        )
                    }
                }
            }
        }
        Constraint::Gbnf(g) => (
            Active::Grammar(gbnf(g)?),
            run("gbnf", ConstraintEngine::Gbnf, None),
        ),
        Constraint::Lark(l) => {
            let m = guidance(loaded, TopLevelGrammar::from_lark(l.clone())).map_err(|e| {
                Error::Constraint(format!("llguidance rejected the Lark grammar: {e}"))
            })?;
            (
                Active::Guidance(Box::new(m)),
                run("lark", ConstraintEngine::Llguidance, None),
            )
        }
    })
}
