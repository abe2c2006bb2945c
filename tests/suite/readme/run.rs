//! Runs README command lines as a reader's shell would (`bash -c`, from the repository's root),
//! after mapping the README's example addresses and paths to live processes through the
//! substitution table: servers in the background until the runner is dropped, the rest to
//! completion, each checked against the answer the README shows.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::parse::{Kind, Line};
use crate::support::{Api, answers_on, print_log_after_failure, run_with_timeout, wait_until};

/// The placeholder the README shows for the admin token a dashboard prints at its first start;
/// the runner fills it in from that dashboard's output.
const PRINTED_TOKEN: &str = "<the token it printed>";

/// The README's example ports, which are also the default ports of Tessera, Redis and etcd:
/// once the table has done its work none may be left in a line, or the line would reach for
/// whatever of this machine listens there.
const EXAMPLE_PORTS: &[&str] = &[
    "2379", "6379", "9090", "11080", "11081", "11100", "18080", "19000", "19001", "19100",
];

/// How long a server line may take to answer: proxies compile their plugins first.
const SERVER_START: Duration = Duration::from_secs(90);

/// How long one line may run; `tools/new-plugin.sh` compiles a crate and its dependencies twice.
fn time_limit(command: &str) -> Duration {
    if command.starts_with("tools/new-plugin.sh") {
        Duration::from_secs(900)
    } else {
        Duration::from_secs(60)
    }
}

/// A server started from a README line; killed (SIGKILL) and reaped on drop.
struct Background {
    child: Child,
    command: String,
    log: PathBuf,
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            print_log_after_failure("README server", &self.command, &log);
        }
    }
}

/// The shell session the README's lines run in.
pub(crate) struct Runner {
    root: PathBuf,
    scratch: PathBuf,
    /// README text → live text, matched leftmost-longest in one pass.
    table: Vec<(String, String)>,
    /// Variables of the session: `PATH` first, then what `export` lines set.
    env: BTreeMap<String, String>,
    servers: Vec<Background>,
    /// Lines run, and answers checked.
    pub(crate) ran: usize,
    pub(crate) answers: usize,
}

impl Runner {
    /// A session in `root` whose `PATH` starts with a directory holding `tessera` (linked to
    /// `tessera_bin`), with `scratch` for its logs.
    pub(crate) fn new(
        root: &Path,
        scratch: &Path,
        tessera_bin: &Path,
        table: Vec<(String, String)>,
    ) -> Runner {
        let bin = scratch.join("bin");
        std::fs::create_dir_all(&bin).expect("creating the session's bin dir");
        std::os::unix::fs::symlink(tessera_bin, bin.join("tessera")).expect("linking tessera");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Runner {
            root: root.to_owned(),
            scratch: scratch.to_owned(),
            table,
            env: BTreeMap::from([("PATH".to_owned(), path)]),
            servers: Vec::new(),
            ran: 0,
            answers: 0,
        }
    }

    /// Runs one README line as `kind` says.
    ///
    /// # Panics
    /// If it fails, answers differently from the README, or names an address the table does
    /// not map.
    pub(crate) fn run(&mut self, line: &Line, kind: Kind) {
        if kind == Kind::Manual {
            return;
        }
        let command = self.substitute(line);
        match kind {
            Kind::Manual => unreachable!("returned above"),
            Kind::Dashboard | Kind::Proxy => self.start_server(line, kind, &command),
            Kind::Export => self.export(line, &command),
            Kind::Run => self.run_to_completion(line, &command),
        }
        self.ran += 1;
    }

