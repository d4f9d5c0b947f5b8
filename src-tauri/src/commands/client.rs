//! The page's typed client, written from the command declaration (`surface.in`): one function
//! per command with the declared arguments under the names Tauri expects (camelCase), typed by
//! the wire types' ts-rs names and imported from `./bindings`.

use std::collections::BTreeSet;

use ts_rs::{Config, TS, TypeVisitor};

/// Collects the commands' TypeScript as the declaration is read.
pub struct Client<'a> {
    cfg: &'a Config,
    /// The declared types' names, to import from `./bindings`.
    imports: BTreeSet<String>,
    functions: Vec<String>,
}

/// An argument: its name as the page sends it, and its TypeScript type.
pub struct Arg {
    name: String,
    ts: String,
}

impl<'a> Client<'a> {
    pub fn new(cfg: &'a Config) -> Self {
        Client {
            cfg,
            imports: BTreeSet::new(),
            functions: Vec::new(),
        }
    }

    /// `T`'s TypeScript name, noting the declarations it needs.
    pub fn ty<T: TS + 'static>(&mut self) -> String {
        Imports(self.cfg, &mut self.imports).visit::<T>();
        T::name(self.cfg)
    }

    /// A declared argument `name` of type `T`.
    pub fn arg<T: TS + 'static>(&mut self, name: &str) -> Arg {
        Arg {
            name: camel(name),
            ts: self.ty::<T>(),
        }
    }

    /// A command `name`: its doc lines, arguments, the channel it streams `T` on (if any), and
    /// its answer's type.
    pub fn command(
        &mut self,
        name: &str,
        docs: &[&str],
        args: Vec<Arg>,
        channel: Option<Arg>,
        answer: String,
    ) {
        let mut f = String::new();
        if !docs.is_empty() {
            f.push_str("/**\n");
            for line in docs {
                let line = line.replace("*/", "*\\/");
                f.push_str(&format!(" *{}\n", line.trim_end()));
            }
            f.push_str(" */\n");
        }
        let mut params: Vec<String> = args
            .iter()
            .map(|a| format!("{}: {}", a.name, a.ts))
            .collect();
        let mut keys: Vec<String> = args.iter().map(|a| a.name.clone()).collect();
        if let Some(c) = &channel {
            params.push(format!("{}: (message: {}) => void", c.name, c.ts));
            keys.push(format!("{0}: channel({0})", c.name));
        }
        let keys = if keys.is_empty() {
            "{}".to_string()
        } else {
            format!("{{ {} }}", keys.join(", "))
        };
        f.push_str(&format!(
            "export function {}({}): Promise<{answer}> {{\n  return call<{answer}>(\"{name}\", {keys});\n}}\n",
            camel(name),
            params.join(", "),
        ));
        self.functions.push(f);
    }

    /// The whole module.
    pub fn finish(self) -> String {
        let mut out = String::from(
            "// Written from src-tauri/src/commands/surface.in, the one declaration of the desktop app's\n\
             // commands; do not edit (`KERF_BLESS=1 cargo test -p kerf-desktop --test commands`\n\
             // rewrites it, and that test fails when it drifts).\n\
             import { call, channel } from \"./call\";\n",
        );
        for name in &self.imports {
            out.push_str(&format!(
                "import type {{ {name} }} from \"./bindings/{name}\";\n"
            ));
        }
        for f in &self.functions {
            out.push('\n');
            out.push_str(f);
        }
        out
    }
}

/// Records each named (exported) type a type is made of; wrappers (`Vec`, `Option`) are looked
/// through.
struct Imports<'c, 's>(&'c Config, &'s mut BTreeSet<String>);

impl TypeVisitor for Imports<'_, '_> {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        if T::output_path().is_some() {
            self.1.insert(T::ident(self.0));
        } else {
            T::visit_generics(self);
        }
    }
}

/// `on_event` → `onEvent`: the key Tauri reads a snake_case argument from.
fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn snake_case_arguments_are_sent_in_camel_case() {
        assert_eq!(super::camel("on_event"), "onEvent");
        assert_eq!(
            super::camel("prompt_rename_schema_key"),
            "promptRenameSchemaKey"
        );
        assert_eq!(super::camel("id"), "id");
    }
}
