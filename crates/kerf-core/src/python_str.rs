//! Values printed the way TrustGraph prints them. TrustGraph renders prompts with ibis (Python's
//! Jinja2 does the same): `{{ value }}` writes Python's `str(value)`. For a list, dict, bool or
//! None that is not JSON: `['a', 'b']`, `{'name': 'crops', 'primary': True}`, `True`, `None`.
//! A prompt that prints a list of documents or a row schema whole must send the same bytes from
//! Kerf as from production, so this is the default output formatter of every template.
//!
//! Rules (CPython 3.11's `str()` / `repr()`):
//! - a string at the top level prints as it is; inside a container it is quoted by `repr`:
//!   single quotes unless the string holds `'` and no `"`, backslash escapes for `\\`, the quote,
//!   `\t`, `\n`, `\r`, and `\xNN` / `\uNNNN` / `\UNNNNNNNN` for characters Python does not call
//!   printable (control, format, surrogate, private-use, unassigned, separators other than the
//!   ASCII space); other non-ASCII characters print as they are;
//! - `True`, `False`, `None`; integers in decimal; floats as `repr(float)`: the shortest digits
//!   that read back, fixed notation with at least one decimal (`1.0`) when the decimal exponent
//!   is in [-4, 16), scientific otherwise (`1e+16`, `1.5e-05`), `inf`, `-inf`, `nan`;
//! - lists `[a, b]`, dicts `{k: v}` in insertion order (JSON objects keep their order here).
//!
//! Unicode data: Python 3.11 classifies by Unicode 14.0, the category table here is Unicode 16.0;
//! the two differ only for characters assigned after 14.0 (Python escapes them, Kerf does not).

use minijinja::Value;
use minijinja::value::ValueKind;
use unicode_general_category::{GeneralCategory, get_general_category};

/// Python's `str(value)`, or `None` when the value is not one Python could hold (a macro, a
/// function, a lazy iterator): the caller falls back to minijinja's own text and warns.
pub fn str_of(value: &Value) -> Option<String> {
    match value.kind() {
        ValueKind::String => value.as_str().map(str::to_string),
        _ => {
            let mut out = String::new();
            repr_into(&mut out, value, 0).then_some(out)
        }
    }
}

/// Containers nested deeper than this are not printed (Python would hit its own recursion limit
/// long before; a template cannot build such a value from JSON input anyway).
const MAX_DEPTH: usize = 256;

/// Python's `repr(value)` appended to `out`; false when some part has no Python form.
fn repr_into(out: &mut String, value: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match value.kind() {
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::String => match value.as_str() {
            Some(s) => string_repr_into(out, s),
            None => return false,
        },
        ValueKind::Number => {
            if value.is_integer() {
                out.push_str(&value.to_string());
            } else {
                match f64::try_from(value.clone()) {
                    Ok(f) => out.push_str(&float_repr(f)),
                    Err(_) => return false,
                }
            }
        }
        ValueKind::Seq => {
            let Ok(items) = value.try_iter() else {
                return false;
            };
            out.push('[');
            for (i, item) in items.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if !repr_into(out, &item, depth + 1) {
                    return false;
                }
            }
            out.push(']');
        }
        ValueKind::Map => {
            let Ok(keys) = value.try_iter() else {
                return false;
            };
            out.push('{');
            for (i, key) in keys.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let Ok(item) = value.get_item(&key) else {
                    return false;
                };
                if !repr_into(out, &key, depth + 1) {
                    return false;
                }
                out.push_str(": ");
                if !repr_into(out, &item, depth + 1) {
                    return false;
                }
            }
            out.push('}');
        }
        _ => return false,
    }
    true
}

/// Python's `repr(str)`.
pub fn string_repr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    string_repr_into(&mut out, s);
    out
}

fn string_repr_into(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
}

/// Python's `str.isprintable()` for one character: not in Cc, Cf, Cs, Co, Cn, Zl, Zp, Zs (the
/// ASCII space excepted).
fn is_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::Surrogate
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::SpaceSeparator
    )
}

/// Python's `repr(float)` (`float_repr_style = 'short'`).
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    // Rust's `{:e}` without a precision prints the shortest digits that read back, as Python's
    // repr does: `d[.ddd]e[-]x`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // The decimal point sits `decpt` digits into `digits` (0.d1d2… × 10^decpt).
    let decpt = exp + 1;
    if (-4 < decpt) && (decpt <= 16) {
        let n = digits.len() as i32;
        let body = if decpt <= 0 {
            format!("0.{}{digits}", "0".repeat((-decpt) as usize))
        } else if decpt >= n {
            format!("{digits}{}.0", "0".repeat((decpt - n) as usize))
        } else {
            let (int, frac) = digits.split_at(decpt as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let exp = decpt - 1;
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{esign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        for (f, want) in [
            (1.0, "1.0"),
            (2.5, "2.5"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (-3.25, "-3.25"),
            (1e300, "1e+300"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (100.0, "100.0"),
            (12345.678, "12345.678"),
        ] {
            assert_eq!(float_repr(f), want, "{f:?}");
        }
    }

    #[test]
    fn strings_quote_as_python_repr() {
        for (s, want) in [
            ("plain", "'plain'"),
            ("it's", "\"it's\""),
            ("say \"hi\"", "'say \"hi\"'"),
            ("both ' and \"", "'both \\' and \"'"),
            ("back\\slash", "'back\\\\slash'"),
            ("é\n\t\r\u{1}", "'é\\n\\t\\r\\x01'"),
            ("\u{7f}\u{a0}\u{ad}", "'\\x7f\\xa0\\xad'"),
            ("\u{2028}\u{200b}日本", "'\\u2028\\u200b日本'"),
            ("\u{e000}", "'\\ue000'"),
            ("\u{f0000}", "'\\U000f0000'"),
            ("", "''"),
        ] {
            assert_eq!(string_repr(s), want, "{s:?}");
        }
    }
}
