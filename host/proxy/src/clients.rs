//! The proxy's own client list: what `CLIENT LIST`, `CLIENT INFO` and `INFO clients` show, and
//! what plugins may learn about a client. Written by sessions, read by anyone above them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;

/// Every open session of this proxy.
#[derive(Debug, Default)]
pub struct ClientRegistry {
    next_id: AtomicU64,
    clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

/// What the proxy knows about one session. Written by its session, read by `CLIENT LIST`.
#[derive(Debug)]
pub struct ClientInfo {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    created: Instant,
    /// Milliseconds since `created` at the last command batch.
    last_active_ms: AtomicU64,
    proto: AtomicU8,
    /// The client database it selected.
    db: AtomicU32,
    names: Mutex<Names>,
}

#[derive(Debug, Default, Clone)]
struct Names {
    name: Bytes,
    /// The user the session authenticated as (empty: none).
    user: Bytes,
    lib_name: Bytes,
    lib_ver: Bytes,
}

/// Removes the session from the registry when dropped.
#[derive(Debug)]
pub struct Registration {
    registry: Arc<ClientRegistry>,
    pub info: Arc<ClientInfo>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry
            .clients
            .lock()
            .expect("client registry lock poisoned")
            .remove(&self.info.id);
    }
}

impl ClientRegistry {
    pub fn register(self: &Arc<Self>, addr: SocketAddr, laddr: SocketAddr) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let info = Arc::new(ClientInfo {
            id,
            addr,
            laddr,
            created: Instant::now(),
            last_active_ms: AtomicU64::new(0),
            proto: AtomicU8::new(2),
            db: AtomicU32::new(0),
            names: Mutex::default(),
        });
        self.clients
            .lock()
            .expect("client registry lock poisoned")
            .insert(id, info.clone());
        Registration {
            registry: self.clone(),
            info,
        }
    }

    /// Whether client `id` is connected.
    pub fn contains(&self, id: u64) -> bool {
        self.clients
            .lock()
            .expect("client registry lock poisoned")
            .contains_key(&id)
    }

    pub fn len(&self) -> usize {
        self.clients
            .lock()
            .expect("client registry lock poisoned")
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The user client `id` runs as, if it is connected.
    pub fn user_of(&self, id: u64) -> Option<Bytes> {
        let info = self
            .clients
            .lock()
            .expect("client registry lock poisoned")
            .get(&id)
            .cloned()?;
        Some(info.user())
    }

    /// Facts of client `id`, if it is connected.
    pub fn facts(&self, id: u64) -> Option<tessera_wasm::ClientFacts> {
        let info = self
            .clients
            .lock()
            .expect("client registry lock poisoned")
            .get(&id)
            .cloned()?;
        Some(info.facts())
    }

    /// `CLIENT LIST` text: one line per session; only `user`'s sessions when given (what a
    /// user confined to a key prefix sees).
    pub fn list(&self, user: Option<&[u8]>) -> String {
        let clients: Vec<Arc<ClientInfo>> = self
            .clients
            .lock()
            .expect("client registry lock poisoned")
            .values()
            .cloned()
            .collect();
        clients
            .iter()
            .filter(|c| user.is_none_or(|u| c.user() == u))
            .map(|c| c.line() + "\n")
            .collect()
    }
}

impl ClientInfo {
    pub fn touch(&self) {
        self.last_active_ms
            .store(self.created.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    pub fn set_proto(&self, v: u8) {
        self.proto.store(v, Ordering::Relaxed);
    }

    /// The client database the session selected.
    pub fn db(&self) -> u32 {
        self.db.load(Ordering::Relaxed)
    }

    pub fn set_db(&self, db: u32) {
        self.db.store(db, Ordering::Relaxed);
    }

    pub fn name(&self) -> Bytes {
        self.names.lock().expect("names lock poisoned").name.clone()
    }

    /// The user the session runs as (`default` until it authenticates as another).
    pub fn user(&self) -> Bytes {
        let user = self.names.lock().expect("names lock poisoned").user.clone();
        if user.is_empty() {
            Bytes::from_static(tessera_model::users::DEFAULT_USER.as_bytes())
        } else {
            user
        }
    }

    pub fn set_user(&self, user: Bytes) {
        self.names.lock().expect("client names lock poisoned").user = user;
    }

    /// What plugins may learn about this client (the `client_info` import).
    pub fn facts(&self) -> tessera_wasm::ClientFacts {
        let n = self
            .names
            .lock()
            .expect("client names lock poisoned")
            .clone();
        let text = |b: &Bytes| (!b.is_empty()).then(|| String::from_utf8_lossy(b).into_owned());
        tessera_wasm::ClientFacts {
            addr: self.addr.to_string(),
            user: text(&n.user),
            name: text(&n.name),
            db: self.db.load(Ordering::Relaxed),
        }
    }

    pub fn set_name(&self, name: Bytes) {
        self.names.lock().expect("names lock poisoned").name = name;
    }

    pub fn set_lib(&self, lib_name: Option<Bytes>, lib_ver: Option<Bytes>) {
        let mut n = self.names.lock().expect("names lock poisoned");
        if let Some(v) = lib_name {
            n.lib_name = v;
        }
        if let Some(v) = lib_ver {
            n.lib_ver = v;
        }
    }

    /// One `CLIENT LIST` line, in Redis's field order (fields a proxy has no value for omitted).
    pub fn line(&self) -> String {
        let n = self.names.lock().expect("names lock poisoned").clone();
        let age = self.created.elapsed();
        let idle_ms =
            (age.as_millis() as u64).saturating_sub(self.last_active_ms.load(Ordering::Relaxed));
        format!(
            "id={} addr={} laddr={} name={} age={} idle={} flags=N db={} sub=0 psub=0 ssub=0 multi=-1 user={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            String::from_utf8_lossy(&n.name),
            age.as_secs(),
            idle_ms / 1000,
            self.db.load(Ordering::Relaxed),
            if n.user.is_empty() {
                "default".into()
            } else {
                String::from_utf8_lossy(&n.user)
            },
            self.proto.load(Ordering::Relaxed),
            String::from_utf8_lossy(&n.lib_name),
            String::from_utf8_lossy(&n.lib_ver),
        )
    }
}
