//! `tessera openapi`: the OpenAPI document of one of Tessera's HTTP APIs, derived from the
//! code (the handlers' `#[utoipa::path]` and the `tessera-wire` shapes). One document per
//! server, because each answers its own routes (`/health` and `/api/audit` mean different
//! things on a dashboard and on the console). `docs/openapi*.json` are this command's output;
//! the test below fails when one is out of date.

use clap::ValueEnum;

/// Which server's API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Api {
    /// A cluster's dashboard (`tessera dashboard`), as served at `/api/openapi.json`.
    Dashboard,
    /// A proxy's admin API (`--admin-listen`).
    Proxy,
    /// The federation console, its own routes and every dashboard route it relays.
    Console,
}

/// The document, as pretty JSON with a final newline.
pub(crate) fn document(api: Api) -> String {
    let doc = match api {
        Api::Dashboard => tessera_control::api::document(),
        Api::Proxy => tessera_proxy::admin::document(),
        Api::Console => tessera_console::openapi::document(&tessera_control::api::document()),
    };
    tessera_http::openapi::to_json(&doc)
}

// Where the committed copies live and how to write them: only the test needs to know.
#[cfg(test)]
impl Api {
    const ALL: [Api; 3] = [Api::Dashboard, Api::Proxy, Api::Console];

    /// Where the committed copy lives, from the repository's root.
    fn committed(self) -> &'static str {
        match self {
            Api::Dashboard => "docs/openapi.json",
            Api::Proxy => "docs/openapi-proxy.json",
            Api::Console => "docs/openapi-console.json",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Api::Dashboard => "dashboard",
            Api::Proxy => "proxy",
            Api::Console => "console",
        }
    }

    /// The command that writes the committed copy.
    fn regenerate(self) -> String {
        format!(
            "cargo run -q -p tessera -- openapi --api {} > {}",
            self.name(),
            self.committed()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_documents_are_the_derived_ones() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for api in Api::ALL {
            let derived = document(api);
            let path = root.join(api.committed());
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            if committed == derived {
                continue;
            }
            let line = committed
                .lines()
                .zip(derived.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| committed.lines().count().min(derived.lines().count()));
            panic!(
                "{} is not the document the code derives (first difference at line {}): \
                 regenerate it with `{}` and commit it",
                api.committed(),
                line + 1,
                api.regenerate()
            );
        }
    }

    #[test]
    fn every_operation_is_named_tagged_summarized_and_carries_the_role_it_needs() {
        let v: serde_json::Value = serde_json::from_str(&document(Api::Dashboard)).unwrap();
        let mut ids = Vec::new();
        let mut role = std::collections::BTreeMap::new();
        for (path, item) in v["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let id = op["operationId"].as_str();
                assert!(id.is_some(), "{method} {path} has no operationId");
                assert!(op["tags"][0].is_string(), "{method} {path} has no tag");
                assert!(op["summary"].is_string(), "{method} {path} has no summary");
                ids.push(id.unwrap().to_owned());
                role.insert(
                    format!("{} {path}", method.to_uppercase()),
                    op["x-tessera-role"].as_str().map(str::to_owned),
                );
            }
        }
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "operation ids repeat");
        // The roles docs/api.md names, as the document gives them.
        for (op, needs) in [
            ("GET /health", None),
            ("GET /api/openapi.json", None),
            ("GET /api/overview", Some("viewer")),
            ("GET /api/tokens", Some("admin")),
            ("GET /api/commandlog", Some("operator")),
            ("POST /api/migrations", Some("operator")),
            ("PUT /api/plugins/{name}/config", Some("operator")),
            ("POST /api/groups", Some("admin")),
            ("PUT /api/users/{name}", Some("admin")),
        ] {
            assert_eq!(role.get(op), Some(&needs.map(str::to_owned)), "{op}");
        }
    }
}
