//! A big stream's chunked copy (the mover's `copy_big` for type `stream`): its entries a page
//! at a time (`XRANGE` → `XADD` with the same IDs), then what makes it the same stream and
//! not only the same entries: its last ID, entries added and greatest deleted ID (`XSETID`),
//! its consumer groups with their last delivered ID and entries read (`XGROUP CREATE`), their
//! consumers (`XGROUP CREATECONSUMER`) and their pending entries with owner, idle time and
//! delivery count (`XCLAIM … IDLE … RETRYCOUNT … FORCE JUSTID`).
//!
//! What does not survive: a consumer's seen time (it starts again at the copy), and a pending
//! entry whose message was deleted from the stream (XCLAIM cannot recreate it; XREADGROUP
//! would report it as deleted anyway).

use bytes::BytesMut;

use super::reply::{MoverError, expect_ok, refused};
use super::throttle::Throttle;
use tessera_model::redis_client::{RedisClient, Value};

/// The value of `name` in a flat `[name, value, …]` reply (XINFO's RESP2 shape).
fn field<'v>(flat: &'v [Value], name: &str) -> Option<&'v Value> {
    flat.chunks(2)
        .find(|p| p.first().and_then(Value::as_bytes) == Some(name.as_bytes()))
        .and_then(|p| p.get(1))
}

fn text(v: Option<&Value>) -> Option<Vec<u8>> {
    v.and_then(Value::as_bytes).map(<[u8]>::to_vec)
}

/// Sends pipelined commands and fails on the first error reply.
async fn pipelined(
    c: &mut RedisClient,
    server: &str,
    what: &str,
    cmds: &[Vec<&[u8]>],
) -> Result<(), MoverError> {
    if cmds.is_empty() {
        return Ok(());
    }
    let mut req = BytesMut::new();
    for args in cmds {
        let size = args.iter().map(|a| a.len()).sum();
        req.extend_from_slice(&tessera_resp::encode_request(
            args.len(),
            args.iter().copied(),
            size,
        ));
    }
    let replies = c.encoded_many(&req, cmds.len()).await?;
    match replies.iter().find(|r| matches!(r, Value::Error(_))) {
        Some(e) => Err(refused(server, what, e)),
        None => Ok(()),
    }
}

