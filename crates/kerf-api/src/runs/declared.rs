//! The run settings, declared once. Each entry of [`run_settings!`](crate::run_settings) is one
//! setting: its doc (the CLI's help, the Rust and TypeScript docs), its name (the field, the
//! `--flag`, the history's stored key), its kind and type, and the attributes its stored form
//! and its flag need. Everything else follows from the list:
//!
//! - [`RunSettings`](super::RunSettings)' fields and their defaults;
//! - [`SettingsPatch`], the typed patch a rerun, the CLI's flags and a stored run's parameters
//!   apply (`None` keeps a setting as it is);
//! - [`StoredParams`](super::StoredParams), the history's form, and its generated TypeScript;
//! - the CLI's flags, which `kerf-cli` derives from the same list (`kerf run`, `eval`,
//!   `compare`, `test`, `sweep` and `history rerun` share them).
//!
//! Adding a setting is one entry here plus its behaviour (where the engine or the request reads
//! it). The kinds:
//!
//! - `opt T`: unset by default (`Option<T>`: nothing is sent, the engine decides);
//! - `val T = default`: always has a value;
//! - `list T`: zero or more values, given by repeating the flag;
//! - `flag bool`: off by default; `--flag` alone turns it on, `--flag=false` off.
//!
//! The provider and the model are not in the list: they name what runs (the run's columns), and
//! every front end takes them in its own way.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

