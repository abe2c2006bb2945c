//! The suite's report: one line per check (ok, FAIL or skip) with the details under it, and a
//! closing verdict. Worded for the plugin's author, who reads it in a terminal or a CI log.

use std::fmt;

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    /// Not exercised by this plugin (e.g. replies, for a plugin that observes nothing).
    Skip,
}

/// One check and what it found.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub details: Vec<String>,
}

/// Every check of one run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub module: String,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn new(module: impl Into<String>) -> Self {
        Self {
            module: module.into(),
            checks: Vec::new(),
        }
    }

    /// Records a check: failed if `problems` is non-empty, the notes shown either way.
    pub fn check(&mut self, name: &'static str, problems: Vec<String>, notes: Vec<String>) {
        let status = if problems.is_empty() {
            Status::Pass
        } else {
            Status::Fail
        };
        let mut details = problems;
        details.extend(notes);
        self.checks.push(Check {
            name,
            status,
            details,
        });
    }

    pub fn skip(&mut self, name: &'static str, why: impl Into<String>) {
        self.checks.push(Check {
            name,
            status: Status::Skip,
            details: vec![why.into()],
        });
    }

    /// Whether every check passed or was skipped.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Fail)
    }

    /// The check of this name, if it ran.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }

    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.status == Status::Fail)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tessera-conformance: {}", self.module)?;
        for c in &self.checks {
            let tag = match c.status {
                Status::Pass => "ok  ",
                Status::Fail => "FAIL",
                Status::Skip => "skip",
            };
            writeln!(f, "  {tag}  {}", c.name)?;
            for d in &c.details {
                writeln!(f, "          {d}")?;
            }
        }
        let failed = self.failed().count();
        if failed == 0 {
            writeln!(f, "result: PASS ({} checks)", self.checks.len())
        } else {
            writeln!(
                f,
                "result: FAIL ({failed} of {} checks failed)",
                self.checks.len()
            )
        }
    }
}