    /// `line`'s command with the table applied, checked to reach for nothing the table does
    /// not map.
    fn substitute(&self, line: &Line) -> String {
        let (out, left) = substitute(&line.command, &self.table);
        let stray = EXAMPLE_PORTS
            .iter()
            .find(|p| left.split(|c: char| !c.is_ascii_digit()).any(|d| d == **p))
            .map(|p| format!("port {p}"))
            .or_else(|| {
                left.contains("10.0.0.")
                    .then(|| "an address 10.0.0.x".to_owned())
            })
            .or_else(|| {
                left.split_whitespace()
                    .map(|w| w.trim_start_matches(['"', '\'', '(', '$', '=']))
                    .find(|w| ["~", ".tessera/", "/etc/"].iter().any(|p| w.starts_with(p)))
                    .map(|w| format!("the path {w}"))
            })
            .or_else(|| {
                // `<the token it printed>`: a placeholder, unless the runner has its value.
                let placeholder =
                    |p: &&str| p.starts_with(|c: char| c.is_ascii_lowercase()) && p.contains('>');
                left.split('<')
                    .skip(1)
                    .find(placeholder)
                    .map(|p| format!("the placeholder <{p}"))
            });
        if let Some(what) = stray {
            panic!(
                "README.md line {}: `{}` names {what}, which the substitution table (`substitutions` in \
                 tests/suite/readme/mod.rs) does not map to a live process",
                line.number, line.command
            );
        }
        out
    }

    /// A `bash -c` for `command` in the session: its directory and variables, and none of the
    /// caller's `TESSERA_*` variables, so only what the README exports counts.
    fn shell(&self, command: &str) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(command).current_dir(&self.root);
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TESSERA_")) {
            cmd.env_remove(k);
        }
        cmd.envs(&self.env).env("RUST_BACKTRACE", "0");
        cmd
    }

    fn start_server(&mut self, line: &Line, kind: Kind, command: &str) {
        let listen: SocketAddr = command
            .split_whitespace()
            .skip_while(|w| *w != "--listen")
            .nth(1)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "README.md line {}: a server line needs `--listen` with an address, for the \
                     test to know when it is up: `{command}`",
                    line.number
                )
            });
        let log = self.scratch.join(format!("server-{}.log", line.number));
        let out = File::create(&log).expect("creating a server log");
        let err = out.try_clone().expect("cloning the log handle");
        let child = self
            .shell(&format!("exec {command}"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawning bash");
        let mut server = Background {
            child,
            command: command.to_owned(),
            log,
        };
        let mut exited = false;
        let ready = wait_until(SERVER_START, || {
            exited = server.child.try_wait().expect("try_wait").is_some();
            exited
                || match kind {
                    Kind::Dashboard => Api::new(listen, None).healthy(),
                    _ => answers_on(listen.port()),
                }
        });
        assert!(
            ready && !exited,
            "README.md line {}: `{command}` did not come up on {listen} (exited: {exited})",
            line.number
        );
        if kind == Kind::Dashboard {
            self.take_printed_token(line, &server.log);
        }
        self.servers.push(server);
    }

    /// A dashboard's first start prints `admin token for cluster NAME: TOKEN` once; that is
    /// what the README's placeholder stands for.
    fn take_printed_token(&mut self, line: &Line, log: &Path) {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let token = text
            .lines()
            .find_map(|l| {
                Some(
                    l.strip_prefix("admin token for cluster ")?
                        .split_once(": ")?
                        .1,
                )
            })
            .unwrap_or_else(|| {
                panic!(
                    "README.md line {}: the dashboard printed no admin token at its first \
                     start, as the README says it does:\n{text}",
                    line.number
                )
            });
        self.table
            .push((PRINTED_TOKEN.to_owned(), token.trim().to_owned()));
    }

    /// `export A=x B=y`: runs the line in bash and keeps the values it gave the names.
    fn export(&mut self, line: &Line, command: &str) {
        let names: Vec<&str> = command
            .split_whitespace()
            .skip(1)
            .filter_map(|w| w.split_once('=').map(|(name, _)| name))
            .collect();
        assert!(
            !names.is_empty(),
            "README.md line {}: an export without NAME=value",
            line.number
        );
        let print: String = names.iter().map(|n| format!(" \"${n}\"")).collect();
        let out = run_with_timeout(
            &mut self.shell(&format!("{command}\nprintf '%s\\0'{print}")),
            Duration::from_secs(10),
        );
        assert!(
            out.status.success(),
            "README.md line {}: `{command}` failed",
            line.number
        );
        let values = String::from_utf8(out.stdout).expect("exported values are UTF-8");
        for (name, value) in names.iter().zip(values.split('\0')) {
            assert!(
                !value.is_empty(),
                "README.md line {}: `{command}` left {name} empty",
                line.number
            );
            self.env.insert((*name).to_owned(), value.to_owned());
        }
    }

    fn run_to_completion(&mut self, line: &Line, command: &str) {
        // What a reader sees in a terminal: redis-cli prints replies raw (no `(error)`, no
        // quotes) when its output is not one.
        let command = match command.strip_prefix("redis-cli ") {
            Some(rest) => format!("redis-cli --no-raw {rest}"),
            None => command.to_owned(),
        };
        let out = run_with_timeout(&mut self.shell(&command), time_limit(&command));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
        // The session so far, shown when the test fails (the harness keeps it otherwise).
        eprintln!("README.md line {} $ {command}\n{stdout}", line.number);
        assert!(
            out.status.success(),
            "README.md line {}: `{command}` failed ({}):\n{said}",
            line.number,
            out.status
        );
        // Exit statuses do not tell an error reply apart: redis-cli exits 0 on one, `curl -s`
        // on an HTTP error. So an error must be the answer the README shows.
        let expected = line.expected();
        assert!(
            !is_error(&stdout) || expected.is_some_and(is_error),
            "README.md line {}: `{command}` answered an error the README does not show:\n{said}",
            line.number
        );
        if let Some(answer) = expected {
            assert!(
                stdout.contains(answer),
                "README.md line {}: `{command}` should answer {answer:?}:\n{said}",
                line.number
            );
            self.answers += 1;
        }
    }
}

