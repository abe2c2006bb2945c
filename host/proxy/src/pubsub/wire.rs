//! The pub/sub wire shapes, pure: the requests a hub sends its subscriber connections, the
//! pushes it reads back (`message`, `pmessage`, `smessage`), and the subscribe/unsubscribe
//! confirmations a session composes for its client, byte for byte as redis-server 7.0 sends
//! them to a direct client (`>` pushes in RESP3, `*` arrays in RESP2).

use bytes::{BufMut, Bytes, BytesMut};

use tessera_model::databases::{keyspace_db, keyspace_parts, with_keyspace_db};
use tessera_resp::{Proto, split_aggregate};

/// The three namespaces a client subscribes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// SUBSCRIBE: channels, routed by the channel's slot.
    Channel,
    /// PSUBSCRIBE: patterns, subscribed on every master.
    Pattern,
    /// SSUBSCRIBE: shard channels, routed by slot.
    Shard,
}

impl Space {
    pub const ALL: [Space; 3] = [Space::Channel, Space::Pattern, Space::Shard];

    pub fn index(self) -> usize {
        self as usize
    }

    /// The backend command (and the confirmation's first element) to subscribe.
    pub fn subscribe_name(self) -> &'static str {
        match self {
            Space::Channel => "subscribe",
            Space::Pattern => "psubscribe",
            Space::Shard => "ssubscribe",
        }
    }

    pub fn unsubscribe_name(self) -> &'static str {
        match self {
            Space::Channel => "unsubscribe",
            Space::Pattern => "punsubscribe",
            Space::Shard => "sunsubscribe",
        }
    }
}

/// `SUBSCRIBE a b …` (or its pattern/shard form, or the unsubscribes) as a RESP request.
pub fn request(space: Space, subscribe: bool, names: &[Bytes]) -> Bytes {
    let cmd = if subscribe {
        space.subscribe_name()
    } else {
        space.unsubscribe_name()
    };
    let mut out = BytesMut::with_capacity(16 + names.iter().map(|n| n.len() + 16).sum::<usize>());
    header(&mut out, b'*', names.len() + 1);
    bulk(&mut out, cmd.as_bytes());
    for n in names {
        bulk(&mut out, n);
    }
    out.freeze()
}

/// A confirmation: `[kind, name or null, count]`, as Redis's `addReplyPubsub(Un)Subscribed`.
pub fn confirmation(
    proto: Proto,
    kind: &str,
    name: Option<&[u8]>,
    count: usize,
    out: &mut BytesMut,
) {
    header(out, push_byte(proto), 3);
    bulk(out, kind.as_bytes());
    match (name, proto) {
        (Some(n), _) => bulk(out, n),
        (None, Proto::Resp2) => out.put_slice(b"$-1\r\n"),
        (None, Proto::Resp3) => out.put_slice(b"_\r\n"),
    }
    out.put_u8(b':');
    out.put_slice(itoa::Buffer::new().format(count).as_bytes());
    out.put_slice(b"\r\n");
}

/// PING while subscribed in RESP2: `["pong", arg or ""]` (Redis answers so there).
pub fn subscribed_pong(arg: Option<&[u8]>, out: &mut BytesMut) {
    out.put_slice(b"*2\r\n$4\r\npong\r\n");
    bulk(out, arg.unwrap_or(b""));
}

/// A message push as a subscriber connection (RESP3) delivered it, written for a client of
/// `proto`: the elements are the same bulk strings, only the type byte differs.
pub fn message_for(proto: Proto, push: &[u8], out: &mut BytesMut) {
    if let Some((first, rest)) = push.split_first() {
        out.put_u8(if *first == b'>' {
            push_byte(proto)
        } else {
            *first
        });
        out.put_slice(rest);
    }
}

/// A push a subscriber connection received, by what it is for.
#[derive(Debug, PartialEq, Eq)]
pub enum Push<'a> {
    /// A message for the subscribers of `name` in `space` (a channel, or for `pmessage` the
    /// pattern that matched), published on `channel` (`name` itself but for `pmessage`).
    Message {
        space: Space,
        name: &'a [u8],
        channel: &'a [u8],
    },
    /// `invalidate [keys]` (or null: everything), from `CLIENT TRACKING ON BCAST`; the parts
    /// after the first (see `tracking::invalidated_keys`).
    Invalidate(Vec<&'a [u8]>),
    /// A confirmation, or anything else that needs no delivery.
    Other,
}

