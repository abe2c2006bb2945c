//! Replies on their way back: the namespace prefix comes off every key a reply names, and
//! compressed values are decompressed, within a budget per reply. Works on the SDK's
//! [`Node`] tree, so the client gets its own protocol's types back (a RESP3 map stays a map).

use std::borrow::Cow;

use tessera_plugin_sdk::Node;

use crate::codec;
use crate::plan::{ReplyCtx, ReplyOp};

/// How a reply is converted.
pub(crate) struct Convert<'c> {
    pub(crate) ctx: ReplyCtx,
    /// The namespace prefix to strip, when `ctx.namespace` is set.
    pub(crate) prefix: Option<&'c [u8]>,
    /// Largest single value, and largest sum of values, decompression may produce.
    pub(crate) max_value: usize,
    pub(crate) budget: usize,
}

/// The reply to send instead of `raw`; `Err` is an error text (`ERR converter: …`).
pub(crate) fn convert(raw: &[u8], conv: &mut Convert<'_>) -> Result<Vec<u8>, String> {
    let (mut node, _) =
        Node::parse(raw).map_err(|e| format!("ERR converter: unreadable reply ({e})"))?;
    if node.is_error() {
        return Ok(raw.to_vec());
    }
    match conv.ctx.op {
        ReplyOp::Values => values(&mut node, conv)?,
        ReplyOp::Odd => odd(node.items_mut(), conv)?,
        ReplyOp::Pairs => pairs(&mut node, conv)?,
        ReplyOp::HashScan => {
            if let Some(items) = node.items_mut() {
                odd(items.get_mut(1).and_then(Node::items_mut), conv)?;
            }
        }
        ReplyOp::KeyHead => key_head(&mut node, conv)?,
        ReplyOp::Streams => streams(&mut node, conv),
        ReplyOp::Scan => {
            if let Some(items) = node.items_mut()
                && let Some(keys) = items.get_mut(1)
            {
                keep_keys(keys, conv);
            }
        }
        ReplyOp::Keys => keep_keys(&mut node, conv),
        ReplyOp::Len => return len(&node, conv),
    }
    Ok(node.to_vec())
}

/// Decompresses one bulk string in place, if it carries the marker.
fn value(b: &mut Cow<'_, [u8]>, conv: &mut Convert<'_>) -> Result<(), String> {
    if !conv.ctx.decompress {
        return Ok(());
    }
    let limit = conv.max_value.min(conv.budget);
    match codec::decode(b, limit) {
        Ok(None) => Ok(()),
        Ok(Some(plain)) => {
            conv.budget -= plain.len();
            *b = Cow::Owned(plain);
            Ok(())
        }
        Err(e @ codec::DecodeError::TooLarge { .. }) if limit < conv.max_value => Err(format!(
            "ERR converter: the reply's decompressed values would be over {} bytes ({e})",
            conv.budget
        )),
        Err(e) => Err(format!("ERR converter: {e}")),
    }
}

fn node_value(n: &mut Node<'_>, conv: &mut Convert<'_>) -> Result<(), String> {
    match n {
        Node::Bulk(b) => value(b, conv),
        _ => Ok(()),
    }
}

/// A bulk string, or the bulk strings of an array (MGET, LRANGE, LPOP with a count …).
fn values(n: &mut Node<'_>, conv: &mut Convert<'_>) -> Result<(), String> {
    match n.items_mut() {
        Some(items) => items.iter_mut().try_for_each(|i| node_value(i, conv)),
        None => node_value(n, conv),
    }
}

fn odd(items: Option<&mut Vec<Node<'_>>>, conv: &mut Convert<'_>) -> Result<(), String> {
    let Some(items) = items else { return Ok(()) };
    items
        .iter_mut()
        .skip(1)
        .step_by(2)
        .try_for_each(|i| node_value(i, conv))
}

/// HRANDFIELD WITHVALUES: RESP2 sends field, value, …; RESP3 an array of [field, value].
fn pairs(n: &mut Node<'_>, conv: &mut Convert<'_>) -> Result<(), String> {
    let Some(items) = n.items_mut() else {
        return Ok(());
    };
    if items.first().is_some_and(|i| i.items().is_some()) {
        items
            .iter_mut()
            .try_for_each(|pair| odd(pair.items_mut(), conv))
    } else {
        odd(Some(items), conv)
    }
}

/// `[key, value]` / `[key, [values]]`: the key loses its prefix, the rest is decompressed.
fn key_head(n: &mut Node<'_>, conv: &mut Convert<'_>) -> Result<(), String> {
    let Some(items) = n.items_mut() else {
        return Ok(());
    };
    if let Some(k) = items.first_mut() {
        strip(k, conv.prefix);
    }
    if let Some(v) = items.get_mut(1) {
        values(v, conv)?;
    }
    Ok(())
}

/// XREAD: `[[key, entries], …]` in RESP2, `{key: entries, …}` in RESP3.
fn streams(n: &mut Node<'_>, conv: &mut Convert<'_>) {
    let map = n.is_map();
    let Some(items) = n.items_mut() else { return };
    if map {
        items
            .iter_mut()
            .step_by(2)
            .for_each(|k| strip(k, conv.prefix));
    } else {
        for s in items.iter_mut() {
            if let Some(k) = s.items_mut().and_then(|i| i.first_mut()) {
                strip(k, conv.prefix);
            }
        }
    }
}

/// Keeps the keys under the prefix (every key, without a namespace), without the prefix.
fn keep_keys(n: &mut Node<'_>, conv: &Convert<'_>) {
    let Some(prefix) = conv.prefix else { return };
    if let Some(items) = n.items_mut() {
        items.retain(|k| k.as_bulk().is_some_and(|b| b.starts_with(prefix)));
        items.iter_mut().for_each(|k| strip(k, Some(prefix)));
    }
}

fn strip(n: &mut Node<'_>, prefix: Option<&[u8]>) {
    if let (Some(p), Node::Bulk(b)) = (prefix, n)
        && b.starts_with(p)
    {
        *b = Cow::Owned(b[p.len()..].to_vec());
    }
}

/// STRLEN / HSTRLEN from GET / HGET's reply: the length of the value as the client stored
/// it (read from the compressed header, which is checked against the limit).
fn len(n: &Node<'_>, conv: &Convert<'_>) -> Result<Vec<u8>, String> {
    let n = match n.as_bulk() {
        None => 0,
        Some(b) if codec::is_compressed(b) => {
            codec::original_len(b, conv.max_value).map_err(|e| format!("ERR converter: {e}"))?
        }
        Some(b) => b.len(),
    };
    Ok(format!(":{n}\r\n").into_bytes())
}