/// Whether `answer` is an error as redis-cli (`--no-raw`) or the HTTP API shows one.
fn is_error(answer: &str) -> bool {
    let answer = answer.trim_start();
    answer.starts_with("(error)") || answer.starts_with("{\"error\"")
}

/// `text` with every key of `table` replaced by its value, leftmost-longest in one pass (a
/// replacement is never matched again); a key ending in a letter or digit matches only where
/// no letter or digit follows. Also returns `text` with the matches blanked out: what the
/// table did not map.
pub(crate) fn substitute(text: &str, table: &[(String, String)]) -> (String, String) {
    let (mut out, mut left) = (String::new(), String::new());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let hit = table
            .iter()
            .filter(|(k, _)| {
                rest.starts_with(k.as_str())
                    && !(k.ends_with(|c: char| c.is_ascii_alphanumeric())
                        && rest[k.len()..].starts_with(|c: char| c.is_ascii_alphanumeric()))
            })
            .max_by_key(|(k, _)| k.len());
        match hit {
            Some((k, v)) => {
                out.push_str(v);
                left.push(' ');
                rest = &rest[k.len()..];
            }
            None => {
                out.push(c);
                left.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    (out, left)
}

// === tests of the substitution itself (no processes) ===

#[test]
fn substitution_takes_the_longest_key_once_and_keeps_numbers_whole() {
    let table: Vec<(String, String)> = [
        ("-p 19000", "-p 1"),
        ("-h 10.0.0.21 -p 19000", "-h 127.0.0.1 -p 2"),
        ("~/my-plugin", "/tmp/p"),
        ("-p 1", "never again"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let (out, left) = substitute(
        "redis-cli -h 10.0.0.21 -p 19000 get k; redis-cli -p 19000",
        &table,
    );
    assert_eq!(out, "redis-cli -h 127.0.0.1 -p 2 get k; redis-cli -p 1");
    assert_eq!(left, "redis-cli   get k; redis-cli  ");
    // `-p 19000` is no key of `-p 190001`; what the table leaves is reported as left.
    let (out, left) = substitute("redis-cli -p 190001 ~/my-plugin/x", &table);
    assert_eq!(out, "redis-cli -p 190001 /tmp/p/x");
    assert_eq!(left, "redis-cli -p 190001  /x");
}
