//! Incremental translation for a plugin (contract 0.4.0, design 020): what a plugin keeps
//! between the calls of its instance.
//!
//! [`World`] holds every document the host has given the instance, and says what a call
//! changed: a full call (`request.changes` is `None`) replaces the world, a changes call updates
//! it with the documents sent and drops the ids removed. [`Outputs`] holds what the plugin last
//! returned, so a plugin that computes a (whole or partial) output can hand back only what
//! differs: the resources new or changed, and the keys of those gone.
//!
//! ```
//! use xdst_guest::world::{Outputs, World, by_document};
//! use xdst_guest::*;
//!
//! # fn cluster_of(d: &IntentDocument) -> XdsResource { unimplemented!() }
//! // Kept in the instance (a `thread_local!` in a plugin): the host keeps it between calls.
//! fn translate(world: &mut World, outputs: &mut Outputs, request: &TranslateRequest) -> TranslateResponse {
//!     let changed = world.apply(request);
//!     // Translate what the change reaches; here every document maps to one resource.
//!     let reached: Vec<XdsResource> = changed.changed.iter().filter_map(|id| world.get(id)).map(cluster_of).collect();
//!     let (resources, removed) = outputs.update(&changed, reached, by_document);
//!     TranslateResponse { resources, removed, diagnostics: vec![], statuses: vec![] }
//! }
//! ```

use std::collections::{BTreeMap, BTreeSet};

use crate::{IntentDocument, ResourceKey, TranslateRequest, XdsResource};

/// The documents an instance has been given, by id (`Kind/name`, `Kind/namespace/name`).
#[derive(Debug, Default, Clone)]
pub struct World {
    docs: BTreeMap<String, IntentDocument>,
}

/// What one call changed in the [`World`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changed {
    /// A full call: everything kept before is stale, and every document is in `changed`.
    pub full: bool,
    /// The ids of the documents new or changed.
    pub changed: Vec<String>,
    /// The ids of the documents gone.
    pub removed: Vec<String>,
}

impl World {
    /// Takes in a call's documents (see the module's notes) and says what changed.
    pub fn apply(&mut self, request: &TranslateRequest) -> Changed {
        let full = request.changes.is_none();
        let mut removed = Vec::new();
        if full {
            let now: BTreeSet<String> = request.documents.iter().map(IntentDocument::id).collect();
            removed = self.docs.keys().filter(|k| !now.contains(*k)).cloned().collect();
            self.docs.clear();
        } else if let Some(changes) = &request.changes {
            for id in &changes.removed {
                if self.docs.remove(id).is_some() {
                    removed.push(id.clone());
                }
            }
        }
        let mut changed = Vec::with_capacity(request.documents.len());
        for d in &request.documents {
            let id = d.id();
            changed.push(id.clone());
            self.docs.insert(id, d.clone());
        }
        Changed { full, changed, removed }
    }

    /// The document `id`, as last given.
    pub fn get(&self, id: &str) -> Option<&IntentDocument> {
        self.docs.get(id)
    }

    /// Every document, by id.
    pub fn documents(&self) -> impl Iterator<Item = &IntentDocument> {
        self.docs.values()
    }

    /// The documents of `kind`, by id.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a IntentDocument> + 'a {
        self.docs.values().filter(move |d| d.kind == kind)
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

/// The document a resource names as its own (`XdsResource::document`): what [`Outputs::update`]
/// takes as `origin` when every resource names its document.
pub fn by_document(r: &XdsResource) -> Option<&str> {
    r.document.as_deref()
}

/// What the plugin last returned, by (type URL, name), with the document each came from.
#[derive(Debug, Default, Clone)]
pub struct Outputs {
    held: BTreeMap<(String, String), XdsResource>,
}

impl Outputs {
    /// Takes in the resources a call made for the documents it reached (`reached`: every
    /// resource of those documents; `origin` says which document a resource came from) and
    /// returns what to answer: the resources new or changed, and the keys of those gone. On a
    /// full call, `reached` is everything; on a changes call, a resource of a document that was
    /// reached (or removed) and is not in `reached` is gone, and one of a document not reached
    /// stays as it was.
    pub fn update(
        &mut self,
        changed: &Changed,
        reached: Vec<XdsResource>,
        origin: impl Fn(&XdsResource) -> Option<&str>,
    ) -> (Vec<XdsResource>, Vec<ResourceKey>) {
        let touched: BTreeSet<&str> = changed.changed.iter().chain(&changed.removed).map(String::as_str).collect();
        let mut now: BTreeMap<(String, String), XdsResource> = BTreeMap::new();
        for r in reached {
            now.insert((r.type_url.clone(), r.name.clone()), r);
        }
        let mut removed = Vec::new();
        self.held.retain(|key, r| {
            let stays = !changed.full && origin(r).is_none_or(|d| !touched.contains(d)) || now.contains_key(key);
            if !stays {
                removed.push(ResourceKey { type_url: key.0.clone(), name: key.1.clone() });
            }
            stays
        });
        let mut answer = Vec::new();
        for (key, r) in now {
            if self.held.get(&key) != Some(&r) {
                answer.push(r.clone());
            }
            self.held.insert(key, r);
        }
        (answer, removed)
    }

