//! The mover's errors and how it reads the replies of the servers it copies between: what
//! the chunked copies (`mover`, `stream`) share.

use tessera_model::databases::info_keyspace;
use tessera_model::redis_client::{ClientError, RedisClient, Value};

#[derive(Debug, thiserror::Error)]
pub enum MoverError {
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("{server} refused {what}: {reply}")]
    Refused {
        server: String,
        what: String,
        reply: String,
    },
}

/// One page of a SCAN-family reply: advances `cursor` and returns the page's items.
pub(super) fn scan_page<'v>(
    server: &str,
    what: &str,
    reply: &'v Value,
    cursor: &mut Vec<u8>,
) -> Result<&'v [Value], MoverError> {
    if let Value::Array(parts) = reply
        && let (Some(next), Some(Value::Array(items))) =
            (parts.first().and_then(Value::as_bytes), parts.get(1))
    {
        *cursor = next.to_vec();
        return Ok(items);
    }
    Err(refused(server, what, reply))
}

/// `server` answered `v` where it should have done `what`.
pub(super) fn refused(server: &str, what: &str, v: &Value) -> MoverError {
    MoverError::Refused {
        server: server.into(),
        what: what.into(),
        reply: format!("{v:?}"),
    }
}

/// Sends `args`; an error reply is the server refusing them.
pub(super) async fn expect_ok(
    c: &mut RedisClient,
    server: &str,
    args: &[&[u8]],
) -> Result<(), MoverError> {
    match c.cmd(args).await? {
        Value::Error(e) => Err(MoverError::Refused {
            server: server.into(),
            what: String::from_utf8_lossy(args[0]).into_owned(),
            reply: e,
        }),
        _ => Ok(()),
    }
}

/// The databases of `c`'s server that hold keys now (`INFO keyspace`), in order, Tessera's
/// internal database included.
pub(super) async fn databases_with_keys(
    c: &mut RedisClient,
    server: &str,
) -> Result<Vec<u32>, MoverError> {
    let reply = c.cmd(&[&b"INFO"[..], b"keyspace"]).await?;
    let Some(text) = reply.as_text() else {
        return Err(refused(server, "INFO keyspace", &reply));
    };
    Ok(info_keyspace(&text).into_iter().map(|(db, _)| db).collect())
}
