//! Table ids that name the same table: the ids earlier Sibyl builds gave the
//! system tables, and the ones they have now (Cassandra's). A mutation read
//! from a commit log, a hint, a batch or another node that names a table by
//! an old id is applied to the table under its current id.
//!
//! Set once at start-up by the node ([`set_aliases`]); empty until then.

use std::collections::HashMap;
use std::sync::OnceLock;

static ALIASES: OnceLock<HashMap<uuid::Uuid, uuid::Uuid>> = OnceLock::new();

/// Installs old id → current id; later calls are ignored (the map is the
/// same for every node of a process).
pub fn set_aliases(aliases: HashMap<uuid::Uuid, uuid::Uuid>) {
    let _ = ALIASES.set(aliases);
}

/// The current id of the table `id` names.
pub fn canonical(id: uuid::Uuid) -> uuid::Uuid {
    ALIASES
        .get()
        .and_then(|m| m.get(&id).copied())
        .unwrap_or(id)
}

/// Every old id → current id pair (none until [`set_aliases`]).
pub fn aliases() -> impl Iterator<Item = (uuid::Uuid, uuid::Uuid)> {
    ALIASES
        .get()
        .into_iter()
        .flat_map(|m| m.iter().map(|(a, b)| (*a, *b)))
}
