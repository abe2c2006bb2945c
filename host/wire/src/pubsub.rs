//! What one proxy asks another about its subscribers (`POST /api/proxy/pubsub/counts`), so
//! that `PUBLISH` and `PUBSUB NUMSUB` through any proxy count clients, not the proxies' own
//! subscriber connections (docs/pubsub.md, "What counts mean").

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The most names one question may carry (`PUBSUB NUMSUB` with more asks in several).
pub const MAX_COUNTED_NAMES: usize = 1024;

/// Which names to count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubCountsQuery {
    /// Shard channels (`SSUBSCRIBE`) rather than channels.
    #[serde(default)]
    pub shard: bool,
    /// Each channel name, hex-encoded (names are bytes); 1 to 1024 of them.
    pub names_hex: Vec<String>,
    /// Add, to each channel's count, those of the patterns it matches (what a `PUBLISH`
    /// reaches). Ignored for shard channels.
    #[serde(default)]
    pub patterns: bool,
}

/// One name's subscriptions through the proxy that answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SubCount {
    /// Subscriptions its hubs hold on the servers (one per worker thread that has a
    /// subscriber).
    pub hubs: u64,
    /// Clients subscribed (with `patterns`: subscriptions, a client subscribed to the channel
    /// and a matching pattern counting twice, as Redis counts a `PUBLISH`'s receivers).
    pub clients: u64,
}

/// The counts, in the order of the names asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SubCounts {
    pub counts: Vec<SubCount>,
}