    /// Everything held, as a full call would return it.
    pub fn all(&self) -> impl Iterator<Item = &XdsResource> {
        self.held.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Body, Changes};

    fn doc(name: &str, port: u32) -> IntentDocument {
        IntentDocument {
            kind: "S".into(),
            name: name.into(),
            origin: "t".into(),
            json: format!(r#"{{"kind":"S","metadata":{{"name":"{name}"}},"spec":{{"port":{port}}}}}"#),
        }
    }

    fn request(docs: Vec<IntentDocument>, removed: Option<Vec<&str>>) -> TranslateRequest {
        TranslateRequest {
            node_group: String::new(),
            documents: docs,
            resources: vec![],
            config: "null".into(),
            changes: removed.map(|r| Changes { removed: r.into_iter().map(str::to_owned).collect() }),
        }
    }

    fn resource(d: &IntentDocument) -> XdsResource {
        XdsResource {
            type_url: "t".into(),
            name: d.name.clone(),
            body: Body::Json(d.json.clone()),
            document: Some(d.id()),
            node_groups: vec![],
        }
    }

    fn names(rs: &[XdsResource]) -> Vec<&str> {
        rs.iter().map(|r| r.name.as_str()).collect()
    }

    /// A full call, a changes call with one document changed and one removed, a changes call
    /// changing nothing the output shows, then a full call that drops what it does not give.
    #[test]
    fn the_world_and_the_outputs_follow_each_call() {
        let (mut world, mut outputs) = (World::default(), Outputs::default());
        let reach = |world: &World, changed: &Changed| -> Vec<XdsResource> {
            changed.changed.iter().filter_map(|id| world.get(id)).map(resource).collect()
        };
        let origin = by_document;

        let c = world.apply(&request(vec![doc("a", 1), doc("b", 1), doc("c", 1)], None));
        assert!(c.full && c.changed.len() == 3);
        let (answer, removed) = outputs.update(&c, reach(&world, &c), origin);
        assert_eq!((names(&answer), removed.len()), (vec!["a", "b", "c"], 0));

        let c = world.apply(&request(vec![doc("b", 2)], Some(vec!["S/c"])));
        assert_eq!(c, Changed { full: false, changed: vec!["S/b".into()], removed: vec!["S/c".into()] });
        let (answer, removed) = outputs.update(&c, reach(&world, &c), origin);
        assert_eq!(names(&answer), ["b"]);
        assert_eq!(removed, [ResourceKey { type_url: "t".into(), name: "c".into() }]);
        assert_eq!(outputs.all().count(), 2);

        let c = world.apply(&request(vec![doc("a", 1)], Some(vec![])));
        let (answer, removed) = outputs.update(&c, reach(&world, &c), origin);
        assert!(answer.is_empty() && removed.is_empty(), "a document given again as it was changes nothing");

        let c = world.apply(&request(vec![doc("a", 1)], None));
        assert_eq!(c.removed, ["S/b"]);
        let (answer, removed) = outputs.update(&c, reach(&world, &c), origin);
        assert!(answer.is_empty(), "a is as it was");
        assert_eq!(removed, [ResourceKey { type_url: "t".into(), name: "b".into() }]);
        assert_eq!(world.len(), 1);
    }
}
