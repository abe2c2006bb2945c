//! A plugin's canary: a candidate version (module and/or config, fail policy, limits) that a
//! chosen share of the proxies runs instead of the plugin's stable version, and the body that
//! starts or changes one. The entry a proxy runs and the metrics by track are `plugins`'.
//!
//! Which proxies run the candidate is decided from the catalog alone: a proxy is in the
//! canary when its client address is listed, or when a stable hash of that address, mod 100,
//! is below the percentage. Every proxy (one started later included) decides for itself from
//! the stored catalog, and the dashboard computes the same set to show it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The most proxy addresses a canary may list.
pub const MAX_CANARY_PROXIES: usize = 256;
/// The longest proxy address a canary may list (`host:port`).
pub const MAX_PROXY_ADDR: usize = 255;
/// The largest canary request body the dashboard reads (the candidate config included; the
/// whole catalog document stays under `MAX_CATALOG_BYTES`).
pub const MAX_CANARY_BODY: usize = 256 << 10;

/// The two versions a plugin may run at once.
pub const STABLE: &str = "stable";
pub const CANARY: &str = "canary";

/// A candidate version of a plugin and the proxies that run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PluginCanary {
    /// Of the candidate's module, hex (the stable one's when only the config changes).
    pub sha256: String,
    pub size: u64,
    pub config: serde_json::Value,
    /// `open` or `closed`.
    pub fail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_budget_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_kb: Option<usize>,
    /// The share of proxies that run it, 0–100 (by a hash of each proxy's address).
    #[serde(default)]
    pub percent: u8,
    /// Proxies (client addresses, `host:port`) that run it whatever the percentage.
    #[serde(default)]
    pub proxies: Vec<String>,
    pub started_unix: u64,
}

/// `POST /api/plugins/{name}/canary`: starts a canary, or changes the one running. Fields
/// left out keep the running canary's value, or, when none runs, the stable version's
/// (`percent` 0, no `proxies`). The module is the running canary's, the one of `sha256`
/// (uploaded with `PUT /api/plugins/{name}/canary/module`), or the stable one.
///
/// ```text
/// {"config": {"deny_commands": ["KEYS"]}, "percent": 50}
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CanaryStart {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_budget_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_kb: Option<usize>,
    /// 0–100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<u32>,
    /// At most 256 addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxies: Option<Vec<String>>,
}

/// FNV-1a of the address, mod 100: the proxy's place in a percentage (stable across
/// restarts and versions, the same in every process).
pub fn bucket_of(addr: &str) -> u8 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in addr.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % 100) as u8
}

impl PluginCanary {
    /// Whether the proxy whose client address is `addr` runs the candidate.
    pub fn selects(&self, addr: &str) -> bool {
        !addr.is_empty()
            && (self.proxies.iter().any(|p| p == addr) || bucket_of(addr) < self.percent)
    }

    /// Checks the share: percent 0–100, at most [`MAX_CANARY_PROXIES`] addresses of at most
    /// [`MAX_PROXY_ADDR`] bytes, none empty.
    ///
    /// # Errors
    /// Why, in the operator's words.
    pub fn check_share(percent: u32, proxies: &[String]) -> Result<(), String> {
        if percent > 100 {
            return Err(format!("percent must be 0 to 100, not {percent}"));
        }
        if proxies.len() > MAX_CANARY_PROXIES {
            return Err(format!(
                "{} proxy addresses: a canary lists at most {MAX_CANARY_PROXIES}",
                proxies.len()
            ));
        }
        if let Some(p) = proxies.iter().find(|p| {
            p.is_empty() || p.len() > MAX_PROXY_ADDR || p.chars().any(char::is_whitespace)
        }) {
            let shown: String = p.chars().take(40).collect();
            return Err(format!(
                "proxy address {shown:?} is not a host:port (1 to {MAX_PROXY_ADDR} bytes, no spaces)"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A canary of a module `b` with config `{"v": 2}` (also the catalog's tests').
    pub(crate) fn canary(percent: u8, proxies: &[&str]) -> PluginCanary {
        PluginCanary {
            sha256: "b".into(),
            size: 2,
            config: serde_json::json!({"v": 2}),
            fail: "open".into(),
            cpu_budget_ms: None,
            memory_mb: None,
            max_input_kb: None,
            percent,
            proxies: proxies.iter().map(|s| (*s).to_owned()).collect(),
            started_unix: 0,
        }
    }

    #[test]
    fn the_share_is_a_stable_hash_of_the_address() {
        // Fixed values: every process (dashboard, proxies, older or newer) must agree.
        assert_eq!(bucket_of(""), (0xcbf2_9ce4_8422_2325u64 % 100) as u8);
        let addrs: Vec<String> = (0..1000)
            .map(|i| format!("10.0.{}.{}:6379", i / 256, i % 256))
            .collect();
        let at_50 = addrs.iter().filter(|a| canary(50, &[]).selects(a)).count();
        assert!((400..=600).contains(&at_50), "{at_50} of 1000 at 50 %");
        assert!(addrs.iter().all(|a| canary(100, &[]).selects(a)));
        assert!(!addrs.iter().any(|a| canary(0, &[]).selects(a)));
        // A larger share keeps every proxy a smaller one had.
        assert!(
            addrs
                .iter()
                .filter(|a| canary(20, &[]).selects(a))
                .all(|a| canary(30, &[]).selects(a))
        );
        assert!(canary(0, &["127.0.0.1:1"]).selects("127.0.0.1:1"));
        assert!(!canary(0, &["127.0.0.1:1"]).selects("127.0.0.1:2"));
        assert!(
            !canary(100, &[]).selects(""),
            "a proxy without an address runs stable"
        );
    }

    #[test]
    fn a_share_out_of_bounds_is_refused_with_the_reason() {
        assert!(PluginCanary::check_share(100, &[]).is_ok());
        assert!(
            PluginCanary::check_share(101, &[])
                .unwrap_err()
                .contains("0 to 100")
        );
        let many = vec!["a:1".to_owned(); MAX_CANARY_PROXIES + 1];
        assert!(
            PluginCanary::check_share(0, &many)
                .unwrap_err()
                .contains("at most")
        );
        let long = vec!["a".repeat(MAX_PROXY_ADDR + 1)];
        assert!(PluginCanary::check_share(0, &long).is_err());
        assert!(PluginCanary::check_share(0, &[String::new()]).is_err());
    }
}
