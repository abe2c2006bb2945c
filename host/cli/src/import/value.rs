//! What the RDB parser hands out: one [`Item`] at a time (a key with its value and expire
//! time, a database switch, a function library, an aux field). Values are plain collections;
//! `apply` turns them into commands.

/// A stream ID, `ms-seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    /// Its `ms-seq` text, as commands take it.
    pub fn text(&self) -> Vec<u8> {
        format!("{}-{}", self.ms, self.seq).into_bytes()
    }
}

/// One stream entry that is not deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEntry {
    pub id: StreamId,
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A pending entry of a consumer group.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub id: StreamId,
    /// Unix time of the last delivery, ms.
    pub delivery_time_ms: u64,
    pub delivery_count: u64,
}

/// A consumer of a group and the IDs it has pending.
#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    pub name: Vec<u8>,
    pub pending: Vec<StreamId>,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub name: Vec<u8>,
    pub last_id: StreamId,
    /// `None` in RDB files before streams kept it (version 10).
    pub entries_read: Option<u64>,
    pub pending: Vec<Pending>,
    pub consumers: Vec<Consumer>,
}

/// A stream with what makes it the same stream, not only the same entries.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stream {
    pub entries: Vec<StreamEntry>,
    pub last_id: StreamId,
    pub max_deleted_id: Option<StreamId>,
    pub entries_added: Option<u64>,
    pub groups: Vec<Group>,
}

/// A key's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    /// Members with their scores.
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    Stream(Box<Stream>),
}

impl Value {
    /// Redis's name of its type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Hash(_) => "hash",
            Value::Stream(_) => "stream",
        }
    }
}

/// A key of the dump.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub db: u64,
    pub key: Vec<u8>,
    /// Absolute expire time, Unix ms.
    pub expire_ms: Option<u64>,
    pub value: Value,
}

/// One thing the parser found, in file order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Aux {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// A function library's code (`FUNCTION LOAD` takes it as is).
    Function(Vec<u8>),
    Entry(Entry),
}
