//! A resource as one node is offered it when some documents are held at that node: the new
//! form, with those documents' parts as the node last accepted them.
//!
//! When an Envoy rejects a response, xdst keeps out, at that node only, the parts of the
//! documents the rejection is blamed on, and serves every other document's change (design
//! note 016, part 3a). A resource splits into documents' parts as [`crate::blame`] splits it:
//! a message marked `metadata.filter_metadata.xdst.document` is that document's part, without
//! the marked parts inside it (the innermost mark wins), and what no mark covers is the
//! owner's (the root's own mark, else the document the resource is attributed to).
//!
//! [`revert`] composes the target's form (`now`) with the form the node holds (`base`):
//!
//! - If the owner is reverted, the result is `base` as it is, or [`Reverted::Absent`] when the
//!   node holds none: the other parts cannot stand without the owner's.
//! - Otherwise each reverted document's parts are taken out of `now`, at any depth, and its
//!   parts in `base` are put back in the same places. Another document's part stays as `now`
//!   has it, reverted parts inside it included the same way; inside a part put back, the parts
//!   of documents not reverted are `now`'s.
//! - A place is the path of fields down to the part. An element of a list is known by its mark
//!   and its `name` (the first, second... of that mark and name in its list): an unnamed one by
//!   its position among the elements with the same mark. A map entry is known by its key. A part
//!   whose container is not in the result is dropped.
//! - In a list, a part put back goes after the element it followed in `base` (found by name,
//!   else as an equal message), and never before a part put back earlier: a document keeps
//!   the order of its routes, and another document's new routes stay where `now` has them.
//! - A singular field or a map entry put back replaces what `now` has there.
//! - The message packed in an `Any` is composed the same way, then packed again.
//! - The result is encoded with [`crate::canonical::encode`]: reverting documents that are in
//!   neither form gives `now`'s canonical bytes.
//!
//! [`part_digests`] tells whether a document's parts differ between two forms.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use prost::Message as _;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value};
use sha2::{Digest as _, Sha256};

use crate::blame::{content, mark};

/// SHA-256 of a document's parts in a resource, each part's canonical encoding in order.
pub type Digest = [u8; 32];

/// Each document's parts of a resource (as [`crate::blame`] splits them) as one digest per
/// document: equal digests, equal content. `None` when the body, or an `Any` in it, does not
/// decode.
pub fn part_digests(type_url: &str, body: &[u8], owner: Option<&str>) -> Option<BTreeMap<String, Digest>> {
    content(type_url, body, owner)?
        .into_iter()
        .map(|(doc, parts)| {
            let mut h = Sha256::new();
            for part in &parts {
                let bytes = crate::canonical::encode(part).ok()?;
                h.update((bytes.len() as u64).to_le_bytes());
                h.update(&bytes);
            }
            Some((doc, h.finalize().into()))
        })
        .collect()
}

/// What [`revert`] composed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reverted {
    /// The composed resource's canonical bytes ([`crate::canonical::encode`]).
    Body(Vec<u8>),
    /// The node is not to be served this resource: its owner is reverted and the node holds
    /// none of this name.
    Absent,
}

/// `now` (the resource as the target has it) with the parts of every document in `docs` as
/// they are in `base` (the form the node holds; `None`: it holds none of this name). The
/// owner is the document `now`'s root is marked with, else `owner` (the document the resource
/// is attributed to). `None` when `now` or `base` (or an `Any` in them) does not decode.
pub fn revert(
    type_url: &str,
    now: &[u8],
    base: Option<&[u8]>,
    owner: Option<&str>,
    docs: &BTreeSet<String>,
) -> Option<Reverted> {
    let desc = crate::descriptors::message_for_type_url(type_url)?;
    let mut now = DynamicMessage::decode(desc.clone(), now).ok()?;
    let base = match base {
        Some(bytes) => Some(DynamicMessage::decode(desc, bytes).ok()?),
        None => None,
    };
    let owner = mark(&now).or_else(|| owner.map(str::to_owned));
    if owner.is_some_and(|o| docs.contains(&o)) {
        return match base {
            Some(base) => crate::canonical::encode(&base).ok().map(Reverted::Body),
            None => Some(Reverted::Absent),
        };
    }
    if !docs.is_empty() {
        Compose { docs }.region(&mut now, base.as_ref(), Side::Now);
    }
    crate::canonical::encode(&now).ok().map(Reverted::Body)
}

