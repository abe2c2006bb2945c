//! `tessera admin events [--follow]`: the cluster's events, one line each (time, severity,
//! sentence), oldest first (`GET /api/events`); `--follow` then waits for new ones (a long
//! poll of 25 s at a time) until interrupted.

use clap::Args;

use super::Reply;
use super::client::Client;
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
        time_text(e.time_ms),
        e.severity.as_str(),
        e.detail
    )
}

/// UTC `YYYY-MM-DD HH:MM:SSZ` of unix milliseconds (civil-from-days, H. Hinnant).
fn time_text(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(time_text(0), "1970-01-01 00:00:00Z");
        assert_eq!(time_text(1_733_356_800_123), "2024-12-05 00:00:00Z");
        assert_eq!(time_text(951_782_400_000), "2000-02-29 00:00:00Z");
    }
}
