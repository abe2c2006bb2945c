//! `PUBLISH`, `SPUBLISH` and `PUBSUB NUMSUB` / `SHARDNUMSUB` answered with counts of clients, as
//! a Redis user expects, rather than the servers' counts, which see each proxy worker's hub as
//! one subscriber however many clients it serves (docs/pubsub.md, "What counts mean").
//!
//! A server's count is every subscription it holds: the hubs of every proxy, and its own
//! direct clients. From it, this proxy takes its hubs' subscriptions and adds its clients'
//! (`Shared::sub_counts`). What is left, if anything, is other proxies' hubs or direct
//! clients: then the other proxies are asked theirs (`Shared::fleet`) and the same is done
//! with them, and what is left after that is the servers' direct clients, counted as they
//! are. So a `PUBLISH` nobody else subscribed to costs nothing more than before.

use std::rc::Rc;

use bytes::{BufMut, Bytes, BytesMut};

use super::reply::Pending;
use super::send::Sender;
use crate::pubsub::counts::{Count, add};
use crate::pubsub::{Space, owners};
use crate::stages::classify::Classified;
use crate::stages::plan;
use crate::worker::Worker;
use tessera_model::command::PubSub;
use tessera_model::databases::backend_channel;
use tessera_resp::{parse_integer, split_aggregate};

/// Sends `c` (an [`plan::Own::Counted`] command) to the servers; its reply, once they
/// answer, counts clients.
pub(super) fn counted(sender: &Sender<'_>, p: PubSub, c: &Classified<'_>) -> Pending {
    let backends = match plan::counted(p, c, sender.table) {
        Ok(plan) => sender.send(plan, sender.proto),
        Err(e) => return Pending::error(&e),
    };
    let shard = matches!(c.cmd.name, "SPUBLISH" | "PUBSUB|SHARDNUMSUB");
    let space = if shard { Space::Shard } else { Space::Channel };
    let worker = sender.worker.clone();
    let account = sender.account.clone();
    match p {
        PubSub::NumSub => {
            // The servers' names (keyspace channels renumbered, `plan::counted_request`): the
            // hubs count them so.
            let asked: Vec<Bytes> = (2..c.req.argc()).map(|i| c.req.arg_bytes(i)).collect();
            let names: Vec<Bytes> = asked.iter().map(backend_channel).collect();
            // A hub holds a name on each server the table subscribes it on (two while its
            // slot is held for a handoff), and each server counts it.
            let per_hub: Vec<u64> = names
                .iter()
                .map(|n| owners(sender.table, space, n).len() as u64)
                .collect();
            Pending::Task(Box::pin(async move {
                let reply = backends.resolve(&account).await?;
                let out = numsub(&worker, space, &names, &asked, &per_hub, &reply)
                    .await
                    .unwrap_or(reply);
                account.charge(out.len());
                Ok(out)
            }))
        }
        _ => {
            let channel = backend_channel(&c.req.arg_bytes(1));
            Pending::Task(Box::pin(async move {
                let reply = backends.resolve(&account).await?;
                let out = match parse_integer(&reply) {
                    Some(n) => integer(publish(&worker, space, channel, n).await),
                    // An error, as the server gave it.
                    None => reply,
                };
                account.charge(out.len());
                Ok(out)
            }))
        }
    }
}

/// The clients a message published on `channel` reached, the server having counted `n`.
async fn publish(worker: &Rc<Worker>, space: Space, channel: Bytes, n: i64) -> i64 {
    let names = [channel];
    // Plain channels: a client's matching patterns count too, as in Redis.
    let patterns = space == Space::Channel;
    let ours = worker.shared.sub_counts.of(space, &names, patterns)[0];
    let theirs = others(worker, space, &names, patterns, &[n], &[ours], &[1]).await;
    clients(n, ours, theirs.map(|t| t[0]), 1)
}