/// Which form a part is taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Now,
    Base,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Now => Side::Base,
            Side::Base => Side::Now,
        }
    }
}

/// The message in a slot of a resource, opened: through an `Any`, the message packed in it.
enum Slot {
    Plain(DynamicMessage),
    Packed {
        any: DynamicMessage,
        inner: DynamicMessage,
    },
    /// An `Any` whose type is unknown or whose bytes do not decode: kept as it is.
    Opaque(DynamicMessage),
}

impl Slot {
    fn open(msg: DynamicMessage) -> Slot {
        if !is_any(&msg) {
            return Slot::Plain(msg);
        }
        match unpacked(&msg) {
            Some(inner) => Slot::Packed { any: msg, inner },
            None => Slot::Opaque(msg),
        }
    }

    /// The message marks and names are read from; `None` for an opaque `Any`.
    fn message(&self) -> Option<&DynamicMessage> {
        match self {
            Slot::Plain(m) | Slot::Packed { inner: m, .. } => Some(m),
            Slot::Opaque(_) => None,
        }
    }

    /// The slot's message as it was.
    fn close(self) -> DynamicMessage {
        match self {
            Slot::Plain(m) | Slot::Packed { any: m, .. } | Slot::Opaque(m) => m,
        }
    }
}

fn is_any(msg: &DynamicMessage) -> bool {
    msg.descriptor().full_name() == "google.protobuf.Any"
}

/// The message packed in `any`, if its type is known and its bytes decode.
fn unpacked(any: &DynamicMessage) -> Option<DynamicMessage> {
    let type_url = any.get_field_by_number(1)?;
    let desc = crate::descriptors::message_for_type_url(type_url.as_str()?)?;
    let value = any.get_field_by_number(2)?;
    DynamicMessage::decode(desc, value.as_bytes()?.clone()).ok()
}

/// [`Slot::message`] of a borrowed message.
fn view(msg: &DynamicMessage) -> Option<Cow<'_, DynamicMessage>> {
    if is_any(msg) { unpacked(msg).map(Cow::Owned) } else { Some(Cow::Borrowed(msg)) }
}

/// Whether a message field holds messages (a map: as its values).
fn holds_messages(field: &FieldDescriptor) -> bool {
    match field.kind() {
        Kind::Message(entry) if field.is_map() => entry.map_entry_value_field().kind().as_message().is_some(),
        Kind::Message(_) => true,
        _ => false,
    }
}

/// How an element of a list is known in the other form: its mark, its name (empty when it has
/// none) and how many elements before it in its list have the same mark and name.
type Key = (Option<String>, String, usize);

/// How an element of a list is found as a neighbour in the other form: by its name, else as an
/// equal message (its canonical bytes); with how many before it in its list are found the same
/// way.
type Neighbour = (Found, usize);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Found {
    Named(String),
    Equal(Vec<u8>),
}

fn name_of(msg: &DynamicMessage) -> String {
    msg.get_field_by_name("name").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// The [`Key`] of each message of a list (`None`: an opaque `Any`).
fn keys<'a>(msgs: impl Iterator<Item = Option<&'a DynamicMessage>>) -> Vec<Key> {
    let mut seen: HashMap<(Option<String>, String), usize> = HashMap::new();
    msgs.map(|m| {
        let id = m.map(|m| (mark(m), name_of(m))).unwrap_or_default();
        let n = seen.entry(id.clone()).or_default();
        *n += 1;
        (id.0, id.1, *n - 1)
    })
    .collect()
}

/// The [`Neighbour`] of each message of a list (`None`: an opaque `Any`).
fn neighbours<'a>(msgs: impl Iterator<Item = Option<&'a DynamicMessage>>) -> Vec<Option<Neighbour>> {
    let mut seen: HashMap<Found, usize> = HashMap::new();
    msgs.map(|m| {
        let m = m?;
        let name = name_of(m);
        let found = if name.is_empty() { Found::Equal(crate::canonical::encode(m).ok()?) } else { Found::Named(name) };
        let n = seen.entry(found.clone()).or_default();
        *n += 1;
        Some((found, *n - 1))
    })
    .collect()
}

/// `other`, if it is a message of `msg`'s type.
fn same_type<'a>(msg: Option<&DynamicMessage>, other: Option<&'a DynamicMessage>) -> Option<&'a DynamicMessage> {
    other.filter(|o| msg.is_some_and(|m| m.descriptor() == o.descriptor()))
}

