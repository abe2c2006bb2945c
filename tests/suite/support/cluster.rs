//! `Cluster`: two fresh redis-servers with a tessera proxy in front, the common test fixture.

use super::{Proxy, ProxyBuilder, RedisServer, backend_of};

/// Two backends (slots 0–511 on `backends[0]`, 512–1023 on `backends[1]`) behind one proxy.
pub(crate) struct Cluster {
    pub(crate) backends: [RedisServer; 2],
    pub(crate) proxy: Proxy,
}

impl Cluster {
    /// Two backends behind a proxy with the default config.
    pub(crate) fn start() -> Cluster {
        Cluster::start_with(|b| b)
    }

    /// Two backends behind a proxy with `toml` as its config file.
    pub(crate) fn with_config(toml: &str) -> Cluster {
        Cluster::start_with(|b| b.config(toml))
    }

    /// Two backends behind a proxy built with extra options.
    pub(crate) fn start_with(options: impl FnOnce(ProxyBuilder) -> ProxyBuilder) -> Cluster {
        Cluster::start_on(&[], options)
    }

    /// Two backends started with `redis_args` besides the usual ones (`--databases 17`),
    /// behind a proxy built with extra options.
    pub(crate) fn start_on(
        redis_args: &[&str],
        options: impl FnOnce(ProxyBuilder) -> ProxyBuilder,
    ) -> Cluster {
        let backends = [
            RedisServer::start_with(redis_args),
            RedisServer::start_with(redis_args),
        ];
        let proxy = options(Proxy::builder(&[&backends[0], &backends[1]])).start();
        Cluster { backends, proxy }
    }

    /// The backend that owns `key`'s slot.
    pub(crate) fn owner_of(&self, key: &str) -> &RedisServer {
        &self.backends[backend_of(key, 2)]
    }

    /// The backend that does not own `key`'s slot.
    pub(crate) fn non_owner_of(&self, key: &str) -> &RedisServer {
        &self.backends[1 - backend_of(key, 2)]
    }
}

/// A hash tag (without braces) whose keys all live on backend `index` of two.
pub(crate) fn tag_on(index: usize) -> String {
    super::keys_on(index, "tag", 1).remove(0)
}