/// What a push from a subscriber connection is.
pub fn classify_push(push: &[u8]) -> Push<'_> {
    if push.first() != Some(&b'>') {
        return Push::Other;
    }
    let Some(parts) = split_aggregate(push) else {
        return Push::Other;
    };
    let kind = parts.first().and_then(|p| bulk_body(p));
    if kind == Some(b"invalidate") && parts.len() == 2 {
        return Push::Invalidate(parts);
    }
    let space = match (kind, parts.len()) {
        (Some(b"message"), 3) => Space::Channel,
        (Some(b"pmessage"), 4) => Space::Pattern,
        (Some(b"smessage"), 3) => Space::Shard,
        _ => return Push::Other,
    };
    let channel = if space == Space::Pattern {
        parts[2]
    } else {
        parts[1]
    };
    match (bulk_body(parts[1]), bulk_body(channel)) {
        (Some(name), Some(channel)) => Push::Message {
            space,
            name,
            channel,
        },
        _ => Push::Other,
    }
}

/// Whether `channel` carries a keyspace notification of Tessera's internal database
/// (`__keyspace@1__:…`, `__keyevent@1__:…` on a backend): its keys are the proxy's own (a big
/// key's copy), never a client's, and no client is shown them, whatever it subscribed to.
pub fn internal_db_event(channel: &[u8]) -> bool {
    keyspace_parts(channel).is_some_and(|(_, db, rest)| {
        db == tessera_model::migration::INTERNAL_DB && rest.starts_with(b"__:")
    })
}

/// A message push from a backend (RESP3) whose channel, and pattern for `pmessage`, name
/// backend database `db` of a keyspace notification, renamed for clients, who number that
/// database `client` (`tessera_model::databases`); the payload as it is.
pub fn renumbered_push(push: &[u8], space: Space, client: u32) -> Option<Bytes> {
    let parts = split_aggregate(push)?;
    let named = |i: usize| i == 1 || (space == Space::Pattern && i == 2);
    let mut out = BytesMut::with_capacity(push.len() + 8);
    header(&mut out, b'>', parts.len());
    for (i, part) in parts.iter().enumerate() {
        match bulk_body(part) {
            Some(body) if named(i) && keyspace_db(body).is_some() => {
                bulk(
                    &mut out,
                    &with_keyspace_db(&Bytes::copy_from_slice(body), client),
                );
            }
            _ => out.put_slice(part),
        }
    }
    Some(out.freeze())
}

/// The key a keyspace notification is about: the rest of a `__keyspace@<db>__:<key>` channel,
/// or a `__keyevent@<db>__:<event>` message's payload; `None` for any other message.
pub fn notified_key<'a>(channel: &'a [u8], push: &'a [u8]) -> Option<&'a [u8]> {
    let (head, _, rest) = keyspace_parts(channel)?;
    let rest = rest.strip_prefix(b"__:")?;
    if head == b"__keyspace@" {
        return Some(rest);
    }
    let parts = split_aggregate(push)?;
    bulk_body(parts.last()?)
}

/// The body of a bulk string (`$n\r\n…\r\n`).
fn bulk_body(b: &[u8]) -> Option<&[u8]> {
    if b.first() != Some(&b'$') {
        return None;
    }
    let start = memchr::memchr(b'\n', b)? + 1;
    b.get(start..b.len().checked_sub(2)?)
}

fn push_byte(proto: Proto) -> u8 {
    match proto {
        Proto::Resp2 => b'*',
        Proto::Resp3 => b'>',
    }
}