/// Copies the stream `staging` on `src` into `temp` on `dst` (both connections on the
/// internal database; `servers` names them: source, target), `chunk` entries a step, each
/// step charged to `throttle`. Returns the bytes of the entries copied.
pub(super) async fn copy(
    src: &mut RedisClient,
    dst: &mut RedisClient,
    (source, target): (&str, &str),
    staging: &[u8],
    temp: &[u8],
    chunk: usize,
    throttle: &Throttle,
) -> Result<u64, MoverError> {
    let mut copied = 0;
    let count = chunk.max(1).to_string();
    // Entries, in ID order.
    let mut start = b"-".to_vec();
    loop {
        let r = src
            .cmd(&[
                &b"XRANGE"[..],
                staging,
                &start,
                b"+",
                b"COUNT",
                count.as_bytes(),
            ])
            .await?;
        let Value::Array(entries) = &r else {
            return Err(refused(source, "XRANGE", &r));
        };
        let mut cmds = Vec::with_capacity(entries.len());
        let mut last = None;
        for e in entries {
            let Value::Array(parts) = e else {
                return Err(refused(source, "XRANGE", e));
            };
            let (Some(id), Some(Value::Array(fields))) =
                (parts.first().and_then(Value::as_bytes), parts.get(1))
            else {
                return Err(refused(source, "XRANGE", e));
            };
            let mut args: Vec<&[u8]> = vec![b"XADD", temp, id];
            args.extend(fields.iter().filter_map(Value::as_bytes));
            cmds.push(args);
            last = Some(id);
        }
        pipelined(dst, target, "XADD", &cmds).await?;
        let bytes = cmds
            .iter()
            .flat_map(|args| &args[2..])
            .map(|a| a.len() as u64)
            .sum();
        copied += bytes;
        throttle.pace(0, bytes).await;
        let Some(last) = last else { break };
        start = [&b"("[..], last].concat();
        if entries.len() < chunk.max(1) {
            break;
        }
    }
    // The stream's own IDs and counters.
    let info = src.cmd(&[&b"XINFO"[..], b"STREAM", staging]).await?;
    let Value::Array(info) = &info else {
        return Err(refused(source, "XINFO STREAM", &info));
    };
    let last_id = text(field(info, "last-generated-id"));
    let added = field(info, "entries-added").and_then(Value::as_int);
    let max_deleted = text(field(info, "max-deleted-entry-id"));
    if let Some(last_id) = &last_id {
        let added = added.map(|n| n.to_string());
        let mut args: Vec<&[u8]> = vec![b"XSETID", temp, last_id];
        if let Some(n) = &added {
            args.extend([&b"ENTRIESADDED"[..], n.as_bytes()]);
        }
        if let Some(id) = &max_deleted {
            args.extend([&b"MAXDELETEDID"[..], id]);
        }
        expect_ok(dst, target, &args).await?;
    }
    // Consumer groups, their consumers and pending entries.
    let groups = src.cmd(&[&b"XINFO"[..], b"GROUPS", staging]).await?;
    let Value::Array(groups) = &groups else {
        return Err(refused(source, "XINFO GROUPS", &groups));
    };
    for g in groups {
        let Value::Array(g) = g else {
            return Err(refused(source, "XINFO GROUPS", g));
        };
        let (Some(name), Some(delivered)) =
            (text(field(g, "name")), text(field(g, "last-delivered-id")))
        else {
            return Err(refused(source, "XINFO GROUPS", &Value::Array(g.clone())));
        };
        let read = field(g, "entries-read")
            .and_then(Value::as_int)
            .map(|n| n.to_string());
        let mut create: Vec<&[u8]> = vec![b"XGROUP", b"CREATE", temp, &name, &delivered];
        if let Some(n) = &read {
            create.extend([&b"ENTRIESREAD"[..], n.as_bytes()]);
        }
        expect_ok(dst, target, &create).await?;
        let consumers = src
            .cmd(&[&b"XINFO"[..], b"CONSUMERS", staging, &name])
            .await?;
        let Value::Array(consumers) = &consumers else {
            return Err(refused(source, "XINFO CONSUMERS", &consumers));
        };
        let names: Vec<Vec<u8>> = consumers
            .iter()
            .filter_map(|c| match c {
                Value::Array(c) => text(field(c, "name")),
                _ => None,
            })
            .collect();
        let cmds: Vec<Vec<&[u8]>> = names
            .iter()
            .map(|c| vec![&b"XGROUP"[..], b"CREATECONSUMER", temp, &name, c])
            .collect();
        pipelined(dst, target, "XGROUP CREATECONSUMER", &cmds).await?;
        copy_pending(src, dst, source, target, staging, temp, &name, &count).await?;
    }
    Ok(copied)
}

/// One group's pending entries, a page at a time.
#[allow(clippy::too_many_arguments)]
async fn copy_pending(
    src: &mut RedisClient,
    dst: &mut RedisClient,
    source: &str,
    target: &str,
    staging: &[u8],
    temp: &[u8],
    group: &[u8],
    count: &str,
) -> Result<(), MoverError> {
    let mut start = b"-".to_vec();
    loop {
        let r = src
            .cmd(&[
                &b"XPENDING"[..],
                staging,
                group,
                &start,
                b"+",
                count.as_bytes(),
            ])
            .await?;
        let Value::Array(pending) = &r else {
            return Err(refused(source, "XPENDING", &r));
        };
        // [id, consumer, idle ms, deliveries]
        let mut rows = Vec::with_capacity(pending.len());
        for p in pending {
            match p {
                Value::Array(f) => match &f[..] {
                    [
                        Value::Bulk(id),
                        Value::Bulk(consumer),
                        Value::Int(idle),
                        Value::Int(n),
                    ] => rows.push((
                        id.clone(),
                        consumer.clone(),
                        idle.to_string(),
                        n.to_string(),
                    )),
                    _ => return Err(refused(source, "XPENDING", p)),
                },
                _ => return Err(refused(source, "XPENDING", p)),
            }
        }
        let cmds: Vec<Vec<&[u8]>> = rows
            .iter()
            .map(|(id, consumer, idle, n)| {
                vec![
                    &b"XCLAIM"[..],
                    temp,
                    group,
                    consumer,
                    b"0",
                    id,
                    b"IDLE",
                    idle.as_bytes(),
                    b"RETRYCOUNT",
                    n.as_bytes(),
                    b"FORCE",
                    b"JUSTID",
                ]
            })
            .collect();
        pipelined(dst, target, "XCLAIM", &cmds).await?;
        match rows.last() {
            Some((id, ..)) if rows.len() >= count.parse().unwrap_or(1) => {
                start = [&b"("[..], &id[..]].concat();
            }
            _ => return Ok(()),
        }
    }
}
