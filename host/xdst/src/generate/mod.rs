//! The generation plane: where resources come from, and the one thread that makes them.
//!
//! - Input: [`source`] (a resources directory, `--resources`), [`intent`] (intent
//!   documents from files or the store's [`store::mirror`], translated by plugins on
//!   [`generations`], the one generation thread).
//! - Plugins: [`plugins`] (where they come from: a directory, a list in the configuration
//!   file, OCI registries and HTTPS, pulls, the store's elected resolver in
//!   [`store::plugins`]).
//! - The store: [`store`] (etcd: the intent mirror and its watch, writes, the fleet view).
//! - [`reload`]: the one reload, for `POST /reload` and SIGHUP.
//! - [`watcher`]: the watched directories, each change looked at path by path in the
//!   [`tree`] of what they hold.
//!
//! It publishes into the serving plane's cache ([`plane::Plane::serving`]) and reads only
//! which node groups are connected from it.

pub mod generations;
pub mod intent;
pub mod metrics;
pub mod plane;
pub mod plugins;
pub mod reload;
pub mod source;
pub mod store;
pub mod tree;
pub mod watcher;

use std::sync::{Arc, OnceLock};

use crate::generate::generations::Generations;
use crate::generate::intent::IntentSource;
use crate::generate::plane::Plane;
use crate::generate::source::SourceStatus;
use crate::generate::store::etcd::Etcd;
use crate::generate::store::plugins::HeldSet;

/// The generation plane's handle.
pub struct Generating {
    pub plane: Arc<Plane>,
    /// The resources directory's last load (`--resources`).
    pub source: Arc<SourceStatus>,
    /// The intent source, when serving intent with plugins.
    pub intent: Option<Arc<IntentSource>>,
    /// The one thread that runs intent generations (set once it started).
    pub generations: OnceLock<Generations>,
    /// The store intent comes from (`--store`), when not from files.
    pub store: Option<Arc<Etcd>>,
    /// The plugin set in the store (`--store` without --plugins or a plugins list): a reload
    /// asks the store's plugin leader to resolve it again.
    pub plugin_set: Option<Arc<HeldSet>>,
}

impl Generating {
    /// The serving plane it publishes to.
    pub fn serving(&self) -> &Arc<xdst_serve::Serving> {
        &self.plane.serving
    }
}
