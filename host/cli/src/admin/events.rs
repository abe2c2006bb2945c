//! `tessera admin events [--follow]`: the cluster's events, one line each (time, severity,
//! sentence), oldest first (`GET /api/events`); `--follow` then waits for new ones (a long
//! poll of 25 s at a time) until interrupted.

use clap::Args;

use super::Reply;
use super::client::Client;
use tessera_model::clock::utc_text;
use tessera_wire::events::{Event, EventsPage};

/// How long one poll of `--follow` waits for an event (under the client's 30 s deadline).
const FOLLOW_WAIT_SECS: u64 = 25;

/// `tessera admin events [--limit N] [--follow]`
#[derive(Args, Debug)]
pub struct EventsArgs {
    /// The newest N events (1 to 1000).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=1000))]
    limit: u16,
    /// Keep printing events as they come, until interrupted.
    #[arg(long)]
    follow: bool,
}

pub(super) async fn run(c: &Client, a: EventsArgs, json: bool) -> anyhow::Result<Reply> {
    let limit = a.limit.to_string();
    let page: EventsPage = c
        .get_query(&["api", "events"], &[("limit", &limit)])
        .await?;
    if !a.follow {
        let human = if page.events.is_empty() {
            "(no events yet)".to_owned()
        } else {
            page.events.iter().map(line).collect::<Vec<_>>().join("\n")
        };
        return Reply::new(&page, human);
    }
    let mut last = page.last_id;
    print(&page.events, json)?;
    loop {
        let after = last.to_string();
        let wait = FOLLOW_WAIT_SECS.to_string();
        let page: EventsPage = c
            .get_query(
                &["api", "events"],
                &[("after", &after), ("limit", "1000"), ("wait", &wait)],
            )
            .await?;
        // A dashboard that restarted without its store's events numbers from 1 again.
        if page.last_id < last {
            last = 0;
            continue;
        }
        last = page.events.last().map_or(last, |e| e.id);
        print(&page.events, json)?;
    }
}

fn print(events: &[Event], json: bool) -> anyhow::Result<()> {
    for e in events {
        let out = if json {
            serde_json::to_string(e)?
        } else {
            line(e)
        };
        super::emit(&out)?;
    }
    Ok(())
}

/// `2026-12-06 11:02:03Z  critical  proxy 127.0.0.1:19000 is lost: …`
fn line(e: &Event) -> String {
    format!(
        "{}  {:<8}  {}",
        utc_text(e.time_ms),
        e.severity.as_str(),
        e.detail
    )
}
