//! JUnit XML for CI (`kerf eval --junit`, `kerf test --junit`), through quick-junit (the
//! serializer cargo-nextest writes its reports with): each suite a prompt, each case a line
//! of figures or a test, a missed threshold a failure, a cell that could not run an error.

use std::path::Path;

use anyhow::Result;
use kerf_api::{ApiError, Code};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

/// One test case's outcome.
pub enum Outcome {
    Passed,
    /// A threshold missed: what was asked and what came.
    Failed(String),
    /// It could not be measured.
    Error(String),
}

/// One test case: a name, its outcome, and the figures to show beside it.
pub struct Case {
    pub name: String,
    pub outcome: Outcome,
    pub figures: String,
}

/// Write the report `name` with `suites` (name, cases) to `path`.
pub fn write(path: &Path, name: &str, suites: Vec<(String, Vec<Case>)>) -> Result<()> {
    let mut report = Report::new(name);
    for (suite_name, cases) in suites {
        let mut suite = TestSuite::new(suite_name);
        for c in cases {
            let status = match c.outcome {
                Outcome::Passed => TestCaseStatus::success(),
                Outcome::Failed(m) => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    s.set_message(m);
                    s
                }
                Outcome::Error(m) => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
                    s.set_message(m);
                    s
                }
            };
            let mut case = TestCase::new(c.name, status);
            case.set_system_out(c.figures);
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    let xml = report
        .to_string()
        .map_err(|e| ApiError::new(Code::Internal, format!("JUnit XML: {e}")))?;
    // As every file Kerf writes: a temporary beside it, then a rename (a link at the target is
    // replaced, never written through).
    crate::output::write_file(path, &xml)
}