fn header(out: &mut BytesMut, kind: u8, n: usize) {
    out.put_u8(kind);
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    header(out, b'$', b.len());
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(proto: Proto, kind: &str, name: Option<&[u8]>, n: usize) -> Vec<u8> {
        let mut out = BytesMut::new();
        confirmation(proto, kind, name, n, &mut out);
        out.to_vec()
    }

    #[test]
    fn confirmations_are_redis_shapes() {
        assert_eq!(
            conf(Proto::Resp2, "subscribe", Some(b"ch"), 1),
            b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
        );
        assert_eq!(
            conf(Proto::Resp3, "psubscribe", Some(b"h*"), 12),
            b">3\r\n$10\r\npsubscribe\r\n$2\r\nh*\r\n:12\r\n"
        );
        assert_eq!(
            conf(Proto::Resp2, "unsubscribe", None, 0),
            b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
        );
        assert_eq!(
            conf(Proto::Resp3, "sunsubscribe", None, 0),
            b">3\r\n$12\r\nsunsubscribe\r\n_\r\n:0\r\n"
        );
        let mut out = BytesMut::new();
        subscribed_pong(None, &mut out);
        assert_eq!(&out[..], b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    }

    #[test]
    fn requests_name_every_channel() {
        let r = request(
            Space::Shard,
            false,
            &[Bytes::from("a"), Bytes::from("{b}c")],
        );
        assert_eq!(
            &r[..],
            b"*3\r\n$12\r\nsunsubscribe\r\n$1\r\na\r\n$4\r\n{b}c\r\n"
        );
    }

    #[test]
    fn keyspace_names_are_renumbered_and_other_names_left_alone() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        assert_eq!(keyspace_db(b"__keyspace@12__:k"), Some(12));
        assert_eq!(keyspace_db(b"__keyevent@0__:set"), Some(0));
        assert_eq!(keyspace_db(b"__keyspace@*__:k"), None);
        assert_eq!(keyspace_db(b"__keyspace@1"), None);
        assert_eq!(keyspace_db(b"news"), None);
        assert_eq!(
            with_keyspace_db(&b("__keyspace@2__:*"), 3),
            b("__keyspace@3__:*")
        );
        assert_eq!(
            with_keyspace_db(&b("__keyevent@15__:del"), 16),
            b("__keyevent@16__:del")
        );
        assert_eq!(with_keyspace_db(&b("news"), 3), b("news"));
        // A pmessage of backend database 3: pattern and channel become client database 2's.
        let push = b">4\r\n$8\r\npmessage\r\n$16\r\n__keyspace@3__:*\r\n$17\r\n__keyspace@3__:k1\r\n$3\r\nset\r\n";
        let got = renumbered_push(push, Space::Pattern, 2).unwrap();
        assert_eq!(
            &got[..],
            &b">4\r\n$8\r\npmessage\r\n$16\r\n__keyspace@2__:*\r\n$17\r\n__keyspace@2__:k1\r\n$3\r\nset\r\n"[..]
        );
        // A pattern that wildcards the number keeps it; the channel is renamed.
        let push = b">4\r\n$8\r\npmessage\r\n$11\r\n__key*@*__*\r\n$19\r\n__keyevent@11__:set\r\n$1\r\nk\r\n";
        let got = renumbered_push(push, Space::Pattern, 10).unwrap();
        assert_eq!(
            &got[..],
            &b">4\r\n$8\r\npmessage\r\n$11\r\n__key*@*__*\r\n$19\r\n__keyevent@10__:set\r\n$1\r\nk\r\n"[..]
        );
        let event = b">3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@5__:del\r\n$2\r\nk2\r\n";
        assert_eq!(notified_key(b"__keyevent@5__:del", event), Some(&b"k2"[..]));
        assert_eq!(notified_key(b"__keyspace@7__:k9", event), Some(&b"k9"[..]));
    }

    #[test]
    fn the_internal_databases_notifications_are_told_apart() {
        assert!(internal_db_event(b"__keyspace@1__:tessera:x"));
        assert!(internal_db_event(b"__keyevent@1__:set"));
        assert!(!internal_db_event(b"__keyspace@0__:user:1"));
        assert!(!internal_db_event(b"__keyevent@10__:set"));
        assert!(!internal_db_event(b"__keyspace@1"));
        assert!(!internal_db_event(b"news"));
    }

    #[test]
    fn keyspace_notifications_name_their_key() {
        let space = b">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$17\r\n__keyspace@0__:k1\r\n$3\r\nset\r\n";
        assert_eq!(notified_key(b"__keyspace@0__:k1", space), Some(&b"k1"[..]));
        let event = b">3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:del\r\n$2\r\nk2\r\n";
        assert_eq!(notified_key(b"__keyevent@0__:del", event), Some(&b"k2"[..]));
        assert_eq!(notified_key(b"news", event), None);
        assert_eq!(notified_key(b"__keyevent@0__:del", b">1\r\n:1\r\n"), None);
    }

    #[test]
    fn pushes_are_told_apart() {
        let m = b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n";
        assert_eq!(
            classify_push(m),
            Push::Message {
                space: Space::Channel,
                name: b"ch",
                channel: b"ch"
            }
        );
        let p = b">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$0\r\n\r\n";
        assert_eq!(
            classify_push(p),
            Push::Message {
                space: Space::Pattern,
                name: b"c*",
                channel: b"ch"
            }
        );
        let s = b">3\r\n$8\r\nsmessage\r\n$1\r\nx\r\n$1\r\ny\r\n";
        assert_eq!(
            classify_push(s),
            Push::Message {
                space: Space::Shard,
                name: b"x",
                channel: b"x"
            }
        );
        assert_eq!(
            classify_push(b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"),
            Push::Other
        );
        assert_eq!(classify_push(b"-ERR no\r\n"), Push::Other);
        assert_eq!(
            classify_push(b">2\r\n$7\r\nmessage\r\n$2\r\nch\r\n"),
            Push::Other
        );
        let mut out = BytesMut::new();
        message_for(Proto::Resp2, m, &mut out);
        assert_eq!(&out[..], b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    }
}