/// One composition: which documents are reverted.
struct Compose<'a> {
    docs: &'a BTreeSet<String>,
}

impl Compose<'_> {
    /// The form a message marked `doc` is taken from, inside a part taken from `region`: its
    /// document's, when it is marked; the part's own, when not.
    fn taken_from(&self, doc: Option<&str>, region: Side) -> Side {
        match doc {
            Some(doc) if self.docs.contains(doc) => Side::Base,
            Some(_) => Side::Now,
            None => region,
        }
    }

    /// Composes `msg`, a message taken from `side`, with `other`, the same message in the other
    /// form (if it has it): the parts inside `msg` that belong to the other form are taken out,
    /// and the other form's are put in.
    fn region(&self, msg: &mut DynamicMessage, other: Option<&DynamicMessage>, side: Side) {
        let mut fields: Vec<FieldDescriptor> = msg.fields().map(|(f, _)| f).filter(holds_messages).collect();
        for (f, _) in other.into_iter().flat_map(DynamicMessage::fields) {
            if !fields.contains(&f) && holds_messages(&f) {
                fields.push(f);
            }
        }
        for field in fields {
            let theirs = other.filter(|o| o.has_field(&field)).map(|o| o.get_field(&field));
            let theirs = theirs.as_deref();
            let mine = msg.take_field(&field);
            let out = if field.is_map() {
                let mine = match mine {
                    Some(Value::Map(map)) => map,
                    _ => HashMap::new(),
                };
                let map = self.map(mine, theirs.and_then(Value::as_map), side);
                (!map.is_empty()).then_some(Value::Map(map))
            } else if field.is_list() {
                let mine = match mine {
                    Some(Value::List(list)) => list,
                    _ => Vec::new(),
                };
                let list = self.list(mine, theirs.and_then(Value::as_list).unwrap_or(&[]), side);
                (!list.is_empty()).then_some(Value::List(list))
            } else {
                let mine = match mine {
                    Some(Value::Message(m)) => Some(m),
                    _ => None,
                };
                self.slot(mine, theirs.and_then(Value::as_message), side).map(Value::Message)
            };
            if let Some(value) = out {
                msg.set_field(&field, value);
            }
        }
    }

    /// A singular field or a map entry: `mine` unless it belongs to the other form, replaced by
    /// `theirs` when that does.
    fn slot(
        &self,
        mine: Option<DynamicMessage>,
        theirs: Option<&DynamicMessage>,
        side: Side,
    ) -> Option<DynamicMessage> {
        let mine = mine.map(Slot::open);
        let my_view = mine.as_ref().and_then(Slot::message);
        let their_view = theirs.and_then(view);
        let (my_mark, their_mark) = (my_view.and_then(mark), their_view.as_deref().and_then(mark));
        let same_mark = my_mark == their_mark;
        if let Some(theirs) = theirs.filter(|_| self.taken_from(their_mark.as_deref(), side) != side) {
            let cp = same_type(their_view.as_deref(), my_view).filter(|_| same_mark);
            return Some(self.descend(Slot::open(theirs.clone()), cp, side.other()));
        }
        if self.taken_from(my_mark.as_deref(), side) != side {
            return None;
        }
        let cp = same_type(my_view, their_view.as_deref()).filter(|_| same_mark);
        Some(self.descend(mine?, cp, side))
    }

    /// [`Compose::slot`] for each key of a map.
    fn map(
        &self,
        mine: HashMap<MapKey, Value>,
        theirs: Option<&HashMap<MapKey, Value>>,
        side: Side,
    ) -> HashMap<MapKey, Value> {
        let theirs_of = |k: &MapKey| theirs.and_then(|t| t.get(k)).and_then(Value::as_message);
        let only_theirs: Vec<&MapKey> =
            theirs.into_iter().flatten().map(|(k, _)| k).filter(|k| !mine.contains_key(k)).collect();
        let mut out = HashMap::with_capacity(mine.len());
        for (k, v) in mine {
            let Value::Message(m) = v else {
                out.insert(k, v);
                continue;
            };
            if let Some(m) = self.slot(Some(m), theirs_of(&k), side) {
                out.insert(k, Value::Message(m));
            }
        }
        for k in only_theirs {
            if let Some(m) = self.slot(None, theirs_of(k), side) {
                out.insert(k.clone(), Value::Message(m));
            }
        }
        out
    }

    /// A list: `mine` without the elements that belong to the other form, with the other
    /// form's put back after the neighbours they followed there.
    fn list(&self, mine: Vec<Value>, theirs: &[Value], side: Side) -> Vec<Value> {
        let mine: Vec<Slot> = mine
            .into_iter()
            .filter_map(|v| match v {
                Value::Message(m) => Some(Slot::open(m)),
                _ => None,
            })
            .collect();
        let their_views: Vec<Option<Cow<'_, DynamicMessage>>> =
            theirs.iter().map(|v| v.as_message().and_then(view)).collect();
        let their_keys = keys(their_views.iter().map(|t| t.as_deref()));
        let my_keys = keys(mine.iter().map(Slot::message));
        let put_back: Vec<bool> = their_keys.iter().map(|k| self.taken_from(k.0.as_deref(), side) != side).collect();
        let stays: Vec<bool> = my_keys.iter().map(|k| self.taken_from(k.0.as_deref(), side) == side).collect();
        let their_index: HashMap<&Key, usize> = their_keys.iter().enumerate().map(|(j, k)| (k, j)).collect();
        // Where the other form's parts go is only worked out when there are some.
        let any_put_back = put_back.contains(&true);
        let my_neighbours: HashMap<Neighbour, usize> = if any_put_back {
            let staying = mine.iter().zip(&stays).filter(|(_, s)| **s).map(|(m, _)| m.message());
            neighbours(staying).into_iter().enumerate().filter_map(|(i, n)| Some((n?, i))).collect()
        } else {
            HashMap::new()
        };

        let mut kept = Vec::with_capacity(mine.len());
        let mut taken_out: HashMap<&Key, DynamicMessage> = HashMap::new();
        for ((slot, key), stays) in mine.into_iter().zip(&my_keys).zip(stays) {
            if !stays {
                if let (true, Some(m)) = (any_put_back, slot.message()) {
                    taken_out.insert(key, m.clone());
                }
                continue;
            }
            let cp = their_index.get(key).and_then(|&j| same_type(slot.message(), their_views[j].as_deref()));
            kept.push(Value::Message(self.descend(slot, cp, side)));
        }
        if !any_put_back {
            return kept;
        }

        // Walk the other form's list with a cursor into the kept elements: a neighbour found
        // moves it to just after itself (never back), a part put back goes in at it.
        let staying = their_views.iter().zip(&put_back).filter(|(_, p)| !**p).map(|(t, _)| t.as_deref());
        let mut their_neighbours = neighbours(staying).into_iter();
        let mut cursor = 0;
        let mut placed: Vec<(usize, Value)> = Vec::new();
        for (j, value) in theirs.iter().enumerate() {
            if !put_back[j] {
                if let Some(i) = their_neighbours.next().flatten().and_then(|n| my_neighbours.get(&n)) {
                    cursor = cursor.max(i + 1);
                }
                continue;
            }
            let Some(m) = value.as_message() else { continue };
            let cp = same_type(their_views[j].as_deref(), taken_out.get(&their_keys[j]));
            placed.push((cursor, Value::Message(self.descend(Slot::open(m.clone()), cp, side.other()))));
        }
        let mut out = Vec::with_capacity(kept.len() + placed.len());
        let mut placed = placed.into_iter().peekable();
        for (i, value) in kept.into_iter().enumerate() {
            while let Some((_, v)) = placed.next_if(|(at, _)| *at <= i) {
                out.push(v);
            }
            out.push(value);
        }
        out.extend(placed.map(|(_, v)| v));
        out
    }

    /// The message in `slot`, taken from `side`, composed with `other` (see [`Compose::region`])
    /// and packed again if it was in an `Any`. A message equal to its other form is its own
    /// composition: the parts taken out would go back where they were.
    fn descend(&self, slot: Slot, other: Option<&DynamicMessage>, side: Side) -> DynamicMessage {
        if other.is_some() && slot.message() == other {
            return slot.close();
        }
        match slot {
            Slot::Plain(mut m) => {
                self.region(&mut m, other, side);
                m
            }
            Slot::Packed { mut any, mut inner } => {
                self.region(&mut inner, other, side);
                any.set_field_by_number(2, Value::Bytes(inner.encode_to_vec().into()));
                any
            }
            Slot::Opaque(any) => any,
        }
    }
}

#[cfg(test)]
#[path = "revert_tests.rs"]
mod tests;