/// Passes the list of run settings to the macro `$then`, as entries of the form
/// `#[doc] name: kind Type [= default], stored[#[attr]...], flag[#[attr]...];`. Within this
/// crate it builds [`RunSettings`](super::RunSettings), [`SettingsPatch`] and
/// [`StoredParams`](super::StoredParams); `kerf-cli` builds its flags from it.
#[macro_export]
#[doc(hidden)]
macro_rules! run_settings {
    ($then:ident) => {
        $then! {
            /// Sampling temperature, 0 to 2. Unset (the default): none is sent, so a cloud model
            /// samples at its own default (OpenAI's reasoning models refuse the parameter) and
            /// the local model decodes greedily, so its reruns are comparable.
            temperature: opt f32, stored[], flag[#[arg(allow_negative_numbers = true)]];
            /// Nucleus sampling, 0 to 1 (unset: none sent).
            top_p: opt f32, stored[], flag[#[arg(allow_negative_numbers = true)]];
            /// Cloud reasoning models: OpenAI's reasoning effort (none, minimal, low, medium,
            /// high).
            reasoning_effort: opt $crate::runs::ReasoningEffort, stored[], flag[];
            /// Cloud thinking models: Gemini's thinking budget in tokens (0 turns thinking off
            /// where the model allows it).
            thinking_budget: opt u32, stored[], flag[];
            /// Sampling seed (unset: none sent).
            seed: opt u64, stored[], flag[];
            /// Stop strings (repeat the flag for several; a rerun's replace the stored ones).
            stop: list String, stored[], flag[#[arg(allow_hyphen_values = true)]];
            /// Cloud: the structured-output mode (auto picks what the provider honours; see
            /// `kerf providers probe`). Unset: the provider's own setting.
            structured: opt $crate::runs::Structured, stored[], flag[];
            /// Layers to offload to the GPU: all, none, auto (all when a GPU backend exists; the
            /// default) or a number.
            gpu_layers: val $crate::runs::GpuLayers = $crate::runs::GpuLayers::Auto,
                stored[#[ts(type = "string | null")]], flag[];
            /// Which GPU holds the model (0 = the first, as `kerf models devices` counts them);
            /// it must exist, and the split mode becomes `none` unless given.
            main_gpu: opt u32, stored[], flag[];
            /// How layers spread over several GPUs: layer (llama.cpp's default), row, or none
            /// (the main GPU holds them all).
            split_mode: opt $crate::runs::SplitMode, stored[], flag[];
            /// CPU threads (default: every core).
            threads: opt i32, stored[], flag[#[arg(allow_negative_numbers = true)]];
            /// Context size in tokens (default: what the prompt and budget need, at least 2048).
            context: opt u32, stored[], flag[];
            /// Flash attention: auto (llama.cpp decides; the default), on, or off.
            flash_attn: val $crate::runs::FlashAttn = $crate::runs::FlashAttn::Auto,
                stored[],
                flag[#[arg(value_parser = clap::builder::PossibleValuesParser::new(["auto", "on", "off"])
                    .map(|s| s.parse::<$crate::runs::FlashAttn>().unwrap_or_default()))]];
            /// Chat template to use instead of the model's (a llama.cpp built-in name such as
            /// `chatml`).
            chat_template: opt String, stored[], flag[#[arg(allow_hyphen_values = true)]];
            /// Constrain with llama.cpp's GBNF sampler instead of llguidance (slower; for
            /// comparison). `--gbnf` alone turns it on; `--gbnf=false` off (a rerun's).
            gbnf: flag bool, stored[],
                flag[#[arg(num_args = 0..=1, require_equals = true, default_missing_value = "true")]];
            /// The most requests one run may make, the first and each repair together (default
            /// 10; the prompt's `repair.max-attempts` applies too, and the lower one wins).
            max_requests: val u32 = 10,
                stored[], flag[#[arg(value_parser = clap::value_parser!(u32).range(1..))]];
            /// The most tokens one run may spend, every request's prompt and reply together
            /// (default 100000): a repair that could pass it is not sent.
            max_run_tokens: val u64 = 100_000,
                stored[], flag[#[arg(value_parser = clap::value_parser!(u64).range(1..))]];
        }
    };
}

/// The type a setting of each kind has in [`RunSettings`](super::RunSettings).
#[macro_export]
#[doc(hidden)]
macro_rules! setting_type {
    (opt $t:ty) => { Option<$t> };
    (val $t:ty) => { $t };
    (list $t:ty) => { Vec<$t> };
    (flag $t:ty) => { $t };
}

/// The type one given value of a setting has: what a patch or a flag holds in its `Option`.
#[macro_export]
#[doc(hidden)]
macro_rules! setting_value {
    (opt $t:ty) => { $t };
    (val $t:ty) => { $t };
    (list $t:ty) => { Vec<$t> };
    (flag $t:ty) => { $t };
}

/// A setting's default.
macro_rules! setting_default {
    (opt) => {
        None
    };
    (val $d:expr) => {
        $d
    };
    (list) => {
        Vec::new()
    };
    (flag) => {
        false
    };
}

/// A given value as the setting holds it.
macro_rules! setting_set {
    (opt $v:expr) => {
        Some($v)
    };
    ($kind:ident $v:expr) => {
        $v
    };
}

/// The type a setting has in the stored form: the way in accepts a row recorded before the
/// setting existed (absent), so a setting that always has a value is optional there too.
macro_rules! stored_type {
    (val $t:ty) => { Option<$t> };
    ($kind:ident $t:ty) => { $crate::setting_type!($kind $t) };
}

/// A setting's value as the stored form writes it.
macro_rules! stored_value {
    (val $v:expr) => {
        Some($v)
    };
    ($kind:ident $v:expr) => {
        $v
    };
}

/// Builds the settings' Rust forms from [`run_settings!`](crate::run_settings).
macro_rules! declare {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident : $kind:ident $ty:ty $(= $default:expr)?,
            stored[$(#[$stored:meta])*], flag[$(#[$flag:meta])*];
    )*) => {
        /// Which model runs a prompt, and how it samples: what `kerf run`'s model flags and the
        /// app's run panel both fill in. Every setting but the provider and the model is
        /// declared in [`run_settings!`](crate::run_settings).
        #[derive(Debug, Clone, PartialEq)]
        pub struct RunSettings {
            /// `local` (llama.cpp), or the name of a configured provider.
            pub provider: String,
            /// Local: a GGUF path (default: the bundled model). Cloud: a model id instead of the
            /// provider's configured one.
            pub model: Option<String>,
            $( $(#[doc = $doc])* pub $name: $crate::setting_type!($kind $ty), )*
        }

        impl Default for RunSettings {
            /// The bundled model, no sampling parameters set (greedy there, so reruns are
            /// comparable).
            fn default() -> Self {
                RunSettings {
                    provider: "local".into(),
                    model: None,
                    $( $name: setting_default!($kind $($default)?), )*
                }
            }
        }

        /// Settings to change: each one given replaces that setting, the rest stay. A rerun's
        /// flags, the CLI's flags over the defaults and a stored run's parameters are each one.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct SettingsPatch {
            $( $(#[doc = $doc])* pub $name: Option<$crate::setting_value!($kind $ty)>, )*
        }

        impl SettingsPatch {
            /// `settings` with every given setting replaced.
            pub fn apply(self, settings: &mut RunSettings) {
                $( if let Some(v) = self.$name { settings.$name = setting_set!($kind v); } )*
            }

            /// What a stored run's parameters say, key by key: an absent or `null` key says
            /// nothing; a key present in the wrong shape is `Err` with its name.
            pub fn from_stored(params: &Value) -> Result<SettingsPatch, &'static str> {
                Ok(SettingsPatch {
                    $( $name: given::<$crate::setting_value!($kind $ty)>(
                        params, stringify!($name))?, )*
                })
            }
        }

        /// The stored form of a run's parameters (`RunParams`, version `params_version`).
        /// Written whole by `RunParams::stored`; read back through `RunParams::from_stored`,
        /// which also knows the forms recorded before this one (every key here is optional on
        /// the way in: a spec stored before a setting existed reads as that setting's default).
        /// Each key after `requested_model` is a run setting, under its name.
        #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, TS)]
        pub struct StoredParams {
            pub params_version: Option<u64>,
            pub max_tokens: Option<u32>,
            /// `auto` (held to the schema where the format and provider allow) or `none`.
            pub constrain: Option<StoredConstrain>,
            /// The model asked for (a GGUF path, or a cloud model id instead of the provider's
            /// own).
            pub requested_model: Option<String>,
            $( $(#[doc = $doc])* #[serde(default)] $(#[$stored])*
               pub $name: stored_type!($kind $ty), )*
        }

        impl StoredParams {
            /// `settings` in the stored form, with the run's budget and constraint.
            pub(crate) fn of(settings: &RunSettings, max_tokens: u32, constrain: bool) -> Self {
                StoredParams {
                    params_version: Some(super::RunParams::VERSION),
                    max_tokens: Some(max_tokens),
                    constrain: Some(if constrain {
                        StoredConstrain::Auto
                    } else {
                        StoredConstrain::None
                    }),
                    requested_model: settings.model.clone(),
                    $( $name: stored_value!($kind settings.$name.clone()), )*
                }
            }
        }
    };
}

run_settings!(declare);

/// Whether a stored run was held to its prompt's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum StoredConstrain {
    Auto,
    None,
}

/// Flash attention on the local engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "lowercase")]
pub enum FlashAttn {
    /// llama.cpp decides.
    #[default]
    Auto,
    On,
    Off,
}

impl FlashAttn {
    /// As the engine takes it: `None` lets llama.cpp decide.
    pub fn enabled(self) -> Option<bool> {
        match self {
            FlashAttn::Auto => None,
            FlashAttn::On => Some(true),
            FlashAttn::Off => Some(false),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FlashAttn::Auto => "auto",
            FlashAttn::On => "on",
            FlashAttn::Off => "off",
        }
    }
}

impl std::fmt::Display for FlashAttn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for FlashAttn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(FlashAttn::Auto),
            "on" => Ok(FlashAttn::On),
            "off" => Ok(FlashAttn::Off),
            _ => Err(format!(
                "`{s}` is not a flash-attention setting (auto, on or off)"
            )),
        }
    }
}

/// A stored key: absent or `null` is `None`; present, it must parse (`Err`: the key).
fn given<T: serde::de::DeserializeOwned>(
    params: &Value,
    key: &'static str,
) -> Result<Option<T>, &'static str> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|_| key),
    }
}

/// `value` as JSON with its `f32` settings as typed (0.7, not the 0.699999988… that widening to
/// `f64` gives): `serde_json::to_value` widens them, its writer does not.
pub(crate) fn typed_json<T: Serialize>(value: &T) -> serde_json::Result<Value> {
    serde_json::from_str(&serde_json::to_string(value)?)
}
