//! The run settings' flags, one per setting of kerf-api's declaration
//! ([`kerf_api::run_settings!`]): its doc is the flag's help, its name the flag. `kerf run`,
//! `eval`, `compare`, `test` and `sweep` apply them over the defaults; `kerf history rerun` over
//! the stored run's settings. A flag not given leaves its setting as it is.

// `TypedValueParser::map`, for flags whose declaration maps a parsed value.
use clap::builder::TypedValueParser;
use kerf_api::runs::SettingsPatch;

// clap reads a field's type as written to choose how the flag parses (`Option<Vec<T>>`: the flag
// repeats), so each kind's type is spelled out here, entry by entry, rather than through
// `kerf_api::setting_value!`.
macro_rules! flags {
    (@ [$($fields:tt)*] [$($names:ident)*]) => {
        /// Every run setting as a flag.
        #[derive(clap::Args, Clone, Debug, Default)]
        pub struct SettingFlags { $($fields)* }

        impl SettingFlags {
            /// The flags given, as the patch they make.
            pub fn patch(&self) -> SettingsPatch {
                SettingsPatch { $( $names: self.$names.clone(), )* }
            }
        }
    };
    (@ [$($fields:tt)*] [$($names:ident)*]
        $(#[doc = $doc:literal])*
        $name:ident : list $ty:ty,
            stored[$(#[$stored:meta])*], flag[$(#[$flag:meta])*];
        $($rest:tt)*
    ) => {
        flags!(@ [$($fields)* $(#[doc = $doc])* #[arg(long)] $(#[$flag])* pub $name: Option<Vec<$ty>>,]
            [$($names)* $name] $($rest)*);
    };
    (@ [$($fields:tt)*] [$($names:ident)*]
        $(#[doc = $doc:literal])*
        $name:ident : $kind:ident $ty:ty $(= $default:expr)?,
            stored[$(#[$stored:meta])*], flag[$(#[$flag:meta])*];
        $($rest:tt)*
    ) => {
        flags!(@ [$($fields)* $(#[doc = $doc])* #[arg(long)] $(#[$flag])* pub $name: Option<$ty>,]
            [$($names)* $name] $($rest)*);
    };
    ($($entries:tt)*) => {
        flags!(@ [] [] $($entries)*);
    };
}

kerf_api::run_settings!(flags);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser;
    use kerf_api::runs::{FlashAttn, GpuLayers, RunSettings, SettingsPatch};

    use super::SettingFlags;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        flags: SettingFlags,
        prompt: Option<String>,
    }

    fn parse(args: &[&str]) -> Result<(SettingsPatch, Option<String>), clap::Error> {
        let cmd = Cmd::try_parse_from(std::iter::once("kerf").chain(args.iter().copied()))?;
        Ok((cmd.flags.patch(), cmd.prompt))
    }

    /// Every declared setting has its flag, and each flag lands in its own setting.
    #[test]
    fn every_setting_is_a_flag_that_lands_in_its_setting() {
        let (patch, prompt) = parse(&[
            "--temperature=-0.5",
            "--top-p",
            "0.9",
            "--reasoning-effort",
            "low",
            "--thinking-budget",
            "256",
            "--seed",
            "7",
            "--stop",
            "-->",
            "--stop",
            "END",
            "--structured",
            "json_schema",
            "--gpu-layers",
            "12",
            "--main-gpu",
            "1",
            "--split-mode",
            "row",
            "--threads",
            "3",
            "--context",
            "4096",
            "--flash-attn",
            "off",
            "--chat-template",
            "chatml",
            "--gbnf",
            "prompt.json",
            "--max-requests",
            "4",
            "--max-run-tokens",
            "9000",
        ])
        .unwrap();
        assert_eq!(
            prompt.as_deref(),
            Some("prompt.json"),
            "--gbnf takes no value"
        );
        let mut s = RunSettings::default();
        patch.apply(&mut s);
        assert_eq!((s.temperature, s.top_p), (Some(-0.5), Some(0.9)));
        assert_eq!(s.reasoning_effort, Some("low".parse().unwrap()));
        assert_eq!((s.thinking_budget, s.seed), (Some(256), Some(7)));
        assert_eq!(s.stop, ["-->", "END"]);
        assert_eq!(s.structured, Some("json_schema".parse().unwrap()));
        assert_eq!(s.gpu_layers, GpuLayers::Count(12));
        assert_eq!(
            (s.main_gpu, s.split_mode),
            (Some(1), Some("row".parse().unwrap()))
        );
        assert_eq!((s.threads, s.context), (Some(3), Some(4096)));
        assert_eq!(s.flash_attn, FlashAttn::Off);
        assert_eq!(s.chat_template.as_deref(), Some("chatml"));
        assert!(s.gbnf);
        assert_eq!((s.max_requests, s.max_run_tokens), (4, 9000));
    }

    /// No flag given: nothing changes, so `kerf run` gets the declared defaults and a rerun the
    /// stored settings.
    #[test]
    fn no_flags_change_nothing() {
        let (patch, _) = parse(&[]).unwrap();
        assert_eq!(patch, SettingsPatch::default());
        let mut s = RunSettings::default();
        patch.apply(&mut s);
        assert_eq!(s, RunSettings::default());
        assert_eq!(
            (s.gpu_layers, s.flash_attn),
            (GpuLayers::Auto, FlashAttn::Auto)
        );
        assert_eq!((s.max_requests, s.max_run_tokens), (10, 100_000));
    }

    #[test]
    fn a_flag_value_out_of_its_set_is_refused_naming_the_flag() {
        for (args, flag) in [
            (&["--gbnf=maybe"][..], "--gbnf"),
            (&["--flash-attn", "fast"][..], "--flash-attn"),
            (&["--max-requests", "0"][..], "--max-requests"),
            (&["--gpu-layers", "most"][..], "--gpu-layers"),
        ] {
            let e = parse(args).err().unwrap().to_string();
            assert!(e.contains(flag), "{args:?}: {e}");
        }
        let (patch, _) = parse(&["--gbnf=false"]).unwrap();
        assert_eq!(patch.gbnf, Some(false));
    }
}
