//! A minimal async Redis client for the control plane (health checks, REPLICAOF on promote,
//! the migration mover). One connection, one command at a time or pipelined; every call
//! bounded by a timeout; optionally `AUTH user password` right after connecting. Not used on
//! the proxy's data path.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;

use tessera_resp::{ReplyScanner, encode_request};

/// A parsed reply (RESP2 and the RESP3 types Redis sends).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Nil,
    Ok(String),
    Error(String),
    Int(i64),
    Bulk(Bytes),
    Array(Vec<Value>),
}

impl Value {
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(b) => Some(b),
            Value::Ok(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    pub fn as_text(&self) -> Option<String> {
        self.as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{addr}: {reason}")]
    Io { addr: String, reason: String },
    #[error("{addr}: timed out after {ms} ms")]
    Timeout { addr: String, ms: u128 },
    #[error("{addr}: {message}")]
    Server { addr: String, message: String },
    /// The server refused `AUTH user …` (no such user, wrong password, user off).
    #[error("{addr}: AUTH as {user} refused: {message}")]
    AuthRefused {
        addr: String,
        user: String,
        message: String,
    },
}

pub use tessera_wire::credential::Credential;

/// One connection to a Redis server.
pub struct RedisClient {
    addr: String,
    stream: crate::tls::Stream,
    rbuf: BytesMut,
    timeout: Duration,
}

impl RedisClient {
    /// Connects through the backend connector (TLS to a group marked so, see `tls::backend`).
    ///
    /// # Errors
    /// Connect failure or timeout.
    pub async fn connect(addr: &str, timeout: Duration) -> Result<Self, ClientError> {
        let connect = crate::tls::backend::backends().connect(addr);
        let stream = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| ClientError::Timeout {
                addr: addr.into(),
                ms: timeout.as_millis(),
            })?
            .map_err(|reason| ClientError::Io {
                addr: addr.into(),
                reason,
            })?;
        Ok(Self {
            addr: addr.into(),
            stream,
            rbuf: BytesMut::with_capacity(4096),
            timeout,
        })
    }

    /// Connects, then authenticates as `credential` when one is given.
    ///
    /// # Errors
    /// As [`RedisClient::connect`], or [`ClientError::AuthRefused`].
    pub async fn connect_as(
        addr: &str,
        timeout: Duration,
        credential: Option<&Credential>,
    ) -> Result<Self, ClientError> {
        let mut c = Self::connect(addr, timeout).await?;
        if let Some(cred) = credential {
            c.auth(cred).await?;
        }
        Ok(c)
    }

    /// `AUTH user password`. A refused AUTH leaves the connection as it was (Redis keeps
    /// the user it was authenticated as).
    ///
    /// # Errors
    /// [`ClientError::AuthRefused`], or I/O failure and timeout.
    pub async fn auth(&mut self, cred: &Credential) -> Result<(), ClientError> {
        match self
            .cmd(&[b"AUTH", cred.user.as_bytes(), cred.password.as_bytes()])
            .await?
        {
            Value::Ok(_) => Ok(()),
            other => Err(ClientError::AuthRefused {
                addr: self.addr.clone(),
                user: cred.user.clone(),
                message: match other {
                    Value::Error(e) => e,
                    v => format!("unexpected reply {v:?}"),
                },
            }),
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends one command and reads its reply. A Redis error reply is `Ok(Value::Error)`.
    ///
    /// # Errors
    /// I/O failure, timeout, or a malformed reply.
    pub async fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, ClientError> {
        let mut replies = self
            .pipeline(std::slice::from_ref(
                &args.iter().map(|a| a.as_ref()).collect::<Vec<_>>(),
            ))
            .await?;
        Ok(replies.pop().unwrap_or(Value::Nil))
    }

    /// Sends one already-encoded request and reads its reply.
    ///
    /// # Errors
    /// As `cmd`.
    pub async fn encoded(&mut self, req: &[u8]) -> Result<Value, ClientError> {
        let mut replies = self.encoded_many(req, 1).await?;
        Ok(replies.pop().unwrap_or(Value::Nil))
    }

    /// Sends already-encoded requests in one write and reads their `n` replies in order.
    ///
    /// # Errors
    /// As `cmd`.
    pub async fn encoded_many(&mut self, req: &[u8], n: usize) -> Result<Vec<Value>, ClientError> {
        let timeout = self.timeout;
        let addr = self.addr.clone();
        let io = |e: std::io::Error| ClientError::Io {
            addr: addr.clone(),
            reason: e.to_string(),
        };
        tokio::time::timeout(timeout, async {
            self.stream.send_all(req).await.map_err(io)?;
            self.read_replies(n).await
        })
        .await
        .map_err(|_| ClientError::Timeout {
            addr: self.addr.clone(),
            ms: timeout.as_millis(),
        })?
    }

    /// Sends already-encoded requests without reading their replies: the caller reads them
    /// later with [`RedisClient::receive`], in order, before using the connection otherwise
    /// (so that the server works on them meanwhile).
    ///
    /// # Errors
    /// I/O failure or timeout.
    pub async fn send(&mut self, req: &[u8]) -> Result<(), ClientError> {
        let (timeout, addr) = (self.timeout, self.addr.clone());
        tokio::time::timeout(timeout, self.stream.send_all(req))
            .await
            .map_err(|_| ClientError::Timeout {
                addr: addr.clone(),
                ms: timeout.as_millis(),
            })?
            .map_err(|e| ClientError::Io {
                addr,
                reason: e.to_string(),
            })
    }

    /// Reads the `n` replies of requests sent by [`RedisClient::send`].
    ///
    /// # Errors
    /// As `cmd`.
    pub async fn receive(&mut self, n: usize) -> Result<Vec<Value>, ClientError> {
        let timeout = self.timeout;
        tokio::time::timeout(timeout, self.read_replies(n))
            .await
            .map_err(|_| ClientError::Timeout {
                addr: self.addr.clone(),
                ms: timeout.as_millis(),
            })?
    }

    /// Sends several commands in one write and reads their replies in order.
    ///
    /// # Errors
    /// As `cmd`.
    pub async fn pipeline(&mut self, cmds: &[Vec<&[u8]>]) -> Result<Vec<Value>, ClientError> {
        let timeout = self.timeout;
        let addr = self.addr.clone();
        tokio::time::timeout(timeout, self.pipeline_inner(cmds))
            .await
            .map_err(|_| ClientError::Timeout {
                addr,
                ms: timeout.as_millis(),
            })?
    }

    async fn pipeline_inner(&mut self, cmds: &[Vec<&[u8]>]) -> Result<Vec<Value>, ClientError> {
        let mut out = BytesMut::new();
        for c in cmds {
            let size = c.iter().map(|a| a.len()).sum();
            out.extend_from_slice(&encode_request(c.len(), c.iter().copied(), size));
        }
        let addr = self.addr.clone();
        self.stream
            .send_all(&out)
            .await
            .map_err(|e| ClientError::Io {
                addr,
                reason: e.to_string(),
            })?;
        self.read_replies(cmds.len()).await
    }

    async fn read_replies(&mut self, n: usize) -> Result<Vec<Value>, ClientError> {
        let mut replies = Vec::with_capacity(n);
        let mut scanner = ReplyScanner::default();
        while replies.len() < n {
            let bad = |reason: String| ClientError::Io {
                addr: self.addr.clone(),
                reason,
            };
            match scanner
                .next_len(&self.rbuf)
                .map_err(|e| bad(e.to_string()))?
            {
                Some(len) => {
                    let frame = self.rbuf.split_to(len).freeze();
                    replies.push(
                        parse(&frame)
                            .ok_or_else(|| bad("unparsable reply".into()))?
                            .0,
                    );
                }
                None => {
                    let read = self
                        .stream
                        .read_buf(&mut self.rbuf)
                        .await
                        .map_err(|e| bad(e.to_string()))?;
                    if read == 0 {
                        return Err(bad("connection closed".into()));
                    }
                }
            }
        }
        Ok(replies)
    }
}

/// Parses one complete reply; returns it and the bytes it used.
fn parse(b: &Bytes) -> Option<(Value, usize)> {
    let end = memchr::memchr(b'\n', b)?;
    let line = std::str::from_utf8(b.get(1..end.checked_sub(1)?)?).ok()?;
    let head = end + 1;
    Some(match b[0] {
        b'+' => (Value::Ok(line.into()), head),
        b'-' => (Value::Error(line.into()), head),
        b':' => (Value::Int(line.parse().ok()?), head),
        b'_' => (Value::Nil, head),
        b'#' => (Value::Int((line == "t") as i64), head),
        b',' | b'(' => (Value::Bulk(Bytes::copy_from_slice(line.as_bytes())), head),
        b'$' | b'=' | b'!' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some((Value::Nil, head));
            }
            let body = b.slice(head..head + n as usize);
            let v = match b[0] {
                b'!' => Value::Error(String::from_utf8_lossy(&body).into()),
                b'=' => Value::Bulk(body.slice(4.min(body.len())..)),
                _ => Value::Bulk(body),
            };
            (v, head + n as usize + 2)
        }
        b'*' | b'~' | b'%' | b'>' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some((Value::Nil, head));
            }
            let count = if b[0] == b'%' {
                n as usize * 2
            } else {
                n as usize
            };
            let mut items = Vec::with_capacity(count);
            let mut at = head;
            for _ in 0..count {
                let (v, used) = parse(&b.slice(at..))?;
                items.push(v);
                at += used;
            }
            (Value::Array(items), at)
        }
        _ => return None,
    })
}

/// Parses `INFO` text into `key:value` pairs.
pub fn info_fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_replies() {
        let b = Bytes::from_static(b"*3\r\n$3\r\nfoo\r\n:5\r\n*2\r\n+OK\r\n$-1\r\n");
        let (v, used) = parse(&b).unwrap();
        assert_eq!(used, b.len());
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Bulk(Bytes::from_static(b"foo")),
                Value::Int(5),
                Value::Array(vec![Value::Ok("OK".into()), Value::Nil])
            ])
        );
        assert_eq!(
            parse(&Bytes::from_static(b"-ERR x\r\n")).unwrap().0,
            Value::Error("ERR x".into())
        );
    }
}
