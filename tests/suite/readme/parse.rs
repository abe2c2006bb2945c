//! Reads README.md's shell blocks into command lines, and decides how each one is run: a
//! server in the background, a command to completion, an `export`, or not at all because the
//! README marks it `[manual]`. A line that is none of these is an error, so no new README line
//! escapes the test unnoticed.

/// Fenced blocks whose lines are shell commands.
const SHELL_BLOCKS: &[&str] = &["sh", "bash", "shell", "console", "zsh"];

/// The comment tag that marks a line the test does not run.
pub(crate) const MANUAL: &str = "[manual]";

/// The comment prefix of an expected answer: `redis-cli get k   # → "v"`.
const ANSWER: &str = "→";

/// One command line of a shell block, continuation lines joined.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Line {
    /// 1-based line number in the markdown where it starts.
    pub(crate) number: usize,
    /// The command, without its trailing comment.
    pub(crate) command: String,
    /// The trailing comment, without `#`, trimmed.
    pub(crate) comment: Option<String>,
}

impl Line {
    /// The answer the README shows (`# → …`), if any.
    pub(crate) fn expected(&self) -> Option<&str> {
        let answer = self.comment.as_deref()?.strip_prefix(ANSWER)?.trim();
        (!answer.is_empty()).then_some(answer)
    }

    /// Whether the README marks it as not run by the test.
    pub(crate) fn is_manual(&self) -> bool {
        self.comment
            .as_deref()
            .is_some_and(|c| c.starts_with(MANUAL))
    }
}

/// How a line is run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    /// `tessera dashboard …`: started in the background; ready once `GET /health` answers on
    /// its `--listen`.
    Dashboard,
    /// `tessera proxy …`: started in the background; ready once PING answers on `--listen`.
    Proxy,
    /// `export NAME=value …`: sets variables for the lines after it.
    Export,
    /// Anything else the test knows (`tessera <other>`, `redis-cli`, `curl`,
    /// `tools/new-plugin.sh`): run to completion; it must succeed.
    Run,
    /// Marked `[manual]`: not run.
    Manual,
}

/// Every command line of every shell block of `markdown`.
///
/// # Errors
/// A fenced block without a language: it could hold commands that nothing runs.
pub(crate) fn lines(markdown: &str) -> Result<Vec<Line>, String> {
    let mut out = Vec::new();
    let mut block: Option<bool> = None; // Some(is_shell) inside a fence
    let mut pending: Option<(usize, String)> = None; // a line continued with `\`
    for (i, raw) in markdown.lines().enumerate() {
        let number = i + 1;
        let trimmed = raw.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            block = match block {
                Some(_) if pending.is_some() => {
                    return Err(format!(
                        "line {number}: a block ends after a line continued with `\\`"
                    ));
                }
                Some(_) => None,
                None if info.trim().is_empty() => {
                    return Err(format!(
                        "line {number}: a fenced block without a language; name it (sh for commands, text for the rest)"
                    ));
                }
                None => Some(SHELL_BLOCKS.contains(&info.trim())),
            };
            continue;
        }
        if block != Some(true) {
            continue;
        }
        let (start, text) = match pending.take() {
            Some((start, head)) => (start, format!("{head} {trimmed}")),
            None => (number, trimmed.to_owned()),
        };
        if let Some(head) = text.strip_suffix('\\') {
            pending = Some((start, head.trim_end().to_owned()));
            continue;
        }
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let (command, comment) = split_comment(&text);
        out.push(Line {
            number: start,
            command,
            comment,
        });
    }
    match block {
        Some(_) => Err("the markdown ends inside a fenced block".to_owned()),
        None => Ok(out),
    }
}

/// How `line` is run.
///
/// # Errors
/// A line the test does not know how to run, and that is not marked `[manual]`.
pub(crate) fn kind(line: &Line) -> Result<Kind, String> {
    if line.is_manual() {
        return Ok(Kind::Manual);
    }
    let words: Vec<&str> = line.command.split_whitespace().collect();
    match words.as_slice() {
        ["tessera", "dashboard", ..] => Ok(Kind::Dashboard),
        ["tessera", "proxy", ..] => Ok(Kind::Proxy),
        // These two would never finish, or need a fixture of their own.
        ["tessera", "up" | "console", ..] => {
            Err(unknown(line, "a `tessera up` or `tessera console` line"))
        }
        ["tessera", _, ..] | ["redis-cli", ..] | ["curl", ..] | ["tools/new-plugin.sh", ..] => {
            Ok(Kind::Run)
        }
        ["export", ..] => Ok(Kind::Export),
        _ => Err(unknown(line, "this command")),
    }
}

fn unknown(line: &Line, what: &str) -> String {
    format!(
        "README.md line {}: `{}`: the README test (tests/suite/readme/) does not know how to run {what}; teach it, \
         or mark the line `# {MANUAL} <why>`",
        line.number, line.command
    )
}

/// Splits `text` at its comment: a `#` outside quotes, at the start or after whitespace.
fn split_comment(text: &str) -> (String, Option<String>) {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if prev.is_whitespace() => {
                let comment = text[i + 1..].trim().to_owned();
                return (text[..i].trim_end().to_owned(), Some(comment));
            }
            (None, _) => {}
        }
        prev = c;
    }
    (text.to_owned(), None)
}

// === tests of the reading itself (no processes) ===

fn one(markdown: &str) -> Line {
    let mut all = lines(markdown).unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

#[test]
fn comments_answers_and_continuations_are_read() {
    let l = one("x\n```sh\n# a comment line\nredis-cli -p 1 set 'a # b' \"c#d\"   # → OK\n```\n");
    assert_eq!(l.number, 4);
    assert_eq!(l.command, "redis-cli -p 1 set 'a # b' \"c#d\"");
    assert_eq!(l.expected(), Some("OK"));

    let l = one("```sh\ntessera dashboard --a 1 \\\n    --b 2   # a remark\n```\n");
    assert_eq!(
        (l.number, l.command.as_str()),
        (2, "tessera dashboard --a 1 --b 2")
    );
    assert_eq!((l.expected(), l.is_manual()), (None, false));
    assert_eq!(kind(&l), Ok(Kind::Dashboard));
}

#[test]
fn a_line_the_test_cannot_run_fails_unless_marked_manual() {
    let err = kind(&one("```sh\nmake install\n```\n")).unwrap_err();
    assert!(
        err.contains("line 2") && err.contains("make install"),
        "{err}"
    );
    assert!(kind(&one("```sh\ntessera up --clusters 2\n```\n")).is_err());
    let marked = one("```sh\nmake install    # [manual] needs root\n```\n");
    assert_eq!(kind(&marked), Ok(Kind::Manual));
    // Only shell blocks hold commands; a block without a language is refused outright.
    assert!(lines("```toml\nmake = 1\n```\n").unwrap().is_empty());
    assert!(lines("```\nmake install\n```\n").is_err());
}
