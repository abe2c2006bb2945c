//! The cluster's mirror document in the store: written by the dashboard, pushed to every
//! proxy, read by a proxy when it starts (so one started later mirrors too).

use tessera_wire::mirror::MirrorDoc;

use crate::model::{self, Paths};
use crate::{Store, StoreError};

/// Where a cluster keeps its mirror document.
pub fn store_key(paths: &Paths) -> String {
    format!("{}mirror", paths.cluster_prefix())
}

/// The cluster's mirror document (the default, off, when there is none).
///
/// # Errors
/// The store fails, or the document is not a mirror document.
pub async fn read_doc(store: &dyn Store, paths: &Paths) -> Result<MirrorDoc, StoreError> {
    Ok(model::read::<MirrorDoc>(store, &store_key(paths))
        .await?
        .map(|(d, _)| d)
        .unwrap_or_default())
}
