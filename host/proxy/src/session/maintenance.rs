//! Maintenance notifications (`CLIENT MAINT_NOTIFICATIONS`, Redis 8's handshake): a RESP3
//! client that asked is told, by a `MOVING` push, when the proxy starts to drain, that this
//! connection will go away and where to connect instead: the address it connected to, where a
//! successor started with `--reuse-port` takes new connections. The session then keeps serving
//! it until the client moves (it closes this connection once its commands in flight are
//! answered), or for at most [`MOVING_GRACE`], and closes at a command boundary. A client that
//! did not ask is closed at its next command boundary, as before (docs/operations.md).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tessera_model::error::DataError;
use tessera_resp::{Frame, Proto, Request};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::{End, Session};

/// How long after a `MOVING` a session still serves its client.
pub(super) const MOVING_GRACE: Duration = Duration::from_secs(10);
/// The push's "after" field, in seconds: when the client should have moved (half the grace,
/// which is also when a client that asked for no endpoint reconnects).
const MOVING_AFTER_S: u64 = 5;

/// The push sequence, one per process (clients tell pushes apart by it).
static SEQ: AtomicU64 = AtomicU64::new(0);
/// When the first `MOVING` of this process was sent: every session's grace ends
/// [`MOVING_GRACE`] after it (a process drains once; kept here, not per session, which is
/// paid for by every idle connection).
static DRAIN_STARTED: OnceLock<Instant> = OnceLock::new();

/// What the client asked for, and where the session is with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Maint {
    Off,
    /// Asked for; `endpoint`: the push names the address to reconnect to (any
    /// `moving-endpoint-type` but `none`).
    On {
        endpoint: bool,
    },
    /// `MOVING` sent: the session serves until the client goes, or until the grace ends.
    Moving,
}

impl Maint {
    /// The end of the grace after a `MOVING`.
    pub(super) fn moving_until(self) -> Option<Instant> {
        match self {
            Maint::Moving => Some(*DRAIN_STARTED.get_or_init(Instant::now) + MOVING_GRACE),
            _ => None,
        }
    }
}

impl Session {
    /// `CLIENT MAINT_NOTIFICATIONS ON|OFF [moving-endpoint-type TYPE]`.
    pub(super) fn maint_notifications(&mut self, req: &Request) -> Result<Frame, DataError> {
        let on = match req.arg(2).to_ascii_uppercase().as_slice() {
            b"ON" => true,
            b"OFF" => false,
            _ => return Err(DataError::Syntax),
        };
        let mut endpoint = true;
        let mut i = 3;
        while i < req.argc() {
            if !req.arg(i).eq_ignore_ascii_case(b"moving-endpoint-type") || i + 1 >= req.argc() {
                return Err(DataError::Syntax);
            }
            endpoint = match req.arg(i + 1).to_ascii_lowercase().as_slice() {
                b"internal-ip" | b"internal-fqdn" | b"external-ip" | b"external-fqdn" => true,
                b"none" => false,
                _ => {
                    return Err(DataError::Invalid(
                        "moving-endpoint-type must be internal-ip, internal-fqdn, external-ip, \
                         external-fqdn or none"
                            .into(),
                    ));
                }
            };
            i += 2;
        }
        if on && self.proto != Proto::Resp3 {
            return Err(DataError::Invalid(
                "maintenance notifications are RESP3 pushes: switch with HELLO 3 first".into(),
            ));
        }
        if self.maint != Maint::Moving {
            self.maint = if on {
                Maint::On { endpoint }
            } else {
                Maint::Off
            };
        }
        Ok(Frame::ok())
    }

    /// The proxy started to drain. A client that asked is sent `MOVING` and served on, within
    /// the grace; any other is closed now (`Err`).
    pub(super) async fn stopping(&mut self) -> Result<(), End> {
        let Maint::On { endpoint } = self.maint else {
            return Err(End::Shutdown);
        };
        // Where it connected: a successor bound there with `--reuse-port` takes the new
        // connection.
        let to = endpoint.then(|| self.reg.info.laddr.to_string());
        let push = moving(SEQ.fetch_add(1, Ordering::Relaxed) + 1, to.as_deref());
        DRAIN_STARTED.get_or_init(Instant::now);
        self.maint = Maint::Moving;
        self.worker
            .shared
            .stats
            .moving_sent
            .fetch_add(1, Ordering::Relaxed);
        match self.stream.write_all(&push).await {
            Ok(()) => Ok(()),
            Err(e) => Err(End::Io(e)),
        }
    }
}

/// `>4 MOVING seq after endpoint` (the endpoint `host:port`, or null).
fn moving(seq: u64, to: Option<&str>) -> Vec<u8> {
    let mut b = format!(">4\r\n$6\r\nMOVING\r\n:{seq}\r\n:{MOVING_AFTER_S}\r\n").into_bytes();
    match to {
        Some(to) => b.extend_from_slice(format!("${}\r\n{to}\r\n", to.len()).as_bytes()),
        None => b.extend_from_slice(b"_\r\n"),
    }
    b
}

#[cfg(test)]
mod tests {
    use super::moving;

    #[test]
    fn a_moving_push_names_the_endpoint_or_null() {
        assert_eq!(
            moving(7, Some("127.0.0.1:6379")),
            b">4\r\n$6\r\nMOVING\r\n:7\r\n:5\r\n$14\r\n127.0.0.1:6379\r\n"
        );
        assert_eq!(moving(1, None), b">4\r\n$6\r\nMOVING\r\n:1\r\n:5\r\n_\r\n");
    }
}