/// `PUBSUB NUMSUB`'s summed reply (`reply`) with counts of clients, each name as the client
/// `asked` it (the servers were asked `names`); `None` if it is not the `[name, count, …]`
/// array it should be (it is then answered as it came).
async fn numsub(
    worker: &Rc<Worker>,
    space: Space,
    names: &[Bytes],
    asked: &[Bytes],
    per_hub: &[u64],
    reply: &[u8],
) -> Option<Bytes> {
    let parts = split_aggregate(reply)?;
    if parts.len() != names.len() * 2 {
        return None;
    }
    let counted: Vec<i64> = parts
        .chunks(2)
        .map(|p| parse_integer(p[1]))
        .collect::<Option<_>>()?;
    let ours = worker.shared.sub_counts.of(space, names, false);
    let theirs = others(worker, space, names, false, &counted, &ours, per_hub).await;
    let mut out = BytesMut::new();
    out.put_u8(b'*');
    out.put_slice(itoa::Buffer::new().format(parts.len()).as_bytes());
    out.put_slice(b"\r\n");
    for (i, pair) in parts.chunks(2).enumerate() {
        let n = clients(
            counted[i],
            ours[i],
            theirs.as_ref().map(|t| t[i]),
            per_hub[i],
        );
        if asked[i] == names[i] {
            out.put_slice(pair[0]);
        } else {
            out.put_u8(b'$');
            out.put_slice(itoa::Buffer::new().format(asked[i].len()).as_bytes());
            out.put_slice(b"\r\n");
            out.put_slice(&asked[i]);
            out.put_slice(b"\r\n");
        }
        out.put_slice(&integer(n));
    }
    Some(out.freeze())
}

/// The other proxies' counts, asked only with `pubsub_cluster_counts` and when a server
/// counted more than this proxy's hubs (someone else subscribed); `None` when nobody was
/// asked.
async fn others(
    worker: &Rc<Worker>,
    space: Space,
    names: &[Bytes],
    patterns: bool,
    counted: &[i64],
    ours: &[Count],
    per_hub: &[u64],
) -> Option<Vec<Count>> {
    let fleet = &worker.shared.fleet;
    let more = counted
        .iter()
        .zip(ours)
        .zip(per_hub)
        .any(|((n, o), h)| u64::try_from(*n).unwrap_or(0) > o.hubs.saturating_mul(*h));
    if !more || !fleet.has_others() || !worker.shared.config.pubsub_cluster_counts {
        return None;
    }
    let answers = fleet.ask(space == Space::Shard, names, patterns).await;
    if answers.missing > 0 {
        // Their hubs stay counted as one subscriber each.
        tracing::debug!(
            missing = answers.missing,
            "pub/sub counts: some proxies did not answer"
        );
    }
    Some(answers.counts)
}

/// A server's count `n` with this proxy's hubs (`ours`) and the other proxies' (`theirs`),
/// `per_hub` subscriptions each, replaced by their clients; the rest (direct clients of the
/// server) stays.
fn clients(n: i64, ours: Count, theirs: Option<Count>, per_hub: u64) -> i64 {
    let mut all = ours;
    if let Some(t) = theirs {
        add(&mut all, t);
    }
    let n = u64::try_from(n).unwrap_or(0);
    let direct = n.saturating_sub(all.hubs.saturating_mul(per_hub));
    i64::try_from(all.clients.saturating_add(direct)).unwrap_or(i64::MAX)
}

fn integer(n: i64) -> Bytes {
    let mut out = BytesMut::with_capacity(24);
    out.put_u8(b':');
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hubs_are_replaced_by_their_clients_and_direct_clients_stay() {
        let c = |hubs, clients| Count { hubs, clients };
        // Two hubs here with 5 clients, one elsewhere with 3, one direct client.
        assert_eq!(clients(4, c(2, 5), Some(c(1, 3)), 1), 9);
        // Nobody else asked: what is not ours is counted as the server saw it.
        assert_eq!(clients(3, c(2, 5), None, 1), 6);
        // During a handoff each hub is subscribed on two servers, and NUMSUB sums them.
        assert_eq!(clients(4, c(2, 5), None, 2), 5);
        // A subscription not yet on the server does not make the count negative.
        assert_eq!(clients(0, c(1, 1), None, 1), 1);
    }
}
