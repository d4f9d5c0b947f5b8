//! The CLI reference in the book (`docs/src/reference/cli.md`), written from the clap definitions
//! themselves so it cannot drift from them: `kerf help-markdown` (hidden) prints it, and a test
//! compares it with the committed page (`KERF_BLESS=1 cargo test -p kerf-cli --test kerf-cli
//! reference` rewrites it).
//!
//! Every visible command gets a heading (`## kerf eval resume`, so mdBook's anchor is
//! `#kerf-eval-resume`), its about text, its usage, its arguments and options with their help,
//! defaults and possible values, and its `after_help` (the examples) as a text block. Nothing in
//! it depends on the terminal, the machine or the environment.

use std::fmt::Write;

use clap::{Arg, ArgAction, Command};

const HEADER: &str = "\
<!-- Generated from the clap definitions by `kerf help-markdown`: do not edit. After changing a
command, `KERF_BLESS=1 cargo test -p kerf-cli --test kerf-cli reference` rewrites this page
(the test command fails while it differs). -->

# CLI reference

Every `kerf` command, its arguments and options, as `kerf COMMAND --help` prints them. Every
command also takes `-h`/`--help` (`--help` prints the longer text where there is one), and
`kerf --version` prints the version. The [CLI tour](../cli.md) shows them at work; the exit
codes are in [its table](../cli.md#exit-codes).
";

/// The whole reference page for `root` (the `kerf` command as clap builds it).
pub fn markdown(mut root: Command) -> String {
    root.build();
    let mut commands = Vec::new();
    walk(&root, &mut commands);
    let mut out = String::from(HEADER);
    out.push('\n');
    for cmd in &commands {
        let name = path(cmd);
        let depth = name.matches(' ').count();
        let _ = writeln!(
            out,
            "{}- [`{name}`](#{})",
            "  ".repeat(depth),
            name.replace(' ', "-")
        );
    }
    for cmd in &commands {
        out.push('\n');
        command(&mut out, cmd, std::ptr::eq(*cmd, &root));
    }
    out
}

/// `root` and every visible command below it, depth first, in declaration order.
fn walk<'a>(cmd: &'a Command, out: &mut Vec<&'a Command>) {
    out.push(cmd);
    for sub in visible_subcommands(cmd) {
        walk(sub, out);
    }
}

/// The subcommands a user sees: not hidden, not clap's generated `help`.
fn visible_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

/// `kerf eval resume`: the command's full name (clap's bin name once built).
fn path(cmd: &Command) -> String {
    cmd.get_bin_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

fn command(out: &mut String, cmd: &Command, root: bool) {
    let name = path(cmd);
    let _ = writeln!(out, "## {name}\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", prose(&about.to_string(), ""));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage);
    let usage: Vec<&str> = usage.lines().map(str::trim).collect();
    let _ = writeln!(out, "```text\n{}\n```\n", usage.join("\n"));

    let subs: Vec<&Command> = visible_subcommands(cmd).collect();
    if !subs.is_empty() {
        out.push_str("**Commands:**\n\n");
        for sub in subs {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let _ = writeln!(
                out,
                "- [`{}`](#{}) — {}",
                sub.get_name(),
                path(sub).replace(' ', "-"),
                prose(&about, "  ")
            );
        }
        out.push('\n');
    }

    // Global options are shown once, at the top: they propagate to every command.
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && (root || !a.is_global_set()))
        .filter(|a| {
            !matches!(
                a.get_action(),
                ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
            )
        })
        .collect();
    let positionals: Vec<&Arg> = args.iter().copied().filter(|a| a.is_positional()).collect();
    let options: Vec<&Arg> = args
        .iter()
        .copied()
        .filter(|a| !a.is_positional())
        .collect();
    if !positionals.is_empty() {
        out.push_str("**Arguments:**\n\n");
        for arg in positionals {
            item(out, arg, &positional(arg));
        }
        out.push('\n');
    }
    if !options.is_empty() {
        out.push_str(if root {
            "**Options** (accepted by every command, before or after it):\n\n"
        } else {
            "**Options:**\n\n"
        });
        for arg in options {
            item(out, arg, &flag(arg));
        }
        out.push('\n');
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let _ = writeln!(out, "```text\n{}\n```\n", after.to_string().trim_end());
    }
}

/// `<DATASET>`, `[E]`, `[FILES]...`
fn positional(arg: &Arg) -> String {
    let name = value_names(arg);
    let many = matches!(arg.get_action(), ArgAction::Append)
        || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    let dots = if many { "..." } else { "" };
    if arg.is_required_set() {
        format!("<{name}>{dots}")
    } else {
        format!("[{name}]{dots}")
    }
}

/// `-o, --out <FILE>`, `--json`
fn flag(arg: &Arg) -> String {
    let mut s = String::new();
    if let Some(short) = arg.get_short() {
        let _ = write!(s, "-{short}");
        if arg.get_long().is_some() {
            s.push_str(", ");
        }
    }
    if let Some(long) = arg.get_long() {
        let _ = write!(s, "--{long}");
    }
    if arg.get_action().takes_values() {
        let _ = write!(s, " <{}>", value_names(arg));
    }
    s
}

fn value_names(arg: &Arg) -> String {
    match arg.get_value_names() {
        Some(names) if !names.is_empty() => names
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join("> <"),
        _ => arg.get_id().as_str().to_uppercase(),
    }
}

/// One argument: its form in code, its help, then whether it is required, its default and its
/// possible values, each on a line of its own (a Markdown hard break, `\` at the line's end).
fn item(out: &mut String, arg: &Arg, form: &str) {
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut lines = vec![format!("- `{form}`")];
    if !help.is_empty() {
        lines[0].push_str(&format!(" — {}", prose(&help, "  ")));
    }
    if arg.is_required_set() && !arg.is_positional() {
        lines.push("Required.".to_string());
    }
    let takes_values = arg.get_action().takes_values();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    if takes_values && !defaults.is_empty() && !arg.is_hide_default_value_set() {
        lines.push(format!("Default: `{}`.", defaults.join(",")));
    }
    let values: Vec<_> = if takes_values {
        arg.get_possible_values()
            .into_iter()
            .filter(|v| !v.is_hide_set())
            .collect()
    } else {
        Vec::new()
    };
    let mut described = String::new();
    if values.iter().any(|v| v.get_help().is_some()) {
        lines.push("Possible values:".to_string());
        for v in &values {
            let _ = write!(described, "\n  - `{}`", v.get_name());
            if let Some(h) = v.get_help() {
                let _ = write!(described, ": {}", prose(&h.to_string(), "    "));
            }
        }
    } else if !values.is_empty() {
        let names: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        lines.push(format!("Possible values: {}.", names.join(", ")));
    }
    let _ = writeln!(out, "{}{described}", lines.join("\\\n  "));
}

/// Help text as Markdown: characters Markdown would read as markup are escaped outside `code`
/// spans (a help's `<FILE>` is not an HTML tag), and lines after the first are indented by
/// `indent` so they stay inside their list item.
fn prose(text: &str, indent: &str) -> String {
    let mut out = String::new();
    for (i, line) in text.trim().lines().enumerate() {
        if i > 0 {
            out.push('\n');
            if !line.trim().is_empty() {
                out.push_str(indent);
            }
        }
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code && matches!(c, '\\' | '*' | '_' | '<' | '>' | '[' | ']' | '#' | '|')
            {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}
